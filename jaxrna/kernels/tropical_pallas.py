"""Pallas kernels for the max-plus (tropical) product ``C = max(C, A (x) B)``.

GPU path of :func:`jaxrna.kernels.tropical.maxplus_update`, lowered through Pallas' Triton
backend (``pl.pallas_call`` on GPU); on CPU the same kernels run in Pallas' interpret mode,
which is how the tests check them.

Design. Each program owns one ``block_m x block_n`` block of ``C`` in registers and walks the
contraction one ``k`` at a time: a column of ``A`` (``block_m`` values) and a row of ``B``
(``block_n`` values) are loaded and the block is updated with ``max(acc, a[:, None] + b[None, :])``
-- an outer "product" of ``block_m * block_n`` add-max updates for ``block_m + block_n`` loads,
so the loop is bound by integer arithmetic, not by memory (max-plus has no tensor-core
instruction, so the ceiling is the ALUs' add-and-max rate). ``unroll`` values of ``k`` are
issued per loop trip so the loads of the next steps overlap the arithmetic of this one.

* int32 and float32 (int32 is faster on Hopper and exact; -infinity is any value at or below
  :func:`neg_value`, and sums must stay inside the type).
* Ragged edges: shapes are padded to whole blocks with -infinity, which cannot win a maximum,
  and the padding is cut off afterwards; already aligned shapes are not copied.
* :class:`Structure` declares that ``A`` and ``B`` are -infinity outside a band (upper
  triangular is the band ``[0, inf)``); blocks whose ``k`` range is empty are skipped and each
  block walks only its own ``k`` range. The result is the same as the dense product.
* Leading axes are batch axes (broadcast between ``a``, ``b`` and ``c``); ``jax.vmap`` works.

Pallas APIs used are the stable ones shared by jax 0.10 and 0.11 (``pallas_call``,
``program_id``, ``ds``, ref indexing, ``lax.fori_loop``, Triton ``CompilerParams``).
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

try:  # the Triton-specific module; absent or renamed in some jax builds
    from jax.experimental.pallas import triton as plgpu
except ImportError:  # pragma: no cover
    plgpu = None


def compiler_params(num_warps: int, num_stages: int):
    """Triton compiler parameters for ``pallas_call`` across jax versions (None if unknown)."""
    if plgpu is None:  # pragma: no cover
        return None
    cls = getattr(plgpu, "CompilerParams", None) or getattr(plgpu, "TritonCompilerParams", None)
    if cls is None:  # pragma: no cover
        return None
    return cls(num_warps=num_warps, num_stages=num_stages)


def barrier(interpret: bool) -> None:
    """Block-wide barrier (``__syncthreads``) on GPU; a no-op in interpret mode (sequential)."""
    if not interpret:
        plgpu.debug_barrier()


def neg_value(dtype) -> int | float:
    """The -infinity used for padding: half the integer minimum (so two still add), or -inf."""
    dtype = jnp.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.integer):
        return int(jnp.iinfo(dtype).min) // 2
    return float("-inf")


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """Tile sizes and launch shape of the dense max-plus kernel.

    ``block_m x block_n`` is the block of ``C`` one program keeps in registers, ``unroll`` the
    ``k`` steps issued per loop trip, ``num_warps``/``num_stages`` go to Triton. ``asm`` emits
    each update as one inline-PTX ``add.s32; max.s32`` block (ignored in interpret mode); on an
    H200 that took the kernel from 7.7 to 9.7-10.4 T updates/s at 4096^3, consistent with ptxas
    fusing the pair into Hopper's one-instruction add-max (inferred from the speed; the SASS
    was not inspected). The defaults are the fastest configuration measured there.
    ``variant``:

    * ``"blocked"`` -- the block is held as a 4-D array ``[block_m/ru, block_n/rv, ru, rv]``
      (``C[p*ru + u, q*rv + v]``), which leads Triton to give each thread a few whole rows and
      columns (few loads per update);
    * ``"outer"`` -- the block as a plain 2-D array: a column of A and a row of B per ``k``;
    * ``"bcast3d"`` -- an ``unroll``-deep slab of A and B broadcast to 3-D and reduced.
    """

    block_m: int = 32
    block_n: int = 128
    unroll: int = 8
    num_warps: int = 1
    num_stages: int = 1
    variant: str = "blocked"
    ru: int = 8
    rv: int = 8
    asm: bool = True

    def fitted(self, m: int, n: int) -> "KernelConfig":
        """The same config with blocks shrunk (to powers of two >= 16) for small ``m``/``n``."""
        bm = min(self.block_m, max(16, _pow2_at_least(m)))
        bn = min(self.block_n, max(16, _pow2_at_least(n)))
        warps = self.num_warps
        while warps > 1 and bm * bn < 256 * warps:
            warps //= 2
        return dataclasses.replace(self, block_m=bm, block_n=bn, num_warps=warps,
                                   ru=min(self.ru, bm), rv=min(self.rv, bn))


class Blocking:
    """How one program's ``bm x bn`` block of C is indexed (see :class:`KernelConfig`)."""

    def __init__(self, variant: str, bm: int, bn: int, ru: int = 8, rv: int = 8):
        self.variant, self.bm, self.bn = variant, bm, bn
        if variant == "blocked":
            p_, q_ = bm // ru, bn // rv
            self.rows = (jax.lax.broadcasted_iota(jnp.int32, (p_, 1, ru, 1), 0) * ru
                         + jax.lax.broadcasted_iota(jnp.int32, (p_, 1, ru, 1), 2))
            self.cols = (jax.lax.broadcasted_iota(jnp.int32, (1, q_, 1, rv), 1) * rv
                         + jax.lax.broadcasted_iota(jnp.int32, (1, q_, 1, rv), 3))
            self.shape = (p_, q_, ru, rv)
        else:
            self.shape = (bm, bn)

    def c(self, m0, n0):
        """Index of the block ``[m0, m0+bm) x [n0, n0+bn)``."""
        if self.variant == "blocked":
            return m0 + self.rows, n0 + self.cols
        return pl.ds(m0, self.bm), pl.ds(n0, self.bn)

    def a(self, m0, k):
        """Index of column ``k`` of A over the block's rows."""
        if self.variant == "blocked":
            return m0 + self.rows, k
        return pl.ds(m0, self.bm), pl.ds(k, 1)

    def b(self, k, n0):
        """Index of row ``k`` of B over the block's columns."""
        if self.variant == "blocked":
            return k, n0 + self.cols
        return pl.ds(k, 1), pl.ds(n0, self.bn)


