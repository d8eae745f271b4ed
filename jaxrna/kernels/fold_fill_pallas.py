"""The Pallas kernels of the one-sequence GPU Nussinov fill (:func:`jaxrna.fold.gpu.fill_packed`
schedules them, one pair of launches per block diagonal of the packed table of
:mod:`jaxrna.fold.packed`):

* :func:`bulk_call` (:func:`_bulk_kernel`): the splits ``k`` in the tiles strictly between
  ``I`` and ``J = I + D`` as a max-plus product, split over ``S`` programs (split-K) whose
  partial maxima go to a buffer of :func:`work_items` tiles;
* :func:`finish_call` (:func:`_finish_kernel`): one program per tile takes the maximum of the
  partials and completes the tile diagonal by diagonal.

:class:`GpuFoldConfig` holds their tile size and launch parameters. Both run in Pallas'
interpret mode on a CPU (``interpret=True``); the pure-JAX path of the same fill is
:func:`jaxrna.fold.blocked.blocked_fill_traced` (:mod:`jaxrna.kernels.fallback` switches to it
when these kernels do not build).

>>> GpuFoldConfig(tile=64, block=32).nsub, work_items(4, GpuFoldConfig(tile=64, block=32))
(4, 136)
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from jaxrna.kernels.nussinov_layout import NEG, diag_offset
from jaxrna.kernels.tropical_pallas import Blocking, barrier, compiler_params, outer_step


@dataclasses.dataclass(frozen=True)
class GpuFoldConfig:
    """Tile size and kernel launch parameters of the GPU fill.

    ``tile``: the table's tile side ``T`` (power of two, >= 16); ``block`` x ``block_n``: the
    block of a tile one bulk program computes (``block_n`` 0 = ``block``; both divide
    ``tile``); ``unroll``: ``k`` steps per
    loop trip in the bulk kernel (divides ``tile``); ``variant``/``ru``/``rv``: the register
    blocking of the bulk kernel (:class:`~jaxrna.kernels.tropical_pallas.KernelConfig`);
    ``*_warps``/``bulk_stages``: Triton launch parameters; ``target_programs``: how many bulk
    programs to aim for per step (split-K fills the GPU with them when few tiles are left).
    """

    tile: int = 128
    block: int = 128
    block_n: int = 0
    unroll: int = 16
    variant: str = "outer"
    ru: int = 8
    rv: int = 8
    asm: bool = False
    bulk_warps: int = 4
    bulk_stages: int = 1
    finish_warps: int = 8
    target_programs: int = 528

    def __post_init__(self):
        t = self.tile
        if t < 16 or t & (t - 1):
            raise ValueError(f"tile must be a power of two >= 16, got {t}")
        for b in (self.block, self.bn):
            if t % b or b < 16 or b & (b - 1):
                raise ValueError(f"block sizes must be powers of two >= 16 dividing the tile, got {b}")
        if t % self.unroll:
            raise ValueError(f"unroll must divide the tile, got {self.unroll}")


    @property
    def bn(self) -> int:
        return self.block_n or self.block

    @property
    def nsub(self) -> int:
        """Bulk programs per tile (sub-blocks)."""
        return (self.tile // self.block) * (self.tile // self.bn)


def work_items(nb: int, cfg: GpuFoldConfig) -> int:
    """Static size of the bulk grid / partials buffer: ``max_D (nb - D) * S(D)``."""
    return max(1, cfg.target_programs // cfg.nsub + nb)


# --------------------------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------------------------

def _bulk_kernel(params_ref, tab_ref, part_ref, *, nb: int, cfg: GpuFoldConfig, interpret: bool):
    """Partial split maxima of tile ``(I, I + D)`` over one chunk of the tiles between."""
    t, bm, bn, u = cfg.tile, cfg.block, cfg.bn, cfg.unroll
    d = params_ref[0]
    s_count = params_ref[1]
    chunk = params_ref[2]
    w = pl.program_id(0)
    sub = pl.program_id(1)
    per_row = t // bn
    m0 = (sub // per_row) * bm
    n0 = (sub % per_row) * bn
    i = w // s_count
    s = w % s_count
    j = i + d

    @pl.when(i < nb - d)
    def _():
        k_lo = i + 1 + s * chunk
        k_hi = jnp.minimum(k_lo + chunk, j)

        blk = Blocking(cfg.variant, bm, bn, cfg.ru, cfg.rv)
        asm = cfg.asm and not interpret

        def tile_body(kt, acc):
            slot_a = diag_offset(kt - i, nb) + i          # tile (I, K)
            slot_b = diag_offset(j - kt, nb) + kt         # tile (K, J)
            slot_b2 = diag_offset(j - kt - 1, nb) + kt + 1  # tile (K + 1, J)

            def steps(c, acc):
                k0 = c * u
                for q in range(u):
                    a = tab_ref[(slot_a,) + blk.a(m0, k0 + q)]
                    b = tab_ref[(slot_b,) + blk.b(k0 + q + 1, n0)]
                    acc = outer_step(acc, a, b, asm)
                return acc

            acc = jax.lax.fori_loop(0, t // u - 1, steps, acc)
            k0 = t - u
            for q in range(u):
                a = tab_ref[(slot_a,) + blk.a(m0, k0 + q)]
                if q < u - 1:
                    b = tab_ref[(slot_b,) + blk.b(k0 + q + 1, n0)]
                else:
                    b = tab_ref[(slot_b2,) + blk.b(0, n0)]
                acc = outer_step(acc, a, b, asm)
            return acc

        acc = jnp.full(blk.shape, NEG, jnp.int32)
        acc = jax.lax.fori_loop(k_lo, jnp.maximum(k_hi, k_lo), tile_body, acc)
        part_ref[(w,) + blk.c(m0, n0)] = acc


def _finish_kernel(params_ref, codes_ref, wtab_ref, part_ref, tab_in_ref, tab_ref, *,
                   nb: int, cfg: GpuFoldConfig, interpret: bool):
    """Complete tile ``(I, I + D)``: in-tile splits and pairs, diagonal by diagonal
    (``params_ref``: D, the split-K factor, its chunk, nb - D and ``min_loop``)."""
    del tab_in_ref  # aliased with tab_ref; read and write through the output ref only
    t = cfg.tile
    d = params_ref[0]
    s_count = params_ref[1]
    min_loop = params_ref[4]
    i = pl.program_id(0)
    j = i + d

    @pl.when(i < nb - d)
    def _():
        slot_x = diag_offset(d, nb) + i                   # this tile
        slot_i = i                                        # (I, I)
        slot_j = j                                        # (J, J)
        slot_below = diag_offset(d - 1, nb) + i + 1       # (I + 1, J)
        slot_left = diag_offset(d - 1, nb) + i            # (I, J - 1)
        slot_corner = diag_offset(jnp.maximum(d - 2, 0), nb) + i + 1   # (I + 1, J - 1)

        # 1. bulk = max over the split-K partials; the tile lives in memory (for the skewed
        #    reads of later steps) and, transposed, in registers (for the row reads)
        def part_body(s, acc):
            return jnp.maximum(acc, part_ref[i * s_count + s, :, :])

        bulk = jax.lax.fori_loop(0, s_count, part_body, jnp.full((t, t), NEG, jnp.int32))
        tab_ref[slot_x, :, :] = bulk
        xt = bulk.T                                              # xt[q, r] = X[r, q]
        barrier(interpret)

        # 2. constants of the sweep
        p2 = jax.lax.broadcasted_iota(jnp.int32, (t, t), 0)      # p or q (reduced axis)
        r2 = jax.lax.broadcasted_iota(jnp.int32, (t, t), 1)      # row r of the cell
        r1 = jax.lax.broadcasted_iota(jnp.int32, (t,), 0)
        ti_t = tab_ref[slot_i, :, :].T                           # ti_t[p, r] = N(I*T + r, I*T + p)
        ti_t = jnp.where(p2 >= r2, ti_t, NEG)
        ti_last = tab_ref[slot_i, r1, jnp.full((t,), t - 1, jnp.int32)]   # N(I*T + r, I*T + T - 1)
        ci = codes_ref[pl.ds(i * t, t)]
        corner = jnp.where(d >= 2, tab_ref[slot_corner, 0, t - 1], 0)
        p_row = jnp.minimum(p2 + 1, t - 1)
        zeros = jnp.zeros((t,), jnp.int32)

        def step(s, xt):
            c1 = r1 + s
            valid = (c1 >= 0) & (c1 < t)
            cc = jnp.clip(c1, 0, t - 1)
            c2 = r2 + s
            cc2 = jnp.clip(c2, 0, t - 1)
            valid2 = (c2 >= 0) & (c2 < t)
            # splits k = I*T + p in tile I: N(i, k) + N(k + 1, j), k + 1 inside this tile ...
            x1 = tab_ref[slot_x, p_row, cc2]                       # X[p + 1, c]
            x1 = jnp.where((p2 <= t - 2) & valid2, x1, NEG)
            part1 = jnp.max(ti_t + x1, axis=0)
            # ... and k = I*T + T - 1, k + 1 = row 0 of tile (I + 1, J)
            below = tab_ref[slot_below, zeros, cc]
            part1 = jnp.maximum(part1, ti_last + below)
            # splits k = J*T + q in tile J: N(i, k) [this tile, left of j] + N(k + 1, j) [(J, J)]
            y2 = tab_ref[slot_j, p_row, cc2]                       # y2[q, r] = tj[q + 1, c]
            m2 = (p2 < c2) & valid2
            part2 = jnp.max(jnp.where(m2, xt + y2, NEG), axis=0)
            # the pair (i, j) around N(i + 1, j - 1)
            rr = r1 + 1
            cm = c1 - 1
            in_tile = tab_ref[slot_x, jnp.minimum(rr, t - 1), jnp.maximum(cm, 0)]
            below_in = tab_ref[slot_below, zeros, jnp.maximum(cm, 0)]
            left_in = tab_ref[slot_left, jnp.minimum(rr, t - 1), jnp.full((t,), t - 1, jnp.int32)]
            inner = jnp.where(rr < t, jnp.where(cm >= 0, in_tile, left_in),
                              jnp.where(cm >= 0, below_in, corner))
            cj = codes_ref[j * t + cc]
            wgt = wtab_ref[ci * 5 + cj]
            span = d * t + c1 - r1
            paired = jnp.where((wgt > 0) & (span > min_loop), inner + wgt, NEG)
            old = tab_ref[slot_x, r1, cc]
            val = jnp.maximum(jnp.maximum(old, paired), jnp.maximum(part1, part2))
            val = jnp.where(valid, val, old)
            tab_ref[slot_x, r1, cc] = val
            xt = jnp.where(p2 == c2, val[None, :], xt)             # xt[c, r] = new X[r, c]
            barrier(interpret)
            return xt

        jax.lax.fori_loop(1 - t, t, step, xt)


def bulk_call(params, tab, *, nb, cfg, interpret):
    """Partial split maxima ``(work_items, T, T)`` of the tiles of one block diagonal
    (``params``: D, the split-K factor, its chunk, nb - D, ``min_loop``)."""
    t = cfg.tile
    work = work_items(nb, cfg)
    nsub = cfg.nsub
    return pl.pallas_call(
        partial(_bulk_kernel, nb=nb, cfg=cfg, interpret=interpret),
        out_shape=jax.ShapeDtypeStruct((work, t, t), jnp.int32),
        grid=(work, nsub),
        interpret=interpret,
        compiler_params=None if interpret else compiler_params(cfg.bulk_warps, cfg.bulk_stages),
        name="nussinov_bulk",
    )(params, tab)


def finish_call(params, codes, wtab, part, tab, *, nb, cfg, interpret):
    """``tab`` with the tiles of one block diagonal completed (updated in place)."""
    return pl.pallas_call(
        partial(_finish_kernel, nb=nb, cfg=cfg, interpret=interpret),
        out_shape=jax.ShapeDtypeStruct(tab.shape, jnp.int32),
        grid=(nb - 1,),
        input_output_aliases={4: 0},
        interpret=interpret,
        compiler_params=None if interpret else compiler_params(cfg.finish_warps, 1),
        name="nussinov_finish",
    )(params, codes, wtab, part, tab)
