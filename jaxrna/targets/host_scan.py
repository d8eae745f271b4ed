"""The bulk scan on a CPU in C: :func:`jaxrna.targets.scan.scan_words`' flag words, compiled.

On a machine without a GPU the bulk scan is nearly all of a ``jaxrna targets`` run (16 miRNAs x
30,000 targets: 26 of 28 s, XLA's loop over columns). Here the same recurrence (miRanda's
a / b / c / m cells of each row, one lane per target stretch, the seed rows pinned; the column
flagged where ``m >= threshold`` and the cell is not a pure b) runs in a small C function
(:data:`SOURCE`, built with the system's compiler by :func:`jaxrna.native.library`), a block of
lanes at a time with the lanes innermost (vectorised by the compiler), the blocks of a chunk
over the host's cores: 4.7 G cells/s with int16 cells on this project's 2-core VM, against 0.6-0.9
for XLA's scan. The output is the JAX scan's, word for word (``tests/test_targets_host_scan.py``),
in the same cell type (the engine's: int16 only where no value can leave its range).

:func:`scan_words_host` returns None where no C compiler works, or with
``JAXRNA_TARGETS_SCAN=jax``; the engine then runs the JAX scan (same words).

>>> import numpy as np
>>> prof = np.zeros((1, 5, 8), np.int32); prof[0, 0] = 5          # A scores 5 in every row
>>> go = np.full((1, 8), -9, np.int32); ge = np.full((1, 8), -4, np.int32)
>>> seed = np.zeros((1, 8), np.int32)
>>> lanes = np.zeros((32, 1), np.int8)                             # 32 A's in one lane
>>> w = scan_words_host(prof, go, ge, seed, lanes, 40, 1)
>>> w is None or bin(int(w[0, 0, 0]) & 0xFFFFFFFF).count("1")     # columns 7.. reach 40
25
"""

from __future__ import annotations

import concurrent.futures
import os

import numpy as np

#: ``lanes`` (L, B) int8 codes (base 0..4, plus RESET = 8); tables per row; the scan's body
#: (:data:`_SCAN`) is written once for a cell type ``CELL``, compiled for int32 and int16.
SOURCE_HEADER = r"""
#include <stdint.h>
#include <string.h>
#define LB 64                       /* lanes per block: the state of a block stays in L1 */
#define RESET 8

"""
_SCAN = r"""
void NAME(int64_t height, int64_t chain, const int32_t *prof,
                         const int32_t *gopen, const int32_t *gext, const int32_t *pinned,
                         const int8_t *lanes, int64_t n_cols, int64_t n_lanes,
                         int64_t lane0, int64_t lane1, int32_t thr, int32_t *out)
{
    /* prof (5, H); gopen, gext, pinned (H); lanes (n_cols, n_lanes); out (n_cols / 32,
       n_lanes) words, bit k of word w = column 32 w + k; lanes [lane0, lane1) */
    CELL a[64 * LB], b[64 * LB], m[64 * LB];
    CELL keep[LB], up_a[LB], c_prev[LB], diag[LB], flag[LB];
    int32_t bits[LB];
    int32_t H = (int32_t)height;
    for (int64_t b0 = lane0; b0 < lane1; b0 += LB) {
        int64_t nb = lane1 - b0 < LB ? lane1 - b0 : LB;
        memset(a, 0, sizeof(CELL) * H * LB);
        memset(b, 0, sizeof(CELL) * H * LB);
        memset(m, 0, sizeof(CELL) * H * LB);
        for (int k = 0; k < LB; k++) bits[k] = 0;
        for (int64_t j = 0; j < n_cols; j++) {
            const int8_t *t = lanes + j * n_lanes + b0;
            CELL e0[LB], e1[LB], e2[LB], e3[LB], e4[LB];   /* the lane's base, as masks */
            for (int k = 0; k < LB; k++) {
                int32_t v = k < nb ? t[k] : 4;
                int32_t bs = v & 7;
                keep[k] = (v & RESET) ? 0 : -1;
                e0[k] = -(bs == 0); e1[k] = -(bs == 1); e2[k] = -(bs == 2); e3[k] = -(bs == 3);
                e4[k] = -(bs > 3);
                up_a[k] = 0; c_prev[k] = 0; diag[k] = 0; flag[k] = 0;
            }
            for (int32_t r = 0; r < H; r++) {
                const CELL p0 = prof[r], p1 = prof[H + r], p2 = prof[2 * H + r],
                           p3 = prof[3 * H + r], p4 = prof[4 * H + r];
                const CELL go = gopen[r], ge = gext[r], pin = pinned[r];
                /* c runs down the column above the seed rows and in the last row; pinned
                   (-1 in seed rows, 0 in padding rows) between: a mask, no branch, so the
                   lane loop vectorises */
                const CELL free_c = (r < chain || r == H - 1) ? -1 : 0;
                CELL *ar = a + r * LB, *br = b + r * LB, *mr = m + r * LB;
                for (int k = 0; k < LB; k++) {
                    CELL sc = (p0 & e0[k]) | (p1 & e1[k]) | (p2 & e2[k]) | (p3 & e3[k])
                                 | (p4 & e4[k]);
                    CELL ap = ar[k] & keep[k], bp = br[k] & keep[k], mp = mr[k] & keep[k];
                    CELL av = diag[k] + sc;
                    av = av > 0 ? av : 0;
                    CELL fa = ap + go, fb = bp + ge;
                    CELL bv = fa > fb ? fa : fb;
                    CELL oc = up_a[k] + go, ec = c_prev[k] + ge;
                    CELL cv = ((oc > ec ? oc : ec) & free_c) | (pin & ~free_c);
                    CELL mv = av > bv ? av : bv;
                    mv = mv > cv ? mv : cv;
                    flag[k] |= (mv >= thr) & ((av >= bv) | (cv > bv));
                    diag[k] = mp;
                    up_a[k] = av;
                    c_prev[k] = cv;
                    ar[k] = av; br[k] = bv; mr[k] = mv;
                }
            }
            int sh = (int)(j & 31);
            for (int k = 0; k < LB; k++) bits[k] |= (int32_t)((uint32_t)flag[k] << sh);
            if (sh == 31 || j == n_cols - 1) {
                int32_t *o = out + (j >> 5) * n_lanes + b0;
                for (int k = 0; k < nb; k++) o[k] = bits[k];
                for (int k = 0; k < LB; k++) bits[k] = 0;
            }
        }
    }
}
"""
#: the scan in int32 cells and in int16 cells (twice the lanes a vector: the engine's value
#: type, int16 where no cell can leave its range)
SOURCE = (SOURCE_HEADER + _SCAN.replace("NAME", "jaxrna_miranda_scan32").replace("CELL", "int32_t")
          + _SCAN.replace("NAME", "jaxrna_miranda_scan16").replace("CELL", "int16_t"))
