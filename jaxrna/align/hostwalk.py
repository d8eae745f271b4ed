"""The traceback of :class:`jaxrna.align.host.HostEngine` as compiled code (C, through ctypes).

The walk of :meth:`HostEngine._walk <jaxrna.align.host.HostEngine._walk>` takes every decision
from the score table ``H`` alone; written with numpy it steps all pairs of a group at once and
costs more than parasail's tables themselves. Here the same decisions are taken one pair at a
time in a small C function (:data:`SOURCE`), compiled once with the system's C compiler
into the compile cache (:func:`jaxrna.native.library`: ``<cache>/host/walk-<hash>.so``, a
private directory checked like the rest of the cache; without a cache, into a temporary
directory). Loading it costs a millisecond, against seconds for a JIT
such as numba on a small job. Without a compiler (or with ``JAXRNA_HOST_WALK=numpy``) the numpy
walk runs instead: the same alignments, byte for byte (``tests/test_align_cpu_engine.py``).

Local and global pairs (not free end gaps) go further (:func:`table_pairs`,
``jaxrna_table_pairs``): the C loop calls parasail's table function itself (through the
addresses of parasail's library functions,
:func:`jaxrna.align.parasail_memory.parasail_functions`), walks each table at once while it is
still in the CPU's cache and frees it: no Python a pair (a 2-core VM, 3,600 local pairs of
200-400 nt with alignments: the whole run as fast as parasail's own tracebacks).

>>> lib = library()
>>> lib is None or hasattr(lib, "jaxrna_walk")
True
"""

from __future__ import annotations

import logging
import os

import numpy as np

log = logging.getLogger("jaxrna")

