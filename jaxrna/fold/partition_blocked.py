"""The partition function and pair probabilities on Li et al.'s tile schedule: the bulk of
every split sum is a real matrix product (float64 GEMM), only thin in-tile sweeps stay in
log space.

Tables (``Z``, ``P`` of :mod:`jaxrna.fold.partition`; ``Zbar``, ``Pbar`` of
:mod:`jaxrna.fold.outside`) are dense ``(Np, Np)`` log-space arrays (``Np`` = n + 1 rounded
up to the tile side ``t``, stored with a margin of ``t`` on each side), cut into ``t x t``
tiles. Tiles on one block diagonal ``D`` (tile ``(I, I + D)``) are independent:

* **inside**, ``D`` ascending. Diagonal tiles are the exact sweep on a window. For ``D >= 1``
  the splits ``k`` in the tiles strictly between ``I`` and ``J`` form one product
  ``Z[I, middle] (x) P[middle, J]`` (:func:`logmatmul_balanced`), then :func:`finish_inside`
  adds the splits in tiles ``I`` and ``J`` and the ``j - 1 unpaired`` term in ``2t - 1``
  steps over the tile's diagonals.
* **outside**, ``D`` descending, ``D = 0`` included. :func:`finish_outside` completes a tile
  of ``Zbar`` and ``Pbar`` from its accumulated bulk; then the tile *pushes* its products to
  the tiles that need it (``Zbar[I, J] (x) P[J2, J]^T`` into the bulk of ``Zbar`` left of it,
  ``Z[I, K]^T (x) Zbar[I, J]`` into the bulk of ``Pbar`` below it): each push is as wide as
  ``D`` tiles, so no work is wasted on ragged rows.

Log-space products as real matrix products. ``log(exp(A) @ exp(B))`` is computed as
``shift + log(exp(A - a) @ exp(B - b))`` with the shifts chosen so that no term that matters
underflows:

* inside, the contraction runs over many tiles: :func:`logmatmul_balanced` shifts each
  contraction column ``k`` by ``c_k = max_i A[i, k]`` (``= ln Z[I*t, k]``, ``Z`` decreasing
  in ``i``) and each output column by ``max_k B[k, j] + c_k``. Row ``i`` of the result is
  then exact to ``exp(Delta - 700)`` relative, ``Delta`` the log-range of ``Z`` within one
  tile;
* outside pushes contract over one tile only, so :func:`logmatmul` (row max of ``A``, column
  max of ``B``) suffices: every neglected term is below ``exp(Delta - 700)`` in probability
  units.

``Delta`` grows with the tile side and falls with the temperature (about ``t`` times the
per-nucleotide growth of ``ln Z``: tens of nats at T = 1). :func:`blocked_inside` returns it
as ``guard``; :func:`jaxrna.fold.partition.partition` falls back to the exact path when it
exceeds :data:`~jaxrna.fold.partition.GUARD_LIMIT_F64` (float64; float32 underflows ~9
times sooner, so the GPU path runs in float64 too).

>>> import numpy as np
>>> from jaxrna.fold.partition import float64, masked_log_weights, pair_score_matrix
>>> from jaxrna.alphabet import encode
>>> from jaxrna.weights import parse_weights
>>> with float64():
...     s = pair_score_matrix(encode("GGGAAAUCCGCGCAAAGCGCAUAUGGC"),
...                           parse_weights("unit").matrix().astype(np.float64), 3)
...     lw = masked_log_weights(s, 1.0, 3)
...     lnz, guard, res = blocked_inside(lw, 8)
...     P = blocked_outside(lw, res, lnz, 8)
...     print(round(float(lnz), 6), round(float(P[0, 26]), 6))     # as the exact path
15.803043 0.311253
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.fold.inside import (inside_from_skew, range_blocks, runtime_length, skew_pair_weights,
                                skew_size)
from jaxrna.semiring import NEG_FLOAT, log_semiring

_SR = log_semiring(1.0)
#: Block diagonals are compiled in at most this many groups (static tile counts and widths
#: each: more groups waste less work on padding tiles but compile longer).
GROUPS = 8


def _group_count(nb: int, groups: int | None) -> int:
    return groups if groups else max(1, min(GROUPS, nb // 4))
_HI = jax.lax.Precision.HIGHEST


def blocked_bytes(n: int, tile: int) -> int:
    """Peak memory of the blocked inside + outside for length ``n`` (float64): ten dense
    tables with their margins and a few more for the widest bulk product."""
    side = -(-(n + 1) // tile) * tile + 2 * tile
    return 8 * 14 * side * side


def _safe(x):
    return jnp.where(x > NEG_FLOAT / 2, x, jnp.zeros((), x.dtype))


def _lse(*xs):
    return _SR.sum(jnp.stack(xs), axis=0)


def logmatmul(a: jax.Array, b: jax.Array) -> jax.Array:
    """``log(exp(a) @ exp(b))`` over the last two axes as ``rowmax(a) + colmax(b) +
    log(exp(a - rowmax) @ exp(b - colmax))``; exact while each dominant term is within ~700
    nats (float64) of its row's and column's maxima. Zeros (``NEG_FLOAT``) stay zeros.

    >>> import jax.numpy as jnp
    >>> a = jnp.log(jnp.array([[1.0, 2.0], [3.0, 4.0]]))
    >>> jnp.exp(logmatmul(a, a)).round(4).tolist()
    [[7.0, 10.0], [15.0, 22.0]]
    """
    ra = _safe(jnp.max(a, axis=-1, keepdims=True))
    cb = _safe(jnp.max(b, axis=-2, keepdims=True))
    acc = jnp.matmul(jnp.exp(a - ra), jnp.exp(b - cb), precision=_HI)
    out = jnp.log(jnp.where(acc > 0, acc, 1.0)) + ra + cb
    return jnp.where(acc > 0, out, jnp.asarray(NEG_FLOAT, a.dtype))


def logmatmul_balanced(a: jax.Array, b: jax.Array) -> jax.Array:
    """``log(exp(a) @ exp(b))`` with each contraction index ``k`` balanced by ``c_k =
    max_i a[i, k]`` and each output column by ``max_k b[k, j] + c_k``: long contractions whose
    terms trade a growing ``a`` against a shrinking ``b`` stay exact.

    >>> import jax.numpy as jnp
    >>> a = jnp.array([[0.0, 800.0], [-5.0, 795.0]])     # rows of one tile, close together
    >>> b = jnp.array([[800.0], [0.0]])                  # the growing row meets a falling column
    >>> [round(float(v) - 800.0, 3) for v in logmatmul_balanced(a, b)[:, 0]]
    [0.693, -4.307]
    >>> bool(logmatmul(a, b)[0, 0] < -1e29)               # plain maxima: both terms underflow
    True
    """
    c = _safe(jnp.max(a, axis=-2, keepdims=True))                    # (..., 1, K)
    ah = jnp.exp(a - c)
    bc = b + jnp.swapaxes(c, -1, -2)                                   # (..., K, N)
    cmax = _safe(jnp.max(bc, axis=-2, keepdims=True))                  # (..., 1, N)
    acc = jnp.matmul(ah, jnp.exp(bc - cmax), precision=_HI)
    out = jnp.log(jnp.where(acc > 0, acc, 1.0)) + cmax
    return jnp.where(acc > 0, out, jnp.asarray(NEG_FLOAT, a.dtype))


_GDN = jax.lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(),
                                      start_index_map=(0, 1))
_SDN = jax.lax.ScatterDimensionNumbers(update_window_dims=(1, 2), inserted_window_dims=(),
                                       scatter_dims_to_operand_dims=(0, 1))


def _take(a, rows, cols, h, w):
    """Windows ``a[rows[b] : rows[b] + h, cols[b] : cols[b] + w]`` (starts must be in range)."""
    starts = jnp.stack([rows, cols], axis=1)
    return jax.lax.gather(a, starts, _GDN, (h, w), mode=jax.lax.GatherScatterMode.CLIP)


def _put(a, rows, cols, vals):
    """Write windows back (as :func:`_take`; windows must not overlap, except identical ones)."""
    starts = jnp.stack([rows, cols], axis=1)
    return jax.lax.scatter(a, starts, vals, _SDN, mode=jax.lax.GatherScatterMode.CLIP)


def _add(a, rows, cols, vals):
    """Add windows into ``a`` (as :func:`_put`; overlapping windows add up)."""
    starts = jnp.stack([rows, cols], axis=1)
    return jax.lax.scatter_add(a, starts, vals, _SDN, mode=jax.lax.GatherScatterMode.CLIP)


def _layout(n: int, t: int) -> tuple[int, int, int]:
    nb = -(-(n + 1) // t)
    return nb, nb * t, nb * t + 2 * t


def _diagonal_tile(win: jax.Array) -> jax.Array:
    """``Zd[r, c] = ln Z[I*t + r, I*t + c]`` of one window of ``t - 1`` positions."""
    m = win.shape[0]
    t = m + 1
    rows = inside_from_skew(skew_pair_weights(win, _SR, 0, skew_size(m, 1)), m, _SR, 1)
    r = jnp.arange(t)[:, None]
    c = jnp.arange(t)[None, :]
    return jnp.where(c >= r, rows[jnp.clip(c - r, 0, t - 1), r], NEG_FLOAT)


def finish_inside(x: jax.Array, lpx: jax.Array, zdi: jax.Array, pdj: jax.Array) -> jax.Array:
    """Complete tile ``(I, J)`` (``J > I``) of ``ln Z`` given the bulk.

    ``x[r, c] = ln Z[I*t + r, J*t + c - 1]`` (``(t + 1, t + 1)``): column 0 and row ``t`` are
    the finished neighbours, the rest holds the bulk (splits in the tiles between). ``lpx``:
    the pair weights ``lw[k, j - 1]`` at the same places, ``zdi`` the diagonal tile ``I`` of
    ``Z``, ``pdj`` that of ``P`` for ``J``. Cell ``(r, c)`` adds ``Z[i, j-1]``, the splits
    ``k`` in tile ``I`` (``zdi[r, p] + lpx[p, c] + x[p+1, c-1]``) and in tile ``J``
    (``x[r, q+1] + pdj[q, c-1]``); cells are done a tile diagonal ``s = c - r`` at a time,
    each sum one elementwise reduction over a window of padded copies.
    """
    t = zdi.shape[0]
    neg = jnp.asarray(NEG_FLOAT, x.dtype)
    xp = jnp.full((t + 1, 3 * t + 1), neg).at[:, t:2 * t + 1].set(x)       # xp[r, t+c] = x[r, c]
    xt = x.T                                                               # xt[c, r] = x[r, c]
    lpp = jnp.full((t + 1, 3 * t + 1), neg).at[:, t:2 * t + 1].set(lpx)
    pdp = jnp.full((t, 3 * t), neg).at[:, t:2 * t].set(pdj)                # pdp[q, t+c] = pdj[q, c]
    r = jnp.arange(t)
    zit = jnp.where(r[:, None] >= r[None, :], zdi.T, neg)                  # zit[p, r] = zdi[r, p]

    def step(s, carry):
        xp, xt = carry
        c = r + s
        valid = (c >= 1) & (c <= t)
        cc = jnp.clip(c, 1, t)
        lp_w = jax.lax.dynamic_slice(lpp, (0, t + s), (t, t))              # [p, r] = lpx[p, c]
        x_w = jax.lax.dynamic_slice(xp, (1, t + s - 1), (t, t))            # [p, r] = x[p+1, c-1]
        part_i = _SR.sum(zit + lp_w + x_w, axis=0)
        across = jax.lax.dynamic_slice(pdp, (0, t + s - 1), (t, t))        # [q, r] = pdj[q, c-1]
        part_j = _SR.sum(xt[1:t + 1, :t] + across, axis=0)                 # xt[q+1, r] = x[r, q+1]
        prev = xp[r, t + cc - 1]
        old = xp[r, t + cc]
        val = jnp.where(valid, _lse(old, prev, part_i, part_j), old)
        return xp.at[r, t + cc].set(val), xt.at[cc, r].set(val)

    xp, _ = jax.lax.fori_loop(2 - t, t + 1, step, (xp, xt))
    return xp[:, t:2 * t + 1]


def _runtime_tiles(length, n: int, t: int):
    """``(m, nbr)``: the sequence's own length (``n`` where ``length`` is None) and the tile
    count it needs, ``ceil((m + 1) / t)`` (a runtime value where ``length`` is one)."""
    m = n if length is None else runtime_length(length)
    return m, (m + t) // t


def _chunked(carry, count, nt: int, chunk: int | None, body):
    """Run ``body(ids, carry)`` over the ``count`` (runtime) tiles of one block diagonal,
    ``chunk`` at a time (``ids``: the chunk's tile numbers; None or >= ``nt``: all ``nt`` at
    once, in one step)."""
    if not chunk or chunk >= nt:
        return body(jnp.arange(nt), carry)
    steps = (count + chunk - 1) // chunk
    return jax.lax.fori_loop(0, steps, lambda q, c: body(q * chunk + jnp.arange(chunk), c),
                             carry)


@partial(jax.jit, static_argnames=("tile", "groups", "chunk"))
def blocked_inside(lw: jax.Array, tile: int = 32, groups: int | None = None, length=None,
                   chunk: int | None = None):
    """``(ln Z, guard, tables)`` for the ``(n, n)`` masked log pair weights ``lw``
    (:func:`jaxrna.fold.partition.masked_log_weights`). ``tables`` (for
    :func:`blocked_outside`) are dense, with their margins: ``Z``, ``P``, ``LP`` (``LP[k, j] =
    lw[k, j - 1]``) in log space and ``ZL``, each off-diagonal tile of ``Z`` in linear space
    divided by its first row (the bulk products' left factors). ``guard`` is the largest
    log-range of ``Z`` within one off-diagonal tile.

    ``length``: the sequence's own length ``m <= n`` as a runtime value (positions from ``m``
    on are padding that never pairs): only the tiles up to the one holding column ``m`` are
    computed, ``ln Z = Z[0, m]``. ``chunk``: tiles of one block diagonal done at a time (a loop
    over as many chunks as the runtime length needs; None: every tile of the padded length in
    one step)."""
    n = lw.shape[0]
    t = tile
    nb, Np, S = _layout(n, t)
    m, nbr = _runtime_tiles(length, n, t)
    o = t
    dtype = lw.dtype
    neg = jnp.asarray(NEG_FLOAT, dtype)
    lp = jnp.full((S, S), neg).at[o:o + n, o + 1:o + 1 + n].set(lw)
    lwpad = jnp.full((Np + t, Np + t), neg).at[:n, :n].set(lw)
    starts = jnp.arange(nb) * t
    wins = jax.vmap(lambda s: jax.lax.dynamic_slice(lwpad, (s, s), (t - 1, t - 1)))(starts)
    zd = jax.vmap(_diagonal_tile)(wins)                                      # (nb, t, t)
    zshift = jnp.pad(zd, ((0, 0), (0, 1), (1, 0)), constant_values=NEG_FLOAT)[:, 1:, :t]
    pd = _take(lp, o + starts, o + starts, t, t) + zshift                    # P[k, j] diag tiles
    Z = _put(jnp.full((S, S), neg), o + starts, o + starts, zd)
    P = _put(jnp.full((S, S), neg), o + starts, o + starts, pd)
    ZL = jnp.zeros((S, S), dtype)
    guard = jnp.zeros((), dtype)
    finish = jax.vmap(finish_inside)
    for d0, d1 in range_blocks(1, nb, _group_count(nb, groups)):
        nt = nb - d0
        width = (d1 - 2) * t                                                 # widest bulk

        def tiles(ids, carry, D, width=width):
            Z, P, ZL, guard = carry
            ie = jnp.minimum(ids, nbr - 1 - D)                               # clamped copies
            r0 = o + ie * t
            c0 = o + (ie + D) * t
            x = _take(Z, r0, c0 - 1, t + 1, t + 1)
            if width > 0:
                # splits k between the tiles: sum_k Z[i, k] P[k, j], balanced by c_k = Z[I*t, k]
                k0 = jnp.clip(r0 + t, 0, S - width)                          # as the gather clamps
                k = k0[:, None] + jnp.arange(width)[None, :]
                keep = (k >= (r0 + t)[:, None]) & (k < c0[:, None])
                ahat = jnp.where(keep[:, None, :], _take(ZL, r0, k0, t, width), 0.0)
                c = _take(Z, r0, k0, 1, width)[:, 0, :]
                bc = jnp.where(keep[:, :, None], _take(P, k0, c0, width, t) + c[:, :, None], neg)
                cmax = _safe(jnp.max(bc, axis=1, keepdims=True))
                acc = jnp.matmul(ahat, jnp.exp(bc - cmax), precision=_HI)
                bulk = jnp.where(acc > 0, jnp.log(jnp.where(acc > 0, acc, 1.0)) + cmax, neg)
                x = x.at[:, :t, 1:].set(bulk)
            lpx = _take(lp, r0, c0 - 1, t + 1, t + 1)
            xf = finish(x, lpx, _take(Z, r0, r0, t, t), _take(P, c0, c0, t, t))
            zt = xf[:, :t, 1:]
            pt = lpx[:, :t, 1:] + xf[:, 1:, :t]
            spread = jnp.maximum(jnp.max(zt[:, 0, :] - zt[:, t - 1, :]),
                                 jnp.max(zt[:, :, t - 1] - zt[:, :, 0]))
            return (_put(Z, r0, c0, zt), _put(P, r0, c0, pt),
                    _put(ZL, r0, c0, jnp.exp(zt - zt[:, :1, :])), jnp.maximum(guard, spread))

        def block_diagonal(D, carry, nt=nt, tiles=tiles):
            return _chunked(carry, nbr - D, nt, chunk, partial(tiles, D=D))

        hi = d1 if length is None else jnp.clip(nbr, d0, d1)
        Z, P, ZL, guard = jax.lax.fori_loop(d0, hi, block_diagonal, (Z, P, ZL, guard))
    return Z[o, o + m], guard, (Z, P, lp, ZL)


def finish_outside(yb, pbx, lwc, zdi, pdj, root, offset, root_col=None):
    """Complete tile ``(I, J)`` of ``ln Zbar`` and ``ln Pbar`` given their bulk.

    ``yb[r, c] = ln Zbar[I*t + r - 1, J*t + c]`` and ``pbx`` likewise for ``Pbar``
    (``(t + 1, t + 1)``): row 0 and column ``t`` are the finished neighbours, the rest holds
    the accumulated pushes. ``lwc[r - 1, c] = lw[i - 1, j]`` for cell ``(r, c)``; ``zdi``,
    ``pdj`` the diagonal tiles of ``Z`` (``I``) and ``P`` (``J``); ``root`` marks the tile
    holding ``Zbar[0, m] = 1``, in its column ``root_col`` (default ``t - 1``); ``offset = (J -
    I) * t``. Cells go by decreasing tile diagonal;
    on each, ``Zbar`` first, then ``Pbar``, whose ``i = k`` term is that same ``Zbar``.
    """
    t = zdi.shape[0]
    dtype = yb.dtype
    neg = jnp.asarray(NEG_FLOAT, dtype)
    ybp = jnp.full((t + 1, 3 * t + 1), neg).at[:, t:2 * t + 1].set(yb)     # ybp[r, t+c] = yb[r, c]
    pbp = jnp.full((t + 1, 3 * t + 1), neg).at[:, t:2 * t + 1].set(pbx)
    pdp = jnp.full((3 * t, t), neg).at[t:2 * t, :].set(pdj)                # pdp[t+a, b] = pdj[a, b]
    r = jnp.arange(1, t + 1)
    root_col = t - 1 if root_col is None else root_col

    def step(k, carry):
        ybp, pbp = carry
        u = t - 2 - k
        c = r + u
        valid = (c >= 0) & (c <= t - 1) & (offset + c - r + 1 >= 1)
        cc = jnp.clip(c, 0, t - 1)
        t1 = ybp[r, t + cc + 1]                                             # Zbar[i, j+1]
        rows_p = jax.lax.dynamic_slice(pdp, (t + u + 1, 0), (t, t))          # [r-1, c'] = pdj[c, c']
        t2 = _SR.sum(ybp[1:, t:2 * t] + rows_p, axis=1)
        t3 = lwc[r - 1, cc] + pbp[r - 1, t + cc + 1]                         # w(i-1, j) Pbar[i-1, j+1]
        seed = jnp.where(root & (r == 1) & (cc == root_col), jnp.zeros((), dtype), neg)
        old = ybp[r, t + cc]
        z = jnp.where(valid, _lse(old, t1, t2, t3, seed), old)
        ybp = ybp.at[r, t + cc].set(z)
        yw = jax.lax.dynamic_slice(ybp, (1, t + u + 1), (t, t))              # [r'-1, r-1] = yb[r', c]
        pb = _SR.sum(yw + zdi, axis=0)
        oldp = pbp[r, t + cc]
        p = jnp.where(valid, _lse(oldp, pb), oldp)
        return ybp, pbp.at[r, t + cc].set(p)

    ybp, pbp = jax.lax.fori_loop(0, 2 * t - 1, step, (ybp, pbp))
    return ybp[:, t:2 * t + 1], pbp[:, t:2 * t + 1]


def _row_normalised(P: jax.Array, t: int, o: int, nb: int):
    """``(exp(P - m), m)``: ``m[k, j]`` the maximum of row ``k`` of ``P`` over the tile of
    columns holding ``j`` (0 where the row is all zero)."""
    S = P.shape[0]
    inner = P[:, o:o + nb * t].reshape(S, nb, t)
    m = _safe(jnp.max(inner, axis=2, keepdims=True))
    m = jnp.broadcast_to(m, (S, nb, t)).reshape(S, nb * t)
    m = jnp.zeros_like(P).at[:, o:o + nb * t].set(m)
    return jnp.where(P > NEG_FLOAT / 2, jnp.exp(P - m), 0.0), m


@partial(jax.jit, static_argnames=("tile", "groups", "chunk"))
def blocked_outside(lw: jax.Array, res, lnz: jax.Array, tile: int = 32,
                    groups: int | None = None, length=None,
                    chunk: int | None = None) -> jax.Array:
    """The ``(n, n)`` pair probabilities from :func:`blocked_inside`'s tables.

    The pushes accumulate in linear space in probability units: the bulk of ``Zbar[i, j]``
    times ``Z[i, j] / Z`` (the probability that the derivation passes through ``Z[i, j]``,
    at most 1) and the bulk of ``Pbar[k, j]`` times ``P[k, j] / Z`` (at most the probability
    of the pair); contributions below ~1e-308 in those units are dropped. ``length``,
    ``chunk``: as :func:`blocked_inside` (the root is ``Zbar[0, m]``, tiles beyond it skipped).
    """
    n = lw.shape[0]
    t = tile
    nb, Np, S = _layout(n, t)
    m, nbr = _runtime_tiles(length, n, t)
    root_col = m - (nbr - 1) * t
    o = t
    Z, P, lp, ZL = res
    dtype = Z.dtype
    neg = jnp.asarray(NEG_FLOAT, dtype)
    PL, PM = _row_normalised(P, t, o, nb)
    ZB = jnp.full((S, S), neg)
    PB = jnp.full((S, S), neg)
    AZ = jnp.zeros((S, S), dtype)
    AP = jnp.zeros((S, S), dtype)
    finish = jax.vmap(finish_outside, in_axes=(0, 0, 0, 0, 0, 0, None, None))

    def to_log(acc, scale):
        ok = (acc > 0) & (scale > NEG_FLOAT / 2)
        return jnp.where(ok, jnp.log(jnp.where(ok, acc, 1.0)) + lnz - scale, neg)

    cap = 0.95 * float(np.log(np.finfo(dtype).max))                     # exp() stays finite

    def to_units(acc, arg, keep):
        ok = keep & (acc > 0)
        return jnp.where(ok, acc * jnp.exp(jnp.minimum(arg, cap)), 0.0)

    for d0, d1 in reversed(range_blocks(0, nb, _group_count(nb, groups))):
        nt = nb - d0
        width = (d1 - 1) * t                                                 # widest push

        def tiles(ids, carry, D, width=width):
            ZB, PB, AZ, AP = carry
            ie = jnp.minimum(ids, nbr - 1 - D)
            real = (ids < nbr - D)[:, None]                                  # not a clamped copy
            r0 = o + ie * t
            c0 = o + (ie + D) * t
            bz = to_log(_take(AZ, r0, c0, t, t), _take(Z, r0, c0, t, t))
            bp = to_log(_take(AP, r0, c0, t, t), _take(P, r0, c0, t, t))
            yb = _take(ZB, r0 - 1, c0, t + 1, t + 1).at[:, 1:, :t].set(bz)
            pbx = _take(PB, r0 - 1, c0, t + 1, t + 1).at[:, 1:, :t].set(bp)
            lwc = _take(lp, r0 - 1, c0 + 1, t, t)
            root = (ie == 0) & (ie + D == nbr - 1)
            ybf, pbf = finish(yb, pbx, lwc, _take(Z, r0, r0, t, t), _take(P, c0, c0, t, t),
                              root, D * t, root_col)
            zbt = ybf[:, 1:, :t]
            ZB = _put(ZB, r0, c0, zbt)
            PB = _put(PB, r0, c0, pbf[:, 1:, :t])
            if width > 0:
                # Zbar[I, J] (x) P[J2, J]^T into the bulk of Zbar[I, J2], J2 = I .. J-1
                j0 = jnp.clip(r0, 0, S - width)
                j2 = j0[:, None] + jnp.arange(width)[None, :]
                keep = real & (j2 >= r0[:, None]) & (j2 < c0[:, None])
                ra = _safe(jnp.max(zbt, axis=2, keepdims=True))
                acc = jnp.matmul(jnp.exp(zbt - ra),
                                 jnp.swapaxes(_take(PL, j0, c0, width, t), 1, 2), precision=_HI)
                cb = jnp.swapaxes(_take(PM, j0, c0, width, 1), 1, 2)
                arg = ra + cb + _take(Z, r0, j0, t, width) - lnz
                AZ = _add(AZ, r0, j0, to_units(acc, arg, keep[:, None, :]))
                # Z[I, K]^T (x) Zbar[I, J] into the bulk of Pbar[K, J], K = I+1 .. J
                k0 = jnp.clip(r0 + t, 0, S - width)
                kk = k0[:, None] + jnp.arange(width)[None, :]
                keep = real & (kk >= (r0 + t)[:, None]) & (kk < (c0 + t)[:, None])
                cz = _safe(jnp.max(zbt, axis=1, keepdims=True))
                acc = jnp.matmul(jnp.swapaxes(_take(ZL, r0, k0, t, width), 1, 2),
                                 jnp.exp(zbt - cz), precision=_HI)
                rz = jnp.swapaxes(_take(Z, r0, k0, 1, width), 1, 2)        # Z[I*t, k]
                pw = _take(P, k0, c0, width, t)
                arg = rz + cz + pw - lnz
                AP = _add(AP, k0, c0, to_units(acc, arg, keep[:, :, None] & (pw > NEG_FLOAT / 2)))
            return ZB, PB, AZ, AP

        top = d1 if length is None else jnp.clip(nbr, d0, d1)

        def block_diagonal(step, carry, nt=nt, tiles=tiles, top=top):
            D = top - 1 - step
            return _chunked(carry, nbr - D, nt, chunk, partial(tiles, D=D))

        ZB, PB, AZ, AP = jax.lax.fori_loop(0, top - d0, block_diagonal, (ZB, PB, AZ, AP))
    logp = PB[o:o + n, o + 1:o + 1 + n] + P[o:o + n, o + 1:o + 1 + n] - lnz
    k = jnp.arange(n)
    return jnp.where(k[None, :] > k[:, None], jnp.exp(logp), jnp.zeros((), dtype))
