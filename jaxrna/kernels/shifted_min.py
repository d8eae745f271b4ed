"""Min-plus reduction over shifted rows of a diagonal-stored table: the interior-loop window.

A table stored by diagonal, ``T[row, k, i]`` (row ``row_base + d`` holds the cells ``(i, i +
d)`` of table ``k``), and a static list of *taps* per group ``g``: ``(dd, di, c)`` = read row
``row_base + d + dd``, column ``i + di``, add ``costs[c]``. For the cells ``i < height`` of
diagonal ``d``::

    out[g, i] = min over taps (dd, di, c) of group g of  T[row_base + d + dd, k_g, i + di] + costs[c]

Columns past the table's last read as :data:`INF`. This is the interior loops of the Turner
energy fill (:mod:`jaxrna.energy.fill`: a few hundred taps, ``u1 + u2 <= 30``), the hot loop of
a short sequence's fold. :func:`shifted_min_reference` is the pure-JAX form (one slice per tap,
what the fill does without the kernel); :func:`shifted_min` the Pallas GPU kernel: one program
per block of ``width`` cells, every tap one contiguous vector load (coalesced along ``i``, the
window's rows stay in L1), one add and one ``min`` in registers, the costs read once per program
rather than once per cell, :data:`PER_THREAD` cells per GPU thread. The taps are a table the
kernel loops over, :data:`UNROLL` a trip: unrolling all of them made the kernel ~20% faster but
took Triton over a minute to compile. Under ``jax.vmap`` (the fill is written for one
sequence) Pallas adds the batch as a grid axis: one program per sequence and block of cells.
:func:`split_min` is the multiloop split of the same fill, ``min_t M(i, i + t) + M(i + t + 1,
i + d)``, two loads per split point. H200, 65,536 ``targets`` duplex strings, 2026-11-25: the
energy program at 515k folds/s with both kernels against 270k/s with slices (BENCHMARKS.md).

On CPU the kernel runs in Pallas' interpret mode (``interpret=True``), which is how the tests
compare it with the reference. Values must stay far from the int32 limits (energies in
dcal/mol with ``INF`` = 10**7 do).

>>> import numpy as np
>>> T = jnp.asarray(np.arange(2 * 1 * 6, dtype=np.int32).reshape(2, 1, 6))
>>> taps = ((0, ((0, 0, 0), (-1, 1, 1))),)
>>> costs = jnp.asarray([100, 0], jnp.int32)
>>> shifted_min_reference(T, jnp.int32(1), costs, taps, row_base=0, height=4).tolist()
[[1, 2, 3, 4]]
>>> shifted_min(T, jnp.int32(1), costs, taps, row_base=0, height=4, interpret=True).tolist()
[[1, 2, 3, 4]]
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from jaxrna.kernels.tropical_pallas import compiler_params, plgpu

#: Impossible value (the energy model's INF); columns past the table read as this.
INF = 10_000_000
#: Cells per program at most (:data:`PER_THREAD` to a GPU thread).
MAX_WIDTH = 128

Taps = tuple  # ((table index, ((dd, di, cost index), ...)), ...) per group


def block_width(height: int) -> int:
    """Cells per program for a diagonal of ``height`` cells: a power of two, 32 to 128.

    >>> block_width(44), block_width(28), block_width(3000)
    (64, 32, 128)
    """
    width = 32
    while width < min(height, MAX_WIDTH):
        width *= 2
    return width


def shifted_min_reference(T: jax.Array, d: jax.Array, costs: jax.Array, taps: Taps, *,
                          row_base: int, height: int) -> jax.Array:
    """``out[g, i]`` for ``i < height`` in pure JAX (one static slice of a fetched block of rows
    per tap): ``(groups, height)`` int32."""
    cols = T.shape[2]
    pad = max((di for _, members in taps for _, di, _ in members), default=0) + height - cols
    if pad > 0:
        T = jnp.pad(T, ((0, 0), (0, 0), (0, pad)), constant_values=INF)
    lo = min(dd for _, members in taps for dd, _, _ in members)
    hi = max(dd for _, members in taps for dd, _, _ in members)
    block = jax.lax.dynamic_slice(T, (row_base + d + lo, 0, 0), (hi - lo + 1,) + T.shape[1:])
    out = []
    for k, members in taps:
        acc = None
        for dd, di, c in members:
            x = block[dd - lo, k, di:di + height] + costs[c]
            acc = x if acc is None else jnp.minimum(acc, x)
        out.append(acc)
    return jnp.stack(out)


#: Taps per loop trip of the kernel (unrolled; a group's taps are padded to a multiple).
UNROLL = 8
#: Cells per GPU thread (so the per-tap scalar work is shared by several cells).
PER_THREAD = 4


def tap_table(taps: Taps) -> tuple[np.ndarray, np.ndarray, tuple[tuple[int, int], ...]]:
    """The taps as arrays: ``(count, 2)`` int32 (dd, di) and ``(count,)`` cost indices (-1 for
    padding), each group padded to a multiple of :data:`UNROLL` with copies of its first tap
    at an impossible cost; and per group (table index, first trip).

    >>> rows, cost, groups = tap_table(((2, ((0, 1, 0), (-1, 2, 1))),))
    >>> rows.shape, cost[:3].tolist(), groups
    ((8, 2), [0, 1, -1], ((2, 0),))
    """
    rows, cost, groups = [], [], []
    for k, members in taps:
        members = list(members)
        pad = -len(members) % UNROLL
        groups.append((k, len(rows) // UNROLL))
        rows += [(dd, di) for dd, di, _ in members] + [members[0][:2]] * pad
        cost += [c for _, _, c in members] + [-1] * pad
    return np.asarray(rows, np.int32).reshape(-1, 2), np.asarray(cost, np.int32), tuple(groups)


def _kernel(d_ref, cost_ref, tap_ref, t_ref, out_ref, *, groups, trips: int, row_base: int,
            width: int, cols: int):
    i0 = pl.program_id(0) * width
    lanes = i0 + jnp.arange(width, dtype=jnp.int32)
    r0 = d_ref[0] + row_base
    inf = jnp.full((width,), INF, jnp.int32)
    ends = [first for _, first in groups[1:]] + [trips]
    for g, ((k, first), end) in enumerate(zip(groups, ends)):
        table = jnp.int32(k)

        def trip(t, acc, table=table):
            for u in range(UNROLL):
                tap = t * UNROLL + u
                di = tap_ref[tap, 1]
                x = plgpu.load(t_ref.at[r0 + tap_ref[tap, 0], table, pl.ds(i0 + di, width)],
                               mask=lanes + di < cols, other=inf)
                acc = jnp.minimum(acc, x + cost_ref[tap])
            return acc

        out_ref[g, pl.ds(i0, width)] = jax.lax.fori_loop(first, end, trip, inf)


def shifted_min(T: jax.Array, d: jax.Array, costs: jax.Array, taps: Taps, *, row_base: int,
                height: int, interpret: bool = False) -> jax.Array:
    """:func:`shifted_min_reference` as a Pallas kernel (Triton on GPU; ``interpret=True``
    anywhere): ``(groups, height)`` int32, equal to the reference."""
    width = block_width(height)
    blocks = -(-height // width)
    rows, cost_index, groups = tap_table(taps)
    kernel = partial(_kernel, groups=groups, trips=len(rows) // UNROLL, row_base=row_base,
                     width=width, cols=T.shape[2])
    # each tap's cost, gathered once per call (padding taps: INF, they never win)
    tap_cost = jnp.where(cost_index >= 0, costs.astype(jnp.int32)[np.maximum(cost_index, 0)], INF)
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((len(taps), blocks * width), jnp.int32),
        grid=(blocks,),
        interpret=interpret,
        compiler_params=None if interpret else compiler_params(
            max(1, width // (32 * PER_THREAD)), 1),
        name="energy_interior_min",
    )(jnp.asarray(d, jnp.int32).reshape(1), tap_cost, jnp.asarray(rows), T)
    return out[:, :height]


def split_min_reference(T: jax.Array, d: jax.Array, table: int, *, row_base: int,
                        height: int) -> jax.Array:
    """``out[i] = min over 0 <= t < d of T[row_base + t, table, i] + T[row_base + d - 1 - t,
    table, i + t + 1]`` for ``i < height`` (columns past the table read as :data:`INF`): the
    multiloop split ``min_k M(i, k) + M(k + 1, i + d)`` of a diagonal-stored ``M``, in plain
    JAX (a loop over ``t``).

    >>> T = jnp.full((6, 1, 4), INF, jnp.int32)
    >>> T = T.at[1, 0].set(jnp.asarray([1, 2, 3, 4])).at[2, 0].set(jnp.asarray([10, 20, 30, 40]))
    >>> split_min_reference(T, jnp.int32(2), 0, row_base=1, height=3).tolist()
    [13, 24, 43]
    """
    cols = T.shape[2]
    padded = jnp.pad(T[:, table], ((0, 0), (0, height + 1)), constant_values=INF)

    def step(t, acc):
        left = jax.lax.dynamic_slice(padded, (row_base + t, 0), (1, height))[0]
        right = jax.lax.dynamic_slice(padded, (row_base + d - 1 - t, t + 1), (1, height))[0]
        right = jnp.where(jnp.arange(height) + t + 1 < cols, right, INF)
        return jnp.minimum(acc, left + right)

    return jax.lax.fori_loop(0, d, step, jnp.full((height,), 2 * INF, jnp.int32))


def _split_kernel(d_ref, t_ref, out_ref, *, table: int, row_base: int, width: int, cols: int):
    i0 = pl.program_id(0) * width
    lanes = i0 + jnp.arange(width, dtype=jnp.int32)
    d = d_ref[0]
    k = jnp.int32(table)
    inf = jnp.full((width,), INF, jnp.int32)

    def step(t, acc):
        left = plgpu.load(t_ref.at[row_base + t, k, pl.ds(i0, width)], mask=lanes < cols,
                          other=inf)
        right = plgpu.load(t_ref.at[row_base + d - 1 - t, k, pl.ds(i0 + t + 1, width)],
                           mask=lanes + t + 1 < cols, other=inf)
        return jnp.minimum(acc, left + right)

    out_ref[pl.ds(i0, width)] = jax.lax.fori_loop(0, d, step, inf + inf)


def split_min(T: jax.Array, d: jax.Array, table: int, *, row_base: int, height: int,
              interpret: bool = False) -> jax.Array:
    """:func:`split_min_reference` as a Pallas kernel (one program per block of cells, two
    vector loads per split point): ``(height,)`` int32, equal to the reference.

    >>> T = jnp.full((6, 1, 4), INF, jnp.int32)
    >>> T = T.at[1, 0].set(jnp.asarray([1, 2, 3, 4])).at[2, 0].set(jnp.asarray([10, 20, 30, 40]))
    >>> split_min(T, jnp.int32(2), 0, row_base=1, height=3, interpret=True).tolist()
    [13, 24, 43]
    """
    width = block_width(height)
    blocks = -(-height // width)
    kernel = partial(_split_kernel, table=table, row_base=row_base, width=width,
                     cols=T.shape[2])
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((blocks * width,), jnp.int32),
        grid=(blocks,),
        interpret=interpret,
        compiler_params=None if interpret else compiler_params(
            max(1, width // (32 * PER_THREAD)), 1),
        name="energy_split_min",
    )(jnp.asarray(d, jnp.int32).reshape(1), T)
    return out[:height]
