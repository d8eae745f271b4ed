"""Pallas GPU kernels for miRanda: the bulk scan (:func:`scan_lanes_packed`, the GPU form of
:func:`jaxrna.targets.scan.scan_lanes`) and the segment refill (:func:`refill_pallas`, the GPU
form of :func:`jaxrna.targets.scan.fill_segments`).

Same recurrence and same answer as the pure-JAX column step (``jaxrna.targets.scan``), written
for one GPU thread per lane: each program owns ``block`` lanes of the packed target stream for
one miRNA and walks every column in registers (the H rows are unrolled, each row a vector of
``block`` lanes: a, b and the best-of-three m carried, c recomputed down the column), so a
column costs a few dozen integer ops per cell and no memory traffic but the lane codes.
Flags (the column holds a candidate) are packed 32 columns to an int32 word per lane, so a
miRNA's output is 1/8 of its input.

The grid is (miRNA, lane block): many miRNAs in one launch (they read the same lanes, which
stay in L2), each with its own rows. The refill kernel writes every cell's packed traceback code
(and the best scores of the columns whose candidates are wanted) for short segments, a block of
128 segments per program and one miRNA per block, so one launch serves a whole block of miRNAs;
it walks the columns once per strip of :data:`STRIP` rows (one unrolled copy of a strip, so its
compile does not grow with the miRNA's height), the strip's last row kept in memory for the next.
On CPU the kernels run in Pallas' interpret mode, which is how the tests compare them with the
pure-JAX path.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from jaxrna.kernels.miranda_lanes import RESET, SEED_SPAN, WORD
from jaxrna.kernels.tropical_pallas import compiler_params
from jaxrna.programs import stored_jit

#: Lanes per program (one GPU thread each).
BLOCK = 128


def _kernel(thr_ref, prof_ref, gopen_ref, gext_ref, seed_ref, lanes_ref, out_ref, *,
            height: int, words: int, block: int):
    q = pl.program_id(0)
    b0 = pl.program_id(1) * block
    H = height
    prof = [[prof_ref[q, k, r] for r in range(H)] for k in range(5)]
    gopen = [gopen_ref[q, r] for r in range(H)]
    gext = [gext_ref[q, r] for r in range(H)]
    chain = max(H - SEED_SPAN - 1, 0)
    pinned = [-seed_ref[q, r] for r in range(H)]  # -1 in seed rows, 0 in padding rows
    thr = thr_ref[0]
    n_words = thr_ref[1]           # words to scan (a runtime bound: one program, any length)
    zero = jnp.zeros((block,), jnp.int32)

    def column(j, carry):
        a_p, b_p, m_p, bits, shift = carry
        t = lanes_ref[j, pl.ds(b0, block)].astype(jnp.int32)
        keep = (t & RESET) == 0
        base = t & 7
        e0, e1, e2, e3 = base == 0, base == 1, base == 2, base == 3
        a_p = [jnp.where(keep, x, 0) for x in a_p]
        b_p = [jnp.where(keep, x, 0) for x in b_p]
        m_p = [jnp.where(keep, x, 0) for x in m_p]
        a_new, b_new, m_new = [], [], []
        flag = zero                    # int32 0/1 (no bool arithmetic in the Triton lowering)
        up_a = zero                    # a of the row above (row 0 above: 0)
        c_prev = zero                  # c of the row above
        diag = zero                    # m of the row above in the previous column
        for r in range(H):
            s = jnp.where(e0, prof[0][r], jnp.where(e1, prof[1][r], jnp.where(
                e2, prof[2][r], jnp.where(e3, prof[3][r], prof[4][r]))))
            a = jnp.maximum(diag + s, 0)
            b = jnp.maximum(a_p[r] + gopen[r], b_p[r] + gext[r])
            if r < chain or r == H - 1:
                c = jnp.maximum(up_a + gopen[r], c_prev + gext[r])
            else:
                c = zero + pinned[r]
            m = jnp.maximum(jnp.maximum(a, b), c)
            flag = jnp.maximum(flag, jnp.where((m >= thr) & ((a >= b) | (c > b)), 1, 0))
            diag = m_p[r]
            up_a, c_prev = a, c
            a_new.append(a)
            b_new.append(b)
            m_new.append(m)
        bits = bits | (flag << shift)
        return a_new, b_new, m_new, bits, shift + 1

    def word(w, carry):
        a_p, b_p, m_p = carry
        a_p, b_p, m_p, bits, _ = jax.lax.fori_loop(
            w * WORD, (w + 1) * WORD, column, (a_p, b_p, m_p, zero, jnp.int32(0)))
        out_ref[q, w, pl.ds(b0, block)] = bits
        return a_p, b_p, m_p

    init = [zero] * H
    jax.lax.fori_loop(0, jnp.minimum(n_words, words), word, (list(init), list(init), list(init)))


@stored_jit("kernels.miranda_fill.scan_lanes_packed", static_argnames=("block", "interpret", "num_warps"))
def scan_lanes_packed(profile, gap_open, gap_extend, seed, lanes, threshold, n_words=None, *,
                      block: int = BLOCK, interpret: bool = False, num_warps: int = 4):
    """Candidate flags of ``Q`` miRNAs over the lanes, 32 columns per int32 word.

    ``profile`` (Q, 5, H), ``gap_open``/``gap_extend``/``seed`` (Q, H), ``lanes`` (L, B) int8
    codes with L a multiple of 32 and B of ``block``, ``threshold`` a scalar. Returns (Q, L/32,
    B) int32: bit k of word w is column 32 w + k. ``n_words`` (a traced scalar; default all):
    scan only the first ``n_words`` words (the loop's runtime bound); the words past it are
    left unset (callers mask them, :mod:`jaxrna.targets.extract`).
    """
    q, _, height = profile.shape
    length, width = lanes.shape
    if length % WORD or width % block:
        raise ValueError(f"lanes {lanes.shape} must be (multiple of {WORD}, multiple of {block})")
    words = length // WORD
    kernel = partial(_kernel, height=height, words=words, block=block)
    bound = words if n_words is None else n_words
    thr = jnp.stack([jnp.asarray(threshold, jnp.int32), jnp.asarray(bound, jnp.int32)])
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((q, words, width), jnp.int32),
        grid=(q, width // block),
        interpret=interpret,
        compiler_params=None if interpret else compiler_params(num_warps, 1),
        name="miranda_scan",
    )(thr, profile.astype(jnp.int32), gap_open.astype(jnp.int32), gap_extend.astype(jnp.int32),
      seed.astype(jnp.int32), lanes)


#: Rows of the refill kernel unrolled per pass over the columns (:func:`refill_pallas`): a
#: miRNA's H rows are filled in strips of this many, the strip's last row handed to the next
#: strip through memory. Triton's compile of the unrolled rows grows with their square (H100,
#: the kernel alone, H = 8 / 16 / 24 / 32: 0.35 / 1.22 / 2.66 / 5.04 s): strips of 8 compile
#: as one 8-row kernel whatever the height (H = 24: 0.53-0.84 s against 2.81-3.01). The price
#: is the kernel's run time, 18-58% longer alone (the columns walked once per strip, the row
#: above each strip read and written through memory: H = 24, median 0.957 ms against 0.606),
#: a small part of a ``targets`` run, whose warm runs did not move (BENCHMARKS.md, twenty-third
#: session).
STRIP = 8


def _refill_kernel(qidx_ref, prof_ref, gopen_ref, gext_ref, seed_ref, lanes_ref, best_ref, code_ref,
                   *edge_refs, height: int, lead: int, length: int, block: int, strip: int):
    p = pl.program_id(0)
    q = qidx_ref[p]
    b0 = p * block
    H = height
    chain = max(H - SEED_SPAN - 1, 0)
    lanes_at = pl.ds(b0, block)

    def argmax3(a, b, c):  # miRanda's tie order: a, then b, then c
        return jnp.where((a >= b) & (a >= c), 1, jnp.where(b >= c, 2, 3))

    def fill_strip(s, carry):
        """Rows ``r0 .. r0 + strip - 1`` (``r0 = s * strip``) of every column; the row above
        the strip (its a, b, c and m per column) comes from ``edge`` (zero for the first
        strip), the strip's last row goes there for the next. One copy of the strip's rows
        serves every strip (``s`` traced where there are several)."""
        r0 = s * strip
        rows = [r0 + k for k in range(strip)]
        prof = [[prof_ref[q, k, r] for r in rows] for k in range(5)]
        gopen = [gopen_ref[q, r] for r in rows]
        gext = [gext_ref[q, r] for r in rows]
        pinned = [-seed_ref[q, r] for r in rows]
        # rows of the gap chain (and the last row) extend c; the seed's rows pin it
        chained = [bool(r < chain or r == H - 1) if isinstance(r, int) else (r < chain) | (r == H - 1)
                   for r in rows]
        zero = jnp.zeros((block,), jnp.int32)

        def column(j, carry):
            a_p, b_p, c_p, m_p, e_p = carry
            t = lanes_ref[j, lanes_at].astype(jnp.int32)
            keep = (t & RESET) == 0    # a new target starts here: the previous column is 0
            a_p = [jnp.where(keep, x, 0) for x in a_p]
            b_p = [jnp.where(keep, x, 0) for x in b_p]
            c_p = [jnp.where(keep, x, 0) for x in c_p]
            m_p = [jnp.where(keep, x, 0) for x in m_p]
            e_p = [jnp.where(keep, x, 0) for x in e_p]
            if edge_refs:   # the row above the strip (above the first: none, 0)
                edge = [jnp.where(s > 0, edge_refs[0][j, k, lanes_at], 0) for k in range(4)]
            else:
                edge = [zero] * 4
            base = t & 7
            e0, e1, e2, e3 = base == 0, base == 1, base == 2, base == 3
            a_new, b_new, c_new, m_new = [], [], [], []
            up_a, c_prev = edge[0], edge[2]                 # the row above, this column
            ua, ub, uc, diag = e_p                          # ... and in the previous column
            for k in range(strip):
                sc = jnp.where(e0, prof[0][k], jnp.where(e1, prof[1][k], jnp.where(
                    e2, prof[2][k], jnp.where(e3, prof[3][k], prof[4][k]))))
                a_raw = diag + sc
                a = jnp.maximum(a_raw, 0)
                from_a, from_b = a_p[k] + gopen[k], b_p[k] + gext[k]
                b = jnp.maximum(from_a, from_b)
                open_c = up_a + gopen[k]
                extend = c_prev + gext[k]
                if chained[k] is True:          # rows known here (a kernel of one strip)
                    c = jnp.maximum(open_c, extend)
                    from_c = jnp.where(extend > open_c, 32, 0)
                elif chained[k] is False:
                    c = zero + pinned[k]
                    from_c = zero
                else:
                    c = jnp.where(chained[k], jnp.maximum(open_c, extend), zero + pinned[k])
                    from_c = jnp.where(chained[k] & (extend > open_c), 32, 0)
                m = jnp.maximum(jnp.maximum(a, b), c)
                t0 = jnp.where(m > 0, argmax3(a, b, c), 0)
                t1 = jnp.where(a_raw > 0, argmax3(ua, ub, uc), 0)
                code = t0 | (t1 << 2) | jnp.where(from_b > from_a, 16, 0) | from_c
                code_ref[j, rows[k], lanes_at] = code.astype(jnp.int8)
                diag, ua, ub, uc = m_p[k], a_p[k], b_p[k], c_p[k]
                up_a, c_prev = a, c
                a_new.append(a)
                b_new.append(b)
                c_new.append(c)
                m_new.append(m)
            if edge_refs:   # the strip's last row, for the next strip
                for k, x in enumerate((a_new[-1], b_new[-1], c_new[-1], m_new[-1])):
                    edge_refs[0][j, k, lanes_at] = x

            @pl.when(j >= lead)        # a column whose candidates are wanted: its best scores
            def _owned():
                for k in range(strip):
                    best_ref[j - lead, rows[k], lanes_at] = jnp.maximum(m_new[k], 0)

            return a_new, b_new, c_new, m_new, edge

        init = [zero] * strip
        # one loop over every column (one copy of the unrolled rows: half the kernel that two
        # loops, the lead's and the owned columns', made for Triton to compile)
        jax.lax.fori_loop(0, length, column, (list(init), list(init), list(init), list(init),
                                              [zero] * 4))
        return carry

    @pl.when(q >= 0)
    def _body():
        if strip == H:
            fill_strip(0, 0)
        else:
            jax.lax.fori_loop(0, H // strip, fill_strip, 0)


@stored_jit("kernels.miranda_fill.refill_pallas",
            static_argnames=("lead", "block", "interpret", "num_warps", "strip"))
def refill_pallas(qidx, profile, gap_open, gap_extend, seed, lanes, *, lead: int, block: int = BLOCK,
                  interpret: bool = False, num_warps: int = 4, strip: int = STRIP):
    """Full matrices of short segments of several miRNAs (the GPU form of
    :func:`jaxrna.targets.scan.fill_segments`): ``block`` consecutive lanes share one miRNA,
    ``qidx[p]`` (its row in the tables; -1: the block is skipped and its outputs left unset).
    ``profile`` (Q, 5, H), ``gap_open``/``gap_extend``/``seed`` (Q, H), ``lanes`` (L, B) codes
    (with :data:`RESET` flags: a target starts there) and B a multiple of ``block``; the rows
    are filled ``strip`` at a time (:data:`STRIP`; all at once where H is no multiple of it).

    Returns ``best`` (L - lead, H, B) int32, the best scores of the last ``L - lead`` columns
    (those whose candidates are wanted) and ``code`` (L, H, B) int8 packed track codes of every
    column (:func:`jaxrna.targets.track.unpack_track`)."""
    height = profile.shape[2]
    length, width = lanes.shape
    if width % block or qidx.shape != (width // block,) or not 0 <= lead < length:
        raise ValueError(f"lanes {lanes.shape}, qidx {qidx.shape}, lead {lead}: "
                         f"one miRNA index per block of {block} lanes")
    strip = strip if 0 < strip < height and height % strip == 0 else height
    kernel = partial(_refill_kernel, height=height, lead=lead, length=length, block=block, strip=strip)
    shapes = [jax.ShapeDtypeStruct((length - lead, height, width), jnp.int32),
              jax.ShapeDtypeStruct((length, height, width), jnp.int8)]
    if strip < height:      # the row above each strip, per column (the kernel's scratch)
        shapes.append(jax.ShapeDtypeStruct((length, 4, width), jnp.int32))
    out = pl.pallas_call(
        kernel,
        out_shape=tuple(shapes),
        grid=(width // block,),
        interpret=interpret,
        compiler_params=None if interpret else compiler_params(num_warps, 1),
        name="miranda_refill",
    )(qidx.astype(jnp.int32), profile.astype(jnp.int32), gap_open.astype(jnp.int32),
      gap_extend.astype(jnp.int32), seed.astype(jnp.int32), lanes)
    return out[0], out[1]


def packed_positions(words):
    """``(column, lane)`` of every set flag in (L/32, B) packed words (host side, NumPy)."""
    import numpy as np

    words = np.asarray(words).view(np.uint32)
    w, lane = np.nonzero(words)
    if w.size == 0:
        return w, lane
    bits = (words[w, lane][:, None] >> np.arange(WORD, dtype=np.uint32)[None, :]) & 1
    k, bit = np.nonzero(bits)
    return w[k] * WORD + bit, lane[k]


def unpack_flags(words, length: int | None = None):
    """(L, B) bool flags from (L/32, B) packed words (host side, NumPy)."""
    import numpy as np

    words = np.asarray(words).astype(np.uint32)
    bits = (words[:, None, :] >> np.arange(WORD, dtype=np.uint32)[None, :, None]) & 1
    flags = bits.reshape(-1, words.shape[-1]).astype(bool)
    return flags if length is None else flags[:length]
