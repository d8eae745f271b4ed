"""jaxrna: GPU-accelerated RNA dynamic programming on JAX.

Each algorithm family is a subpackage that can also be called as its main function:
``jaxrna.fold`` (Nussinov), ``jaxrna.align`` (Needleman-Wunsch / Smith-Waterman, affine
gaps), ``jaxrna.targets`` (miRanda 3.3a target scanning), ``jaxrna.interact`` (BPMax).
``jaxrna.core`` holds the same recurrences as pure functions on encoded arrays (jit, vmap),
``jaxrna.semiring`` the max-plus and log-sum-exp semirings.

Subpackages are imported on first use, so ``import jaxrna`` (and ``jaxrna --help``) does not
import JAX.

>>> import jaxrna
>>> jaxrna.fold("GGGAAAUCCC").structure
'(((...))).'
>>> jaxrna.align("GATTACA", "GATCA", match=1, mismatch=-1, gap_open=2, gap_extend=1).score
2
"""

from __future__ import annotations

import importlib
from typing import Any

from jaxrna._version import __version__

#: Public name -> (module, attribute or None for the module itself).
_LAZY = {
    "fold": ("jaxrna.fold", None),
    "align": ("jaxrna.align", None),
    "targets": ("jaxrna.targets", None),
    "interact": ("jaxrna.interact", None),
    "core": ("jaxrna.core", None),
    "semiring": ("jaxrna.semiring", None),
    "FoldResult": ("jaxrna.fold.api", "FoldResult"),
    "Alignment": ("jaxrna.align.api", "Alignment"),
    "InteractResult": ("jaxrna.interact.api", "InteractResult"),
}

__all__ = ["__version__", "fold", "align", "targets", "interact", "core", "semiring",
           "FoldResult", "Alignment", "InteractResult"]


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'jaxrna' has no attribute {name!r}") from None
    value = importlib.import_module(module)
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
