"""A run's geometry classes: at most :data:`PROGRAM_BUDGET` programs per ``jaxrna interact`` run.

Every pair is planned on its own (:func:`jaxrna.interact.windows.plan`: padded lengths on
fixed ladders, bands from the window's class), and a run compiles one program per geometry it
meets: about 20 for strands up to 300 nt, about 50 for a mix up to 10,000 nt. Issue 26 bounds
that by 8: when a run meets more, :func:`run_geometries` merges classes with
:func:`jaxrna.class_budget.merge_to_budget` until at most 8 geometries remain. Lengths and
windows are runtime values of a program (:mod:`jaxrna.interact.program`: the fill stops at the
batch's own spans and reads each pair's true lengths), so a pair gets the same result in any
geometry that holds it; only padding grows.

A class is named by its :class:`ClassKey`: the largest true lengths and window classes it
holds, in internal orientation (outer, inner; the orientation rule of
:func:`jaxrna.interact.api.make_problem` is unchanged). ``plan`` of a key is the class's
geometry, exactly today's for one pair (:func:`key_of`). The join of two classes is the plan of
their componentwise-largest lengths and windows (a whole strand is the largest window), so
merged geometries stay on the ladders and the windows a run asks for; ``jaxrna warmup``
prepares every join (:func:`closure`). A join is allowed only if its table fits the memory the
run allows (``limit``); the cost of a join is the extra padded work of the fill
(:func:`pair_work`), per pair.

>>> k1 = key_of(20, 300, None, 128)         # 20 nt whole outside, 300 nt windowed inside
>>> k1
ClassKey(outer=24, inner=511, window_outer=FULL, window_inner=128)
>>> j = join(k1, key_of(20, 5000, None, 128))
>>> g = geometry(j)
>>> (j.inner, g.n_outer, g.n_inner, g.w_inner) == (8191, 24, 8192, 127)
True
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from typing import Iterable, Mapping, NamedTuple

from jaxrna.class_budget import merge_to_budget
from jaxrna.interact.geometry import Geometry
from jaxrna.interact.windows import OUTER_LARGE, OUTER_SMALL, OUTER_TINY, padded_inner, plan, \
    window_class

#: Programs one ``jaxrna interact`` run compiles at most (issue 26), whatever its input.
PROGRAM_BUDGET = 8


class _Full(int):
    """The window of a whole strand: larger than any window class."""

    def __repr__(self) -> str:
        return "FULL"


#: A whole strand's "window" in a :class:`ClassKey` (compares above every window class).
FULL = _Full(1 << 40)
#: Every outer ladder's rungs together: a length rounded up to this is padded by each ladder
#: (:func:`jaxrna.interact.windows.padded_outer`) exactly as the length itself.
OUTER_RUNGS = tuple(sorted(set(OUTER_TINY) | set(OUTER_SMALL) | set(OUTER_LARGE)))


class ClassKey(NamedTuple):
    """A geometry class: the largest outer and inner lengths it holds (``inner`` = the inner
    class's padded length - 1) and window classes (:func:`~jaxrna.interact.windows.window_class`;
    :data:`FULL` for a whole strand), in internal orientation."""

    outer: int
    inner: int
    window_outer: int
    window_inner: int


def outer_rung(n: int) -> int:
    """``n`` rounded up to :data:`OUTER_RUNGS` (then powers of two).

    >>> [outer_rung(n) for n in (1, 9, 20, 30, 33, 300)]
    [8, 16, 24, 32, 64, 512]
    """
    for v in OUTER_RUNGS:
        if v >= n:
            return v
    v = OUTER_RUNGS[-1]
    while v < n:
        v *= 2
    return v


def key_of(n_outer: int, n_inner: int, window_outer: int | None,
           window_inner: int | None) -> ClassKey:
    """The class of one pair in internal orientation: strand lengths and window options (None =
    the whole strand), as :func:`jaxrna.interact.windows.plan` takes them; ``geometry`` of it
    is that plan's geometry."""
    return ClassKey(outer_rung(max(n_outer, 1)), padded_inner(n_inner) - 1,
                    FULL if window_outer is None else window_class(window_outer),
                    FULL if window_inner is None else window_class(window_inner))


