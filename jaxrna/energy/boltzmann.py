"""The energies ViennaRNA's partition function weighs structures with, and its ``kT``.

ViennaRNA 2.8 builds its Boltzmann factors (``get_scaled_exp_params``) from the same parameter
file as its minimum free energies, but not from the same numbers. With its default
``pf_smooth = 1``:

- Temperature rescaling is not truncated: ``G(T) = dH - (dH - dG37) * (T + 273.15) / 310.15``
  stays a float (the minimum free energy tables truncate it toward zero to an integer). At
  37 C the two agree (``(T + K0) / 310.15`` is exactly 1).
- The dangle and exterior/multiloop mismatch tables (``dangle5``, ``dangle3``,
  ``mismatch_exterior``, ``mismatch_multi``), used with dangles 2, are not clipped to ``<= 0``
  but smoothed: the energy ``E`` becomes ``-smooth(-E)`` with ``smooth(x)`` = 0 for
  ``x / 10 < -1.2283697``, ``x`` for ``x / 10 > 0.8660254``, else ``10 * 0.38490018 *
  (sin(x / 10 - 0.34242663) + 1) ** 2`` (dcal/mol). So an entry of 0 weighs like -0.17 dcal/mol
  and a small positive entry like slightly less than 0, even at 37 C; entries of -10 dcal/mol
  or below are unchanged. With dangles 0 these tables are not used (ViennaRNA sets their
  factors to 1).
- A hairpin of more than 30 unpaired bases adds ``lxc * ln(u / 30)`` untruncated
  (:func:`jaxrna.energy.loops.loop_length_cost` does so for float tables).

Everything else (special hairpins, terminal AU/GU, multiloop parameters, the Ninio term
``min(max_ninio, |n1 - n2| * ninio)`` with the rescaled float ``ninio``) is the same formula.
:func:`pf_params` returns these energies as an :class:`~jaxrna.energy.params.EnergyParams`
of float64 tables, so the loop functions of :mod:`jaxrna.energy.loops` give a loop's
partition-function energy unchanged. A Boltzmann weight is ``exp(-E * 10 / kT)`` with ``E`` in
dcal/mol and ``kT = (T + 273.15) * 1.98717`` cal/mol (ViennaRNA's ``K0`` and ``GASCONST``).

>>> p = pf_params("turner2004", 37.0)
>>> float(p.stack[1, 1]), float(p.dangle5[2, 3])       # dangle5[GC][G] = 0 in the file
(-240.0, -1.698165783378729)
>>> round(kt(37.0), 6)
0.616321
"""

from __future__ import annotations

import functools

import numpy as np

from jaxrna.energy.params import K0, LXC37, EnergyParams, RawParams, raw_params

#: ViennaRNA's gas constant in cal/(mol K) (``RNA.GASCONST``).
GASCONST = 1.98717
#: Tables ViennaRNA smooths in its Boltzmann factors (used with dangles only).
SMOOTHED = ("mismatch_multi", "mismatch_exterior", "dangle5", "dangle3")


def kt(temperature: float = 37.0) -> float:
    """``kT`` in kcal/mol at ``temperature`` Celsius."""
    return (temperature + K0) * GASCONST / 1000.0


def smooth(x):
    """ViennaRNA's ``SMOOTH`` of ``x = -E`` (dcal/mol), elementwise."""
    x = np.asarray(x, dtype=np.float64)
    y = x / 10.0
    mid = 10.0 * 0.38490018 * (np.sin(y - 0.34242663) + 1.0) ** 2
    return np.where(y < -1.2283697, 0.0, np.where(y > 0.8660254, x, mid))


def _rescale(dg, dh, tempf: float):
    if isinstance(dg, np.ndarray):
        return dh.astype(np.float64) - (dh - dg).astype(np.float64) * tempf
    return float(dh) - float(dh - dg) * tempf


def pf_params(source: str | RawParams = "turner2004", temperature: float = 37.0,
              dangles: int = 2) -> EnergyParams:
    """The partition function's energies (float64 tables, dcal/mol) of a parameter set
    (``turner2004``, ``turner1999``, a ``.par`` path or :class:`RawParams`) at
    ``temperature`` Celsius, for ``dangles`` 0 or 2 (1 and 3 count as 2)."""
    if isinstance(source, RawParams):
        return _build(source, float(temperature), dangles != 0)
    return _cached(source, float(temperature), dangles != 0)


@functools.lru_cache(maxsize=64)
def _cached(source: str, temperature: float, with_dangles: bool) -> EnergyParams:
    return _build(raw_params(source), temperature, with_dangles)


def _build(raw: RawParams, temperature: float, with_dangles: bool) -> EnergyParams:
    tempf = (temperature + K0) / (37.0 + K0)
    t = {a: np.ascontiguousarray(_rescale(v, raw.dh[a], tempf))
         for a, v in raw.dg.items() if isinstance(v, np.ndarray)}
    s = {a: _rescale(v, raw.dh[a], tempf) for a, v in raw.dg.items() if not isinstance(v, np.ndarray)}
    for a in SMOOTHED:
        t[a] = -smooth(-t[a]) if with_dangles else np.zeros_like(t[a])
    spec = {}
    for attr in ("triloops", "tetraloops", "hexaloops"):
        string, dg, dh = raw.special.get(attr, ("", [], []))
        spec[attr] = string
        spec[attr[:-1] + "_energy"] = tuple(_rescale(g, h, tempf) for g, h in zip(dg, dh))
    return EnergyParams(name=raw.name, temperature=temperature, **t,
                        ml_base=s["ml_base"], ml_closing=s["ml_closing"], ml_intern=s["ml_intern"],
                        ninio=s["ninio"], max_ninio=int(raw.max_ninio),
                        terminal_au=s["terminal_au"], duplex_init=s["duplex_init"],
                        lxc=LXC37 * tempf, **spec)


def log_weight(energy: float, temperature: float = 37.0) -> float:
    """``ln`` of the Boltzmann weight of ``energy`` dcal/mol: ``-E / (100 kT)``."""
    return -energy / (100.0 * kt(temperature))


__all__ = ["GASCONST", "SMOOTHED", "kt", "log_weight", "pf_params", "smooth"]
