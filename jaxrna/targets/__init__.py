"""miRNA target scanning that reproduces miRanda 3.3a exactly (seed 004; ``jaxrna targets``).
Calling the package scans: ``jaxrna.targets(mirnas, targets, no_energy=True)``.

Modules: ``scoring`` (options, position-specific scores and gaps), ``scan`` (the recurrence in
JAX), ``sizes``, ``queries`` and ``lanes`` (rounded sizes, miRNAs as scanned, targets packed
into lanes), ``engine`` (the blocks of miRNAs on every device: bulk scan, segment refills),
``hits`` (candidates, sort, filters, traceback), ``blocks`` and ``output`` (host jobs and the
report in miRanda's order), ``energy`` (the duplex energy: recipe and engines), ``duplex``
(the energy model vectorised over hits, NumPy), ``reference`` (plain Python oracle of the
whole spec), ``sequences`` (fast FASTA input), ``api`` (:func:`scan_targets`,
:func:`write_scan`).

>>> from jaxrna.targets import scan_targets
>>> [h.score for r in scan_targets(["GTGAGATCATTTTGAAAGCTG"], ["TAGTTTTCACAATGATCTCGG"],
...                                 no_energy=True) for h in r.hits]
[167]
"""

from jaxrna._callable import lazy_callable_package

__all__ = ["scan_targets", "write_scan", "Hit", "PairResult", "ScanParams"]
lazy_callable_package(__name__, {"scan_targets": "jaxrna.targets.api", "write_scan": "jaxrna.targets.api",
                                 "Hit": "jaxrna.targets.records",
                                 "PairResult": "jaxrna.targets.records",
                                 "ScanParams": "jaxrna.targets.scoring"},
                      'scan_targets')
