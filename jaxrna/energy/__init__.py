"""Turner nearest-neighbour energy model: ViennaRNA's minimum free energies, exactly.

Modules: ``params`` (ViennaRNA ``.par`` files, temperature rescaling), ``encoding``,
``loops`` (single-loop energies), ``evaluate`` (energy of a structure), ``reference`` (plain
Python Zuker recursions), ``terms`` (the recurrence as candidate lists), ``fill`` (JAX diagonal
sweep), ``traceback`` (JAX traceback), ``api`` (:func:`fold_energy`,
:func:`fold_energy_records`).

>>> from jaxrna.energy import energy_of_structure
>>> energy_of_structure("GGGGAAACCCC", "((((...))))")
-450
"""

from __future__ import annotations

import importlib

_LAZY = {
    "fold_energy": "jaxrna.energy.api",
    "fold_energy_records": "jaxrna.energy.api",
    "EnergyModel": "jaxrna.energy.api",
    "EnergyFoldResult": "jaxrna.energy.api",
    "energy_of_structure": "jaxrna.energy.evaluate",
    "load_params": "jaxrna.energy.params",
    "parse_par": "jaxrna.energy.params",
}
__all__ = sorted(_LAZY)


def __getattr__(name: str):
    try:
        module = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'jaxrna.energy' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
