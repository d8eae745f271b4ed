"""Valid joint structures (the spec's four rules) and their exhaustive enumeration for tiny strands.

A joint structure is a list of :class:`~jaxrna.interact.pairs.Pair` (kinds, coordinates and
weights in :mod:`jaxrna.interact.pairs`). :func:`check_joint` states the rules; :func:`enumerate_best` tries every valid
structure, as the independent oracle for the recurrence.

>>> from jaxrna.weights import parse_weights
>>> w = parse_weights("bpmax")
>>> best, count = enumerate_best("ACGU", "ACGU", w)
>>> best / w.scale
8.0
"""

from __future__ import annotations

from typing import Iterable

from jaxrna.fold.reference import pair_weight
from jaxrna.interact.pairs import KINDS, Pair, joint_weight, pair_weight_of  # noqa: F401
from jaxrna.weights import WeightSet

MIN_SPAN = 4


def zigzag_free(arcs1, arcs2, inter) -> bool:
    for a, b in arcs1:
        xin = {(x, y) for x, y in inter if a < x < b}
        if not xin:
            continue
        for c, d in arcs2:
            yin = {(x, y) for x, y in inter if c < y < d}
            if xin & yin and not (xin <= yin or yin <= xin):
                return False
    return True


def check_joint(pairs: Iterable[Pair], s1: str, s2: str, weights: WeightSet) -> None:
    """Raise ``ValueError`` unless ``pairs`` is a valid joint structure under the spec's rules."""
    pairs = list(pairs)
    used1: set[int] = set()
    used2: set[int] = set()
    arcs1, arcs2, inter = [], [], []
    for p in pairs:
        if p.kind not in KINDS:
            raise ValueError(f"unknown pair kind {p.kind!r}")
        n_i = len(s2) if p.kind == "intra2" else len(s1)
        n_j = len(s1) if p.kind == "intra1" else len(s2)
        if not (0 <= p.i < n_i and 0 <= p.j < n_j):
            raise ValueError(f"{p} out of range")
        if pair_weight_of(p, s1, s2, weights) <= 0:
            raise ValueError(f"{p} is not an allowed base pair")
        if p.kind == "inter":
            first, second = (p.i,), (p.j,)
            inter.append((p.i, p.j))
        else:
            if p.j - p.i < MIN_SPAN:
                raise ValueError(f"{p} encloses fewer than 3 unpaired bases")
            first, second = ((p.i, p.j), ()) if p.kind == "intra1" else ((), (p.i, p.j))
            (arcs1 if p.kind == "intra1" else arcs2).append((p.i, p.j))
        for pos in first:                                  # rule 1: one pair per base
            if pos in used1:
                raise ValueError(f"base {pos} of strand 1 in two pairs")
            used1.add(pos)
        for pos in second:
            if pos in used2:
                raise ValueError(f"base {pos} of strand 2 in two pairs")
            used2.add(pos)
    for arcs, name in ((arcs1, "strand 1"), (arcs2, "strand 2")):   # rule 2: no crossing
        for a, b in arcs:
            for c, d in arcs:
                if a < c < b < d:
                    raise ValueError(f"pairs {(a, b)} and {(c, d)} on {name} cross")
    for x, y in inter:                                     # rule 3: antiparallel
        for x2, y2 in inter:
            if x < x2 and not y > y2:
                raise ValueError(f"inter pairs {(x, y)} and {(x2, y2)} are not antiparallel")
    if not zigzag_free(arcs1, arcs2, inter):              # rule 4
        raise ValueError("zigzag: an arc on each strand share inter pairs without one "
                         "containing the other's")


def intra_structures(seq: str, weights: WeightSet) -> list[tuple[tuple[int, int], ...]]:
    """Every non-crossing set of allowed pairs with span >= 4 (including the empty set)."""
    memo: dict[tuple[int, int], list] = {}

    def rec(i: int, j: int) -> list:
        if j - i < MIN_SPAN:
            return [()]
        key = (i, j)
        if key in memo:
            return memo[key]
        out = list(rec(i + 1, j))                          # i unpaired
        for k in range(i + MIN_SPAN, j + 1):
            if pair_weight(seq[i], seq[k], weights) > 0:
                for inside in rec(i + 1, k - 1):
                    for after in rec(k + 1, j):
                        out.append(((i, k),) + inside + after)
        memo[key] = out
        return out

    return rec(0, len(seq) - 1) if seq else [()]


def chains(s1: str, s2: str, weights: WeightSet, free1: list[int], free2: set[int]):
    """Every antiparallel set of inter pairs on free positions (x increasing, y decreasing)."""
    out = []

    def rec(start: int, below: int, acc: list) -> None:
        out.append(tuple(acc))
        for a in range(start, len(free1)):
            x = free1[a]
            for y in range(below - 1, -1, -1):
                if y in free2 and pair_weight(s1[x], s2[y], weights) > 0:
                    acc.append((x, y))
                    rec(a + 1, y, acc)
                    acc.pop()

    rec(0, len(s2), [])
    return out


def enumerate_best(s1: str, s2: str, weights: WeightSet) -> tuple[int, int]:
    """``(best weight, number of valid structures)`` by trying every valid joint structure."""
    s1, s2 = s1.upper().replace("T", "U"), s2.upper().replace("T", "U")
    best, count = 0, 0
    wc = {(x, y): pair_weight(s1[x], s2[y], weights) for x in range(len(s1)) for y in range(len(s2))}
    for p1 in intra_structures(s1, weights):
        used1 = {q for arc in p1 for q in arc}
        w1 = sum(pair_weight(s1[a], s1[b], weights) for a, b in p1)
        free1 = [x for x in range(len(s1)) if x not in used1]
        for p2 in intra_structures(s2, weights):
            used2 = {q for arc in p2 for q in arc}
            w12 = w1 + sum(pair_weight(s2[c], s2[d], weights) for c, d in p2)
            free2 = {y for y in range(len(s2)) if y not in used2}
            check = bool(p1) and bool(p2)
            for chain in chains(s1, s2, weights, free1, free2):
                if check and chain and not zigzag_free(p1, p2, chain):
                    continue
                count += 1
                total = w12 + sum(wc[xy] for xy in chain)
                if total > best:
                    best = total
    return best, count
