"""Length classes of the pure-JAX alignment path (CPU, and any backend without Pallas).

Issue 26: a job compiles a few programs fixed in advance. A pair goes to the class of its
shorter side (the sweep's lanes) and longer side (the arrays' width); inside a class the lengths
are runtime values: :func:`jaxrna.kernels.wavefront.batch_sweep` runs the antidiagonals its
batch needs, so padding a pair to its class costs memory, not steps. Every class has a fixed
row count (:func:`cpu_rows`; a last batch is topped up with 1 x 1 pairs), and the scores and
penalties are runtime values of the same programs (:func:`jaxrna.align.recurrence.params_of`).

The ladder, for any mix of lengths up to 10,240 nt and any scores and penalties:

* score only: 8 classes, each compiled in int32 and, for batches whose longest path fits
  int16 (:func:`jaxrna.align.recurrence.fits_int16`: ``(h + longest + 2) * max|score| < 8192``),
  in int16: 2 variants at most, int16 only for lanes classes ``h < 8190 / max|score|`` (3
  classes with the default scores): 15 programs at most on the ladder;
* with alignments: 12 classes (the 4 narrowest lanes classes in two widths), int32 only.

One run uses at most 8 of these programs, variants counted (:mod:`jaxrna.align.budget`): a run
that meets more has its classes joined onto larger ones of the same ladder and its int16
batches folded into int32 where that costs least, so :mod:`jaxrna.align.warmup` still prepares
every program it can use.

Each further static switch is an option class, not a number: the mode (global, local; global
with end gaps scored apart), and whether the scores are a match/mismatch scheme (on the letters
used) or a full matrix lookup.

>>> cpu_rows(64, 10240, True), cpu_rows(4096, 10240, False)
(128, 2)

GPU (the Pallas lane kernels, one pair per lane, whose loops run to the longest pair of each
128-lane program: :func:`jaxrna.kernels.wavefront.pallas_scores`,
:func:`~jaxrna.kernels.wavefront_packed.packed_scores`,
:func:`~jaxrna.kernels.wavefront.lanes_align`): padding a pair to its class costs memory and
host-to-device bytes, not steps, and a batch topped up with empty rows costs almost nothing,
so every class has one fixed row count, large enough to fill the device:

* score only (:func:`gpu_score_class`, :func:`gpu_score_rows`): squares ``(H, H)`` and wide
  classes ``(H, min(4 H, 10240))`` for ``H`` in :data:`CPU_LANES` (the pair takes the class of
  fewest codes that holds it): :data:`GPU_SCORE_CLASSES` = 15 classes for any mix up
  to 10,240 nt, each compiled in two variants at most (int16x2 packed for batches whose
  values fit, :func:`~jaxrna.kernels.wavefront_packed.packed_ok` on the batch's longest sides
  under the job's scores, else int32): 30 programs on the ladder, and for the same reason as
  the CPU's int16 variant (a batch of short pairs in a wide class still packs); fewer than
  512 pairs of a class whose shorter side is 2,048 nt or more go one at a time through the
  tile wavefront. Powers of two,
  not a finer ladder: a pair padded to its class costs codes moved to the device (up to twice
  its own), not cells computed, and midpoints would double the classes;
* with alignments (:func:`gpu_square`, :func:`gpu_lanes_rows`): squares of a power of two
  from 128 (the kernel's ``min_side``) while the direction bits of one 128-lane program fit
  ``GPU_DIRS_BYTES``: 128 ... 2,048, 5 classes; longer pairs take the CPU classes above in
  the pure-JAX ``batch_align`` (9 of them up to 10,240 nt), beyond 10,240 nt the
  checkpointed traceback of the record path (:func:`jaxrna.align.api.align_records`).

Here too one run uses at most 8 programs (:mod:`jaxrna.align.budget`), variants, tile
wavefront shapes and ``batch_align`` classes counted.

>>> h, w = gpu_score_class(np.array([50, 200, 1000, 600]), np.array([60, 1000, 1000, 2000]))
>>> list(zip(h.tolist(), w.tolist()))
[(64, 64), (256, 1024), (1024, 1024), (2048, 2048)]
>>> gpu_score_rows(1024, 1024), gpu_score_rows(64, 64), gpu_lanes_rows(512, 128, 1 << 36)
(32768, 524288, 4096)
"""

from __future__ import annotations

import numpy as np

from jaxrna.batching import bucket_length

