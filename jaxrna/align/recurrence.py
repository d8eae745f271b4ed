"""One pair's three-state Gotoh recurrence, evaluated along antidiagonals with ``lax.scan``.

:func:`cell` is the recurrence of :mod:`jaxrna.align.reference` for any array of cells, tie
rules included; the Pallas kernel calls it too. :func:`sweep` evaluates it over a rectangle of
the table given the row above and the column to its left, so the same code fills a whole
table (borders from :func:`border_row` / :func:`border_col`) or one block of it (borders from
checkpoints, for memory-bounded traceback).

Skewed layout: lane ``k`` holds row ``k`` of the rectangle; step ``s`` computes column
``j = s - k + 1`` (1-based inside the rectangle), so one step is one antidiagonal and the
neighbours up and up-left come from lane ``k - 1`` one and two steps back. A rectangle of
``h`` rows and ``w`` columns takes ``h + w - 1`` steps of ``h`` lanes; callers put the shorter
sequence on the lanes.

Direction bits (one uint8 per cell, at ``dirs[s, k]``): bits 0-1 the state holding ``H``
(0 = M, 1 = X, 2 = Y), bits 2-3 the source of X, bits 4-5 the source of Y, bit 6 "local
alignment starts here". Scores are int32 in the scheme's units; ``NEG`` is minus infinity.

:func:`cell` takes an optional :class:`~jaxrna.semiring.Semiring` (default max-plus, the
integer code above unchanged): :mod:`jaxrna.align.partition` evaluates the same update in the
log semiring for partition functions and match posteriors.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrna.align.scoring import NEG, Scoring
from jaxrna.semiring import Semiring

#: Minus infinity when sweeping in int16.
NEG16 = -(1 << 14)

STATE_M, STATE_X, STATE_Y = 0, 1, 2
#: For a traceback: "the state holding H at this cell", resolved from the cell's bits.
STATE_H = 3
START_BIT = 64


class Params(NamedTuple):
    """Scores as device scalars (so changing them does not recompile)."""

    matrix: jax.Array      # (K * K,) int32, row-major: query code * K + target code
    size: jax.Array        # K
    match: jax.Array
    mismatch: jax.Array
    go: jax.Array          # gap open score (<= 0)
    ge: jax.Array          # gap extend score (<= 0)


def params_of(scoring: Scoring) -> Params:
    i32 = lambda v: jnp.asarray(v, jnp.int32)  # noqa: E731
    return Params(jnp.asarray(scoring.matrix.reshape(-1), jnp.int32), i32(scoring.size),
                  i32(scoring.match), i32(scoring.mismatch), i32(scoring.open_score),
                  i32(scoring.extend_score))


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
         start=None):
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
    x = add_max(plus(m_up, y_up), go, x_up + ge)
    y = add_max(plus(m_left, x_left), go, y_left + ge)
    h = plus(plus(m, x), y)
    bits = None
    if want_bits:
        hsrc = jnp.where(m == h, 0, jnp.where(x == h, 1, 2))
        xsrc = jnp.where(m_up + go == x, 0, jnp.where(x_up + ge == x, 1, 2))
        ysrc = jnp.where(m_left + go == y, 0, jnp.where(y_left + ge == y, 2, 1))
        bits = hsrc | (xsrc << 2) | (ysrc << 4)
        if local:
            bits = bits | jnp.where(h_diag <= 0, START_BIT, 0)
        bits = bits.astype(jnp.uint8)
    return m, x, y, h, bits


def fits_int16(scoring: Scoring, h: int, w: int) -> bool:
    """Whether every value of an ``h`` x ``w`` (padded) sweep stays inside int16: finite
    scores within +-2**13 over the longest path, minus infinity at -2**14."""
    return (h + w + 2) * scoring.max_abs() < (1 << 13)


def border_row(c0, width: int, go, ge, local: bool):
    """``(3, width + 1)`` M, X, Y of table row 0 at columns ``c0 .. c0 + width``."""
    j = c0 + jnp.arange(width + 1, dtype=jnp.int32)
    neg = jnp.full(j.shape, NEG, jnp.int32)
    if local:
        return jnp.stack([neg, neg, neg])
    m = jnp.where(j == 0, 0, NEG).astype(jnp.int32)
    y = jnp.where(j == 0, NEG, go + (j - 1) * ge).astype(jnp.int32)
    return jnp.stack([m, neg, y])


def border_col(r0, height: int, go, ge, local: bool):
    """``(3, height + 1)`` M, X, Y of table column 0 at rows ``r0 .. r0 + height``."""
    row = border_row(r0, height, go, ge, local)
    return row[jnp.array([0, 2, 1])]  # the same gap run, vertical


def sweep(q, t, top, left, p: Params, mv=None, nv=None, *, local: bool, equality: bool,
          want_dirs: bool = False, want_final: bool = False, want_best: bool = False,
          row_lines: tuple[int, ...] = (), col_lines: tuple[int, ...] = (),
          dtype=jnp.int32):
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
        m, x, y, hh, bits = cell(
            dg, shift(top_up[0], pm), shift(top_up[1], px), shift(top_up[2], py),
            jnp.where(first, left_next[0], pm), jnp.where(first, left_next[1], px),
            jnp.where(first, left_next[2], py), sub, p.go, p.ge, local=local,
            want_bits=want_dirs)
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
    (*_, fin, best), ys = jax.lax.scan(step, init, jnp.arange(steps, dtype=jnp.int32))
    result = dict(ys)
    if want_final:
        result["final"] = jnp.stack([f[mv - 1] for f in fin]).astype(jnp.int32)
    if want_best:
        k = jnp.argmax(best[0]).astype(jnp.int32)    # ties: the smallest row, then column
        result["best"] = jnp.stack([best[0][k].astype(jnp.int32), k + 1,
                                    best[1][k].astype(jnp.int32)])
    return result