#: The walk, a pair at a time: the rules of ``HostEngine._walk`` (states 0 M, 1 X, 2 Y, 3 H;
#: ``X`` steps down a column and emits I, ``Y`` along a row and emits D).
SOURCE = r"""
#include <stdint.h>
#define NEG (-(INT64_C(1) << 30))

typedef struct {
    const int32_t *F; int64_t b, rs, cs; const int8_t *q, *t; const int64_t *mat;
    int64_t size, go, ge; int edge0;
} pair_t;

/* H(i, j): the table's cell (i - 1, j - 1) at F[b + (i - 1) rs + (j - 1) cs] */
static inline int64_t H(const pair_t *p, int64_t i, int64_t j) {
    if (i > 0 && j > 0) return p->F[p->b + (i - 1) * p->rs + (j - 1) * p->cs];
    if (p->edge0 || (i == 0 && j == 0)) return 0;
    return p->go + ((i > j ? i : j) - 1) * p->ge;
}

static inline int64_t S(const pair_t *p, int64_t i, int64_t j) {
    return p->mat[(int64_t)p->q[i - 1] * p->size + p->t[j - 1]];
}

/* X(i, j) (down the column) or Y(i, j) (along the row) from H alone */
static int64_t scan(const pair_t *p, int64_t i, int64_t j, int down) {
    int64_t reach = down ? i : j, best = NEG;
    for (int64_t k = 0; k < reach; k++) {
        int64_t v = (down ? H(p, k, j) : H(p, i, k)) + p->go + (reach - 1 - k) * p->ge;
        if (v > best) best = v;
    }
    return best;
}

/* one pair's walk from (*I, *J) in state *ST (value *VAL), ops appended to out[*COUNT..] */
static void walk_pair(const pair_t *p, int32_t local, int64_t *I, int64_t *J, int64_t *ST,
                      int64_t *VAL, int done, uint8_t *out, int64_t *COUNT) {
    int64_t i = *I, j = *J, st = *ST, val = *VAL, count = *COUNT;
    const int64_t go = p->go, ge = p->ge;
    while (!done && i > 0 && j > 0) {
        if (st == 3) {                       /* H: an M step, or which gap holds it */
            int64_t h = H(p, i, j), hd = H(p, i - 1, j - 1);
            if (hd + S(p, i, j) == h) {
                out[count++] = 0;
                if (local && hd <= 0) done = 1;
                i--; j--;
                continue;
            }
            st = scan(p, i, j, 1) == h ? 1 : 2;
            val = h;
            continue;
        }
        out[count++] = (uint8_t)st;
        if (st == 0) {                       /* M (a local end) */
            if (local && H(p, i - 1, j - 1) <= 0) done = 1;
            st = 3; val = 0; i--; j--;
            continue;
        }
        int is_x = st == 1;
        int64_t pi = is_x ? i - 1 : i, pj = is_x ? j : j - 1;
        int64_t mprev = (pi > 0 && pj > 0) ? H(p, pi - 1, pj - 1) + S(p, pi, pj) : NEG;
        int64_t hprev = H(p, pi > 0 ? pi : 0, pj > 0 ? pj : 0);
        int opens_m = mprev + go == val;
        int extend = !opens_m && hprev + go != val;
        if (!opens_m && !extend && pi > 0 && pj > 0)
            extend = scan(p, pi, pj, is_x) + ge == val;
        if (opens_m) { st = 0; val = 0; }
        else if (extend) { val -= ge; }
        else { st = is_x ? 2 : 1; val = hprev; }
        i = pi; j = pj;
    }
    *I = i; *J = j; *ST = st; *VAL = val; *COUNT = count;
}

void jaxrna_walk(int64_t n, const int32_t *F, const int64_t *base, const int64_t *width,
                 const int8_t *qcodes, const int64_t *q0, const int8_t *tcodes,
                 const int64_t *t0, const int64_t *flat, const int64_t *moff, int64_t size,
                 int64_t go, int64_t ge, int32_t local, int32_t free_, int64_t *I, int64_t *J,
                 int64_t *ST, int64_t *VAL, const uint8_t *DONE, uint8_t *rev, int64_t stride,
                 int64_t *COUNT) {
    for (int64_t r = 0; r < n; r++) {
        pair_t p = {F, base[r], width[r], 1, qcodes + q0[r], tcodes + t0[r],
                    flat + moff[r], size, go, ge, local || free_};
        walk_pair(&p, local, I + r, J + r, ST + r, VAL + r, DONE[r], rev + r * stride,
                  COUNT + r);
    }
}

/* Alignments a pair at a time, each from parasail's table function to our walk while its
   table is still in the cache: fns = (table function, get score, get end_query, get end_ref,
   get score table, free result) of parasail's library. Pair r: rows rtext[roff[r]:][:rlen[r]],
   columns ctext[coff[r]:][:clen[r]], matrix matp[r]. Local: the columns are parasail's first
   sequence (its tables by columns, its end cell ours); global (end gaps penalised): the rows
   (tables by rows), the walk from the corner. Out: score, end (EI, EJ, 1-based; local: 0 when
   nothing scores above 0), the walk's stop (I, J) and its ops, last first. */
typedef void *(*table_fn)(const char *, int, const char *, int, int, int, const void *);
typedef int (*int_fn)(const void *);
typedef int *(*cells_fn)(const void *);
typedef void (*free_fn)(void *);

void jaxrna_table_pairs(int64_t n, const int64_t *fns, int32_t local, const char *rtext,
                        const int64_t *roff,
                        const int64_t *rlen, const char *ctext, const int64_t *coff,
                        const int64_t *clen, const int64_t *matp, int64_t open, int64_t extend,
                        const int8_t *qcodes, const int64_t *q0, const int8_t *tcodes,
                        const int64_t *t0, const int64_t *flat, const int64_t *moff,
                        int64_t size, int64_t go, int64_t ge, int64_t *SCORE, int64_t *EI,
                        int64_t *EJ, int64_t *I, int64_t *J, uint8_t *rev, int64_t stride,
                        int64_t *COUNT) {
    table_fn table = (table_fn)(intptr_t)fns[0];
    int_fn get_score = (int_fn)(intptr_t)fns[1], get_end_query = (int_fn)(intptr_t)fns[2],
           get_end_ref = (int_fn)(intptr_t)fns[3];
    cells_fn get_table = (cells_fn)(intptr_t)fns[4];
    free_fn release = (free_fn)(intptr_t)fns[5];
    for (int64_t r = 0; r < n; r++) {
        const void *mat = (const void *)(intptr_t)matp[r];
        void *res = local ? table(ctext + coff[r], (int)clen[r], rtext + roff[r], (int)rlen[r],
                                  (int)open, (int)extend, mat)
                          : table(rtext + roff[r], (int)rlen[r], ctext + coff[r], (int)clen[r],
                                  (int)open, (int)extend, mat);
        int64_t sc = res ? get_score(res) : 0, i = 0, j = 0, st = 0, val = 0, count = 0;
        SCORE[r] = 0; EI[r] = 0; EJ[r] = 0;
        if (res && !local) {                 /* from the corner, in state H */
            i = rlen[r]; j = clen[r]; st = 3;
            SCORE[r] = sc; EI[r] = i; EJ[r] = j;
            pair_t p = {(const int32_t *)get_table(res), 0, clen[r], 1, qcodes + q0[r],
                        tcodes + t0[r], flat + moff[r], size, go, ge, 0};
            walk_pair(&p, 0, &i, &j, &st, &val, 0, rev + r * stride, &count);
        } else if (res && sc > 0) {
            i = (int64_t)get_end_ref(res) + 1;
            j = (int64_t)get_end_query(res) + 1;
            SCORE[r] = sc; EI[r] = i; EJ[r] = j;
            pair_t p = {(const int32_t *)get_table(res), 0, 1, rlen[r], qcodes + q0[r],
                        tcodes + t0[r], flat + moff[r], size, go, ge, 1};
            walk_pair(&p, 1, &i, &j, &st, &val, 0, rev + r * stride, &count);
        }
        I[r] = i; J[r] = j; COUNT[r] = count;
        if (res) release(res);
    }
}
"""

