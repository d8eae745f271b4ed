"""BPMax for ONE pair of strands as a pure JAX function (batch it with ``jax.vmap``).

The recurrence is the spec's (../shared/specs/bpmax.md) on an *outer* strand ``u`` and an
*inner* strand ``v``, both in internal orientation (strand 2 already reversed). F is symmetric
in the two strands (D is; H1/H2 mirror H4/H3; the pair terms mirror), so the caller may put
either strand outside; the shorter one makes the fewest matrices.

Layout (seed 003). F is a grid of inner matrices, one per outer cell ``(i1, j1)`` with
``j1 - i1 <= w_outer``; the matrices of one outer diagonal ``d1`` are contiguous
(:meth:`Geometry.offset`). Each inner matrix is stored in *end-exclusive* coordinates,
``G(i, j') = F(i1, j1, i, j' - 1)``, as the seed's padding does: then the double reduction is a
plain tropical product, ``D(i, j') = max_{i < k < j'} G_L(i, k) + G_R(k, j')``, with no shift of
either operand (NEG below the diagonal drops ``k <= i`` and ``k >= j'``). Only the band
``1 <= j' - i <= w_inner + 1`` is kept, cut into ``T x T`` tiles: ``table[cell, f, I]`` is tile
``(I, I + f)`` for ``f < ne``, so a window of 128 costs about 160 columns, not ``M``.

Per outer diagonal (all its matrices at once):

1. ``init = max(0, D, H3, H4, outer pair)`` reads only smaller outer diagonals. D is, for each
   split ``k1``, a batch of banded tropical products: tile ``(I, I + e)`` gathers
   ``A(I, I + f) (x) B(I + f, I + e)`` over ``f <= e`` (:func:`~jaxrna.kernels.tropical.maxplus_update`,
   one call per ``(e, f)``); H3/H4 add an S1 scalar to whole matrices.
2. H1, H2 and the inner pair read the matrix being filled; they run as a sweep over inner
   diagonals, in a diagonal-major copy (``band[e, i] = F(.., i, i + e)``), the way
   :mod:`jaxrna.fold.fill` fills a Nussinov table, reading S2 in both skewed layouts.

S1 and S2 come from a banded Nussinov fill that reuses the folding engine's split reduction
(:func:`jaxrna.fold.fill.diagonal_splits`), hairpins >= 3 (``j - i > 3``).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from jaxrna.fold.fill import NEG, block_bounds, diagonal_splits
from jaxrna.interact.geometry import Geometry
from jaxrna.kernels.bpmax_splits import fits, split_products
from jaxrna.kernels.tropical import maxplus_update

MIN_LOOP = 3


def banded_nussinov(codes: jax.Array, weights: jax.Array, width: int, min_loop: int = MIN_LOOP,
                    blocks: int = 4) -> tuple[jax.Array, jax.Array]:
    """Weighted Nussinov on diagonals ``0 .. width`` only (cells depend on sub-intervals only).

    Returns ``rows`` with ``rows[1 + d, i] = S(i, i + d)`` and ``cols`` with
    ``cols[width - d, j] = S(j - d, j)``; entries never computed are NEG. Uses
    :func:`jaxrna.fold.fill.diagonal_splits` with the band as the table's height.
    Positions past ``len(codes)`` read as code 4 (never pairs).
    """
    n = codes.shape[0]
    wb = width + 1
    bounds = block_bounds(wb, blocks)
    span = max((d1 for _, d1 in bounds), default=1)
    codes = jnp.concatenate([codes.astype(jnp.int32), jnp.full((wb + 1,), 4, jnp.int32)])
    rows = jnp.full((wb + 1, n + wb + 1), NEG, jnp.int32).at[0:2, :].set(0)
    cols = jnp.full((wb + span, n + wb + 1), NEG, jnp.int32).at[wb - 1, :].set(0)
    for d0, d1 in bounds:
        def body(d, tables, width=d1):
            rows, cols = tables
            best = diagonal_splits(rows, cols, d, width, n, wb)
            partner = jax.lax.dynamic_slice(codes, (d,), (n,))
            w = weights[codes[:n], partner]
            inner = jax.lax.dynamic_slice(rows, (d - 1, 1), (1, n))[0]
            best = jnp.maximum(best, jnp.where((w > 0) & (d > min_loop), inner + w, NEG))
            rows = jax.lax.dynamic_update_slice(rows, best[None, :], (1 + d, 0))
            cols = jax.lax.dynamic_update_slice(cols, best[None, :], (wb - 1 - d, d))
            return rows, cols

        rows, cols = jax.lax.fori_loop(d0, d1, body, (rows, cols))
    return rows, cols


# ---- tiles <-> diagonal-major band ---------------------------------------------------------

def tiles_to_band(tiles: list[jax.Array], wb: int) -> jax.Array:
    """``[acc_e (B, nb, T, T) for e < ne]`` -> ``band (wb, B, nb*T)``, ``band[e, :, i] = F(i, i+e)``.

    Tile ``(I, I + f)[r, c]`` holds ``F(IT + r, (I + f)T + c - 1)``, so the band offset of that
    entry is ``x = fT + c - r - 1``: a skew by ``r + 1``, done with a flat pad-and-reshape.
    Cells past the matrix's last column come out as junk and are never stored.
    """
    b, nb, t, _ = tiles[0].shape
    k = len(tiles) * t
    rowcat = jnp.stack(tiles, axis=3).reshape(b, nb, t * k)
    rowcat = jnp.concatenate([rowcat, jnp.full((b, nb, t), NEG, rowcat.dtype)], axis=2)
    band = rowcat.reshape(b, nb, t, k + 1)[..., 1:1 + wb]          # band[I, r, x]
    return band.reshape(b, nb * t, wb).transpose(2, 0, 1)


def band_to_tiles(band: jax.Array, ne: int, t: int) -> jax.Array:
    """Inverse of :func:`tiles_to_band`: ``(wb, B, nb*T)`` -> ``(B, ne, nb, T, T)``, NEG off the band."""
    wb, b, n = band.shape
    nb, k = n // t, ne * t
    rm = band.transpose(1, 2, 0).reshape(b, nb, t, wb)
    padded = jnp.full((b, nb, t, k + 1), NEG, band.dtype).at[..., 1:1 + wb].set(rm[..., :k])
    flat = padded.reshape(b, nb, t * (k + 1))[..., :t * k].reshape(b, nb, t, ne, t)
    r = jnp.arange(t)[:, None, None]
    x = jnp.arange(ne)[None, :, None] * t + jnp.arange(t)[None, None, :] - r - 1
    flat = jnp.where(((x >= 0) & (x < wb))[None, None], flat, NEG)
    return flat.transpose(0, 3, 1, 2, 4)


# ---- H1, H2 and the inner pair: a sweep over inner diagonals -------------------------------

def inner_sweep(init: jax.Array, s_rows: jax.Array, s_cols: jax.Array, codes_v: jax.Array,
                weights: jax.Array, wb: int, blocks: int, mode: str = "loop",
                count=None) -> jax.Array:
    """Finish a batch of inner matrices given ``init`` (every term that reads other matrices).

    ``init (wb, B, n)``: diagonal-major; ``s_rows[a, i] = S2(i, i + a)``;
    ``s_cols[wb - 1 - s, j] = S2(j - s, j)`` (NEG rows past ``wb``). For diagonal ``e``::

        H1(i) = max_{a<e} F(i, i+a) + S2(i+a+1, i+e)     rows[a, i] + s_cols[wb-e+a, i+e]
        H2(i) = max_{a<e} S2(i, i+a) + F(i+a+1, i+e)     s_rows[a, i] + fcols[wb-e+a, i+e]
        pair  = w(v[i], v[i+e]) + F(i+1, i+e-1)          if e >= 4

    ``mode="reduce"`` takes each diagonal's maxima as one reduction over a block-wide slab (one
    kernel per diagonal: the GPU choice); ``mode="loop"`` accumulates them one ``a`` at a time
    in a loop of elementwise maxima, which XLA's CPU backend runs several times faster.
    ``count`` (a traced int, default ``wb``): only diagonals ``e < count`` are filled (the
    rest stay NEG), so a window shorter than the band costs only its own diagonals.
    """
    _, b, n = init.shape
    bounds = [(0, 1)] + block_bounds(wb, blocks) if mode == "reduce" else [(0, wb)]
    span = max(d1 for _, d1 in bounds)
    rows = jnp.full((wb, b, n + 1), NEG, jnp.int32)
    fcols = jnp.full((wb + span, b, n + wb), NEG, jnp.int32)
    cv = jnp.concatenate([codes_v.astype(jnp.int32), jnp.full((wb + n,), 4, jnp.int32)])
    for e0, e1 in bounds:
        width = max(e1 - 1, 1)

        def body(e, carry, width=width):
            rows, fcols = carry
            if mode == "reduce":
                s_right = jax.lax.dynamic_slice(s_cols, (wb - e, e), (width, n))
                h1 = jnp.max(rows[:width, :, :n] + s_right[:, None], axis=0)
                f_right = jax.lax.dynamic_slice(fcols, (wb - e, 0, e), (width, b, n))
                h2 = jnp.max(s_rows[:width, None, :n] + f_right, axis=0)
            else:
                def term(a, h):
                    r = jax.lax.dynamic_slice(rows, (a, 0, 0), (1, b, n))[0]
                    s = jax.lax.dynamic_slice(s_cols, (wb - e + a, e), (1, n))
                    f = jax.lax.dynamic_slice(fcols, (wb - e + a, 0, e), (1, b, n))[0]
                    s2 = jax.lax.dynamic_slice(s_rows, (a, 0), (1, n))
                    return jnp.maximum(h, jnp.maximum(r + s, s2 + f))

                h1 = h2 = jax.lax.fori_loop(0, e, term, jnp.full((b, n), NEG, jnp.int32))
            w = weights[cv[:n], jax.lax.dynamic_slice(cv, (e,), (n,))]
            inner = jax.lax.dynamic_slice(rows, (jnp.maximum(e - 2, 0), 0, 1), (1, b, n))[0]
            pair = jnp.where(e >= 4, inner + w[None], NEG)
            start = jax.lax.dynamic_slice(init, (e, 0, 0), (1, b, n))[0]
            val = jnp.maximum(jnp.maximum(start, pair), jnp.maximum(h1, h2))
            rows = jax.lax.dynamic_update_slice(rows, val[None], (e, 0, 0))
            fcols = jax.lax.dynamic_update_slice(fcols, val[None], (wb - 1 - e, 0, e))
            return rows, fcols

        stop = e1 if count is None else jnp.clip(count, e0, e1)
        rows, fcols = jax.lax.fori_loop(e0, stop, body, (rows, fcols))
    return rows[:, :, :n]


# ---- the fill ------------------------------------------------------------------------------

def _product(c: jax.Array, a: jax.Array, b: jax.Array, kernel: str | None) -> jax.Array:
    """``max(c, a (x) b)`` through the shared tropical kernel (its default backend unless named)."""
    if kernel is None:
        return maxplus_update(c, a, b)
    return maxplus_update(c, a, b, backend=kernel)


def _outer_bounds(count: int, blocks: int) -> list[tuple[int, int]]:
    size = max(1, -(-count // max(blocks, 1)))
    return [(d0, min(d0 + size, count)) for d0 in range(0, count, size)]


def single_tables(codes_u: jax.Array, codes_v: jax.Array, weights: jax.Array, geo: Geometry):
    """``(s_outer, s_rows, s_cols)``: banded S tables of both strands (see :func:`bpmax_fill`).

    One loop each (``blocks=1``): their work is a small part of the fill's, and every block
    is one more loop body to compile."""
    n1 = geo.n_outer
    so, _ = banded_nussinov(jnp.concatenate([codes_u, jnp.full((n1 + 1,), 4, codes_u.dtype)]),
                            weights, geo.w_outer, blocks=1)
    sr, sc = banded_nussinov(jnp.concatenate([codes_v, jnp.full((geo.wb,), 4, codes_v.dtype)]),
                             weights, geo.w_inner, blocks=1)
    return so[1:], sr[1:], sc


@partial(jax.jit, static_argnames=("geo",))
def bpmax_fill(codes_u: jax.Array, codes_v: jax.Array, weights: jax.Array, geo: Geometry,
               spans=None):
    """Fill F for one pair of encoded strands (outer ``u``, inner ``v``, internal orientation).

    ``codes_u``: int array ``(geo.n_outer,)``; ``codes_v``: ``(geo.n_inner,)``; pad both with
    code 4 (never pairs), which leaves every cell of the true strands exact. ``weights``: 5x5
    int32. Returns ``(table, s_outer, s_inner)``: ``table`` of shape :meth:`Geometry.table_shape`
    (read it with :mod:`jaxrna.interact.windows`), ``s_outer[d, i] = S1(i, i + d)`` and
    ``s_inner[d, i] = S2(i, i + d)`` on the kept diagonals.

    ``spans`` (optional, int32 ``(2,)``, traced; not batched under ``vmap``): the outer and
    inner diagonals to fill, at most ``w_outer + 1`` and ``w_inner + 1`` -- the batch's
    largest window spans + 1. Cells of larger spans stay NEG; every cell of a smaller span is
    exact (F reads only sub-boxes), so windows and true lengths are runtime values of one
    compiled program.
    """
    n1, t, ne, nb = geo.n_outer, geo.tile, geo.ne, geo.nb
    weights = jnp.asarray(weights, jnp.int32)
    codes_u = codes_u.astype(jnp.int32)
    codes_v = codes_v.astype(jnp.int32)
    s_outer, s_rows, s_cols = single_tables(codes_u, codes_v, weights, geo)
    cu = jnp.concatenate([codes_u, jnp.full((n1 + 1,), 4, jnp.int32)])
    table = jnp.full(geo.table_shape(), NEG, jnp.int32)
    matrix = (ne, geo.rows, t, t)
    fused = geo.fused and fits(geo.table_shape())
    if spans is None:
        n_diag, n_band = None, None
        ne_need = ne
    else:
        spans = jnp.asarray(spans, jnp.int32)
        n_diag, n_band = spans[0], spans[1]
        # tile offsets holding a band diagonal < n_band (as Geometry.ne for w = n_band - 1)
        ne_need = jnp.minimum((n_band - 1 + t) // t, nb - 1) + 1

    for d0, d1_end in _outer_bounds(geo.w_outer + 1, geo.outer_blocks):
        bb = n1 - d0                                   # matrices on the block's first diagonal

        def diagonal(d1, table, bb=bb):
            def split(c, acc):
                left = jax.lax.dynamic_slice(table, (geo.offset(c), 0, 0, 0, 0), (bb,) + matrix)
                right = jax.lax.dynamic_slice(
                    table, (geo.offset(d1 - 1 - c) + c + 1, 0, 0, 0, 0), (bb,) + matrix)
                s3 = jax.lax.dynamic_slice(s_outer, (c, 0), (1, bb))[0]          # S1(i1, i1+c)
                s4 = jax.lax.dynamic_slice(s_outer, (d1 - 1 - c, c + 1), (1, bb))[0]  # S1(i1+c+1, j1)
                out = []
                for e in range(ne):
                    def tile_offset(a, e=e):
                        a = jnp.maximum(a, jnp.maximum(right[:, e, :nb] + s3[:, None, None, None],
                                                       left[:, e, :nb] + s4[:, None, None, None]))
                        for f in range(e + 1):
                            a = _product(a, left[:, f, :nb], right[:, e - f, f:f + nb], geo.kernel)
                        return a

                    if spans is None or e == 0:
                        out.append(tile_offset(acc[e]))
                    else:      # offsets past the batch's window: never read, skipped
                        out.append(jax.lax.cond(e < ne_need, tile_offset, lambda a: a, acc[e]))
                return tuple(out)

            if fused:
                acc = split_products(table, s_outer, d1, bb=bb, nb=nb, ne=ne, n_outer=n1,
                                     interpret=geo.kernel == "interpret")
            else:
                acc = tuple(jnp.zeros((bb, nb, t, t), jnp.int32) for _ in range(ne))
                acc = jax.lax.fori_loop(0, d1, split, acc)
            # the outer pair: w(u[i1], u[j1]) + F(i1 + 1, j1 - 1)
            w_out = weights[cu[:bb], jax.lax.dynamic_slice(cu, (d1,), (bb,))]
            w_out = jnp.where(d1 >= 4, w_out, NEG)[:, None, None, None]
            inside = jax.lax.dynamic_slice(
                table, (geo.offset(jnp.maximum(d1 - 2, 0)) + 1, 0, 0, 0, 0), (bb,) + matrix)
            acc = tuple(jnp.maximum(acc[e], inside[:, e, :nb] + w_out) for e in range(ne))
            init = tiles_to_band(list(acc), geo.wb)
            # the base case F(i1, i1, i2, i2) = w(u[i1], v[i2])
            base = weights[cu[:bb, None], codes_v[None, :]]
            init = init.at[0].max(jnp.where(d1 == 0, base, NEG))
            band = inner_sweep(init, s_rows, s_cols, codes_v, weights, geo.wb, geo.inner_blocks,
                               geo.sweep, n_band)
            new = band_to_tiles(band, ne, t)
            return jax.lax.dynamic_update_slice(table, new, (geo.offset(d1), 0, 0, 0, 0))

        stop = d1_end if n_diag is None else jnp.clip(n_diag, d0, d1_end)
        table = jax.lax.fori_loop(d0, stop, diagonal, table)
    return table, s_outer[:, :n1], s_rows[:, :geo.n_inner]
