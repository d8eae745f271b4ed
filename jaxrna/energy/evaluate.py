"""Free energy of a given secondary structure, as ViennaRNA's ``eval_structure`` computes it.

The structure is split into its loops: the exterior loop, and for every pair (i, j) the loop it
closes (hairpin, interior loop, or multiloop). Dangles:

- ``0``: no dangles or mismatches on branches.
- ``2``: every branch gets the mismatch (both neighbours) or dangle (one) of the bases next to
  it, paired or not (only the sequence ends have no neighbour).
- ``1``: each unpaired base next to a branch may be used by one branch at most (a base between
  two branches by one of them); the assignment of minimum energy is taken, per loop, and a
  branch with both neighbours uses the mismatch table. One exception, kept to equal
  ViennaRNA's evaluation (``vienna_d1=True``, the default): in the exterior loop ViennaRNA's
  evaluation does not consider a branch taking only its 3' neighbour when its 5' neighbour is
  free too, so where the mismatch is less favourable than that 3' dangle alone (13 of the
  Turner 2004 mismatch entries at 37 C) it reports more than the minimum. The minimum
  free energy recursions (ViennaRNA's and jaxrna's) do consider that case, so with dangles 1
  ViennaRNA's evaluation of an optimal structure can exceed its minimum free energy (ViennaRNA
  shows this on its own structures); ``vienna_d1=False`` gives the minimum the recursions use.

Pairs that are not canonical are evaluated with ViennaRNA's non-standard pair type (7), as
ViennaRNA evaluates them; a hairpin of fewer than 3 bases has energy ``INF`` (10,000,000).

>>> energy_of_structure("GGGGAAACCCCAUCGAAAGAUU", "((((...))))(((....))).")
-650
>>> energy_of_structure("GGGGAAACCCCAUCGAAAGAUU", "((((...))))(((....))).", dangles=0)
-420
"""

from __future__ import annotations

from typing import Sequence

from jaxrna.energy import loops
from jaxrna.energy.encoding import PAIR, encode, normalize
from jaxrna.energy.params import INF, EnergyParams, load_params


def pair_table(structure: str) -> list[int]:
    """Partner of every position (0-based), -1 when unpaired; ``()`` only.

    >>> pair_table("((..))")
    [5, 4, -1, -1, 1, 0]
    """
    pt = [-1] * len(structure)
    stack = []
    for k, ch in enumerate(structure):
        if ch == "(":
            stack.append(k)
        elif ch == ")":
            if not stack:
                raise ValueError(f"unbalanced structure: ')' at {k + 1} has no partner")
            i = stack.pop()
            pt[i], pt[k] = k, i
        elif ch not in ".,_-:x":
            raise ValueError(f"unexpected character {ch!r} in structure")
    if stack:
        raise ValueError(f"unbalanced structure: '(' at {stack[-1] + 1} has no partner")
    return pt


def _type(codes, i: int, j: int) -> int:
    t = int(PAIR[codes[i], codes[j]])
    return t if t else 7


def _chain(stems, gaps, first_free5: bool = True, last_free3: bool = True) -> int:
    """Minimum energy of a chain of branches under the odd-dangle rule.

    ``stems[k] = (e, e5, e3, e53)``: energies without neighbours, with the 5' one, the 3' one,
    both (``None`` where that neighbour is not an unpaired base); ``gaps[k]`` the unpaired bases
    between stems k and k+1 (a gap of one base serves at most one of its two stems).
    ``first_free5``/``last_free3``: whether the first stem's 5' base and the last stem's 3'
    base may be used (not claimed by a closing pair).
    """
    free3, took3 = 0, INF      # best prefix: last stem left its 3' base free / used it
    last = len(stems) - 1
    for k, (e, e5, e3, e53) in enumerate(stems):
        anyway = min(free3, took3)
        base5 = free3 if (k > 0 and gaps[k - 1] == 1) else anyway
        can5 = e5 is not None and (k > 0 or first_free5)
        can3 = e3 is not None and (k < last or last_free3)
        new_free = anyway + e
        new_took = INF
        if can5:
            new_free = min(new_free, base5 + e5)
        if can3:
            new_took = anyway + e3
            if can5:
                new_took = min(new_took, base5 + e53)
        free3, took3 = new_free, new_took
    return min(free3, took3)


