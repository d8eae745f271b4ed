"""The packed traceback codes of a miRanda fill, read with NumPy alone (no JAX).

Each cell of a refilled segment carries one byte: bits 0-1 the best state (0 none, 1 a, 2 b,
3 c), bits 2-3 the state a came from, bit 4 set when b came from b (else from a), bit 5 set
when c came from c (else from a). The fills that write it live in :mod:`jaxrna.targets.scan`
and :mod:`jaxrna.kernels.miranda_fill`; the host code that walks it (hit selection in worker
processes) needs only this module, so those processes never import JAX.

>>> import numpy as np
>>> [int(x[0]) for x in unpack_track(np.array([1 | (2 << T1_SHIFT) | T2_BIT]))]
[1, 2, 2, 1]
"""

from __future__ import annotations

import numpy as np

#: Bit layout of a track byte (see the module docstring).
T0_MASK, T1_SHIFT, T2_BIT, T3_BIT = 0x3, 2, 0x10, 0x20


def unpack_track(code: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(t0, t1, t2, t3)`` state codes (1 a, 2 b, 3 c, 0 none) from packed track bytes."""
    code = np.asarray(code).astype(np.int32)
    t0 = code & T0_MASK
    t1 = (code >> T1_SHIFT) & 0x3
    t2 = np.where(code & T2_BIT, 2, 1)
    t3 = np.where(code & T3_BIT, 3, 1)
    return t0, t1, t2, t3
