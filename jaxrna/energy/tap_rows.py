"""Rows of a table block read at static offsets, differentiated without atomic additions.

``tap_rows(block, r, k, di, height)[t] = block[r[t], k[t], di[t] : di[t] + height]``: the
candidate rows of a diagonal's interior loops (:class:`jaxrna.energy.partition.PFView`), one
per tap. JAX differentiates such a gather by a scatter-add, which XLA runs with atomic additions
on a GPU where several taps read one cell: the order of the sums, and so the last bits of the
pair probabilities (a gradient), changed from run to run. Here the derivative is a gather and a
sum in a fixed order: for each row ``(r, k)`` of the block that taps read, its taps' cotangent
rows, each shifted to the block's columns (``g[t, c - di[t]]``), gathered from a padded list of
that row's taps and summed; those rows put in place by a gather. (Before, the shifted rows of
all taps were materialized, ``(taps, width)``, and summed per block row by a product with their
0/1 membership matrix: the partition batch program ran 4-10% slower, S19i, H100: 64 x 256 nt
0.253 -> 0.235 s, 256 x 128 nt 0.196 -> 0.177 s, one 2,048 nt 0.704 -> 0.672 s.)

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
    derivative's (rows x taps x width) indices are built in the program, not stored)."""

    def __init__(self, r, k, di, height: int, shape: tuple[int, int, int]):
        r, k, di = (np.asarray(x, np.int32).reshape(-1) for x in (r, k, di))
        rows, channels, self.width = shape
        self.taps, self.height, self.di = len(r), height, di
        self.r, self.k = r[:, None], k[:, None]
        self.cols = di[:, None] + np.arange(height, dtype=np.int32)[None, :]
        # the block rows (r, k) the taps read: each tap's row among them
        pairs, member = np.unique(r.astype(np.int64) * channels + k, return_inverse=True)
        self.pairs, self.member = len(pairs), member.reshape(-1).astype(np.int32)
        # each block row's taps as a padded list: tap index (``taps``: a zero row) and shift
        # (one list as long as the longest, 27 of 489 taps: buckets of 1, 2, 4, ... taps ran
        # 8% slower, S19l)
        count = np.bincount(self.member, minlength=self.pairs)
        most = int(count.max()) if self.taps else 0
        self.own = np.full((self.pairs, most), self.taps, np.int32)
        self.shift = np.zeros((self.pairs, most), np.int32)
        fill = np.zeros(self.pairs, np.int64)
        for t, p in enumerate(self.member):
            self.own[p, fill[p]], self.shift[p, fill[p]] = t, di[t]
            fill[p] += 1
        # where each block row's sum goes (the zero row `pairs` for rows no tap reads)
        place = np.full(rows * channels, len(pairs), np.int32)
        place[pairs] = np.arange(len(pairs), dtype=np.int32)
        self.place = place.reshape(rows, channels)


def tap_rows(block, r, k, di, height: int, taps_last: bool = False):
    """``(len(r), height)``: ``block[r[t], k[t], di[t] + h]`` for ``h < height`` (``block``
    3-D, ``r``, ``k``, ``di`` static integer sequences of one length, every read inside the
    block), differentiable (reverse mode) with a derivative free of atomic additions;
    ``taps_last``: the same values as ``(height, len(r))``."""
    plan = _Plan(r, k, di, height, tuple(block.shape))

    @jax.custom_vjp
    def read(b):
        if taps_last:
            return b[plan.r.T, plan.k.T, plan.cols.T]
        return b[plan.r, plan.k, plan.cols]

    def forward(b):
        return read(b), None

    def backward(_, g):
        return (_gathered(plan, g.T if taps_last else g),)

    read.defvjp(forward, backward)
    return read(block)


def _gathered(plan: _Plan, g):
    """The block's cotangent: each block row ``(r, k)`` the sum of its taps' cotangent rows,
    each shifted to the block's columns (``g[t, c - di[t]]``), read by one gather (a padded
    list of taps per row, the padding a zero row) and summed in a fixed order. (Read as row
    slices, ``dynamic_slice`` under ``vmap``, the sum ran 179 instead of 103 us a diagonal:
    S19n.)"""
    width, height = plan.width, plan.height
    left = int(plan.di.max()) if plan.taps else 0
    gz = jnp.pad(g, ((0, 1), (left, max(0, width - height))))      # zero row, zero margins
    shape = plan.own.shape + (width,)
    col = jax.lax.broadcasted_iota(jnp.int32, shape, 2) + left - jnp.asarray(plan.shift)[:, :, None]
    row = jnp.broadcast_to(jnp.asarray(plan.own)[:, :, None], shape)
    sums = jnp.concatenate([gz[row, col].sum(axis=1), jnp.zeros((1, width), g.dtype)])
    return sums[plan.place]
