"""The three-state Gotoh recurrence for any array of cells, and one rectangle's antidiagonal sweep.

The lowest layer of alignment: :mod:`jaxrna.kernels.wavefront` (pure-JAX batches and Pallas
kernels), :mod:`jaxrna.kernels.wavefront_packed` and :mod:`jaxrna.align` build on it; it
imports no algorithm package. :func:`cell` is the recurrence of :mod:`jaxrna.align.reference`,
tie rules included (the Pallas kernels call it too). :func:`sweep` evaluates it over a
rectangle of the table given the row above and the column to its left, so the same code fills
a whole table (borders from :func:`border_row` / :func:`border_col`) or one block of it
(borders from checkpoints, for memory-bounded traceback). :func:`walk` traces many paths back
through direction bits at once, on the device.

Skewed layout: lane ``k`` holds row ``k`` of the rectangle; step ``s`` computes column
``j = s - k + 1`` (1-based inside the rectangle), so one step is one antidiagonal and the
neighbours up and up-left come from lane ``k - 1`` one and two steps back. A rectangle of
``h`` rows and ``w`` columns takes ``h + w - 1`` steps of ``h`` lanes; callers put the shorter
sequence on the lanes.

End gaps (global mode, ``ends=True``): a gap before the first or after the last residue of
either sequence costs the end penalties ``Params.eo``/``Params.ee`` instead of ``go``/``ge``
(EMBOSS needle's end gap penalties; 0 and 0: free end gaps). Such gaps are the runs on the
table's border (row 0, column 0) and the runs along its last row (Y) and last column (X): a
gap in the last column can only run down to the corner, so every run there is a trailing one.
The borders take the end penalties, and :func:`cell` takes separate gap scores for its X and
Y (``x_gaps``/``y_gaps``), which :func:`sweep` switches to the end penalties in the last row
and column. The score stays ``H(m, n)`` and the traceback starts there with the usual rules:
it walks the trailing end gap as gap columns, so every path, walk and format is unchanged.
With ``ends=False`` (end gaps cost what inner gaps cost) the code is what it always was.

Direction bits and constants: :mod:`jaxrna.kernels.gotoh_defs`. :func:`cell` takes an
optional :class:`~jaxrna.semiring.Semiring` (default max-plus, the integer code above
unchanged): :mod:`jaxrna.align.partition` evaluates the same update in the log semiring for
partition functions and match posteriors.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.kernels.gotoh_defs import (NEG, NEG16, NO_OP, START_BIT, STATE_H, STATE_M,
                                       STATE_X, STATE_Y)
from jaxrna.semiring import Semiring

__all__ = ["NEG", "NEG16", "STATE_M", "STATE_X", "STATE_Y", "STATE_H", "START_BIT", "Params",
           "substitution", "add_max", "cell", "border_gaps", "border_row", "border_col",
           "border_row_host", "border_col_host", "sweep", "walk", "walk_ops"]


class Params(NamedTuple):
    """Scores as device scalars (so changing them does not recompile)."""

    matrix: jax.Array      # (K * K,) int32, row-major: query code * K + target code
    size: jax.Array        # K
    match: jax.Array
    mismatch: jax.Array
    go: jax.Array          # gap open score (<= 0)
    ge: jax.Array          # gap extend score (<= 0)
    eo: jax.Array          # end gap open score (<= 0; used where ``ends``)
    ee: jax.Array          # end gap extend score


def border_gaps(p: Params, ends: bool):
    """The (open, extend) scores of the table's border gaps: the end gaps' where ``ends``."""
    return (p.eo, p.ee) if ends else (p.go, p.ge)


def substitution(qc, tc, p: Params, equality: bool):
    """Score of query codes ``qc`` against target codes ``tc`` (same shape)."""
    if equality:
        return jnp.where(qc == tc, p.match, p.mismatch)
    return jnp.take(p.matrix, qc * p.size + tc, mode="clip")


def add_max(a, b, c):
    """``max(a + b, c)``: one instruction on Hopper (the Pallas kernel may pass an inline-PTX
    version)."""
    return jnp.maximum(a + b, c)


_MAX_PLUS_ADD = add_max


def cell(h_diag, m_up, x_up, y_up, m_left, x_left, y_left, s, go, ge, *, local: bool,
         want_bits: bool = False, add_max=add_max, semiring: Semiring | None = None,
         start=None, x_gaps=None, y_gaps=None):
    """The Gotoh update for any array of cells: returns ``(M, X, Y, H, bits)``.

    ``h_diag`` is ``H = M (+) X (+) Y`` at the up-left neighbour; ``bits`` is None unless
    ``want_bits``. Written as add-max chains (``(M (+) Y) + open`` for both opening moves,
    local ``(H (+) start) + s = (H + s) (+) (start + s)``): the same integers, fewer
    operations.

    ``semiring`` (default :data:`~jaxrna.semiring.MAX_PLUS`: ``(+)`` is ``max``) evaluates the
    same update in another semiring: with :func:`~jaxrna.semiring.log_semiring` every input
    is a log weight (scores already divided by the temperature) and the outputs are log sums
    over the paths into the cell. ``start`` is the log weight of starting a local alignment
    here (default 0, the semiring's one; a sweep that stores values relative to an offset
    ``C`` passes ``-C``). ``add_max`` overrides and direction bits are max-plus only.

    >>> import jax.numpy as jnp
    >>> from jaxrna.semiring import log_semiring
    >>> v = [jnp.float32(0.0)] * 7 + [jnp.float32(1.0), jnp.float32(-2.0), jnp.float32(-1.0)]
    >>> [float(a) for a in cell(*v, local=False)[:4]]        # M, X, Y, H
    [1.0, -1.0, -1.0, 1.0]
    >>> [round(float(a), 4) for a in cell(*v, local=False, semiring=log_semiring(1.0))[:4]]
    [1.0, -0.4486, -0.4486, 1.3851]
    """
    if semiring is None or semiring.is_max:
        plus = jnp.maximum
    else:
        if want_bits or add_max is not _MAX_PLUS_ADD:
            raise ValueError("direction bits and add_max overrides are max-plus only")
        plus = semiring.plus

        def add_max(a, b, c):  # noqa: F811 (a + b) (+) c in this semiring
            return plus(a + b, c)
    if local:
        m = add_max(h_diag, s, s if start is None else start + s)
    else:
        m = h_diag + s
    xo, xe = (go, ge) if x_gaps is None else x_gaps
    yo, ye = (go, ge) if y_gaps is None else y_gaps
    x = add_max(plus(m_up, y_up), xo, x_up + xe)
    y = add_max(plus(m_left, x_left), yo, y_left + ye)
    h = plus(plus(m, x), y)
    bits = None
    if want_bits:
        hsrc = jnp.where(m == h, 0, jnp.where(x == h, 1, 2))
        xsrc = jnp.where(m_up + xo == x, 0, jnp.where(x_up + xe == x, 1, 2))
        ysrc = jnp.where(m_left + yo == y, 0, jnp.where(y_left + ye == y, 2, 1))
        bits = hsrc | (xsrc << 2) | (ysrc << 4)
        if local:
            bits = bits | jnp.where(h_diag <= 0, START_BIT, 0)
        bits = bits.astype(jnp.uint8)
    return m, x, y, h, bits


def _border_row(xp, c0, width: int, go, ge, local: bool):
    """:func:`border_row` in the array module ``xp`` (``jax.numpy`` or NumPy)."""
    j = c0 + xp.arange(width + 1, dtype=xp.int32)
    neg = xp.full(j.shape, NEG, xp.int32)
    if local:
        return xp.stack([neg, neg, neg])
    m = xp.where(j == 0, 0, NEG).astype(xp.int32)
    y = xp.where(j == 0, NEG, go + (j - 1) * ge).astype(xp.int32)
    return xp.stack([m, neg, y])


def border_row(c0, width: int, go, ge, local: bool):
    """``(3, width + 1)`` M, X, Y of table row 0 at columns ``c0 .. c0 + width`` (``go``,
    ``ge``: the border gaps' scores, :func:`border_gaps`)."""
    return _border_row(jnp, c0, width, go, ge, local)


def border_row_host(c0: int, width: int, go, ge, local: bool) -> np.ndarray:
    """:func:`border_row` on the host (NumPy), for callers outside a program: eager JAX ops
    would each compile a small program of their own.

    >>> border_row_host(0, 3, -5, -2, False).tolist()[2] == [NEG, -5, -7, -9]
    True
    """
    return _border_row(np, int(c0), width, int(go), int(ge), local)


def border_col(r0, height: int, go, ge, local: bool):
    """``(3, height + 1)`` M, X, Y of table column 0 at rows ``r0 .. r0 + height``."""
    row = border_row(r0, height, go, ge, local)
    return row[jnp.array([0, 2, 1])]  # the same gap run, vertical


def border_col_host(r0: int, height: int, go, ge, local: bool) -> np.ndarray:
    """:func:`border_col` on the host (see :func:`border_row_host`)."""
    return border_row_host(r0, height, go, ge, local)[[0, 2, 1]]


def sweep(q, t, top, left, p: Params, mv=None, nv=None, *, local: bool, equality: bool,
          want_dirs: bool = False, want_final: bool = False, want_best: bool = False,
          row_lines: tuple[int, ...] = (), col_lines: tuple[int, ...] = (),
          dtype=jnp.int32, ends: bool = False, end_row=None, end_col=None, n_steps=None):
    """Evaluate a rectangle of ``h = len(q)`` rows by ``w = len(t)`` columns.

    ``top``: ``(3, w + 1)`` M, X, Y of the row above (index 0 is the corner);
    ``left``: ``(3, h + 1)`` of the column to the left (index 0 is the same corner).
    ``mv``, ``nv``: the true rows and columns (the rest is padding, computed but ignored).

    Returns a dict with, as asked: ``final`` (3,) M, X, Y at cell (mv, nv); ``best``
    (score, row, col) of the largest M over true cells, ties to the smallest row then column
    (1-based inside the rectangle); ``dirs`` ``(h + w - 1, h)`` direction bits;
    ``rows`` ``(h + w - 1, 3, len(row_lines))`` M, X, Y of the given rows (1-based) as they
    pass, skewed: row r, column j at step ``j + r - 2``; ``cols`` likewise for columns
    (row i at step ``c + i - 2``).

    ``dtype`` int16 halves the memory traffic (twice the SIMD lanes on CPU) when
    :func:`fits_int16` says every value fits; outputs are int32 either way.

    ``ends``: the table's last row and column (``end_row``, ``end_col``, 1-based inside the
    rectangle, default ``mv``, ``nv``; out of range when the rectangle holds neither) score
    their Y and X gaps as end gaps (``p.eo``, ``p.ee``). The borders are the caller's.

    ``n_steps`` (a traced int, optional): only the first ``n_steps`` antidiagonals are
    computed (a loop whose trip count is that value); the later steps' ``dirs``/``rows``/
    ``cols`` are zeros and ``final``/``best`` see only the computed cells. Cell ``(i, j)`` is on step ``i + j - 2``, so
    ``n_steps = mv + nv - 1`` computes every true cell: the padded length ``w`` then only sizes
    the arrays, the true lengths set the work (one program for a whole length class).
    """
    h, w = q.shape[0], t.shape[0]
    steps = h + w - 1
    neg_v = NEG16 if dtype == jnp.int16 else NEG
    if dtype != jnp.int32:
        p = Params(*(v.astype(dtype) for v in p))
        q, t = q.astype(dtype), t.astype(dtype)
    lanes = jnp.arange(h, dtype=dtype)
    mv = jnp.asarray(h if mv is None else mv, dtype)
    nv = jnp.asarray(w if nv is None else nv, dtype)
    pad = jnp.full((3, h), neg_v, dtype)
    top_p = jnp.concatenate([jnp.maximum(top, neg_v).astype(dtype), pad], axis=1)  # to h + w
    top_h = jnp.max(top_p, axis=0)
    left = jnp.maximum(left, neg_v).astype(dtype)
    left_next, left_h = left[:, 1:], jnp.max(left, axis=0)[:-1]
    zeros = jnp.zeros((h,), t.dtype)
    t_rev = jnp.concatenate([zeros, t, zeros])[::-1]
    row_idx = jnp.asarray(row_lines, jnp.int32) - 1
    col_pos = jnp.asarray(col_lines, jnp.int32)
    lane_ok = lanes < mv
    neg = jnp.full((h,), neg_v, dtype)
    if ends:
        erow = mv if end_row is None else jnp.asarray(end_row, jnp.int32)
        ecol = nv if end_col is None else jnp.asarray(end_col, jnp.int32)
        erow = jnp.clip(erow, -1, h + 1).astype(dtype)    # int16-safe, still out of range
        ecol = jnp.clip(ecol, -1, w + 1).astype(dtype)
        last_row = lanes + 1 == erow
        y_gaps = (jnp.where(last_row, p.eo, p.go), jnp.where(last_row, p.ee, p.ge))

    def shift(first_value, v):
        return jnp.concatenate([first_value, v[:-1]])

    def step(carry, s):
        pm, px, py, ph, p2h, fin, best = carry
        s_d = s.astype(dtype)
        first = s_d == lanes                    # column 1: the left neighbour is the border
        j = s_d - lanes + 1
        top_up = jax.lax.dynamic_slice_in_dim(top_p, s + 1, 1, axis=1)
        dg = jnp.where(first, left_h, shift(jax.lax.dynamic_slice_in_dim(top_h, s, 1), p2h))
        tc = jax.lax.dynamic_slice_in_dim(t_rev, w + h - 1 - s, h)
        sub = substitution(q, tc, p, equality)
        gaps = {}
        if ends:
            last_col = j == ecol
            gaps = {"x_gaps": (jnp.where(last_col, p.eo, p.go), jnp.where(last_col, p.ee, p.ge)),
                    "y_gaps": y_gaps}
        m, x, y, hh, bits = cell(
            dg, shift(top_up[0], pm), shift(top_up[1], px), shift(top_up[2], py),
            jnp.where(first, left_next[0], pm), jnp.where(first, left_next[1], px),
            jnp.where(first, left_next[2], py), sub, p.go, p.ge, local=local,
            want_bits=want_dirs, **gaps)
        out = {}
        if want_final:                          # every lane keeps its cell in column nv
            at = j == nv
            fin = tuple(jnp.where(at, v, f) for v, f in zip((m, x, y), fin))
        if want_best:                           # per lane: the first largest M over true cells
            v = jnp.where((j >= 1) & (j <= nv) & lane_ok, m, neg_v)
            gt = v > best[0]
            best = (jnp.where(gt, v, best[0]), jnp.where(gt, j, best[1]))
        if want_dirs:
            out["dirs"] = bits
        if row_lines or col_lines:
            cur = jnp.stack([m, x, y])
            if row_lines:
                out["rows"] = cur[:, row_idx].astype(jnp.int32)
            if col_lines:
                k = s - col_pos + 1
                out["cols"] = jnp.where(((k >= 0) & (k < h))[None], cur[:, jnp.clip(k, 0, h - 1)],
                                        neg_v).astype(jnp.int32)
        return (m, x, y, hh, ph, fin, best), out

    init = (neg, neg, neg, neg, neg, (neg, neg, neg), (neg, jnp.zeros((h,), dtype)))
    if n_steps is None:
        (*_, fin, best), ys = jax.lax.scan(step, init, jnp.arange(steps, dtype=jnp.int32))
    else:                                       # a loop of n_steps: outputs into buffers
        shapes = jax.eval_shape(step, init, jnp.int32(0))[1]
        bufs = {k: jnp.zeros((steps,) + a.shape, a.dtype) for k, a in shapes.items()}

        def body(s, c):
            carry, bufs = c
            carry, out = step(carry, s)
            return carry, {k: jax.lax.dynamic_update_index_in_dim(bufs[k], out[k], s, 0)
                           for k in bufs}

        limit = jnp.clip(jnp.asarray(n_steps, jnp.int32), 0, steps)
        (*_, fin, best), ys = jax.lax.fori_loop(0, limit, body, (init, bufs))
    result = dict(ys)
    if want_final:
        result["final"] = jnp.stack([f[mv - 1] for f in fin]).astype(jnp.int32)
    if want_best:
        k = jnp.argmax(best[0]).astype(jnp.int32)    # ties: the smallest row, then column
        result["best"] = jnp.stack([best[0][k].astype(jnp.int32), k + 1,
                                    best[1][k].astype(jnp.int32)])
    return result


# --------------------------------------------------------------------------------------
# traceback on the device


def walk(bits_at, i, j, state, done, *, local: bool, steps: int):
    """Trace many paths back through direction bits at once (one step of every path per loop
    iteration, until every path has finished or ``steps`` iterations).

    ``bits_at(i, j)`` gives the direction bits of cell ``(i, j)`` (1-based table coordinates,
    arrays shaped like ``i``) of each path's table. ``i``, ``j``, ``state`` (``STATE_H``:
    resolve from the cell's bits, as at a global end; ``STATE_M`` at a local end) and ``done``
    are ``(P,)``. A path stops on reaching row or column 0 or, local, after the M step that
    starts it. Returns ``(i, j, rev, count)``: where each path stopped, the ops it emitted
    ``(P, steps)`` uint8 in emission order (last op first; ``NO_OP`` after ``count``) and
    their number. The same walk as the host reference :func:`jaxrna.align.traceback.walk`.
    """
    p = i.shape[0]
    i, j, state = (jnp.asarray(v, jnp.int32) for v in (i, j, state))
    done = jnp.asarray(done, bool)
    rev = jnp.full((p, steps), NO_OP, jnp.uint8)
    count = jnp.zeros((p,), jnp.int32)

    def going(c):
        k, i, j, _, done, _, _ = c
        return (k < steps) & jnp.any(~done & (i > 0) & (j > 0))

    def step(c):
        k, i, j, st, done, rev, count = c
        active = ~done & (i > 0) & (j > 0)
        bits = bits_at(jnp.maximum(i, 1), jnp.maximum(j, 1)).astype(jnp.int32)
        s = jnp.where(st == STATE_H, bits & 3, st)
        is_m, is_x = s == STATE_M, s == STATE_X
        is_y = ~is_m & ~is_x
        op = jnp.where(active, s, NO_OP).astype(jnp.uint8)
        rev = jax.lax.dynamic_update_slice_in_dim(rev, op[:, None], k, axis=1)
        nst = jnp.where(is_m, STATE_H, jnp.where(is_x, (bits >> 2) & 3, (bits >> 4) & 3))
        stop = is_m & ((bits & START_BIT) != 0) if local else jnp.zeros_like(active)
        return (k + 1, jnp.where(active, i - (is_m | is_x), i),
                jnp.where(active, j - (is_m | is_y), j), jnp.where(active, nst, st),
                done | (active & stop), rev, count + active.astype(jnp.int32))

    init = (jnp.int32(0), i, j, state, done, rev, count)
    _, i, j, _, _, rev, count = jax.lax.while_loop(going, step, init)
    return i, j, rev, count


def walk_ops(bits_at, score, end_i, end_j, *, local: bool, steps: int):
    """:func:`walk` from the ends a sweep reports, as alignments.

    ``score``, ``end_i``, ``end_j`` ``(P,)`` (global: the ends are the table's corner, traced
    from its H; local: the best M, 0 when ``score <= 0``: an empty alignment). Returns
    ``(start_i, start_j, ops, length)``: 0-based starts (0 for global), and ``ops``
    ``(P, steps)`` in alignment order (``OP_M``, ``OP_I``, ``OP_D``; ``NO_OP`` after
    ``length``). ``steps`` must be at least the longest path (rows + columns of the table).
    A global path that stops on the border gets its end gap (I's, then D's) first, as
    :func:`jaxrna.align.traceback.finish` does.
    """
    end_i = jnp.asarray(end_i, jnp.int32)
    end_j = jnp.asarray(end_j, jnp.int32)
    if local:
        done = score <= 0
        i0, j0 = jnp.where(done, 0, end_i), jnp.where(done, 0, end_j)
        state = jnp.full_like(end_i, STATE_M)
    else:
        done = jnp.zeros(end_i.shape, bool)
        i0, j0, state = end_i, end_j, jnp.full_like(end_i, STATE_H)
    i, j, rev, count = walk(bits_at, i0, j0, state, done, local=local, steps=steps)
    if local:
        gi = gj = jnp.zeros_like(i)
    else:
        gi, gj = i, j
    total = count + gi + gj
    pos = jnp.arange(steps, dtype=jnp.int32)[None, :]
    src = total[:, None] - 1 - pos              # reversed: walked ops, then D's, then I's
    walked = jnp.take_along_axis(rev, jnp.clip(src, 0, steps - 1), axis=1)
    ops = jnp.where(src < count[:, None], walked,
                    jnp.where(src < (count + gj)[:, None], jnp.uint8(2), jnp.uint8(1)))
    ops = jnp.where(pos < total[:, None], ops, jnp.uint8(NO_OP))
    if local:
        return i, j, ops, total
    return jnp.zeros_like(i), jnp.zeros_like(j), ops, total
