"""The definition: three-state Gotoh in plain Python, with the tie rules every fast path follows.

States at cell (i, j) (query position i, target position j, 1-based):

- ``M``: query i aligned with target j: ``M = H(i-1, j-1) + s(q_i, t_j)``, where
  ``H = max(M, X, Y)``; in local mode ``M = max(0, H(i-1, j-1)) + s`` (0 starts an alignment).
- ``X``: query i against a gap (``I`` in a CIGAR, the query has an extra residue):
  ``X = max(M(i-1, j) - open, X(i-1, j) - extend, Y(i-1, j) - open)``.
- ``Y``: target j against a gap (``D``): ``Y = max(M(i, j-1) - open, Y(i, j-1) - extend,
  X(i, j-1) - open)``.

Global: ``M(0, 0) = 0``, everything else on row 0 and column 0 follows from the recurrences
(end gaps cost the same as inner ones); the score is ``H(m, n)``. With end gaps scored apart
(:func:`jaxrna.align.scoring.with_end_gaps`; EMBOSS needle's ``-endopen``/``-endextend``, or
free end gaps, needle's default), a gap before the first or after the last residue of either
sequence costs the end penalties instead: the border runs (row 0, column 0), the X runs of the
last column and the Y runs of the last row (a gap there can only run on to the corner). The
score is still ``H(m, n)``, the traceback starts there and writes the end gaps as gap columns;
with free end gaps ``H(m, n)`` is the best over the last row and column. Local: the border is minus
infinity and the score is the largest ``M`` (0 and an empty alignment when none is positive).
This is Biopython's ``PairwiseAligner`` (a run of same-direction gap columns is one gap, even
when ``open < extend``; a deletion may follow an insertion directly).

Tie rules (shared with the JAX and Pallas paths): ``H`` prefers M, then X, then Y; ``X``
prefers opening from M, then extending, then opening from Y; ``Y`` prefers M, then
extending, then X; local ``M`` starts afresh when ``H(i-1, j-1) <= 0``; the local end is the
largest ``M`` with the smallest i, then the smallest j.

>>> from jaxrna.align.scoring import match_mismatch
>>> r = gotoh("GATTACA", "GCATGCU", match_mismatch(1, -1, 1, 1), local=False)
>>> r.score, r.ops
(0, 'MDMIMMMM')
>>> from jaxrna.align.scoring import with_end_gaps
>>> r = gotoh("ACGTACGT", "TTACGTACGTTT", with_end_gaps(match_mismatch(1, -1, 2, 1), "free"))
>>> r.score, r.ops                                  # the query inside the target: no cost
(8, 'DDMMMMMMMMDD')
"""

from __future__ import annotations

from dataclasses import dataclass

from jaxrna.align.scoring import Scoring

INF = float("inf")


@dataclass(frozen=True)
class RefResult:
    """Score (integer units) and the alignment as 0-based half-open ranges plus ops.

    ``ops`` is a string over ``M`` (aligned pair), ``I`` (query residue, gap in the target)
    and ``D`` (target residue, gap in the query).
    """

    score: int
    query_start: int
    query_end: int
    target_start: int
    target_end: int
    ops: str


def _h(m, x, y):
    best = max(m, x, y)
    return best, (0 if m == best else 1 if x == best else 2)


