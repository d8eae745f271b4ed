"""The pair format's alignment blocks in compiled code (C, through ctypes).

:func:`jaxrna.align.text.pair_text` builds the blocks of every alignment (the query's row, the
match line, the target's row, ``WIDTH`` columns each, the residue numbers around them) and
counts each alignment's identical, similar and matched columns. With numpy that is a dozen
passes over every column of the batch (cumulative sums, gathers, scatters of the letters into
the text): on one core of an H100 host a third of the time of a local alignment with its text
(90,000 pairs of 200-400 nt: 42 of 155 us a pair). Here one C loop walks each alignment's ops
once and writes its blocks (:data:`SOURCE`, built by :func:`jaxrna.native.library`). The
numpy path stays for names that are not ASCII, unknown (negative) positions and machines
without a C compiler (or ``JAXRNA_HOST_TEXT=numpy``); both give the same bytes
(``tests/test_align_text_native.py``).

>>> import numpy as np
>>> lut = np.zeros(1 << 16, np.uint8)
>>> lut[(ord("A") << 8) | ord("A")] = 1
>>> marks = np.where(lut == 1, ord("|"), ord(".")).astype(np.uint8)
>>> got = pair_blocks(np.array([0, 2, 0], np.uint8), np.array([0, 3]),
...                   b"AC", np.array([0, 2]), b"AAA", np.array([0, 3]), np.array([0]),
...                   np.array([4]), [b"q" + b" " * 13], [b"t" + b" " * 13], marks, lut, lut)
>>> got is None or print(got[0].decode())
q                  1 A-C      2
                     | .
t                  5 AAA      7
<BLANKLINE>
<BLANKLINE>
>>> got is None or [c.tolist() for c in got[2:]]
[[1], [1], [2]]
"""

from __future__ import annotations

import logging
import os

import numpy as np

log = logging.getLogger("jaxrna")

#: Columns of a block (:data:`jaxrna.align.text.WIDTH`; repeated here, checked by the tests).
WIDTH = 50

#: One function: the blocks of ``n`` alignments (ops 0 M, 1 I, 2 D, as
#: :data:`jaxrna.align.text.OP_M`), their texts' offsets and per-alignment counts; ``status[0]``
#: is -1 where a position is negative (the caller takes the numpy path).
SOURCE = r"""
#include <stdint.h>
#include <string.h>

static int64_t put_number(uint8_t *o, int64_t v) {       /* right-aligned in 6, or wider */
    uint8_t digits[24];
    int64_t n = 0, w = 0;
    do { digits[n++] = (uint8_t)('0' + v % 10); v /= 10; } while (v);
    for (int64_t k = n; k < 6; k++) o[w++] = ' ';
    while (n) o[w++] = digits[--n];
    return w;
}

static int64_t put_row(uint8_t *o, const uint8_t *name, int64_t first, const uint8_t *cols,
                       int64_t count, int64_t last) {
    int64_t w = 14;
    memcpy(o, name, 14);
    w += put_number(o + w, first);
    o[w++] = ' ';
    memcpy(o + w, cols, count);
    w += count;
    o[w++] = ' ';
    w += put_number(o + w, last);
    o[w++] = '\n';
    return w;
}

void jaxrna_pair_blocks(int64_t n, const uint8_t *ops, const int64_t *off,
                        const uint8_t *qseg, const int64_t *qso, const uint8_t *tseg,
                        const int64_t *tso, const int64_t *qstart, const int64_t *tstart,
                        const uint8_t *qnames, const uint8_t *tnames, const uint8_t *mark_lut,
                        const uint8_t *same_lut, const uint8_t *sim_lut, int64_t width,
                        uint8_t *out, int64_t *out_off, int64_t *identical, int64_t *similar,
                        int64_t *matched, int64_t *status) {
    uint8_t qa[256], ta[256], marks[256];
    int64_t w = 0;
    status[0] = 0;
    if (width > 256) { status[0] = -1; return; }
    for (int64_t k = 0; k < n; k++) {
        const uint8_t *q = qseg + qso[k], *t = tseg + tso[k];
        int64_t qc = 0, tc = 0, same = 0, sim = 0, m = 0;
        out_off[k] = w;
        for (int64_t a = off[k]; a < off[k + 1]; a += width) {
            int64_t z = a + width < off[k + 1] ? a + width : off[k + 1];
            int64_t q1 = qstart[k] + qc + 1, t1 = tstart[k] + tc + 1;
            for (int64_t c = a; c < z; c++) {
                uint8_t op = ops[c], ql = '-', tl = '-', mark = ' ';
                if (op != 2) ql = q[qc++];
                if (op != 1) tl = t[tc++];
                if (op == 0) {
                    int key = ((int)ql << 8) | tl;
                    mark = mark_lut[key];
                    same += same_lut[key];
                    sim += sim_lut[key];
                    m++;
                }
                qa[c - a] = ql; ta[c - a] = tl; marks[c - a] = mark;
            }
            int64_t q2 = qstart[k] + qc, t2 = tstart[k] + tc;
            if (q1 < 0 || q2 < 0 || t1 < 0 || t2 < 0) { status[0] = -1; return; }
            w += put_row(out + w, qnames + 14 * k, q1, qa, z - a, q2);
            memset(out + w, ' ', 21);
            w += 21;
            memcpy(out + w, marks, z - a);
            w += z - a;
            out[w++] = '\n';
            w += put_row(out + w, tnames + 14 * k, t1, ta, z - a, t2);
            out[w++] = '\n';
        }
        identical[k] = same; similar[k] = sim; matched[k] = m;
    }
    out_off[n] = w;
}
"""

