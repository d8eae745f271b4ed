"""Traceback of one optimal joint structure from a filled box (host side, NumPy).

Works in the box's local coordinates on the outer and inner strands (internal orientation) and
returns pairs of three kinds: ``("outer", a, b)`` and ``("inner", a, b)`` intramolecular, and
``("inter", x, y)`` with x on the outer strand and y on the inner one. The caller maps them to
strand 1 / strand 2 coordinates (:func:`to_original`).

Preference at each cell, so structures are deterministic: the base case, the empty structure,
the outer pair, the inner pair, H1, H2, H3, H4, then the double reduction (smallest k1, k2).
Single-strand segments are traced by :func:`jaxrna.fold.traceback.traceback`.
"""

from __future__ import annotations

import numpy as np

from jaxrna.fold.traceback import traceback as fold_traceback
from jaxrna.interact.pairs import Pair
from jaxrna.interact.windows import Box

MIN_LOOP = 3


def _single(table: np.ndarray, codes: np.ndarray, weights: np.ndarray, i: int, j: int):
    if j - i <= MIN_LOOP:
        return []
    sub = table[i:j + 1, i:j + 1]
    return [(a + i, b + i) for a, b in fold_traceback(sub, codes[i:j + 1], weights, MIN_LOOP)]


def traceback(box: Box, weights: np.ndarray) -> list[tuple[str, int, int]]:
    """Pairs of one structure whose weight is ``F(0, P-1, 0, Q-1)`` of the box."""
    u, v = box.codes_outer.astype(np.int64), box.codes_inner.astype(np.int64)
    so, si = box.s_outer, box.s_inner
    p, q = box.shape
    out: list[tuple[str, int, int]] = []
    stack = [(0, p - 1, 0, q - 1)]
    while stack:
        i1, j1, i2, j2 = stack.pop()
        val = int(box.F(i1, j1, i2, j2))
        if i1 == j1 and i2 == j2:
            w = int(weights[u[i1], v[i2]])
            if w != val:
                raise AssertionError(f"base cell {(i1, j1, i2, j2)} holds {val}, expected {w}")
            if w > 0:
                out.append(("inter", i1, i2))
            continue
        if val == 0:
            continue
        if j1 - i1 > MIN_LOOP:
            w = int(weights[u[i1], u[j1]])
            if w + int(box.F(i1 + 1, j1 - 1, i2, j2)) == val:
                if w > 0:
                    out.append(("outer", i1, j1))
                stack.append((i1 + 1, j1 - 1, i2, j2))
                continue
        if j2 - i2 > MIN_LOOP:
            w = int(weights[v[i2], v[j2]])
            if w + int(box.F(i1, j1, i2 + 1, j2 - 1)) == val:
                if w > 0:
                    out.append(("inner", i2, j2))
                stack.append((i1, j1, i2 + 1, j2 - 1))
                continue
        if j2 > i2:
            k = np.arange(i2, j2)
            h1 = box.F(i1, j1, i2, k) + si[k + 1, j2]
            hit = np.flatnonzero(h1 == val)
            if len(hit):
                k2 = i2 + int(hit[0])
                stack.append((i1, j1, i2, k2))
                out.extend(("inner", a, b) for a, b in _single(si, v, weights, k2 + 1, j2))
                continue
            h2 = si[i2, k] + box.F(i1, j1, k + 1, j2)
            hit = np.flatnonzero(h2 == val)
            if len(hit):
                k2 = i2 + int(hit[0])
                out.extend(("inner", a, b) for a, b in _single(si, v, weights, i2, k2))
                stack.append((i1, j1, k2 + 1, j2))
                continue
        found = False
        for k1 in range(i1, j1):                           # H3
            if int(so[i1, k1]) + int(box.F(k1 + 1, j1, i2, j2)) == val:
                out.extend(("outer", a, b) for a, b in _single(so, u, weights, i1, k1))
                stack.append((k1 + 1, j1, i2, j2))
                found = True
                break
        if found:
            continue
        for k1 in range(i1, j1):                           # H4
            if int(box.F(i1, k1, i2, j2)) + int(so[k1 + 1, j1]) == val:
                stack.append((i1, k1, i2, j2))
                out.extend(("outer", a, b) for a, b in _single(so, u, weights, k1 + 1, j1))
                found = True
                break
        if found:
            continue
        if j2 > i2:
            k = np.arange(i2, j2)
            for k1 in range(i1, j1):                       # D
                d = box.F(i1, k1, i2, k) + box.F(k1 + 1, j1, k + 1, j2)
                hit = np.flatnonzero(d == val)
                if len(hit):
                    k2 = i2 + int(hit[0])
                    stack.append((k1 + 1, j1, k2 + 1, j2))
                    stack.append((i1, k1, i2, k2))
                    found = True
                    break
        if not found:
            raise AssertionError(f"table inconsistent at {(i1, j1, i2, j2)}; value {val}")
    return out


def to_original(local: list[tuple[str, int, int]], outer_is_1: bool, o0: int, q0: int,
                m2: int) -> list[Pair]:
    """Map local pairs to :class:`~jaxrna.interact.pairs.Pair` on strand 1 / strand 2 (5'->3',
    0-based). ``m2`` is strand 2's length; strand 2 is reversed internally."""
    def on1(pos: int, outer: bool) -> int:
        return pos + (o0 if outer else q0)

    def on2(pos: int, outer: bool) -> int:
        return m2 - 1 - (pos + (o0 if outer else q0))

    pairs = []
    for kind, a, b in local:
        if kind == "inter":
            x, y = (on1(a, True), on2(b, False)) if outer_is_1 else (on1(b, False), on2(a, True))
            pairs.append(Pair("inter", x, y))
        else:
            outer = kind == "outer"
            if outer == outer_is_1:
                pairs.append(Pair("intra1", on1(a, outer), on1(b, outer)))
            else:
                pairs.append(Pair("intra2", on2(b, outer), on2(a, outer)))
    return sorted(pairs, key=lambda pr: (("intra1", "intra2", "inter").index(pr.kind), pr.i, pr.j))
