"""Minimum free energy folding, the plain way: ViennaRNA's Zuker recursions in Python loops.

The slowest, most literal statement of the model the fast path (:mod:`jaxrna.energy.fill`)
computes; tests compare the two, and this one with brute-force enumeration and with ViennaRNA.
Positions are 0-based. Tables (``INF`` = impossible):

- ``C[i][j]``: (i, j) paired; the loop it closes is a hairpin, an interior loop (stack, bulge
  or internal loop, at most ``MAXLOOP`` = 30 unpaired bases) or a multiloop.
- ``M[i][j]``: part of a multiloop in [i, j] with at least one branch; ``M2[i][j]``: with at
  least two (``min_k M[i][k] + M[k+1][j]``).
- ``F[k]``: the exterior loop over the first k bases.

The traceback tries the decompositions of a cell in ViennaRNA's order (its backtracking in
``mfe.c`` and ``backtrack/``), so where several structures share the minimum energy it picks
RNAfold's: a hairpin, then interior loops by inner pair (k ascending, then l descending), then
multiloops; ``M``: an unpaired base at j, then at i, then one branch, then the leftmost split;
the exterior loop: the last base unpaired, else the last branch starting furthest right (with
dangles 1, one starting at base 0 first).

Dangles follow ViennaRNA: ``0`` none; ``2`` each branch gets the mismatch/dangle of both
neighbouring bases; ``1`` a branch may take an unpaired neighbour on either side, each base
used once (the recursions keep that base inside the branch's interval). A pair (i, j) needs
``j - i - 1 >= 3``; ``unpaired`` positions never pair.

>>> mfe("GGGGAAACCCCAUCGAAAGAUU")
(-650, '((((...))))(((....))).')
>>> mfe("GGGGAAACCCCAUCGAAAGAUU", dangles=0)
(-450, '((((...))))...........')
"""

from __future__ import annotations

from typing import Iterable

from jaxrna.energy import loops
from jaxrna.energy.encoding import PAIR, encode, normalize
from jaxrna.energy.params import INF, MAXLOOP, EnergyParams, load_params

MIN_HAIRPIN = 3


