"""Li, Ranka and Sahni's blocked Nussinov fill (seed 001), in pure JAX, for one sequence.

The table is cut into ``T x T`` tiles. Tiles on one block diagonal ``D`` (tile ``(I, I + D)``)
are independent, so each block diagonal is one batched step:

1. **bulk**: the splits ``k`` that fall in the tiles strictly between ``I`` and ``J = I + D``
   form a max-plus product of the row of tiles to the left and the column of (row-shifted)
   tiles below: ``C = max_K  N[I, K] (x) N'[K, J]`` with ``N'[k, j] = N(k + 1, j)``
   (:mod:`jaxrna.kernels.tropical`). This is nearly all of the n^3/6 work for long sequences.
2. **finish**: the splits inside tile ``I`` and tile ``J`` and the pair term depend on cells of
   the same tile; they are done in ``2T - 1`` steps over the tile's diagonals
   (:func:`finish_tile`).

Diagonal tiles (``D = 0``) are filled by the plain diagonal sweep of :mod:`jaxrna.fold.fill`.

Storage (one sequence, ``nb`` tiles a side): ``tiles[I, e]`` is tile ``(I, I + e)`` and
``shifted[J, e]`` is the row-shifted tile ``N'`` of block ``(J - e, J)``; both keep every
slice the bulk and the finish read contiguous, as the seed's transposed copy does.

>>> from jaxrna.alphabet import encode
>>> from jaxrna.weights import parse_weights
>>> t = blocked_fill(encode("GGGAAAUCCGGGAAAUCC"), parse_weights("unit").matrix(), 3, tile=6)
>>> int(blocked_score(t, 18))
6
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.fold.fill import NEG, fill_rows
from jaxrna.kernels.tropical import maxplus_update


def _groups(nb: int, count: int | None = None) -> list[tuple[int, int]]:
    """Block diagonals 1..nb-1 in at most ``count`` ranges (default 4 for small tables, else 8).

    Each range is compiled once with the tile count of its first diagonal: more ranges waste
    less work on empty tiles but take longer to compile.
    """
    if nb <= 1:
        return []
    if count is None:
        count = 4 if nb <= 16 else 8
    size = max(1, -(-(nb - 1) // count))
    return [(d0, min(d0 + size, nb)) for d0 in range(1, nb, size)]


def diagonal_tile(codes: jax.Array, weights: jax.Array, min_loop,
                  blocks: int = 4) -> jax.Array:
    """The full ``T x T`` Nussinov table of one window (entries below the diagonal are NEG);
    ``min_loop`` an int or a traced value."""
    t = codes.shape[0]
    rows = fill_rows(codes, weights, min_loop, blocks)
    r = jnp.arange(t)[:, None]
    c = jnp.arange(t)[None, :]
    d = jnp.clip(c - r, 0, t - 1)
    vals = rows[1 + d, r]
    return jnp.where(c >= r, vals, NEG)


def finish_tile(bulk: jax.Array, ti: jax.Array, tj: jax.Array, below: jax.Array,
                corner: jax.Array, left: jax.Array, ci: jax.Array, cj: jax.Array,
                offset: jax.Array, weights: jax.Array, min_loop: int) -> jax.Array:
    """Complete tile ``(I, J)`` (``J > I``) given the splits over the tiles between them.

    Works on an extended tile ``E`` of shape ``(T + 1, T + 1)``, ``E[r, c] = N(I*T + r,
    J*T + c - 1)``: column 0 is the last column of tile ``(I, J - 1)`` (``left``), row ``T``
    is row 0 of tile ``(I + 1, J)`` (``below``) with ``corner`` = N((I+1)T, JT - 1) before it.
    ``ti``/``tj`` are the diagonal tiles ``(I, I)`` and ``(J, J)``, ``ci``/``cj`` the codes of
    the tile's rows and columns, and ``offset = (J - I) * T``. Cells are computed in order of
    ``s = c - r``, every cell of one ``s`` at once; both split reductions are arranged as
    elementwise maxima over rows of contiguous windows (``E`` is padded by ``T`` columns on
    each side so a window may start left of column 0).
    """
    t = bulk.shape[0]
    e0 = jnp.full((t + 1, t + 1), NEG, jnp.int32)
    e0 = e0.at[:t, 1:].set(bulk).at[:t, 0].set(left).at[t, 0].set(corner).at[t, 1:].set(below)
    e = jnp.full((t + 1, 3 * t + 1), NEG, jnp.int32).at[:, t:2 * t + 1].set(e0)  # e[r, t+c] = E[r, c]
    et = e0[:t, :].T                                                             # et[c, r] = E[r, c]
    tjw = jnp.full((t, 3 * t), NEG, jnp.int32).at[:, t:2 * t].set(tj)           # tjw[q, t+c] = tj[q, c]
    r = jnp.arange(t)
    tit = jnp.where(r[:, None] >= r[None, :], ti.T, NEG)                         # tit[p, r] = ti[r, p], p >= r

    def step(s, carry):
        e, et = carry
        c = r + s                                      # column of E for each row r
        valid = (c >= 1) & (c <= t)
        cc = jnp.clip(c, 1, t)
        # splits with k = I*T + p in tile I:  max_{p >= r} ti[r, p] + E[p + 1, c]
        down = jax.lax.dynamic_slice(e, (1, t + s), (t, t))
        part1 = jnp.max(tit + down, axis=0)
        # splits with k = J*T + q - 1 in tile J:  max_{1 <= q < c} E[r, q] + tj[q, c - 1]
        across = jax.lax.dynamic_slice(tjw, (0, t + s - 1), (t, t))
        mask = (r[:, None] < c[None, :]) & (r[:, None] >= 1)
        part2 = jnp.max(jnp.where(mask, et[:t] + across, NEG), axis=0)
        # the pair (i, j) around N(i + 1, j - 1) = E[r + 1, c - 1]
        inner = e[r + 1, t + cc - 1]
        w = weights[ci, cj[cc - 1]]
        span = offset + c - 1 - r                      # j - i
        paired = jnp.where((w > 0) & (span > min_loop), inner + w, NEG)
        old = e[r, t + cc]                             # the bulk's splits
        val = jnp.maximum(jnp.maximum(old, paired), jnp.maximum(part1, part2))
        val = jnp.where(valid, val, old)
        return e.at[r, t + cc].set(val), et.at[cc, r].set(val)

    e, _ = jax.lax.fori_loop(2 - t, t + 1, step, (e, et))
    return e[:t, t + 1:2 * t + 1]


def _start_tiles(codes: jax.Array, weights: jax.Array, min_loop, t: int, pad: int,
                 diag_blocks: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The fills' starting state for tiles of ``t``: the codes as tile rows with ``pad`` rows
    of a non-pairing code below (reads past the last tile), the tile table (``[i, d]``: tile
    (i, i + d), ``pad`` rows of padding) with the diagonal tiles filled, and its shifted copy
    (empty)."""
    nb = codes.shape[0] // t
    ctiles = jnp.concatenate([codes.astype(jnp.int32).reshape(nb, t),
                              jnp.full((pad, t), 4, jnp.int32)])
    diag = jax.vmap(lambda c: diagonal_tile(c, weights, min_loop, diag_blocks))(ctiles[:nb])
    tiles = jnp.full((nb + pad, nb, t, t), NEG, jnp.int32).at[:nb, 0].set(diag)
    shifted = jnp.full((nb + pad, nb, t, t), NEG, jnp.int32)
    return ctiles, tiles, shifted


