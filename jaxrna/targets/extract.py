"""Device-side candidate extraction: from the bulk scan's flag words to traced candidates.

The bulk scan (:mod:`jaxrna.targets.scan`, :mod:`jaxrna.kernels.miranda_fill`) packs, per
miRNA, one flag per column of its lanes into 32-column words. Per block of miRNAs:

1. :func:`segment_counts`: every word that holds a flag in a column its lane owns (and that is
   a real target base) is a *tile* of at most 32 stream columns; tiles are counted per miRNA
   (the one small read-back before the refill, which sizes the launch).
2. :func:`segment_tiles`: the tiles laid out lane by lane, each miRNA's padded to whole blocks
   of :data:`~jaxrna.kernels.miranda_fill.BLOCK` lanes (one Pallas program serves one miRNA).
3. :func:`trace_candidates`, per batch of lanes: each tile is refilled as a segment of
   ``lead + 32`` columns starting ``lead`` columns before it (``lead >= 2 W``: values are exact
   from column ``W`` on, :func:`~jaxrna.targets.scoring.exact_overlap`, and a traceback from the
   tile reaches back at most ``W`` more); a new target inside a segment restarts the states, as
   in the bulk scan. The candidate cells of the tile (best >= threshold, best's state not b)
   are compacted to a fixed capacity and traced back on the device, every candidate one step
   per round, the moves packed 2 bits each (:class:`~jaxrna.targets.select.Traced`).

Only the compacted candidates cross to the host (about 50 bytes each, against ~150 MB of full
matrices per miRNA before). Sorting, filtering and the hit strings are host work
(:mod:`jaxrna.targets.select`).

>>> words = np.zeros((1, 2, 1), np.int32)  # one miRNA, one lane of 64 columns, 32 of them owned
>>> words[0, 0, 0] = 1                      # a flag in the overlap (not owned)
>>> int(segment_counts(words, 32, 32, 1, 100)[0])
0
>>> words[0, 1, 0] = 5                      # flags in columns 32 and 34: one tile
>>> int(segment_counts(words, 32, 32, 1, 100)[0])
1
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np  # noqa: F401  (the doctests use it)

from jaxrna.programs import stored_jit
from jaxrna.targets.scan import WORD, fill_segments
from jaxrna.targets.select import MOVES_PER_WORD, ROW_FIELDS

#: Lanes per Pallas program (the refill kernel's block).
LANE_BLOCK = 128
#: Columns of a fields row of the packed result: q, t, i, j, i0, j0, score, nsteps, tcol.
FIELDS = ROW_FIELDS
#: Words of traceback moves per round of :func:`trace_candidates` (the host reads the loop
#: condition back once a round).
ROUND_WORDS = 2


def _upto(k):
    """uint32 masks of bits 0..k-1 (k in 0..32)."""
    one = jnp.uint32(1)
    return jnp.where(k >= WORD, jnp.uint32(0xFFFFFFFF),
                     (one << jnp.clip(k, 0, WORD - 1).astype(jnp.uint32)) - one)


def _tiles(words, width, span, n_lanes, total):
    """``flagged`` (Q, B, Lw): word (w, b) of miRNA q has a flag in an owned real column;
    ``p0`` (B, Lw) the stream position of the tile's first owned column, ``own`` its columns."""
    _, n_words, n_b = words.shape
    x0 = WORD * jnp.arange(n_words, dtype=jnp.int32)[None, :]
    b = jnp.arange(n_b, dtype=jnp.int32)[:, None]
    lo = jnp.clip(width - x0, 0, WORD)
    end = jnp.minimum(width + span, total - b * span + width)   # lane columns holding real bases
    hi = jnp.where(b < n_lanes, jnp.clip(end - x0, 0, WORD), 0)
    mask = _upto(hi) & ~_upto(lo)
    bits = jax.lax.bitcast_convert_type(words, jnp.uint32).transpose(0, 2, 1)
    flagged = (bits & mask[None]) != 0
    return flagged, b * span + x0 + lo - width, jnp.maximum(hi - lo, 0)


@stored_jit("targets.extract.segment_counts", cpu_store=True)
def segment_counts(words, width, span, n_lanes, total):
    """Tiles per miRNA: ``words`` (Q, L/32, B) packed flags; the rest the chunk's geometry."""
    return _tiles(words, width, span, n_lanes, total)[0].sum(axis=(1, 2), dtype=jnp.int32)


