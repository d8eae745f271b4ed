"""From filled segments to miRanda's hits: candidate extraction, the stable sort, the diagonal
filter, the traceback, the span-overlap filter, the strict seed test and the hit strings.

Everything is per whole target (never per lane or segment): the candidates of all segments of
one (miRNA, target) pair are pooled before sorting and filtering, as miRanda sorts the
candidates of its whole matrix. The steps are vectorised over all the pairs of one miRNA: the
greedy filters run in rounds (round r settles every pair's r-th survivor at once), and the
traceback walks every survivor one step per round.

Coordinates are miRanda's: row ``i`` = 1..n over the reversed miRNA, column ``j`` = 1..m.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from jaxrna.targets.records import Hit
from jaxrna.targets.scan import T0_MASK, T1_SHIFT, T2_BIT, T3_BIT
from jaxrna.targets.scoring import (DIAGONAL_SPREAD, SEED_FIRST, SEED_LAST, SPAN_OVERLAP, ScanParams,
                                    pair_symbol)

#: Middle-line symbol of miRNA base code q against target base code t (0..4).
_SYMBOL = [[pair_symbol(q, t) for t in range(5)] for q in range(5)]


@dataclass
class SegmentBatch:
    """Full matrices of ``B`` segments of one miRNA: segment ``b`` covers target columns
    ``start[b] + 1 .. start[b] + L`` of target ``target[b]``; its candidates are wanted in
    columns ``first[b] .. last[b]`` (1-based). Rows are padded at the top by ``pad``."""

    best: np.ndarray    # (L, H, B)
    code: np.ndarray    # (L, H, B) packed track codes
    target: np.ndarray  # (B,)
    start: np.ndarray   # (B,)
    first: np.ndarray   # (B,)
    last: np.ndarray    # (B,)
    pad: int

    def candidates(self, threshold: int):
        """``(target, score, i, j, lane)`` of every candidate cell in the wanted columns."""
        live = self.best.shape[2]
        ok = (self.best[:, self.pad:, :live] >= threshold) & ((self.code[:, self.pad:, :live] & T0_MASK) != 2)
        c, r, b = np.nonzero(ok)
        j = self.start[b] + c + 1
        keep = (j >= self.first[b]) & (j <= self.last[b])
        c, r, b, j = c[keep], r[keep], b[keep], j[keep]
        return self.target[b], self.best[c, r + self.pad, b].astype(np.int64), r + 1, j, b


def rank(target, score, i, j):
    """Order grouping candidates by pair, then miRanda's rank: score descending, target end
    ascending, then scan order (row-major: row, then column) - its stable sort."""
    return np.lexsort((i, j, -score, target))


def _group_heads(keys: np.ndarray) -> np.ndarray:
    head = np.ones(len(keys), dtype=bool)
    head[1:] = keys[1:] != keys[:-1]
    return head


def diagonal_survivors(target: np.ndarray, diag: np.ndarray) -> np.ndarray:
    """Mask of candidates (sorted by pair, then rank) surviving the diagonal filter: in rank
    order each survivor removes every lower-ranked candidate of its pair whose diagonal
    (j - i) is within :data:`DIAGONAL_SPREAD` of its own."""
    keep = np.zeros(len(target), dtype=bool)
    idx = np.arange(len(target))
    while idx.size:
        head = _group_heads(target[idx])
        starts = np.flatnonzero(head)
        heads = idx[starts]
        keep[heads] = True
        hd = np.repeat(diag[heads], np.diff(np.append(starts, idx.size)))
        idx = idx[np.abs(diag[idx] - hd) > DIAGONAL_SPREAD]
    return keep


def trace(batch: SegmentBatch, lane: np.ndarray, i: np.ndarray, j: np.ndarray):
    """Trace every survivor back through its segment at once (state a steps diagonally, b left,
    c up, following the recorded predecessor state, while best > 0). Returns the moves
    ``(K, steps)`` (1 a, 2 b, 3 c, 0 after the end), the path lengths and the end cells."""
    i, j = i.copy(), j.copy()
    best, code, pad, start = batch.best, batch.code, batch.pad - 1, batch.start[lane]
    c = j - start - 1
    state = code[c, i + pad, lane].astype(np.int64) & T0_MASK
    active = np.ones(len(i), dtype=bool)
    moves, length = [], np.zeros(len(i), dtype=np.int64)
    while True:
        act = active & (i > 0) & (j > 0)
        c = j - start - 1
        if np.any(act & (c < 0)):
            raise AssertionError("traceback left its segment (overlap too small)")
        cc, rr = np.where(act, c, 0), np.where(act, i + pad, 0)
        act &= (best[cc, rr, lane] > 0) & (state != 0)
        if not act.any():
            break
        bits = code[cc, rr, lane].astype(np.int64)
        moves.append(np.where(act, state, 0).astype(np.int8))
        length += act
        diag_or_up = (state == 1) | (state == 3)
        diag_or_left = (state == 1) | (state == 2)
        nxt = np.where(state == 1, (bits >> T1_SHIFT) & 0x3,
                       np.where(state == 2, np.where(bits & T2_BIT, 2, 1), np.where(bits & T3_BIT, 3, 1)))
        i = np.where(act & diag_or_up, i - 1, i)
        j = np.where(act & diag_or_left, j - 1, j)
        state = np.where(act, nxt, state)
        active = act
    steps = np.stack(moves, axis=1) if moves else np.zeros((len(i), 0), np.int8)
    return steps, length, i, j


def span_registered(target: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Mask of traced survivors (sorted by pair, then rank) whose span ``[start, end]`` overlaps
    no earlier registered span of the same pair by more than :data:`SPAN_OVERLAP` positions
    (``min(end) - max(start) + 1``). Registered hits block later ones whatever happens to them
    afterwards (strict and energy filters)."""
    n = len(target)
    reg = np.zeros(n, dtype=bool)
    head = _group_heads(target)
    first = np.maximum.accumulate(np.where(head, np.arange(n), 0))
    pos = np.arange(n) - first
    for r in range(int(pos.max()) + 1 if n else 0):
        cur = np.flatnonzero(pos == r)
        ok = np.ones(cur.size, dtype=bool)
        for q in range(r):
            prev = cur - (r - q)
            over = np.minimum(end[prev], end[cur]) - np.maximum(start[prev], start[cur]) + 1
            ok &= ~(reg[prev] & (over > SPAN_OVERLAP))
        reg[cur] = ok
    return reg