def gotoh(query: str, target: str, scoring: Scoring, local: bool = False) -> RefResult:
    """Align two strings by the definition above (slow: for tests and tiny inputs)."""
    q = scoring.encode(query)
    t = scoring.encode(target)
    mat, go, ge = scoring.matrix, scoring.open_score, scoring.extend_score
    eo, ee = (scoring.end_open_score, scoring.end_extend_score) if not local else (go, ge)
    m, n = len(q), len(t)
    M = [[-INF] * (n + 1) for _ in range(m + 1)]
    X = [[-INF] * (n + 1) for _ in range(m + 1)]
    Y = [[-INF] * (n + 1) for _ in range(m + 1)]
    src = [[None] * (n + 1) for _ in range(m + 1)]  # (hsrc, xsrc, ysrc, start)
    if not local:
        M[0][0] = 0
        for j in range(1, n + 1):
            Y[0][j] = eo + (j - 1) * ee
        for i in range(1, m + 1):
            X[i][0] = eo + (i - 1) * ee
    best, bi, bj = -INF, 0, 0
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            hd, _ = _h(M[i - 1][j - 1], X[i - 1][j - 1], Y[i - 1][j - 1])
            start = False
            if local and hd <= 0:
                hd, start = 0, True
            M[i][j] = hd + int(mat[q[i - 1], t[j - 1]])
            xo, xe = (eo, ee) if j == n else (go, ge)      # the last column: trailing gaps
            cm, cx, cy = M[i - 1][j] + xo, X[i - 1][j] + xe, Y[i - 1][j] + xo
            X[i][j] = max(cm, cx, cy)
            xsrc = 0 if cm == X[i][j] else 1 if cx == X[i][j] else 2
            yo, ye = (eo, ee) if i == m else (go, ge)      # the last row
            cm, cy, cx = M[i][j - 1] + yo, Y[i][j - 1] + ye, X[i][j - 1] + yo
            Y[i][j] = max(cm, cy, cx)
            ysrc = 0 if cm == Y[i][j] else 2 if cy == Y[i][j] else 1
            _, hsrc = _h(M[i][j], X[i][j], Y[i][j])
            src[i][j] = (hsrc, xsrc, ysrc, start)
            if local and M[i][j] > best:
                best, bi, bj = M[i][j], i, j
    if local:
        if best <= 0:
            return RefResult(0, 0, 0, 0, 0, "")
        i, j, state, score = bi, bj, 0, int(best)
    else:
        score, state = _h(M[m][n], X[m][n], Y[m][n])
        i, j, score = m, n, int(score)
    ops: list[str] = []
    while i > 0 or j > 0:
        if i == 0 or j == 0:  # global border: one gap back to the origin
            ops.extend("D" * j + "I" * i)
            i = j = 0
            break
        hsrc, xsrc, ysrc, start = src[i][j]
        if state == 0:
            ops.append("M")
            i, j = i - 1, j - 1
            if start:
                break
            if i > 0 and j > 0:
                state = src[i][j][0]
        elif state == 1:
            ops.append("I")
            i, state = i - 1, xsrc
        else:
            ops.append("D")
            j, state = j - 1, ysrc
    ops.reverse()
    if local:
        return RefResult(score, i, bi, j, bj, "".join(ops))
    return RefResult(score, 0, m, 0, n, "".join(ops))


def rescore(query: str, target: str, scoring: Scoring, query_start: int, target_start: int,
            ops: str) -> int:
    """The score of an explicit alignment (ops over M/I/D from the given 0-based starts).

    A run of same-direction gap columns is one gap; ``I`` then ``D`` are two gaps. A run
    before the first or after the last residue of the other sequence is an end gap (its
    penalties are the scheme's end gap penalties) when the alignment is global (it spans both
    sequences). Raises ``ValueError`` if the ops run past either sequence.

    >>> from jaxrna.align.scoring import match_mismatch, with_end_gaps
    >>> sc = with_end_gaps(match_mismatch(1, -1, 2, 1), end_open=1, end_extend=0)
    >>> rescore("ACGT", "TTACG", sc, 0, 0, "DDMMMI")    # end gaps 1 + 1, inner none
    1
    """
    q = scoring.encode(query)
    t = scoring.encode(target)
    whole = (query_start == 0 and target_start == 0 and ops.count("M") + ops.count("I") == len(q)
             and ops.count("M") + ops.count("D") == len(t))
    ends = whole and scoring.separate_end_gaps
    i, j, total, prev = query_start, target_start, 0, ""
    for op in ops:
        if op == "M":
            if i >= len(q) or j >= len(t):
                raise ValueError("alignment runs past the end of a sequence")
            total += int(scoring.matrix[q[i], t[j]])
            i, j = i + 1, j + 1
        elif op in "ID":
            if op == "I":
                if i >= len(q):
                    raise ValueError("alignment runs past the end of the query")
                i += 1
            else:
                if j >= len(t):
                    raise ValueError("alignment runs past the end of the target")
                j += 1
            # I keeps j and D keeps i: no residue of the other sequence yet, or all of them
            if ends and ((j in (0, len(t))) if op == "I" else (i in (0, len(q)))):
                total += scoring.end_extend_score if prev == op else scoring.end_open_score
            else:
                total += scoring.extend_score if prev == op else scoring.open_score
        else:
            raise ValueError(f"unknown op {op!r}")
        prev = op
    return total
