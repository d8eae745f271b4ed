"""The miRanda fill in JAX: the three-state recurrence written once, batched over target lanes.

:func:`column_step` is the recurrence of one matrix column for one miRNA, over arrays whose
leading axis is the matrix row (the reversed miRNA) and whose trailing axes are a batch of
independent lanes (one pair is a batch of one). From the previous column's states it computes

- state a: the previous column's best-of-three one row up, plus the position-specific pair
  score, clipped at 0;
- state b: a gap in the miRNA, from the previous column's a (open) or b (extend);
- state c: a gap in the target, down the column from a (open) or c (extend), pinned to -1 in
  seed rows;

with miRanda's tie order (a, then b, then c). The batch lives in the trailing, contiguous axis
(the batching is by broadcasting rather than ``vmap``: ``vmap`` puts the batch first, which
makes every row operation strided and runs 3x slower on CPU). The row recurrence of state c runs
in a ``fori_loop``: unrolled, XLA duplicates the chain into every consumer.

A ``lax.scan`` over columns drives it in two modes:

- ``flags`` (the bulk scan, :func:`scan_lanes_words`; :func:`scan_lanes` unpacked): whether
  each column holds a candidate (a cell whose best is at least the threshold and whose best
  state is not b), 32 columns packed per int32 word. A lane is a stretch of a packed stream of
  targets; a reset flag on a column starts a new target (the states restart from the zero
  boundary miRanda uses at column 0).
- ``full`` (:func:`fill_segments`, short segments around candidates): every cell's best score
  and packed traceback codes, from which hits are extracted exactly on the host.

The GPU kernels in :mod:`jaxrna.kernels.miranda_fill` compute the same two things in Pallas.

Seed rows are static: rows are aligned at the miRNA 5' end, so positions 2..8 are always the
seven rows above the last one, where c is pinned (-1, or 0 in padding rows).
Rows are padded at the top (the miRNA 3' end) to a bucketed height with rows that score far
below zero and have zero gap penalties: they hold a = b = c = 0, exactly miRanda's row 0.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from jaxrna.kernels.miranda_lanes import RESET, SEED_SPAN, WORD  # noqa: F401  (the layout)
from jaxrna.programs import stored_jit
from jaxrna.targets.track import T0_MASK, T1_SHIFT, T2_BIT, T3_BIT, unpack_track  # noqa: F401


def _down(x, fill=0):
    """Shift rows down by one (row r gets row r-1), filling row 0."""
    pad = ((1, 0, 0),) + ((0, 0, 0),) * (x.ndim - 1)
    return jax.lax.pad(x[:-1], jnp.asarray(fill, x.dtype), pad)


def _argmax3(a, b, c):
    """miRanda's tie order: a, then b, then c (codes 1, 2, 3)."""
    return jnp.where((a >= b) & (a >= c), 1, jnp.where(b >= c, 2, 3)).astype(jnp.uint8)


def column_step(carry, t, tables, *, threshold, full: bool):
    """One column of the recurrence. ``carry`` = (a, b, c, m) of the previous column, each
    (N, *batch); ``t`` (*batch) lane codes (base 0..4, plus :data:`RESET`); ``tables`` =
    (profile (5, N, ...), gap_open, gap_extend (N, ...), seed (N, ...)) broadcastable to
    (N, *batch). Returns the new carry and the column's output."""
    profile, gap_open, gap_extend, seed = tables
    a_p, b_p, c_p, m_p = carry
    dtype = a_p.dtype
    zero = jnp.zeros((), dtype)
    reset = (t & RESET) != 0
    base = t & 7
    a_p, b_p, c_p, m_p = (jnp.where(reset, zero, x) for x in (a_p, b_p, c_p, m_p))
    s = jnp.where(base == 0, profile[0], jnp.where(base == 1, profile[1], jnp.where(
        base == 2, profile[2], jnp.where(base == 3, profile[3], profile[4]))))
    a_raw = _down(m_p) + s
    a = jnp.maximum(a_raw, zero)
    from_a, from_b = a_p + gap_open, b_p + gap_extend
    b = jnp.maximum(from_a, from_b)
    up_a = _down(a) + gap_open
    n_rows = a.shape[0]
    ext_b = jnp.broadcast_to(gap_extend, a.shape)
    # Rows are aligned at the miRNA 5' end (padding on top), so the seed rows (positions 2..8)
    # are always the rows just above the last one (position 1): c = -1 there (0 in padding
    # rows, which also hold a = b = c = 0), and c only runs down the column above them.
    chain = max(n_rows - SEED_SPAN - 1, 0)

    def row(r, c):
        prev = jnp.where(r == 0, zero, c[jnp.maximum(r - 1, 0)])
        return c.at[r].set(jnp.maximum(up_a[r], prev + ext_b[r]))

    below = (jnp.arange(n_rows) >= chain).reshape((n_rows,) + (1,) * (a.ndim - 1))
    c = jnp.broadcast_to(jnp.where(below & seed, jnp.asarray(-1, dtype), zero), a.shape)
    if chain:
        c = jax.lax.fori_loop(0, chain, row, c)
    above = c[-2] if n_rows > 1 else zero
    c = c.at[-1].set(jnp.maximum(up_a[-1], above + ext_b[-1]))
    m = jnp.maximum(jnp.maximum(a, b), c)
    if not full:
        hit = (m >= threshold) & ((a >= b) | (c > b))
        col = hit[0]
        for r in range(1, n_rows):  # a column reduction XLA vectorises (jnp.any(axis=0) does not)
            col = col | hit[r]
        return (a, b, c, m), col
    best = jnp.maximum(m, zero)
    t0 = jnp.where(m > 0, _argmax3(a, b, c), jnp.uint8(0))
    t1 = jnp.where(a_raw > 0, _argmax3(_down(a_p), _down(b_p), _down(c_p)), jnp.uint8(0))
    from_c = (~jnp.broadcast_to(seed, a.shape)) & (_down(c) + ext_b > up_a)
    code = (t0 | (t1 << T1_SHIFT) | jnp.where(from_b > from_a, jnp.uint8(T2_BIT), jnp.uint8(0))
            | jnp.where(from_c, jnp.uint8(T3_BIT), jnp.uint8(0)))
    return (a, b, c, m), (best, code)


