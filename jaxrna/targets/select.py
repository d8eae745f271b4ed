"""Hit selection on the host, from traced candidates: miRanda's sort, filters and hit strings.

The device (:mod:`jaxrna.targets.extract`) hands over every candidate cell with its traceback
already walked (:class:`Traced`: end cell, start cell, score and the moves, 2 bits each). This
module does the rest with whole-array NumPy operations over all the (miRNA, target) pairs of a
batch at once:

1. the stable sort (score descending, target end ascending, then scan order: row, column);
2. the diagonal filter and the span-overlap filter (:mod:`jaxrna.targets.hits`), per pair, in
   rounds (round r settles every pair's r-th survivor);
3. the strict seed test (``--strict``);
4. the alignment strings of every accepted hit, built as three byte arrays and cut per hit.

Everything is per whole target, never per lane or segment. NumPy only (no JAX), so it runs in
worker processes. Coordinates are miRanda's: row ``i`` = 1..n over the reversed miRNA, column
``j`` = 1..m.

>>> import numpy as np
>>> tr = Traced.from_moves(q=[0], t=[0], i=[4], j=[4], score=[20], moves=[[1, 1, 1, 1]])
>>> table = select(tr, ["UUUU"], TargetText.from_sequences(["AAAA"]))
>>> table.aln_mirna, table.aln_map, table.aln_target
(['UUUU'], ['||||'], ['AAAA'])
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from jaxrna.alphabet import CODE_OF_BYTE
from jaxrna.targets.hits import diagonal_survivors, span_registered, strict_seed_ok, trace
from jaxrna.targets.records import Hit
from jaxrna.targets.scoring import pair_symbol

#: Moves per packed word (2 bits each): 1 a (diagonal), 2 b (left), 3 c (up), 0 none.
MOVES_PER_WORD = 16
#: Leading columns of a fetched candidate row: q, t, i, j, i0, j0, score, nsteps, and a column
#: of the device's own (the move words follow).
ROW_FIELDS = 9
_SYMBOL = np.array([[ord(pair_symbol(q, t)) for t in range(5)] for q in range(5)], dtype=np.uint8)
_SPACE, _DASH = ord(" "), ord("-")


@dataclass
class Traced:
    """Candidate cells with their tracebacks (arrays of one length K, any order).

    ``q`` indexes the caller's miRNAs, ``t`` the targets; ``(i, j)`` is the candidate (end)
    cell, the traceback stopped at ``(i0, j0)`` (aligned rows ``i0+1..i``, columns
    ``j0+1..j``) after ``nsteps`` moves; ``moves[k, s // 16]`` holds move ``s`` (0 = the move
    out of the end cell) in bits ``2 (s % 16)``.
    """

    q: np.ndarray
    t: np.ndarray
    i: np.ndarray
    j: np.ndarray
    i0: np.ndarray
    j0: np.ndarray
    score: np.ndarray
    nsteps: np.ndarray
    moves: np.ndarray  # (K, words) uint32

    def __len__(self) -> int:
        return len(self.q)

    def __reduce__(self):
        """Pickled as one int32 matrix (block jobs cross to worker processes)."""
        cols = [getattr(self, f.name) for f in fields(self) if f.name != "moves"]
        matrix = np.empty((len(self.q), len(cols) + self.moves.shape[1]), np.int32)
        for k, col in enumerate(cols):
            matrix[:, k] = col
        matrix[:, len(cols):] = self.moves.view(np.int32) if self.moves.dtype == np.uint32 else self.moves
        return (_traced_from_matrix, (matrix,))

    def take(self, idx) -> "Traced":
        return Traced(*(getattr(self, f.name)[idx] for f in fields(self)))

    def part(self, lo: int, hi: int) -> "Traced":
        """The candidates of miRNAs ``lo..hi-1`` (``q`` sorted), ``q`` counted from ``lo``."""
        a, b = self.q.searchsorted([lo, hi]).tolist()
        sub = self.take(slice(a, b))
        sub.q = sub.q - lo
        return sub

    @staticmethod
    def from_rows(rows: np.ndarray) -> "Traced":
        """From the rows the device fetches (int32: the :data:`ROW_FIELDS` columns, a column
        the host ignores, then the move words); views, moves trimmed to the longest traceback."""
        words = max(1, -(-int(rows[:, 7].max(initial=0)) // MOVES_PER_WORD))
        return Traced(*(rows[:, k] for k in range(ROW_FIELDS - 1)),
                      moves=rows[:, ROW_FIELDS:ROW_FIELDS + words].view(np.uint32))

    @staticmethod
    def concat(parts: list["Traced"]) -> "Traced":
        width = max((p.moves.shape[1] for p in parts), default=1)
        moves = [np.pad(p.moves, ((0, 0), (0, width - p.moves.shape[1]))) for p in parts]
        cols = {f.name: np.concatenate([getattr(p, f.name) for p in parts]) if parts
                else np.zeros(0, np.int64) for f in fields(Traced) if f.name != "moves"}
        return Traced(**cols, moves=np.concatenate(moves) if parts else np.zeros((0, 1), np.uint32))

    @staticmethod
    def from_moves(q, t, i, j, score, moves) -> "Traced":
        """From explicit move lists (traceback order); the start cells follow from the moves."""
        i, j = np.asarray(i, np.int64), np.asarray(j, np.int64)
        n = np.array([len(m) for m in moves], np.int64)
        width = max(1, -(-int(n.max(initial=0)) // MOVES_PER_WORD))
        packed = np.zeros((len(moves), width), np.uint32)
        i0, j0 = i.copy(), j.copy()
        for k, ms in enumerate(moves):
            for s, mv in enumerate(ms):
                packed[k, s // MOVES_PER_WORD] |= np.uint32(mv << (2 * (s % MOVES_PER_WORD)))
                i0[k] -= mv in (1, 3)
                j0[k] -= mv in (1, 2)
        return Traced(np.asarray(q, np.int64), np.asarray(t, np.int64), i, j, i0, j0,
                      np.asarray(score, np.int64), n, packed)

    def move_matrix(self) -> np.ndarray:
        """(K, steps) uint8 moves in traceback order (0 after the last)."""
        shifts = 2 * np.arange(MOVES_PER_WORD, dtype=np.uint32)
        m = (self.moves.astype(np.uint32)[:, :, None] >> shifts) & 3
        return m.reshape(len(self.moves), -1).astype(np.uint8)


@dataclass
class SpilledRows:
    """A block's fetched candidate rows (sorted by ``q``) written to a file, so that worker
    processes read them there rather than through a pipe: miRNA ``x``'s rows are
    ``bounds[x]..bounds[x+1]-1``, each ``width`` int32."""

    path: str
    width: int
    bounds: list

    @staticmethod
    def write(path: str, rows: np.ndarray, n_mirnas: int) -> "SpilledRows":
        rows = np.ascontiguousarray(rows, np.int32)
        with open(path, "wb") as fh:
            fh.write(memoryview(rows).cast("B"))
        bounds = rows[:, 0].searchsorted(np.arange(n_mirnas + 1)).tolist()
        return SpilledRows(path, rows.shape[1], bounds)

    def __len__(self) -> int:
        return self.bounds[-1] - self.bounds[0]

    def part(self, lo: int, hi: int) -> "RowsRef":
        """The rows of miRNAs ``lo..hi-1`` (``q`` counted from ``lo`` once loaded)."""
        return RowsRef(self.path, self.width, self.bounds[lo], self.bounds[hi] - self.bounds[lo], lo)


@dataclass
class RowsRef:
    """``count`` rows from row ``start`` of a :class:`SpilledRows` file."""

    path: str
    width: int
    start: int
    count: int
    q_shift: int

    def __len__(self) -> int:
        return self.count

    def load(self) -> Traced:
        rows = np.fromfile(self.path, np.int32, count=self.count * self.width,
                           offset=4 * self.start * self.width).reshape(self.count, self.width)
        rows[:, 0] -= self.q_shift
        return Traced.from_rows(rows)


def _traced_from_matrix(matrix: np.ndarray) -> Traced:
    n = len(fields(Traced)) - 1
    return Traced(*(matrix[:, k] for k in range(n)), moves=matrix[:, n:].view(np.uint32))


@dataclass
class TargetText:
    """The letters of a chunk of targets as read, concatenated (``starts``/``lengths`` per target)."""

    chars: np.ndarray    # uint8
    starts: np.ndarray   # int64
    lengths: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.lengths)

    @staticmethod
    def from_lengths(chars: np.ndarray, lengths: np.ndarray) -> "TargetText":
        lengths = np.asarray(lengths, np.int64)
        return TargetText(chars, np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64), lengths)

    @staticmethod
    def from_sequences(sequences: list[str]) -> "TargetText":
        lengths = np.array([len(s) for s in sequences], np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        chars = np.frombuffer("".join(sequences).encode("ascii"), np.uint8)
        return TargetText(chars, starts, lengths)


def _ragged(counts: np.ndarray):
    """For groups of ``counts`` items: each item's group and its index inside the group."""
    counts = np.asarray(counts, np.int64)
    group = np.repeat(np.arange(len(counts)), counts)
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return group, np.arange(int(counts.sum())) - first[group]