#: Compiler flags and the library's name in the cache (:mod:`jaxrna.native`).
FLAGS = ("-O2",)
LIBRARY_NAME = "walk"

_LIB: list = []          # [library or None], once per process


#: ``jaxrna_walk``'s arguments: n, F .. moff, size go ge, local free, I .. rev, stride, COUNT.
SIGNATURE = " ".join(["i64"] + ["ptr"] * 9 + ["i64"] * 3 + ["i32"] * 2 + ["ptr"] * 6
                     + ["i64", "ptr"])
#: ``jaxrna_table_pairs``'s arguments: n, fns, local, the rows' and columns' texts, offsets
#: and lengths, matrices, open, extend, the codes, flat, moff, size go ge, outputs, stride,
#: COUNT.
TABLE_SIGNATURE = " ".join(["i64", "ptr", "i32"] + ["ptr"] * 7 + ["i64"] * 2 + ["ptr"] * 6
                           + ["i64"] * 3 + ["ptr"] * 6 + ["i64", "ptr"])


def library():
    """The compiled walk (a ``ctypes.CDLL`` with ``jaxrna_walk``), or None where it cannot be
    had (no C compiler, ``JAXRNA_HOST_WALK=numpy``); built on first use, once per process
    (:func:`jaxrna.native.library`)."""
    if _LIB:
        return _LIB[0]
    lib = None
    if os.environ.get("JAXRNA_HOST_WALK", "").lower() != "numpy":
        from jaxrna.native import library as native_library

        lib = native_library(LIBRARY_NAME, SOURCE, FLAGS,
                             signatures={"jaxrna_walk": SIGNATURE,
                                         "jaxrna_table_pairs": TABLE_SIGNATURE})
        if lib is None:
            log.debug("compiled host walk unavailable; using the numpy walk")
    _LIB.append(lib)
    return lib


