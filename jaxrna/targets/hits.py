"""From filled segments to miRanda's hits: candidate extraction, the stable sort, the diagonal
filter, the traceback, the span-overlap filter, the strict seed test and the hit strings.

Everything here is per whole target (never per window or segment): the candidates of all the
segments of one (miRNA, target) pair are pooled before sorting and filtering, exactly as
miRanda sorts the candidates of its whole matrix.

Coordinates are miRanda's: row ``i`` = 1..n over the reversed miRNA, column ``j`` = 1..m.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from jaxrna.targets.records import Hit
from jaxrna.targets.scoring import DIAGONAL_SPREAD, SEED_FIRST, SEED_LAST, SPAN_OVERLAP, ScanParams

_SYMBOL = np.full((5, 5), " ", dtype="<U1")
for _q, _t in ((0, 3), (3, 0), (1, 2), (2, 1)):
    _SYMBOL[_q, _t] = "|"
for _q, _t in ((2, 3), (3, 2)):
    _SYMBOL[_q, _t] = ":"


@dataclass
class Segment:
    """Filled matrices of target columns ``start + 1 .. start + L`` for one miRNA (rows padded
    at the top by ``pad`` rows): ``best`` (L, N) and unpacked track codes ``t0..t3`` (L, N)."""

    start: int
    best: np.ndarray
    t0: np.ndarray
    t1: np.ndarray
    t2: np.ndarray
    t3: np.ndarray
    pad: int

    def candidates(self, first: int, last: int, threshold: int):
        """Candidate cells ``(score, i, j)`` in target columns ``first..last`` (1-based)."""
        lo, hi = first - self.start - 1, last - self.start
        best = self.best[lo:hi, self.pad:]
        keep = (best >= threshold) & (self.t0[lo:hi, self.pad:] != 2)
        cols, rows = np.nonzero(keep)
        return best[cols, rows], rows + 1, cols + first


def rank_candidates(scores: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Order of candidates: score descending, then target end ascending, then scan order
    (row-major: row, then column) - a stable sort of miRanda's row-major candidate list."""
    return np.lexsort((rows, cols, -scores.astype(np.int64)))


def diagonal_filter(rows: np.ndarray, cols: np.ndarray) -> list[int]:
    """Indices (into the ranked arrays) surviving: each survivor, in rank order, removes every
    lower-ranked candidate whose diagonal (j - i) is within :data:`DIAGONAL_SPREAD` of its own."""
    diag = (cols - rows).astype(np.int64)
    alive = np.ones(len(diag), dtype=bool)
    keep = []
    for k in range(len(diag)):
        if not alive[k]:
            continue
        keep.append(k)
        alive[k + 1:] &= np.abs(diag[k + 1:] - diag[k]) > DIAGONAL_SPREAD
    return keep


def traceback(seg: Segment, n: int, i: int, j: int):
    """Follow the recorded states back from cell ``(i, j)``. Returns the traced columns from the
    hit's end backwards as ``(row or 0, column or 0)`` per alignment column (0 = gap on that
    side) and the cell where the trace stopped."""
    path = []
    r0 = seg.pad - 1  # padded row index of miRanda's row i is i + r0
    state = int(seg.t0[j - seg.start - 1, i + r0])
    while i > 0 and j > 0:
        c = j - seg.start - 1
        if c < 0:
            raise AssertionError("traceback left its segment (overlap too small)")
        if seg.best[c, i + r0] <= 0:
            break
        if state == 1:
            path.append((i, j))
            state = int(seg.t1[c, i + r0])
            i, j = i - 1, j - 1
        elif state == 2:
            path.append((0, j))
            state = int(seg.t2[c, i + r0])
            j -= 1
        elif state == 3:
            path.append((i, 0))
            state = int(seg.t3[c, i + r0])
            i -= 1
        else:
            break
    return path, i, j


