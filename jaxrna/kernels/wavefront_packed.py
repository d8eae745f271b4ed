"""Score-only Gotoh alignment of many pairs, two pairs per 32-bit lane (int16 halves).

The lane kernel of :mod:`jaxrna.kernels.wavefront` keeps one pair per 32-bit lane. Here every
32-bit word holds two pairs' values as int16 halves, and each step is one packed instruction
(PTX ``add.s16x2`` and ``max.s16x2`` on Hopper; ``max(a + b, c)`` is one DPX
instruction there), so a thread advances two pairs at once. Interpret mode (CPU) emulates the
same operations on the halves, so the tests check the exact integer algorithm.

Fewer operations per cell than the plain kernel, with the same integers:

* gaps open from ``H`` (``X = max(H_up + open, X_up + extend)``), which equals the reference's
  ``max(M_up, Y_up) + open`` whenever opening costs at least as much as extending
  (``gap_open >= gap_extend``, checked by :func:`packed_ok`); each row then carries only
  ``H`` and ``Y`` between columns, and the row between strips only ``H`` and ``X``;
* match/mismatch with codes shifted left by ``c`` (``2**c >= match - mismatch``):
  ``s = max(match + 1 + ~(q ^ t), mismatch)`` is two instructions for two cells;
* global: ``H = max(H_diag + s, max(X, Y))`` (M is never needed on its own), and each pair's
  query is padded at the *top* (the rows above it are minus infinity, its first row starts from
  the left border), so every pair ends in the last row and the score is read once per column
  of the last row, not once per cell;
* local: padded columns (past ``n``) score minus infinity through per-column scores; each row
  keeps its first largest ``M`` and column, merged in order at the end of a strip (ties: the
  smallest row, then column, as :func:`jaxrna.kernels.wavefront.batch_sweep`).
* end gaps scored apart (``ends``, global): the borders take the end penalties, and so do the
  X gaps of column ``n`` (per half, a select per column) and the Y gaps of the pair's first row
  (its border row, computed in the kernel's row ``hp - m``) and of the last row (per row
  and half, a select per strip); opening from ``H`` needs ``end_open >= end_extend`` too.

Only for match/mismatch scoring whose values fit int16 over the table (:func:`packed_ok`);
:func:`jaxrna.kernels.wavefront.pallas_scores` covers everything else.

>>> import numpy as np
>>> from jaxrna.align.recurrence import params_of
>>> from jaxrna.align.scoring import match_mismatch
>>> sc = match_mismatch(2, -3, 5, 2)
>>> q = sc.encode("GATTACA")[None]; t = sc.encode("GCATGCT")[None]
>>> packed_ok(sc, 8, 7)
True
>>> score, ei, ej = packed_scores(q, t, np.array([7]), np.array([7]), params_of(sc),
...                               local=False, rows=4, lanes=8, interpret=True)
>>> int(score[0]), int(ei[0]), int(ej[0])
(-6, 7, 7)
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from jaxrna.kernels.gotoh import NEG16, Params
from jaxrna.programs import stored_jit

#: Finite values must stay within +-RANGE16 (minus infinity is NEG16 = -2**14; values derived
#: from it stay below -2**14 + RANGE16 and above -2**15).
RANGE16 = 15 * 1024
#: Rows per strip (global, local). (32, 16) ran fastest in the kernel alone (an H200,
#: 2026-11-21) but compiled slowly; on an H100 (2026-11-27), 32,768 pairs of 1,000 nt in the
#: process, global: 32 rows 4.3-4.4 s to compile / 0.11-0.15 s a run, 16 rows 1.0 s / 0.12-0.13
#: s, 8 rows 0.6 s / 0.16-0.20 s; local: 16 rows 2.0-2.7 s / 0.12-0.17 s, 8 rows 0.7 s /
#: 0.15-0.20 s. A first run waits for the compilation: (16, 8).
ROWS = (16, 8)
LANES = 128
NUM_WARPS = 4


def packed_ok(scoring, h: int, w: int) -> bool:
    """Whether :func:`packed_scores` gives exact scores for tables of ``h`` x ``w`` (padded)
    with ``scoring`` (a :class:`~jaxrna.align.scoring.Scoring` or anything with its attributes
    ``equality``, ``size``, ``match``, ``mismatch``, ``gap_open``, ``gap_extend``, ``max_abs``)."""
    if not scoring.equality or scoring.size < 1:
        return False
    match, mismatch = scoring.match, scoring.mismatch
    if match < mismatch or scoring.gap_open < scoring.gap_extend:
        return False
    if getattr(scoring, "end_gap_open", 0) < getattr(scoring, "end_gap_extend", 0):
        return False
    shift = max(0, match - mismatch - 1).bit_length()
    if (scoring.size - 1) << shift >= 1 << 13:
        return False
    return (h + w + 4) * scoring.max_abs() < RANGE16 - 1024


def _splat(v):
    """An int16 value in both halves of an int32 word (Python ints or traced int32)."""
    return (v & 0xFFFF) | (v << 16)


def _lo(x):
    return jnp.left_shift(x, 16) >> 16


def _hi(x):
    return x >> 16


def _join(lo, hi):
    return (lo & 0xFFFF) | jnp.left_shift(hi, 16)


class Packed:
    """int16x2 operations on int32 words: inline PTX on the GPU (``asm``), emulated otherwise."""

    def __init__(self, asm: bool):
        self.asm = asm

    def _ptx(self, code: str, *args):
        from jax.experimental.pallas import triton as plgpu

        shape = jnp.broadcast_shapes(*(jnp.shape(a) for a in args))
        args = [jnp.broadcast_to(jnp.asarray(a, jnp.int32), shape) for a in args]
        (out,) = plgpu.elementwise_inline_asm(
            code, args=args, constraints="=r," + ",".join("r" * len(args)), pack=1,
            result_shape_dtypes=[jax.ShapeDtypeStruct(shape, jnp.int32)])
        return out

    def _each(self, fn, *args):
        return _join(fn(*(_lo(a) for a in args)), fn(*(_hi(a) for a in args)))

    def add(self, a, b):
        if self.asm:
            return self._ptx("add.s16x2 $0, $1, $2;", a, b)
        return self._each(jnp.add, a, b)

    def max(self, a, b):
        if self.asm:
            return self._ptx("max.s16x2 $0, $1, $2;", a, b)
        return self._each(jnp.maximum, a, b)

    def addmax(self, a, b, c):
        """``max(a + b, c)`` per half."""
        if self.asm:
            return self._ptx("{ .reg .b32 t; add.s16x2 t, $1, $2; max.s16x2 $0, t, $3; }",
                             a, b, c)
        return self._each(lambda x, y, z: jnp.maximum(x + y, z), a, b, c)

    def xor(self, a, b):
        return a ^ b

    def xnor(self, a, b):
        if self.asm:
            return self._ptx("lop3.b32 $0, $1, $2, $2, 0xC3;", a, b)
        return ~(a ^ b)

    def signmask(self, a):
        """Each half: all ones where it is negative, else zero."""
        if self.asm:
            return self._ptx("prmt.b32 $0, $1, $1, 0xBB99;", a)
        return self._each(lambda x: jnp.where(x < 0, -1, 0), a)

    def select(self, mask, a, b):
        """Bitwise ``mask ? a : b``."""
        if self.asm:
            return self._ptx("lop3.b32 $0, $1, $2, $3, 0xCA;", mask, a, b)
        return (mask & a) | (~mask & b)


def _kernel(q_ref, t_ref, n_ref, m2_ref, prm_ref, left_ref, buf_in, *outs, w, rows, local,
            asm, ends=False):
    """One program: ``lanes`` words = 2 x ``lanes`` pairs, each in strips of ``rows`` rows,
    column by column; ``buf`` holds ``H``, ``X`` of the row above the strip and receives the
    strip's last row. ``ends``: one more input, each pair's first row (``hp - m``, packed)."""
    del buf_in  # aliased with the last output
    if ends:
        p_ref, *outs = outs
    *res, buf_ref = outs
    op = Packed(asm)
    h = q_ref.shape[0]
    lanes = n_ref.shape[0]
    matchp1, mism, go, ge = prm_ref[0], prm_ref[1], prm_ref[2], prm_ref[3]
    if ends:
        eo, ee = prm_ref[4], prm_ref[5]
        ppk = p_ref[...]
        nstrips = h // rows
    npk = n_ref[...]
    # the loops run to the lanes' longest pair, not to the padded shape: a shape is a length
    # class whose lengths are runtime values, and lanes of empty pairs cost nothing. Global
    # queries sit at the bottom (row ``hp - m`` is a pair's row 0): the strips start at the
    # one holding the highest row 0 (the rows above every pair's row 0 are minus infinity,
    # as ``top`` is, and stay below every finite value: :func:`packed_ok`).
    ncols = jnp.minimum(jnp.max(jnp.maximum(_lo(npk), _hi(npk))), w)
    mmax = jnp.minimum(jnp.max(jnp.maximum(m2_ref[0, :], m2_ref[1, :])), h)
    if local:
        first, last_strip = 0, jax.lax.div(mmax + (rows - 1), rows)
    else:
        first, last_strip = jax.lax.div(jnp.maximum(h - mmax - 1, 0), rows), h // rows
    negp = jnp.full((lanes,), _splat(NEG16), jnp.int32)
    zero = jnp.zeros((lanes,), jnp.int32)
    minus1 = jnp.full((lanes,), -1, jnp.int32)           # -1 in both halves

    def load_column(j):
        return t_ref[j - 1, :], buf_ref[j, 0, :], buf_ref[j, 1, :]

    def strip(sidx, carry):
        r0 = sidx * rows
        qs = [q_ref[r0 + r, :] for r in range(rows)]
        hl = [left_ref[r0 + 1 + r, 0, :] for r in range(rows)]
        yl = [left_ref[r0 + 1 + r, 1, :] for r in range(rows)]
        diag0 = left_ref[r0, 0, :]
        track = ([negp] * rows, [zero] * rows) if local else carry
        if ends:            # Y's gaps of each row: end gaps in the pair's row 0 and last row
            last = sidx == nstrips - 1
            ygaps = []
            for r in range(rows):
                at = op.signmask(op.add(op.xor(ppk, _splat(r0 + r + 1)), minus1))
                if r == rows - 1:
                    at = jnp.where(last, minus1, at)
                ygaps.append((op.select(at, eo, go), op.select(at, ee, ge)))

        def column(j, c):
            hl, yl, diag, track, (tc, hup, xup) = c
            following = load_column(jnp.minimum(j + 1, w))     # in flight while we compute
            jj = _splat(j)
            if local:                                         # past n: minus infinity
                pad = op.signmask(op.add(npk, _splat(-j)))
                mp1, mm = op.select(pad, negp, matchp1), op.select(pad, negp, mism)
            else:
                mp1, mm = matchp1, mism
            xo, xe = go, ge
            if ends:                                          # column n: end gaps (X)
                at_n = op.signmask(op.add(op.xor(npk, jj), minus1))
                xo, xe = op.select(at_n, eo, go), op.select(at_n, ee, ge)
            above = hup
            new_h, new_y = [], []
            best, col = track if local else (None, None)
            for r in range(rows):
                s = op.addmax(mp1, op.xnor(qs[r], tc), mm)
                dg = diag if r == 0 else hl[r - 1]
                x = op.addmax(hup, xo, op.add(xup, xe))
                yo, ye = ygaps[r] if ends else (go, ge)
                y = op.addmax(hl[r], yo, op.add(yl[r], ye))
                if local:
                    mv = op.addmax(dg, s, s)
                    hh = op.max(op.max(mv, x), y)
                    same = op.signmask(op.add(mv, ~best[r]))   # M - best - 1 < 0: no gain
                    best = best[:r] + [op.max(best[r], mv)] + best[r + 1:]
                    col = col[:r] + [op.select(same, col[r], jj)] + col[r + 1:]
                else:
                    hh = op.addmax(dg, s, op.max(x, y))
                new_h.append(hh)
                new_y.append(y)
                hup, xup = hh, x
            buf_ref[j, 0, :] = hup
            buf_ref[j, 1, :] = xup
            if local:
                track = (best, col)
            else:                                             # the last row at column n
                at = op.signmask(op.add(op.xor(npk, jj), minus1))
                track = op.select(at, hup, track)
            return new_h, new_y, above, track, following

        init = (hl, yl, diag0, track, load_column(1))
        _, _, _, track, _ = jax.lax.fori_loop(1, ncols + 1, column, init)
        if not local:
            return track
        best, col = track
        out = list(carry)
        for half, pick in enumerate((_lo, _hi)):
            score, bi, bj = out[half], out[2 + half], out[4 + half]
            m = m2_ref[half, :]
            for r in range(rows):
                rid = r0 + r + 1
                v, cj = pick(best[r]), pick(col[r])
                better = (rid <= m) & (v > score)
                score = jnp.where(better, v, score)
                bi = jnp.where(better, rid, bi)
                bj = jnp.where(better, cj, bj)
            out[half], out[2 + half], out[4 + half] = score, bi, bj
        return tuple(out)

    if local:
        neg = jnp.full((lanes,), NEG16, jnp.int32)
        init = (neg, neg, zero, zero, zero, zero)
    else:
        init = negp
    out = jax.lax.fori_loop(first, last_strip, strip, init)
    if local:
        score_ref, ei_ref, ej_ref = res
        for half in range(2):
            score, bi, bj = out[half], out[2 + half], out[4 + half]
            empty = score <= 0
            score_ref[half, :] = jnp.where(empty, 0, score)
            ei_ref[half, :] = jnp.where(empty, 0, bi)
            ej_ref[half, :] = jnp.where(empty, 0, bj)
    else:
        (score_ref,) = res
        score_ref[0, :] = _lo(out)
        score_ref[1, :] = _hi(out)


def _pack(x, half: int):
    """``(..., 2 * half)`` int16 values -> ``(..., half)`` words: pair 2k low, 2k + 1 high
    (neighbours share a word, so a caller that orders its pairs by length gives each program
    pairs of like lengths: its loops run to its longest pair)."""
    del half
    return _join(x[..., 0::2], x[..., 1::2])


@stored_jit("kernels.wavefront_packed.packed_scores",
            static_argnames=("local", "rows", "lanes", "num_warps", "interpret", "ends"))
def packed_scores(q, t, m, n, params: Params, *, local: bool, rows: int | None = None,
                  lanes: int = LANES, num_warps: int = NUM_WARPS, interpret: bool = False,
                  ends: bool = False):
    """Scores and end cells of pairs ``q[b, :m[b]]`` x ``t[b, :n[b]]`` (``m``, ``n`` >= 1),
    two pairs per 32-bit lane; the same results as
    :func:`jaxrna.kernels.wavefront.pallas_scores` for match/mismatch scoring where
    :func:`packed_ok` holds (padded shapes: ``h`` up to a multiple of ``rows``; None: 32 rows
    global, 16 local).

    ``q`` ``(B, h)`` and ``t`` ``(B, w)`` int codes; ``lanes`` words (``2 * lanes`` pairs) per
    program; ``num_warps`` Triton warps per program (GPU only). ``ends``: end gaps scored
    apart (global; :func:`packed_ok` checks their penalties too).
    """
    from jax.experimental import pallas as pl

    from jaxrna.kernels.tropical_pallas import compiler_params

    b, h = q.shape
    w = t.shape[1]
    rows = rows or ROWS[local]
    hp = -(-h // rows) * rows
    bp = -(-b // (2 * lanes)) * 2 * lanes
    half = bp // 2
    i32 = jnp.int32
    q = jnp.zeros((bp, h), i32).at[:b].set(q.astype(i32))
    t = jnp.zeros((bp, w), i32).at[:b].set(t.astype(i32))
    m = jnp.ones((bp,), i32).at[:b].set(jnp.asarray(m, i32))
    n = jnp.ones((bp,), i32).at[:b].set(jnp.asarray(n, i32))
    match, mismatch = params.match.astype(i32), params.mismatch.astype(i32)
    go, ge = params.go.astype(i32), params.ge.astype(i32)
    bo, be = (params.eo.astype(i32), params.ee.astype(i32)) if ends else (go, ge)  # borders
    shift = 32 - jax.lax.clz(jnp.maximum(match - mismatch, 1) - 1)   # 2**shift >= match - mismatch
    if local:
        qp = jnp.zeros((bp, hp), i32).at[:, :h].set(q)
        top = jnp.full((bp, w + 1), NEG16, i32)
        left = jnp.full((bp, hp + 1), NEG16, i32)
    else:                                  # each query at the bottom: p = hp - m rows above it
        p = (hp - m)[:, None]
        src = jnp.arange(hp)[None, :] - p
        qp = jnp.where(src >= 0, jnp.take_along_axis(q, jnp.clip(src, 0, h - 1), axis=1), 0)
        i = jnp.arange(hp + 1)[None, :]
        left = jnp.where(i < p, NEG16, jnp.where(i == p, 0, bo + (i - p - 1) * be))
        j = jnp.arange(w + 1)[None, :]
        top = jnp.where(p == 0, jnp.where(j == 0, 0, bo + (j - 1) * be), NEG16)
    neg = jnp.full_like(left, NEG16)
    left = jnp.stack([jnp.maximum(left, NEG16), neg], axis=0)          # H, Y of column 0
    top = jnp.stack([jnp.maximum(top, NEG16), jnp.full_like(top, NEG16)], axis=0)  # H, X of row 0
    qk = _pack(jnp.left_shift(qp, shift).T, half)                      # (hp, half)
    tk = _pack(jnp.left_shift(t, shift).T, half)                       # (w, half)
    leftk = _pack(left.transpose(2, 0, 1), half)                       # (hp + 1, 2, half)
    topk = _pack(top.transpose(2, 0, 1), half)                         # (w + 1, 2, half)
    m2 = jnp.stack([m[0::2], m[1::2]])
    head = [_splat(match + 1), _splat(mismatch), _splat(go), _splat(ge)]
    if ends:
        head += [_splat(bo), _splat(be)]
    prm = jnp.stack(head).astype(i32)
    kernel = partial(_kernel, w=w, rows=rows, local=local, asm=not interpret, ends=ends)
    lane = pl.BlockSpec((lanes,), lambda k: (k,))
    two = pl.BlockSpec((2, lanes), lambda k: (0, k))
    edge = lambda k_: pl.BlockSpec((k_ + 1, 2, lanes), lambda k: (0, 0, k))  # noqa: E731
    nres = 3 if local else 1
    extra = (_pack(hp - m, half),) if ends else ()     # each pair's row 0 in the kernel
    out = pl.pallas_call(
        kernel,
        grid=(half // lanes,),
        in_specs=[pl.BlockSpec((hp, lanes), lambda k: (0, k)),
                  pl.BlockSpec((w, lanes), lambda k: (0, k)),
                  lane, two, pl.BlockSpec((len(head),), lambda k: (0,)), edge(hp), edge(w)]
        + [lane] * len(extra),
        out_specs=[two] * nres + [edge(w)],
        out_shape=[jax.ShapeDtypeStruct((2, half), i32)] * nres
        + [jax.ShapeDtypeStruct((w + 1, 2, half), i32)],
        input_output_aliases={6: nres},
        interpret=interpret,
        **({} if interpret else {"compiler_params": compiler_params(num_warps, 1)}),
    )(qk, tk, _pack(n, half), m2, prm, leftk, topk, *extra)
    flat = [o.T.reshape(bp)[:b] for o in out[:nres]]     # (2, half): halves of words
    if local:
        return tuple(flat)
    return flat[0], m[:b], n[:b]
