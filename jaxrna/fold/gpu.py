"""Li, Ranka and Sahni's blocked Nussinov fill (seed 001) on one GPU: Pallas kernels over the
packed half-memory table of :mod:`jaxrna.fold.packed`, and a traceback that stays on the GPU.

Schedule for one sequence (``nb`` tiles of ``T`` positions a side):

* block diagonal 0 -- the ``nb`` diagonal tiles, by the plain sweep of :mod:`jaxrna.fold.fill`
  (vmapped over tiles; ``T`` small steps);
* block diagonals ``D = 1 .. nb-1`` -- one ``lax.fori_loop`` step each, two kernels:

  1. **bulk** (:func:`_bulk_kernel`): the splits ``k`` in the tiles strictly between ``I`` and
     ``J = I + D`` as a max-plus product ``max_K  N[I, K] (x) N'[K, J]`` -- nearly all of the
     ``n^3 / 6`` work. The row shift ``N'[k, j] = N(k + 1, j)`` costs nothing: each ``k`` loads
     one column of tile ``(I, K)`` and row ``k + 1`` of tile ``(K, J)`` (row 0 of ``(K+1, J)``
     for the tile's last ``k``), so no shifted or transposed copy is stored. To fill the GPU
     when few tiles are left (``nb - D`` small), each tile's ``K`` range is split over ``S``
     programs (split-K) whose partial maxima go to a small buffer.
  2. **finish** (:func:`_finish_kernel`): one program per tile takes the maximum of the partials
     and completes the tile in ``2T - 1`` steps over its diagonals, each step a masked
     reduction over the tile's own rows/columns and the diagonal tiles ``(I, I)``, ``(J, J)``,
     then a block barrier (the cells of one step feed the next).

The table stays on the GPU; :func:`traceback_device` walks it there (one interval per
``while_loop`` step, split points found by a vectorised search) and only the pairs come back.

Entry point: :func:`fold_gpu` (score and pairs of one sequence, exactly those of the CPU path),
with :func:`check_gpu_memory` / :func:`estimate_gpu_bytes` to refuse what does not fit and
:func:`config_for_length` choosing the tile size. On an H200 (BENCHMARKS.md): 16,000 nt fill in
0.22 s, 100,000 nt fill 21.9 s + traceback 3.1 s, 20.2 GB.

Everything also runs on CPU in Pallas' interpret mode (``interpret=True``), which the tests use.

>>> from jaxrna.alphabet import encode
>>> from jaxrna.weights import parse_weights
>>> cfg = GpuFoldConfig(tile=16, block=16, unroll=4)
>>> score, pairs = fold_gpu(encode("GGGAAAUCCGGGAAAUCC" * 2), parse_weights("unit").matrix(), 3,
...                         config=cfg, interpret=True)
>>> score, pairs[:3]
(12, [(1, 35), (2, 34), (5, 33)])
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from jaxrna.fold.blocked import diagonal_tile
from jaxrna.fold.fill import NEG
from jaxrna.fold.packed import cell, diag_offset, n_slots, packed_bytes
from jaxrna.kernels.tropical_pallas import Blocking, barrier, compiler_params, outer_step

#: Slack for XLA's own buffers, codes, the traceback's stack and the runtime.
_SLACK_BYTES = 1 << 30


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


#: Measured on an H200 (2026-11-21): 64-nt tiles are faster up to ~25,000 nt (the in-tile
#: finish is cheaper), 128-nt tiles beyond (the bulk kernel runs at its best block shape).
SMALL_CONFIG = GpuFoldConfig(tile=64, block=64, block_n=64, unroll=8, variant="blocked",
                             ru=8, rv=8, asm=True, bulk_warps=1, finish_warps=2,
                             target_programs=528)
LARGE_CONFIG = GpuFoldConfig(tile=128, block=64, block_n=128, unroll=8, variant="blocked",
                             ru=8, rv=8, asm=True, bulk_warps=2, finish_warps=8,
                             target_programs=1320)
LARGE_ABOVE = 24_000
DEFAULT_GPU_CONFIG = LARGE_CONFIG


def config_for_length(length: int) -> GpuFoldConfig:
    """The measured-best configuration for a sequence of ``length`` nt."""
    return SMALL_CONFIG if length <= LARGE_ABOVE else LARGE_CONFIG


def _work_items(nb: int, cfg: GpuFoldConfig) -> int:
    """Static size of the bulk grid / partials buffer: ``max_D (nb - D) * S(D)``."""
    return max(1, cfg.target_programs // cfg.nsub + nb)


def _splits(d, nb, cfg: GpuFoldConfig):
    """Split-K factor S and chunk length (in tiles) for block diagonal ``d`` (traced ints)."""
    nt = nb - d
    per_tile = max(1, cfg.target_programs // cfg.nsub)
    s = jnp.clip((per_tile + nt - 1) // nt, 1, jnp.maximum(d - 1, 1))
    chunk = (d - 1 + s - 1) // s
    return s, chunk


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


def _bulk_call(params, tab, *, nb, cfg, interpret):
    t = cfg.tile
    work = _work_items(nb, cfg)
    nsub = cfg.nsub
    return pl.pallas_call(
        partial(_bulk_kernel, nb=nb, cfg=cfg, interpret=interpret),
        out_shape=jax.ShapeDtypeStruct((work, t, t), jnp.int32),
        grid=(work, nsub),
        interpret=interpret,
        compiler_params=None if interpret else compiler_params(cfg.bulk_warps, cfg.bulk_stages),
        name="nussinov_bulk",
    )(params, tab)


def _finish_call(params, codes, wtab, part, tab, *, nb, cfg, interpret):
    return pl.pallas_call(
        partial(_finish_kernel, nb=nb, cfg=cfg, interpret=interpret),
        out_shape=jax.ShapeDtypeStruct(tab.shape, jnp.int32),
        grid=(nb - 1,),
        input_output_aliases={4: 0},
        interpret=interpret,
        compiler_params=None if interpret else compiler_params(cfg.finish_warps, 1),
        name="nussinov_finish",
    )(params, codes, wtab, part, tab)


@partial(jax.jit, static_argnames=("config", "interpret", "stages"))
def fill_packed(codes: jax.Array, weights: jax.Array, min_loop=3,
                config: GpuFoldConfig = DEFAULT_GPU_CONFIG, interpret: bool = False,
                stages: str = "all") -> jax.Array:
    """Fill the packed table of one encoded sequence (length a multiple of ``config.tile``;
    pad with code 4). Returns ``tab`` of shape ``(nb (nb + 1) / 2, T, T)`` int32.
    ``min_loop`` is traced (one program for every value).

    ``stages`` is for profiling only: ``"bulk"`` or ``"finish"`` runs just that kernel each
    step (same amount of work, wrong table)."""
    cfg = config
    t = cfg.tile
    n = codes.shape[0]
    if n % t or n == 0:
        raise ValueError(f"sequence length {n} is not a positive multiple of the tile {t}")
    nb = n // t
    codes = codes.astype(jnp.int32)
    weights = jnp.asarray(weights, jnp.int32)
    min_loop = jnp.asarray(min_loop, jnp.int32)
    diag = jax.vmap(lambda c: diagonal_tile(c, weights, min_loop))(codes.reshape(nb, t))
    tab = jnp.full((n_slots(nb), t, t), NEG, jnp.int32).at[:nb].set(diag)
    if nb == 1:
        return tab
    wtab = weights.reshape(-1)

    idle_part = None
    if stages == "finish":
        idle_part = jnp.full((_work_items(nb, cfg), t, t), NEG, jnp.int32)

    def step(d, tab):
        s, chunk = _splits(d, nb, cfg)
        params = jnp.stack([d, s, chunk, nb - d, min_loop]).astype(jnp.int32)
        if stages == "finish":
            part = idle_part
        else:
            part = _bulk_call(params, tab, nb=nb, cfg=cfg, interpret=interpret)
        if stages == "bulk":
            return tab.at[0, 0, 0].max(part[0, 0, 0])  # keeps the bulk alive; O(1) per step
        return _finish_call(params, codes, wtab, part, tab, nb=nb, cfg=cfg, interpret=interpret)

    return jax.lax.fori_loop(1, nb, step, tab)


def packed_score(tab: jax.Array, length: int) -> jax.Array:
    """``N(0, length - 1)`` of a packed table (0 for ``length <= 1``)."""
    if length <= 1:
        return jnp.int32(0)
    nb = int(round((np.sqrt(8 * tab.shape[0] + 1) - 1) / 2))
    return cell(tab, 0, length - 1, nb)


# --------------------------------------------------------------------------------------------
# traceback on the device
# --------------------------------------------------------------------------------------------

@partial(jax.jit, static_argnames=("search",))
def traceback_device(tab: jax.Array, codes: jax.Array, weights: jax.Array, length,
                     min_loop, search: int = 1024) -> tuple[jax.Array, jax.Array]:
    """One optimal structure, found on the device; returns ``(partner, ok)``.

    ``codes`` may be padded (its length fixes the compiled shapes; ``length`` is the true
    length and may vary without recompiling). ``partner[i]`` is the base paired with ``i`` or
    -1 (``len(codes)`` entries); ``ok`` is False if the table was inconsistent. Same
    preferences as :func:`jaxrna.fold.traceback.traceback` (i unpaired, then j unpaired, then
    the pair, then the leftmost split), so the structure is identical.
    """
    nb = int(round((np.sqrt(8 * tab.shape[0] + 1) - 1) / 2))
    return structure_search(partial(cell, tab, nb=nb), codes, weights, length, min_loop, search)


def structure_search(get, codes: jax.Array, weights: jax.Array, length, min_loop: int,
                     search: int = 1024) -> tuple[jax.Array, jax.Array]:
    """The traceback of :func:`traceback_device` on any table layout: ``get(i, j)`` reads
    ``N(i, j)`` (broadcasting over index arrays; 0 for ``j < i``). Traceable (jit, vmap)."""
    size = codes.shape[0]
    n = jnp.asarray(length, jnp.int32)
    codes = codes.astype(jnp.int32)
    weights = jnp.asarray(weights, jnp.int32)
    stack = jnp.zeros((size + 2, 2), jnp.int32).at[0].set(jnp.stack([jnp.int32(0), n - 1]))
    partner = jnp.full((size,), -1, jnp.int32)
    sp0 = (n > 1).astype(jnp.int32)

    def split_search(i, j, v):
        def cond(st):
            k0, k = st
            return (k < 0) & (k0 <= j - 2)

        def body(st):
            k0, _ = st
            ks = k0 + jnp.arange(search, dtype=jnp.int32)
            ok = (ks <= j - 2) & (get(i, ks) + get(ks + 1, j) == v)
            first = jnp.argmax(ok)
            return k0 + search, jnp.where(ok[first], ks[first], -1)

        _, k = jax.lax.while_loop(cond, body, (i + 1, jnp.int32(-1)))
        return k

    def cond(st):
        sp, _, _, ok = st
        return (sp > 0) & ok

    def body(st):
        sp, stack, partner, ok = st
        i, j = stack[sp - 1, 0], stack[sp - 1, 1]
        sp = sp - 1
        v = get(i, j)
        live = (j > i) & (v != 0)
        a_ok = get(i + 1, j) == v
        b_ok = get(i, j - 1) == v
        wgt = weights[codes[jnp.clip(i, 0, size - 1)], codes[jnp.clip(j, 0, size - 1)]]
        p_ok = (wgt > 0) & (j - i > min_loop) & (get(i + 1, j - 1) + wgt == v)
        case_a = live & a_ok
        case_b = live & ~a_ok & b_ok
        case_p = live & ~a_ok & ~b_ok & p_ok
        case_s = live & ~a_ok & ~b_ok & ~p_ok
        k = jax.lax.cond(case_s, split_search, lambda i, j, v: jnp.int32(-1), i, j, v)
        ok = ok & ~(case_s & (k < 0))
        first = jnp.where(case_a, jnp.stack([i + 1, j]),
                          jnp.where(case_b, jnp.stack([i, j - 1]),
                                    jnp.where(case_p, jnp.stack([i + 1, j - 1]),
                                              jnp.stack([k + 1, j]))))
        stack = stack.at[sp].set(jnp.where(live, first, stack[sp]))
        sp = sp + live.astype(jnp.int32)
        stack = stack.at[sp].set(jnp.where(case_s, jnp.stack([i, k]), stack[sp]))
        sp = sp + case_s.astype(jnp.int32)
        pi = jnp.where(case_p, i, size)       # out of range index: dropped
        partner = partner.at[pi].set(j, mode="drop").at[jnp.where(case_p, j, size)].set(
            i, mode="drop")
        return sp, stack, partner, ok

    _, _, partner, ok = jax.lax.while_loop(cond, body, (sp0, stack, partner, jnp.bool_(True)))
    return partner, ok


# --------------------------------------------------------------------------------------------
# memory estimate and the one-call API
# --------------------------------------------------------------------------------------------

def estimate_gpu_bytes(length: int, config: GpuFoldConfig | None = None) -> int:
    """Device memory to fold one ``length``-nt sequence with :func:`fold_gpu`: the packed
    table, the split-K partials, the diagonal-tile sweep and a fixed slack."""
    config = config or config_for_length(length)
    t = config.tile
    nb = -(-max(length, 1) // t)
    table = packed_bytes(length, t)
    partials = _work_items(nb, config) * t * t * 4
    diag = nb * 3 * (t + 1) * (2 * t) * 4
    return table + partials + diag + _SLACK_BYTES


def device_memory_limit() -> int:
    """Bytes the default JAX device may allocate (0 if unknown)."""
    from jaxrna.runtime import device_memory_bytes

    return device_memory_bytes()


class GpuMemoryError(MemoryError):
    """A sequence does not fit in the GPU's memory; the message says by how much."""


