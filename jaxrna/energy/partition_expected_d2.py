"""The expected partition function of a probabilistic sequence with dangles 2, in JAX.

With dangles 2 (ViennaRNA's ``-d2``) every branch of a multiloop or of the exterior loop
reads the bases next to its pair: a branch (i, j) of type t costs ``mismatch_multi[t,
s(i-1), s(j+1)]`` (exterior: ``mismatch_exterior``, ``dangle5`` / ``dangle3`` where the
sequence ends, nothing for a branch that spans it), and the pair (i, j) closing a multiloop
``mismatch_multi[rt, s(j-1), s(i+1)]`` from inside. Two adjacent branches read each other's
bases, and two branches with one base between them both read it: over a probabilistic
sequence the expectation does not factor per branch. The tables of the multiloops are
therefore *conditioned* on the identities of the bases at their ends (each table a channel
per identity), and every base's probability enters once, where the recursion sums over it:

- ``P(i, j, t)``: the pair tables of :mod:`jaxrna.energy.partition_expected` (hairpins,
  interior loops: :func:`~jaxrna.energy.partition_expected_pairs.pair_rows`) without the pair's own
  probabilities (channels ``P1..P6``); the multiloop closed by (i, j) is
  ``sum_{x, y} q_{i+1}(x) q_{j-1}(y) w_close(t, y, x) U2(i+1, j-1 | a_t, x, y, b_t)``.
- ``U1(i, j | a, x, y, b)``, ``U2``: multiloop segments [i, j] with at least one / two
  branches, given ``a = s(i-1)`` and ``b = s(j+1)`` (read by the first / last branch) and
  ``x = s(i)``, ``y = s(j)`` (their probabilities left to the caller): 256 channels each.
  By the segment's last element: j unpaired (``U(i, j-1 | .., y', y)``, y' summed), or a
  branch (k, j): k = i (``P(i, j, (x, y))``), k > i with i..k-1 unpaired (``V`` below, and
  k = i + 1, which reads x), or k > i after a segment ``U1(i, k-1 | .., y', a_t)`` (the
  sum ``S``, shared by ``U1`` and ``U2``).
- ``V(i, j | y, b)``: one branch ending at j, after at least two unpaired bases from i
  (16 channels, a running sum over i).

The exterior loop is a prefix recursion ``F(k | s(k-1), s(k))`` (16 states, and 4 for the
prefix that ends the sequence, whose last branch has no 3' neighbour). Free energies in
dcal/mol, soft minima; the sweep and its outside pass are :mod:`jaxrna.energy.partition_sweep`
with its opt-in storage (issue 25: the gradient's memory): the segment split in chunks of
:data:`SPLIT_CHUNK` split points (a :class:`~jaxrna.energy.partition_sweep.Reduction`), the
tables stored by band (:data:`BANDED`), ``U2`` (256 channels, read by the next two diagonals
only) without a cotangent table, the exterior loop reading the six ``P`` channels alone:
the float64 tables and cotangents take ~4.5 kB per cell of the padded square (XLA's CPU
memory analysis of the value and gradient: 43 GB at 3,072 nt, against ~17.5 kB and 169 GB
before). A one-hot ``q`` gives :mod:`jaxrna.energy.partition`'s ``log Z`` with dangles 2.

>>> from jaxrna.energy.partition import x64
>>> from jaxrna.energy.partition_expected import expected_ensemble_energy, one_hot
>>> with x64():
...     round(float(expected_ensemble_energy(one_hot("GGGGAAACCCC"), dangles=2)), 4)
-4.8734
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.energy import partition_expected_pairs as px
from jaxrna.energy import partition_sweep
from jaxrna.energy.fill import skew
from jaxrna.energy.params import INF
from jaxrna.energy.partition import softmin
from jaxrna.energy.terms import ROW_PAD

LEFT = px.LEFT
#: Each type's 5' and 3' base (0..3 for A, C, G, U).
A_T = np.array([x - 1 for x, _ in px.TYPE_BASES])
B_T = np.array([y - 1 for _, y in px.TYPE_BASES])
#: The channels: the pair and interior-loop tables, ``P1..P6``, ``V`` (y, b), ``U1`` and
#: ``U2`` (a, x, y, b; a the slowest).
CHANNELS = (px.PAIR_CHANNELS + tuple(f"P{t}" for t in px.TYPES)
            + tuple(f"V{y}{b}" for y in range(4) for b in range(4))
            + tuple(f"U1_{k:03d}" for k in range(256)) + tuple(f"U2_{k:03d}" for k in range(256)))
P0 = len(px.PAIR_CHANNELS)
V0 = P0 + 6
U10 = V0 + 16
U20 = U10 + 256
_MASK_Y = np.where(B_T[:, None] == np.arange(4)[None, :], 0.0, float(INF))            # (t, y)
_MASK_XY = np.where((A_T[:, None, None] == np.arange(4)[None, :, None])
                    & (B_T[:, None, None] == np.arange(4)[None, None, :]), 0.0, float(INF))


def _smin(x, axis, beta):
    return -jax.nn.logsumexp(-beta * x, axis=axis) / beta


def _split_chunk(k, d, R, diff, fixed, height, width, *, chunk):
    """Chunk k of diagonal d's segment split: ``(a, x, y', t, L)``, the soft minimum over
    the split points e = k - 1 - i in ``[k chunk, (k + 1) chunk)`` (those up to d - 2) of a
    segment ``U1(i, i + e | a, x, y', a_t)`` (diagonal e) and the branch ``(i + e + 1, j)``
    of type t (diagonal d - 1 - e) with its probabilities ``q_{i+e}(y')``,
    ``q_{i+e+1}(a_t)``. Reads two windows (:meth:`~jaxrna.energy.partition_sweep.Reader.far`, any band's): ``chunk`` rows
    of ``U1`` and of ``P`` (the last chunk read from split point ``d - 1 - chunk``, its rows
    of the chunk before masked)."""
    beta = 10.0 / diff["dp"]["kT"]
    lq = px.energy(diff["q"], beta)
    L, c = height, chunk
    e0 = k * c
    start = jnp.minimum(e0, d - 1 - c)              # the window ends at split point d - 2
    es = start + jnp.arange(c)                                            # split points
    ok = ((es >= e0) & (es <= d - 2))[:, None]                            # (e, 1)
    u, _ = R.far((ROW_PAD + start, U10, 0), (c, 256, L), ROW_PAD + start + c - 1)
    u = jnp.where(ok[:, :, None], u, INF)                                 # (e, 256, L)
    u = jnp.swapaxes(u, 0, 1).reshape(4, 4, 4, 4, c, L)[:, :, :, A_T]    # (a, x, y', t, e, L)
    at = LEFT + es[:, None] + jnp.arange(L)[None, :]                      # base k - 1 = i + e
    q1 = jnp.moveaxis(lq[at], -1, 0)                                      # (y', e, L)
    q2 = jnp.moveaxis(lq[at + 1][:, :, A_T], -1, 0)                       # (t, e, L)
    # the branches (i + e + 1, j) on diagonals d - 1 - e: a window of c rows (diagonals
    # d - start - c .. d - start - 1, descending e) and L + c columns (from column 1 + start
    # or left of it), read at row d - 1 - e, column 1 + e + i
    r0 = ROW_PAD + d - start - c
    slab, c0 = R.far((r0, P0, 1 + start), (c, 6, L + c), r0 + c - 1)     # (row, t, column)
    rows = jnp.arange(c)[::-1]
    cols = jnp.clip(1 + es[:, None] + jnp.arange(L)[None, :] - c0, 0, L + c - 1)
    pk = slab[rows[None, :, None], jnp.arange(6)[:, None, None], cols[None, :, :]]
    pk = jnp.where(ok[None], pk, INF) + q2                                # (t, e, L)
    return _smin(u + q1[None, None, :, None] + pk[None, None, None], 4, beta)


#: The tables stored by band (:func:`jaxrna.energy.partition_sweep.layouts`).
BANDED = True
#: The segment split's chunk of split points (:func:`_split_chunk`): its temporaries are
#: O(chunk x 384 x height) floats per diagonal, forward and outside.
SPLIT_CHUNK = 32


def split_reduction(length: int, chunk: int | None = None) -> partition_sweep.Reduction:
    """The segment split as the sweep's chunked soft minimum, ``chunk`` split points each
    (default :data:`SPLIT_CHUNK`, at most ``length``).

    >>> r = split_reduction(64, 24)
    >>> int(r.count(4, 64)), int(r.count(25, 64)), int(r.count(26, 64)), r.max_count(64)
    (1, 1, 2, 3)
    """
    first = partition_sweep.bands(length)[:1]
    c = max(1, min(int(chunk or SPLIT_CHUNK), length - 1, ROW_PAD - 1,
                   *(d1 - 1 for _, d1 in first)))
    return partition_sweep.Reduction(
        chunk=functools.partial(_split_chunk, chunk=c),
        count=lambda d, width: (d - 2) // c + 1,            # split points 0 .. d - 2
        max_count=lambda width: max(1, -(-(width - 2) // c)),
        beta=lambda diff: 10.0 / diff["dp"]["kT"])


def _rows(d, R, diff, fixed, height, width, *, lr, reduced):
    """Every channel's row on diagonal d (cells i < ``height``): ``(len(CHANNELS),
    height)``; the tables are read as windows through ``R``
    (:class:`jaxrna.energy.partition_sweep.Reader`), the segment split (``reduced``) by
    :func:`_split_chunk` in the sweep's chunks."""
    qp, dp = diff["q"], diff["dp"]
    beta = 10.0 / dp["kT"]
    L = height
    lq = px.energy(qp, beta)                                    # -ln q / beta per base
    clip = px.clip

    def lqi(off):
        return lq[LEFT + off:LEFT + off + L]

    def lqj(off):
        return jax.lax.dynamic_slice(lq, (LEFT + d + off, 0), (L, 4))

    def read(dd, di, c0, k):
        return R.T((ROW_PAD + d + dd, c0, di), (1, k, L))[0]

    types = jnp.asarray(px.TYPES)
    au = jnp.where(types > 2, dp["terminal_au"], 0.0)
    mb = dp["ml_base"]
    wml = dp["mismatch_multi"][px.TYPES][:, 1:5, 1:5] + (dp["ml_intern"] + au)[:, None, None]
    wclose = (dp["mismatch_multi"][px.RT][:, 1:5, 1:5]
              + (dp["ml_closing"] + dp["ml_intern"] + au)[:, None, None])  # [t, s(j-1), s(i+1)]
    mask_y, mask_xy = jnp.asarray(_MASK_Y), jnp.asarray(_MASK_XY)

    def multi(row, block, lo, qi, qj, au_):
        u2 = read(-2, 1, U20, 256)                                          # (a x y b, L)
        u2 = u2.reshape(4, 4, 4, 4, L)[A_T, :, :, B_T]                    # (t, x, y, L)
        e = (u2 + lqi(1).T[None, :, None, :] + lqj(-1).T[None, None, :, :]
             + jnp.swapaxes(wclose, 1, 2)[:, :, :, None])
        return _smin(e.reshape(6, 16, L), 1, beta)

    c, new = px.pair_rows(d, R, diff, fixed, L, lr, multi, len(px.PAIR_CHANNELS))  # c: (6, L)
    # V(i, j | y, b): V(i + 1, j) + one unpaired base, or the branch (i + 2, j) reading s(i+1)
    p2 = read(-2, 2, P0, 6)
    e = (p2[:, None, None, :] + lqi(2)[:, A_T].T[:, None, None, :]
         + lqi(1).T[None, :, None, :] + wml[:, :, :, None])              # (t, z, b, L)
    e = _smin(e, 1, beta)                                                 # (t, b, L)
    term = _smin(e[:, None] + mask_y[:, :, None, None], 0, beta)         # (y, b, L)
    v_new = clip(softmin([read(-1, 1, V0, 16).reshape(4, 4, L) + mb, term + 2 * mb], beta))
    # U: the last element a branch (i + 1, j) reading x = s(i), or (i, j) itself
    p1 = read(-1, 1, P0, 6)
    e1 = p1[:, None, None, :] + lqi(1)[:, A_T].T[:, None, None, :] + wml[:, :, :, None]
    b1 = _smin(e1[:, None] + mask_y[:, :, None, None, None], 0, beta)    # (y, x, b, L)
    b1 = jnp.swapaxes(b1, 0, 1) + mb                                      # (x, y, b, L)
    a2 = _smin(c[:, None, None, None, None, :] + wml[:, :, None, None, :, None]
               + mask_xy[:, None, :, :, None, None], 0, beta)            # (a, x, y, b, L)
    # S: a segment U1(i, k-1 | a, x, y', a_t) then the branch (k, j) reading y' and b;
    # ``reduced`` (a, x, y', t, L): the soft minimum over the split point of the segment and
    # the branch, in chunks (:func:`_split_chunk`, the sweep's :class:`Reduction`)
    z = (reduced[:, :, :, :, None, None, :]
         + jnp.swapaxes(wml, 0, 1)[None, None, :, :, None, :, None]
         + mask_y[None, None, None, :, :, None, None])                    # (a, x, y', t, y, b, L)
    s = clip(_smin(z, (2, 3), beta))                                      # (a, x, y, b, L)
    out = []
    for c0 in (U10, U20):
        prev = read(-1, 0, c0, 256).reshape(4, 4, 4, 4, L)                # (a, x, y', b' = y)
        last = _smin(prev + lqj(-1).T[None, None, :, None, :], 2, beta) + mb   # (a, x, y, L)
        cands = [jnp.broadcast_to(last[:, :, :, None], (4, 4, 4, 4, L)), s]
        if c0 == U10:
            cands += [a2, jnp.broadcast_to(b1[None], (4, 4, 4, 4, L)),
                      jnp.broadcast_to(v_new[None, None], (4, 4, 4, 4, L))]
        out.append(clip(softmin(cands, beta)).reshape(256, L))
    rows_out = [new[name][None] for name in px.PAIR_CHANNELS]
    rows_out += [c, v_new.reshape(16, L)] + out
    return jnp.concatenate(rows_out).astype(R.dtype)


def _exterior(T, q, dp, n, length):
    """``-ln E[Z] / beta`` (dcal/mol): the exterior loop's prefix recursion over the pair
    tables ``T`` (the channels ``P1..P6``); ``n`` (may be traced) the sequence's length."""
    beta = 10.0 / dp["kT"]
    L = length
    lq = px.energy(q, beta)
    lqr = lq[LEFT:LEFT + L]                                                # (i, 4)
    lqa = lqr[:, A_T]                                                      # (i, t)
    lqp = lq[LEFT - 1:LEFT - 1 + L]                                        # base i - 1
    j = jnp.arange(L)[:, None]
    i = jnp.arange(L)[None, :]
    rows = jnp.clip(ROW_PAD + j - i, 0, ROW_PAD + L - 1)
    pe = T[rows[..., None], jnp.arange(6)[None, None, :], i[..., None]]   # (j, i, t)
    pe = jnp.where((j >= i)[..., None], pe, INF) + lqa[None]
    types = jnp.asarray(px.TYPES)
    au = jnp.where(types > 2, dp["terminal_au"], 0.0)
    mx = dp["mismatch_exterior"][px.TYPES][:, 1:5, 1:5] + au[:, None, None]  # (t, 5', 3')
    d5 = dp["dangle5"][px.TYPES][:, 1:5] + au[:, None]
    d3 = dp["dangle3"][px.TYPES][:, 1:5] + au[:, None]
    mask_y = jnp.asarray(_MASK_Y)
    dtype = q.dtype

    def step(k, carry):             # the prefix of k + 1 bases from that of k and shorter
        F, Fe = carry
        fu = _smin(F[k] + lqr[k - 1][:, None], 0, beta)                    # k unpaired: (y,)
        base = pe[k]                                                       # branches (i, k)
        f0 = _smin(base[0][:, None, None] + d3[:, None, :] + mask_y[:, :, None], 0, beta)
        fe0 = _smin(base[0][:, None] + au[:, None] + mask_y, 0, beta)
        g = _smin(F[:L][:, :, A_T] + lqp[:, :, None] + base[:, None, :], 0, beta)   # (y'', t)
        fb = _smin(g[:, :, None, None] + jnp.swapaxes(mx, 0, 1)[:, :, None, :]
                   + mask_y[None, :, :, None], (0, 1), beta)               # (y, b)
        feb = _smin(g[:, :, None] + d5.T[:, :, None] + mask_y[None], (0, 1), beta)
        f_new = px.clip(softmin([jnp.broadcast_to(fu[:, None], (4, 4)), f0, fb], beta))
        fe_new = px.clip(softmin([fu, fe0, feb], beta))
        return F.at[k + 1].set(f_new), Fe.at[k + 1].set(fe_new)

    F = jnp.full((L + 1, 4, 4), INF, dtype).at[1].set(0.0)
    Fe = jnp.full((L + 1, 4), INF, dtype).at[1].set(0.0)
    F, Fe = jax.lax.fori_loop(1, L, step, (F, Fe))
    last = jax.lax.dynamic_index_in_dim(lq, LEFT + n - 1, keepdims=False)
    return _smin(jax.lax.dynamic_index_in_dim(Fe, n, keepdims=False) + last, 0, beta)


def expected_log_partition_d2(q, allowed, dp, spec, length, n, pair_bonus=None,
                              outside: bool = True):
    """``ln sum_S P(S) Z(S)`` with dangles 2 of one padded probabilistic sequence (arguments
    as :func:`jaxrna.energy.partition_expected.expected_log_partition`; ``n`` the number of
    positions, may be traced)."""
    dp = jax.tree.map(jnp.asarray, dp)
    beta = 10.0 / dp["kT"]
    corr = px.specials_hairpin(q, spec, dp, beta, length)
    bonus = jnp.zeros((length, length), q.dtype) if pair_bonus is None else pair_bonus
    bonus = skew(bonus.astype(q.dtype))

    def rows_fn(d, R, diff, fixed, height, width, reduced):
        return _rows(d, R, diff, fixed, height, width, lr=px.split_1n(), reduced=reduced)

    run = partition_sweep.sweep if outside else partition_sweep.forward
    diff = {"q": q, "dp": dp, "corr": corr, "bonus": bonus}
    # U2 is read by the next two diagonals only (its cotangents kept for three); the exterior
    # loop reads P alone (the cotangent coming in is P's)
    T, _ = run(rows_fn, length, len(CHANNELS), 0, diff, {"allowed": jnp.asarray(allowed)}, INF,
               ("bonus",), split_reduction(length), (U20, 2), (P0, P0 + 6), BANDED)
    return -_exterior(T, q, dp, jnp.asarray(n, jnp.int32), length) * beta