FLAGS = ("-O3", "-march=native")
#: The library's name in the cache (:mod:`jaxrna.native`).
LIBRARY_NAME = "miranda_scan"
_SIGNATURE = "i64 i64 ptr ptr ptr ptr ptr i64 i64 i64 i64 i32 ptr"
#: Rows the C state holds (miRNAs are padded to heights of at most this).
MAX_HEIGHT = 64
#: Lanes per thread task (whole 64-lane blocks).
TASK_LANES = 1024


def library(build: bool = True):
    """The compiled scan, or None without a C compiler (or with ``JAXRNA_TARGETS_SCAN=jax``)."""
    if os.environ.get("JAXRNA_TARGETS_SCAN", "").lower() == "jax":
        return None
    from jaxrna.native import library as native_library

    return native_library(LIBRARY_NAME, SOURCE, FLAGS, build,
                          {"jaxrna_miranda_scan32": _SIGNATURE, "jaxrna_miranda_scan16": _SIGNATURE})


def scan_words_host(profile, gap_open, gap_extend, seed, lanes, threshold, n_words,
                    threads: int | None = None, dtype=np.int32):
    """Packed flags ``(Q, L/32, B)`` int32 of the bulk scan of ``Q`` miRNAs over ``lanes``
    ``(L, B)`` (the first ``n_words`` words; the rest 0), as :func:`jaxrna.targets.scan.
    scan_words` computes them for each miRNA's ``profile`` (Q, 5, H), ``gap_open``,
    ``gap_extend``, ``seed`` (Q, H) in cells of ``dtype`` (int16 or int32); None where the
    compiled scan is not available."""
    lanes = np.asarray(lanes)
    profile = np.asarray(profile)
    q_count, _, height = profile.shape
    if height > MAX_HEIGHT or lanes.ndim != 2 or lanes.shape[0] % 32:
        return None
    lib = library()
    if lib is None:
        return None
    from jaxrna.pipeline import cores, submitted_in_order
    from jaxrna.kernels.miranda_lanes import SEED_SPAN  # the seed rows, as the JAX scan pins them

    lanes = np.ascontiguousarray(lanes, np.int8)
    n_cols = min(int(n_words) * 32, lanes.shape[0])
    n_lanes = lanes.shape[1]
    out = np.zeros((q_count, lanes.shape[0] // 32, n_lanes), np.int32)
    chain = max(height - SEED_SPAN - 1, 0)
    tables = []
    for q in range(q_count):
        tables.append(tuple(np.ascontiguousarray(x, np.int32) for x in (
            profile[q], gap_open[q], gap_extend[q], -np.asarray(seed[q]).astype(np.int32))))
    scan = lib.jaxrna_miranda_scan16 if np.dtype(dtype) == np.int16 else lib.jaxrna_miranda_scan32
    tasks = [(q, lo, min(lo + TASK_LANES, n_lanes))
             for q in range(q_count) for lo in range(0, n_lanes, TASK_LANES)]

    def run(task):
        q, lo, hi = task
        prof, go, ge, pin = tables[q]
        scan(height, chain, prof.ctypes.data, go.ctypes.data, ge.ctypes.data, pin.ctypes.data,
             lanes.ctypes.data, n_cols, n_lanes, lo, hi, int(threshold), out[q].ctypes.data)

    if n_cols:
        workers = min(threads or cores(), len(tasks))
        if workers <= 1:
            for task in tasks:
                run(task)
        else:
            with concurrent.futures.ThreadPoolExecutor(workers) as pool:
                for _, future in submitted_in_order(pool, run, tasks, 2 * workers):
                    future.result()
    return out


__all__ = ["scan_words_host", "library", "SOURCE"]