def tiles_size(words_shape: tuple, batch: int) -> int:
    """Slots of :func:`segment_tiles`' output for flag words of ``words_shape`` (Q, L/32, B):
    room for every word of every miRNA, each miRNA's tiles padded to whole lane blocks, in
    whole launches of ``batch`` lanes (a size fixed by the shapes: one program)."""
    q, n_words, n_b = words_shape
    need = q * (n_words * n_b + LANE_BLOCK)
    return -(-need // batch) * batch


@stored_jit("targets.extract.segment_tiles", static_argnames=("batch",), cpu_store=True)
def segment_tiles(words, width, span, n_lanes, total, offsets, n_live, *, batch: int):
    """``(p0, own)`` (:func:`tiles_size`,) of the tiles, miRNA q's tiles in stream order at
    lanes ``offsets[q]...`` (the first ``n_live`` miRNAs; the others are left out). Unused
    lanes own no columns. The geometry and ``n_live`` are traced: one program per shape."""
    flagged, p0, own = _tiles(words, width, span, n_lanes, total)
    n_q = flagged.shape[0]
    n_out = tiles_size(words.shape, batch)
    flat = flagged.reshape(n_q, -1)
    rank = jnp.cumsum(flat, axis=1, dtype=jnp.int32) - 1          # the tile's rank in its miRNA
    live = (jnp.arange(n_q, dtype=jnp.int32) < n_live)[:, None]
    dest = jnp.where(flat & live, offsets[:, None] + rank, n_out).reshape(-1)
    p0 = jnp.broadcast_to(p0.reshape(1, -1), flat.shape).reshape(-1)
    own = jnp.broadcast_to(own.reshape(1, -1), flat.shape).reshape(-1)
    start = jnp.zeros(n_out, jnp.int32).at[dest].set(p0, mode="drop")
    count = jnp.zeros(n_out, jnp.int32).at[dest].set(own, mode="drop")
    return start, count


@stored_jit("targets.extract.refill_tiles", static_argnames=("lead", "pallas", "dtype", "interpret"))
def refill_tiles(stream, front, p0, qidx, profile, gap_open, gap_extend, seed, threshold, *, lead: int,
                 pallas: bool, dtype=jnp.int32, interpret: bool = False):
    """Full matrices of tiles refilled as segments of ``lead + 32`` columns: ``p0`` (B,) each
    tile's first stream position; ``stream`` the chunk's codes (reset flags on each target's
    first base) after ``front`` filler columns; ``qidx`` (B / 128,) each lane block's miRNA (row
    of the tables ``profile`` (Q, 5, H), ``gap_open``/``gap_extend``/``seed`` (Q, H)), -1 for
    none. Returns ``best`` (32, H, B) of the tile columns and ``code`` (lead + 32, H, B) packed
    track codes of every column (:func:`jaxrna.targets.track.unpack_track`)."""
    length = lead + WORD
    lanes = stream[front + (p0 - lead)[None, :] + jnp.arange(length, dtype=jnp.int32)[:, None]]
    if pallas:
        from jaxrna.kernels.miranda_fill import refill_pallas

        return refill_pallas(qidx, profile, gap_open, gap_extend, seed, lanes, lead=lead,
                             interpret=interpret)
    lq = jnp.maximum(jnp.repeat(qidx, LANE_BLOCK), 0)
    best, code = fill_segments(profile[lq].transpose(1, 2, 0), gap_open[lq].T, gap_extend[lq].T,
                               seed[lq].T.astype(bool), lanes, threshold=threshold, dtype=dtype)
    return best[lead:], code


@stored_jit("targets.extract.trace_candidates", static_argnames=("lead", "capacity", "n_words"))
def trace_candidates(best, code, starts, p0, own, qidx, pads, overlaps, threshold, max_steps, skip=0, *,
                     lead: int, capacity: int, n_words: int):
    """The candidates of refilled tiles (:func:`refill_tiles`), each traced back.

    ``own`` (B,) the tile columns each lane owns; ``starts`` each target's first stream
    position (padded with a large value); ``pads`` (Q,) each miRNA's padding rows,
    ``overlaps`` (Q,) its exact overlap W; tracebacks take at most ``max_steps`` moves
    (``n_words`` words of 16). Returns ``(rows, sizes)``: ``rows`` (capacity, 9 + n_words) int32
    holding, for the first ``count`` candidates (when ``count <= capacity``; in lane order, so
    grouped by miRNA): miRNA, target, i, j, i0, j0, score, moves, the target's first column in
    the segment, then the packed moves; ``sizes`` = ``(count, the longest traceback's moves,
    broken)`` (one read-back sizes the fetch), ``broken`` counting the tracebacks that ran to
    their step bound or read a segment column before the exact part (none, by the choice of
    ``lead`` and ``max_steps``: the host refuses the result otherwise). ``skip`` (traced):
    leave out the candidates before this flat index, so a launch with more candidates than
    ``capacity`` is fetched in parts by one program; ``sizes`` then also holds the flat index
    of the last candidate returned (where the next part starts after)."""
    height = best.shape[1]
    own_max = WORD
    base = p0 - lead
    lane_q = jnp.repeat(qidx, LANE_BLOCK)
    ok = ((best >= threshold) & ((code[lead:] & 3) != 2)
          & (jnp.arange(own_max)[:, None, None] < own[None, None, :]) & (lane_q >= 0)[None, None, :])
    ok = ok.transpose(2, 0, 1).reshape(-1)  # (lane, column, row): lane order
    ok = ok & (jnp.arange(ok.shape[0], dtype=jnp.int32) >= skip)
    count = ok.sum(dtype=jnp.int32)
    flat = jnp.nonzero(ok, size=capacity, fill_value=0)[0].astype(jnp.int32)
    valid = jnp.arange(capacity) < count
    s = flat // (own_max * height)
    c = (flat // height) % own_max
    r = flat % height
    cs = lead + c
    score = best[c, r, s].astype(jnp.int32)
    q = lane_q[s]
    pos = base[s] + cs
    t = (jnp.searchsorted(starts, pos, side="right") - 1).astype(jnp.int32)
    tcol = starts[t] - base[s]
    pad = pads[jnp.maximum(q, 0)]
    i_end = r - pad + 1
    j_end = cs - tcol + 1
    state = (code[cs, r, s].astype(jnp.int32) & 3)

    # one round = ROUND_WORDS words of 16 moves (few rounds: few host round trips, each round's
    # loop condition is read back by the host)
    per_round = ROUND_WORDS if n_words % ROUND_WORDS == 0 else 1

    def cond(carry):
        w, _, _, _, active, _, _ = carry
        return (w < n_words) & (w * MOVES_PER_WORD < max_steps) & jnp.any(active)

    def move(step, carry):  # one traceback step of every candidate
        i, j, state, active, nsteps, word = carry
        act = active & (i > 0) & (j > 0)
        cc = jnp.where(act, j + tcol - 1, 0)
        rr = jnp.where(act, i - 1 + pad, 0)
        bits = code[cc, rr, s].astype(jnp.int32) & 0xFF
        act = act & ((bits & 3) != 0) & (state != 0)
        word = word | (jnp.where(act, state, 0).astype(jnp.uint32) << (2 * jnp.asarray(step, jnp.uint32)))
        nxt = jnp.where(state == 1, (bits >> 2) & 3,
                        jnp.where(state == 2, jnp.where(bits & 16, 2, 1), jnp.where(bits & 32, 3, 1)))
        i = jnp.where(act & ((state == 1) | (state == 3)), i - 1, i)
        j = jnp.where(act & ((state == 1) | (state == 2)), j - 1, j)
        state = jnp.where(act, nxt, state)
        return i, j, state, act, nsteps + act, word

    def body(carry):
        w, i, j, state, active, nsteps, words = carry
        round_words = []
        for _ in range(per_round):
            step_carry = (i, j, state, active, nsteps, jnp.zeros(capacity, jnp.uint32))
            # a loop, on GPUs too: the 16 steps unrolled took 3.8 s more to compile on an H100
            # (refill_and_trace 11.0 s against 7.2) and ran no faster
            step_carry = jax.lax.fori_loop(0, MOVES_PER_WORD, move, step_carry)
            i, j, state, active, nsteps, word = step_carry
            round_words.append(word)
        words = jax.lax.dynamic_update_slice(words, jnp.stack(round_words), (w, 0))
        return w + per_round, i, j, state, active, nsteps, words

    init = (jnp.int32(0), i_end, j_end, state, valid, jnp.zeros(capacity, jnp.int32),
            jnp.zeros((n_words, capacity), jnp.uint32))
    _, i0, j0, _, _, nsteps, words = jax.lax.while_loop(cond, body, init)
    words = words.T
    rows = jnp.concatenate([jnp.stack([q, t, i_end, j_end, i0, j0, score, nsteps, tcol], axis=1),
                            jax.lax.bitcast_convert_type(words, jnp.int32)], axis=1)
    longest = jnp.max(jnp.where(valid, nsteps, 0))
    # the leftmost segment column the traceback read is j0 + tcol - 1 (tcol < 0: the target
    # began before the segment); it must lie in the exact part, from column W on
    left = (tcol < 0) & (j0 + tcol - 1 < overlaps[jnp.maximum(q, 0)])
    broken = jnp.sum(valid & ((nsteps >= max_steps) | left), dtype=jnp.int32)
    return rows, jnp.stack([count, longest, broken, flat[capacity - 1]])


#: Move words of the narrow heads :func:`refill_and_trace` returns besides the whole rows
#: (tracebacks of up to 32 moves: every miRNA of ordinary length).
HEAD_WORDS = 2
#: Heads of ``capacity >> k`` rows, k in HEAD_SHIFTS (the host fetches the smallest that holds
#: its candidates: at most twice their rows cross).
HEAD_SHIFTS = (3, 2, 1, 0)


@stored_jit("targets.extract.refill_and_trace",
            static_argnames=("batch", "lead", "pallas", "dtype", "interpret", "capacity", "n_words"),
            cpu_store=True)
def refill_and_trace(stream, front, tile_start, tile_own, first, qidx, profile, gap_open, gap_extend,
                     seed, starts, pads, overlaps, threshold, max_steps, skip, *, batch: int, lead: int,
                     pallas: bool, dtype, interpret: bool, capacity: int, n_words: int):
    """One launch of the extraction: the tiles ``first .. first + batch`` of
    :func:`segment_tiles`' output refilled (:func:`refill_tiles`) and their candidates traced
    (:func:`trace_candidates`, from flat index ``skip``), in one program whose every size is
    fixed by the block's shapes (``first``, ``skip``, the threshold and the step bound are
    traced). Returns ``(heads, rows, sizes)``: ``heads`` the first ``capacity >> k`` rows
    (k in :data:`HEAD_SHIFTS`) with :data:`HEAD_WORDS` move words, so the host reads back only
    about the rows and words it needs; ``rows`` and ``sizes`` as :func:`trace_candidates`."""
    p0 = jax.lax.dynamic_slice(tile_start, (first,), (batch,))
    own = jax.lax.dynamic_slice(tile_own, (first,), (batch,))
    best, code = refill_tiles(stream, front, p0, qidx, profile, gap_open, gap_extend, seed, threshold,
                              lead=lead, pallas=pallas, dtype=dtype, interpret=interpret)
    rows, sizes = trace_candidates(best, code, starts, p0, own, qidx, pads, overlaps, threshold,
                                   max_steps, skip, lead=lead, capacity=capacity, n_words=n_words)
    cols = min(FIELDS + HEAD_WORDS, rows.shape[1])
    heads = tuple(rows[:capacity >> k, :cols] for k in HEAD_SHIFTS)
    return heads, rows, sizes


@stored_jit("targets.extract.scan_block", static_argnames=("pallas", "dtype", "interpret"),
            cpu_store=True)
def scan_block(profile, gap_open, gap_extend, seed, lanes, threshold, n_words, width, span, n_lanes,
               total, *, pallas: bool, dtype, interpret: bool = False):
    """The bulk scan of a block of miRNAs and its tile counts, in one program: ``profile``
    (Q, 5, H), ``gap_open``/``gap_extend``/``seed`` (Q, H), ``lanes`` (L, B) codes of which the
    first ``n_words`` words are scanned; the chunk's geometry (``width``, ``span``,
    ``n_lanes``, ``total``) is traced. Returns ``(words (Q, L/32, B), counts (Q,))``:
    :func:`jaxrna.kernels.miranda_fill.scan_lanes_packed` with ``pallas``, else
    :func:`jaxrna.targets.scan.scan_lanes_words` per miRNA; :func:`segment_counts`."""
    if pallas:
        from jaxrna.kernels.miranda_fill import scan_lanes_packed

        words = scan_lanes_packed(profile, gap_open, gap_extend, seed, lanes, threshold, n_words,
                                  interpret=interpret)
    else:
        from jaxrna.targets.scan import scan_words

        words = jnp.stack([scan_words(profile[k][:, :, None], gap_open[k][:, None], gap_extend[k][:, None],
                                       seed[k][:, None].astype(bool), lanes, threshold, n_words, dtype)
                           for k in range(profile.shape[0])])
    counts = _tiles(words, width, span, n_lanes, total)[0].sum(axis=(1, 2), dtype=jnp.int32)
    return words, counts