@partial(jax.jit, static_argnames=("min_loop", "tile", "groups", "diag_blocks", "maxplus"))
def blocked_fill(codes: jax.Array, weights: jax.Array, min_loop: int = 3,
                 tile: int = 64, groups: int | None = None, diag_blocks: int = 4,
                 maxplus: str | None = None) -> jax.Array:
    """Fill the tiled Nussinov table of one encoded sequence; returns ``tiles`` (see module).

    ``codes`` has length ``nb * tile`` (pad with code 4). Batch with ``jax.vmap``.
    ``groups``: block diagonals are compiled in this many ranges (:func:`_groups`; fewer
    compile faster, more waste less work on empty tiles); ``diag_blocks`` likewise for the
    sweep of the diagonal tiles. ``maxplus``: the backend of the bulk products
    (:func:`jaxrna.kernels.tropical.maxplus_update`; None: chosen where it is lowered, which
    traces both the Pallas and the XLA product -- naming it traces one).
    """
    return blocked_fill_traced(codes, weights, min_loop, tile, groups, diag_blocks, maxplus)


def blocked_fill_traced(codes: jax.Array, weights: jax.Array, min_loop, tile: int = 64,
                        groups: int | None = None, diag_blocks: int = 4,
                        maxplus: str | None = None, diagonals=None) -> jax.Array:
    """:func:`blocked_fill` unjitted: ``min_loop`` may be a traced value, and ``diagonals``
    (a traced int, default every one) stops after the block diagonals below it (those of
    the longest sequence of a padded batch: the tiles beyond are left NEG, never read for
    the cells of shorter sequences). Same tiles as :func:`blocked_fill` over those diagonals.
    """
    n = codes.shape[0]
    t = tile
    if n % t:
        raise ValueError(f"sequence length {n} is not a multiple of the tile size {t}")
    nb = n // t
    groups = _groups(nb, groups)
    gpad = max((d1 - d0 for d0, d1 in groups), default=0) + 1
    weights = jnp.asarray(weights, jnp.int32)
    ctiles, tiles, shifted = _start_tiles(codes, weights, min_loop, t, gpad, diag_blocks)
    finish = jax.vmap(finish_tile, in_axes=(0, 0, 0, 0, 0, 0, 0, 0, None, None, None))

    for d0, d1 in groups:
        nt = nb - d0                                   # tiles on the group's first diagonal

        def block_diagonal(dd, carry, nt=nt):
            tiles, shifted = carry

            def bulk_step(e1, acc):
                a = tiles[:nt, e1]                                   # tiles (I, I + e1)
                b = jax.lax.dynamic_slice(shifted, (dd, dd - e1, 0, 0), (nt, 1, t, t))[:, 0]
                return maxplus_update(acc, a, b, backend=maxplus)

            bulk = jax.lax.fori_loop(1, dd, bulk_step, jnp.full((nt, t, t), NEG, jnp.int32))
            ti = tiles[:nt, 0]
            tj = jax.lax.dynamic_slice(tiles, (dd, 0, 0, 0), (nt, 1, t, t))[:, 0]
            below = jax.lax.dynamic_slice(tiles, (1, dd - 1, 0, 0), (nt, 1, 1, t))[:, 0, 0]
            corner_tile = jax.lax.dynamic_slice(tiles, (1, jnp.maximum(dd - 2, 0), 0, t - 1),
                                                (nt, 1, 1, 1))[:, 0, 0, 0]
            corner = jnp.where(dd >= 2, corner_tile, 0)
            left = jax.lax.dynamic_slice(tiles, (0, dd - 1, 0, t - 1), (nt, 1, t, 1))[:, 0, :, 0]
            cj = jax.lax.dynamic_slice(ctiles, (dd, 0), (nt, t))
            new = finish(bulk, ti, tj, below, corner, left, ctiles[:nt], cj, dd * t,
                         weights, min_loop)
            tiles = jax.lax.dynamic_update_slice(tiles, new[:, None], (0, dd, 0, 0))
            # row-shifted copy of block (I, J): rows 1..T-1 of it, then row 0 of (I+1, J)
            next_row = jax.lax.dynamic_slice(tiles, (1, dd - 1, 0, 0), (nt, 1, 1, t))[:, 0]
            sh = jnp.concatenate([new[:, 1:], next_row], axis=1)
            shifted = jax.lax.dynamic_update_slice(shifted, sh[:, None], (dd, dd, 0, 0))
            return tiles, shifted

        hi = d1 if diagonals is None else jnp.clip(diagonals, d0, d1)
        tiles, shifted = jax.lax.fori_loop(d0, hi, block_diagonal, (tiles, shifted))
    return tiles[:nb]


