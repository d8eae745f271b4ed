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

void jaxrna_walk(int64_t n, const int32_t *F, const int64_t *base, const int64_t *width,
                 const int64_t *cstride, const int8_t *qcodes, const int64_t *q0, const int8_t *tcodes,
                 const int64_t *t0, const int64_t *flat, const int64_t *moff, int64_t size,
                 int64_t go, int64_t ge, int32_t local, int32_t free_, int64_t *I, int64_t *J,
                 int64_t *ST, int64_t *VAL, const uint8_t *DONE, uint8_t *rev, int64_t stride,
                 int64_t *COUNT) {
    for (int64_t r = 0; r < n; r++) {
        pair_t p = {F, base[r], width[r], cstride[r], qcodes + q0[r], tcodes + t0[r], flat + moff[r],
                    size, go, ge, local || free_};
        int64_t i = I[r], j = J[r], st = ST[r], val = VAL[r], count = COUNT[r];
        int done = DONE[r];
        uint8_t *out = rev + r * stride;
        while (!done && i > 0 && j > 0) {
            if (st == 3) {                       /* H: an M step, or which gap holds it */
                int64_t h = H(&p, i, j), hd = H(&p, i - 1, j - 1);
                if (hd + S(&p, i, j) == h) {
                    out[count++] = 0;
                    if (local && hd <= 0) done = 1;
                    i--; j--;
                    continue;
                }
                st = scan(&p, i, j, 1) == h ? 1 : 2;
                val = h;
                continue;
            }
            out[count++] = (uint8_t)st;
            if (st == 0) {                       /* M (a local end) */
                if (local && H(&p, i - 1, j - 1) <= 0) done = 1;
                st = 3; val = 0; i--; j--;
                continue;
            }
            int is_x = st == 1;
            int64_t pi = is_x ? i - 1 : i, pj = is_x ? j : j - 1;
            int64_t mprev = (pi > 0 && pj > 0) ? H(&p, pi - 1, pj - 1) + S(&p, pi, pj) : NEG;
            int64_t hprev = H(&p, pi > 0 ? pi : 0, pj > 0 ? pj : 0);
            int opens_m = mprev + go == val;
            int extend = !opens_m && hprev + go != val;
            if (!opens_m && !extend && pi > 0 && pj > 0)
                extend = scan(&p, pi, pj, is_x) + ge == val;
            if (opens_m) { st = 0; val = 0; }
            else if (extend) { val -= ge; }
            else { st = is_x ? 2 : 1; val = hprev; }
            i = pi; j = pj;
        }
        I[r] = i; J[r] = j; ST[r] = st; VAL[r] = val; COUNT[r] = count;
    }
}
"""

#: Compiler flags and the library's name in the cache (:mod:`jaxrna.native`).
FLAGS = ("-O2",)
LIBRARY_NAME = "walk"

_LIB: list = []          # [library or None], once per process


#: ``jaxrna_walk``'s arguments: n, F .. moff, size go ge, local free, I .. rev, stride, COUNT.
SIGNATURE = " ".join(["i64"] + ["ptr"] * 10 + ["i64"] * 3 + ["i32"] * 2 + ["ptr"] * 6
                     + ["i64", "ptr"])


def library():
    """The compiled walk (a ``ctypes.CDLL`` with ``jaxrna_walk``), or None where it cannot be
    had (no C compiler, ``JAXRNA_HOST_WALK=numpy``); built on first use, once per process
    (:func:`jaxrna.native.library`)."""
    if _LIB:
        return _LIB[0]
    lib = None
    if os.environ.get("JAXRNA_HOST_WALK", "").lower() != "numpy":
        from jaxrna.native import library as native_library

        lib = native_library(LIBRARY_NAME, SOURCE, FLAGS, signatures={"jaxrna_walk": SIGNATURE})
        if lib is None:
            log.debug("compiled host walk unavailable; using the numpy walk")
    _LIB.append(lib)
    return lib


def walk(lib, F, base, width, qcodes, q0, tcodes, t0, flat, moff, size, go, ge, local, free,
         i, j, st, val, done, rev, count, cstride=None) -> None:
    """Run the compiled walk over every pair (arrays as in ``HostEngine._walk``; ``i``, ``j``,
    ``st``, ``val``, ``count`` and ``rev`` are updated in place). Pair ``r``'s cell ``(i, j)``
    (1-based) is ``F[base[r] + (i - 1) * width[r] + (j - 1) * cstride[r]]`` (``cstride``
    default 1: row-major tables; a table stored by columns has ``width`` 1 and ``cstride``
    its row count)."""
    i64 = lambda a: np.ascontiguousarray(a, np.int64)  # noqa: E731
    if cstride is None:
        cstride = np.ones(len(i), np.int64)
    args = dict(base=i64(base), width=i64(width), cs=i64(cstride), q0=i64(q0), t0=i64(t0),
                moff=i64(moff),
                flat=i64(flat), qc=np.ascontiguousarray(qcodes, np.int8),
                tc=np.ascontiguousarray(tcodes, np.int8),
                F=np.ascontiguousarray(F, np.int32) if len(F) else np.zeros(1, np.int32),
                done=np.ascontiguousarray(done, np.uint8))
    for a in (i, j, st, val, count):
        assert a.dtype == np.int64 and a.flags.c_contiguous
    assert rev.dtype == np.uint8 and rev.flags.c_contiguous
    ptr = lambda a: a.ctypes.data  # noqa: E731
    lib.jaxrna_walk(len(i), ptr(args["F"]), ptr(args["base"]), ptr(args["width"]),
                    ptr(args["cs"]), ptr(args["qc"]), ptr(args["q0"]), ptr(args["tc"]), ptr(args["t0"]),
                    ptr(args["flat"]), ptr(args["moff"]), int(size), int(go), int(ge),
                    int(bool(local)), int(bool(free)), ptr(i), ptr(j), ptr(st), ptr(val),
                    ptr(args["done"]), ptr(rev), rev.shape[1], ptr(count))