def strict_seed_ok(query: str, middle: str) -> bool:
    """miRanda's ``-strict`` test on the strings it builds: ``query`` = the unaligned 5' end
    (as stored, in row order), the aligned miRNA in traceback order (5' end first, '-' for gaps
    in the miRNA) and the unaligned 3' end; ``middle`` = the matching symbols. Counting miRNA
    bases from the start, positions 2..8 must all be '|' with no miRNA gap among them."""
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


def make_hit(mirna: str, mirna_codes, target: str, target_codes, score: int, i_end: int, j_end: int,
             moves, i0: int, j0: int, params: ScanParams):
    """The hit traced from ``(i_end, j_end)`` with ``moves`` (traceback order), or None when the
    strict test rejects it; its energy is left to the caller. ``mirna_codes`` are the reversed
    miRNA's codes."""
    n, m = len(mirna), len(target)
    seq1 = mirna[::-1]
    q_rev, m_rev, t_rev = [], [], []  # traceback order: the miRNA 5' end first
    i, j = i_end, j_end
    for move in moves:
        if move == 1:
            q_rev.append(seq1[i - 1])
            m_rev.append(_SYMBOL[mirna_codes[i - 1]][target_codes[j - 1]])
            t_rev.append(target[j - 1])
            i, j = i - 1, j - 1
        elif move == 2:
            q_rev.append("-")
            m_rev.append(" ")
            t_rev.append(target[j - 1])
            j -= 1
        else:
            q_rev.append(seq1[i - 1])
            m_rev.append(" ")
            t_rev.append("-")
            i -= 1
    q_rev, m_rev, t_rev = "".join(q_rev).upper(), "".join(m_rev), "".join(t_rev).upper()
    if params.strict:
        rest3, rest0 = seq1[i_end:].lower(), seq1[:i0].lower()
        if not strict_seed_ok(rest3 + q_rev + rest0, " " * len(rest3) + m_rev + " " * len(rest0)):
            return None
    left, right = i0, n - i_end          # unaligned rows at the miRNA 3' and 5' ends
    lo, hi = j0 - left, j_end + right
    left_t = ("-" * max(0, -lo)) + target[max(lo, 0):j0].lower()
    right_t = target[j_end:min(hi, m)].lower() + "-" * max(0, hi - m)
    aln_mirna = seq1[:i0].lower() + q_rev[::-1] + seq1[i_end:].lower()
    aln_map = " " * left + m_rev[::-1] + " " * right
    aln_target = left_t + t_rev[::-1] + right_t
    return Hit(score=int(score), energy=None, mirna_len=n, row_start=i0, row_end=i_end,
               col_start=j0, col_end=j_end, ref_display_start=max(lo, 0) + 1,
               ref_display_end=min(hi, m), aln_mirna=aln_mirna, aln_map=aln_map,
               aln_target=aln_target, aln_len=len(moves), matches=m_rev.count("|"),
               wobbles=m_rev.count(":"))


