"""ViennaRNA as the oracle of the energy tests: its parameter sets, folds and evaluations.

ViennaRNA keeps one global parameter set; :func:`vienna_params` loads a set for a block and
restores the previous one afterwards (other tests, e.g. ``targets``, rely on theirs).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import random
import tempfile

import numpy as np

RNA = __import__("RNA")

LOADERS = {"turner2004": "params_load_RNA_Turner2004", "turner1999": "params_load_RNA_Turner1999"}


@contextlib.contextmanager
def vienna_params(name_or_path: str):
    """A bundled set, or a file read on top of Turner 2004 (as jaxrna reads files)."""
    fd, saved = tempfile.mkstemp(suffix=".par")
    os.close(fd)
    RNA.params_save(saved)
    try:
        if name_or_path in LOADERS:
            getattr(RNA, LOADERS[name_or_path])()
        else:
            RNA.params_load_RNA_Turner2004()
            assert RNA.params_load(name_or_path)
        yield
    finally:
        RNA.params_load(saved)
        os.unlink(saved)


def fold_compound(seq: str, dangles: int = 2, temperature: float = 37.0, unpaired=()):
    md = RNA.md()
    md.dangles = dangles
    md.temperature = temperature
    fc = RNA.fold_compound(seq, md)
    for k in unpaired:
        fc.hc_add_up(k + 1)
    return fc


def vienna_mfe(seq: str, dangles: int = 2, temperature: float = 37.0, unpaired=()):
    """``(energy in dcal/mol, structure, fold compound)``."""
    fc = fold_compound(seq, dangles, temperature, unpaired)
    structure, e = fc.mfe()
    return int(round(e * 100)), structure, fc


def vienna_eval(fc, structure: str) -> int:
    return int(round(fc.eval_structure(structure) * 100))


_SHAPES = {"int11": (8, 8, 5, 5), "int21": (8, 8, 5, 5, 5), "int22": (8, 8, 5, 5, 5, 5),
           "mismatchI": (8, 5, 5), "mismatchH": (8, 5, 5), "mismatchM": (8, 5, 5),
           "mismatchExt": (8, 5, 5), "mismatch1nI": (8, 5, 5), "mismatch23I": (8, 5, 5)}
#: ViennaRNA's vrna_param_t field -> jaxrna EnergyParams attribute.
NAMES = {"stack": "stack", "hairpin": "hairpin", "bulge": "bulge", "internal_loop": "interior",
         "dangle5": "dangle5", "dangle3": "dangle3", "int11": "int11", "int21": "int21",
         "int22": "int22", "mismatchI": "mismatch_interior", "mismatchH": "mismatch_hairpin",
         "mismatchM": "mismatch_multi", "mismatchExt": "mismatch_exterior",
         "mismatch1nI": "mismatch_interior_1n", "mismatch23I": "mismatch_interior_23"}


def vienna_tables(temperature: float, dangles: int = 2) -> dict:
    """ViennaRNA's scaled tables for the current set (multi-dimensional ones read through
    the pointer its Python binding exposes)."""
    md = RNA.md()
    md.temperature = temperature
    md.dangles = dangles
    P = RNA.param(md)
    out = {}
    for field, attr in NAMES.items():
        value = getattr(P, field)
        if field in _SHAPES:
            ptr = ctypes.cast(int(value), ctypes.POINTER(ctypes.c_int))
            out[attr] = np.ctypeslib.as_array(ptr, shape=_SHAPES[field]).copy()
        else:
            out[attr] = np.array(value)
    out.update(ml_base=P.MLbase, ml_closing=P.MLclosing, ml_intern=P.MLintern[1],
               ninio=P.ninio[2], terminal_au=P.TerminalAU, duplex_init=P.DuplexInit, lxc=P.lxc)
    return out


def random_sequence(rng: random.Random, n: int, alphabet: str = "ACGU") -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def random_case(rng: random.Random, lo: int, hi: int):
    """A random sequence (sometimes with N) and sometimes a few positions forced unpaired."""
    n = rng.randint(lo, hi)
    seq = random_sequence(rng, n, "ACGUN" if rng.random() < 0.1 else "ACGU")
    unpaired = sorted(rng.sample(range(n), rng.randint(1, max(1, n // 10)))) \
        if n and rng.random() < 0.25 else []
    return seq, unpaired


def dot_bracket(partner) -> str:
    return "".join("." if p < 0 else "(" if p > i else ")" for i, p in enumerate(partner))


def check_optimal(fc, seq, structure, params, dangles, want) -> bool:
    """``structure`` is optimal: jaxrna's evaluation (the minimum over dangle assignments) is
    ``want``, and ViennaRNA's evaluation equals jaxrna's ViennaRNA-compatible one. Returns
    whether ViennaRNA's evaluation is ``want`` itself (always, except with dangles 1 where
    ViennaRNA's exterior-loop evaluation can exceed the minimum; see jaxrna.energy.evaluate)."""
    from jaxrna.energy.evaluate import energy_of_structure

    ev = vienna_eval(fc, structure)
    assert energy_of_structure(seq, structure, params, dangles, vienna_d1=False) == want, \
        (seq, structure, dangles)
    assert energy_of_structure(seq, structure, params, dangles) == ev, (seq, structure, dangles)
    if dangles != 1:
        assert ev == want
    return ev == want
