"""A slow, plain implementation of the whole miRanda 3.3a scan, the oracle of the fast engine.

It states ``../shared/specs/miranda.md`` step by step on full matrices, in the order miRanda's
own code works (``build_matrix``, ``nullify_overlaps``, ``traceback``, ``testfor_overlap``, the
strict check, the energy filter), with nothing batched, windowed or vectorised.

>>> from jaxrna.targets.scoring import ScanParams
>>> hits = scan_pair("GTGAGATCATTTTGAAAGCTG", "TAGTTTTCACAATGATCTCGG", ScanParams(no_energy=True))
>>> [(h.score, h.q_start, h.q_end, h.r_start, h.r_end) for h in hits]
[(167, 2, 20, 1, 21)]
>>> print(hits[0].aln_mirna); print(hits[0].aln_map); print(hits[0].aln_target)
gtCGAAAGTTTTACTAGAGTg
  |:||||| |||||||||: 
taGTTTTCACAATGATCTCGg
"""

from __future__ import annotations

from typing import Callable

from jaxrna.targets.records import Hit
from jaxrna.targets.scoring import DIAGONAL_SPREAD, SPAN_OVERLAP, ScanParams, pair_score, pair_symbol

#: miRanda's base lookup (case-insensitive; T = U; every other IUPAC code is 4).
_CODE = {"A": 0, "C": 1, "G": 2, "U": 3, "T": 3}


def base_code(ch: str) -> int:
    return _CODE.get(ch.upper(), 4)


def fill(query: str, target: str, params: ScanParams):
    """miRanda's matrices for ``query`` (as read, 5'->3') against ``target``.

    Returns ``(best, track, candidates)``: ``best[i][j]`` and ``track[k][i][j]`` (k = 0 best's
    state, 1 a's predecessor, 2 b's, 3 c's; 1 = a, 2 = b, 3 = c, 0 = none) over rows/columns
    0..n/0..m, and the candidate cells ``(score, i, j)`` in scan order.
    """
    seq1 = query[::-1]  # row 1 = the miRNA 3' end
    n, m = len(seq1), len(target)
    length_3p = n - 8

    def weighted(i: int) -> bool:
        return not (i <= length_3p or i == n)

    # position-specific pair scores
    nt = [[0] * (m + 1) for _ in range(n + 1)]
    if n > 3:
        for i in range(3, n):
            for j in range(1, m + 1):
                s = pair_score(base_code(seq1[i - 1]), base_code(target[j - 1]))
                nt[i][j] = params.seed_score(s) if weighted(i) else s

    a = [[0] * (m + 1) for _ in range(n + 1)]
    b = [[0] * (m + 1) for _ in range(n + 1)]
    c = [[0] * (m + 1) for _ in range(n + 1)]
    best = [[0] * (m + 1) for _ in range(n + 1)]
    track = [[[0] * (m + 1) for _ in range(n + 1)] for _ in range(4)]
    candidates = []
    for i in range(1, n + 1):
        in_seed = weighted(i)
        gap_open = params.seed_open if in_seed else params.gap_open
        gap_ext = params.seed_extend if in_seed else params.gap_extend
        for j in range(1, m + 1):
            # state a: miRNA base i opposite target base j
            pa, pb, pc = a[i - 1][j - 1], b[i - 1][j - 1], c[i - 1][j - 1]
            if pa >= pb and pa >= pc:
                prev, t1 = pa, 1
            elif pb >= pc:
                prev, t1 = pb, 2
            else:
                prev, t1 = pc, 3
            a[i][j] = prev + nt[i][j]
            track[1][i][j] = t1
            if a[i][j] <= 0:
                a[i][j] = 0
                track[1][i][j] = 0
            # state b: extra target base (gap in the miRNA)
            open_b, ext_b = a[i][j - 1] + gap_open, b[i][j - 1] + gap_ext
            if ext_b > open_b:
                b[i][j], track[2][i][j] = ext_b, 2
            else:
                b[i][j], track[2][i][j] = open_b, 1
            # state c: extra miRNA base (gap in the target); never in seed rows
            if not in_seed:
                open_c, ext_c = a[i - 1][j] + gap_open, c[i - 1][j] + gap_ext
                if ext_c > open_c:
                    c[i][j], track[3][i][j] = ext_c, 3
                else:
                    c[i][j], track[3][i][j] = open_c, 1
            else:
                c[i][j], track[3][i][j] = -1, 1
            va, vb, vc = a[i][j], b[i][j], c[i][j]
            if va >= vb and va >= vc:
                top, t0 = va, 1
            elif vb >= vc:
                top, t0 = vb, 2
            else:
                top, t0 = vc, 3
            if top <= 0:
                top, t0 = 0, 0
            best[i][j], track[0][i][j] = top, t0
            if top >= params.score_threshold and t0 != 2:
                candidates.append((top, i, j))
    return best, track, candidates


