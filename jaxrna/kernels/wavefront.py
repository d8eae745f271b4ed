"""Antidiagonal sweeps for two-sequence tables (Gotoh alignment), batched.

Ways to run :func:`jaxrna.kernels.gotoh.cell` over tables, each saying what it computes:

- :func:`batch_sweep`: pure JAX, any backend. Pairs of one length bucket are vmapped; each
  pair is one skewed antidiagonal sweep (lanes = the shorter sequence). Scores, end cells
  and, on request, direction bits for the traceback. :func:`batch_align` adds the traceback
  of every pair, walked on the device (:func:`jaxrna.kernels.gotoh.walk_ops`): only the ops
  come back.
- :func:`lanes_align`: the same on GPU with the Pallas lane kernel below writing direction
  bits (one pair per lane), then the device walk.
- :func:`pallas_scores`: a Pallas kernel for many short pairs, one pair per lane
  (:mod:`jaxrna.kernels.wavefront_packed` packs two pairs per lane for match/mismatch scoring)
  (inter-sequence parallelism): each lane runs its own pair row strip by row strip, keeping
  ``R`` rows of state in registers and the row between strips in memory. Score and end
  cell only; ``interpret=True`` runs it anywhere (tests compare it with the pure-JAX path).
- :func:`checkpoint_sweep` and :func:`block_dirs`: the long-pair path in pure JAX. One
  sweep over the whole table keeps the M, X, Y values of every ``block``-th row and column
  (a grid of block edges, memory ``O((m + n) (m + n) / block)``); a traceback then
  recomputes only the blocks its path crosses, each from its top and left edges, with
  direction bits.
- :func:`tile_wavefront`: the same two jobs on GPU as seed 002's block wavefront: tiles along
  block antidiagonals, the tiles of one antidiagonal as the lanes of the Pallas kernel.

Results agree exactly between paths, end cells and their tie rules included. Every path takes
``ends`` (static): global tables whose end gaps cost ``Params.eo``/``Params.ee`` (see
:mod:`jaxrna.kernels.gotoh`); without it the programs are what they were.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.kernels.gotoh import (NEG, STATE_H, STATE_M, Params, border_col,
                                  border_col_host, border_gaps, border_row, border_row_host, cell,
                                  sweep, walk_ops)
from jaxrna.kernels.tropical_pallas import outer_step
from jaxrna.programs import stored_jit

#: Rows of state each Pallas lane keeps in registers (tile wavefront; the many-pairs lane
#: kernel uses LANE_ROWS). 16 rows ran faster in the kernel alone (an H200, 2026-11-21: 826
#: against 556 GCUPS) but took 3.2-3.6 s to compile against 1.0 s for 8, and a run of 32,768
#: pairs of 1,000 nt took the same time either way (an H100, 2026-11-27: 0.37-0.43 s against
#: 0.38-0.42 s in the process; 4 rows: 0.65 s to compile, 0.47-0.54 s): 8.
STRIP_ROWS = 8
LANE_ROWS = 8
#: Pairs per Pallas program (lanes); a power of two.
LANES = 128
NUM_WARPS = 4


def _triton_params(num_warps: int):
    from jax.experimental.pallas import triton as plgpu

    return plgpu.CompilerParams(num_warps=num_warps, num_stages=1)


# --------------------------------------------------------------------------------------
# pure JAX, batched


def _ends(out, m, n, local, top, left):
    """(score, end row, end column, end state) from a sweep over a whole table (``top``,
    ``left``: its borders, where a global alignment of an empty side ends)."""
    if local:
        score, ei, ej = out["best"][0], out["best"][1], out["best"][2]
        empty = score <= 0
        zero = jnp.int32(0)
        return (jnp.where(empty, zero, score), jnp.where(empty, zero, ei),
                jnp.where(empty, zero, ej), jnp.int32(STATE_M))
    m, n = jnp.asarray(m, jnp.int32), jnp.asarray(n, jnp.int32)
    # an empty side: the table has no inner cell, the alignment is the border's gap run
    edge = jnp.where(m == 0, jnp.max(jnp.take(top, jnp.minimum(n, top.shape[1] - 1), axis=1)),
                     jnp.max(jnp.take(left, jnp.minimum(m, left.shape[1] - 1), axis=1)))
    score = jnp.where((m == 0) | (n == 0), edge.astype(jnp.int32),
                      jnp.max(out["final"]).astype(jnp.int32))
    return score, m, n, jnp.int32(STATE_H)


def pair_sweep(q, t, m, n, params: Params, *, local: bool, equality: bool,
               with_dirs: bool = False, small: bool = False, ends: bool = False, n_steps=None):
    """Align one pair ``q[:m]`` x ``t[:n]`` (int32 codes, padded) over its whole table.

    Returns ``(score, end_i, end_j, end_state)`` (1-based end cell; 0 for an empty local
    alignment) and, with ``with_dirs``, the skewed direction bits ``(h + w - 1, h)``.
    A pure function: jit it, vmap it, or call :func:`batch_sweep`. ``small``: sweep in int16
    (only when :func:`~jaxrna.align.recurrence.fits_int16` holds). ``ends``: end gaps scored
    apart (global). ``n_steps``: antidiagonals to compute (default all; at least ``m + n - 1``:
    :func:`jaxrna.kernels.gotoh.sweep`).
    """
    h, w = q.shape[0], t.shape[0]
    top = border_row(0, w, *border_gaps(params, ends), local)
    left = border_col(0, h, *border_gaps(params, ends), local)
    out = sweep(q, t, top, left, params, m, n, local=local, equality=equality,
                want_dirs=with_dirs, want_final=not local, want_best=local,
                dtype=jnp.int16 if small else jnp.int32, ends=ends, n_steps=n_steps)
    return _ends(out, m, n, local, top, left) + ((out["dirs"],) if with_dirs else ())


@stored_jit("kernels.wavefront.batch_sweep",
            static_argnames=("local", "equality", "with_dirs", "small", "ends"))
def batch_sweep(q, t, m, n, params: Params, *, local: bool, equality: bool,
                with_dirs: bool = False, small: bool = False, ends: bool = False):
    """:func:`pair_sweep` over a batch: ``q`` ``(B, h)``, ``t`` ``(B, w)``, ``m`` and ``n``
    ``(B,)``. Only the antidiagonals the batch's largest ``m + n`` needs are computed (one
    count for the whole batch, so each step stays one vector operation): ``h`` and ``w`` are
    the sizes of a length class, the lengths inside it are runtime values."""
    n_steps = jnp.maximum(jnp.max(jnp.asarray(m, jnp.int32) + jnp.asarray(n, jnp.int32)) - 1, 1)
    one = partial(pair_sweep, params=params, local=local, equality=equality, with_dirs=with_dirs,
                  small=small, ends=ends, n_steps=n_steps)
    return jax.vmap(one)(q, t, m, n)


@stored_jit("kernels.wavefront.batch_align",
            static_argnames=("local", "equality", "small", "ends"))
def batch_align(q, t, m, n, params: Params, *, local: bool, equality: bool, small: bool = False,
                ends: bool = False):
    """Alignments of a batch (as :func:`batch_sweep`), traced back on the device.

    Returns ``(score, end_i, end_j, start_i, start_j, ops, length)``: 1-based ends and
    0-based starts as :func:`pair_sweep` and :func:`jaxrna.kernels.gotoh.walk_ops` give
    them, ``ops`` ``(B, h + w)`` uint8 in alignment order (0 M, 1 I, 2 D; 255 after
    ``length``). One program: the direction bits never leave the device.
    """
    score, ei, ej, _, dirs = batch_sweep(q, t, m, n, params, local=local, equality=equality,
                                         with_dirs=True, small=small, ends=ends)
    b, steps, h = dirs.shape
    flat = dirs.reshape(-1)
    pair = jnp.arange(b, dtype=jnp.int32) * steps

    def bits_at(i, j):
        return flat[((pair + (j - 1) + (i - 1)) * h + (i - 1))]

    si, sj, ops, length = walk_ops(bits_at, score, ei, ej, local=local,
                                   steps=h + t.shape[1])
    return score, ei, ej, si, sj, ops, length


# --------------------------------------------------------------------------------------
# long pairs: block-edge checkpoints, then blocks recomputed on the traceback's path


@stored_jit("kernels.wavefront._checkpoint_sweep",
            static_argnames=("local", "equality", "block", "ends"))
def _checkpoint_sweep(q, t, m, n, params, *, local, equality, block, ends=False):
    h, w = q.shape[0], t.shape[0]
    top = border_row(0, w, *border_gaps(params, ends), local)
    left = border_col(0, h, *border_gaps(params, ends), local)
    rows = tuple(range(block, h, block)) if block else ()
    cols = tuple(range(block, w, block)) if block else ()
    out = sweep(q, t, top, left, params, m, n, local=local, equality=equality,
                want_final=not local, want_best=local, row_lines=rows, col_lines=cols,
                ends=ends)
    return _ends(out, m, n, local, top, left), out.get("rows"), out.get("cols")


def checkpoint_sweep(q, t, m: int, n: int, params: Params, *, local: bool, equality: bool,
                     block: int, ends: bool = False):
    """One sweep over a whole (padded) table keeping every ``block``-th row and column
    (none when ``block`` is 0).

    Returns ``(score, end_i, end_j, end_state)`` as Python ints and the edges as host arrays
    ``rows[r // block - 1]`` = ``(3, w + 1)`` M, X, Y of row ``r`` at columns ``0 .. w`` and
    ``cols[c // block - 1]`` = ``(3, h + 1)`` of column ``c`` (index 0 from the border).
    """
    h, w = q.shape[0], t.shape[0]
    result, rows_sk, cols_sk = _checkpoint_sweep(q, t, np.int32(m), np.int32(n), params,
                                                 local=local, equality=equality, block=block,
                                                 ends=ends)
    result = tuple(int(v) for v in result)
    bcol = border_col_host(0, h, *border_gaps(params, ends), local)
    brow = border_row_host(0, w, *border_gaps(params, ends), local)
    rows = []
    if rows_sk is not None:
        rows_sk = np.asarray(rows_sk)                    # (steps, 3, nr)
        j = np.arange(1, w + 1)
        for idx, r in enumerate(range(block, h, block) if block else ()):
            line = np.empty((3, w + 1), np.int32)
            line[:, 0] = bcol[:, r]
            line[:, 1:] = rows_sk[j + r - 2, :, idx].T
            rows.append(line)
    cols = []
    if cols_sk is not None:
        cols_sk = np.asarray(cols_sk)
        i = np.arange(1, h + 1)
        for idx, c in enumerate(range(block, w, block) if block else ()):
            line = np.empty((3, h + 1), np.int32)
            line[:, 0] = brow[:, c]
            line[:, 1:] = cols_sk[c + i - 2, :, idx].T
            cols.append(line)
    return result, rows, cols


@stored_jit("kernels.wavefront.block_dirs", static_argnames=("local", "equality", "ends"))
def block_dirs(q, t, top, left, params: Params, end_row=None, end_col=None, *, local: bool,
               equality: bool, ends: bool = False):
    """Direction bits ``(h + w - 1, h)`` of one block from its top row and left column;
    ``ends``: the table's last row and column are the block's rows ``end_row`` and columns
    ``end_col`` (1-based; out of range when it holds neither)."""
    return sweep(q, t, top, left, params, local=local, equality=equality, want_dirs=True,
                 ends=ends, end_row=end_row, end_col=end_col)["dirs"]


def checkpoint_bytes(h: int, w: int, block: int) -> int:
    """Memory of :func:`checkpoint_sweep` (device and host) and one block's traceback."""
    lines = max(0, (h - 1) // block) + max(0, (w - 1) // block)
    steps = h + w - 1
    return 2 * steps * 3 * 4 * lines + 48 * (h + w) + 4 * block * block + 64 * block


# --------------------------------------------------------------------------------------
# Pallas: one pair per lane


def _pallas_kernel(q_ref, t_ref, m_ref, n_ref, prm_ref, left_ref, buf_in, *refs, h, w, local,
                   equality, size, rows, asm, ends=False, trim=False):
    """Lanes are independent rectangles (pairs, or tiles of one long pair); each runs its own
    in strips of ``rows`` rows, column by column.

    ``buf`` holds the row above (M, X, Y at columns 0..w) and receives each strip's bottom
    row; ``left`` holds column 0 (rows 0..h); ``right`` receives column w (row 0 from the
    top row). A strip keeps its rows' M, X, Y and H of the previous column in registers and
    loads column j + 1 while computing column j. Local: each row keeps its first largest M
    (padded columns score minus infinity) and rows merge in order at the strip's end: ties
    go to the smallest row, then column, as in :func:`jaxrna.kernels.gotoh.sweep`.
    Global: each row keeps its H at column n; the strip holding row m reports it (a lane
    with m = 0 reports minus infinity). ``dirs`` (optional): direction bits ``[i, j]``.
    ``ends``: two more inputs, per lane the rectangle's row and column (1-based) that are the
    table's last (out of range: none), whose Y and X gaps cost the end penalties.
    ``trim`` (whole pairs per lane: scores, ends and direction bits only): the program's loops
    run to its lanes' longest ``m`` (strips) and ``n`` (columns), not to ``h`` and ``w``, so a
    shape is a length class whose lengths are runtime values, and lanes padded with empty
    pairs (``m = n = 0``) cost nothing; the bottom row and right column are then not written.
    """
    del buf_in  # aliased with buf_ref
    if ends:
        erow_ref, ecol_ref, *refs = refs
    score_ref, ei_ref, ej_ref, buf_ref, right_ref, *dirs_ref = refs
    m = m_ref[...]
    n = n_ref[...]
    go, ge, match, mismatch = prm_ref[0], prm_ref[1], prm_ref[2], prm_ref[3]
    base = 4
    if ends:
        eo, ee = prm_ref[4], prm_ref[5]
        erow, ecol = erow_ref[...], ecol_ref[...]
        base = 6
    lanes = m.shape[0]
    neg = jnp.full((lanes,), NEG, jnp.int32)
    zero = jnp.zeros((lanes,), jnp.int32)
    pad_score = jnp.full((lanes,), -(1 << 29), jnp.int32)
    want_dirs = bool(dirs_ref)
    n_end, strips = w + 1, h // rows
    if trim:                              # the lanes' longest pair, not the padded shape
        n_end = jnp.minimum(jnp.max(n), w) + 1
        strips = jax.lax.div(jnp.minimum(jnp.max(m), h) + (rows - 1), rows)

    def add_max(a, b, c):                 # max(a + b, c), one inline-PTX block on the GPU
        return outer_step(jnp.broadcast_to(c, (lanes,)), jnp.broadcast_to(a, (lanes,)),
                          jnp.broadcast_to(b, (lanes,)), asm=asm)

    def max3(v):
        return jnp.maximum(jnp.maximum(v[0], v[1]), v[2])

    def load_column(j):
        return t_ref[j - 1, :], buf_ref[j, 0, :], buf_ref[j, 1, :], buf_ref[j, 2, :]

    for c in range(3):                                   # the top right corner, before strip 0
        right_ref[0, c, :] = buf_ref[w, c, :]

    def strip(sidx, carry):
        score, bi, bj = carry
        r0 = sidx * rows
        qs = [q_ref[r0 + r, :] for r in range(rows)]
        qbase = [base + qc * size for qc in qs]
        row_ids = [r0 + r + 1 for r in range(rows)]   # 1-based rows of the rectangle
        if ends:                                      # the table's last row: end gaps (Y)
            y_gaps = [(jnp.where(rid == erow, eo, go), jnp.where(rid == erow, ee, ge))
                      for rid in row_ids]
        left = [tuple(left_ref[rid, c, :] for c in range(3)) for rid in row_ids]
        lh = [max3(v) for v in left]
        diag0 = max3([left_ref[r0, c, :] for c in range(3)])
        keep = [(neg, zero) for _ in range(rows)] if local else [neg for _ in range(rows)]

        def column(j, c):
            left, lh, diag_top, keep, (tc, top_m, top_x, top_y) = c
            following = load_column(jnp.minimum(j + 1, w))      # in flight while we compute
            pad_col = j > n
            new, new_h = [], []
            up = (top_m, top_x, top_y)
            if ends:                                  # the table's last column: end gaps (X)
                at = j == ecol
                x_gaps = (jnp.where(at, eo, go), jnp.where(at, ee, ge))
            for r in range(rows):
                if equality:
                    s = jnp.where(qs[r] == tc, match, mismatch)
                else:
                    s = prm_ref[qbase[r] + tc]
                if local:
                    s = jnp.where(pad_col, pad_score, s)
                diag = diag_top if r == 0 else lh[r - 1]
                gaps = {"x_gaps": x_gaps, "y_gaps": y_gaps[r]} if ends else {}
                mm, xx, yy, hh, bits = cell(diag, up[0], up[1], up[2], left[r][0], left[r][1],
                                            left[r][2], s, go, ge, local=local,
                                            want_bits=want_dirs, add_max=add_max, **gaps)
                if want_dirs:
                    dirs_ref[0][r0 + r, j - 1, :] = bits
                new.append((mm, xx, yy))
                new_h.append(hh)
                up = (mm, xx, yy)
            if local:
                keep = [(jnp.where(mm > bs, mm, bs), jnp.where(mm > bs, j, bjj))
                        for (mm, _, _), (bs, bjj) in zip(new, keep)]
            else:
                keep = [jnp.where(j == n, hh, kept) for hh, kept in zip(new_h, keep)]
            for c in range(3):
                buf_ref[j, c, :] = new[-1][c]
            diag_top = jnp.maximum(jnp.maximum(top_m, top_x), top_y)
            return new, new_h, diag_top, keep, following

        init = (left, lh, diag0, keep, load_column(1))
        last, _, _, keep, _ = jax.lax.fori_loop(1, n_end, column, init)
        for r, (rid, kept) in enumerate(zip(row_ids, keep)):
            for c in range(3):
                right_ref[rid, c, :] = last[r][c]
            if local:
                better = (rid <= m) & (kept[0] > score)
                score = jnp.where(better, kept[0], score)
                bi = jnp.where(better, rid, bi)
                bj = jnp.where(better, kept[1], bj)
            else:
                score = jnp.where(rid == m, kept, score)
        return score, bi, bj

    score, bi, bj = jax.lax.fori_loop(0, strips, strip, (neg, zero, zero))
    if local:
        empty = score <= 0
        score, bi, bj = (jnp.where(empty, 0, v) for v in (score, bi, bj))
    else:
        bi, bj = m, n
    score_ref[...] = score
    ei_ref[...] = bi
    ej_ref[...] = bj


def _packed_params(params: Params, ends: bool = False):
    size = int(round(params.matrix.shape[0] ** 0.5))
    head = [params.go, params.ge, params.match, params.mismatch]
    if ends:
        head += [params.eo, params.ee]
    prm = jnp.concatenate([jnp.stack(head), params.matrix]).astype(jnp.int32)
    return prm, size


def _lane_call(q, t, m, n, params: Params, left, top, *, local, equality, rows, lanes,
               num_warps, interpret, want_dirs=False, erow=None, ecol=None, trim=False):
    """The kernel over lane-major arrays: ``q`` (h, P), ``t`` (w, P), ``m``, ``n`` (P,),
    ``left`` (h + 1, 3, P), ``top`` (w + 1, 3, P); ``h`` a multiple of ``rows``, ``P`` of
    ``lanes``; ``erow``, ``ecol`` (P,): end gaps in these rows and columns (see
    :func:`_pallas_kernel`), or None; ``trim``: loops to the lanes' longest pair (see there).
    Returns score, end row, end column, bottom row, right
    column[, dirs]."""
    from jax.experimental import pallas as pl

    h, p = q.shape
    w = t.shape[0]
    ends = erow is not None
    prm, size = _packed_params(params, ends)
    kernel = partial(_pallas_kernel, h=h, w=w, local=local, equality=equality, size=size,
                     rows=rows, asm=not interpret, ends=ends, trim=trim)
    lane = pl.BlockSpec((lanes,), lambda i: (i,))
    edge = lambda k: pl.BlockSpec((k + 1, 3, lanes), lambda i: (0, 0, i))  # noqa: E731
    i32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.int32)  # noqa: E731
    out_specs = [lane, lane, lane, edge(w), edge(h)]
    out_shape = [i32(p), i32(p), i32(p), i32(w + 1, 3, p), i32(h + 1, 3, p)]
    if want_dirs:
        out_specs.append(pl.BlockSpec((h, w, lanes), lambda i: (0, 0, i)))
        out_shape.append(jax.ShapeDtypeStruct((h, w, p), jnp.uint8))
    extra = (jnp.asarray(erow, jnp.int32), jnp.asarray(ecol, jnp.int32)) if ends else ()
    return pl.pallas_call(
        kernel,
        grid=(p // lanes,),
        in_specs=[pl.BlockSpec((h, lanes), lambda i: (0, i)),
                  pl.BlockSpec((w, lanes), lambda i: (0, i)),
                  lane, lane, pl.BlockSpec(prm.shape, lambda i: (0,)), edge(h), edge(w)]
        + [lane] * len(extra),
        out_specs=out_specs,
        out_shape=out_shape,
        input_output_aliases={6: 3},
        interpret=interpret,
        **({} if interpret else {"compiler_params": _triton_params(num_warps)}),
    )(q, t, m, n, prm, left.astype(jnp.int32), top.astype(jnp.int32), *extra)


@stored_jit("kernels.wavefront.pallas_scores",
            static_argnames=("local", "equality", "interpret", "rows", "lanes", "num_warps",
                             "ends"))
def pallas_scores(q, t, m, n, params: Params, *, local: bool, equality: bool,
                  interpret: bool = False, rows: int = LANE_ROWS, lanes: int = LANES,
                  num_warps: int = NUM_WARPS, ends: bool = False):
    """Scores and end cells of pairs ``q[b, :m[b]]`` x ``t[b, :n[b]]``, one pair per lane.

    Same results as :func:`batch_sweep` (without direction bits). ``q``: ``(B, h)``, ``t``:
    ``(B, w)`` int32 codes; ``B`` is padded to a multiple of ``lanes`` and ``h`` to a
    multiple of ``rows`` internally. ``num_warps``: Triton warps per program (GPU only).
    """
    b, h = q.shape
    w = t.shape[1]
    bp = -(-b // lanes) * lanes
    hp = -(-h // rows) * rows
    qT = jnp.zeros((hp, bp), jnp.int32).at[:h, :b].set(q.T.astype(jnp.int32))
    tT = jnp.zeros((w, bp), jnp.int32).at[:, :b].set(t.T.astype(jnp.int32))
    mp = jnp.zeros((bp,), jnp.int32).at[:b].set(m)
    np_ = jnp.zeros((bp,), jnp.int32).at[:b].set(n)
    top = border_row(0, w, *border_gaps(params, ends), local)[:, :, None]
    left = border_col(0, hp, *border_gaps(params, ends), local)[:, :, None]
    score, ei, ej, *_ = _lane_call(
        qT, tT, mp, np_, params, jnp.broadcast_to(left.transpose(1, 0, 2), (hp + 1, 3, bp)),
        jnp.broadcast_to(top.transpose(1, 0, 2), (w + 1, 3, bp)), local=local,
        equality=equality, rows=rows, lanes=lanes, num_warps=num_warps, interpret=interpret,
        trim=True, **({"erow": mp, "ecol": np_} if ends else {}))
    return score[:b], ei[:b], ej[:b]


@stored_jit("kernels.wavefront.lanes_align",
            static_argnames=("local", "equality", "interpret", "rows", "lanes", "num_warps",
                             "ends"))
def lanes_align(q, t, m, n, params: Params, *, local: bool, equality: bool,
                interpret: bool = False, rows: int = STRIP_ROWS, lanes: int = LANES,
                num_warps: int = NUM_WARPS, ends: bool = False):
    """Alignments of pairs ``q[b, :m[b]]`` x ``t[b, :n[b]]``, one pair per lane of the Pallas
    kernel writing direction bits ``(h, w, B)``, traced back on the device; the results of
    :func:`batch_align` (same ends, starts and ops). ``q`` ``(B, h)``, ``t`` ``(B, w)`` codes
    with ``B`` a multiple of ``lanes`` and ``h`` of ``rows``; ``h * w * B < 2**31``.
    """
    b, h = q.shape
    w = t.shape[1]
    qT = q.T.astype(jnp.int32)
    tT = t.T.astype(jnp.int32)
    m = jnp.asarray(m, jnp.int32)
    n = jnp.asarray(n, jnp.int32)
    top = border_row(0, w, *border_gaps(params, ends), local)[:, :, None]
    left = border_col(0, h, *border_gaps(params, ends), local)[:, :, None]
    score, ei, ej, _, _, dirs = _lane_call(
        qT, tT, m, n, params, jnp.broadcast_to(left.transpose(1, 0, 2), (h + 1, 3, b)),
        jnp.broadcast_to(top.transpose(1, 0, 2), (w + 1, 3, b)), local=local,
        equality=equality, rows=rows, lanes=lanes, num_warps=num_warps, interpret=interpret,
        want_dirs=True, trim=True, **({"erow": m, "ecol": n} if ends else {}))
    flat = dirs.reshape(-1)
    lane = jnp.arange(b, dtype=jnp.int32)

    def bits_at(i, j):
        return flat[((i - 1) * w + (j - 1)) * b + lane]

    si, sj, ops, length = walk_ops(bits_at, score, ei, ej, local=local, steps=h + w)
    return score, ei, ej, si, sj, ops, length


# --------------------------------------------------------------------------------------
# Pallas: seed 002's block wavefront for long pairs, one tile per lane


@stored_jit("kernels.wavefront.tile_wavefront",
            static_argnames=("local", "equality", "tile", "block", "want_dirs", "rows", "lanes",
                             "num_warps", "interpret", "ends"))
def tile_wavefront(q, t, top, left, m, n, params: Params, end_row=None, end_col=None, *,
                   local: bool, equality: bool, tile: int = 128, block: int = 0,
                   want_dirs: bool = False, rows: int = STRIP_ROWS, lanes: int = LANES,
                   num_warps: int = NUM_WARPS, interpret: bool = False, ends: bool = False):
    """One long rectangle as tiles along block antidiagonals (seed 002's schedule, any length).

    ``q`` (h,) and ``t`` (w,) codes with ``h``, ``w`` multiples of ``tile``; ``top`` (3, w + 1)
    and ``left`` (3, h + 1) its borders (:func:`border_row` / :func:`border_col` for a whole
    table); ``m``, ``n`` its true extent. The tiles of one block antidiagonal are independent:
    they run as the lanes of one :func:`_pallas_kernel` launch, each from the bottom row of
    the tile above and the right column of the tile to its left.

    Returns a dict: ``score``, ``end_i``, ``end_j`` (as :func:`pair_sweep`: global H at
    (m, n); local best M, ties to the smallest row then column, 0 when none is positive);
    with ``block``, ``rows`` ``(h // block - 1, 3, w + 1)`` and ``cols`` likewise: M, X, Y
    of every ``block``-th row and column (the checkpoints of the traceback); with
    ``want_dirs``, ``dirs`` ``(h, w)`` direction bits of every cell (row-major, unskewed).

    ``ends``: the table's last row and column (``end_row``, ``end_col``, 1-based in the
    rectangle, default ``m``, ``n``) take the end gap penalties (the borders are the caller's).
    """
    h, w = q.shape[0], t.shape[0]
    nbr, nbc = h // tile, w // tile
    width = -(-min(nbr, nbc) // lanes) * lanes
    big = jnp.int32(1 << 30)
    qt, tt = q.astype(jnp.int32).reshape(nbr, tile), t.astype(jnp.int32).reshape(nbc, tile)
    top, left = top.astype(jnp.int32), left.astype(jnp.int32)
    span = jnp.arange(tile + 1)
    bottoms = top[:, jnp.arange(nbc)[:, None] * tile + span].transpose(1, 2, 0)  # (nbc, T+1, 3)
    rights = left[:, jnp.arange(nbr)[:, None] * tile + span].transpose(1, 2, 0)
    row_at = tuple(range(block, h, block)) if block else ()
    col_at = tuple(range(block, w, block)) if block else ()
    rowl = jnp.zeros((len(row_at), w + 1, 3), jnp.int32)
    coll = jnp.zeros((len(col_at), h + 1, 3), jnp.int32)
    if row_at:
        rowl = rowl.at[:, 0].set(left[:, jnp.asarray(row_at)].T)
    if col_at:
        coll = coll.at[:, 0].set(top[:, jnp.asarray(col_at)].T)
    dirs = jnp.zeros((h, w) if want_dirs else (0, 0), jnp.uint8)
    inner = jnp.arange(tile)
    if ends:
        erow = jnp.asarray(m if end_row is None else end_row, jnp.int32)
        ecol = jnp.asarray(n if end_col is None else end_col, jnp.int32)

    def diagonal(d, carry):
        bottoms, rights, rowl, coll, dirs, fin, best = carry
        bj = jnp.maximum(0, d - nbr + 1) + jnp.arange(width)
        bi = d - bj
        valid = (bj < nbc) & (bi >= 0)
        bjc, bic = jnp.clip(bj, 0, nbc - 1), jnp.clip(bi, 0, nbr - 1)
        r0, c0 = bic * tile, bjc * tile
        if local:
            mr = jnp.where(valid, jnp.clip(m - r0, 0, tile), 0)
            nr = jnp.where(valid, jnp.clip(n - c0, 0, tile), 0)
        else:
            inside = valid & (m > r0) & (m <= r0 + tile) & (n > c0) & (n <= c0 + tile)
            mr, nr = jnp.where(inside, m - r0, 0), jnp.where(inside, n - c0, 0)
        tail = {}
        if ends:                                 # the table's last row and column, per tile
            tail = {"erow": (erow - r0).astype(jnp.int32), "ecol": (ecol - c0).astype(jnp.int32)}
        out = _lane_call(qt[bic].T, tt[bjc].T, mr.astype(jnp.int32), nr.astype(jnp.int32),
                         params, rights[bic].transpose(1, 2, 0), bottoms[bjc].transpose(1, 2, 0),
                         local=local, equality=equality, rows=rows, lanes=lanes,
                         num_warps=num_warps, interpret=interpret, want_dirs=want_dirs, **tail)
        score, ei, ej, bottom, right = out[:5]
        bottom, right = bottom.transpose(2, 0, 1), right.transpose(2, 0, 1)   # (P, T+1, 3)
        bottoms = bottoms.at[jnp.where(valid, bjc, nbc)].set(bottom, mode="drop")
        rights = rights.at[jnp.where(valid, bic, nbr)].set(right, mode="drop")
        if row_at:
            edge = r0 + tile
            line = jnp.where(valid & (edge % block == 0) & (edge < h), edge // block - 1, len(row_at))
            rowl = rowl.at[line[:, None], c0[:, None] + 1 + inner].set(bottom[:, 1:], mode="drop")
        if col_at:
            edge = c0 + tile
            line = jnp.where(valid & (edge % block == 0) & (edge < w), edge // block - 1, len(col_at))
            coll = coll.at[line[:, None], r0[:, None] + 1 + inner].set(right[:, 1:], mode="drop")
        if want_dirs:
            ri = jnp.where(valid, r0, h)[:, None, None] + inner[None, :, None]
            dirs = dirs.at[ri, c0[:, None, None] + inner[None, None, :]].set(
                out[5].transpose(2, 0, 1), mode="drop")
        if local:
            gi, gj, s = r0 + ei, c0 + ej, jnp.where(valid, score, 0)
            top_s = jnp.max(s)
            cand = (s == top_s) & (s > 0)
            gi_min = jnp.min(jnp.where(cand, gi, big))
            gj_min = jnp.min(jnp.where(cand & (gi == gi_min), gj, big))
            better = (top_s > best[0]) | ((top_s == best[0]) & (
                (gi_min < best[1]) | ((gi_min == best[1]) & (gj_min < best[2]))))
            best = jnp.where(better, jnp.stack([top_s, gi_min, gj_min]), best)
        else:
            fin = jnp.maximum(fin, jnp.max(jnp.where(valid, score, NEG)))
        return bottoms, rights, rowl, coll, dirs, fin, best

    init = (bottoms, rights, rowl, coll, dirs, jnp.int32(NEG),
            jnp.stack([jnp.int32(0), big, big]))
    _, _, rowl, coll, dirs, fin, best = jax.lax.fori_loop(0, nbr + nbc - 1, diagonal, init)
    if local:
        empty = best[0] <= 0
        score, ei, ej = (jnp.where(empty, 0, v) for v in (best[0], best[1], best[2]))
    else:
        score, ei, ej = fin, jnp.int32(m), jnp.int32(n)
    out = {"score": score, "end_i": ei, "end_j": ej}
    if block:
        out["rows"] = rowl.transpose(0, 2, 1)
        out["cols"] = coll.transpose(0, 2, 1)
    if want_dirs:
        out["dirs"] = dirs
    return out
