"""Oracles for the alignment partition function: every alignment enumerated, and a plain
forward-backward in Python floats (float64).

The model is the one of :mod:`jaxrna.align.reference`, summed instead of maximised: an
alignment is a string of columns ``M`` (query i with target j, score ``S[i, j]``), ``X``
(query residue against a gap) and ``Y`` (target residue against a gap); a maximal run of
``X`` (or of ``Y``) columns of length L scores ``go + (L - 1) * ge`` (``go``, ``ge`` <= 0 are
the open and extend *scores*), and an X run directly followed by a Y run (or the reverse) is
two runs. It weighs ``exp(score / T)``.

- Global: every alignment of the whole query with the whole target. With end gap scores
  ``eo``, ``ee`` (:func:`enumerated`), a run before the first or after the last residue of
  the other sequence (an end gap) scores ``eo + (L - 1) * ee`` instead: ``0, 0`` are free end
  gaps, and the ensemble is still every global alignment, each counted once.
- Local: the empty alignment (weight 1) and every alignment of a query substring with a
  target substring that starts and ends with an ``M`` column.

``S`` is the ``(m, n)`` substitution score of every query position against every target
position, in the user's units. Posteriors ``P[i, j]`` are the probability that query ``i``
is aligned to target ``j`` (0-based here).

>>> import numpy as np
>>> S = np.array([[1.0, -1.0], [-1.0, 1.0]])
>>> round(enumerated(S, -2.0, -1.0, local=False)[0], 6)
2.029349
>>> round(forward_backward(S, -2.0, -1.0, local=False)[0], 6)
2.029349
>>> len(list(alignments(2, 2, local=False)))   # Delannoy number D(2, 2)
13
"""

from __future__ import annotations

import math
from typing import Iterator

import numpy as np

NEG_INF = -math.inf


def _lse(*values: float) -> float:
    top = max(values)
    if top == NEG_INF:
        return NEG_INF
    return top + math.log(math.fsum(math.exp(v - top) for v in values))


def alignments(m: int, n: int, *, local: bool) -> Iterator[tuple[int, int, str]]:
    """Every alignment of an ``m``-long query with an ``n``-long target: ``(i0, j0, ops)``,
    the 0-based start and the columns. Local alignments start and end with ``M`` (the empty
    one is not listed)."""
    def extend(i: int, j: int, ops: list[str]) -> Iterator[str]:
        if local:
            if ops and ops[-1] == "M":
                yield "".join(ops)
        elif i == m and j == n:
            yield "".join(ops)
        for op, di, dj in (("M", 1, 1), ("X", 1, 0), ("Y", 0, 1)):
            if i + di <= m and j + dj <= n:
                ops.append(op)
                yield from extend(i + di, j + dj, ops)
                ops.pop()

    if not local:
        for ops in extend(0, 0, []):
            yield 0, 0, ops
        return
    for i0 in range(m):
        for j0 in range(n):
            for ops in extend(i0 + 1, j0 + 1, ["M"]):
                yield i0, j0, ops


def score(S: np.ndarray, go: float, ge: float, i0: int, j0: int, ops: str,
          ends: tuple[float, float] | None = None) -> tuple[float, list]:
    """The score of one alignment and its ``M`` cells (0-based); ``ends``: the end gaps'
    open and extend scores (a global alignment's runs before the first or after the last
    residue of the other sequence)."""
    m, n = S.shape
    total, cells, i, j, prev = 0.0, [], i0, j0, ""
    for op in ops:
        if op == "M":
            total += float(S[i, j])
            cells.append((i, j))
            i, j = i + 1, j + 1
        else:
            at_end = ends is not None and ((j in (0, n)) if op == "X" else (i in (0, m)))
            o, e = ends if at_end else (go, ge)
            total += e if op == prev else o
            i, j = (i + 1, j) if op == "X" else (i, j + 1)
        prev = op
    return total, cells


