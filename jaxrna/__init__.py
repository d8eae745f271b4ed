"""jaxrna: GPU-accelerated RNA dynamic programming on JAX.

>>> import jaxrna
>>> jaxrna.fold("GGGAAAUCCC").structure
'(((...))).'
"""

from jaxrna._version import __version__
from jaxrna.fold.api import FoldResult, fold

__all__ = ["__version__", "fold", "FoldResult"]
