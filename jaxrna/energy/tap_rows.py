"""Rows of a table block read at static offsets, differentiated without atomic additions.

``tap_rows(block, r, k, di, height)[t] = block[r[t], k[t], di[t] : di[t] + height]``: the
candidate rows of a diagonal's interior loops (:class:`jaxrna.energy.partition.PFView`), one
per tap. JAX differentiates such a gather by a scatter-add, which XLA runs with atomic additions
on a GPU where several taps read one cell: the order of the sums, and so the last bits of the
pair probabilities (a gradient), changed from run to run. Here the derivative is a gather and a
matrix product instead, in a fixed order: each tap's cotangent row shifted to the block's
columns (``X[t, c] = g[t, c - di[t]]``), the taps of each ``(r, k)`` row of the block summed by
a product with their 0/1 membership matrix, those rows put in place by a gather.

>>> import jax, jax.numpy as jnp
>>> block = jnp.arange(24.0).reshape(2, 3, 4)
>>> tap_rows(block, [0, 1], [2, 0], [1, 0], 2).tolist()
[[9.0, 10.0], [12.0, 13.0]]
>>> g = jax.grad(lambda b: tap_rows(b, [0, 0], [1, 1], [0, 1], 3).sum())(block)
>>> g[0, 1].tolist(), float(g.sum())
([1.0, 2.0, 2.0, 1.0], 6.0)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


class _Plan:
    """The static index arrays of one tap layout over a block of ``shape`` (small: the
    derivative's (taps x width) indices are built in the program from ``di``, not stored)."""

    def __init__(self, r, k, di, height: int, shape: tuple[int, int, int]):
        r, k, di = (np.asarray(x, np.int32).reshape(-1) for x in (r, k, di))
        rows, channels, self.width = shape
        self.taps, self.height, self.di = len(r), height, di
        self.r, self.k = r[:, None], k[:, None]
        self.cols = di[:, None] + np.arange(height, dtype=np.int32)[None, :]
        # the block rows (r, k) the taps read: each tap's row among them
        pairs, member = np.unique(r.astype(np.int64) * channels + k, return_inverse=True)
        self.pairs, self.member = len(pairs), member.reshape(-1).astype(np.int32)
        # where each block row's sum goes (the zero row `pairs` for rows no tap reads)
        place = np.full(rows * channels, len(pairs), np.int32)
        place[pairs] = np.arange(len(pairs), dtype=np.int32)
        self.place = place.reshape(rows, channels)


def tap_rows(block, r, k, di, height: int):
    """``(len(r), height)``: ``block[r[t], k[t], di[t] + h]`` for ``h < height`` (``block``
    3-D, ``r``, ``k``, ``di`` static integer sequences of one length, every read inside the
    block), differentiable (reverse mode) with a derivative free of atomic additions."""
    plan = _Plan(r, k, di, height, tuple(block.shape))

    @jax.custom_vjp
    def read(b):
        return b[plan.r, plan.k, plan.cols]

    def forward(b):
        return read(b), None

    def backward(_, g):
        # X[t, c] = g[t, c - di[t]] where 0 <= c - di[t] < height: (taps, width)
        h = jax.lax.broadcasted_iota(jnp.int32, (plan.taps, plan.width), 1) \
            - jnp.asarray(plan.di)[:, None]
        inside = (h >= 0) & (h < plan.height)
        shifted = jnp.where(inside, jnp.take_along_axis(g, jnp.clip(h, 0, plan.height - 1),
                                                        axis=1), 0)
        # each block row's taps summed: a product with their 0/1 membership (pairs, taps)
        member = (jax.lax.broadcasted_iota(jnp.int32, (plan.pairs, plan.taps), 0)
                  == jnp.asarray(plan.member)[None, :]).astype(g.dtype)
        sums = jnp.matmul(member, shifted, precision=jax.lax.Precision.HIGHEST)   # no TF32
        sums = jnp.concatenate([sums, jnp.zeros((1, sums.shape[1]), g.dtype)])
        return (sums[plan.place],)

    read.defvjp(forward, backward)
    return read(block)