def walk(lib, F, base, width, qcodes, q0, tcodes, t0, flat, moff, size, go, ge, local, free,
         i, j, st, val, done, rev, count) -> None:
    """Run the compiled walk over every pair (arrays as in ``HostEngine._walk``; ``i``, ``j``,
    ``st``, ``val``, ``count`` and ``rev`` are updated in place)."""
    i64 = lambda a: np.ascontiguousarray(a, np.int64)  # noqa: E731
    args = dict(base=i64(base), width=i64(width), q0=i64(q0), t0=i64(t0), moff=i64(moff),
                flat=i64(flat), qc=np.ascontiguousarray(qcodes, np.int8),
                tc=np.ascontiguousarray(tcodes, np.int8),
                F=np.ascontiguousarray(F, np.int32) if len(F) else np.zeros(1, np.int32),
                done=np.ascontiguousarray(done, np.uint8))
    for a in (i, j, st, val, count):
        assert a.dtype == np.int64 and a.flags.c_contiguous
    assert rev.dtype == np.uint8 and rev.flags.c_contiguous
    ptr = lambda a: a.ctypes.data  # noqa: E731
    lib.jaxrna_walk(len(i), ptr(args["F"]), ptr(args["base"]), ptr(args["width"]),
                    ptr(args["qc"]), ptr(args["q0"]), ptr(args["tc"]), ptr(args["t0"]),
                    ptr(args["flat"]), ptr(args["moff"]), int(size), int(go), int(ge),
                    int(bool(local)), int(bool(free)), ptr(i), ptr(j), ptr(st), ptr(val),
                    ptr(args["done"]), ptr(rev), rev.shape[1], ptr(count))


def table_pairs(lib, fns, local: bool, rows: bytes, roff, rlen, cols: bytes, coff, clen, matp,
                open_: int, extend: int, qcodes, q0, tcodes, t0, flat, moff, size, go, ge):
    """Local or global (end gaps penalised) alignments of pairs through ``jaxrna_table_pairs``
    (parasail's table function given by ``fns``, then the walk, a pair at a time): ``(score,
    end_i, end_j, stop_i, stop_j, rev, count)``, the ops of pair ``r`` last first in
    ``rev[r, :count[r]]``."""
    i64 = lambda a: np.ascontiguousarray(a, np.int64)  # noqa: E731
    n = len(rlen)
    rlen, clen = i64(rlen), i64(clen)
    stride = int((rlen + clen).max(initial=0)) + 1
    keep = dict(fns=i64(fns), roff=i64(roff), rlen=rlen, coff=i64(coff), clen=clen,
                matp=i64(matp), q0=i64(q0), t0=i64(t0), moff=i64(moff), flat=i64(flat),
                qc=np.ascontiguousarray(qcodes, np.int8), tc=np.ascontiguousarray(tcodes, np.int8),
                rt=np.frombuffer(rows + b"\0", np.uint8), ct=np.frombuffer(cols + b"\0", np.uint8))
    out = [np.zeros(n, np.int64) for _ in range(6)]
    score, ei, ej, i, j, count = out
    rev = np.zeros((n, stride), np.uint8)
    ptr = lambda a: a.ctypes.data  # noqa: E731
    k = keep
    lib.jaxrna_table_pairs(n, ptr(k["fns"]), int(bool(local)), ptr(k["rt"]), ptr(k["roff"]),
                           ptr(k["rlen"]),
                           ptr(k["ct"]), ptr(k["coff"]), ptr(k["clen"]), ptr(k["matp"]),
                           int(open_), int(extend), ptr(k["qc"]), ptr(k["q0"]), ptr(k["tc"]),
                           ptr(k["t0"]), ptr(k["flat"]), ptr(k["moff"]), int(size), int(go),
                           int(ge), ptr(score), ptr(ei), ptr(ej), ptr(i), ptr(j), ptr(rev),
                           stride, ptr(count))
    return score, ei, ej, i, j, rev, count
