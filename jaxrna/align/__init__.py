"""Pairwise alignment: Needleman-Wunsch and Smith-Waterman with affine gaps (three-state Gotoh).

``scoring`` (schemes, alphabets, Biopython matrices), ``reference`` (the definition in plain
Python), ``recurrence`` (one pair's recurrence along antidiagonals), ``traceback`` (host walks
through direction bits), ``api`` (strings and records in, :class:`Alignment` out). The batched
and Pallas sweeps live in :mod:`jaxrna.kernels.wavefront`.
"""

from jaxrna._callable import lazy_callable_package

__all__ = ["Alignment", "align", "align_records"]
lazy_callable_package(__name__, {"Alignment": "jaxrna.align.api", "align": "jaxrna.align.api",
                                 "align_records": "jaxrna.align.api"},
                      'align')