@dataclass
class HitTable:
    """Accepted hits (span filter and strict test passed; energies not yet applied), sorted by
    (miRNA, target) and, within a pair, in the order miRanda accepts them."""

    q: np.ndarray
    t: np.ndarray
    score: np.ndarray
    i: np.ndarray        # row_end
    j: np.ndarray        # col_end
    i0: np.ndarray       # row_start
    j0: np.ndarray       # col_start
    n: np.ndarray        # miRNA length
    m: np.ndarray        # target length
    aln_len: np.ndarray
    matches: np.ndarray
    wobbles: np.ndarray
    aln_mirna: list
    aln_map: list
    aln_target: list

    def __len__(self) -> int:
        return len(self.q)

    @property
    def ref_start(self) -> np.ndarray:
        """miRanda's R start (1-based, the lowercase flanks included)."""
        return np.maximum(self.j0 - self.i0, 0) + 1

    @property
    def ref_end(self) -> np.ndarray:
        return np.minimum(self.j + (self.n - self.i), self.m)

    def hits(self) -> list[Hit]:
        """One :class:`~jaxrna.targets.records.Hit` per row (energy None)."""
        cols = [x.tolist() for x in (self.score, self.n, self.i0, self.i, self.j0, self.j,
                                     self.ref_start, self.ref_end, self.aln_len, self.matches,
                                     self.wobbles)]
        return [Hit(score=s, energy=None, mirna_len=n, row_start=i0, row_end=i, col_start=j0,
                    col_end=j, ref_display_start=rs, ref_display_end=re, aln_mirna=am, aln_map=mp,
                    aln_target=at, aln_len=al, matches=ma, wobbles=wo)
                for s, n, i0, i, j0, j, rs, re, al, ma, wo, am, mp, at
                in zip(*cols, self.aln_mirna, self.aln_map, self.aln_target)]