def check_gpu_memory(length: int, record_id: str = "sequence", max_bytes: int | None = None,
                     config: GpuFoldConfig | None = None) -> int:
    """Refuse, before any allocation, a sequence whose packed table would not fit.

    Returns the estimate in bytes; raises :class:`GpuMemoryError` with the figures otherwise.
    ``max_bytes`` defaults to the device's allocator limit (skipped if unknown).
    """
    config = config or config_for_length(length)
    need = estimate_gpu_bytes(length, config)
    limit = device_memory_limit() if max_bytes is None else max_bytes
    if limit and need > limit:
        t = config.tile
        fit = max_length_for(limit)
        raise GpuMemoryError(
            f"record '{record_id}' ({length} nt) needs about {need / 1e9:.1f} GB of GPU memory "
            f"(packed int32 table of {packed_bytes(length, t) / 1e9:.1f} GB plus work space), "
            f"more than the {limit / 1e9:.1f} GB this GPU allows; the longest sequence that fits "
            f"is about {fit} nt. Split it into domains or use a GPU with more memory "
            f"(XLA_PYTHON_CLIENT_MEM_FRACTION raises JAX's share of the card).")
    return need


def max_length_for(limit: int, config: GpuFoldConfig | None = None) -> int:
    """The longest sequence (to 64 nt) whose estimate fits in ``limit`` bytes."""
    lo, hi = 0, 1 << 22
    while hi - lo > 64:
        mid = (lo + hi) // 2
        if estimate_gpu_bytes(mid, config) <= limit:
            lo = mid
        else:
            hi = mid
    return lo // 64 * 64


