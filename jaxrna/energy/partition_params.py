"""The energy parameters of the partition function: ViennaRNA's Boltzmann-weight parameters
as free energies (float64, dcal/mol), and the host-side inputs of one sequence.

ViennaRNA's partition function does not use the integer tables of its minimum free energy:
``get_scaled_exp_params`` rescales every parameter to the temperature *without* truncating
to an integer (``pf_smooth``, on by default), extrapolates hairpins beyond 30 unpaired bases
with the unrounded ``lxc * ln(u / 30)``, and, instead of clipping the dangles and the
multiloop / exterior mismatches to <= 0, passes them through a smooth step (``SMOOTH``). This
module builds those values from the same raw tables (:func:`jaxrna.energy.params.raw_params`)
into an :class:`~jaxrna.energy.params.EnergyParams` of float64 arrays, so that the energy
pieces of :mod:`jaxrna.energy.terms` (one energy model, one place) compute the partition
function's loop energies; ``exp(-E * 10 / kT)`` of them are ViennaRNA's Boltzmann weights.

>>> p = float_params("turner2004", 37.0)
>>> float(p.stack[1, 1]), round(float(p.dangle5[2, 3]), 4)
(-240.0, -1.6982)
>>> round(kt(37.0), 4)
616.3208
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np

from jaxrna.energy.encoding import normalize
from jaxrna.energy.boltzmann import GASCONST
from jaxrna.energy.params import (INF, K0, LXC37, MAXLOOP, EnergyParams, RawParams,
                                  raw_params, scale)
from jaxrna.energy.terms import COL_PAD, ROW_PAD, group_costs



def kt(temperature: float) -> float:
    """``kT`` in cal/mol at ``temperature`` Celsius, as ViennaRNA computes it."""
    return (float(temperature) + K0) * GASCONST


def smooth(x):
    """ViennaRNA's ``SMOOTH`` of ``x = -G`` (dcal/mol): 0 far below zero, ``x`` above 8.66,
    a smooth step between (the dangles and the multiloop / exterior mismatches)."""
    x = np.asarray(x, np.float64)
    mid = 10 * 0.38490018 * (np.sin(x / 10 - 0.34242663) + 1) ** 2
    return np.where(x / 10 < -1.2283697, 0.0, np.where(x / 10 > 0.8660254, x, mid))


def _rescale(dg, dh, tempf: float):
    """``RESCALE_dG`` in double precision, untruncated (``pf_smooth``)."""
    g = np.asarray(dg, np.float64)
    return np.asarray(dh, np.float64) - (np.asarray(dh, np.float64) - g) * tempf


@functools.lru_cache(maxsize=32)
def _float_params_cached(source: str, temperature: float) -> EnergyParams:
    return float_params(raw_params(source), temperature)


def float_params(source="turner2004", temperature: float = 37.0) -> EnergyParams:
    """The partition function's parameters at ``temperature``: an :class:`EnergyParams` whose
    tables and scalars are float64 free energies (dcal/mol), unrounded, with the smoothed
    dangles; special hairpin energies as float tuples. ``source``: a bundled set name, a
    ``.par`` path or :class:`RawParams`."""
    if isinstance(source, str):
        return _float_params_cached(source, float(temperature))
    raw: RawParams = source
    tempf = (temperature + K0) / (37.0 + K0)
    base = scale(raw, temperature)            # strings, max_ninio, name
    tables = {}
    for attr in ("stack", "hairpin", "bulge", "interior", "mismatch_hairpin", "mismatch_interior",
                 "mismatch_interior_1n", "mismatch_interior_23", "mismatch_multi",
                 "mismatch_exterior", "dangle5", "dangle3", "int11", "int21", "int22"):
        tables[attr] = _rescale(raw.dg[attr], raw.dh[attr], tempf)
    for attr in ("mismatch_multi", "mismatch_exterior", "dangle5", "dangle3"):
        tables[attr] = -smooth(-tables[attr])
    names = ("ml_base", "ml_closing", "ml_intern", "ninio", "terminal_au", "duplex_init")
    scalars = {a: float(_rescale(raw.dg[a], raw.dh[a], tempf)) for a in names}
    spec = {}
    for attr in ("triloops", "tetraloops", "hexaloops"):
        _, dg, dh = raw.special.get(attr, ("", [], []))
        spec[attr[:-1] + "_energy"] = tuple(float(_rescale(g, h, tempf)) for g, h in zip(dg, dh))
    return replace(base, **tables, **scalars, **spec, lxc=LXC37 * tempf)


def special_energies(p: EnergyParams, size: int) -> dict[str, float]:
    """``{loop string: energy}`` of the special hairpins of ``size`` unpaired bases, found as
    ViennaRNA finds them (the first occurrence in the table string; see
    :meth:`EnergyParams.special_hairpins`), with ``p``'s (float) energies."""
    return {loop: float(e) for loop, e in p.special_hairpins(size).items()}


def hairpin_lengths(p: EnergyParams, length: int) -> np.ndarray:
    """``hairpin[u]`` for u < ``length`` (at least 31), beyond 30 ViennaRNA's partition
    function's unrounded ``hairpin[30] + lxc * ln(u / 30)``."""
    out = np.empty(max(length, 31), np.float64)
    for u in range(out.shape[0]):
        out[u] = float(p.hairpin[u]) if u <= MAXLOOP else \
            float(p.hairpin[30]) + p.lxc * math.log(u / 30.0)
    return out


def pf_device_params(p: EnergyParams, length: int, temperature: float) -> dict:
    """The pytree of float64 NumPy arrays that :func:`jaxrna.energy.partition.log_partition`
    takes for tables of padded ``length``: the keys of
    :func:`jaxrna.energy.terms.device_params` (unrounded, from :func:`float_params`) and
    ``kT`` (cal/mol). Every leaf is a traced argument: differentiate with respect to any."""
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    dp = {name: f64(getattr(p, name)) for name in (
        "stack", "mismatch_hairpin", "mismatch_interior", "mismatch_interior_1n",
        "mismatch_interior_23", "mismatch_multi", "mismatch_exterior", "dangle5", "dangle3",
        "int11", "int21", "int22", "ml_base", "ml_closing", "ml_intern", "terminal_au")}
    dp["bulge1"] = f64(p.bulge[1])
    dp["hp_len"] = hairpin_lengths(p, length + ROW_PAD)
    dp["costs"] = group_costs(p, np.float64)
    dp["kT"] = f64(kt(temperature))
    return dp


def special_row(sequence: str, p: EnergyParams, length: int) -> np.ndarray:
    """``(3, length + COL_PAD)`` float64: the special hairpin energy of the loop closed by (i,
    i + size + 1) at column i, for sizes 3, 4, 6 (``INF`` where there is none)."""
    text = normalize(sequence)                 # as ViennaRNA matches them: T stays T
    out = np.full((3, length + COL_PAD), float(INF), np.float64)
    for row, size in enumerate((3, 4, 6)):
        table = special_energies(p, size)
        for i in range(len(text) - size - 1):
            e = table.get(text[i:i + size + 2])
            if e is not None:
                out[row, i] = e
    return out
