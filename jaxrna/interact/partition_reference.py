"""An unambiguous grammar of valid joint structures (BPPart-style), in plain Python.

The BPMax recurrence (../shared/specs/bpmax.md) derives most structures many times (D splits
anywhere, H1..H4 overlap, the ``0`` term), which is harmless for a maximum but wrong for a sum.
This module states a grammar that derives every valid joint structure (the spec's four rules,
see :mod:`jaxrna.interact.brute`) exactly once, and evaluates it in any semiring: ``count``
(the number of structures), ``max`` (the best total weight, integer units: it must equal
BPMax), ``boltzmann`` (the partition function ``Z = sum exp(W / T)``, W in user units, float).

Coordinates: s1 positions ``0..N-1``; strand 2 reversed, ``t = s2[::-1]``, positions
``0..M-1``, so intermolecular pairs (x, q) form an increasing chain (x < x' iff q < q').

Why the grammar is unambiguous. Number the inter pairs 1..k along the chain. For an intra arc
A on either strand let I(A) be the inter pairs with an end inside A: a contiguous run of
indices. Arcs on one strand nest or are disjoint, so their runs nest or are disjoint; rule 4
says the same for an arc of s1 against an arc of t. So all runs form a laminar family, whose
maximal members, together with the inter pairs in no run, cut the chain into *blocks*. A
block's *extent* on a strand runs from its leftmost to its rightmost position that is an
inter-pair end or the end of an arc whose run meets the block; the extents of consecutive
blocks are disjoint and ordered on both strands. What lies outside every extent (the *gaps*)
holds intra arcs without inter pairs only: two independent single-strand structures.
Conversely, any such arrangement with valid blocks is valid.

Non-terminals (Q half-open ``[i, j)``; every box is closed ``[i1..j1] x [i2..j2]``; all box
non-terminals have at least one inter pair; "tight" on a strand: the box's end positions on
that strand are the extremes of the blocks' extents):

* ``Q1(i, j)``, ``Q2(i, j)``: single-strand structures of s1[i:j] (t[i:j]), empty included:
  ``Q(i, j) = Q(i, j-1) + sum_k Q(i, k) e(k, j-1) Q(k+1, j-1)`` (j-1 unpaired, or paired
  with k, span ``j-1-k >= 4``).
* ``T``: one block, tight on both strands. Exactly one of
  ``TP`` the block is a single inter pair (a 1 x 1 box, no arc around it);
  ``TA`` an s1 arc (i1, j1) whose run is the block: ``e1(i1, j1) X1F(i1+1, j1-1, i2, j2)``;
  ``TC`` a t arc (i2, j2) whose run is the block, and no s1 arc (i1, j1) around it (that case
  is ``TA``, peeled first): ``e2(i2, j2) X2nA(i1, j1, i2+1, j2-1)``.
* ``X``: tight on both strands (one or more blocks): ``X = XP + TA`` with
  ``XP = TP + TC + D`` and ``D = sum_{b1<j1, b2<j2} T(i1, b1, i2, b2) XF(b1+1, j1, b2+1, j2)``
  (the first block, then a gap and the remaining blocks).
* ``XL1(i1, j1, i2, j2) = sum_{a1} Q1(i1, a1) X(a1, j1, i2, j2)``: free (a gap allowed) at the
  left end of s1, tight elsewhere.
* ``XF(i1, j1, i2, j2) = sum_{a2} Q2(i2, a2) XL1(i1, j1, a2, j2)``: free at both left ends,
  tight at both right ends.
* ``X1F(i1, j1, i2, j2) = sum_{b1} XL1(i1, b1, i2, j2) Q1(b1+1, j1+1)``: free at both ends of
  s1, tight on t (the inside of an s1 arc that holds the block).
* ``XPR(i1, j1, i2, j2) = sum_{b2} XP(i1, j1, i2, b2) Q2(b2+1, j2+1)`` and
  ``X2nA(i1, j1, i2, j2) = sum_{a2} Q2(i2, a2) XPR(i1, j1, a2, j2)``: free at both ends of t,
  tight on s1, and no s1 arc spanning all of s1 (the inside of a t arc in ``TC``).
* The answer: ``Z = Q1(0, N) Q2(0, M) + sum_{b1, b2} XF(0, b1, 0, b2) Q1(b1+1, N) Q2(b2+1, M)``
  (no inter pair at all, or the blocks with their outer gaps).

``e1``, ``e2``, ``ei`` are the semiring weights of allowed pairs (positive weight, intra span
``>= 4``). Time O(N^3 M^3) (the ``D`` sum), memory O(N^2 M^2).

>>> from jaxrna.weights import parse_weights
>>> w = parse_weights("bpmax")
>>> reference_partition("ACGU", "ACGU", w, mode="count")
21
>>> reference_partition("UCGCUGCU", "GUCGGA", w, mode="max") / w.scale
14.5
>>> round(reference_partition("ACGU", "ACGU", w, mode="boltzmann", temperature=1.0), 3)
6200.283
"""

from __future__ import annotations

import math
from typing import Callable

from jaxrna.interact.reference import pair_weight
from jaxrna.weights import WeightSet

__all__ = ["MIN_SPAN", "PySemiring", "py_semiring", "reference_partition"]

#: An intramolecular pair (i, j) needs j - i >= MIN_SPAN.
MIN_SPAN = 4


class PySemiring:
    """Plain-Python semiring: ``zero``, ``one``, ``add``, ``mul`` and ``pair(w)``, the value of
    an allowed pair of integer weight ``w``."""

    def __init__(self, zero, one, add: Callable, mul: Callable, pair: Callable):
        self.zero, self.one, self.add, self.mul, self.pair = zero, one, add, mul, pair

    def total(self, values):
        out = self.zero
        for v in values:
            out = self.add(out, v)
        return out