def rank_order(tr: Traced, n_targets: int) -> np.ndarray:
    """Group by pair, then miRanda's rank: score descending, target end ascending, then scan
    order (row-major: row, then column) - its stable sort of the candidates."""
    key = tr.q.astype(np.int64) * max(n_targets, 1) + tr.t
    return np.lexsort((tr.i, tr.j, -tr.score.astype(np.int64), key))


def select(tr: Traced, mirnas: list[str], targets: TargetText, strict: bool = False) -> HitTable:
    """The accepted hits of traced candidates: ``mirnas[q]`` is miRNA ``q`` as read (5'->3'),
    ``targets`` the chunk's letters."""
    n_targets = len(targets.starts)
    tr = tr.take(rank_order(tr, n_targets))
    key = tr.q.astype(np.int64) * max(n_targets, 1) + tr.t
    tr = tr.take(diagonal_survivors(key, tr.j - tr.i))
    key = tr.q.astype(np.int64) * max(n_targets, 1) + tr.t
    tr = tr.take(span_registered(key, tr.j0, tr.j))
    table = build_strings(tr, mirnas, targets)
    if strict and len(table):
        ok = np.array([_strict_ok(table, k, tr) for k in range(len(table))], dtype=bool)
        table = _take_table(table, ok)
    return table


def _take_table(table: HitTable, mask: np.ndarray) -> HitTable:
    out = {}
    for f in fields(HitTable):
        v = getattr(table, f.name)
        out[f.name] = [x for x, k in zip(v, mask) if k] if isinstance(v, list) else v[mask]
    return HitTable(**out)