class Model:
    """A sequence with its parameters, dangle mode and forbidden-to-pair positions."""

    def __init__(self, sequence: str, params: EnergyParams, dangles: int = 2,
                 unpaired: Iterable[int] = ()):
        if dangles not in (0, 1, 2):
            raise ValueError("dangles must be 0, 1 or 2")
        self.seq = normalize(sequence)
        self.s = [int(x) for x in encode(self.seq)]
        self.n = len(self.seq)
        self.p = params
        self.d = dangles
        self.up = set(unpaired)

    def can_pair(self, i: int, j: int) -> bool:
        return (j - i - 1 >= MIN_HAIRPIN and PAIR[self.s[i], self.s[j]] > 0
                and i not in self.up and j not in self.up)

    def ptype(self, i: int, j: int) -> int:
        return int(PAIR[self.s[i], self.s[j]])

    # -- loop energies of the decompositions -------------------------------------------------

    def ml_branch(self, i: int, j: int) -> int:
        """A multiloop branch (i, j) filling a segment exactly (dangles 0/1: no neighbours;
        2: both neighbours; the sequence ends have none)."""
        t = self.ptype(i, j)
        if self.d == 2:
            n5 = self.s[i - 1] if i > 0 else -1
            n3 = self.s[j + 1] if j + 1 < self.n else -1
            return loops.ml_stem(self.p, t, n5, n3)
        return loops.ml_stem(self.p, t)

    def closing_options(self, i: int, j: int):
        """(inner segment, energy) for a multiloop closed by (i, j): its M2 segment and the
        closing branch's energy (ml_closing included)."""
        p, s = self.p, self.s
        tc = int(PAIR[s[j], s[i]])
        base = p.ml_closing
        if self.d == 0:
            return [((i + 1, j - 1), base + loops.ml_stem(p, tc))]
        if self.d == 2:
            return [((i + 1, j - 1), base + loops.ml_stem(p, tc, s[j - 1], s[i + 1]))]
        return [((i + 1, j - 1), base + loops.ml_stem(p, tc)),
                ((i + 2, j - 1), base + p.ml_base + loops.ml_stem(p, tc, -1, s[i + 1])),
                ((i + 1, j - 2), base + p.ml_base + loops.ml_stem(p, tc, s[j - 1], -1)),
                ((i + 2, j - 2), base + 2 * p.ml_base + loops.ml_stem(p, tc, s[j - 1], s[i + 1]))]

    def m_stem_options(self, i: int, j: int):
        """(pair, energy) ways [i, j] is exactly one multiloop branch plus dangle bases."""
        p, s = self.p, self.s
        out = [((i, j), self.ml_branch(i, j))]
        if self.d == 1:
            out += [((i + 1, j), p.ml_base + loops.ml_stem(p, self.ptype(i + 1, j), s[i], -1)),
                    ((i, j - 1), p.ml_base + loops.ml_stem(p, self.ptype(i, j - 1), -1, s[j])),
                    ((i + 1, j - 1), 2 * p.ml_base + loops.ml_stem(p, self.ptype(i + 1, j - 1), s[i], s[j]))]
        return out

    def ext_options(self, j: int):
        """(prefix length, pair, energy): the exterior loop's last branch ends at j."""
        p, s, n = self.p, self.s, self.n
        out = []
        for i in range(0, j):
            if self.d == 0:
                out.append((i, (i, j), loops.ext_stem(p, self.ptype(i, j))))
            elif self.d == 2:
                n5 = s[i - 1] if i > 0 else -1
                n3 = s[j + 1] if j + 1 < n else -1
                out.append((i, (i, j), loops.ext_stem(p, self.ptype(i, j), n5, n3)))
            else:
                out.append((i, (i, j), loops.ext_stem(p, self.ptype(i, j))))
                out.append((i, (i + 1, j), loops.ext_stem(p, self.ptype(i + 1, j), s[i], -1)))
                out.append((i, (i, j - 1), loops.ext_stem(p, self.ptype(i, j - 1), -1, s[j])))
                out.append((i, (i + 1, j - 1), loops.ext_stem(p, self.ptype(i + 1, j - 1), s[i], s[j])))
        return out

    def ext_order(self, j: int):
        """:meth:`ext_options` in the order ViennaRNA's backtracking tries them: the branch
        starting furthest right first (with dangles 1, one starting at base 0 before all);
        for one start, no dangle, a 5' dangle, a 3' dangle, both."""
        def key(option):
            i, (a, b), _ = option
            return (a != 0 or self.d != 1), -a, (a - i) + 2 * (j - b)

        return sorted(self.ext_options(j), key=key)

    def interior_options(self, i: int, j: int):
        for k in range(i + 1, min(i + MAXLOOP + 2, j - 1)):
            u1 = k - i - 1
            for l in range(j - 1, k, -1):
                u2 = j - l - 1
                if u1 + u2 > MAXLOOP:
                    break
                if self.can_pair(k, l):
                    yield (k, l)

    # -- the recursions -----------------------------------------------------------------------

    def fill(self) -> None:
        n = self.n
        C = [[INF] * n for _ in range(n)]
        M = [[INF] * n for _ in range(n)]
        M2 = [[INF] * n for _ in range(n)]
        self.C, self.M, self.M2 = C, M, M2
        for span in range(1, n):
            for i in range(0, n - span):
                j = i + span
                if self.can_pair(i, j):
                    C[i][j] = min(INF, self.c_value(i, j))
                M2[i][j] = min([M[i][k] + M[k + 1][j] for k in range(i + 1, j - 1)] + [INF])
                M[i][j] = min(INF, self.m_value(i, j))
        F = [0] * (n + 1)
        for j in range(n):
            best = F[j]
            for i, (a, b), e in self.ext_options(j):
                if a < b and C[a][b] < INF:
                    best = min(best, F[i] + C[a][b] + e)
            F[j + 1] = best
        self.F = F

    def c_value(self, i: int, j: int) -> int:
        C = self.C
        best = loops.hairpin(self.p, self.s, self.seq, i, j)
        for k, l in self.interior_options(i, j):
            if C[k][l] < INF:
                best = min(best, C[k][l] + loops.interior(self.p, self.s, i, j, k, l))
        for (a, b), e in self.closing_options(i, j):
            if a < b:
                best = min(best, self.M2[a][b] + e)
        return best

    def m_value(self, i: int, j: int) -> int:
        best = self.M2[i][j]
        for (a, b), e in self.m_stem_options(i, j):
            if a < b and self.C[a][b] < INF:
                best = min(best, self.C[a][b] + e)
        best = min(best, self.M[i][j - 1] + self.p.ml_base, self.M[i + 1][j] + self.p.ml_base)
        return best

    # -- traceback ------------------------------------------------------------------------------

    def traceback(self) -> list[tuple[int, int]]:
        pairs: list[tuple[int, int]] = []
        todo: list[tuple[str, int, int]] = [("F", 0, self.n)]
        C, M, M2, F = self.C, self.M, self.M2, self.F
        while todo:
            kind, i, j = todo.pop()
            if kind == "F":
                if j == 0 or F[j] == F[j - 1]:
                    if j > 0:
                        todo.append(("F", 0, j - 1))
                    continue
                for k, (a, b), e in self.ext_order(j - 1):
                    if a < b and C[a][b] < INF and F[k] + C[a][b] + e == F[j]:
                        todo += [("F", 0, k), ("C", a, b)]
                        break
                else:
                    raise AssertionError("exterior traceback failed")
            elif kind == "C":
                pairs.append((i, j))
                target = C[i][j]
                if loops.hairpin(self.p, self.s, self.seq, i, j) == target:
                    continue
                done = False
                for k, l in self.interior_options(i, j):
                    if C[k][l] < INF and C[k][l] + loops.interior(self.p, self.s, i, j, k, l) == target:
                        todo.append(("C", k, l))
                        done = True
                        break
                if done:
                    continue
                for (a, b), e in self.closing_options(i, j):
                    if a < b and M2[a][b] + e == target:
                        todo.append(("M2", a, b))
                        break
                else:
                    raise AssertionError("pair traceback failed")
            elif kind == "M2":
                for k in range(i + 1, j - 1):
                    if M[i][k] + M[k + 1][j] == M2[i][j]:
                        todo += [("M", i, k), ("M", k + 1, j)]
                        break
                else:
                    raise AssertionError("multiloop split traceback failed")
            else:  # "M": an unpaired base at j, then at i, then one branch, then a split
                target = M[i][j]
                if M[i][j - 1] + self.p.ml_base == target:
                    todo.append(("M", i, j - 1))
                    continue
                if M[i + 1][j] + self.p.ml_base == target:
                    todo.append(("M", i + 1, j))
                    continue
                for (a, b), e in self.m_stem_options(i, j):
                    if a < b and C[a][b] < INF and C[a][b] + e == target:
                        todo.append(("C", a, b))
                        break
                else:
                    if M2[i][j] == target:
                        todo.append(("M2", i, j))
                    else:
                        raise AssertionError("multiloop traceback failed")
        return sorted(pairs)


def dot_bracket(pairs, n: int) -> str:
    out = ["."] * n
    for i, j in pairs:
        out[i], out[j] = "(", ")"
    return "".join(out)


def mfe(sequence: str, params: EnergyParams | str | None = None, dangles: int = 2,
        temperature: float = 37.0, unpaired: Iterable[int] = ()) -> tuple[int, str]:
    """Minimum free energy (dcal/mol) and one optimal structure (dot-bracket).

    ``params``: :class:`EnergyParams`, or a set name / ``.par`` path loaded at ``temperature``;
    ``unpaired``: 0-based positions that must not pair.
    """
    if params is None or isinstance(params, str):
        params = load_params(params or "turner2004", temperature)
    model = Model(sequence, params, dangles, unpaired)
    model.fill()
    return model.F[model.n], dot_bracket(model.traceback(), model.n)