def enumerated(S, go: float, ge: float, *, local: bool, temperature: float = 1.0,
               eo: float | None = None, ee: float | None = None
               ) -> tuple[float, np.ndarray, float]:
    """``(ln Z, P, best score)`` by listing every alignment (tiny inputs only); ``eo``,
    ``ee``: end gap scores (global; default: as inner gaps).

    >>> S = np.array([[1.0, -1.0, -1.0]])          # "A" against "ACC", end gaps free
    >>> z, P, best = enumerated(S, -2.0, -1.0, local=False, eo=0.0, ee=0.0)
    >>> best, round(float(P[0, 0]), 4)
    (1.0, 0.4748)
    """
    S = np.asarray(S, dtype=np.float64)
    m, n = S.shape
    ends = None if local or eo is None else (eo, ee)
    found = [score(S, go, ge, i0, j0, ops, ends) for i0, j0, ops in alignments(m, n, local=local)]
    if local:
        found.append((0.0, []))                       # the empty alignment
    logs = [s / temperature for s, _ in found]
    log_z = _lse(*logs)
    P = np.zeros((m, n))
    for lw, (_, cells) in zip(logs, found):
        w = math.exp(lw - log_z)
        for i, j in cells:
            P[i, j] += w
    return log_z, P, max(s for s, _ in found)


def forward_backward(S, go: float, ge: float, *, local: bool, temperature: float = 1.0
                     ) -> tuple[float, np.ndarray]:
    """``(ln Z, P)`` by the O(m n) forward and backward recurrences in Python floats.

    Forward ``F`` (log sums over alignment prefixes ending in each state at each cell) is the
    recurrence of :mod:`jaxrna.align.reference` with ``max`` replaced by log-sum-exp;
    backward ``B`` sums the completions; ``P[i, j] = exp(F_M + B_M - ln Z)``.
    """
    S = np.asarray(S, dtype=np.float64) / temperature
    go, ge = go / temperature, ge / temperature
    m, n = S.shape
    FM, FX, FY = (np.full((m + 1, n + 1), NEG_INF) for _ in range(3))
    if not local:
        FM[0, 0] = 0.0
        for j in range(1, n + 1):
            FY[0, j] = go + (j - 1) * ge
        for i in range(1, m + 1):
            FX[i, 0] = go + (i - 1) * ge
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            hd = _lse(FM[i - 1, j - 1], FX[i - 1, j - 1], FY[i - 1, j - 1])
            if local:
                hd = _lse(hd, 0.0)
            FM[i, j] = hd + S[i - 1, j - 1]
            FX[i, j] = _lse(FM[i - 1, j] + go, FX[i - 1, j] + ge, FY[i - 1, j] + go)
            FY[i, j] = _lse(FM[i, j - 1] + go, FY[i, j - 1] + ge, FX[i, j - 1] + go)
    if local:
        log_z = _lse(0.0, *FM[1:, 1:].ravel())
    else:
        log_z = _lse(FM[m, n], FX[m, n], FY[m, n])
    BM, BX, BY = (np.full((m + 2, n + 2), NEG_INF) for _ in range(3))
    for i in range(m, -1, -1):
        for j in range(n, -1, -1):
            end_m = 0.0 if local or (i == m and j == n) else NEG_INF
            end_g = 0.0 if (not local and i == m and j == n) else NEG_INF
            diag = S[i, j] + BM[i + 1, j + 1] if (i < m and j < n) else NEG_INF
            down_o = go + BX[i + 1, j] if i < m else NEG_INF
            down_e = ge + BX[i + 1, j] if i < m else NEG_INF
            right_o = go + BY[i, j + 1] if j < n else NEG_INF
            right_e = ge + BY[i, j + 1] if j < n else NEG_INF
            BM[i, j] = _lse(end_m, diag, down_o, right_o)
            BX[i, j] = _lse(end_g, diag, down_e, right_o)
            BY[i, j] = _lse(end_g, diag, down_o, right_e)
    return float(log_z), np.exp(FM[1:, 1:] + BM[1:m + 1, 1:n + 1] - log_z)
