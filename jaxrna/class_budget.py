"""A run's program budget: merge the size classes a run meets until at most ``budget`` remain.

Issue 26: every subcommand compiles one program per (size class, option class) its input meets.
Classes come from fixed ladders (so programs are shared by every run and prepared by
``jaxrna warmup``), but a run over a wide mix of lengths can meet more of them than a cold run
should compile. :func:`merge_to_budget` maps the classes a run meets onto at most ``budget``
of them: it repeatedly joins the two groups whose join adds the least padded work, where the
join of two classes is the (ladder) class that holds both. Inside a class the lengths are
runtime values, so a record in a larger class gets the same result, at the cost of padding;
a run that meets ``budget`` classes or fewer keeps them all unchanged.

``counts[c]``: the work weight of the records of class ``c`` (their number, or their bytes);
``cost(c)``: the per-weight cost of class ``c`` (padded cells or bytes of one record);
``join(a, b)``: the smallest class holding every record of ``a`` and ``b`` (it must hold
``join(a, b) >= a, b`` in the classes' order, and be a class of the same ladder).

>>> counts = {64: 100, 128: 50, 256: 10, 512: 5, 1024: 1}
>>> m = merge_to_budget(counts, 3, join=max, cost=lambda c: c * c)
>>> sorted(set(m.values())), m[64], m[128], m[1024]
([128, 512, 1024], 128, 128, 1024)
>>> merge_to_budget(counts, 5, join=max, cost=lambda c: c) == {c: c for c in counts}
True
"""

from __future__ import annotations

from typing import Callable, Hashable, Mapping, TypeVar

K = TypeVar("K", bound=Hashable)


def merge_to_budget(counts: Mapping[K, float], budget: int, join: Callable[[K, K], K],
                    cost: Callable[[K], float]) -> dict[K, K]:
    """Map every class of ``counts`` to the class that serves it in a run of at most
    ``budget`` classes (see the module docstring). Deterministic: ties are broken by the
    classes' order in ``counts`` (callers pass them sorted)."""
    if budget < 1:
        raise ValueError(f"a run's program budget must be at least 1, not {budget}")
    order = list(counts)
    serve = {c: c for c in order}
    groups: dict[K, float] = {}                  # serving class -> total weight
    for c in order:
        groups[c] = groups.get(c, 0.0) + float(counts[c])
    while len(groups) > budget:
        keys = list(groups)
        best = None
        for x in range(len(keys)):
            a = keys[x]
            for y in range(x + 1, len(keys)):
                b = keys[y]
                m = join(a, b)
                cm = float(cost(m))
                extra = groups[a] * (cm - float(cost(a))) + groups[b] * (cm - float(cost(b)))
                # a join onto a third group's class removes two groups at once
                fewer = 2 if m in groups and m not in (a, b) else 1
                score = extra / fewer
                if best is None or score < best[0]:
                    best = (score, a, b, m)
        _, a, b, m = best
        weight = groups.pop(a) + groups.pop(b) + groups.pop(m, 0.0)
        groups[m] = weight
        for c, s in serve.items():
            if s in (a, b):
                serve[c] = m
    return serve


def classes_after(counts: Mapping[K, float], budget: int, join: Callable[[K, K], K],
                  cost: Callable[[K], float]) -> list[K]:
    """The classes a run of ``counts`` compiles under ``budget``, in ``counts``' order of
    first use.

    >>> classes_after({1: 5, 2: 5, 3: 5}, 2, join=max, cost=float)
    [2, 3]
    """
    serve = merge_to_budget(counts, budget, join, cost)
    out: list[K] = []
    for c in counts:
        if serve[c] not in out:
            out.append(serve[c])
    return out


__all__ = ["merge_to_budget", "classes_after"]