def select_candidates(candidates: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Stable sort (score descending, target end ascending), then drop near diagonals."""
    ranked = sorted(candidates, key=lambda c: (-c[0], c[2]))
    alive = [True] * len(ranked)
    for k, (_, i, j) in enumerate(ranked):
        if not alive[k]:
            continue
        for k2 in range(k + 1, len(ranked)):
            _, i2, j2 = ranked[k2]
            if abs((j2 - i2) - (j - i)) <= DIAGONAL_SPREAD:
                alive[k2] = False
    return [cand for cand, keep in zip(ranked, alive) if keep]


def traceback(best, track, seq1: str, target: str, i: int, j: int):
    """Follow the recorded states back from ``(i, j)``; returns the columns and end point.

    Columns are ``(miRNA char, symbol, target char)`` from the hit's end backwards.
    """
    cols = []
    state = track[0][i][j]
    while best[i][j] > 0:
        if state == 1:
            cols.append((seq1[i - 1], pair_symbol(base_code(seq1[i - 1]), base_code(target[j - 1])),
                         target[j - 1]))
            state = track[1][i][j]
            i, j = i - 1, j - 1
        elif state == 2:
            cols.append(("-", " ", target[j - 1]))
            state = track[2][i][j]
            j -= 1
        elif state == 3:
            cols.append((seq1[i - 1], " ", "-"))
            state = track[3][i][j]
            i -= 1
        else:
            break
    return cols, i, j


def strict_seed_ok(rest3: str, aln_rev: str, rest0: str, rest5: str, map_rev: str, rest2: str) -> bool:
    """miRanda's ``-strict`` test, on the strings it builds (alignment in traceback order)."""
    query = rest3 + aln_rev + rest0
    middle = rest5 + map_rev + rest2
    mypos = non_gap = perfect = gaps = 0
    for k in range(len(query)):
        if query[k] != "-":
            mypos += 1
        if 2 <= mypos <= 8:
            if middle[k] != " ":
                non_gap += 1
            if middle[k] == "|":
                perfect += 1
            if query[k] == "-":
                gaps += 1
        if mypos == 8:
            break
    return not (non_gap < 7 or perfect < 7 or gaps > 0)


def scan_pair(query: str, target: str, params: ScanParams,
              energy: Callable[[str], float] | None = None) -> list[Hit]:
    """The accepted hits of one miRNA (``query``, 5'->3') against one target, in miRanda's order.

    ``energy`` folds a duplex string (default :func:`jaxrna.targets.energy.fold_energy`); it is
    not called with ``params.no_energy``.
    """
    if energy is None and not params.no_energy:
        from jaxrna.targets.energy import fold_energy as energy
    seq1 = query[::-1]
    n, m = len(seq1), len(target)
    best, track, candidates = fill(query, target, params)
    accepted_spans: list[tuple[int, int]] = []
    hits = []
    for score, i_end, j_end in select_candidates(candidates):
        cols, i0, j0 = traceback(best, track, seq1, target, i_end, j_end)
        query_start, query_end, ref_start, ref_end = i0, i_end, j0, j_end
        # span overlap with hits accepted so far (even those later failing strict / energy)
        good = all(min(e, ref_end) - max(s, ref_start) + 1 <= SPAN_OVERLAP for s, e in accepted_spans)
        if good:
            accepted_spans.append((ref_start, ref_end))
        # unaligned ends: rest0/1/2 at the miRNA 3' end, rest3/4/5 at its 5' end
        rest0 = rest1 = rest2 = rest3 = rest4 = rest5 = ""
        off3 = off5 = 0
        for k in range(query_start):
            rest0 += seq1[k].lower()
            pos = ref_start - (query_start - k)
            if pos >= 0:
                rest1 += target[pos].lower()
                off3 += 1
            else:
                rest1 += "-"
            rest2 += " "
        for k in range(query_end, n):
            rest3 += seq1[k].lower()
            pos = ref_end + (k - query_end)
            if pos < m:
                rest4 += target[pos].lower()
                off5 += 1
            else:
                rest4 += "-"
            rest5 += " "
        aln_q = "".join(c[0] for c in cols).upper()   # traceback order
        aln_m = "".join(c[1] for c in cols)
        aln_t = "".join(c[2] for c in cols).upper()
        if params.strict and not strict_seed_ok(rest3, aln_q, rest0, rest5, aln_m, rest2):
            good = False
        aln_mirna = rest0 + aln_q[::-1] + rest3
        aln_target = rest1 + aln_t[::-1] + rest4
        if params.no_energy:
            e = -1000000.0
        else:
            fold = (rest0 + aln_q[::-1].replace("-", "") + rest3 + "XXXXXXX"
                    + rest4[::-1] + aln_t.replace("-", "") + rest1[::-1])
            e = energy(fold)
        if e < params.energy_threshold and good:
            hits.append(Hit(
                score=score, energy=None if params.no_energy else e, mirna_len=n,
                row_start=query_start, row_end=query_end, col_start=ref_start, col_end=ref_end,
                ref_display_start=ref_start - off3 + 1, ref_display_end=ref_end + off5,
                aln_mirna=aln_mirna, aln_map=rest2 + aln_m[::-1] + rest5, aln_target=aln_target,
                aln_len=len(cols), matches=aln_m.count("|"), wobbles=aln_m.count(":")))
    return hits
