"""Minimum free energies of many short strings at once on the CPU: the Turner model of
:mod:`jaxrna.energy` (ViennaRNA 2.x, dangles 1, positions that must stay unpaired),
vectorised with NumPy over a batch.

The energy engine's recurrence (:mod:`jaxrna.energy.terms`; ``C``, ``M2``, ``M`` and the
interior-loop groups ``CI``, ``C1n``, ``C23``, ``CA``, then the exterior loop ``F``) swept
diagonal by diagonal, with the batch as the innermost axis: every table is a list of
diagonals, ``T[d]`` an array ``(L - d, batch)`` holding ``T(i, i + d)``, so every read of a
cell's candidates is a contiguous slice of an earlier diagonal and each candidate costs one or
two NumPy operations over the whole diagonal of the whole batch. Built for the ~50-70 nt strings
``jaxrna targets`` folds (tens of thousands per call on a CPU), where the per-sequence programs
of the device engine and ViennaRNA's per-sequence overheads dominate; energies only (no
structure), in integer dcal/mol. Tests compare it with ViennaRNA and with the device engine.

>>> from jaxrna.energy.params import load_params
>>> folder = DuplexFolder(load_params("turner1999", 30.0))
>>> folder.fold_strings(["GGGGAAACCCC", "GGGGAAACCCCAUCGAAAGAUU"]).tolist()
[-796, -1144]
>>> folder.fold_strings(["GGGGAAACCCC"], unpaired=[[0]]).tolist()
[-454]
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from jaxrna.energy.params import INF, MAXLOOP, EnergyParams

#: Values at or above this are impossible (stored as INF), as in the device engine.
BIG = INF // 2
#: Smallest diagonal (j - i) of a pair: a hairpin has at least 3 unpaired bases.
MIN_D = 4
#: Sequence codes as ViennaRNA numbers them: N (anything else) 0, A 1, C 2, G 3, U/T 4.
CODES = np.zeros(256, np.int32)
for _ch, _code in (("A", 1), ("C", 2), ("G", 3), ("U", 4), ("T", 4)):
    CODES[ord(_ch)] = CODES[ord(_ch.lower())] = _code
#: PAIR25[5 x + y]: pair type of codes x (5') and y (3'): CG 1, GC 2, GU 3, UG 4, AU 5, UA 6.
PAIR25 = np.zeros(25, np.int32)
for (_x, _y), _t in {(2, 3): 1, (3, 2): 2, (3, 4): 3, (4, 3): 4, (1, 4): 5, (4, 1): 6}.items():
    PAIR25[5 * _x + _y] = _t
#: The same pair read from its other end.
RTYPE = np.array([0, 2, 1, 4, 3, 6, 5, 7], np.int32)
#: Interior loops with tables of their own (stack, 1-bulges, 1x1, 1x2, 2x1, 2x2).
SPECIALS = ((0, 0), (1, 0), (0, 1), (1, 1), (1, 2), (2, 1), (2, 2))
GROUPS = ("CI", "C1n", "C23", "CA")


def _group_of(u1: int, u2: int) -> str | None:
    if (u1, u2) in SPECIALS:
        return None
    lo, hi = min(u1, u2), max(u1, u2)
    return "CA" if lo == 0 else "C1n" if lo == 1 else "C23" if (lo, hi) == (2, 3) else "CI"


class DuplexFolder:
    """Energy tables of one parameter set, flattened for NumPy gathers, and :meth:`fold`."""

    def __init__(self, p: EnergyParams, batch: int = 512):
        i32 = lambda a: np.ascontiguousarray(np.asarray(a, np.int64).ravel().astype(np.int32))  # noqa: E731
        self.params = p
        self.batch = batch
        self.stack = i32(p.stack)
        self.mm_hairpin = i32(p.mismatch_hairpin)
        self.mm = {"CI": i32(p.mismatch_interior), "C1n": i32(p.mismatch_interior_1n),
                   "C23": i32(p.mismatch_interior_23)}
        self.mm_multi = i32(p.mismatch_multi)
        self.mm_ext = i32(p.mismatch_exterior)
        self.dangle5, self.dangle3 = i32(p.dangle5), i32(p.dangle3)
        self.int11, self.int21, self.int22 = i32(p.int11), i32(p.int21), i32(p.int22)
        self.au = np.array([0, 0, 0] + [int(p.terminal_au)] * 5, np.int32)
        self.ml_base, self.ml_closing, self.ml_intern = int(p.ml_base), int(p.ml_closing), int(p.ml_intern)
        self.bulge1 = int(p.bulge[1])
        # interior-loop groups: per loop size u, the (cost, [u1, ...]) classes of each group
        self.classes: dict[str, list[list[tuple[int, list[int]]]]] = {g: [] for g in GROUPS}
        for u in range(MAXLOOP + 1):
            by = {g: {} for g in GROUPS}
            for u1 in range(u + 1):
                g = _group_of(u1, u - u1)
                if g is not None:
                    by[g].setdefault(self._cost(g, u1, u - u1), []).append(u1)
            for g in GROUPS:
                self.classes[g].append(sorted(by[g].items()))

    def _cost(self, group: str, u1: int, u2: int) -> int:
        p = self.params
        if group == "CA":
            return int(p.bulge[u1 + u2])
        if group == "C23":
            return int(p.interior[5]) + int(p.ninio)
        return int(p.interior[u1 + u2]) + min(int(p.max_ninio), abs(u1 - u2) * int(p.ninio))

    def hairpin_length(self, u: int) -> int:
        p = self.params
        if u <= MAXLOOP:
            return int(p.hairpin[u])
        return int(p.hairpin[30]) + int(p.lxc * math.log(u / 30.0))

    # ------------------------------------------------------------------------------ folding

    def fold_strings(self, sequences: Sequence[str], unpaired: Sequence[Sequence[int]] | None = None
                     ) -> np.ndarray:
        """Energies (int32 dcal/mol) of strings (uppercased as ViennaRNA stores them; letters
        other than A, C, G, U, T fold as N), ``unpaired[k]``: 0-based positions of string k
        that must not pair; in batches of :attr:`batch` strings of similar lengths."""
        count = len(sequences)
        out = np.zeros(count, np.int32)
        if not count:
            return out
        lengths = np.array([len(s) for s in sequences], np.int64)
        order = np.argsort(lengths, kind="stable")
        for start in range(0, count, self.batch):
            part = order[start:start + self.batch]
            width = max(int(lengths[part].max()), 1)
            letters = np.zeros((len(part), width), np.uint8)
            allowed = np.zeros((len(part), width), bool)
            for row, k in enumerate(part.tolist()):
                n = int(lengths[k])
                letters[row, :n] = np.frombuffer(sequences[k].upper().encode("latin-1", "replace"), np.uint8)
                allowed[row, :n] = True
                if unpaired is not None:
                    allowed[row, list(unpaired[k])] = False
            out[part] = self.fold(letters, lengths[part], allowed)
        return out

    def fold(self, letters: np.ndarray, lengths: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        """Minimum free energies (int32 dcal/mol) of a batch: ``letters`` (batch, L) uint8
        uppercase ASCII (0 past each string's end), ``lengths`` (batch,), ``allowed`` (batch,
        L) bool: positions that may pair (False past the end)."""
        B, L = letters.shape
        if L < MIN_D + 1:
            return np.zeros(B, np.int32)
        pad = 2
        S = np.zeros((L + 2 * pad + 2, B), np.int32)
        S[pad:pad + L] = CODES[letters].T
        A = np.zeros((L + 2 * pad + 2, B), bool)
        A[pad:pad + L] = allowed.T
        special = self._special_rows(letters, lengths)
        inf_row = np.full((L, B), INF, np.int32)
        C = [inf_row[:L - d] for d in range(L)]
        X = {g: list(C) for g in GROUPS}
        M = list(C)
        M2 = list(C)
        CAU, CD5, CD3, CMM, CMX = (list(C) for _ in range(5))
        TT, RT = [None] * L, [None] * L    # pair types of each diagonal, read both ways
        E = [None] * L   # exterior-loop branches ending at j = i + d with prefix F[i]
        au, mb, mli = self.au, self.ml_base, self.ml_intern
        tmp = np.empty((L, B), np.int32)
        acc = np.empty((L, B), np.int32)
        for d in range(MIN_D, L):
            h = L - d
            tm, ac = tmp[:h], acc[:h]

            def s(k, _h=h):  # codes at i + k (k relative to i)
                return S[pad + k:pad + k + _h]

            si, sj, si1, sj1 = s(0), s(d), s(1), s(d - 1)
            t = PAIR25[5 * si + sj]
            TT[d] = t
            RT[d] = tc = RTYPE[t]   # the pair read from its other end (inside a loop)
            ok = (t > 0) & A[pad:pad + h] & A[pad + d:pad + d + h]
            # hairpin of u = d - 1 unpaired bases
            u = d - 1
            hp = self.hairpin_length(u)
            if u == 3:
                best = np.where(special[3][:h] < INF, special[3][:h], hp + au[t])
            else:
                best = hp + self.mm_hairpin[25 * t + 5 * si1 + sj1]
                if u in (4, 6):
                    best = np.where(special[u][:h] < INF, special[u][:h], best)
            best = best.astype(np.int32)
            # stacks, 1-bulges, 1x1, 1x2, 2x1, 2x2
            for u1, u2 in SPECIALS:
                dd = d - 2 - u1 - u2
                if dd < MIN_D:
                    continue
                t2 = RT[dd][1 + u1:1 + u1 + h]   # the inner pair, read from the loop
                if (u1, u2) == (0, 0):
                    e = self.stack[8 * t + t2]
                elif u1 + u2 == 1:
                    e = self.bulge1 + self.stack[8 * t + t2]
                elif (u1, u2) == (1, 1):
                    e = self.int11[((8 * t + t2) * 5 + si1) * 5 + sj1]
                elif (u1, u2) == (1, 2):
                    e = self.int21[(((8 * t + t2) * 5 + si1) * 5 + s(d - 2)) * 5 + sj1]
                elif (u1, u2) == (2, 1):
                    e = self.int21[(((8 * t2 + t) * 5 + sj1) * 5 + si1) * 5 + s(2)]
                else:
                    e = self.int22[((((8 * t + t2) * 5 + si1) * 5 + s(2)) * 5 + s(d - 2)) * 5 + sj1]
                np.add(C[dd][1 + u1:1 + u1 + h], e, out=tm)
                np.minimum(best, tm, out=best)
            # the grouped interior loops: min over (u1, u2) of X[inner] + cost, + the outer part
            top = min(MAXLOOP, d - 2 - MIN_D)
            for g in GROUPS:
                table = X[g]
                first = True
                for uu in range(top + 1):
                    src = table[d - 2 - uu]
                    for cost, u1s in self.classes[g][uu]:
                        o = 1 + u1s[0]
                        if len(u1s) == 1:
                            np.add(src[o:o + h], cost, out=tm)
                        else:
                            o2 = 1 + u1s[1]
                            np.minimum(src[o:o + h], src[o2:o2 + h], out=tm)
                            for u1 in u1s[2:]:
                                np.minimum(tm, src[1 + u1:1 + u1 + h], out=tm)
                            np.add(tm, cost, out=tm)
                        if first:
                            ac[...] = tm
                            first = False
                        else:
                            np.minimum(ac, tm, out=ac)
                if first:
                    continue
                outer = au[t] if g == "CA" else self.mm[g][25 * t + 5 * si1 + sj1]
                np.add(ac, outer, out=ac)
                np.minimum(best, ac, out=best)
            # multiloops closed by (i, j) (the closing pair read from inside: type tc)
            if d - 2 >= 2 * MIN_D + 1:
                close = self.ml_closing + mli + au[tc]
                opts = [(M2[d - 2][1:1 + h], close)]
                if d - 3 >= 2 * MIN_D + 1:
                    opts += [(M2[d - 3][2:2 + h], close + mb + self.dangle3[5 * tc + si1]),
                             (M2[d - 3][1:1 + h], close + mb + self.dangle5[5 * tc + sj1])]
                if d - 4 >= 2 * MIN_D + 1:
                    opts.append((M2[d - 4][2:2 + h], close + 2 * mb + self.mm_multi[25 * tc + 5 * sj1 + si1]))
                for src, e in opts:
                    np.add(src, e, out=tm)
                    np.minimum(best, tm, out=best)
            c = np.where(ok & (best < BIG), best, INF).astype(np.int32)
            C[d] = c
            finite = c < INF
            # this diagonal as the inner pair (k, l) = (i, j) of interior loops
            s_out = 5 * s(d + 1) + s(-1)   # s[l + 1], s[k - 1]
            for g in ("CI", "C1n", "C23"):
                X[g][d] = np.where(finite, c + self.mm[g][25 * tc + s_out], INF).astype(np.int32)
            X["CA"][d] = np.where(finite, c + au[tc], INF).astype(np.int32)
            # this diagonal's pairs as branches: with their terminal AU/GU penalty (CAU), a 5'
            # dangle s[i-1] (CD5), a 3' dangle s[j+1] (CD3), both (mismatch: CMM in multiloops,
            # CMX in the exterior loop); INF stays above BIG
            s5, s3 = s(-1), s(d + 1)
            cau = c + au[t]
            CAU[d] = cau
            CD5[d] = cau + self.dangle5[5 * t + s5]
            CD3[d] = cau + self.dangle3[5 * t + s3]
            both = 25 * t + 5 * s5 + s3
            CMM[d] = cau + self.mm_multi[both]
            CMX[d] = cau + self.mm_ext[both]
            # M2: at least two multiloop branches
            m2 = None
            if d >= 2 * MIN_D + 1:
                for x in range(MIN_D, d - MIN_D):
                    np.add(M[x][:h], M[d - 1 - x][x + 1:x + 1 + h], out=tm)
                    if m2 is None:
                        m2 = tm.copy()
                    else:
                        np.minimum(m2, tm, out=m2)
                m2[m2 >= BIG] = INF
                M2[d] = m2
            # M: at least one branch (the branch alone, or with the dangles of dangles 1: the
            # pair (i+1, j) and base i, (i, j-1) and j, (i+1, j-1) and both); E: the same
            # branches in the exterior loop
            m = cau + mli
            ext = cau.copy()
            if m2 is not None:
                np.minimum(m, m2, out=m)
            prev = M[d - 1]
            np.add(prev[:h], mb, out=tm)
            np.minimum(m, tm, out=m)
            np.add(prev[1:1 + h], mb, out=tm)
            np.minimum(m, tm, out=m)
            if d - 1 >= MIN_D:
                for src in (CD5[d - 1][1:1 + h], CD3[d - 1][:h]):
                    np.minimum(ext, src, out=ext)
                    np.add(src, mb + mli, out=tm)
                    np.minimum(m, tm, out=m)
            if d - 2 >= MIN_D:
                np.add(CMM[d - 2][1:1 + h], 2 * mb + mli, out=tm)
                np.minimum(m, tm, out=m)
                np.minimum(ext, CMX[d - 2][1:1 + h], out=ext)
            m[m >= BIG] = INF
            M[d] = m
            E[d] = ext
        # the exterior loop: F[j + 1] = min(F[j], F[i] + a branch ending at j)
        Esq = np.full((L, L, B), INF, np.int32)   # Esq[j, i]
        for d in range(MIN_D, L):
            i = np.arange(L - d)
            Esq[i + d, i] = E[d]
        F = np.zeros((L + 1, B), np.int32)
        for j in range(MIN_D, L):
            v = (F[:j + 1 - MIN_D] + Esq[j, :j + 1 - MIN_D]).min(axis=0)
            F[j + 1] = np.minimum(F[j], v)
        return F[np.asarray(lengths, np.int64), np.arange(B)]

    def special_sparse(self, letters: np.ndarray, lengths: np.ndarray) -> tuple:
        """The special hairpins of a batch (``letters`` as for :meth:`fold`), matched on the
        letters as ViennaRNA matches them: arrays ``(row, kind, i, energy)`` for the loop
        closed by (i, i + size + 1), kind 0, 1, 2 for sizes 3, 4, 6."""
        from jaxrna.energy.fill import special_hairpin_hits

        found = []
        for kind, size in enumerate((3, 4, 6)):
            hits = special_hairpin_hits(letters, lengths, self.params, size)
            if hits is None:
                continue
            hit, energy = hits
            rows, cols = np.nonzero(hit)
            found.append((rows, np.full(len(rows), kind), cols, energy[rows, cols]))
        if not found:
            return tuple(np.zeros(0, np.int64) for _ in range(4))
        return tuple(np.concatenate([f[k] for f in found]).astype(np.int64) for k in range(4))

    def _special_rows(self, letters: np.ndarray, lengths: np.ndarray) -> dict[int, np.ndarray]:
        """``{size: (L, batch)}``: the special-hairpin energy of the loop closed by
        (i, i + size + 1), INF where it is not special."""
        B, L = letters.shape
        out = {size: np.full((L, B), INF, np.int32) for size in (3, 4, 6)}
        rows, kinds, cols, energy = self.special_sparse(letters, lengths)
        for kind, size in enumerate((3, 4, 6)):
            pick = kinds == kind
            out[size][cols[pick], rows[pick]] = energy[pick]
        return out