#: Direction bits per batch (bytes) of the batched traceback.
DIRS_BUDGET = 512 << 20
#: CPU (pure-JAX sweep): the length classes. A pair's shorter side picks the lanes ``h`` (the
#: smallest entry >= it; beyond the last, multiples of 1024 as
#: :func:`jaxrna.batching.bucket_length`), its longer side the width ``w``: the last entry
#: (score only: the width sizes arrays only), or with alignments ``CPU_WIDE * h`` where
#: ``h <= CPU_NARROW_UP_TO`` and the longer side fits (the direction bits of a batch are
#: allocated for its whole width). The lengths inside a class are runtime values (the sweep
#: runs the antidiagonals its batch needs), so for any mix of lengths up to 10,240 nt the
#: ladder holds 8 classes when scoring only (each in int32 and, for batches whose longest
#: path fits int16 under the job's scores, :func:`jaxrna.align.recurrence.fits_int16`, in
#: int16: only lanes classes below ``8190 / max|score|``, 3 of them with the default scores)
#: and 12 with alignments (always int32: int16 gains nothing there); one run uses at most 8
#: programs of them (:mod:`jaxrna.align.budget`).
CPU_LANES = (64, 128, 256, 512, 1024, 2048, 4096, 10240)
CPU_WIDE = 8
CPU_NARROW_UP_TO = 512
#: CPU: lanes (pairs x h) per batch; a class's batch rows are fixed: this over h, a power of
#: two (at least 1), and for alignments within the direction bits' budget.
CPU_BATCH_LANES = 1 << 13


def cpu_class(short: np.ndarray, long_: np.ndarray, score_only: bool
              ) -> tuple[np.ndarray, np.ndarray]:
    """``(h, w)``: the CPU length class of pairs (see :data:`CPU_LANES`).

    >>> h, w = cpu_class(np.array([20, 300, 3000]), np.array([100, 5000, 3000]), False)
    >>> h.tolist(), w.tolist()
    ([64, 512, 4096], [512, 10240, 10240])
    """
    short, long_ = np.maximum(short, 1), np.maximum(long_, 1)
    ladder = np.asarray(CPU_LANES, np.int64)
    top = int(ladder[-1])
    idx = np.searchsorted(ladder, short)
    beyond = lambda v: np.array([bucket_length(int(x)) for x in v.tolist()],  # noqa: E731
                                np.int64).reshape(v.shape)
    h = ladder[np.minimum(idx, len(ladder) - 1)]
    if (idx >= len(ladder)).any():
        h = np.where(idx >= len(ladder), beyond(short), h)
    w = np.full(h.shape, top, np.int64)
    if not score_only:
        narrow = (h <= CPU_NARROW_UP_TO) & (long_ <= h * CPU_WIDE)
        w = np.where(narrow, h * CPU_WIDE, w)
    if (long_ > w).any():
        w = np.where(long_ > w, beyond(long_), w)
    return h, np.maximum(w, h)