FLAGS = ("-O2",)
LIBRARY_NAME = "pairtext"
#: ``jaxrna_pair_blocks``'s arguments.
SIGNATURE = " ".join(["i64"] + ["ptr"] * 13 + ["i64"] + ["ptr"] * 6)

_LIB: list = []          # [library or None], once per process


def library():
    """The compiled blocks (a ``ctypes.CDLL``), or None where it cannot be had (no C compiler,
    ``JAXRNA_HOST_TEXT=numpy``); built on first use, once per process."""
    if _LIB:
        return _LIB[0]
    lib = None
    if os.environ.get("JAXRNA_HOST_TEXT", "").lower() != "numpy":
        from jaxrna.native import library as native_library

        lib = native_library(LIBRARY_NAME, SOURCE, FLAGS,
                             signatures={"jaxrna_pair_blocks": SIGNATURE})
        if lib is None:
            log.debug("compiled pair text unavailable; using numpy")
    _LIB.append(lib)
    return lib


def pair_blocks(ops, op_offsets, query_seg, query_seg_offsets, target_seg, target_seg_offsets,
                query_start, target_start, qnames: list[bytes], tnames: list[bytes],
                mark_lut, same_lut, sim_lut):
    """The blocks of every alignment as one byte string, the offsets of each alignment's
    blocks in it, and its identical, similar and matched column counts; None where the C
    path does not apply (no library, a position unknown). ``qnames``/``tnames``: each
    alignment's 14-byte name field; the look-up tables are indexed by ``query letter << 8 |
    target letter``."""
    lib = library()
    n = len(qnames)
    if lib is None or len(tnames) != n:
        return None
    i64 = lambda a: np.ascontiguousarray(a, np.int64)  # noqa: E731
    u8 = lambda a: np.ascontiguousarray(a, np.uint8)  # noqa: E731
    seg = lambda s: np.frombuffer(bytes(s) + b"\0", np.uint8) if isinstance(s, (bytes, bytearray)) \
        else np.concatenate([u8(s), np.zeros(1, np.uint8)])  # noqa: E731
    off = i64(op_offsets)
    blocks = -(-np.diff(off) // WIDTH)
    size = int(blocks.sum()) * (2 * (14 + 20 + 1 + WIDTH + 1 + 20 + 1) + 21 + WIDTH + 1 + 1)
    keep = dict(ops=u8(ops) if len(ops) else np.zeros(1, np.uint8), off=off,
                qseg=seg(query_seg), qso=i64(query_seg_offsets), tseg=seg(target_seg),
                tso=i64(target_seg_offsets), qs=i64(query_start), ts=i64(target_start),
                qn=np.frombuffer(b"".join(qnames) + b"\0", np.uint8),
                tn=np.frombuffer(b"".join(tnames) + b"\0", np.uint8),
                mark=u8(mark_lut), same=u8(same_lut), sim=u8(sim_lut))
    for name in ("mark", "same", "sim"):
        if keep[name].size != 1 << 16:
            raise ValueError(f"{name} table: 65,536 entries expected")
    out = np.empty(max(size, 1), np.uint8)
    out_off = np.zeros(n + 1, np.int64)
    counts = [np.zeros(n, np.int64) for _ in range(3)]
    status = np.zeros(1, np.int64)
    ptr = lambda a: a.ctypes.data  # noqa: E731
    k = keep
    lib.jaxrna_pair_blocks(n, ptr(k["ops"]), ptr(k["off"]), ptr(k["qseg"]), ptr(k["qso"]),
                           ptr(k["tseg"]), ptr(k["tso"]), ptr(k["qs"]), ptr(k["ts"]),
                           ptr(k["qn"]), ptr(k["tn"]), ptr(k["mark"]), ptr(k["same"]),
                           ptr(k["sim"]), WIDTH, ptr(out), ptr(out_off), *map(ptr, counts),
                           ptr(status))
    if status[0] < 0:
        return None
    return (out[:out_off[-1]].tobytes(), out_off, *counts)
