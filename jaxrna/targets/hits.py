"""miRanda's filters as whole-array steps, and the host-side traceback of filled segments.

- :func:`diagonal_survivors` and :func:`span_registered`: the diagonal filter and the span
  overlap filter over candidates sorted by pair, then rank, for many pairs at once (the greedy
  filters run in rounds: round r settles every pair's r-th survivor).
- :func:`strict_seed_ok`: the ``--strict`` test on miRanda's strings.
- :class:`SegmentBatch`, :func:`trace`: candidates and tracebacks
  from full matrices on the host (used where gaps are free and a whole target is one lane;
  otherwise the device extracts and traces, :mod:`jaxrna.targets.extract`).

Everything is per whole target (never per lane or segment), as miRanda sorts the candidates of
its whole matrix.

Coordinates are miRanda's: row ``i`` = 1..n over the reversed miRNA, column ``j`` = 1..m.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jaxrna.targets.track import T0_MASK, T1_SHIFT, T2_BIT, T3_BIT
from jaxrna.targets.scoring import DIAGONAL_SPREAD, SEED_FIRST, SEED_LAST, SPAN_OVERLAP


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