def fold_gpu(codes: np.ndarray, weights: np.ndarray, min_loop: int = 3, *,
             with_pairs: bool = True, config: GpuFoldConfig | None = None,
             interpret: bool = False, record_id: str = "sequence",
             max_bytes: int | None = None,
             pad_to: int | None = None) -> tuple[int, list[tuple[int, int]] | None]:
    """Fold one encoded sequence on the GPU: ``(score, pairs)`` in integer weight units.

    ``codes``: int codes (:func:`jaxrna.alphabet.encode`); ``weights``: the 5x5 int pair
    weights (:meth:`jaxrna.weights.WeightSet.matrix`). Pairs are sorted ``(i, j)`` tuples, the
    same structure the CPU path's traceback returns; None when ``with_pairs`` is False. The
    table never leaves the device. Raises :class:`GpuMemoryError` up front if it cannot fit.
    ``config`` None picks :func:`config_for_length`; ``pad_to`` (>= the length) pads the
    sequence further (with code 4, which never pairs: exact), so that sequences of nearby
    lengths share one compiled program.
    """
    codes = np.asarray(codes)
    n = len(codes)
    if n <= 1:
        return 0, ([] if with_pairs else None)
    config = config or config_for_length(max(n, pad_to or 0))
    if not interpret:
        check_gpu_memory(max(n, pad_to or 0), record_id, max_bytes, config)
    t = config.tile
    padded = np.full(-(-max(n, pad_to or 0) // t) * t, 4, dtype=np.int32)
    padded[:n] = codes
    wm = np.asarray(weights, np.int32)
    length = np.asarray(n, np.int32)
    out = _packed_call(padded, wm, length, min_loop, config, interpret, with_pairs)
    from jaxrna import stages

    with stages.stage("device"):
        out = jax.device_get(out)
    score = int(out[0])
    if not with_pairs:
        return score, None
    partner, ok = np.asarray(out[1])[:n], out[2]
    if not bool(ok):
        raise AssertionError("GPU table inconsistent during traceback")
    idx = np.flatnonzero(partner > np.arange(n))
    return score, [(int(i), int(partner[i])) for i in idx]


def _packed_program(codes, wm, length, min_loop, *, config: GpuFoldConfig, interpret: bool,
                    with_pairs: bool, walk: str, fill: str = "pallas"):
    """Fill, score and (with pairs) traceback of one padded sequence as one program
    (``length`` and ``min_loop`` traced). ``fill="xla"``: the pure-JAX path (the tiled fill of
    :func:`jaxrna.fold.blocked.blocked_fill` and the XLA walk over it; same score and pairs)."""
    from jaxrna.fold.walk import tile_cell, traceback_packed_kernel

    if fill == "xla":
        from jaxrna.fold.blocked import blocked_fill_traced

        tiles = blocked_fill_traced(codes, wm, min_loop, config.tile, maxplus="xla")[None]
        get = partial(tile_cell, tiles, 0)
        score = jnp.where(length > 1, get(0, length - 1), 0)
        if not with_pairs:
            return (score,)
        partner, ok = structure_search(get, codes, wm, length, min_loop)
        return score, partner, ok
    tab = fill_packed(codes, wm, min_loop, config, interpret)
    nb = codes.shape[0] // config.tile
    score = jnp.where(length > 1, cell(tab, 0, length - 1, nb), 0)
    if not with_pairs:
        return (score,)
    if walk == "kernel":
        partner, ok = traceback_packed_kernel(tab, codes, wm, length, min_loop,
                                              interpret=interpret)
    else:
        partner, ok = traceback_device(tab, codes, wm, length, min_loop)
    return score, partner, ok


_packed_jit = jax.jit(_packed_program, static_argnames=("config", "interpret", "with_pairs",
                                                        "walk", "fill"))


def _packed_call(codes: np.ndarray, wm: np.ndarray, length: np.ndarray, min_loop: int,
                 config: GpuFoldConfig, interpret: bool, with_pairs: bool):
    """Launch :func:`_packed_program` on JAX's default device through the stored executables
    (:mod:`jaxrna.programs`). On a GPU the traceback is the one-kernel walk
    (:func:`jaxrna.fold.walk.traceback_packed_kernel`: one launch for the whole structure);
    in interpret mode, or with ``JAXRNA_FOLD_WALK=xla``, the XLA walk of
    :func:`traceback_device`. A Pallas kernel that does not build falls back to its pure-JAX
    path (:mod:`jaxrna.kernels.fallback`): the walk kernel to the XLA walk, the fill kernels
    to the pure-JAX fill (``fill="xla"``)."""
    import os

    from jaxrna import programs
    from jaxrna.kernels.fallback import compile_or_fallback

    device = programs.default_device()
    args = (codes, wm, length, np.asarray(min_loop, np.int32))
    static = dict(config=config, interpret=interpret, with_pairs=with_pairs, walk="xla")

    def compiled(**choice):
        return programs.program("fold.packed", _packed_jit, args, dict(static, **choice), device)

    def packed_fill():
        if with_pairs and not interpret and os.environ.get("JAXRNA_FOLD_WALK", "kernel") != "xla":
            return compile_or_fallback("fold.walk", lambda: compiled(walk="kernel"), compiled)
        return compiled()

    run = compile_or_fallback("fold.packed_fill", packed_fill, lambda: compiled(fill="xla"))
    return run(*jax.device_put(args, device))