def _chain_vienna(stems, before) -> int:
    """ViennaRNA's evaluation of the exterior loop with odd dangles (see the module notes):
    ``before[k]`` unpaired bases before stem k (from the 5' end or the previous stem)."""
    free, taken = INF, 0        # the base 5' of the next stem is free / taken (or absent)
    for k, (e, e5, e3, e53) in enumerate(stems):
        if before[k] >= (1 if k == 0 else 2):
            free = taken = min(free, taken)
        both = e53 if e53 is not None else e5 if e5 is not None else e3 if e3 is not None else e
        only3 = e3 if e3 is not None else e
        only5 = e5 if e5 is not None else e
        free, taken = min(taken + e, free + only5), min(taken + only3, free + both)
    return min(free, taken)


def _exterior(p: EnergyParams, codes, pt, dangles: int, vienna_d1: bool = True) -> int:
    n = len(codes)
    stems, gaps, before = [], [], []
    k, last_end = 0, None
    while k < n:
        if pt[k] > k:
            i, j = k, pt[k]
            t = _type(codes, i, j)
            s5 = int(codes[i - 1]) if i > 0 else -1
            s3 = int(codes[j + 1]) if j + 1 < n else -1
            if dangles == 0:
                stems.append(loops.ext_stem(p, t))
            elif dangles == 2:
                stems.append(loops.ext_stem(p, t, s5, s3))
            else:
                u5 = s5 if i > 0 and pt[i - 1] < 0 else -1
                u3 = s3 if j + 1 < n and pt[j + 1] < 0 else -1
                stems.append(_stem_options(loops.ext_stem, p, t, u5, u3))
            if last_end is not None:
                gaps.append(i - last_end - 1)
            before.append(i - (last_end if last_end is not None else -1) - 1)
            last_end = j
            k = j + 1
        else:
            k += 1
    if dangles != 1:
        return sum(stems)
    if not stems:
        return 0
    return _chain_vienna(stems, before) if vienna_d1 else _chain(stems, gaps)


def _stem_options(fn, p, t, u5, u3):
    return (fn(p, t), fn(p, t, u5, -1) if u5 >= 0 else None, fn(p, t, -1, u3) if u3 >= 0 else None,
            fn(p, t, u5, u3) if u5 >= 0 and u3 >= 0 else None)


def _multiloop(p: EnergyParams, codes, pt, i: int, j: int, dangles: int) -> int:
    branches = []
    k = i + 1
    while k < j:
        if pt[k] > k:
            branches.append((k, pt[k]))
            k = pt[k] + 1
        else:
            k += 1
    unpaired = (j - i - 1) - sum(q - r + 1 for r, q in branches)
    e = p.ml_closing + unpaired * p.ml_base
    tc = _type(codes, j, i)
    if dangles == 0:
        return e + loops.ml_stem(p, tc) + sum(loops.ml_stem(p, _type(codes, r, q)) for r, q in branches)
    if dangles == 2:
        e += loops.ml_stem(p, tc, int(codes[j - 1]), int(codes[i + 1]))
        return e + sum(loops.ml_stem(p, _type(codes, r, q), int(codes[r - 1]), int(codes[q + 1]))
                       for r, q in branches)
    stems = []
    for r, q in branches:
        u5 = int(codes[r - 1]) if pt[r - 1] < 0 else -1
        u3 = int(codes[q + 1]) if pt[q + 1] < 0 else -1
        stems.append(_stem_options(loops.ml_stem, p, _type(codes, r, q), u5, u3))
    gaps = [branches[k + 1][0] - branches[k][1] - 1 for k in range(len(branches) - 1)]
    first_gap = branches[0][0] - i - 1
    last_gap = j - branches[-1][1] - 1
    c5 = int(codes[j - 1]) if pt[j - 1] < 0 else -1      # the closing pair read from inside
    c3 = int(codes[i + 1]) if pt[i + 1] < 0 else -1
    best = INF
    for use5 in (False, True):
        for use3 in (False, True):
            if (use5 and c5 < 0) or (use3 and c3 < 0):
                continue
            closing = loops.ml_stem(p, tc, c5 if use5 else -1, c3 if use3 else -1)
            inner = _chain(stems, gaps, first_free5=not (use3 and first_gap == 1),
                           last_free3=not (use5 and last_gap == 1))
            best = min(best, closing + inner)
    return e + best