@lru_cache(maxsize=1 << 16)
def join(a: ClassKey, b: ClassKey) -> ClassKey:
    """The smallest class holding both: componentwise-largest lengths and windows (a whole
    strand, :data:`FULL`, is the largest window)."""
    return ClassKey(max(a[0], b[0]), max(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


@lru_cache(maxsize=4096)
def geometry(key: ClassKey, backend: str = "cpu", tile: int | None = None) -> Geometry:
    """The geometry of a class on ``backend`` (:func:`~jaxrna.interact.windows.plan`)."""
    wo = None if key.window_outer == FULL else key.window_outer
    wi = None if key.window_inner == FULL else key.window_inner
    return plan(key.outer, key.inner, wo, wi, tile=tile, backend=backend).geo


def geometry_bytes(geo: Geometry) -> int:
    """Memory of one pair's fill (table and temporaries; what ``check_memory`` allows)."""
    return geo.table_bytes() + geo.work_bytes()


def pair_work(geo: Geometry, span_outer: int, span_inner: int) -> float:
    """Element operations of one pair's fill in ``geo`` when the batch runs ``span_outer``
    outer and ``span_inner`` inner diagonals (:func:`~jaxrna.interact.recurrence.bpmax_fill`):

    - the splits: per outer diagonal ``d``, ``d`` splits of ``n_outer - d`` matrices, each the
      max-plus products of the band's tile offsets the spans reach (all of them when the
      splits are one fused kernel) -- ``n_inner * tile**2`` per product;
    - the inner sweep: ``span_inner**2 / 2`` terms per inner position and matrix;
    - per diagonal and matrix, the band's copies (accumulators, operands, the table's update:
      about 8 passes over ``n_inner * ne * tile`` cells, whatever the spans);
    - once, the table's initialisation and the read of every window.

    The padded lengths scale every term, the band only the copies, the spans the rest.

    >>> g = plan(30, 45).geo
    >>> pair_work(g, 30, 45) < pair_work(plan(30, 200).geo, 30, 45)
    True
    """
    t, n_o, n_i = geo.tile, geo.n_outer, geo.n_inner
    s_o = max(1, min(span_outer, geo.w_outer + 1))
    s_i = max(1, min(span_inner, geo.wb))
    ne_s = geo.ne if geo.fused else min((s_i - 1 + t) // t, geo.nb - 1) + 1
    rows = s_o * n_o - s_o * (s_o - 1) / 2                       # sum of n_o - d, d < s_o
    splits = n_o * s_o * (s_o - 1) / 2 - (s_o - 1) * s_o * (2 * s_o - 1) / 6   # (n_o - d) d
    work = splits * ne_s * (ne_s + 1) / 2 * n_i * t * t
    work += rows * n_i * s_i * s_i
    work += rows * n_i * geo.ne * t * 8
    return work + geo.table_bytes() / 4 + n_o * n_i


def _spans(key: ClassKey) -> tuple[int, int]:
    return min(key.window_outer, key.outer), min(key.window_inner, key.inner)


def run_geometries(keys: Iterable[ClassKey], budget: int = PROGRAM_BUDGET, limit: int = 0,
                   backend: str = "cpu", tile: int | None = None) -> dict[ClassKey, Geometry]:
    """The geometry that serves each class of a run's pairs (``keys``: one per pair, each
    fitting in ``limit`` bytes; 0 = unknown: then the largest class's bytes): the classes' own
    geometries when they are at most ``budget``, else at most ``budget`` of them
    (:func:`merge_to_budget`: least extra :func:`pair_work` first, never a join whose table
    exceeds ``limit``). Should the greedy end past the limit (pairs near the memory limit in
    different dimensions), ``budget`` of the largest classes that fit and hold them all
    (:func:`_cover`); failing that too, the fewest geometries above ``budget`` that fit (no
    mix tested needs it: ``tests/test_interact_classes.py``).

    >>> ks = [key_of(n, m, None, None) for n in (5, 20, 30) for m in (40, 100, 200, 400)]
    >>> len({geometry(k) for k in ks}), len(set(run_geometries(ks).values()))
    (9, 8)
    >>> len(set(run_geometries(ks, budget=3).values()))
    3
    """
    counts = Counter(keys)
    own = {k: geometry(k, backend, tile) for k in sorted(counts)}
    if len(set(own.values())) <= budget:
        return own
    if not limit:               # memory unknown: no join past the largest class the run has
        limit = max(geometry_bytes(g) for g in own.values())

    def fits(k: ClassKey) -> bool:
        return geometry_bytes(geometry(k, backend, tile)) <= limit

    # (a class past the limit keeps its geometry: the run refuses its pairs, check_memory)
    weights = {k: float(counts[k]) for k in own if fits(k)}
    if len({own[k] for k in weights}) <= budget:
        return own

    @lru_cache(maxsize=None)
    def cost(k: ClassKey) -> float:
        return pair_work(geometry(k, backend, tile), *_spans(k)) if fits(k) else float("inf")

    def geometries(serve: Mapping[ClassKey, ClassKey]) -> int:
        return len({geometry(s, backend, tile) for s in serve.values()})

    # keys of small classes may share a geometry (bands whole whatever the window), so
    # ``budget`` keys may be fewer geometries: then a few more keys while they fit ``budget``
    # (merging on geometries instead would lose the keys' windows)
    serve = merge_to_budget(weights, budget, join, cost)
    b = budget
    while geometries(serve) < budget and b < min(len(weights) - 1, budget + 4) and \
            all(fits(s) for s in serve.values()):
        more = merge_to_budget(weights, b + 1, join, cost)
        if geometries(more) > budget or not all(fits(s) for s in more.values()):
            break
        b, serve = b + 1, more
    if not all(fits(s) for s in serve.values()):
        # the greedy joined its way into a corner (pairs near the memory limit): cover the
        # classes with few of the largest classes that fit, else allow more programs
        serve = _cover(list(weights), budget, fits, cost)
        while serve is None:
            b += 1
            serve = merge_to_budget(weights, b, join, cost)
            if not all(fits(s) for s in serve.values()) and b < len(weights):
                serve = None
    return {k: geometry(serve[k], backend, tile) if k in serve else g for k, g in own.items()}


def _cover(keys: list[ClassKey], budget: int, fits, cost,
           tries: int = 200_000) -> dict[ClassKey, ClassKey] | None:
    """At most ``budget`` classes that fit and hold every key, found among the maximal joins
    that fit (fewest first, at most ``tries`` combinations); each key goes to the cheapest
    that holds it, and each group is served by the join of its keys. None if not found."""
    from itertools import combinations

    have = _fitting_closure(keys, fits)
    tops = sorted(m for m in have if not any(o != m and join(m, o) == o for o in have))
    holds = {m: frozenset(k for k in keys if join(k, m) == m) for m in tops}
    count = 0
    for r in range(1, budget + 1):
        for combo in combinations(tops, r):
            count += 1
            if count > tries:
                return None
            if len(frozenset().union(*(holds[m] for m in combo))) < len(keys):
                continue
            groups: dict[ClassKey, list[ClassKey]] = {}
            for k in keys:
                m = min((m for m in combo if k in holds[m]), key=cost)
                groups.setdefault(m, []).append(k)
            serve = {}
            for m, members in groups.items():
                top = members[0]
                for k in members[1:]:
                    top = join(top, k)
                for k in members:
                    serve[k] = top if fits(top) else m
            return serve
    return None


def _fitting_closure(keys: Iterable[ClassKey], fits) -> set[ClassKey]:
    have = {k for k in keys if fits(k)}
    new = set(have)
    while new:
        found = set()
        for a in new:
            for b in have:
                m = join(a, b)
                if m not in have and m not in found and fits(m):
                    found.add(m)
        have |= found
        new = found
    return have


def closure(keys: Iterable[ClassKey], limit: int = 0, backend: str = "cpu",
            tile: int | None = None) -> set[ClassKey]:
    """Every class :func:`run_geometries` can serve a run of ``keys`` with: the keys that fit
    in ``limit`` and every join of them that fits (what ``jaxrna warmup`` prepares).

    >>> ks = {key_of(5, 40, None, None), key_of(20, 100, None, None)}
    >>> sorted(closure(ks)) == sorted(ks | {join(*ks)})
    True
    """
    return _fitting_closure(keys, lambda k: not limit or
                            geometry_bytes(geometry(k, backend, tile)) <= limit)


__all__ = ["PROGRAM_BUDGET", "FULL", "ClassKey", "key_of", "join", "geometry", "pair_work",
           "run_geometries", "closure"]
