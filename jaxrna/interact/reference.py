"""The slow, plain statement of BPMax (../shared/specs/bpmax.md), used by the tests as an oracle.

Pure Python, O(N^3 M^3): no JAX, no tricks. Strand 2 is reversed internally (``t = s2[::-1]``)
so that intermolecular pairs are antiparallel. Scores are integers in the weight set's units
(divide by ``weights.scale`` for the user's units). ``w1``/``w2`` restrict the domain to
``j1 - i1 <= w1`` and ``j2 - i2 <= w2`` (the windowed variant); ``None`` means unrestricted.

>>> from jaxrna.weights import parse_weights
>>> w = parse_weights("bpmax")
>>> reference_score("UCGCUGCU", "GUCGGA", w) / w.scale
14.5
"""

from __future__ import annotations

from jaxrna.fold.reference import pair_weight
from jaxrna.weights import WeightSet

__all__ = ["pair_weight", "single_table", "reference_tables", "reference_score", "reference_windows"]


def _norm(seq: str) -> str:
    return seq.upper().replace("T", "U")


def single_table(u: str, weights: WeightSet) -> list[list[int]]:
    """S(i, j) of the spec for one strand: 0 if j - i <= 3, else the weighted Nussinov maximum."""
    n = len(u)
    S = [[0] * n for _ in range(n)]
    for d in range(4, n):
        for i in range(n - d):
            j = i + d
            best = pair_weight(u[i], u[j], weights) + S[i + 1][j - 1]
            for k in range(i, j):
                v = S[i][k] + S[k + 1][j]
                if v > best:
                    best = v
            S[i][j] = best
    return S


def reference_tables(s1: str, s2: str, weights: WeightSet, w1: int | None = None,
                     w2: int | None = None):
    """``(F, S1, S2)``: ``F[i1][j1][i2][j2]`` (None outside the domain), on s1 and t = s2[::-1]."""
    s1, t = _norm(s1), _norm(s2)[::-1]
    n, m = len(s1), len(t)
    w1 = n - 1 if w1 is None else min(w1, n - 1)
    w2 = m - 1 if w2 is None else min(w2, m - 1)
    S1, S2 = single_table(s1, weights), single_table(t, weights)
    F = [[[[None] * m for _ in range(m)] for _ in range(n)] for _ in range(n)]
    for d1 in range(w1 + 1):
        for i1 in range(n - d1):
            j1 = i1 + d1
            cell = F[i1][j1]
            w_out = pair_weight(s1[i1], s1[j1], weights) if d1 >= 4 else None
            for d2 in range(w2 + 1):
                for i2 in range(m - d2):
                    j2 = i2 + d2
                    if d1 == 0 and d2 == 0:
                        cell[i2][j2] = pair_weight(s1[i1], t[i2], weights)
                        continue
                    best = 0
                    # D: the double reduction
                    for k1 in range(i1, j1):
                        left, right = F[i1][k1], F[k1 + 1][j1]
                        row = left[i2]
                        for k2 in range(i2, j2):
                            v = row[k2] + right[k2 + 1][j2]
                            if v > best:
                                best = v
                    # H1, H2: splits of strand 2
                    row = cell[i2]
                    for k2 in range(i2, j2):
                        v = row[k2] + S2[k2 + 1][j2]
                        if v > best:
                            best = v
                        v = S2[i2][k2] + cell[k2 + 1][j2]
                        if v > best:
                            best = v
                    # H3, H4: splits of strand 1
                    for k1 in range(i1, j1):
                        v = S1[i1][k1] + F[k1 + 1][j1][i2][j2]
                        if v > best:
                            best = v
                        v = F[i1][k1][i2][j2] + S1[k1 + 1][j1]
                        if v > best:
                            best = v
                    # intramolecular pairs closing strand 1 or strand 2
                    if w_out is not None:
                        v = w_out + F[i1 + 1][j1 - 1][i2][j2]
                        if v > best:
                            best = v
                    if d2 >= 4:
                        v = pair_weight(t[i2], t[j2], weights) + cell[i2 + 1][j2 - 1]
                        if v > best:
                            best = v
                    cell[i2][j2] = best
    return F, S1, S2


def reference_score(s1: str, s2: str, weights: WeightSet) -> int:
    """F(0, N-1, 0, M-1) in integer units."""
    F, _, _ = reference_tables(s1, s2, weights)
    return F[0][len(s1) - 1][0][len(s2) - 1]


def reference_windows(s1: str, s2: str, weights: WeightSet, l1: int, l2: int):
    """Every window's score, by the spec: ``{(i1, i2): F(i1, min(i1+W1, N-1), i2, min(i2+W2, M-1))}``
    with ``W = L - 1`` and (i1, i2) in internal coordinates (i2 on t = s2[::-1])."""
    n, m = len(s1), len(s2)
    F, _, _ = reference_tables(s1, s2, weights, l1 - 1, l2 - 1)
    return {(i1, i2): F[i1][min(i1 + l1 - 1, n - 1)][i2][min(i2 + l2 - 1, m - 1)]
            for i1 in range(n) for i2 in range(m)}