def select_hits(batches: list[SegmentBatch], mirna: str, mirna_codes, targets, params: ScanParams,
                energy) -> dict[int, list[Hit]]:
    """Accepted hits of one miRNA against the targets its segments cover: ``{target: hits}``.
    ``targets[t]`` has ``sequence`` and ``codes``."""
    parts = [b.candidates(params.score_threshold) for b in batches]
    if not parts:
        return {}
    tgt = np.concatenate([p[0] for p in parts])
    if tgt.size == 0:
        return {}
    score = np.concatenate([p[1] for p in parts])
    i = np.concatenate([p[2] for p in parts])
    j = np.concatenate([p[3] for p in parts])
    lane = np.concatenate([p[4] for p in parts])
    owner = np.concatenate([np.full(len(p[0]), k) for k, p in enumerate(parts)])
    order = rank(tgt, score, i, j)
    tgt, score, i, j, lane, owner = tgt[order], score[order], i[order], j[order], lane[order], owner[order]
    keep = diagonal_survivors(tgt, j - i)
    tgt, score, i, j, lane, owner = tgt[keep], score[keep], i[keep], j[keep], lane[keep], owner[keep]
    # trace every survivor, batch by batch
    steps = [None] * len(tgt)
    length = np.zeros(len(tgt), np.int64)
    i0 = np.zeros(len(tgt), np.int64)
    j0 = np.zeros(len(tgt), np.int64)
    for k, batch in enumerate(batches):
        sel = np.flatnonzero(owner == k)
        if sel.size == 0:
            continue
        mv, ln, ii, jj = trace(batch, lane[sel], i[sel], j[sel])
        length[sel], i0[sel], j0[sel] = ln, ii, jj
        for x, row, n in zip(sel.tolist(), mv.tolist(), ln.tolist()):
            steps[x] = row[:n]
    registered = span_registered(tgt, j0, j)
    made = []
    for x in np.flatnonzero(registered).tolist():
        t = int(tgt[x])
        tg = targets[t]
        hit = make_hit(mirna, mirna_codes, tg.sequence, tg.codes, int(score[x]), int(i[x]), int(j[x]),
                       steps[x], int(i0[x]), int(j0[x]), params)
        if hit is not None:
            made.append((t, hit))
    if not params.no_energy:  # the energy filter, all of this miRNA's hits at once
        from jaxrna.targets.energy import duplex_string, fold_energies

        folds = [duplex_string(h.aln_mirna, h.aln_target, h.row_start, h.mirna_len - h.row_end)
                 for _, h in made]
        energies = fold_energies(folds, energy)
        made = [(t, replace(h, energy=e)) for (t, h), e in zip(made, energies)
                if e < params.energy_threshold]
    out: dict[int, list[Hit]] = {}
    for t, hit in made:
        out.setdefault(t, []).append(hit)
    return out
