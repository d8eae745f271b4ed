"""jaxrna: GPU-accelerated RNA dynamic programming on JAX.

Each algorithm family is a subpackage that can also be called as its main function:

>>> import jaxrna
>>> jaxrna.fold("GGGAAAUCCC").structure
'(((...))).'
"""

from jaxrna import fold
from jaxrna._version import __version__
from jaxrna.fold import FoldResult

__all__ = ["__version__", "fold", "FoldResult"]
