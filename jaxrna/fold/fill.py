"""The Nussinov fill for one sequence, as a sweep over diagonals; batch it with ``jax.vmap``.

Recurrence (weights ``w`` > 0 only for allowed pairs, pairs need ``j - i > min_loop``)::

    N(i, i) = 0,   N(i, i-1) = 0
    N(i, j) = max( N(i+1, j-1) + w(i, j)              if j - i > min_loop and w(i, j) > 0,
                   max_{i <= k < j} N(i, k) + N(k+1, j) )

The split term covers "i unpaired" (k = i) and "j unpaired" (k = j - 1).

Layout. Two skewed copies of the table make every read of the split reduction contiguous:
``rows[1 + d, i] = N(i, i + d)`` (row i read along its diagonal offsets; row 0 holds the
empty diagonal d = -1) and ``cols[n - 1 - d, j] = N(j - d, j)`` (column j read upwards). For
diagonal ``d`` the split maximum of every cell is then one elementwise reduction over the
leading axis of two rectangular slices::

    splits[i] = max_t rows[1 + t, i] + cols[n - d + t, i + d],   0 <= t < d

Cells not yet computed hold ``NEG``, so padded parts of the slices drop out of the maximum.
Diagonals are processed in a few blocks, each a ``lax.fori_loop`` with static slice shapes
(width = the block's last diagonal, height = cells on its first diagonal), so the work stays
within a few per cent of the n^3/6 split operations that are needed.

:func:`diagonal_splits` is the hot loop, behind a function boundary so a GPU kernel can
replace it.

>>> import numpy as np
>>> from jaxrna.alphabet import encode
>>> from jaxrna.weights import parse_weights
>>> w = parse_weights("unit").matrix()
>>> table = nussinov_fill(encode("GGGAAAUCC"), w, min_loop=3)
>>> int(score_from_table(table, 9))
3
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.kernels.nussinov_layout import NEG  # "minus infinity" of int32 tables


def block_bounds(n: int, blocks: int = 16) -> list[tuple[int, int]]:
    """Split diagonals 1..n-1 into at most ``blocks`` ranges ``[d0, d1)`` of similar size.

    >>> block_bounds(10, 4)
    [(1, 4), (4, 7), (7, 10)]
    """
    if n <= 1:
        return []
    size = max(1, -(-(n - 1) // blocks))
    return [(d0, min(d0 + size, n)) for d0 in range(1, n, size)]


def diagonal_splits(rows: jax.Array, cols: jax.Array, d: jax.Array, width: int,
                    height: int, n: int) -> jax.Array:
    """Split maxima of cells ``(i, i + d)`` for ``i < height``, reading ``width`` offsets.

    ``width`` must be at least ``d`` and ``height`` at least ``n - d``; entries past them are
    ``NEG`` so they do not change the maximum.
    """
    left = rows[1:1 + width, :height]
    right = jax.lax.dynamic_slice(cols, (n - d, d), (width, height))
    return jnp.max(left + right, axis=0)


def _empty_tables(n: int, pad: int) -> tuple[jax.Array, jax.Array]:
    rows = jnp.full((n + 1, n + pad), NEG, dtype=jnp.int32)
    rows = rows.at[0:2, :].set(0)                      # diagonals -1 and 0 are zero
    cols = jnp.full((n + pad, n + pad), NEG, dtype=jnp.int32)
    cols = cols.at[n - 1, :].set(0)                     # diagonal 0
    return rows, cols


@partial(jax.jit, static_argnames=("min_loop", "blocks"))
def nussinov_fill(codes: jax.Array, weights: jax.Array, min_loop: int = 3,
                  blocks: int = 16) -> jax.Array:
    """Fill the Nussinov table of one encoded sequence.

    ``codes``: int array ``(n,)`` of nucleotide codes (padding uses code 4, which never pairs,
    so a padded sequence's cells over its true length are exact). ``weights``: 5x5 int32 pair
    weights. Returns ``rows`` of shape ``(n + 1, n + pad)`` with ``rows[1 + d, i] = N(i, i+d)``;
    use :func:`score_from_table` and :mod:`jaxrna.fold.traceback` to read it.
    """
    return fill_rows(codes, weights, min_loop, blocks)


def fill_rows(codes: jax.Array, weights: jax.Array, min_loop, blocks: int = 16) -> jax.Array:
    """:func:`nussinov_fill` unjitted, ``min_loop`` a Python int or a traced value (one
    compiled program serves every ``min_loop``)."""
    n = codes.shape[0]
    bounds = block_bounds(n, blocks)
    pad = max((d1 - d0 for d0, d1 in bounds), default=1) + 1
    codes = jnp.concatenate([codes.astype(jnp.int32), jnp.full((pad,), 4, jnp.int32)])
    weights = jnp.asarray(weights, jnp.int32)
    rows, cols = _empty_tables(n, pad)
    for d0, d1 in bounds:
        width, height = d1, n - d0

        def body(d, tables, width=width, height=height):
            rows, cols = tables
            best = diagonal_splits(rows, cols, d, width, height, n)
            partner = jax.lax.dynamic_slice(codes, (d,), (height,))
            w = weights[codes[:height], partner]
            inner = jax.lax.dynamic_slice(rows, (d - 1, 1), (1, height))[0]
            paired = jnp.where((w > 0) & (d > min_loop), inner + w, NEG)
            best = jnp.maximum(best, paired)
            rows = jax.lax.dynamic_update_slice(rows, best[None, :], (1 + d, 0))
            cols = jax.lax.dynamic_update_slice(cols, best[None, :], (n - 1 - d, d))
            return rows, cols

        rows, cols = jax.lax.fori_loop(d0, d1, body, (rows, cols))
    return rows


def score_from_table(rows: jax.Array | np.ndarray, length: int) -> jax.Array:
    """The optimal score N(0, length - 1) of a (possibly padded) filled table."""
    if length <= 1:
        return jnp.int32(0)
    return rows[length, 0]
