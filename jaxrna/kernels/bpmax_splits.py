"""Every split of one BPMax outer diagonal in one Pallas kernel: the double reduction D and H3/H4.

:func:`jaxrna.interact.recurrence.bpmax_fill` reduces, for outer diagonal ``d1`` and each of
its matrices ``b`` (outer cell ``(b, b + d1)``), over the splits ``c < d1`` of the outer span.
Split ``c`` pairs the *left* matrix ``L = table[offset(c) + b]`` with the *right* matrix
``R = table[offset(d1 - 1 - c) + c + 1 + b]`` and, for every band tile ``(I, I + e)``::

    acc[e] = max(acc[e], R(I, e) + S1(b, b + c), L(I, e) + S1(b + c + 1, b + d1),
                 max_{f <= e} L(I, I + f) (x) R(I + f, I + e))

(tiles stored as ``table[cell, e, I]``; ``(x)`` the max-plus product of ``T x T`` tiles). The
XLA path issues one max-plus kernel per ``(c, e, f)`` with the accumulators in memory; here one
program per ``(b, I)`` keeps its ``ne`` accumulator tiles in registers across all splits and
reads the operand tiles straight from the table: one launch per outer diagonal instead of
``45 d1`` (tile 16, band 128), and the accumulators are written once. Matrices ``b >= n_outer
- d1`` are padding (a launch covers the ``bb`` matrices of its block's first diagonal): their
programs do no split and write zeros, so one block of all diagonals costs no more kernel work
than many.

Batches (``jax.vmap``, one table per pair) are one launch while all tables together stay under
2**31 elements (the kernel's offsets are 32-bit), else pair after pair (:func:`fits` requires
that of one table).

>>> import numpy as np, jax.numpy as jnp
>>> table = jnp.asarray(np.random.default_rng(0).integers(-9, 9, (4, 2, 3, 4, 4)), jnp.int32)
>>> s = jnp.zeros((3, 8), jnp.int32)
>>> acc = split_products(table, s, jnp.int32(1), bb=2, nb=2, ne=2, n_outer=3, interpret=True)
>>> [a.shape for a in acc]
[(2, 2, 4, 4), (2, 2, 4, 4)]
"""

from __future__ import annotations

from functools import lru_cache, partial

import jax
import jax.numpy as jnp

from jaxrna.kernels.tropical_pallas import compiler_params, outer_step


#: Triton warps per program (one program per matrix and tile row).
NUM_WARPS = 1
#: Elements one launch may address (the kernel's offsets are 32-bit).
MAX_ELEMENTS = (1 << 31) - (1 << 24)


def fits(table_shape: tuple[int, ...]) -> bool:
    """Whether one table is small enough for the kernel's 32-bit offsets."""
    n = 1
    for s in table_shape:
        n *= s
    return n < MAX_ELEMENTS


def _kernel(d1_ref, table_ref, s_ref, *out_refs, ne, t, n_outer, asm):
    from jax.experimental import pallas as pl

    b = pl.program_id(0)
    row = pl.program_id(1)
    d1 = d1_ref[0]

    def offset(d):
        return d * n_outer - (d * (d - 1)) // 2

    def split(c, acc):
        left = offset(c) + b
        right = offset(d1 - 1 - c) + c + 1 + b
        s3 = s_ref[c, b]                          # S1(b, b + c)
        s4 = s_ref[d1 - 1 - c, c + 1 + b]         # S1(b + c + 1, b + d1)
        acc = [jnp.maximum(acc[e], jnp.maximum(table_ref[right, e, row] + s3,
                                               table_ref[left, e, row] + s4))
               for e in range(ne)]

        def kstep(k, acc):
            acc = list(acc)
            for f in range(ne):
                a = table_ref[left, f, row, :, pl.ds(k, 1)]                   # (t, 1)
                for g in range(ne - f):
                    bv = table_ref[right, g, row + f, pl.ds(k, 1), :]         # (1, t)
                    acc[f + g] = outer_step(acc[f + g], a, bv, asm)
            return tuple(acc)

        return jax.lax.fori_loop(0, t, kstep, tuple(acc))

    zero = jnp.zeros((t, t), jnp.int32)
    # matrices past the diagonal's last (b >= n_outer - d1) are padding of the batch: no splits
    splits = jnp.where(b < n_outer - d1, d1, 0)
    acc = jax.lax.fori_loop(0, splits, split, tuple(zero for _ in range(ne)))
    for e in range(ne):
        out_refs[e][...] = acc[e]


def _call(table, s_outer, d1, *, bb, nb, ne, n_outer, num_warps, interpret):
    from jax.experimental import pallas as pl

    t = table.shape[-1]
    kernel = partial(_kernel, ne=ne, t=t, n_outer=n_outer, asm=not interpret)
    spec = pl.BlockSpec((None, None, t, t), lambda b, r: (b, r, 0, 0))
    full = lambda x: pl.BlockSpec(x.shape, lambda b, r: (0,) * x.ndim)  # noqa: E731
    d1 = jnp.reshape(d1, (1,)).astype(jnp.int32)
    return tuple(pl.pallas_call(
        kernel,
        grid=(bb, nb),
        in_specs=[full(d1), full(table), full(s_outer)],
        out_specs=[spec] * ne,
        out_shape=[jax.ShapeDtypeStruct((bb, nb, t, t), jnp.int32)] * ne,
        interpret=interpret,
        **({} if interpret else {"compiler_params": compiler_params(num_warps, 1)}),
    )(d1, table.astype(jnp.int32), s_outer.astype(jnp.int32)))


@lru_cache(maxsize=None)
def _batched(bb, nb, ne, n_outer, num_warps, interpret):
    """The kernel as a function with a vmap rule that runs batches pair after pair."""
    call = partial(_call, bb=bb, nb=nb, ne=ne, n_outer=n_outer, num_warps=num_warps,
                   interpret=interpret)

    @jax.custom_batching.custom_vmap
    def run(table, s_outer, d1):
        return call(table, s_outer, d1)

    @run.def_vmap
    def _rule(axis_size, in_batched, table, s_outer, d1):
        size = 1
        for s in jnp.shape(table):
            size *= s
        if not in_batched[2] and size * (1 if in_batched[0] else axis_size) < MAX_ELEMENTS:
            # small enough: Pallas batches the grid (one launch for all pairs)
            axes = tuple(0 if b else None for b in in_batched[:2])
            out = jax.vmap(lambda a, b: call(a, b, d1), in_axes=axes)(table, s_outer)
        else:                                                # pair after pair
            args = [x if b else jnp.broadcast_to(x, (axis_size,) + jnp.shape(x))
                    for x, b in zip((table, s_outer, d1), in_batched)]
            out = jax.lax.map(lambda a: run(*a), tuple(args))
        return tuple(out), tuple(True for _ in range(ne))

    return run


def split_products(table, s_outer, d1, *, bb: int, nb: int, ne: int, n_outer: int,
                   num_warps: int | None = None, interpret: bool = False) -> tuple[jax.Array, ...]:
    """``acc[e]`` ``(bb, nb, T, T)`` for ``e < ne``: ``max(0, ...)`` over the splits of outer
    diagonal ``d1`` (a traced int) as in the module docstring. ``table``: the fill's table
    ``(cells, ne, rows, T, T)``; ``s_outer``: S1 by diagonal, ``s_outer[d, i] = S1(i, i + d)``."""
    warps = NUM_WARPS if num_warps is None else num_warps
    return _batched(bb, nb, ne, n_outer, warps, interpret)(table, s_outer, d1)