def loop_energies(sequence: str, structure: str | Sequence[int], params: EnergyParams | None = None,
                  dangles: int = 2, vienna_d1: bool = True) -> list[tuple[str, int, int, int]]:
    """Every loop of the structure as ``(kind, i, j, energy)``: ``("exterior", -1, -1, e)``,
    then ``("hairpin"|"interior"|"multi", i, j, e)`` for each pair (i, j) (0-based)."""
    p = params if params is not None else load_params()
    if dangles not in (0, 1, 2):
        raise ValueError("dangles must be 0, 1 or 2")
    seq = normalize(sequence)
    codes = encode(seq)
    pt = pair_table(structure) if isinstance(structure, str) else list(structure)
    if len(pt) != len(seq):
        raise ValueError(f"structure length {len(pt)} differs from sequence length {len(seq)}")
    out = [("exterior", -1, -1, _exterior(p, codes, pt, dangles, vienna_d1))]
    for i in range(len(seq)):
        j = pt[i]
        if j <= i:
            continue
        branches = []
        k = i + 1
        while k < j:
            if pt[k] > k:
                branches.append(k)
                k = pt[k] + 1
            else:
                k += 1
        if not branches:
            t = _type(codes, i, j)
            if int(PAIR[codes[i], codes[j]]) == 0:
                e = _hairpin_nonstandard(p, codes, seq, i, j)
            else:
                e = loops.hairpin(p, codes, seq, i, j)
            out.append(("hairpin", i, j, e if t else INF))
        elif len(branches) == 1:
            k = branches[0]
            l = pt[k]
            t = _type(codes, i, j)
            t2 = _type(codes, l, k)
            e = loops.interior_energy(p, k - i - 1, j - l - 1, t, t2, int(codes[i + 1]),
                                      int(codes[j - 1]), int(codes[k - 1]), int(codes[l + 1]))
            out.append(("interior", i, j, e))
        else:
            out.append(("multi", i, j, _multiloop(p, codes, pt, i, j, dangles)))
    return out


def _hairpin_nonstandard(p, codes, seq, i, j):
    """A hairpin closed by a non-canonical pair: ViennaRNA's rules with pair type 7."""
    u = j - i - 1
    e = loops.loop_length_cost(p.hairpin, u, p.lxc)
    if u < 3:
        return e
    if u in (3, 4, 6):
        special = p.special_hairpins(u).get(seq[i:j + 1])
        if special is not None:
            return special
        if u == 3:
            return e + p.terminal_au
    return e + int(p.mismatch_hairpin[7, codes[i + 1], codes[j - 1]])


def energy_of_structure(sequence: str, structure: str | Sequence[int],
                        params: EnergyParams | str | None = None, dangles: int = 2,
                        temperature: float = 37.0, vienna_d1: bool = True) -> int:
    """Free energy (dcal/mol) of ``structure`` (dot-bracket, or a 0-based pair table with -1
    for unpaired) on ``sequence``; ``params``: :class:`EnergyParams`, or a set name / ``.par``
    path loaded at ``temperature``. ``INF`` (10,000,000) or more means impossible.
    ``vienna_d1``: with dangles 1, ViennaRNA's exterior-loop evaluation (default) or the
    minimum over dangle assignments (see the module notes)."""
    if params is None or isinstance(params, str):
        params = load_params(params or "turner2004", temperature)
    total = 0
    for _, _, _, e in loop_energies(sequence, structure, params, dangles, vienna_d1):
        if e >= INF or total >= INF:
            return INF
        total += e
    return total
