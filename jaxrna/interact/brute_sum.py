"""Every valid joint structure of two tiny strands, and sums over them: the oracle for the
partition function (:mod:`jaxrna.interact.partition`).

:func:`valid_structures` yields each valid structure (the rules of
:func:`jaxrna.interact.brute.check_joint`) once, built from :mod:`jaxrna.interact.brute`'s
enumeration of single-strand structures and antiparallel chains. :func:`brute_partition` sums
``exp(W / T)`` over them (W in user units) and the probability of every pair.

>>> from jaxrna.weights import parse_weights
>>> r = brute_partition("ACGU", "ACGU", parse_weights("bpmax"))
>>> r.count, round(r.log_z, 6), round(float(r.inter[1, 2]), 6)
(21, 8.73235, 0.944368)
"""

from __future__ import annotations

import math
from typing import Iterator, NamedTuple

import numpy as np

from jaxrna.interact.brute import chains, intra_structures, zigzag_free
from jaxrna.interact.pairs import Pair, joint_weight
from jaxrna.weights import WeightSet

__all__ = ["BruteSum", "valid_structures", "weighted_structures", "brute_partition"]


def _norm(seq: str) -> str:
    return seq.upper().replace("T", "U")


def valid_structures(s1: str, s2: str, weights: WeightSet) -> Iterator[tuple[Pair, ...]]:
    """Every valid joint structure (original coordinates, s2 read 5'->3'), the empty one
    included, each exactly once."""
    s1, s2 = _norm(s1), _norm(s2)
    intra2 = intra_structures(s2, weights)
    for p1 in intra_structures(s1, weights):
        used1 = {q for arc in p1 for q in arc}
        free1 = [x for x in range(len(s1)) if x not in used1]
        for p2 in intra2:
            used2 = {q for arc in p2 for q in arc}
            free2 = {y for y in range(len(s2)) if y not in used2}
            for chain in chains(s1, s2, weights, free1, free2):
                if p1 and p2 and chain and not zigzag_free(p1, p2, chain):
                    continue
                yield (tuple(Pair("intra1", a, b) for a, b in p1)
                       + tuple(Pair("intra2", c, d) for c, d in p2)
                       + tuple(Pair("inter", x, y) for x, y in chain))


class BruteSum(NamedTuple):
    """``log_z`` (ln Z), ``count`` (number of structures), ``best`` (max weight, integer
    units), pair probabilities ``inter`` (N x M, s2 5'->3'), ``intra1`` (N x N) and
    ``intra2`` (M x M, s2 5'->3'), both with entries at [i, j], i < j."""

    log_z: float
    count: int
    best: int
    inter: np.ndarray
    intra1: np.ndarray
    intra2: np.ndarray


def weighted_structures(s1: str, s2: str, weights: WeightSet) -> list[tuple[tuple[Pair, ...],
                                                                            int]]:
    """Every valid structure with its total weight (integer units)."""
    s1, s2 = _norm(s1), _norm(s2)
    return [(st, joint_weight(st, s1, s2, weights)) for st in valid_structures(s1, s2, weights)]


def brute_partition(s1: str, s2: str, weights: WeightSet, temperature: float = 1.0,
                    enumerated: list | None = None) -> BruteSum:
    """Sums over :func:`valid_structures` in float64 (weights exp(W / T), W in user units);
    ``enumerated``: the list :func:`weighted_structures` returns, to sum it again at another
    temperature."""
    if enumerated is None:
        enumerated = weighted_structures(s1, s2, weights)
    scores = [wt for _, wt in enumerated]
    logw = np.array(scores, dtype=np.float64) / weights.scale / temperature
    top = float(logw.max())
    w = np.exp(logw - top)
    z = float(w.sum())
    n, m = len(s1), len(s2)
    mats = {"inter": np.zeros((n, m)), "intra1": np.zeros((n, n)), "intra2": np.zeros((m, m))}
    for (st, _), wt in zip(enumerated, w):
        for p in st:
            mats[p.kind][p.i, p.j] += wt
    return BruteSum(log_z=top + math.log(z), count=len(enumerated), best=max(scores),
                    **{k: v / z for k, v in mats.items()})