DEFAULT_CONFIG = KernelConfig()


@dataclasses.dataclass(frozen=True)
class Structure:
    """Where the operands may be finite: ``a_lo <= k - i <= a_hi`` for ``A[i, k]`` and
    ``b_lo <= j - k <= b_hi`` for ``B[k, j]`` (None = unbounded). Entries outside must be
    -infinity; the kernel then skips them. ``Structure.upper()`` is two upper-triangular
    operands (``k >= i`` and ``j >= k``)."""

    a_lo: int | None = None
    a_hi: int | None = None
    b_lo: int | None = None
    b_hi: int | None = None

    @classmethod
    def upper(cls) -> "Structure":
        return cls(a_lo=0, b_lo=0)

    @classmethod
    def band(cls, width: int) -> "Structure":
        """Both operands upper triangular with ``k - i <= width`` and ``j - k <= width``."""
        return cls(a_lo=0, a_hi=width, b_lo=0, b_hi=width)

    def k_range(self, m0, bm, n0, bn, k_total):
        """The ``[lo, hi)`` range of ``k`` that can reach rows ``[m0, m0+bm)``, cols ``[n0, n0+bn)``."""
        lo, hi = 0, k_total
        if self.a_lo is not None:
            lo = jnp.maximum(lo, m0 + self.a_lo)
        if self.a_hi is not None:
            hi = jnp.minimum(hi, m0 + bm + self.a_hi)
        if self.b_hi is not None:
            lo = jnp.maximum(lo, n0 - self.b_hi)
        if self.b_lo is not None:
            hi = jnp.minimum(hi, n0 + bn - self.b_lo)
        return lo, hi

    def mask(self, m: int, k: int, n: int):
        """Boolean masks (host, NumPy) of the finite parts of A (m x k) and B (k x n)."""
        i, kk = np.arange(m)[:, None], np.arange(k)[None, :]
        d = kk - i
        ma = np.ones((m, k), bool)
        if self.a_lo is not None:
            ma &= d >= self.a_lo
        if self.a_hi is not None:
            ma &= d <= self.a_hi
        kk2, j = np.arange(k)[:, None], np.arange(n)[None, :]
        d2 = j - kk2
        mb = np.ones((k, n), bool)
        if self.b_lo is not None:
            mb &= d2 >= self.b_lo
        if self.b_hi is not None:
            mb &= d2 <= self.b_hi
        return ma, mb


def _pow2_at_least(x: int) -> int:
    return 1 << max(0, (int(x) - 1).bit_length())


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


# --------------------------------------------------------------------------------------------
# building blocks shared with the Nussinov kernels (jaxrna.fold.gpu)
# --------------------------------------------------------------------------------------------

_ASM = {jnp.dtype(jnp.int32): ("{ .reg .s32 t; add.s32 t, $1, $2; max.s32 $0, t, $3; }", "r"),
        jnp.dtype(jnp.float32): ("{ .reg .f32 t; add.f32 t, $1, $2; max.f32 $0, t, $3; }", "f")}


def outer_step(acc, a_col, b_row, asm: bool = False):
    """One ``k``: ``acc = max(acc, a_col + b_row)`` (``a_col``/``b_row`` broadcast to ``acc``).

    ``asm=True`` emits the add and the max as one inline-PTX block per element (GPU only)."""
    if not asm or jnp.dtype(acc.dtype) not in _ASM:
        return jnp.maximum(acc, a_col + b_row)
    code, reg = _ASM[jnp.dtype(acc.dtype)]
    (out,) = plgpu.elementwise_inline_asm(
        code, args=[jnp.broadcast_to(a_col, acc.shape), jnp.broadcast_to(b_row, acc.shape), acc],
        constraints=f"={reg},{reg},{reg},{reg}", pack=1,
        result_shape_dtypes=[jax.ShapeDtypeStruct(acc.shape, acc.dtype)])
    return out