def _strict_ok(table: HitTable, k: int, tr: Traced) -> bool:
    """miRanda's ``-strict`` test on the strings it builds (traceback order)."""
    n, i, i0 = int(table.n[k]), int(table.i[k]), int(table.i0[k])
    left, right = i0, n - i
    am, mp = table.aln_mirna[k], table.aln_map[k]
    core_q, core_m = am[left:len(am) - right], mp[left:len(mp) - right]
    rest3, rest0 = am[len(am) - right:], am[:left]
    return strict_seed_ok(rest3 + core_q.upper()[::-1] + rest0, " " * right + core_m[::-1] + " " * left)


def build_strings(tr: Traced, mirnas: list[str], targets: TargetText) -> HitTable:
    """The three alignment strings and the counts of every traced hit (whole-array steps)."""
    K = len(tr)
    q = tr.q.astype(np.int64)
    t = tr.t.astype(np.int64)
    seq_bytes = [s[::-1].encode("ascii") for s in mirnas]  # the reversed miRNA: row order
    mlen = np.array([len(s) for s in seq_bytes], np.int64)
    moff = np.concatenate([[0], np.cumsum(mlen)[:-1]]).astype(np.int64)
    mchars = np.frombuffer(b"".join(seq_bytes), np.uint8) if seq_bytes else np.zeros(0, np.uint8)
    mcodes = CODE_OF_BYTE[mchars]
    tchars = targets.chars
    tcodes_of = CODE_OF_BYTE
    n = mlen[q] if K else np.zeros(0, np.int64)
    m = targets.lengths[t] if K else np.zeros(0, np.int64)
    tbase = targets.starts[t] if K else np.zeros(0, np.int64)
    i, j = tr.i.astype(np.int64), tr.j.astype(np.int64)
    i0, j0 = tr.i0.astype(np.int64), tr.j0.astype(np.int64)
    steps = tr.nsteps.astype(np.int64)
    mv = tr.move_matrix()[:, :int(steps.max(initial=0))] if K else np.zeros((0, 0), np.uint8)
    nb = (mv == 2).sum(axis=1).astype(np.int64) if K else np.zeros(0, np.int64)
    length = n + nb
    start = np.concatenate([[0], np.cumsum(length)]).astype(np.int64)
    total = int(start[-1])
    qa = np.empty(total, np.uint8)
    ma = np.full(total, _SPACE, np.uint8)
    ta = np.empty(total, np.uint8)
    # left flank: rows 1..i0 opposite target columns j0-i0+1..j0 ('-' before the target)
    h, r = _ragged(i0)
    dst = start[h] + r
    qa[dst] = mchars[moff[q[h]] + r] | 0x20
    col = j0[h] - i0[h] + r + 1
    ta[dst] = np.where(col >= 1, tchars[tbase[h] + np.maximum(col, 1) - 1] | 0x20, _DASH)
    # right flank: rows i+1..n opposite columns j+1.. ('-' past the end of the target)
    h, r = _ragged(n - i)
    dst = start[h] + i0[h] + steps[h] + r
    qa[dst] = mchars[moff[q[h]] + i[h] + r] | 0x20
    col = j[h] + r + 1
    ta[dst] = np.where(col <= m[h], tchars[tbase[h] + np.minimum(col, m[h]) - 1] | 0x20, _DASH)
    # aligned columns: move s (traceback order) is column steps - 1 - s of the aligned part and
    # sits at the cell the traceback had reached: a diagonal, b target only, c miRNA only
    if K and mv.shape[1]:
        width = mv.shape[1]
        valid = np.arange(width, dtype=np.int32)[None, :] < steps[:, None]
        di = (mv == 1) | (mv == 3)
        dj = (mv == 1) | (mv == 2)
        rows = i[:, None] - (np.cumsum(di, axis=1, dtype=np.int32) - di)   # 1-based cell row
        cols = j[:, None] - (np.cumsum(dj, axis=1, dtype=np.int32) - dj)
        hh, kk = np.nonzero(valid)
        f, rr, cc = mv[hh, kk], rows[hh, kk], cols[hh, kk]
        dst = start[hh] + i0[hh] + steps[hh] - 1 - kk
        qc = mchars[moff[q[hh]] + np.maximum(rr, 1) - 1]
        tc = tchars[tbase[hh] + np.maximum(cc, 1) - 1]
        qa[dst] = np.where(f != 2, qc & 0xDF, _DASH)
        ta[dst] = np.where(f != 3, tc & 0xDF, _DASH)
        diag = f == 1
        sym = _SYMBOL[mcodes[moff[q[hh]] + np.maximum(rr, 1) - 1], tcodes_of[tc]]
        ma[dst] = np.where(diag, sym, _SPACE)
        matches = np.bincount(hh[diag & (sym == ord("|"))], minlength=K)
        wobbles = np.bincount(hh[diag & (sym == ord(":"))], minlength=K)
    else:
        matches = wobbles = np.zeros(K, np.int64)
    qs, ms, ts = (a.tobytes().decode("ascii") for a in (qa, ma, ta))
    bounds = list(zip(start[:-1].tolist(), start[1:].tolist()))
    return HitTable(q=q, t=t, score=tr.score.astype(np.int64), i=i, j=j, i0=i0, j0=j0, n=n, m=m,
                    aln_len=steps, matches=matches.astype(np.int64), wobbles=wobbles.astype(np.int64),
                    aln_mirna=[qs[a:b] for a, b in bounds], aln_map=[ms[a:b] for a, b in bounds],
                    aln_target=[ts[a:b] for a, b in bounds])


