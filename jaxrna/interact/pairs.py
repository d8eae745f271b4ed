"""The pairs of a joint structure and their weights, shared by the engine's traceback, the
writers (:mod:`jaxrna.formats.interact`) and the brute-force oracle (:mod:`jaxrna.interact.brute`).

A joint structure is a list of :class:`Pair` in original coordinates: ``intra1`` (a, b) on s1,
``intra2`` (c, d) on s2 (both 0-based, a < b), ``inter`` (x, y) with x on s1 and y on s2 (s2
read 5'->3').

>>> from jaxrna.weights import parse_weights
>>> w = parse_weights("bpmax")
>>> pairs = [Pair("intra1", 0, 5), Pair("inter", 2, 1)]
>>> [pair_weight_of(p, "GAAAAC", "AU", w) for p in pairs], joint_weight(pairs, "GAAAAC", "AU", w)
([6, 2], 8)
"""

from __future__ import annotations

from typing import Iterable, NamedTuple

from jaxrna.fold.reference import pair_weight
from jaxrna.weights import WeightSet

KINDS = ("intra1", "intra2", "inter")


class Pair(NamedTuple):
    kind: str
    i: int
    j: int


def pair_weight_of(p: Pair, s1: str, s2: str, weights: WeightSet) -> int:
    """The integer weight of pair ``p`` of strands ``s1``, ``s2`` (0 where it cannot pair)."""
    a = s1 if p.kind != "intra2" else s2
    b = s2 if p.kind != "intra1" else s1
    return pair_weight(a[p.i], b[p.j], weights)


def joint_weight(pairs: Iterable[Pair], s1: str, s2: str, weights: WeightSet) -> int:
    """Total integer weight of a joint structure."""
    return sum(pair_weight_of(p, s1, s2, weights) for p in pairs)
