"""The two facts of a Nussinov table the fold kernels share with :mod:`jaxrna.fold`: the int32
"minus infinity" :data:`NEG` and the packed layout's slot offset :func:`diag_offset`
(:mod:`jaxrna.fold.packed` describes the layout).

>>> int(diag_offset(2, 4)), NEG + NEG > -(1 << 31)
(7, True)
"""

from __future__ import annotations

#: "minus infinity" for int32 tables; two of them still add without overflow.
NEG = -(1 << 29)


def diag_offset(e, nb):
    """Slot of tile ``(0, e)``: the start of block diagonal ``e`` (ints or JAX arrays)."""
    return e * nb - (e * (e - 1)) // 2
