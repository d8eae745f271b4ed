"""Alignment on the CPU with parasail's SIMD kernels, giving exactly jaxrna's results.

parasail (optional: ``pip install parasail``, in the ``bench`` extra) is much faster on a CPU
than XLA's loops, and its scores are Biopython's and ours. Its tracebacks, though, choose among
co-optimal alignments by other rules than ours (it prefers extending a gap to opening one on a
tie, and it ends a local alignment at the first column reaching the best score), so only its
*values* are used, never its alignments:

* scores: ``nw_scan`` / ``sw_scan`` (16-bit lanes; 32-bit where those saturate). A local
  alignment's end cell follows our rule (the largest M, smallest row, then column) when the
  sequences are passed the other way round: parasail then reports the first *query* position
  reaching the best score and, in it, the first target position; with a positive gap-open
  penalty the cells holding the best H are the cells holding the best M.
* alignments: the score table (H of every cell; local: clamped at 0) of the table's part that
  the traceback can reach (global: all of it; local: the rectangle up to the end cell, whose
  values depend on nothing else), then our traceback: compiled (:mod:`jaxrna.align.hostwalk`,
  a pair at a time in C) or, without a C compiler, walked over all pairs of a group at once
  with numpy. It rebuilds each decision of :func:`jaxrna.align.traceback.walk` from H alone:
  ``M = H(i-1, j-1) + s``, and since gaps open from H when opening costs at least as much as
  extending (``X = max(H_up + open, X_up + extend)``, the same integers as the three-state
  recurrence), ``X(i, j) = max_k H(k, j) + open + (i - 1 - k) extend``, computed only where a
  decision needs it. Every value the decisions compare along a local path is positive, where
  the clamped table is exact.

Free end gaps (global): parasail's semi-global functions (``sg_*``: end gaps free on both
sequences) give the score (at least 0: their best over the last row and column leaves out the
alignment of gaps only) and the table; their H is ours everywhere but in the last row and
column, where ours gives the trailing gap its end penalty of 0. The walk therefore starts by
choosing the trailing gap by our rules (from ``H(m, n)``: an M ending in the corner, else the
trailing X run down the last column, else the trailing Y run along the last row; a run goes
back to the last row (column) where an M reaches the score, else to the first where a Y (X)
does), from M values and, only at cells holding the score, Y (X) values; then it walks on as
usual. Other end gap penalties are not parasail's: :func:`supports` sends them to JAX.

Used for match/mismatch and matrix schemes with ``gap_open >= gap_extend`` (and, local,
``gap_open > 0``) and at most 26 letters: :func:`supports`. The tests compare it with the JAX
path and the host reference on random and tie-heavy pairs.
"""

from __future__ import annotations

import threading

import numpy as np

from jaxrna.align import hostwalk
from jaxrna.align.parasail_memory import (one_view, parasail_functions, table_address,
                                          view_tables)
from jaxrna.align.text import offsets, ramp
from jaxrna.kernels.gotoh_defs import NEG, OP_D, OP_I, OP_M
from jaxrna.stages import stage

_H, _M, _X, _Y = 3, OP_M, OP_I, OP_D          # walk states (M, X, Y emit M, I, D)
#: Diagonal steps the traceback takes at once (a run of M columns).
RUN = 8
#: Score-table cells of the largest table the host engine computes (int32: 4 bytes each);
#: larger tables go the checkpointed way (:mod:`jaxrna.align.engine`).
GROUP_CELLS = 3 << 24
#: Cells of the tables one walk group holds at once: small enough that the tables are walked
#: while still in the CPU's cache (4 MB a group) and their memory is reused by the next group,
#: large enough that a group's fixed cost in the walk stays small. An H100 host's 16 cores,
#: 90,000 local pairs of 200-400 nt: 2^22 cells 5.4-5.7 s, 2^20 4.4-4.8 s, 2^18 5.8-5.9 s
#: (its walk on one core: 2.7 s at 2^22, 12.3 s at 2^18).
PACK_CELLS = 1 << 20


