"""BPMax RNA-RNA interaction (seed 003). Calling the package interacts two strands:
``jaxrna.interact.interact("UCGCUGCU", "GUCGGA")`` or ``jaxrna.interact("UCGCUGCU", "GUCGGA")``.

Modules: ``recurrence`` (the JAX fill of one pair), ``windows`` (banded layout, planning,
reading windows), ``traceback``, ``reference`` (plain Python oracle), ``brute`` (the four rules
of a valid joint structure and exhaustive enumeration), ``api`` (:func:`interact`,
:func:`interact_pairs`).

>>> import jaxrna.interact
>>> jaxrna.interact("UCGCUGCU", "GUCGGA").score
14.5
"""

from jaxrna._callable import make_callable
from jaxrna.interact.api import InteractResult, interact, interact_pairs

__all__ = ["InteractResult", "interact", "interact_pairs"]
make_callable(__name__, interact)