# --------------------------------------------------------------------------------------------
# dense batched kernel
# --------------------------------------------------------------------------------------------

def _dense_kernel(a_ref, b_ref, c_ref, o_ref, *, cfg: KernelConfig, k_total: int,
                  structure: Structure | None, a_batched: bool, b_batched: bool, asm: bool):
    del c_ref  # aliased with o_ref
    bi = pl.program_id(0)
    m0 = pl.program_id(1) * cfg.block_m
    n0 = pl.program_id(2) * cfg.block_n
    ai = bi if a_batched else 0
    bj = bi if b_batched else 0
    u = cfg.unroll
    bm, bn = cfg.block_m, cfg.block_n
    blk = Blocking(cfg.variant, bm, bn, cfg.ru, cfg.rv)
    acc = o_ref[(bi,) + blk.c(m0, n0)]
    if structure is None:
        lo_step, hi_step = 0, k_total // u
    else:
        lo, hi = structure.k_range(m0, bm, n0, bn, k_total)
        lo_step = lo // u
        hi_step = jnp.maximum((hi + u - 1) // u, lo_step)

    if cfg.variant == "bcast3d":
        def body(t, acc):
            k0 = pl.multiple_of(t * u, u)
            a = a_ref[ai, pl.ds(m0, bm), pl.ds(k0, u)]
            b = b_ref[bj, pl.ds(k0, u), pl.ds(n0, bn)]
            return jnp.maximum(acc, jnp.max(a[:, :, None] + b[None, :, :], axis=1))
    else:
        def body(t, acc):
            k0 = t * u
            for s in range(u):
                a = a_ref[(ai,) + blk.a(m0, k0 + s)]
                b = b_ref[(bj,) + blk.b(k0 + s, n0)]
                acc = outer_step(acc, a, b, asm)
            return acc

    acc = jax.lax.fori_loop(lo_step, hi_step, body, acc)
    o_ref[(bi,) + blk.c(m0, n0)] = acc


@partial(jax.jit, static_argnames=("config", "structure", "interpret"))
def maxplus_update_pallas(c: jax.Array, a: jax.Array, b: jax.Array, *,
                          config: KernelConfig | None = None,
                          structure: Structure | None = None,
                          interpret: bool = False) -> jax.Array:
    """``max(c, a (x) b)`` through the Pallas kernel; shapes as in ``maxplus_update``.

    ``a: (..., M, K)``, ``b: (..., K, N)``, ``c: (..., M, N)``; leading axes broadcast.
    """
    dtype = jnp.result_type(c, a, b)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.shape[-2] != k or c.shape[-2:] != (m, n):
        raise ValueError(f"shapes do not chain: a {a.shape}, b {b.shape}, c {c.shape}")
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    out_shape = batch + (m, n)
    if m == 0 or n == 0 or k == 0:
        return jnp.broadcast_to(c, out_shape).astype(dtype)
    cfg = (config or DEFAULT_CONFIG).fitted(m, n)
    nbatch = math.prod(batch)

    def flat(x, rows, cols):
        xb = x.shape[:-2]
        if math.prod(xb) == 1:
            return x.reshape(1, rows, cols).astype(dtype), False
        return jnp.broadcast_to(x, batch + (rows, cols)).reshape(nbatch, rows, cols).astype(dtype), True

    a3, a_batched = flat(a, m, k)
    b3, b_batched = flat(b, k, n)
    c3 = jnp.broadcast_to(c, out_shape).reshape(nbatch, m, n).astype(dtype)
    mp, np_, kp = _round_up(m, cfg.block_m), _round_up(n, cfg.block_n), _round_up(k, cfg.unroll)
    neg = neg_value(dtype)
    if (mp, kp) != (m, k):
        a3 = jnp.pad(a3, ((0, 0), (0, mp - m), (0, kp - k)), constant_values=neg)
    if (kp, np_) != (k, n):
        b3 = jnp.pad(b3, ((0, 0), (0, kp - k), (0, np_ - n)), constant_values=neg)
    if (mp, np_) != (m, n):
        c3 = jnp.pad(c3, ((0, 0), (0, mp - m), (0, np_ - n)), constant_values=neg)
    kernel = partial(_dense_kernel, cfg=cfg, k_total=kp, structure=structure,
                     a_batched=a_batched, b_batched=b_batched, asm=cfg.asm and not interpret)
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(c3.shape, dtype),
        grid=(nbatch, mp // cfg.block_m, np_ // cfg.block_n),
        input_output_aliases={2: 0},
        interpret=interpret,
        compiler_params=None if interpret else compiler_params(cfg.num_warps, cfg.num_stages),
        name="maxplus_dense",
    )(a3, b3, c3)
    return out[:, :m, :n].reshape(out_shape)
