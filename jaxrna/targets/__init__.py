"""miRNA target scanning that reproduces miRanda 3.3a exactly (seed 004; ``jaxrna targets``).
Calling the package scans: ``jaxrna.targets(mirnas, targets, no_energy=True)``.

Modules: ``scoring`` (options, position-specific scores and gaps), ``scan`` (the recurrence in
JAX), ``engine`` (lanes, bulk scan, segment refills), ``hits`` (candidates, sort, filters,
traceback), ``energy`` (ViennaRNA), ``reference`` (plain Python oracle of the whole spec),
``sequences`` (fast FASTA input), ``api`` (:func:`scan_targets`, :func:`write_scan`).

>>> from jaxrna.targets import scan_targets
>>> [h.score for r in scan_targets(["GTGAGATCATTTTGAAAGCTG"], ["TAGTTTTCACAATGATCTCGG"],
...                                 no_energy=True) for h in r.hits]
[167]
"""

from jaxrna._callable import make_callable
from jaxrna.targets.api import scan_targets, write_scan
from jaxrna.targets.records import Hit, PairResult
from jaxrna.targets.scoring import ScanParams

__all__ = ["scan_targets", "write_scan", "Hit", "PairResult", "ScanParams"]
make_callable(__name__, scan_targets)
