"""The Gotoh recurrence as the alignment package uses it: scores from a :class:`Scoring`.

The recurrence itself (:func:`cell`, :func:`sweep`, borders, :class:`Params`) lives in the
kernel layer, :mod:`jaxrna.kernels.gotoh`, and is re-exported here; this module adds what
needs a scoring scheme: :func:`params_of` (device scalars) and :func:`fits_int16`.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxrna.align.scoring import Scoring
from jaxrna.kernels.gotoh import (NEG, NEG16, START_BIT, STATE_H, STATE_M, STATE_X,
                                  STATE_Y, Params, add_max, border_col, border_col_host,
                                  border_gaps, border_row, border_row_host, cell, substitution,
                                  sweep)

__all__ = ["NEG", "NEG16", "START_BIT", "STATE_H", "STATE_M", "STATE_X", "STATE_Y", "Params",
           "add_max", "border_col", "border_col_host", "border_gaps", "border_row",
           "border_row_host", "cell", "substitution", "sweep", "params_of", "fits_int16"]


#: The substitution matrix goes to the device with this row stride (alphabets up to this many
#: letters; larger ones round up to a multiple of it): every scheme's Params have the same
#: shapes, so no scheme, matrix or alphabet compiles a program of its own.
MATRIX_STRIDE = 32


def matrix_stride(size: int) -> int:
    """Row stride of the device matrix of an alphabet of ``size`` letters."""
    return max(1, -(-size // MATRIX_STRIDE)) * MATRIX_STRIDE


def params_of(scoring: Scoring) -> Params:
    """The scheme's scores as device scalars (int32 numpy values put on the device: no
    conversion program is compiled for them). The matrix is padded to a
    :func:`matrix_stride` square (``Params.size`` is that stride; codes stay below the
    alphabet's size), so its shape is the same for every scheme."""
    i32 = lambda v: jax.device_put(np.asarray(v, np.int32))  # noqa: E731
    k = scoring.size
    stride = matrix_stride(k)
    mat = np.zeros((stride, stride), np.int32)
    mat[:k, :k] = scoring.matrix
    return Params(i32(mat.reshape(-1)), i32(stride), i32(scoring.match),
                  i32(scoring.mismatch), i32(scoring.open_score), i32(scoring.extend_score),
                  i32(scoring.end_open_score), i32(scoring.end_extend_score))


def fits_int16(scoring: Scoring, h: int, w: int) -> bool:
    """Whether every value of an ``h`` x ``w`` (padded) sweep stays inside int16: finite
    scores within +-2**13 over the longest path, minus infinity at -2**14."""
    return (h + w + 2) * scoring.max_abs() < (1 << 13)
