"""Pairwise alignment: Needleman-Wunsch and Smith-Waterman with affine gaps (three-state Gotoh).

``scoring`` (schemes, alphabets, Biopython matrices), ``reference`` (the definition in plain
Python), ``recurrence`` (the kernels' recurrence with a scheme's scores), ``traceback`` (host
walks through direction bits), ``api`` (strings and records in, :class:`Alignment` out),
``engine`` (what ``jaxrna align`` runs: FASTA files in bulk, batches on the device, formatted
text out; its parts ``jobs``, ``chunks``, ``host_runner`` and ``device_runner``) and ``host``
(parasail's values with our traceback, on a CPU). The recurrence, the
batched and Pallas sweeps and the device traceback live in :mod:`jaxrna.kernels.gotoh` and
:mod:`jaxrna.kernels.wavefront`.
"""

from jaxrna._callable import lazy_callable_package

__all__ = ["Alignment", "align", "align_records"]
lazy_callable_package(__name__, {"Alignment": "jaxrna.align.api", "align": "jaxrna.align.api",
                                 "align_records": "jaxrna.align.api"},
                      'align')
