"""A bulk alignment run's programs: at most :data:`PROGRAM_BUDGET` for any input (issue 26).

:class:`~jaxrna.align.device_runner.DeviceRunner` puts each pair in a fixed length class of
:mod:`jaxrna.align.classes` and a variant (CPU score only: int16 or int32 lanes; GPU score only:
two pairs per 32-bit lane, "packed", or one); each (kind, class, variant) is one program, kinds
being ``scores``, ``align`` (the pure-JAX ``batch_align``), ``lanes`` (GPU alignments) and
``tile`` (few long GPU score-only pairs, one at a time through the tile wavefront). Before the
first chunk, :func:`plan_run` looks at every pair of the run (by distinct length pair,
:func:`length_pairs`) and counts the programs the per-batch choices would use: a class whose
pairs all fit the small variant together counts one, one where none fits alone counts one,
else the batches are simulated as the runner makes them (a run of one chunk) or it counts two;
tile pairs count one per padded shape. A run within the budget keeps all of that, unchanged.
A run over it gets a *serving map*: every pair's (kind, class, variant) is served by one of at
most :data:`PROGRAM_BUDGET` programs, chosen by :func:`jaxrna.class_budget.merge_to_budget`
(greedy joins of least extra cost) over keys

    ``(kind, h, w, small, smax, lmax, pairs, steps, cells)``

where ``small`` is the run-level variant of the key's pairs (:func:`split_small`: each pair by
its class's lanes and its longer side, so every batch of such pairs fits), ``smax`` x ``lmax``
their longest sides and the rest their totals. The join of two keys is the class of the
longest sides of both (:func:`_join`: on the class ladders, so :mod:`jaxrna.align.warmup`
still prepares every program a run can use; a CPU ``batch_align`` class serves GPU square
pairs, a lanes class serves tile pairs, never the other way round), small only if both were
and the joined sides still fit (:meth:`Rule.fits`). Results are unchanged: inside a class the
lengths are runtime values, and the int32 program computes what the small one would.

The cost of a join is the extra work it adds, per pair (:class:`Cost`; the keys carry their
totals, so a join's extra is exact for this model):

* CPU (the vmapped pure-JAX sweep): every step of the sweep computes the class's ``h`` lanes
  of a pair and runs to the batch's needed antidiagonals (about the pair's own ``m + n``,
  batches being sorted by size), so a pair's compute is ``h * (m + n)`` lane steps (halved in
  int16: twice the lanes per vector); padding the width costs no steps, only the class's
  bytes: ``h + w`` codes, with alignments ``(h + w) * h`` direction bytes written and read
  back; one byte counts :data:`CPU_BYTE` lane steps.
* GPU (the Pallas lane kernels, one pair per lane, which run to each program's longest pair):
  padding costs no steps; a pair's compute is its own ``m * n`` cells (halved when packed;
  long pairs fewer than ``TILED_MAX_PAIRS`` on the lanes leave the device idle, by that
  ratio) and its class costs bytes: ``h + w`` codes copied to the device, or with alignments
  ``s * s`` direction bytes of the square (which also bound the rows per batch); one byte
  counts :data:`GPU_BYTE` cells (H100: about 2.5e11 cells/s against 2.5e10 bytes/s to the
  device). ``batch_align`` of longer alignments on the GPU: ``h * (m + n)`` lane steps and
  ``(h + w) * h`` bytes, as on the CPU.

>>> from jaxrna.align.scoring import match_mismatch
>>> rule = Rule(match_mismatch(1, -1, 2, 1), pallas=False)
>>> keys = [("scores", 64, 10240, True, 60, 60, 5, 600, 18000),
...         ("scores", 128, 10240, True, 100, 100, 5, 1000, 50000),
...         ("scores", 256, 10240, False, 200, 9000, 1, 9200, 1800000)]
>>> m = merge_keys(keys, 2, rule, Cost("cpu"))
>>> sorted(set(k[:4] for k in m.values()))
[('scores', 128, 10240, True), ('scores', 256, 10240, False)]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jaxrna.class_budget import merge_to_budget

#: Programs one run compiles at most (issue 26), whatever the lengths and numeric options.
PROGRAM_BUDGET = 8
#: CPU: lane steps one byte of a class's arrays costs (a lane step of the sweep is a few int32
#: operations on three states; a byte is written once and read once).
CPU_BYTE = 1 / 8
#: GPU: cells one byte costs (device cells per second over host-to-device bytes per second).
GPU_BYTE = 10.0
#: Distinct (query, target) length pairs looked at exactly; beyond, lengths are rounded up to a
#: multiple of 16 (every class edge is one), which only makes the variants more cautious.
EXACT_COMBOS = 1 << 22

KINDS = ("scores", "align", "lanes")


def length_pairs(qlen: np.ndarray, tlen: np.ndarray, zip_pairs: bool
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(m, n, count)``: the distinct (query, target) length pairs of a run and how many pairs
    have them (all pairs, or the i-th with the i-th).

    >>> m, n, c = length_pairs(np.array([3, 5, 3]), np.array([7, 7]), False)
    >>> m.tolist(), n.tolist(), c.tolist()
    ([3, 5], [7, 7], [4, 2])
    """
    qlen, tlen = np.asarray(qlen, np.int64), np.asarray(tlen, np.int64)
    if zip_pairs:
        k = min(len(qlen), len(tlen))
        both = np.stack([qlen[:k], tlen[:k]], axis=1)
        if not k:
            return (np.zeros(0, np.int64),) * 3
        uniq, count = np.unique(both, axis=0, return_counts=True)
        return uniq[:, 0], uniq[:, 1], count.astype(np.int64)
    uq, cq = np.unique(qlen, return_counts=True)
    ut, ct = np.unique(tlen, return_counts=True)
    if len(uq) * len(ut) > EXACT_COMBOS:
        return length_pairs(-(-qlen // 16) * 16, -(-tlen // 16) * 16, False)
    m, n = np.meshgrid(uq, ut, indexing="ij")
    return m.reshape(-1), n.reshape(-1), np.outer(cq, ct).reshape(-1).astype(np.int64)


@dataclass(frozen=True)
class Cost:
    """The per-pair cost of a key ``(kind, h, w, small, smax, lmax, pairs, steps, cells)``
    (``steps``, ``cells``: the sums of ``m + n`` and ``m * n`` over its pairs; see the module
    docstring). :func:`~jaxrna.class_budget.merge_to_budget` weighs it by the pairs of each
    group joined, so a join's extra cost is exact: the class's bytes per pair, and the
    compute of the pairs it serves (their steps or cells, over its lanes and variant)."""

    backend: str                 # "cpu" (the pure-JAX sweep) or "gpu" (the Pallas plan)

    def __call__(self, key: tuple) -> float:
        kind, h, w, small = key[:4]
        pairs, steps, cells = max(key[6], 1), key[7], key[8]
        half = 0.5 if small else 1.0
        if self.backend == "cpu":
            nbytes = (h + w) * (h if kind == "align" else 1)
            return h * half * steps / pairs + CPU_BYTE * nbytes
        if kind == "lanes":
            return cells / pairs + GPU_BYTE * h * w
        if kind == "align":             # the pure-JAX sweep on the device: h lanes per step
            return h * steps / pairs + GPU_BYTE * (h + w) * h
        if kind == "tile":              # one pair at a time over the whole device
            return cells / pairs + GPU_BYTE * (h + w)
        # one pair per lane: fewer long pairs than TILED_MAX_PAIRS leave the device idle
        from jaxrna.align.api import TILED_MAX_PAIRS, TILED_MIN_LENGTH

        idle = TILED_MAX_PAIRS / pairs if key[4] >= TILED_MIN_LENGTH and \
            pairs < TILED_MAX_PAIRS else 1.0
        return half * cells / pairs * idle + GPU_BYTE * (h + w)


class Rule:
    """The classes and variants of one run's plan: ``pallas`` (the GPU plan: score-only
    classes :func:`~jaxrna.align.classes.gpu_score_class`, alignments squares
    :func:`~jaxrna.align.classes.gpu_square` of ``square`` options and the CPU classes of
    longer pairs) or the CPU's (:func:`~jaxrna.align.classes.cpu_class`); the small variant of
    a class for pairs whose longest sides ``smax`` x ``lmax`` fit: CPU score only, int16 where
    :func:`~jaxrna.align.recurrence.fits_int16` holds for the class's lanes, GPU score only,
    two pairs per lane where :func:`~jaxrna.kernels.wavefront_packed.packed_ok` holds (a
    batch's kernel checks its own longest sides, at most these)."""

    def __init__(self, scoring, pallas: bool, square: tuple[int, int] = (128, 8)) -> None:
        self.scoring, self.pallas, self.square = scoring, pallas, square

    def cls(self, kind: str, smax: int, lmax: int) -> tuple[int, int]:
        from jaxrna.align import classes as cl

        if kind == "lanes":
            s = cl.gpu_square(lmax, *self.square)
            return s, s
        if kind in ("scores", "tile") and self.pallas:
            h, w = cl.gpu_score_class(np.array([smax]), np.array([lmax]))
        else:
            h, w = cl.cpu_class(np.array([smax]), np.array([lmax]), kind == "scores")
        return int(h[0]), int(w[0])

    def fits(self, kind: str, h: int, smax: int, lmax: int) -> bool:
        if kind != "scores":
            return False
        smax, lmax = max(int(smax), 1), max(int(lmax), 1)
        if self.pallas:
            from jaxrna.kernels.wavefront_packed import packed_ok

            return packed_ok(self.scoring, smax + 64, lmax)
        from jaxrna.align.recurrence import fits_int16

        return fits_int16(self.scoring, h, lmax)


def _join(rule: Rule, a: tuple, b: tuple) -> tuple:
    """The key serving the pairs of keys ``a`` and ``b``: the class of their longest sides
    (a CPU class serves GPU square pairs too, not the other way round), small if both were and
    still fit."""
    smax, lmax = max(a[4], b[4]), max(a[5], b[5])
    kind = a[0] if a[0] == b[0] else "scores" if "scores" in (a[0], b[0]) else "align"
    h, w = rule.cls(kind, smax, lmax)
    small = bool(a[3] and b[3] and rule.fits(kind, h, smax, lmax))
    return (kind, h, w, small, smax, lmax, a[6] + b[6], a[7] + b[7], a[8] + b[8])


def merge_keys(keys: list, budget: int, rule, cost: Cost) -> dict:
    """:func:`~jaxrna.class_budget.merge_to_budget` over keys ``(kind, h, w, small, smax,
    lmax, pairs, steps, cells)`` weighed by their pairs; returns key -> serving key, with at
    most ``budget`` distinct programs ``key[:4]``. Groups that end on the same program count
    once: the least merging (the most groups) that still fits the budget is kept."""
    order = {k: float(k[6]) for k in sorted(keys)}
    join = lambda a, b: _join(rule, a, b)  # noqa: E731
    best = merge_to_budget(order, budget, join, cost)
    for groups in range(budget + 1, len(order)):
        serve = merge_to_budget(order, groups, join, cost)
        if len({v[:4] for v in serve.values()}) <= budget:
            best = serve
    return best


def split_small(rule: Rule, kind: np.ndarray, h: np.ndarray, l: np.ndarray) -> np.ndarray:
    """Per pair (kind, lanes class ``h``, longer side ``l``): whether it goes to its class's
    small variant when the run is over budget: its class's lanes (at most ``h``, at most
    ``l``) and its longer side fit, so any batch of such pairs fits."""
    kind, h, l = np.asarray(kind), np.asarray(h, np.int64), np.maximum(np.asarray(l, np.int64), 1)
    out = np.zeros(len(h), bool)
    scores = kind == "scores"
    if not scores.any():
        return out
    trip = np.stack([h[scores], l[scores]], axis=1)
    uniq, at = np.unique(trip, axis=0, return_inverse=True)
    ok = np.array([rule.fits("scores", int(a), min(int(a), int(b)), int(b)) for a, b in uniq])
    out[scores] = ok[np.asarray(at).reshape(-1)]
    return out


@dataclass
class RunPlan:
    """What a run's plan may compile: ``possible``, the programs today's per-batch variants
    could use; ``serve`` None (within the budget: per-batch variants, as always) or
    (kind, h, w, small) -> the (kind, h, w, small) program serving those pairs; ``programs``:
    the (kind, h, w, small) the run may use (``small`` None: either, per batch)."""

    possible: int
    serve: dict | None
    programs: list


def plan_run(kind: np.ndarray, h: np.ndarray, w: np.ndarray, s: np.ndarray, l: np.ndarray,
             count: np.ndarray, rule: Rule, cost: Cost, budget: int = PROGRAM_BUDGET,
             tile_shapes: int = 0, exact=None) -> RunPlan:
    """The plan of a run whose distinct pairs (shorter side ``s``, longer ``l``, ``count``
    pairs each) have classes ``(kind, h, w)`` (see the module docstring). Kind ``"tile"``:
    few long pairs of a GPU class, one at a time through the tile wavefront, whose programs
    within the budget are ``tile_shapes`` (one per padded shape of its pairs), over it one per
    class. ``exact(kind, h, w)``: where given, the variants (a set of bools) the batches of a
    class whose pairs may go either way will use (the runner's batches, simulated)."""
    kind = np.asarray(kind)
    s, l = np.maximum(np.asarray(s, np.int64), 1), np.maximum(np.asarray(l, np.int64), 1)
    h, w = np.asarray(h, np.int64), np.asarray(w, np.int64)
    count = np.asarray(count, np.int64)
    names = KINDS + ("tile",)
    code = np.zeros(len(h), np.int64)
    for i, name in enumerate(names):
        code[kind == name] = i

    def groups(*cols):
        """The distinct rows of ``cols`` and, per element, its row."""
        uniq, at = np.unique(np.stack(cols, axis=1), axis=0, return_inverse=True)
        return uniq, np.asarray(at).reshape(-1)

    possible = tile_shapes
    if len(h):
        cls, at = groups(code, h, w)
        k = len(cls)
        smax, lmax = np.zeros(k, np.int64), np.zeros(k, np.int64)
        np.maximum.at(smax, at, s)
        np.maximum.at(lmax, at, l)
        order = s + l if rule.pallas else l          # what a pair's small variant grows with
        first = np.full(k, -1, np.int64)             # the pair of least ``order`` per class
        by = np.lexsort((order, at))
        first[at[by[::-1]]] = by[::-1]
        for c in range(k):
            kd, hh = names[int(cls[c, 0])], int(cls[c, 1])
            if kd == "tile":
                continue
            if kd != "scores":
                possible += 1
                continue
            a = int(first[c])
            any_small = rule.fits(kd, hh, int(s[a]), int(l[a]))
            joint = rule.fits(kd, hh, int(smax[c]), int(lmax[c]))
            if any_small and not joint and exact is not None:
                possible += len(exact(kd, hh, int(cls[c, 2])))
            else:
                possible += int(any_small) + int(not joint)
    if possible <= budget:
        seen = sorted({(names[int(c)], int(a), int(b)) for c, a, b in
                       (groups(code, h, w)[0] if len(h) else [])})
        return RunPlan(possible, None, [key + (None,) for key in seen])
    small = split_small(rule, kind, h, l)
    keys, at = groups(code, h, w, small.astype(np.int64))
    k = len(keys)
    smax, lmax = np.zeros(k, np.int64), np.zeros(k, np.int64)
    np.maximum.at(smax, at, s)
    np.maximum.at(lmax, at, l)
    pairs = np.bincount(at, count, k)
    steps = np.bincount(at, count * (s + l), k)
    cells = np.bincount(at, count.astype(np.float64) * s * l, k)
    stats = {(names[int(c)], int(a), int(b), bool(x)): (int(sm), int(lm), int(n), int(st),
                                                        float(ce))
             for (c, a, b, x), sm, lm, n, st, ce in zip(keys.tolist(), smax, lmax, pairs,
                                                        steps, cells)}
    served = merge_keys([key + v for key, v in stats.items()], budget, rule, cost)
    serve = {k[:4]: v[:4] for k, v in served.items()}
    return RunPlan(possible, serve, sorted(set(serve.values())))


__all__ = ["PROGRAM_BUDGET", "Cost", "Rule", "RunPlan", "length_pairs", "merge_keys", "plan_run",
           "split_small"]
