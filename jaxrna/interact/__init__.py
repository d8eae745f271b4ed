"""BPMax RNA-RNA interaction (seed 003). Calling the package interacts two strands:
``jaxrna.interact.interact("UCGCUGCU", "GUCGGA")`` or ``jaxrna.interact("UCGCUGCU", "GUCGGA")``.

Modules: ``recurrence`` (the JAX fill of one pair), ``geometry`` (its static shape),
``windows`` (banded layout, planning, reading windows), ``classes`` (a run's geometry classes,
merged onto at most 8 programs), ``program`` (the one device program of
a batch: fill, windows, best window and its traceback box), ``host_fill`` and ``host_engine``
(the same tables in compiled C at each pair's true size, on every core: small pairs on a CPU,
no JAX), ``results`` (a pair's result from either engine), ``traceback``, ``pairs`` (the pairs
of a joint structure and their weights), ``reference`` (plain Python oracle), ``brute`` (the
four rules of a valid joint structure and exhaustive enumeration), ``api`` (:func:`interact`,
:func:`interact_pairs`), ``warmup`` (every program a job can use, prepared in advance: one per
geometry class, issue 26).

>>> import jaxrna.interact
>>> jaxrna.interact("UCGCUGCU", "GUCGGA").score
14.5
"""

from jaxrna._callable import lazy_callable_package

__all__ = ["InteractResult", "interact", "interact_pairs"]
lazy_callable_package(__name__, {"InteractResult": "jaxrna.interact.results", "interact": "jaxrna.interact.api",
                                 "interact_pairs": "jaxrna.interact.api"},
                      'interact')
