"""miRNA target scanning that reproduces miRanda 3.3a exactly (``jaxrna targets``).

>>> from jaxrna.targets import scan_targets
>>> [h.score for r in scan_targets(["GTGAGATCATTTTGAAAGCTG"], ["TAGTTTTCACAATGATCTCGG"],
...                                 no_energy=True) for h in r.hits]
[167]
"""

from jaxrna.targets.api import scan_targets, write_scan
from jaxrna.targets.records import Hit, PairResult
from jaxrna.targets.scoring import ScanParams

__all__ = ["scan_targets", "write_scan", "Hit", "PairResult", "ScanParams"]
