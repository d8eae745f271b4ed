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
    """The static index arrays of one tap layout over a block of ``shape``."""

    def __init__(self, r, k, di, height: int, shape: tuple[int, int, int]):
        r, k, di = (np.asarray(x, np.int32).reshape(-1) for x in (r, k, di))
        rows, channels, width = shape
        taps = len(r)
        self.r, self.k = r[:, None], k[:, None]
        self.cols = di[:, None] + np.arange(height, dtype=np.int32)[None, :]
        # the cotangent's gather: X[t, c] = g[t, c - di[t]] where 0 <= c - di[t] < height
        h = np.arange(width, dtype=np.int32)[None, :] - di[:, None]
        self.inside = (h >= 0) & (h < height)
        self.t_index = np.broadcast_to(np.arange(taps, dtype=np.int32)[:, None], h.shape)
        self.h_index = np.clip(h, 0, height - 1)
        # the block rows (r, k) the taps read, and each tap's row: a 0/1 matrix (P, T)
        pairs, member = np.unique(r.astype(np.int64) * channels + k, return_inverse=True)
        self.member = np.zeros((len(pairs), taps))
        self.member[member.reshape(-1), np.arange(taps)] = 1.0
        # where each block row's sum goes (the zero row P for rows no tap reads)
        self.place = np.full(rows * channels, len(pairs), np.int32)
        self.place[pairs] = np.arange(len(pairs), dtype=np.int32)
        self.place = self.place.reshape(rows, channels)


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
        shifted = jnp.where(plan.inside, g[plan.t_index, plan.h_index], 0)      # (T, width)
        sums = jnp.asarray(plan.member, g.dtype) @ shifted                        # (P, width)
        sums = jnp.concatenate([sums, jnp.zeros((1, sums.shape[1]), g.dtype)])
        return (sums[plan.place],)

    read.defvjp(forward, backward)
    return read(block)
