"""Exhaustive enumeration of secondary structures: the independent oracle for tiny inputs."""

from __future__ import annotations

from functools import lru_cache

from jaxrna.fold.reference import pair_weight
from jaxrna.weights import WeightSet


def all_structures(seq: str, weights: WeightSet, min_loop: int) -> list[tuple[tuple[int, int], ...]]:
    """Every non-crossing set of allowed pairs with j - i > min_loop (the empty one included)."""
    n = len(seq)

    @lru_cache(maxsize=None)
    def between(i: int, j: int) -> tuple[tuple[tuple[int, int], ...], ...]:
        if i > j:
            return ((),)
        out = list(between(i + 1, j))                      # i unpaired
        for k in range(i + min_loop + 1, j + 1):           # i paired with k
            if pair_weight(seq[i], seq[k], weights) > 0:
                for inside in between(i + 1, k - 1):
                    for outside in between(k + 1, j):
                        out.append(((i, k),) + inside + outside)
        return tuple(out)

    return list(between(0, n - 1))


def brute_force_score(seq: str, weights: WeightSet, min_loop: int) -> int:
    return max(sum(pair_weight(seq[i], seq[j], weights) for i, j in s)
               for s in all_structures(seq, weights, min_loop))