def strict_seed_ok(query: str, middle: str) -> bool:
    """miRanda's ``-strict`` test on the strings it builds: ``query`` = the unaligned 5' end
    (lowercase, as stored), the aligned miRNA in traceback order (5' end first, '-' for gaps in
    the miRNA) and the unaligned 3' end; ``middle`` = the matching symbols. Counting miRNA bases
    from the start, positions 2..8 must all be '|' with no miRNA gap among them."""
    mypos = non_gap = perfect = gaps = 0
    for k in range(len(query)):
        if query[k] != "-":
            mypos += 1
        if SEED_FIRST <= mypos <= SEED_LAST:
            if middle[k] != " ":
                non_gap += 1
            if middle[k] == "|":
                perfect += 1
            if query[k] == "-":
                gaps += 1
        if mypos == SEED_LAST:
            break
    return not (non_gap < 7 or perfect < 7 or gaps > 0)


def build_hits(mirna: str, mirna_codes: np.ndarray, target: str, target_codes: np.ndarray,
               ranked: list[tuple[int, int, int, Segment]], params: ScanParams,
               energy: Callable[[str], float] | None) -> list[Hit]:
    """Trace the ranked, diagonal-filtered candidates of one pair in order and apply the span
    overlap, strict and energy filters. ``mirna_codes`` are the reversed miRNA's codes."""
    from jaxrna.targets.energy import duplex_string

    n, m = len(mirna), len(target)
    seq1 = mirna[::-1]
    spans: list[tuple[int, int]] = []
    hits = []
    for score, i_end, j_end, seg in ranked:
        path, i0, j0 = traceback(seg, n, i_end, j_end)
        good = all(min(e, j_end) - max(s, j0) + 1 <= SPAN_OVERLAP for s, e in spans)
        if good:
            spans.append((j0, j_end))
        q_rev, m_rev, t_rev = [], [], []  # traceback order: the miRNA 5' end first
        for i, j in path:
            if i and j:
                q_rev.append(seq1[i - 1])
                m_rev.append(_SYMBOL[mirna_codes[i - 1], target_codes[j - 1]])
                t_rev.append(target[j - 1])
            elif j:
                q_rev.append("-")
                m_rev.append(" ")
                t_rev.append(target[j - 1])
            else:
                q_rev.append(seq1[i - 1])
                m_rev.append(" ")
                t_rev.append("-")
        q_rev, m_rev, t_rev = "".join(q_rev).upper(), "".join(m_rev), "".join(t_rev).upper()
        if params.strict and good:
            rest3, rest0 = seq1[i_end:].lower(), seq1[:i0].lower()
            good = strict_seed_ok(rest3 + q_rev + rest0, " " * len(rest3) + m_rev + " " * len(rest0))
        if not good:
            continue
        left = i0                      # unaligned rows at the miRNA 3' end
        right = n - i_end              # unaligned rows at the miRNA 5' end
        lo = j0 - left
        left_t = "".join(target[p].lower() if p >= 0 else "-" for p in range(lo, j0))
        right_t = "".join(target[p].lower() if p < m else "-" for p in range(j_end, j_end + right))
        aln_mirna = seq1[:i0].lower() + q_rev[::-1] + seq1[i_end:].lower()
        aln_map = " " * left + m_rev[::-1] + " " * right
        aln_target = left_t + t_rev[::-1] + right_t
        if params.no_energy:
            e = None
        else:
            e = energy(duplex_string(aln_mirna, aln_target, left, right))
            if not e < params.energy_threshold:
                continue
        matches = aln_map.count("|")
        hits.append(Hit(
            score=int(score), energy=e, mirna_len=n, row_start=i0, row_end=i_end,
            col_start=j0, col_end=j_end,
            ref_display_start=max(lo, 0) + 1, ref_display_end=min(j_end + right, m),
            aln_mirna=aln_mirna, aln_map=aln_map, aln_target=aln_target,
            aln_len=len(path), matches=matches, wobbles=aln_map.count(":")))
    return hits
