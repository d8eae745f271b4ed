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
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxrna.align.scoring import NEG, Scoring

STATE_M, STATE_X, STATE_Y = 0, 1, 2
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


def cell(h_diag, m_up, x_up, y_up, m_left, x_left, y_left, s, go, ge, *, local: bool,
         want_bits: bool = False):
    """The Gotoh update for any array of cells: returns ``(M, X, Y, H, bits)``.

    ``h_diag`` is ``H = max(M, X, Y)`` at the up-left neighbour; ``bits`` is None unless
    ``want_bits``.
    """
    if local:
        start = h_diag <= 0
        h_diag = jnp.maximum(h_diag, 0)
    m = h_diag + s
    cm, cx, cy = m_up + go, x_up + ge, y_up + go
    x = jnp.maximum(jnp.maximum(cm, cy), cx)
    dm, dy, dx = m_left + go, y_left + ge, x_left + go
    y = jnp.maximum(jnp.maximum(dm, dx), dy)
    h = jnp.maximum(jnp.maximum(m, x), y)
    bits = None
    if want_bits:
        hsrc = jnp.where(m == h, 0, jnp.where(x == h, 1, 2))
        xsrc = jnp.where(cm == x, 0, jnp.where(cx == x, 1, 2))
        ysrc = jnp.where(dm == y, 0, jnp.where(dy == y, 2, 1))
        bits = hsrc | (xsrc << 2) | (ysrc << 4)
        if local:
            bits = bits | jnp.where(start, START_BIT, 0)
        bits = bits.astype(jnp.uint8)
    return m, x, y, h, bits


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
          row_lines: tuple[int, ...] = (), col_lines: tuple[int, ...] = ()):
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
    """
    h, w = q.shape[0], t.shape[0]
    steps = h + w - 1
    lanes = jnp.arange(h, dtype=jnp.int32)
    mv = jnp.int32(h) if mv is None else jnp.asarray(mv, jnp.int32)
    nv = jnp.int32(w) if nv is None else jnp.asarray(nv, jnp.int32)
    pad = jnp.full((3, h), NEG, jnp.int32)
    top_p = jnp.concatenate([top.astype(jnp.int32), pad], axis=1)   # index up to h + w
    top_h = jnp.max(top_p, axis=0)
    left = left.astype(jnp.int32)
    left_next, left_h = left[:, 1:], jnp.max(left, axis=0)[:-1]
    zeros = jnp.zeros((h,), t.dtype)
    t_rev = jnp.concatenate([zeros, t, zeros])[::-1]
    row_idx = jnp.asarray(row_lines, jnp.int32) - 1
    col_pos = jnp.asarray(col_lines, jnp.int32)
    tf = nv + mv - 2

    def step(carry, s):
        prev, prev2_h, fin, best = carry
        first = s == lanes                      # column 1: the left neighbour is the border
        up = jnp.concatenate([jax.lax.dynamic_slice_in_dim(top_p, s + 1, 1, axis=1),
                              prev[:, :-1]], axis=1)
        lf = jnp.where(first[None], left_next, prev)
        dg = jnp.concatenate([jax.lax.dynamic_slice_in_dim(top_h, s, 1), prev2_h[:-1]])
        dg = jnp.where(first, left_h, dg)
        tc = jax.lax.dynamic_slice_in_dim(t_rev, w + h - 1 - s, h)
        sub = substitution(q, tc, p, equality)
        m, x, y, hh, bits = cell(dg, up[0], up[1], up[2], lf[0], lf[1], lf[2], sub, p.go, p.ge,
                                 local=local, want_bits=want_dirs)
        cur = jnp.stack([m, x, y])
        out = {}
        if want_final:
            fin = jnp.where(s == tf, jax.lax.dynamic_index_in_dim(cur, mv - 1, axis=1,
                                                                   keepdims=False), fin)
        if want_best:
            j = s - lanes + 1
            vals = jnp.where((j >= 1) & (j <= nv) & (lanes < mv), m, NEG)
            k = jnp.argmax(vals).astype(jnp.int32)
            v = vals[k]
            better = (v > best[0]) | ((v == best[0]) & (k + 1 < best[1]))
            best = jnp.where(better, jnp.stack([v, k + 1, s - k + 1]), best)
        if want_dirs:
            out["dirs"] = bits
        if row_lines:
            out["rows"] = cur[:, row_idx]
        if col_lines:
            k = s - col_pos + 1
            out["cols"] = jnp.where(((k >= 0) & (k < h))[None], cur[:, jnp.clip(k, 0, h - 1)], NEG)
        return (cur, hh, fin, best), out

    init = (jnp.full((3, h), NEG, jnp.int32), jnp.full((h,), NEG, jnp.int32),
            jnp.full((3,), NEG, jnp.int32), jnp.array([NEG, 1 << 30, 1 << 30], jnp.int32))
    (_, _, fin, best), ys = jax.lax.scan(step, init, jnp.arange(steps, dtype=jnp.int32))
    result = dict(ys)
    if want_final:
        result["final"] = fin
    if want_best:
        result["best"] = best
    return result
