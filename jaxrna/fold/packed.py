"""The packed, half-memory layout of a tiled Nussinov table (seed 001's *Ours2*, by tiles).

Only tiles on or above the diagonal are stored, one block diagonal after another:
``tab[slot(I, J)]`` is the ``T x T`` tile ``(I, J)``, ``J >= I``, with

    slot(I, J) = offset(J - I) + I,      offset(e) = e * nb - e * (e - 1) / 2

so block diagonal ``e`` (``nb - e`` tiles) is one contiguous slab -- the GPU schedule writes
one slab per step -- and the whole table takes ``nb (nb + 1) / 2`` tiles instead of ``nb^2``:
a 100,000 nt sequence (``T = 128``) needs 20.1 GB of int32, not 40 GB. Cells below the
diagonal inside diagonal tiles are unused (``NEG``).

>>> import numpy as np
>>> dense = np.triu(np.arange(36).reshape(6, 6))
>>> tab = dense_to_packed(dense, 2)
>>> tab.shape, int(slot(0, 2, 3)), int(tab[slot(0, 2, 3), 1, 0])
((6, 2, 2), 5, 10)
>>> bool((packed_to_dense(tab, 6) == dense).all())
True
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from jaxrna.fold.fill import NEG
from jaxrna.kernels.nussinov_layout import diag_offset


def n_slots(nb: int) -> int:
    """Tiles stored for ``nb`` tiles a side."""
    return nb * (nb + 1) // 2


def slot(i_tile, j_tile, nb):
    """Slot of tile ``(I, J)``, ``J >= I`` (ints or JAX arrays)."""
    return diag_offset(j_tile - i_tile, nb) + i_tile


def packed_bytes(n: int, tile: int, itemsize: int = 4) -> int:
    """Bytes of the packed table of an ``n``-nt sequence (padded to whole tiles)."""
    nb = -(-max(n, 1) // tile)
    return n_slots(nb) * tile * tile * itemsize


def dense_to_packed(dense: np.ndarray, tile: int) -> np.ndarray:
    """Pack a square table (side a multiple of ``tile``) -- host side, for tests."""
    n = dense.shape[0]
    nb = n // tile
    out = np.full((n_slots(nb), tile, tile), NEG, dtype=np.int32)
    for e in range(nb):
        for i in range(nb - e):
            j = i + e
            out[slot(i, j, nb)] = dense[i * tile:(i + 1) * tile, j * tile:(j + 1) * tile]
    return out


def packed_to_dense(tab: np.ndarray, length: int) -> np.ndarray:
    """The square table ``N[i, j]`` (0 on and below the diagonal) of the first ``length``
    positions -- host side, for tests and small sequences only."""
    tab = np.asarray(tab)
    t = tab.shape[-1]
    nb = int(round((np.sqrt(8 * tab.shape[0] + 1) - 1) / 2))
    out = np.zeros((nb * t, nb * t), dtype=np.int32)
    for e in range(nb):
        for i in range(nb - e):
            j = i + e
            out[i * t:(i + 1) * t, j * t:(j + 1) * t] = tab[slot(i, j, nb)]
    return np.triu(out)[:length, :length]


def cell(tab, i, j, nb: int):
    """``N(i, j)`` gathered from a packed table (JAX; ``i``/``j`` scalars or arrays).

    Empty intervals (``i > j``) read as 0; ``N(i, i)`` is 0 by construction.
    """
    t = tab.shape[-1]
    i = jnp.asarray(i, jnp.int32)
    j = jnp.asarray(j, jnp.int32)
    it, jt = i // t, j // t
    s = jnp.clip(slot(it, jt, nb), 0, tab.shape[0] - 1)
    v = tab[s, jnp.clip(i % t, 0, t - 1), jnp.clip(j % t, 0, t - 1)]
    return jnp.where((i <= j) & (i >= 0) & (j < nb * t), v, 0)