def py_semiring(mode: str, scale: int = 1, temperature: float = 1.0) -> PySemiring:
    """``count`` (ints), ``max`` (integer units; ``-inf`` as zero) or ``boltzmann`` (floats,
    a pair of integer weight w is worth ``exp(w / scale / T)``)."""
    if mode == "count":
        return PySemiring(0, 1, lambda a, b: a + b, lambda a, b: a * b, lambda w: 1)
    if mode == "max":
        return PySemiring(-math.inf, 0, max, lambda a, b: a + b, lambda w: w)
    if mode == "boltzmann":
        return PySemiring(0.0, 1.0, lambda a, b: a + b, lambda a, b: a * b,
                          lambda w: math.exp(w / scale / temperature))
    raise ValueError(f"unknown mode {mode!r}")


def _q_table(u: str, e) -> list[list]:
    """Half-open single-strand table ``Q[i][j]`` for ``0 <= i <= j <= n``."""
    sr, n = e.sr, len(u)
    Q = [[sr.zero] * (n + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        Q[i][i] = sr.one
    for d in range(1, n + 1):
        for i in range(n + 1 - d):
            j = i + d
            v = Q[i][j - 1]
            for k in range(i, j - MIN_SPAN):
                p = e(k, j - 1)
                if p is not None:
                    v = sr.add(v, sr.mul(sr.mul(Q[i][k], p), Q[k + 1][j - 1]))
            Q[i][j] = v
    return Q


class _Pairs:
    """Semiring values of allowed pairs within one strand (``None``: not allowed)."""

    def __init__(self, a: str, b: str | None, weights: WeightSet, sr: PySemiring):
        self.a, self.b, self.w, self.sr = a, b, weights, sr

    def __call__(self, i: int, j: int):
        if self.b is None and j - i < MIN_SPAN:
            return None
        w = pair_weight(self.a[i], (self.a if self.b is None else self.b)[j], self.w)
        return self.sr.pair(w) if w > 0 else None


def reference_partition(s1: str, s2: str, weights: WeightSet, mode: str = "boltzmann",
                        temperature: float = 1.0):
    """The grammar's total over all valid joint structures of ``s1`` and ``s2`` (both 5'->3'):
    a count, a maximum (integer units) or ``Z`` (see :func:`py_semiring`)."""
    s1, t = s1.upper().replace("T", "U"), s2.upper().replace("T", "U")[::-1]
    sr = py_semiring(mode, weights.scale, temperature)
    n, m = len(s1), len(t)
    e1, e2, ei = _Pairs(s1, None, weights, sr), _Pairs(t, None, weights, sr), \
        _Pairs(s1, t, weights, sr)
    Q1, Q2 = _q_table(s1, e1), _q_table(t, e2)
    if n == 0 or m == 0:
        return sr.mul(Q1[0][n], Q2[0][m])
    Z0 = sr.zero

    def table():
        return [[[[Z0] * m for _ in range(m)] for _ in range(n)] for _ in range(n)]

    T, XP, X, XL1, XF, X1F, XPR, X2nA = (table() for _ in range(8))
    add, mul = sr.add, sr.mul
    for d1 in range(n):
        for i1 in range(n - d1):
            j1 = i1 + d1
            a_out = e1(i1, j1)
            for d2 in range(m):
                for i2 in range(m - d2):
                    j2 = i2 + d2
                    tp = Z0
                    if d1 == 0 and d2 == 0 and ei(i1, i2) is not None:
                        tp = ei(i1, i2)
                    ta = Z0
                    if a_out is not None:
                        ta = mul(a_out, X1F[i1 + 1][j1 - 1][i2][j2])
                    tc = Z0
                    c_out = e2(i2, j2)
                    if c_out is not None:
                        tc = mul(c_out, X2nA[i1][j1][i2 + 1][j2 - 1])
                    T[i1][j1][i2][j2] = add(add(tp, ta), tc)
                    d = Z0
                    for b1 in range(i1, j1):
                        left, right = T[i1][b1][i2], XF[b1 + 1][j1]
                        for b2 in range(i2, j2):
                            d = add(d, mul(left[b2], right[b2 + 1][j2]))
                    xp = add(add(tp, tc), d)
                    XP[i1][j1][i2][j2] = xp
                    X[i1][j1][i2][j2] = add(xp, ta)
                    XL1[i1][j1][i2][j2] = sr.total(
                        mul(Q1[i1][a1], X[a1][j1][i2][j2]) for a1 in range(i1, j1 + 1))
                    XF[i1][j1][i2][j2] = sr.total(
                        mul(Q2[i2][a2], XL1[i1][j1][a2][j2]) for a2 in range(i2, j2 + 1))
                    X1F[i1][j1][i2][j2] = sr.total(
                        mul(XL1[i1][b1][i2][j2], Q1[b1 + 1][j1 + 1]) for b1 in range(i1, j1 + 1))
                    XPR[i1][j1][i2][j2] = sr.total(
                        mul(XP[i1][j1][i2][b2], Q2[b2 + 1][j2 + 1]) for b2 in range(i2, j2 + 1))
                    X2nA[i1][j1][i2][j2] = sr.total(
                        mul(Q2[i2][a2], XPR[i1][j1][a2][j2]) for a2 in range(i2, j2 + 1))
    total = mul(Q1[0][n], Q2[0][m])
    for b1 in range(n):
        for b2 in range(m):
            total = add(total, mul(mul(XF[0][b1][0][b2], Q1[b1 + 1][n]), Q2[b2 + 1][m]))
    return total
