"""The partition function of the energy model, the plain way: McCaskill's recursions as
ViennaRNA 2.8 computes them (``RNAfold -p``), in Python loops and float64 logarithms.

The slow, literal statement the fast path is tested against; its tests compare it with
ViennaRNA and with brute-force enumeration over every structure of small sequences
(:func:`jaxrna.energy.evaluate.energy_of_structure`). Positions are 0-based. Every table holds
a natural logarithm (``-inf`` = no structure), so nothing overflows at any length:

- ``Qb[i][j]``: structures of [i, j] closed by the pair (i, j): a hairpin, an interior loop
  (stack, bulge, internal loop of at most ``MAXLOOP`` = 30 unpaired bases) around ``Qb[k][l]``,
  or a multiloop ``Qm[i+1][u-1] * Qm1[u][j-1]`` (at least two branches).
- ``Qm1[i][j]``: exactly one multiloop branch starting at i, then unpaired bases up to j.
- ``Qm[i][j]``: at least one branch in [i, j]: ``(unpaired prefix or Qm[i][u-1]) * Qm1[u][j]``.
- ``Z5[k]``: the exterior loop over the first k bases; ``Z = Z5[n]``.

The outside tables (``Ob``, ``Om``, ``Om1``, ``O5``) are the inside recursions read backwards
(each rule ``A += B * C * w`` gives ``B_out += A_out * C * w``), filled from the longest
interval down; the pair probability is ``p_ij = Qb[i][j] * Ob[i][j] / Z``.

Energies: every loop's energy is :mod:`jaxrna.energy.loops`' with the partition function's
parameters (:func:`jaxrna.energy.boltzmann.pf_params`), so the grammar is the minimum free
energy model's (:mod:`jaxrna.energy.reference`): a pair (i, j) needs ``j - i - 1 >= 3``,
a canonical pair type, neither position in ``unpaired`` (ViennaRNA's ``hc_add_up``: the base
stays unpaired in whatever loop it lies); lonely pairs are allowed. What ViennaRNA's
partition function does differently from its minimum free energy, found by comparing:

- Parameters: with its default ``pf_smooth`` the Boltzmann factors use untruncated
  temperature-rescaled energies, smoothed (not clipped) dangles and exterior/multiloop
  mismatches, and untruncated ``lxc`` extrapolation of hairpins over 30 bases (details in
  :mod:`jaxrna.energy.boltzmann`). Smoothing matters at 37 C too wherever a dangle entry is
  near 0 (Turner 2004's ``dangle5`` of GC pairs; Turner 1999's N columns), and the
  untruncated rescaling at any other temperature.
- Dangles: ViennaRNA's partition function has no odd-dangle model; ``-d1`` and ``-d3`` are
  computed as ``-d2`` (so is this). With dangles 2 every branch takes the mismatch of its two
  neighbours (a dangle where the sequence ends), paired or not, in the exterior loop and in
  multiloops, as in the minimum free energy; with 0 none.
- ``fc.pf()`` returns the ensemble energy as a C float (about 1e-6 kcal/mol of rounding);
  its probabilities are doubles. ``fc.pr_structure`` (the MFE frequency) reads the
  structure's energy as a C float too (relative error up to ``2^-24 |E| / kT``).
- The ensemble quantities of ``RNAfold -p`` (centroid, diversity, MFE frequency, MEA) are
  :mod:`jaxrna.energy.ensemble_measures`'s functions of the probabilities.

Cost: cubic in Python; on the 2-core development machine (loaded) 100 nt take about 1.3 s
for ``Z`` and 2.6 s with the probabilities, 300 nt about 20 s and 60 s
(``probabilities=False`` skips the outside pass).

>>> g, p = partition("GGGGAAACCCCAUCGAAAGAUU")
>>> round(g, 4), round(float(p[0, 10]), 4)
(-6.9319, 0.9343)
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from jaxrna.energy import loops
from jaxrna.energy.boltzmann import kt, pf_params
from jaxrna.energy.encoding import PAIR, RTYPE, encode, normalize
from jaxrna.energy.params import MAXLOOP, EnergyParams, RawParams

NEG = -math.inf
MIN_HAIRPIN = 3


def lse(terms) -> float:
    """``log(sum(exp(t)))`` of a list of logarithms (``-inf`` for an empty sum)."""
    m = max(terms, default=NEG)
    if m == NEG:
        return NEG
    return m + math.log(math.fsum(math.exp(t - m) for t in terms))


def lae(a: float, b: float) -> float:
    """``log(exp(a) + exp(b))``."""
    if a < b:
        a, b = b, a
    if b == NEG:
        return a
    return a + math.log1p(math.exp(b - a))


class PartitionModel:
    """A sequence with its partition-function parameters, dangle mode (0 or 2) and
    forbidden-to-pair positions; :meth:`inside` then :meth:`outside` fill the tables."""

    def __init__(self, sequence: str, params: EnergyParams, dangles: int = 2,
                 unpaired: Iterable[int] = (), temperature: float = 37.0):
        if dangles not in (0, 1, 2, 3):
            raise ValueError("dangles must be 0, 1, 2 or 3")
        self.seq = normalize(sequence)
        self.s = [int(x) for x in encode(self.seq)]
        self.n = n = len(self.seq)
        self.p = params
        self.d = 0 if dangles == 0 else 2
        self.beta = 1.0 / (100.0 * kt(temperature))     # ln weight per dcal/mol, negated
        up = set(int(k) for k in unpaired)
        s = self.s
        self.can = [[(j - i - 1 >= MIN_HAIRPIN and PAIR[s[i], s[j]] > 0 and i not in up
                      and j not in up) for j in range(n)] for i in range(n)]

    def w(self, energy: float) -> float:
        """The log Boltzmann weight of ``energy`` dcal/mol."""
        return -energy * self.beta

    # -- loop energies (dcal/mol, floats) ---------------------------------------------------

    def ext_branch(self, i: int, j: int) -> float:
        t = int(PAIR[self.s[i], self.s[j]])
        if self.d == 0:
            return loops.ext_stem(self.p, t)
        n5 = self.s[i - 1] if i > 0 else -1
        n3 = self.s[j + 1] if j + 1 < self.n else -1
        return loops.ext_stem(self.p, t, n5, n3)

    def ml_branch(self, i: int, j: int) -> float:
        """A multiloop branch (i, j); with dangles 2 its neighbours i-1 and j+1 (always
        inside the sequence) give the mismatch."""
        t = int(PAIR[self.s[i], self.s[j]])
        if self.d == 0:
            return loops.ml_stem(self.p, t)
        return loops.ml_stem(self.p, t, self.s[i - 1], self.s[j + 1])

    def ml_closing(self, i: int, j: int) -> float:
        """``ml_closing`` plus the closing pair (i, j) as a branch read from inside."""
        t = int(RTYPE[PAIR[self.s[i], self.s[j]]])
        if self.d == 0:
            return self.p.ml_closing + loops.ml_stem(self.p, t)
        return self.p.ml_closing + loops.ml_stem(self.p, t, self.s[j - 1], self.s[i + 1])

    def inner_pairs(self, i: int, j: int):
        """Inner pairs (k, l) of interior loops closed by (i, j): k ascending, l descending,
        at most ``MAXLOOP`` unpaired bases."""
        can = self.can
        for k in range(i + 1, min(i + MAXLOOP + 2, j - 1)):
            u1 = k - i - 1
            row = can[k]
            for l in range(j - 1, k, -1):
                if u1 + j - l - 1 > MAXLOOP:
                    break
                if row[l]:
                    yield k, l

    # -- inside -----------------------------------------------------------------------------

    def inside(self) -> float:
        """Fill ``Qb``, ``Qm1``, ``Qm``, ``Z5``; return ``ln Z``."""
        n, w, p = self.n, self.w, self.p
        Qb = [[NEG] * n for _ in range(n)]
        Qm = [[NEG] * n for _ in range(n)]
        Qm1 = [[NEG] * n for _ in range(n)]
        self.Qb, self.Qm, self.Qm1 = Qb, Qm, Qm1
        mlb = p.ml_base
        for span in range(MIN_HAIRPIN + 1, n):
            for i in range(0, n - span):
                j = i + span
                if self.can[i][j]:
                    Qb[i][j] = self._qb(i, j)
                if i == 0 or j == n - 1:
                    continue          # multiloop parts lie strictly inside a closing pair
                Qm1[i][j] = lse([Qb[i][l] + w(self.ml_branch(i, l) + (j - l) * mlb)
                                 for l in range(i + MIN_HAIRPIN + 1, j + 1) if Qb[i][l] > NEG])
                Qm[i][j] = lse([Qm1[u][j] + lae(w((u - i) * mlb), Qm[i][u - 1] if u > i else NEG)
                                for u in range(i, j + 1) if Qm1[u][j] > NEG])
        Z5 = [0.0] * (n + 1)
        for j in range(n):
            Z5[j + 1] = lse([Z5[j]] + [Z5[i] + Qb[i][j] + w(self.ext_branch(i, j))
                                       for i in range(0, j - MIN_HAIRPIN) if Qb[i][j] > NEG])
        self.Z5 = Z5
        self.log_z = Z5[n]
        return self.log_z

    def _qb(self, i: int, j: int) -> float:
        Qb, Qm, Qm1, w, p = self.Qb, self.Qm, self.Qm1, self.w, self.p
        terms = [w(loops.hairpin(p, self.s, self.seq, i, j))]
        for k, l in self.inner_pairs(i, j):
            if Qb[k][l] > NEG:
                terms.append(Qb[k][l] + w(loops.interior(p, self.s, i, j, k, l)))
        closing = w(self.ml_closing(i, j))
        for u in range(i + 2, j):
            a, b = Qm[i + 1][u - 1], Qm1[u][j - 1]
            if a > NEG and b > NEG:
                terms.append(closing + a + b)
        return lse(terms)

    # -- outside ----------------------------------------------------------------------------

    def outside(self) -> np.ndarray:
        """Fill the outside tables (after :meth:`inside`); return the pair probabilities, an
        n x n float64 array with ``p[i, j]`` (i < j) and zeros elsewhere."""
        n, w, p = self.n, self.w, self.p
        Qb, Qm, Qm1, Z5 = self.Qb, self.Qm, self.Qm1, self.Z5
        Ob = [[NEG] * n for _ in range(n)]
        Om = [[NEG] * n for _ in range(n)]
        Om1 = [[NEG] * n for _ in range(n)]
        mlb = p.ml_base
        O5 = [NEG] * (n + 1)
        O5[n] = 0.0
        for j in range(n - 1, -1, -1):         # Z5[j+1] = Z5[j] + sum_i Z5[i] Qb[i][j] ext
            o = O5[j + 1]
            O5[j] = lae(O5[j], o)
            for i in range(0, j - MIN_HAIRPIN):
                if Qb[i][j] > NEG:
                    e = w(self.ext_branch(i, j))
                    O5[i] = lae(O5[i], o + Qb[i][j] + e)
                    Ob[i][j] = lae(Ob[i][j], o + Z5[i] + e)
        for span in range(n - 1, MIN_HAIRPIN, -1):
            for i in range(0, n - span):
                j = i + span
                o = Om[i][j]
                if o > NEG:                     # Qm[i][j] = sum_u (prefix) Qm1[u][j]
                    for u in range(i, j + 1):
                        if Qm1[u][j] == NEG:
                            continue
                        left = Qm[i][u - 1] if u > i else NEG
                        Om1[u][j] = lae(Om1[u][j], o + lae(w((u - i) * mlb), left))
                        if left > NEG:
                            Om[i][u - 1] = lae(Om[i][u - 1], o + Qm1[u][j])
                o = Om1[i][j]
                if o > NEG:                     # Qm1[i][j] = sum_l Qb[i][l] branch
                    for l in range(i + MIN_HAIRPIN + 1, j + 1):
                        if Qb[i][l] > NEG:
                            e = w(self.ml_branch(i, l) + (j - l) * mlb)
                            Ob[i][l] = lae(Ob[i][l], o + e)
                o = Ob[i][j]
                if o > NEG and Qb[i][j] > NEG:  # the loop (i, j) closes
                    for k, l in self.inner_pairs(i, j):
                        if Qb[k][l] > NEG:
                            e = w(loops.interior(p, self.s, i, j, k, l))
                            Ob[k][l] = lae(Ob[k][l], o + e)
                    c = o + w(self.ml_closing(i, j))
                    for u in range(i + 2, j):
                        a, b = Qm[i + 1][u - 1], Qm1[u][j - 1]
                        if a > NEG and b > NEG:
                            Om[i + 1][u - 1] = lae(Om[i + 1][u - 1], c + b)
                            Om1[u][j - 1] = lae(Om1[u][j - 1], c + a)
        self.Ob, self.Om, self.Om1, self.O5 = Ob, Om, Om1, O5
        probs = np.zeros((n, n))
        for i in range(n):
            for j in range(i + 1, n):
                if Qb[i][j] > NEG and Ob[i][j] > NEG:
                    probs[i, j] = math.exp(Qb[i][j] + Ob[i][j] - self.log_z)
        return probs


def resolve_params(params, temperature: float, dangles: int) -> EnergyParams:
    """:func:`pf_params` of a set name / ``.par`` path / :class:`RawParams` (``None``:
    Turner 2004); an :class:`EnergyParams` is used as given (it must be at ``temperature``)."""
    if isinstance(params, EnergyParams):
        if float(params.temperature) != float(temperature):
            raise ValueError(f"parameters at {params.temperature} C, temperature {temperature} C")
        return params
    if params is None or isinstance(params, (str, RawParams)):
        return pf_params(params if params is not None else "turner2004", temperature, dangles)
    raise TypeError(f"params: a set name, a .par path, RawParams or EnergyParams, not {params!r}")


def partition(sequence: str, params: EnergyParams | RawParams | str | None = None,
              dangles: int = 2, temperature: float = 37.0, unpaired: Iterable[int] = (),
              probabilities: bool = True) -> tuple[float, np.ndarray | None]:
    """Ensemble free energy (kcal/mol, ``-kT ln Z``) and base-pair probabilities (an n x n
    float64 array, ``p[i, j]`` for 0-based i < j; ``None`` with ``probabilities=False``),
    as ViennaRNA 2.8's ``fc.pf()`` and ``fc.bpp()``.

    ``params``: a set name (``turner2004``, ``turner1999``), a ``.par`` path or
    :class:`RawParams` (made into :func:`~jaxrna.energy.boltzmann.pf_params` at
    ``temperature``), or partition-function :class:`EnergyParams`. ``dangles`` 0 or 2 (1 and 3
    are computed as 2, as ViennaRNA's partition function does); ``unpaired``: 0-based
    positions that must not pair.
    """
    p = resolve_params(params, temperature, dangles)
    model = PartitionModel(sequence, p, dangles, unpaired, temperature)
    log_z = model.inside()
    energy = -kt(temperature) * log_z
    return energy, (model.outside() if probabilities else None)