def ragged_fill(codes: jax.Array, weights: jax.Array, length, min_loop, tile: int = 64,
                chunk: int = 4, diag_blocks: int = 1) -> jax.Array:
    """The tiles of :func:`blocked_fill` for a sequence of runtime ``length`` padded to any
    multiple of ``tile`` (``codes``), with ``min_loop`` a traced value too: one compiled
    program serves every length up to the padded one and every ``min_loop``.

    Only the ``nb = ceil(length / tile)`` tiles of the sequence are filled: block diagonal
    ``d`` (a ``lax`` loop up to ``nb``, a runtime bound) has ``nb - d`` tiles, done in chunks
    of ``chunk`` tiles (a loop of ``ceil((nb - d) / chunk)`` trips), each chunk's bulk a
    max-plus product over ``d - 1`` tile pairs (the XLA path). Tiles past the sequence stay
    ``NEG``. The cells ``N(i, j)``, ``j < length``, are those of :func:`blocked_fill`
    (integer maxima: exact, whatever the order).

    >>> from jaxrna.alphabet import encode
    >>> from jaxrna.weights import parse_weights
    >>> codes = np.full(64, 4, np.int8); codes[:18] = encode("GGGAAAUCCGGGAAAUCC")
    >>> t = ragged_fill(codes, parse_weights("unit").matrix(), 18, 3, tile=8)
    >>> int(blocked_score(t, 18))
    6
    """
    from jaxrna.kernels.tropical import maxplus_update_xla

    n = codes.shape[0]
    t, C = tile, chunk
    if n % t:
        raise ValueError(f"sequence length {n} is not a multiple of the tile size {t}")
    NB = n // t
    weights = jnp.asarray(weights, jnp.int32)
    length = jnp.asarray(length, jnp.int32)
    nb = jnp.clip((length + t - 1) // t, 1, NB)
    ctiles, tiles, shifted = _start_tiles(codes, weights, min_loop, t, C, diag_blocks)
    finish = jax.vmap(finish_tile, in_axes=(0, 0, 0, 0, 0, 0, 0, 0, None, None, None))
    lane = jnp.arange(C)

    def block_diagonal(dd, carry):
        nt = nb - dd                                   # tiles on this diagonal

        def one_chunk(c, carry):
            tiles, shifted = carry
            i0 = c * C

            def bulk_step(e1, acc):
                a = jax.lax.dynamic_slice(tiles, (i0, e1, 0, 0), (C, 1, t, t))[:, 0]
                b = jax.lax.dynamic_slice(shifted, (i0 + dd, dd - e1, 0, 0), (C, 1, t, t))[:, 0]
                return maxplus_update_xla(acc, a, b)

            bulk = jax.lax.fori_loop(1, dd, bulk_step, jnp.full((C, t, t), NEG, jnp.int32))
            ti = jax.lax.dynamic_slice(tiles, (i0, 0, 0, 0), (C, 1, t, t))[:, 0]
            tj = jax.lax.dynamic_slice(tiles, (i0 + dd, 0, 0, 0), (C, 1, t, t))[:, 0]
            below = jax.lax.dynamic_slice(tiles, (i0 + 1, dd - 1, 0, 0), (C, 1, 1, t))[:, 0, 0]
            corner_tile = jax.lax.dynamic_slice(
                tiles, (i0 + 1, jnp.maximum(dd - 2, 0), 0, t - 1), (C, 1, 1, 1))[:, 0, 0, 0]
            corner = jnp.where(dd >= 2, corner_tile, 0)
            left = jax.lax.dynamic_slice(tiles, (i0, dd - 1, 0, t - 1), (C, 1, t, 1))[:, 0, :, 0]
            ci = jax.lax.dynamic_slice(ctiles, (i0, 0), (C, t))
            cj = jax.lax.dynamic_slice(ctiles, (i0 + dd, 0), (C, t))
            new = finish(bulk, ti, tj, below, corner, left, ci, cj, dd * t, weights, min_loop)
            new = jnp.where((i0 + lane < nt)[:, None, None], new, NEG)
            tiles = jax.lax.dynamic_update_slice(tiles, new[:, None], (i0, dd, 0, 0))
            # row-shifted copy of block (I, J): rows 1..T-1 of it, then row 0 of (I+1, J)
            sh = jnp.concatenate([new[:, 1:], below[:, None]], axis=1)
            shifted = jax.lax.dynamic_update_slice(shifted, sh[:, None], (i0 + dd, dd, 0, 0))
            return tiles, shifted

        return jax.lax.fori_loop(0, (nt + C - 1) // C, one_chunk, carry)

    tiles, _ = jax.lax.fori_loop(1, nb, block_diagonal, (tiles, shifted))
    return tiles[:NB]


def blocked_score(tiles: jax.Array, length: int) -> jax.Array:
    """N(0, length - 1) from a tiled table (0 for length <= 1)."""
    if length <= 1:
        return jnp.int32(0)
    t = tiles.shape[-1]
    j = length - 1
    return tiles[0, j // t, 0, j % t]


def dense_table(tiles: np.ndarray, length: int) -> np.ndarray:
    """The square table ``N[i, j]`` (0 below the diagonal) of the first ``length`` positions."""
    tiles = np.asarray(tiles)
    nb, _, t, _ = tiles.shape
    n = nb * t
    out = np.zeros((n, n), dtype=np.int32)
    for i in range(nb):
        out[i * t:(i + 1) * t, i * t:] = tiles[i, :nb - i].transpose(1, 0, 2).reshape(t, -1)
    out = out[:length, :length]
    return np.triu(out)
