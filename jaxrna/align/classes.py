"""Length classes of the pure-JAX alignment path (CPU, and any backend without Pallas).

Issue 26: a job compiles a few programs fixed in advance. A pair goes to the class of its
shorter side (the sweep's lanes) and longer side (the arrays' width); inside a class the lengths
are runtime values: :func:`jaxrna.kernels.wavefront.batch_sweep` runs the antidiagonals its
batch needs, so padding a pair to its class costs memory, not steps. Every class has a fixed
row count (:func:`cpu_rows`; a last batch is topped up with 1 x 1 pairs), and the scores and
penalties are runtime values of the same programs (:func:`jaxrna.align.recurrence.params_of`).

Bounds, for any mix of lengths up to 10,240 nt and any scores and penalties:

* score only: at most 8 classes, each compiled in int32 and, for batches whose longest path fits
  int16 (:func:`jaxrna.align.recurrence.fits_int16`: ``(h + longest + 2) * max|score| < 8192``),
  in int16: 2 variants at most, int16 only for lanes classes ``h < 8190 / max|score|`` (3
  classes with the default scores);
* with alignments: at most 12 classes (the 4 narrowest lanes classes in two widths), int32 only.

Each further static switch is an option class, not a number: the mode (global, local; global
with end gaps scored apart), and whether the scores are a match/mismatch scheme (on the letters
used) or a full matrix lookup.

>>> cpu_rows(64, 10240, True), cpu_rows(4096, 10240, False)
(128, 2)
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
#: runs the antidiagonals its batch needs), so for any mix of lengths up to 10,240 nt a job
#: compiles at most 8 classes when scoring only (each in int32 and, for batches whose longest
#: path fits int16 under the job's scores, :func:`jaxrna.align.recurrence.fits_int16`, in
#: int16: only lanes classes below ``8190 / max|score|``, 3 of them with the default scores)
#: and at most 12 with alignments (always int32: int16 gains nothing there).
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

