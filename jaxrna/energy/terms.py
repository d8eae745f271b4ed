"""The energy recurrence, stated once: every way a table cell decomposes, with its energy.

The minimum free energy tables of one sequence (0-based positions, ``d = j - i``) are

- ``C(i, j)``: (i, j) pairs. Candidates: the hairpin it closes; every interior loop around an
  inner pair (k, l) = (i+1+u1, j-1-u2) with u1 + u2 <= 30 (``C(k, l)`` + the loop energy);
  a multiloop (``M2`` of the inside, with the closing branch's dangles).
- ``M2(i, j)`` = min_k ``M(i, k) + M(k+1, j)``: a multiloop part with at least two branches.
- ``M(i, j)``: a multiloop part with at least one branch: ``M2(i, j)``; ``M(i, j-1)`` or
  ``M(i+1, j)`` plus an unpaired base; one branch ``C`` filling it (with dangle bases for
  dangles 1).
- ``F(k)``: the exterior loop over the first k bases: ``F(k-1)`` (base k-1 unpaired) or
  ``F(i) + C(a, b) +`` the exterior branch energy, (a, b) ending the prefix.

The module has two layers, both written for a *view* of the cells:

1. :func:`pair_terms` and :func:`exterior_terms`: the energy pieces of a cell that depend only
   on the sequence around i and j (pair types, hairpin, the special interior loops, the outer
   and inner mismatches of the interior-loop groups, multiloop and exterior branch energies),
   looked up in the parameter tables.
2. :func:`pair_candidates` and :func:`multi_candidates`: the candidates of a cell, each a table
   read at a static shift (``v.tab``) plus one of those pieces.

The fill of :mod:`jaxrna.energy.fill` computes the pieces of every cell at once before its
diagonal sweep (a view over the whole table) and reduces the candidates of a whole diagonal at
once (every table read a static shift of a block of rows); the traceback of
:mod:`jaxrna.energy.traceback` computes them for one cell (scalars) and takes the first
candidate equal to the cell's value, in ViennaRNA's backtracking order (its own ranking of
these lists: their order here is free). ``dangles`` (0, 1 or 2) may be traced: the cases of other
dangle models are ``INF``.

Interior loops factor as ``outer(i, j) + inner(k, l) + cost(u1, u2)`` except the stack, 1-base
bulges and the 1x1, 1x2, 2x1 and 2x2 tables: the other (u1, u2) are grouped by the table that
holds ``C + inner`` (``CI``: generic mismatches, ``C1n``: 1xn, ``C23``: 2x3, ``CA``: bulges,
terminal AU/GU of the inner pair), so a group's minimum is a minimum of shifted table rows.

>>> len(GROUPS["CI"][0]), len(GROUPS["C1n"][0]), len(GROUPS["CA"][0]), len(GROUPS["C23"][0])
(375, 54, 58, 2)
>>> PAIR_TERMS[:4], len(PAIR_TERMS)
(('ok', 'hp', 'sp0', 'sp1'), 25)
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

from jaxrna.energy.encoding import PAIR
from jaxrna.energy.params import INF, MAXLOOP, EnergyParams

#: Table rows kept above diagonal 0 (cells of the first diagonals read a few rows above it;
#: the fill's bands keep every read within them, see :func:`jaxrna.energy.fill.check_band`):
#: enough for a band that starts at diagonal 4 and holds interior loops of every size).
ROW_PAD = 40
#: Columns kept right of the last cell (reads past a band's last cell).
COL_PAD = 40
#: Candidate kinds (what the traceback continues with).
NONE, KIND_C, KIND_M2, KIND_M = 0, 1, 2, 3
SPECIALS = ((0, 0), (1, 0), (0, 1), (1, 1), (1, 2), (2, 1), (2, 2))
GROUP_NAMES = ("CI", "C1n", "C23", "CA")


def _groups() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {"CI": [], "C1n": [], "C23": [], "CA": []}
    for s in range(MAXLOOP + 1):
        for u1 in range(s + 1):
            u2 = s - u1
            if (u1, u2) in SPECIALS:
                continue
            lo, hi = min(u1, u2), max(u1, u2)
            key = "CA" if lo == 0 else "C1n" if lo == 1 else "C23" if (lo, hi) == (2, 3) else "CI"
            out[key].append((u1, u2))
    return {k: (np.array([a for a, _ in v], np.int32), np.array([b for _, b in v], np.int32))
            for k, v in out.items()}


#: (u1, u2) of each interior-loop group, in a fixed order.
GROUPS = _groups()


def group_costs(p: EnergyParams, dtype=np.int32) -> dict[str, np.ndarray]:
    """The (u1, u2)-only part of each group's loop energy (``dtype``: float64 for the
    unrounded tables of the partition function, :mod:`jaxrna.energy.partition`)."""
    def ninio(a, b):
        return min(p.max_ninio, abs(a - b) * p.ninio)

    out = {}
    for key, (u1s, u2s) in GROUPS.items():
        costs = []
        for u1, u2 in zip(u1s.tolist(), u2s.tolist()):
            if key == "CA":
                costs.append(p.bulge[u1 + u2])
            elif key == "C1n":
                costs.append(p.interior[u1 + u2] + ninio(u1, u2))
            elif key == "C23":
                costs.append(p.interior[5] + p.ninio)
            else:
                costs.append(p.interior[u1 + u2] + ninio(u1, u2))
        out[key] = np.array(costs, dtype)
    return out


def hairpin_lengths(p: EnergyParams, length: int) -> np.ndarray:
    """``hairpin[u]`` for u < ``length``, extrapolated past 30 as ViennaRNA does."""
    out = np.empty(max(length, 31), np.int32)
    for u in range(out.shape[0]):
        out[u] = int(p.hairpin[u]) if u <= MAXLOOP else int(p.hairpin[30]) + int(p.lxc * math.log(u / 30.0))
    return out


def device_params(p: EnergyParams, length: int) -> dict:
    """The parameters as a pytree of int32 arrays for the device (``length``: padded length),
    as NumPy arrays: they are arguments of the compiled programs (no eager device operation,
    which would compile a small program per table shape)."""
    i32 = lambda a: np.asarray(a, np.int32)  # noqa: E731
    dp = {name: i32(getattr(p, name)) for name in (
        "stack", "mismatch_hairpin", "mismatch_interior", "mismatch_interior_1n",
        "mismatch_interior_23", "mismatch_multi", "mismatch_exterior", "dangle5", "dangle3",
        "int11", "int21", "int22")}
    for name in ("ml_base", "ml_closing", "ml_intern", "terminal_au"):
        dp[name] = i32(getattr(p, name))
    dp["bulge1"] = i32(int(p.bulge[1]))
    dp["hp_len"] = i32(hairpin_lengths(p, length + ROW_PAD))
    dp["costs"] = {k: i32(v) for k, v in group_costs(p).items()}
    return dp


# --------------------------------------------------------------------------- energy pieces

def au(dp, t):
    """Terminal AU/GU penalty of pair type(s) ``t``."""
    return jnp.where(t > 2, dp["terminal_au"], 0)


def stem(dp, t, n5, n3, mismatch, ml: bool, has5=True, has3=True):
    """A branch of type ``t`` with 5'/3' neighbour codes ``n5``/``n3`` (``None``: no
    neighbour on that side): ViennaRNA's mismatch when both are used, a dangle when one is;
    ``has5``/``has3`` (arrays) drop a neighbour where false (the sequence ends); ``ml`` adds
    ``ml_intern`` (a multiloop branch)."""
    if n5 is None and n3 is None:
        e = jnp.zeros_like(t)
    elif n5 is None:
        e = jnp.where(has3, look(dp["dangle3"], t, n3), 0)
    elif n3 is None:
        e = jnp.where(has5, look(dp["dangle5"], t, n5), 0)
    else:
        e = jnp.where(has5 & has3, look(mismatch, t, n5, n3),
                      jnp.where(has5, look(dp["dangle5"], t, n5), jnp.where(has3, look(dp["dangle3"], t, n3), 0)))
    e = e + au(dp, t)
    return e + dp["ml_intern"] if ml else e


def ml_stem(dp, t, n5=None, n3=None, has5=True, has3=True):
    """A multiloop branch with the given neighbour codes (``None``: no dangle on that side;
    ``has5``/``has3`` false: none either)."""
    return stem(dp, t, n5, n3, dp["mismatch_multi"], ml=True, has5=has5, has3=has3)


#: Where the inside ``M2`` of a multiloop closed by (i, j) lies, as (dd, di) shifts: (i+1,
#: j-1); with dangles 1 also (i+2, j-1), (i+1, j-2) and (i+2, j-2) (bases left to the
#: closing branch's dangles).
CLOSING_SHIFTS = ((-2, 1), (-3, 2), (-3, 1), (-4, 2))
#: The pair filling ``M(i, j)`` as one branch, as (dd, di) shifts: (i, j); with dangles 1
#: also (i+1, j), (i, j-1), (i+1, j-1) (the free bases dangle on it).
STEM_SHIFTS = ((0, 0), (-1, 1), (-1, 0), (-2, 1))
#: The last exterior branch of the prefix [i, j] as offsets (a, b): the pair (i+a, j+b);
#: all but the first with dangles 1 only.
EXTERIOR_SHIFTS = ((0, 0), (1, 0), (0, -1), (1, -1))
#: The names of :func:`pair_terms`' pieces, in a fixed order.
PAIR_TERMS = (("ok", "hp") + tuple(f"sp{m}" for m in range(len(SPECIALS)))
              + tuple(f"out_{g}" for g in GROUP_NAMES)
              + tuple(f"close{k}" for k in range(len(CLOSING_SHIFTS)))
              + tuple(f"stem{k}" for k in range(len(STEM_SHIFTS)))
              + tuple(f"adj_{g}" for g in GROUP_NAMES))


def _only(flag, e):
    """``e`` where ``flag`` holds (a dangle mode), ``INF`` elsewhere."""
    return jnp.where(flag, e, INF)


def pair_terms(v, dp: dict, dangles) -> dict:
    """The sequence-only energy pieces of cell(s) (i, j) of view ``v`` (:data:`PAIR_TERMS`;
    ``ok`` is 1 where (i, j) may pair, else 0):

    - ``hp``: the hairpin closed by (i, j); ``sp<m>``: the loop energy of special interior
      loop ``SPECIALS[m]`` around the inner pair it implies;
    - ``out_<g>``: the closing pair's part of interior-loop group ``g``;
      ``adj_<g>``: the part of (i, j) as the *inner* pair of a loop of group ``g``;
    - ``close<k>``: a multiloop closed by (i, j) with its inside at ``CLOSING_SHIFTS[k]``
      (``ml_closing`` and the closing branch); ``stem<k>``: ``M(i, j)`` as one branch at
      ``STEM_SHIFTS[k]`` (``ml_intern``, dangles, unpaired bases); ``INF`` where the dangle
      model (0, 1 or 2; may be traced) has no such case.
    """
    s_i, s_j = v.s("i", 0), v.s("j", 0)
    s_i1, s_j1 = v.s("i", 1), v.s("j", -1)
    t = PAIRJ[s_i, s_j]
    out = {"ok": ((t > 0) & v.allowed("i") & v.allowed("j") & (v.d >= 4)).astype(jnp.int32)}
    # hairpin
    u = v.d - 1
    hp = v.hp_len()
    generic = hp + look(dp["mismatch_hairpin"], t, s_i1, s_j1)
    tri, tetra, hexa = v.special("tri"), v.special("tetra"), v.special("hexa")
    out["hp"] = jnp.where(u == 3, jnp.where(tri < INF, tri, hp + au(dp, t)),
                          jnp.where(u == 4, jnp.where(tetra < INF, tetra, generic),
                                    jnp.where(u == 6, jnp.where(hexa < INF, hexa, generic), generic)))
    # stacks, 1-bulges and the 1x1/1x2/2x1/2x2 tables
    for m, (u1, u2) in enumerate(SPECIALS):
        t2 = PAIRJ[v.s("j", -1 - u2), v.s("i", 1 + u1)]
        if (u1, u2) == (0, 0):
            e = look(dp["stack"], t, t2)
        elif u1 + u2 == 1:
            e = dp["bulge1"] + look(dp["stack"], t, t2)
        elif (u1, u2) == (1, 1):
            e = look(dp["int11"], t, t2, s_i1, s_j1)
        elif (u1, u2) == (1, 2):
            e = look(dp["int21"], t, t2, s_i1, v.s("j", -2), s_j1)
        elif (u1, u2) == (2, 1):
            e = look(dp["int21"], t2, t, s_j1, s_i1, v.s("i", 2))
        else:
            e = look(dp["int22"], t, t2, s_i1, v.s("i", 2), v.s("j", -2), s_j1)
        out[f"sp{m}"] = e
    # the grouped interior loops: the closing pair's part ...
    out["out_CI"] = look(dp["mismatch_interior"], t, s_i1, s_j1)
    out["out_C1n"] = look(dp["mismatch_interior_1n"], t, s_i1, s_j1)
    out["out_C23"] = look(dp["mismatch_interior_23"], t, s_i1, s_j1)
    out["out_CA"] = au(dp, t)
    # multiloops closed by (i, j): the closing branch read from inside, type (j, i); with
    # dangles 1 the inside may leave i+1 and/or j-1 to the closing branch's dangles
    d1, d2 = dangles == 1, dangles == 2
    tc = PAIRJ[s_j, s_i]
    base, mb = dp["ml_closing"], dp["ml_base"]
    closes = [ml_stem(dp, tc, s_j1, s_i1, d2, d2),
              _only(d1, mb + ml_stem(dp, tc, None, s_i1)),
              _only(d1, mb + ml_stem(dp, tc, s_j1, None)),
              _only(d1, 2 * mb + ml_stem(dp, tc, s_j1, s_i1))]
    for k, e in enumerate(closes):
        out[f"close{k}"] = base + e
    # M(i, j) as one branch
    stems = [ml_stem(dp, t, v.s("i", -1), v.s("j", 1), d2, d2),
             _only(d1, mb + ml_stem(dp, PAIRJ[s_i1, s_j], s_i, None)),
             _only(d1, mb + ml_stem(dp, PAIRJ[s_i, s_j1], None, s_j)),
             _only(d1, 2 * mb + ml_stem(dp, PAIRJ[s_i1, s_j1], s_i, s_j))]
    for k, e in enumerate(stems):
        out[f"stem{k}"] = e
    # ... and (i, j)'s part as the inner pair of a loop (read from the loop: type (j, i), its
    # neighbours in the loop j+1 and i-1)
    s_im1, s_jp1 = v.s("i", -1), v.s("j", 1)
    out["adj_CI"] = look(dp["mismatch_interior"], tc, s_jp1, s_im1)
    out["adj_C1n"] = look(dp["mismatch_interior_1n"], tc, s_jp1, s_im1)
    out["adj_C23"] = look(dp["mismatch_interior_23"], tc, s_jp1, s_im1)
    out["adj_CA"] = au(dp, tc)
    return out


def exterior_terms(v, dp: dict, dangles) -> list:
    """For the prefix [i, j] of view ``v`` whose last exterior branch ends at j: the branch
    energy of each form of :data:`EXTERIOR_SHIFTS` (``INF`` where the dangle model has no
    such form; ``v.n``: the sequence length)."""
    mx = dp["mismatch_exterior"]

    def ext(t, n5, n3, has5=True, has3=True):
        return stem(dp, t, n5, n3, mx, ml=False, has5=has5, has3=has3)

    d1, d2 = dangles == 1, dangles == 2
    s_i, s_j = v.s("i", 0), v.s("j", 0)
    s_i1, s_j1 = v.s("i", 1), v.s("j", -1)
    return [ext(PAIRJ[s_i, s_j], v.s("i", -1), v.s("j", 1), d2 & (v.i > 0), d2 & (v.j + 1 < v.n)),
            _only(d1, ext(PAIRJ[s_i1, s_j], s_i, None)),
            _only(d1, ext(PAIRJ[s_i, s_j1], None, s_j)),
            _only(d1, ext(PAIRJ[s_i1, s_j1], s_i, s_j))]


# --------------------------------------------------------------------------- candidates

class Cand:
    """One candidate (or a group of candidates sharing an ``outer`` term) of a cell.

    ``kind``: what the traceback continues with (``NONE``, ``KIND_C``, ``KIND_M2``,
    ``KIND_M``); the child cell is (i + di, i + d + dd + di) read from table ``table``.
    A group has arrays ``dd``/``di``/``cost``; a single candidate scalars and ``energy`` (the
    whole value, child table included).
    """

    __slots__ = ("kind", "table", "dd", "di", "cost", "outer", "energy")

    def __init__(self, kind, table=None, dd=0, di=0, cost=None, outer=None, energy=None):
        self.kind, self.table, self.dd, self.di = kind, table, dd, di
        self.cost, self.outer, self.energy = cost, outer, energy


def pair_candidates(v, tm: dict, dp: dict, max_loop: int = MAXLOOP) -> list[Cand]:
    """All decompositions of ``C(i, j)`` (the cell(s) of view ``v``; ``tm``: their
    :func:`pair_terms`). ``max_loop`` drops the interior loops of more unpaired bases (the
    fill's early diagonals, where they do not fit: the same minimum)."""
    out = [Cand(NONE, energy=tm["hp"])]
    for m, (u1, u2) in enumerate(SPECIALS):
        dd, di = -2 - u1 - u2, 1 + u1
        out.append(Cand(KIND_C, "C", dd, di, energy=v.tab("C", dd, di) + tm[f"sp{m}"]))
    for key, (u1s, u2s) in GROUPS.items():
        k = int(np.sum(u1s + u2s <= max_loop))      # members are ordered by loop size
        if k:
            cost = dp["costs"][key]
            out.append(Cand(KIND_C, key, -2 - u1s[:k] - u2s[:k], 1 + u1s[:k],
                            cost=cost if k == len(u1s) else cost[:k], outer=tm[f"out_{key}"]))
    for k, (dd, di) in enumerate(CLOSING_SHIFTS):
        out.append(Cand(KIND_M2, "M2", dd, di, energy=v.tab("M2", dd, di) + tm[f"close{k}"]))
    return out


def multi_candidates(v, tm: dict, dp: dict) -> list[Cand]:
    """All decompositions of ``M(i, j)`` except ``M2(i, j)`` (added by the caller)."""
    mb = dp["ml_base"]
    out = [Cand(KIND_M, "M", -1, 0, energy=v.tab("M", -1, 0) + mb),
           Cand(KIND_M, "M", -1, 1, energy=v.tab("M", -1, 1) + mb)]
    for k, (dd, di) in enumerate(STEM_SHIFTS):
        out.append(Cand(KIND_C, "C", dd, di, energy=v.tab("C", dd, di) + tm[f"stem{k}"]))
    return out


def look(table, *idx):
    """``table[idx]`` for index arrays (or scalars), as one gather from the flattened table
    (the index is computed elementwise: no index arrays are stacked for a multi-dimensional
    gather, which costs a separate pass per lookup on a CPU)."""
    flat = idx[0]
    for size, k in zip(table.shape[1:], idx[1:]):
        flat = flat * size + k
    return jnp.take(table.reshape(-1), flat, mode="clip")


class _PairTable:
    """``PAIRJ[x, y]``: pair types of code arrays, as a device constant made on first use."""

    def __getitem__(self, key):
        return look(jnp.asarray(PAIR), *key)


PAIRJ = _PairTable()