def _run(tables, lanes, dtype, threshold, full):
    n_rows = tables[1].shape[0]
    init = tuple(jnp.zeros((n_rows,) + lanes.shape[1:], dtype) for _ in range(4))
    step = partial(column_step, tables=tables, threshold=threshold, full=full)
    return jax.lax.scan(step, init, lanes)[1]


@stored_jit("targets.scan.scan_lanes", static_argnames=("dtype",))
def scan_lanes(profile, gap_open, gap_extend, seed, lanes, *, threshold, dtype=jnp.int16):
    """Bulk scan of one miRNA: ``profile`` (5, N, 1), ``gap_open``/``gap_extend``/``seed``
    (N, 1), ``lanes`` (L, B) int8 codes. Returns (L, B) flags: the column holds a candidate."""
    tables = (profile.astype(dtype), gap_open.astype(dtype), gap_extend.astype(dtype), seed)
    return _run(tables, lanes, dtype, jnp.asarray(threshold, dtype), False)


def scan_words(profile, gap_open, gap_extend, seed, lanes, threshold, n_words, dtype):
    """The packed bulk scan (see :func:`scan_lanes_words`) of the first ``n_words`` words of
    ``lanes`` (a traced count: the loop's bound, so one program serves every lane length up to
    the array's); the words past it are left 0."""
    tables = (profile.astype(dtype), gap_open.astype(dtype), gap_extend.astype(dtype), seed)
    threshold = jnp.asarray(threshold, dtype)
    n_rows = tables[1].shape[0]
    step = partial(column_step, tables=tables, threshold=threshold, full=False)
    total_words = lanes.shape[0] // WORD
    words = lanes.reshape((total_words, WORD) + lanes.shape[1:])

    def word(w, carry):
        state, out = carry

        def col(k, c):
            state, bits = c
            state, flag = step(state, words[w, k])
            return state, bits | (flag.astype(jnp.int32) << k)

        state, bits = jax.lax.fori_loop(0, WORD, col, (state, jnp.zeros(lanes.shape[1:], jnp.int32)))
        return state, out.at[w].set(bits)

    init = tuple(jnp.zeros((n_rows,) + lanes.shape[1:], dtype) for _ in range(4))
    out = jnp.zeros((total_words,) + lanes.shape[1:], jnp.int32)
    bound = total_words if n_words is None else jnp.minimum(jnp.asarray(n_words, jnp.int32), total_words)
    return jax.lax.fori_loop(0, bound, word, (init, out))[1]


@stored_jit("targets.scan.scan_lanes_words", static_argnames=("dtype",))
def scan_lanes_words(profile, gap_open, gap_extend, seed, lanes, *, threshold, n_words=None,
                     dtype=jnp.int16):
    """:func:`scan_lanes` with the flags packed 32 columns to an int32 word per lane (L a
    multiple of 32): (L/32, B); bit k of word w is column 32 w + k. 8x less output to move and
    search than one flag per column. ``n_words`` (traced; default all): scan only the first
    ``n_words`` words (the rest come back 0)."""
    return scan_words(profile, gap_open, gap_extend, seed, lanes, threshold, n_words, dtype)


@stored_jit("targets.scan.fill_segments", static_argnames=("dtype",))
def fill_segments(profile, gap_open, gap_extend, seed, lanes, *, threshold=0, dtype=jnp.int16):
    """Full matrices of independent segments, each with its own miRNA: ``profile`` (5, N, B),
    ``gap_open``/``gap_extend``/``seed`` (N, B), ``lanes`` (L, B). Returns (L, N, B) best scores
    and (L, N, B) packed track codes (:func:`unpack_track`)."""
    tables = (profile.astype(dtype), gap_open.astype(dtype), gap_extend.astype(dtype), seed)
    return _run(tables, lanes, dtype, threshold, True)
