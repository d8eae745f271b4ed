"""jaxrna: GPU-accelerated RNA dynamic programming on JAX.

Each algorithm family is a subpackage that can also be called as its main function:
``jaxrna.fold`` (Nussinov), ``jaxrna.align`` (Needleman-Wunsch / Smith-Waterman, affine
gaps), ``jaxrna.targets`` (miRanda 3.3a target scanning), ``jaxrna.interact`` (BPMax). ``jaxrna.core`` holds the same recurrences as pure functions on
encoded arrays (jit, vmap), ``jaxrna.semiring`` the max-plus and log-sum-exp semirings.

>>> import jaxrna
>>> jaxrna.fold("GGGAAAUCCC").structure
'(((...))).'
>>> jaxrna.align("GATTACA", "GATCA", match=1, mismatch=-1, gap_open=2, gap_extend=1).score
2
"""

from jaxrna import align, core, fold, interact, semiring, targets
from jaxrna._version import __version__
from jaxrna.align import Alignment
from jaxrna.fold import FoldResult
from jaxrna.interact import InteractResult

__all__ = ["__version__", "fold", "align", "targets", "interact", "core", "semiring",
           "FoldResult", "Alignment", "InteractResult"]