def pack_moves(steps: np.ndarray) -> np.ndarray:
    """(K, S) moves (traceback order, 0 after the last) packed 16 to a uint32 word."""
    steps = np.asarray(steps, np.uint32)
    width = max(1, -(-steps.shape[1] // MOVES_PER_WORD))
    padded = np.zeros((steps.shape[0], width * MOVES_PER_WORD), np.uint32)
    padded[:, :steps.shape[1]] = steps
    shifts = 2 * np.arange(MOVES_PER_WORD, dtype=np.uint32)
    return np.bitwise_or.reduce(padded.reshape(len(padded), width, MOVES_PER_WORD) << shifts, axis=2)


def fold_strings(table: HitTable) -> list[str]:
    """The string miRanda folds for each hit of a table (:func:`jaxrna.targets.energy.duplex_string`)."""
    from jaxrna.targets.energy import duplex_string

    ends = (table.n - table.i).tolist()
    return [duplex_string(am, at, i0, right) for am, at, i0, right
            in zip(table.aln_mirna, table.aln_target, table.i0.tolist(), ends)]


def accepted_hits(table: HitTable, params, energy=None, energies=None) -> dict[tuple[int, int], list[Hit]]:
    """``{(q, t): [Hit, ...]}`` of a table, the energy filter applied (unless ``no_energy``).
    ``energy``: an energy engine (:mod:`jaxrna.targets.energy`) or a function of a fold string;
    ``energies``: the table's energies (kcal/mol, one per row), already folded."""
    hits = table.hits()
    keys = list(zip(table.q.tolist(), table.t.tolist()))
    if not params.no_energy and hits:
        from dataclasses import replace

        if energies is None:
            from jaxrna.targets.energy import fold_energies

            energies = fold_energies(fold_strings(table), energy)
        elif len(energies) != len(hits):
            raise AssertionError(f"{len(energies)} energies for {len(hits)} hits (a bug)")
        if isinstance(energies, np.ndarray):
            energies = energies.tolist()
        kept = [(k, replace(h, energy=e)) for k, h, e in zip(keys, hits, energies)
                if e < params.energy_threshold]
    else:
        kept = list(zip(keys, hits))
    out: dict[tuple[int, int], list[Hit]] = {}
    for k, h in kept:
        out.setdefault(k, []).append(h)
    return out


def traced_from_batches(batches: list, threshold: int) -> "Traced":
    """Every candidate of the segment batches (:class:`~jaxrna.targets.hits.SegmentBatch`; one
    miRNA, ``q`` = 0) with its traceback, as :class:`Traced` (host-side extraction, for the
    whole-target lanes of free gaps)."""
    parts = []
    for batch in batches:
        tgt, score, i, j, lane = batch.candidates(threshold)
        if not len(tgt):
            continue
        steps, length, i0, j0 = trace(batch, lane, i, j)
        parts.append(Traced(np.zeros(len(tgt), np.int64), tgt.astype(np.int64), i.astype(np.int64),
                            j.astype(np.int64), i0.astype(np.int64), j0.astype(np.int64),
                            score.astype(np.int64), length.astype(np.int64),
                            pack_moves(steps.astype(np.uint8))))
    return Traced.concat(parts)