def available() -> bool:
    """Whether parasail is installed (found without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec("parasail") is not None
    except (ImportError, ValueError):
        return False


def supports(scoring, local: bool) -> bool:
    """Whether :class:`HostEngine` gives exact results for ``scoring`` (parasail installed)."""
    if not available():
        return False
    if getattr(scoring, "separate_end_gaps", False) and (local or not scoring.free_end_gaps):
        return False            # end gap penalties of their own: the JAX path
    if scoring.gap_open < scoring.gap_extend or scoring.size > 26:
        return False
    if local and scoring.gap_open <= 0:
        return False
    return int(np.abs(scoring.matrix).max(initial=0)) < (1 << 20) and \
        max(scoring.gap_open, scoring.gap_extend) < (1 << 20)


class HostEngine:
    """parasail for the values, our rules for the rest. Sequences are passed as strings of
    code letters (code ``k`` is ``chr(65 + k)``: :func:`code_text`). Pair ``k`` is
    ``rows[k]`` (on the table's rows) against ``cols[k]``; ``swap[k]`` says the rows hold the
    target (the scores are then the transposed matrix's; results stay in table orientation)."""

    def __init__(self, scoring, local: bool) -> None:
        import parasail

        self.p = parasail
        self.scoring = scoring
        self.local = local
        m = scoring.matrix
        symmetric = bool(np.array_equal(m, m.T))
        # parasail scores s1[i] against s2[j] as matrix[s2[j], s1[i]]
        self.pm_t = self._matrix(m.T)                    # s1 = query-like rows
        self.pm = self.pm_t if symmetric else self._matrix(m)
        self.open, self.extend = int(scoring.gap_open), int(scoring.gap_extend)
        self.go, self.ge = -self.open, -self.extend
        self.free_ends = not local and scoring.free_end_gaps      # parasail's sg_ functions
        self.glob = "sg" if self.free_ends else "nw"
        k = scoring.size
        self.flat = np.concatenate([np.ascontiguousarray(m, np.int64).reshape(-1),
                                    np.ascontiguousarray(m.T, np.int64).reshape(-1)])
        self.kk = k * k
        # striped is parasail's fastest; with open == extend its scores and ends are off
        self.kind = "striped" if self.open > self.extend else "scan"
        self._profiles = threading.local()

    def _matrix(self, values: np.ndarray):
        k = values.shape[0]
        matrix = self.p.matrix_create("".join(chr(65 + c) for c in range(k)), 0, 0)
        for a in range(k):
            for b in range(k):
                matrix.set_value(a, b, int(values[a, b]))
        return matrix

    # -- scores -------------------------------------------------------------------------------
    def _call(self, name: str, a: str, b: str, matrix):
        """parasail's ``name`` (e.g. ``sw_table_scan``) of ``a`` x ``b`` in 32-bit lanes: a
        table function stores 32-bit values whatever its lanes, and its 32-bit kernel never
        saturates and ran as fast or faster than the 16-bit one (300 pairs of 200-400 nt,
        local: 0.07-0.09 ms a pair against 0.09-0.13)."""
        return getattr(self.p, f"{name}_32")(a, b, self.open, self.extend, matrix)

    def _scored(self, s1: str, s2: str, matrix):
        """Score of ``s1`` x ``s2``, ``s1`` profiled (the profile reused while the same string
        object comes first)."""
        name = f"{'sw' if self.local else self.glob}_{self.kind}"
        cache = self._profiles
        if getattr(cache, "s1", None) is not s1 or cache.matrix is not matrix:
            cache.s1, cache.matrix = s1, matrix
            cache.p16 = self.p.profile_create_16(s1, matrix)
            cache.p32 = None
        r = getattr(self.p, f"{name}_profile_16")(cache.p16, s2, self.open, self.extend)
        if r.saturated:
            if cache.p32 is None:
                cache.p32 = self.p.profile_create_32(s1, matrix)
            r = getattr(self.p, f"{name}_profile_32")(cache.p32, s2, self.open, self.extend)
        return r

    def scores(self, rows: list[str], cols: list[str], swap: np.ndarray):
        """Scores and end cells (1-based in the table; local: our rule, 0 when empty):
        ``(score, end_i, end_j)`` int64 arrays."""
        n = len(rows)
        score = np.zeros(n, np.int64)
        ei = np.zeros(n, np.int64)
        ej = np.zeros(n, np.int64)
        swl = swap.tolist()
        with stage("device"):
            if self.local:                   # the columns profiled: parasail's ends are ours
                for k in range(n):
                    r = self._scored(cols[k], rows[k], self.pm_t if swl[k] else self.pm)
                    if r.score > 0:
                        score[k], ei[k], ej[k] = r.score, r.end_ref + 1, r.end_query + 1
            else:
                for k in range(n):
                    score[k] = self._scored(rows[k], cols[k],
                                            self.pm if swl[k] else self.pm_t).score
                    ei[k], ej[k] = len(rows[k]), len(cols[k])
                if self.free_ends:           # the alignment of gaps only (free) scores 0
                    np.maximum(score, 0, out=score)
        return score, ei, ej

    # -- alignments ---------------------------------------------------------------------------
    def align(self, rows: list[str], cols: list[str], swap: np.ndarray, row_codes: np.ndarray,
              row_start: np.ndarray, col_codes: np.ndarray, col_start: np.ndarray):
        """Alignments: ``(score, end_i, end_j, start_i, start_j, ops, op_offsets)`` in table
        orientation (ends 1-based, starts 0-based; ops concatenated in alignment order, codes
        0 M, 1 I (a row residue against a gap), 2 D). Pair ``k``'s codes are
        ``row_codes[row_start[k]:]`` and ``col_codes[col_start[k]:]``."""
        lib = hostwalk.library() if self.local or not self.free_ends else None
        fns = parasail_functions("sw" if self.local else self.glob) \
            if lib is not None and hasattr(lib, "jaxrna_table_pairs") else None
        if fns is not None:
            return self._fused(lib, fns, rows, cols, swap, row_codes, row_start, col_codes,
                               col_start)
        n = len(rows)
        m = np.array([len(r) for r in rows], np.int64)
        w = np.array([len(c) for c in cols], np.int64)
        out = [np.zeros(n, np.int64) for _ in range(5)]
        parts: list[tuple[np.ndarray, np.ndarray]] = []
        cells = (m + 1) * (w + 1)
        start = 0
        while start < n:                     # groups of bounded table memory
            stop = start + 1
            total = int(cells[start])
            while stop < n and total + int(cells[stop]) <= PACK_CELLS:
                total += int(cells[stop])
                stop += 1
            sl = slice(start, stop)
            res = self._align_group(rows[sl], cols[sl], swap[sl], m[sl], w[sl], row_codes,
                                    row_start[sl], col_codes, col_start[sl])
            for a, b in zip(out, res[:5]):
                a[sl] = b
            parts.append((res[5], res[6]))
            start = stop
        lengths = np.concatenate([np.diff(off) for _, off in parts]) if parts else \
            np.zeros(0, np.int64)
        ops = np.concatenate([o for o, _ in parts]) if parts else np.zeros(0, np.uint8)
        return (*out, ops, offsets(lengths))

    def _fused(self, lib, fns, rows, cols, swap, row_codes, row_start, col_codes, col_start):
        """:meth:`align` in C (:func:`jaxrna.align.hostwalk.table_pairs`; local, or global with
        end gaps penalised): each pair's table from parasail (local: by columns, its end cell
        ours: :meth:`_tables`), walked while it is still in the cache, then freed; no Python
        a pair."""
        import ctypes

        n = len(rows)
        rlen = np.array([len(r) for r in rows], np.int64)
        clen = np.array([len(c) for c in cols], np.int64)
        roff, coff = offsets(rlen)[:-1], offsets(clen)[:-1]
        rtext = "".join(rows).encode("latin-1")
        ctext = "".join(cols).encode("latin-1")
        address = lambda mat: ctypes.cast(mat.pointer, ctypes.c_void_p).value  # noqa: E731
        first, second = (self.pm_t, self.pm) if self.local else (self.pm, self.pm_t)
        matp = np.where(swap, address(first), address(second)).astype(np.int64)
        moff = np.where(swap, self.kk, 0)
        row_start = np.asarray(row_start, np.int64)
        col_start = np.asarray(col_start, np.int64)
        parts = []
        with stage("device"):
            for a in range(0, n, FUSED_PAIRS):
                z = min(n, a + FUSED_PAIRS)
                parts.append(hostwalk.table_pairs(
                    lib, fns, self.local, rtext, roff[a:z], rlen[a:z], ctext, coff[a:z],
                    clen[a:z],
                    matp[a:z], self.open, self.extend, row_codes, row_start[a:z], col_codes,
                    col_start[a:z], self.flat, moff[a:z], self.scoring.size, self.go, self.ge))
        score, ei, ej, si, sj = (np.concatenate([p[k] for p in parts]) if parts
                                 else np.zeros(0, np.int64) for k in range(5))
        # global: the walk stops on the border; the gaps along it lead the ops, starts are 0
        ops, ends = zip(*[_in_order(p[5], p[6]) if self.local else
                          _in_order(p[5], p[6], p[3], p[4]) for p in parts]) \
            if parts else ((), ())
        if not self.local:
            si, sj = np.zeros(n, np.int64), np.zeros(n, np.int64)
        lengths = np.concatenate([np.diff(o) for o in ends]) if parts else \
            np.zeros(0, np.int64)
        all_ops = np.concatenate(ops) if parts else np.zeros(0, np.uint8)
        return score, ei, ej, si, sj, all_ops, offsets(lengths)

    def _tables(self, rows, cols, swap, m, w):
        """The score tables of a group (no border): ``(F, base, score, end_i, end_j, keep)``,
        pair ``k``'s table at ``F[base[k]:]`` row-major (local: the end by our rule, 0 when
        nothing scores above 0); ``keep`` holds what owns the tables' memory.

        Local: the end is the table's first cell (row-major) holding its largest value, which
        is the cell :meth:`scores` finds (the cells holding the best H are those holding the
        best M, and the first in row order is our rule's); no separate scoring pass. (The
        compiled loop, :meth:`_fused`, gives parasail the columns first instead: it then
        reports that cell itself, the first of its second sequence's positions reaching the
        best score and, there, the first of the first's: :meth:`scores`' rule.)"""
        n = len(rows)
        score = np.zeros(n, np.int64)
        ei, ej = (np.zeros(n, np.int64), np.zeros(n, np.int64)) if self.local else \
            (m.copy(), w.copy())
        name = "sw_table_scan" if self.local else f"{self.glob}_table_scan"
        results, addr, size = [], [], []
        swl = swap.tolist()
        where = table_address()
        with stage("device"):
            for k in range(n):
                r = self._call(name, rows[k], cols[k], self.pm if swl[k] else self.pm_t)
                results.append(r)
                if where is None:
                    t = r.score_table
                    addr.append(t)
                else:
                    addr.append(where(r.pointer))
                size.append(len(rows[k]) * len(cols[k]))
                if not self.local:
                    score[k] = max(r.score, 0) if self.free_ends else r.score
            F, base = one_view(addr) if where is None else view_tables(addr, size)
            if self.local:
                for k in range(n):
                    if not size[k]:
                        continue
                    b = int(base[k])
                    f = int(F[b:b + size[k]].argmax())
                    v = int(F[b + f])
                    if v > 0:
                        wd = len(cols[k])
                        score[k], ei[k], ej[k] = v, f // wd + 1, f % wd + 1
        return F, base, score, ei, ej, (results, addr)

    def _align_group(self, rows, cols, swap, m, w, row_codes, row_start, col_codes, col_start):
        F, base, score, ei, ej, keep = self._tables(rows, cols, swap, m, w)
        with stage("traceback"):
            si, sj, ops, ends = self._walk(F, base, w, score, ei, ej, row_codes, row_start,
                                           col_codes, col_start, np.where(swap, self.kk, 0))
        return score, ei, ej, si, sj, ops, ends

    def _walk(self, F, base, width, score, ei, ej, qcodes, q0, tcodes, t0, moff):
        """Our traceback over the tables ``F`` (pair ``r``'s cell ``(i, j)``, 1-based, at
        ``F[base[r] + (i - 1) * width[r] + j - 1]``; its row codes from ``qcodes[q0[r]]``, its
        column codes from ``tcodes[t0[r]]``, its scores ``flat[moff[r]:]``), all pairs at
        once, a step (or a run of steps) at a time."""
        local, go, ge, flat = self.local, self.go, self.ge, self.flat
        free = self.free_ends
        size = self.scoring.size
        q0 = np.asarray(q0, np.int64)
        t0 = np.asarray(t0, np.int64)
        n = len(q0)

        def H(b, wd, i, j):                  # H(i, j), i, j >= 0 (the border too), of pairs
            inside = (i > 0) & (j > 0)           # whose tables start at b, rows wd wide
            v = F[np.where(inside, b + (i - 1) * wd + j - 1, 0)] if len(F) else \
                np.zeros(i.shape, np.int32)
            if local or free:
                return np.where(inside, v, 0)
            edge = np.where((i == 0) & (j == 0), 0, go + (np.maximum(i, j) - 1) * ge)
            return np.where(inside, v, edge)

        def S(qa, ta, mo, i, j):             # substitution score at (i, j), i, j >= 1
            return flat[mo + qcodes[qa + np.maximum(i, 1) - 1] * size
                        + tcodes[ta + np.maximum(j, 1) - 1]]

        def scan(b, wd, i, j, down):         # X(i, j) (down the column) or Y(i, j) (the row)
            if not len(b):
                return np.zeros(0, np.int64)
            reach = i if down else j
            k = np.arange(int(reach.max()))[None, :]
            ok = k < reach[:, None]
            kk = np.minimum(k, reach[:, None] - 1)
            cells = (kk, j[:, None]) if down else (i[:, None], kk)
            v = H(b[:, None], wd[:, None], *cells) + go + (reach[:, None] - 1 - kk) * ge
            return np.where(ok, v, NEG).max(axis=1)

        codes8 = qcodes, tcodes
        lib = hostwalk.library()
        if lib is None or free:              # numpy's steps index with them (the C walk
            # takes the codes as they are: widening every sequence's codes for each group of
            # a few pairs was ~5% of a local run on an H100 host's cores)
            qcodes = qcodes.astype(np.int64) if qcodes.dtype != np.int64 and \
                len(qcodes) < (1 << 22) else qcodes
            tcodes = tcodes.astype(np.int64) if tcodes.dtype != np.int64 and \
                len(tcodes) < (1 << 22) else tcodes
        i, j = ei.copy(), ej.copy()
        st = np.full(n, _M if local else _H, np.int64)
        val = np.zeros(n, np.int64)
        done = (score <= 0) if local else np.zeros(n, bool)
        if local:
            i[done], j[done] = 0, 0
        rev = np.zeros((n, int((i + j).max(initial=0)) + 1), np.uint8)   # ops, last first
        count = np.zeros(n, np.int64)
        look = np.arange(RUN)[None, :]
        if free:
            for r in range(n):
                self._trailing(r, H, S, scan, base, width, q0, t0, moff, score, i, j, st, val,
                               rev, count)
        if lib is not None:                  # the same decisions, compiled
            hostwalk.walk(lib, F, base, width, codes8[0], q0, codes8[1], t0, flat, moff, size, go,
                          ge, local, free, i, j, st, val, done, rev, count)
        while lib is None:
            act = np.flatnonzero(~done & (i > 0) & (j > 0))
            if not act.size:
                break
            # 1. from state H, a run of M steps along the diagonal (up to RUN at once)
            hr = act[st[act] == _H]
            if hr.size:
                b, wd = base[hr][:, None], width[hr][:, None]
                ii, jj = i[hr][:, None] - look, j[hr][:, None] - look
                inside = (ii > 0) & (jj > 0)
                hd = H(b, wd, ii - 1, jj - 1)
                is_m = inside & (hd + S(q0[hr][:, None], t0[hr][:, None], moff[hr][:, None],
                                        ii, jj) == H(b, wd, ii, jj))
                run = np.where(is_m.all(axis=1), RUN, np.argmin(is_m, axis=1))
                if local:                    # a run ends with the M step that starts it
                    starts = is_m & (hd <= 0)
                    first = np.where(starts.any(axis=1), np.argmax(starts, axis=1), RUN)
                    stop = first < run
                    run = np.where(stop, first + 1, run)
                    done[hr[stop]] = True
                moved = run > 0
                r, k = hr[moved], run[moved]
                rev[np.repeat(r, k), np.repeat(count[r], k) + ramp(k)] = _M
                count[r] += k
                i[r] -= k
                j[r] -= k
                hr = hr[~moved]              # H held by X or Y here: resolve, then step
                if hr.size:
                    h = H(base[hr], width[hr], i[hr], j[hr])
                    x_wins = scan(base[hr], width[hr], i[hr], j[hr], True) == h
                    st[hr] = np.where(x_wins, _X, _Y)
                    val[hr] = h
                act = np.concatenate([act[st[act] != _H], hr])
                act = act[~done[act] & (i[act] > 0) & (j[act] > 0)]
                if not act.size:
                    continue
            # 2. in a gap state, a run of surely extending steps (up to RUN at once)
            for state, down in ((_X, True), (_Y, False)):
                g = act[st[act] == state]
                if not g.size:
                    continue
                b, wd = base[g][:, None], width[g][:, None]
                ii = i[g][:, None] - (look if down else 0)
                jj = j[g][:, None] - (0 if down else look)
                v = val[g][:, None] - look * ge
                pi, pj = (ii - 1, jj) if down else (ii, jj - 1)
                mprev = np.where((pi > 0) & (pj > 0),
                                 H(b, wd, pi - 1, pj - 1) + S(q0[g][:, None], t0[g][:, None],
                                                              moff[g][:, None], pi, pj), NEG)
                hprev = H(b, wd, np.maximum(pi, 0), np.maximum(pj, 0))
                sure = (ii > 0) & (jj > 0) & (mprev + go != v) & (hprev + go != v)
                run = np.where(sure.all(axis=1), RUN, np.argmin(sure, axis=1))
                moved = run > 0
                r, k = g[moved], run[moved]
                rev[np.repeat(r, k), np.repeat(count[r], k) + ramp(k)] = state
                count[r] += k
                if down:
                    i[r] -= k
                else:
                    j[r] -= k
                val[r] -= k * ge
            act = act[(i[act] > 0) & (j[act] > 0)]
            if not act.size:
                continue
            # 3. one M (a local end), I or D step
            ai, aj, ast, av = i[act], j[act], st[act], val[act]
            b, wd, qa, ta, mo = base[act], width[act], q0[act], t0[act], moff[act]
            rev[act, count[act]] = ast
            count[act] += 1
            is_m, is_x = ast == _M, ast == _X
            if local:
                done[act[is_m & (H(b, wd, ai - 1, aj - 1) <= 0)]] = True
            pi = np.where(is_x, ai - 1, ai)          # the cell before a gap step
            pj = np.where(is_x, aj, aj - 1)
            mprev = np.where((pi > 0) & (pj > 0),
                             H(b, wd, pi - 1, pj - 1) + S(qa, ta, mo, pi, pj), NEG)
            hprev = H(b, wd, np.maximum(pi, 0), np.maximum(pj, 0))
            opens_m = mprev + go == av
            extend = ~opens_m & (hprev + go != av)
            unsure = np.flatnonzero(~is_m & ~opens_m & ~extend & (pi > 0) & (pj > 0))
            if unsure.size:
                u = unsure
                xs = is_x[u]
                g = np.empty(u.size, np.int64)
                for down in (True, False):
                    sel = u[xs == down]
                    if sel.size:
                        g[xs == down] = scan(b[sel], wd[sel], pi[sel], pj[sel], down)
                extend[u] = g + ge == av[u]
            other = np.where(is_x, _Y, _X)
            st[act] = np.where(is_m, _H, np.where(opens_m, _M, np.where(extend, ast, other)))
            val[act] = np.where(is_m | opens_m, 0, np.where(extend, av - ge, hprev))
            i[act] = np.where(is_m, ai - 1, pi)
            j[act] = np.where(is_m, aj - 1, pj)
        if local:
            return (i, j) + _in_order(rev, count)
        return (np.zeros(n, np.int64), np.zeros(n, np.int64)) + _in_order(rev, count, i, j)

    def _trailing(self, r, H, S, scan, base, width, q0, t0, moff, score, i, j, st, val, rev,
                  count) -> None:
        """Free end gaps: pair ``r``'s walk from the corner through its trailing gap, by the
        rules of :func:`jaxrna.kernels.gotoh.cell` with end gap scores 0 (H prefers M, then
        X, then Y; a gap prefers opening from M, then extending, then switching)."""
        m, w, sc = int(i[r]), int(j[r]), int(score[r])
        if m == 0 or w == 0:
            return
        b, wd = base[r:r + 1], width[r:r + 1]
        qa, ta, mo = q0[r:r + 1], t0[r:r + 1], moff[r:r + 1]

        def m_of(ii, jj):                    # M(ii, jj) of cells, minus infinity on the border
            ok = (ii > 0) & (jj > 0)
            v = H(b, wd, np.maximum(ii - 1, 0), np.maximum(jj - 1, 0)) + S(qa, ta, mo, ii, jj)
            return np.where(ok, v, NEG)

        one = np.ones(1, np.int64)
        if int(m_of(m * one, w * one)[0]) == sc:
            st[r] = _M                       # the corner's M: no trailing gap
            return
        for down, length, other in ((True, m, w), (False, w, m)):
            ks = np.arange(length)           # the last column's rows (the last row's columns)
            at = (ks, np.full(length, other)) if down else (np.full(length, other), ks)
            hit_m = np.flatnonzero(m_of(*at) == sc)
            if hit_m.size:                   # opens from the last M reaching the score
                stop, state = int(hit_m[-1]), _M
            else:                            # else from the first Y (X) that does
                full = H(np.repeat(b, length), np.repeat(wd, length), *at)
                cand = ks[(full == sc) & (ks > 0)]
                gap = np.zeros(0, np.int64)
                if cand.size:
                    ci = cand if down else np.full(cand.size, other)
                    cj = np.full(cand.size, other) if down else cand
                    gap = cand[scan(np.repeat(b, cand.size), np.repeat(wd, cand.size), ci, cj,
                                    not down) == sc]
                if sc == 0:                  # the border's gap (free: 0) at row (column) 0
                    gap = np.concatenate([[0], gap])
                if not gap.size:
                    continue
                stop, state = int(gap[0]), (_Y if down else _X)
            run = length - stop
            rev[r, count[r]:count[r] + run] = _X if down else _Y
            count[r] += run
            if down:
                i[r] = stop
            else:
                j[r] = stop
            st[r], val[r] = state, sc
            return
        raise AssertionError("free end gaps: no way back from the corner")


def _in_order(rev: np.ndarray, count: np.ndarray, gi=None, gj=None):
    """``(ops, offsets)`` in alignment order from the walks' ops (pair ``r``'s last first in
    ``rev[r, :count[r]]``), after ``gi`` I and ``gj`` D border gaps (global) where given."""
    n = len(count)
    zero = np.zeros(n, np.int64)
    gi = zero if gi is None else gi
    gj = zero if gj is None else gj
    at = offsets(count + gi + gj)
    ops = np.empty(int(at[-1]), np.uint8)
    rows = np.repeat(np.arange(n), count)
    back = ramp(count)
    ops[np.repeat(at[1:], count) - 1 - back] = rev[rows, back]
    starts = at[:-1]
    ops[np.repeat(starts, gi) + ramp(gi)] = OP_I
    ops[np.repeat(starts + gi, gj) + ramp(gj)] = OP_D
    return ops, at


#: Pairs a call of the fused local path takes at once (its ops buffer: pairs x longest path).
FUSED_PAIRS = 1024


def code_text(codes: np.ndarray) -> str:
    """Codes as the letters :class:`HostEngine` passes to parasail (``chr(65 + code)``)."""
    return (np.asarray(codes, np.uint8) + 65).tobytes().decode("ascii")
