"""Free energies of single loops (dcal/mol), by ViennaRNA's rules, in plain Python integers
(floats with the partition function's tables, :func:`jaxrna.energy.boltzmann.pf_params`).

These are the definitions both :mod:`jaxrna.energy.reference` and
:mod:`jaxrna.energy.evaluate` use; the JAX recurrence computes the same quantities as arrays.
Positions are 0-based; ``codes`` is an encoded sequence (:mod:`jaxrna.energy.encoding`).

- Hairpin closed by (i, j), size u = j - i - 1: ``hairpin[u]`` (u > 30: ``hairpin[30] +
  int(lxc * ln(u / 30))``); a special loop's tabulated energy replaces everything for u = 3, 4,
  6; u = 3 otherwise adds the terminal AU/GU penalty and no mismatch; other sizes add
  ``mismatch_hairpin[type][s[i+1]][s[j-1]]``.
- Interior loop (i, j) > (k, l) with n1 = k - i - 1, n2 = j - l - 1: stacks, bulges (size 1
  with the stack of the two pairs, larger ones with terminal AU/GU of both pairs), 1x1, 1x2 and
  2x2 tables, 1xn loops with ``mismatch_interior_1n``, 2x3 loops with
  ``mismatch_interior_23``, generic loops with ``mismatch_interior``, the Ninio asymmetry
  ``min(max_ninio, |n1 - n2| * ninio)`` and ``lxc`` extrapolation beyond 30.
- A branch (stem) of a multiloop: ``ml_intern`` + a mismatch (both neighbours), a dangle (one)
  or nothing, + terminal AU/GU; of the exterior loop the same without ``ml_intern``.

>>> from jaxrna.energy.params import load_params
>>> from jaxrna.energy.encoding import encode
>>> p, s = load_params(), encode("GGGGAAACCCC")
>>> hairpin(p, s, "GGGGAAACCCC", 3, 7), interior(p, s, 2, 8, 3, 7)
(540, -330)
"""

from __future__ import annotations

import math

import numpy as np

from jaxrna.energy.encoding import PAIR, RTYPE
from jaxrna.energy.params import MAXLOOP, EnergyParams


# Table entries are read with ``.item()``: a Python int from the integer tables of minimum free
# energies, a float from the partition function's (:mod:`jaxrna.energy.boltzmann`).

def loop_length_cost(table, size: int, lxc: float) -> int:
    """``table[size]`` up to 30, extrapolated beyond with ``int(lxc * ln(size / 30))``
    (integer tables, as ViennaRNA's minimum free energies; float tables, as its partition
    function, add ``lxc * ln(size / 30)`` untruncated)."""
    if size <= MAXLOOP:
        return table[size].item()
    extra = lxc * math.log(size / 30.0)
    if np.issubdtype(table.dtype, np.floating):
        return table[30].item() + extra
    return int(table[30]) + int(extra)


def hairpin(p: EnergyParams, codes, sequence: str, i: int, j: int) -> int:
    """Energy of the hairpin loop closed by (i, j); ``sequence`` is the uppercased text."""
    t = int(PAIR[codes[i], codes[j]])
    u = j - i - 1
    e = loop_length_cost(p.hairpin, u, p.lxc)
    if u < 3:
        return e
    if u in (3, 4, 6):
        special = p.special_hairpins(u).get(sequence[i:j + 1].upper())
        if special is not None:
            return special
        if u == 3:
            return e + (p.terminal_au if t > 2 else 0)
    return e + p.mismatch_hairpin[t, codes[i + 1], codes[j - 1]].item()


def interior_energy(p: EnergyParams, n1: int, n2: int, t: int, t2: int,
                    si: int, sj: int, sp: int, sq: int) -> int:
    """ViennaRNA's interior-loop energy from loop sizes and codes: ``t`` the closing pair's
    type, ``t2`` the inner pair's type read from the loop (reversed), ``si = s[i+1]``, ``sj =
    s[j-1]``, ``sp = s[k-1]``, ``sq = s[l+1]``."""
    nl, ns = (n1, n2) if n1 > n2 else (n2, n1)
    if nl == 0:
        return p.stack[t, t2].item()
    if ns == 0:
        e = loop_length_cost(p.bulge, nl, p.lxc)
        if nl == 1:
            return e + p.stack[t, t2].item()
        if t > 2:
            e += p.terminal_au
        if t2 > 2:
            e += p.terminal_au
        return e
    if ns == 1:
        if nl == 1:
            return p.int11[t, t2, si, sj].item()
        if nl == 2:
            if n1 == 1:
                return p.int21[t, t2, si, sq, sj].item()
            return p.int21[t2, t, sq, si, sp].item()
        e = loop_length_cost(p.interior, nl + 1, p.lxc)
        e += min(p.max_ninio, (nl - ns) * p.ninio)
        return (e + p.mismatch_interior_1n[t, si, sj].item()
                + p.mismatch_interior_1n[t2, sq, sp].item())
    if ns == 2:
        if nl == 2:
            return p.int22[t, t2, si, sp, sq, sj].item()
        if nl == 3:
            e = p.interior[5].item() + p.ninio
            return (e + p.mismatch_interior_23[t, si, sj].item()
                    + p.mismatch_interior_23[t2, sq, sp].item())
    e = loop_length_cost(p.interior, nl + ns, p.lxc)
    e += min(p.max_ninio, (nl - ns) * p.ninio)
    return e + p.mismatch_interior[t, si, sj].item() + p.mismatch_interior[t2, sq, sp].item()


def interior(p: EnergyParams, codes, i: int, j: int, k: int, l: int) -> int:
    """Energy of the interior loop (stack, bulge or internal loop) closed by (i, j) around
    the inner pair (k, l), i < k < l < j."""
    t = int(PAIR[codes[i], codes[j]])
    t2 = int(RTYPE[PAIR[codes[k], codes[l]]])
    return interior_energy(p, k - i - 1, j - l - 1, t, t2, int(codes[i + 1]), int(codes[j - 1]),
                           int(codes[k - 1]), int(codes[l + 1]))


def _neighbours(table5, table3, mismatch, t: int, n5: int, n3: int) -> int:
    if n5 >= 0 and n3 >= 0:
        return mismatch[t, n5, n3].item()
    if n5 >= 0:
        return table5[t, n5].item()
    if n3 >= 0:
        return table3[t, n3].item()
    return 0


def ml_stem(p: EnergyParams, t: int, n5: int = -1, n3: int = -1) -> int:
    """A multiloop branch of pair type ``t`` (read from inside the multiloop) with 5'/3'
    neighbour codes ``n5``/``n3`` taking part in a dangle/mismatch (``-1``: none)."""
    e = p.ml_intern + _neighbours(p.dangle5, p.dangle3, p.mismatch_multi, t, n5, n3)
    return e + (p.terminal_au if t > 2 else 0)


def ext_stem(p: EnergyParams, t: int, n5: int = -1, n3: int = -1) -> int:
    """An exterior-loop branch of pair type ``t`` with dangle/mismatch neighbours."""
    e = _neighbours(p.dangle5, p.dangle3, p.mismatch_exterior, t, n5, n3)
    return e + (p.terminal_au if t > 2 else 0)