def cpu_rows(h: int, w: int, score_only: bool) -> int:
    """The fixed batch rows of a CPU class."""
    rows = max(1, CPU_BATCH_LANES // h)
    if not score_only:
        rows = min(rows, max(1, DIRS_BUDGET // ((h + w) * h)))
    return 1 << (rows.bit_length() - 1)



#: GPU, score only: a pair's class is the one of fewest codes (``H + W``) holding it, among
#: squares ``(H, H)`` and wide classes ``(H, GPU_WIDE * H)`` (at most the last lanes class)
#: for ``H`` in :data:`CPU_LANES`; beyond 10,240 nt, squares of the next multiple of 1,024.
GPU_WIDE = 4
#: GPU, score only: codes per batch (rows x (H + W)); a class's rows are this over ``H + W``,
#: a power of two between GPU_MIN_ROWS and GPU_MAX_ROWS (128-lane programs; kernels with
#: fewer lanes, the interpret-mode tests, scale them by (lanes / 128) ** 2).
GPU_SCORE_BYTES = 1 << 26
GPU_MIN_ROWS = 512
GPU_MAX_ROWS = 1 << 19
GPU_LANES_PER_PROGRAM = 128


def _gpu_table() -> tuple[np.ndarray, np.ndarray]:
    top = CPU_LANES[-1]
    out = set()
    for h in CPU_LANES:
        out.add((h, h))
        out.add((h, min(GPU_WIDE * h, top) if h < top else h))
    pairs = sorted(out, key=lambda hw: (hw[0] + hw[1], hw[1]))
    return (np.array([a for a, _ in pairs], np.int64), np.array([b for _, b in pairs], np.int64))


_GPU_H, _GPU_W = _gpu_table()
#: The score-only GPU classes up to 10,240 nt, fewest codes first.
GPU_SCORE_CLASSES = tuple(zip(_GPU_H.tolist(), _GPU_W.tolist()))


def gpu_score_class(short: np.ndarray, long_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(h, w)``: the score-only GPU class of pairs (see :data:`GPU_WIDE`)."""
    short, long_ = np.maximum(np.asarray(short), 1), np.maximum(np.asarray(long_), 1)
    h = np.zeros(short.shape, np.int64)
    w = np.zeros(short.shape, np.int64)
    for a in range(0, short.size, 1 << 16):      # pairs x classes, in blocks
        s, g = short.reshape(-1)[a:a + (1 << 16)], long_.reshape(-1)[a:a + (1 << 16)]
        fits = (_GPU_H[None, :] >= s[:, None]) & (_GPU_W[None, :] >= g[:, None])
        first = np.argmax(fits, axis=1)
        ok = fits[np.arange(len(s)), first]
        side = np.array([bucket_length(int(max(x, y))) for x, y in
                         zip(s[~ok].tolist(), g[~ok].tolist())], np.int64)
        hh, ww = _GPU_H[first], _GPU_W[first]
        hh[~ok], ww[~ok] = side, side
        h.reshape(-1)[a:a + len(s)], w.reshape(-1)[a:a + len(s)] = hh, ww
    return h, w


def _scale(rows: int, lanes: int, floor: int) -> int:
    """``rows`` for programs of ``lanes`` lanes (budgets are set for 128), a power of two of
    at least ``floor``."""
    if lanes < GPU_LANES_PER_PROGRAM:
        rows = rows * lanes * lanes // (GPU_LANES_PER_PROGRAM * GPU_LANES_PER_PROGRAM)
    rows = max(floor, rows)
    return 1 << (rows.bit_length() - 1)


def gpu_score_rows(h: int, w: int, limit: int = 0, lanes: int = GPU_LANES_PER_PROGRAM) -> int:
    """The fixed batch rows of a score-only GPU class (a power of two, a multiple of two
    programs of ``lanes``: the packed kernel's words hold two pairs); ``limit``: the device
    memory allowed (bytes; 0: none), about 64 bytes per code of a batch."""
    rows = min(GPU_MAX_ROWS, GPU_SCORE_BYTES // (h + w))
    if limit:
        rows = min(rows, max(1, limit // (64 * (h + w))))
    floor = max(2 * lanes, GPU_MIN_ROWS * lanes // GPU_LANES_PER_PROGRAM)
    return _scale(1 << (max(1, rows).bit_length() - 1), lanes, floor)


#: GPU, with alignments: direction-bit bytes of one batch (at most), and its pairs at most.
GPU_DIRS_BYTES = 1 << 30
GPU_MAX_PAIRS = 8192


def gpu_square(n: int, min_side: int = 128, strip: int = 8) -> int:
    """The square side of the alignments GPU class of a pair whose longer side is ``n``: a
    power of two of at least ``min_side``, rounded up to a multiple of ``strip``."""
    s = max(min_side, 1 << max(0, int(n) - 1).bit_length())
    return -(-s // strip) * strip


def gpu_lanes_fit(s: int, lanes: int = GPU_LANES_PER_PROGRAM) -> bool:
    """Whether a square class's direction bits fit one batch (else: the record path)."""
    return s * s * lanes <= GPU_DIRS_BYTES


def gpu_lanes_rows(s: int, lanes: int = GPU_LANES_PER_PROGRAM, limit: int = 0) -> int:
    """The fixed batch rows of a square alignments GPU class: as many pairs as the direction
    bits' budget allows (at most GPU_MAX_PAIRS, and a quarter of the device memory
    ``limit``), a multiple of ``lanes``."""
    cap = max(lanes, min(GPU_MAX_PAIRS, GPU_DIRS_BYTES // (s * s)) // lanes * lanes)
    if limit:
        cap = min(cap, max(lanes, (limit // 4) // (s * s) // lanes * lanes))
    if lanes < GPU_LANES_PER_PROGRAM:
        cap = max(lanes, cap * lanes // GPU_LANES_PER_PROGRAM * lanes
                  // GPU_LANES_PER_PROGRAM // lanes * lanes)
    return cap


def gpu_classes(max_length: int, score_only: bool, min_side: int = 128, strip: int = 8,
                lanes: int = GPU_LANES_PER_PROGRAM) -> list[tuple[int, int]]:
    """The ``(h, w)`` GPU classes that pairs of up to ``max_length`` nt may meet: score only,
    those of :func:`gpu_score_class`; with alignments, the squares of :func:`gpu_square` that
    fit a batch (:func:`gpu_lanes_fit`; longer pairs take the record path).

    >>> len(gpu_classes(10_240, True)), gpu_classes(10_240, False)[-1], len(gpu_classes(300, True))
    (15, (2048, 2048), 6)
    """
    top = max(1, int(max_length))
    if not score_only:
        out, s = [], gpu_square(1, min_side, strip)
        while s <= gpu_square(top, min_side, strip) and gpu_lanes_fit(s, lanes):
            out.append((s, s))
            s = gpu_square(s + 1, min_side, strip)
        return out
    edges = {1, top}                         # the class of a pair changes only at these lengths
    for h, w in GPU_SCORE_CLASSES:
        edges.update((h, h + 1, w, w + 1))
    cand = np.array(sorted(v for v in edges if v <= top), np.int64)
    a, b = np.meshgrid(cand, cand, indexing="ij")
    keep = a <= b
    h, w = gpu_score_class(a[keep], b[keep])
    return sorted(set(zip(h.tolist(), w.tolist())))
