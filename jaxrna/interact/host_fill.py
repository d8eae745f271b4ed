"""BPMax's tables of one pair at its true size, in compiled C on the host (the *host engine*).

The device engine (:mod:`jaxrna.interact.recurrence`, JAX) fills a batch of pairs padded to a
geometry class and compiles a program per class: on a CPU, a few small pairs cost seconds of
compilation and the padded cells' work. Here the same recurrence (``specs/bpmax.md``; the
reference is :mod:`jaxrna.interact.reference`) runs in a small C function (:data:`SOURCE`,
built once by :func:`jaxrna.native.library`) over exactly the pair's cells, in integer units:

* ``jaxrna_single``: the single-strand table ``S`` (weighted Nussinov, hairpins of at least 3),
  dense ``n x n``;
* ``jaxrna_bpmax``: ``F`` banded by the windows, ``F[i1, d1, i2, d2] = F(i1, i1 + d1, i2, i2 +
  d2)`` for ``d1 <= W1 = L1 - 1``, ``d2 <= W2 = L2 - 1`` (every cell inside a window equals the
  unwindowed value). Outer boxes by growing span; for each, the double reduction, H3, H4 and
  the outer pair as whole-matrix max-plus and element-wise steps over smaller boxes (their
  inner loops run along contiguous rows, which the compiler vectorises), then H1, H2 and the
  inner pair within the box's matrix by growing inner span.

The work of a pair is :func:`work` (max-plus steps); :mod:`jaxrna.interact.host_engine` runs
pairs on every core (ctypes releases the GIL) and reads windows and structures from these
tables exactly as the device engine does from its own.

>>> import numpy as np
>>> from jaxrna.weights import parse_weights
>>> from jaxrna.alphabet import encode
>>> w = np.asarray(parse_weights("bpmax").matrix(), np.int32)
>>> lib = library()
>>> if lib is None:
...     print(29)        # no C compiler here: the value the tables give (tv1, units of 1/2)
... else:
...     t = tables(encode("UCGCUGCU"), encode("GUCGGA"[::-1]), w, 7, 5)
...     print(int(t.F[0, 7, 0, 5]))
29
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: The C source of the host engine's tables (see the module docstring).
SOURCE = r"""
#include <stdint.h>
#include <string.h>

typedef int32_t v_t;
#define MINLOOP 3

/* S(i, j) of one strand, dense n x n (0 below the diagonal and for j - i <= MINLOOP) */
void jaxrna_single(int64_t n, const int8_t *c, const int32_t *w, int64_t K, v_t *S) {
    memset(S, 0, (size_t)(n * n) * sizeof(v_t));
    for (int64_t d = MINLOOP + 1; d < n; d++)
        for (int64_t i = 0; i + d < n; i++) {
            int64_t j = i + d;
            v_t best = w[c[i] * K + c[j]] + S[(i + 1) * n + j - 1];
            for (int64_t k = i; k < j; k++) {
                v_t v = S[i * n + k] + S[(k + 1) * n + j];
                if (v > best) best = v;
            }
            S[i * n + j] = best;
        }
}

static inline void vmax_add(v_t *restrict c, const v_t *restrict b, v_t a, int64_t len) {
    for (int64_t x = 0; x < len; x++) {
        v_t v = a + b[x];
        c[x] = v > c[x] ? v : c[x];
    }
}

/* F banded: F[((i1 * W1p + d1) * M + i2) * W2p + d2], W1p = W1 + 1, W2p = W2 + 1.
   The boxes (i1, d1) of outer span d1 for i1 in [lo, hi): each reads only boxes of smaller
   spans, so the boxes of one span may be filled by several threads at once. */
void jaxrna_bpmax_span(int64_t N, int64_t M, int64_t W1, int64_t W2, const int8_t *u,
                       const int8_t *t, const int32_t *w, int64_t K, const v_t *S1,
                       const v_t *S2, v_t *F, int64_t d1, int64_t lo, int64_t hi) {
    const int64_t W1p = W1 + 1, W2p = W2 + 1, mat = M * W2p;
#define BOX(i1, d1) (F + ((i1) * W1p + (d1)) * mat)
    if (hi > N - d1) hi = N - d1;
    for (int64_t i1 = lo; i1 < hi; i1++) {
            const int64_t j1 = i1 + d1;
            v_t *C = BOX(i1, d1);
            memset(C, 0, (size_t)mat * sizeof(v_t));
            if (d1 == 0) {
                for (int64_t i2 = 0; i2 < M; i2++)
                    C[i2 * W2p] = w[u[i1] * K + t[i2]];
            }
            for (int64_t k1 = i1; k1 < j1; k1++) {
                const v_t *A = BOX(i1, k1 - i1), *B = BOX(k1 + 1, j1 - k1 - 1);
                const v_t s3 = S1[i1 * N + k1], s4 = S1[(k1 + 1) * N + j1];
                for (int64_t i2 = 0; i2 < M; i2++) {
                    v_t *c = C + i2 * W2p;
                    const v_t *a = A + i2 * W2p;
                    const int64_t top = (i2 + W2 < M - 1 ? i2 + W2 : M - 1) - i2;   /* last d2 */
                    vmax_add(c, B + i2 * W2p, s3, top + 1);                    /* H3 */
                    vmax_add(c, a, s4, top + 1);                               /* H4 */
                    for (int64_t e = 0; e < top; e++)                          /* D, k2 = i2 + e */
                        vmax_add(c + e + 1, B + (i2 + e + 1) * W2p, a[e], top - e);
                }
            }
            if (d1 > MINLOOP) {                                                /* outer pair */
                const v_t *P = BOX(i1 + 1, d1 - 2);
                const v_t wp = w[u[i1] * K + u[j1]];
                for (int64_t i2 = 0; i2 < M; i2++) {
                    const int64_t top = (i2 + W2 < M - 1 ? i2 + W2 : M - 1) - i2;
                    vmax_add(C + i2 * W2p, P + i2 * W2p, wp, top + 1);
                }
            }
            for (int64_t d2 = 1; d2 <= W2 && d2 < M; d2++)                    /* within the box */
                for (int64_t i2 = 0; i2 + d2 < M; i2++) {
                    const int64_t j2 = i2 + d2;
                    v_t best = C[i2 * W2p + d2];
                    for (int64_t k2 = i2; k2 < j2; k2++) {
                        v_t h1 = C[i2 * W2p + (k2 - i2)] + S2[(k2 + 1) * M + j2];
                        v_t h2 = S2[i2 * M + k2] + C[(k2 + 1) * W2p + (j2 - k2 - 1)];
                        if (h1 > best) best = h1;
                        if (h2 > best) best = h2;
                    }
                    if (d2 > MINLOOP) {
                        v_t v = w[t[i2] * K + t[j2]] + C[(i2 + 1) * W2p + d2 - 2];
                        if (v > best) best = v;
                    }
                    C[i2 * W2p + d2] = best;
                }
    }
#undef BOX
}

void jaxrna_bpmax(int64_t N, int64_t M, int64_t W1, int64_t W2, const int8_t *u,
                  const int8_t *t, const int32_t *w, int64_t K, const v_t *S1, const v_t *S2,
                  v_t *F) {
    for (int64_t d1 = 0; d1 <= W1 && d1 < N; d1++)
        jaxrna_bpmax_span(N, M, W1, W2, u, t, w, K, S1, S2, F, d1, 0, N);
}
"""

#: Compiler flags: max-plus rows vectorised for this machine (a library built with
#: ``-march=native`` is named by the CPU it was built on: :func:`jaxrna.native.cpu_fingerprint`).
FLAGS = ("-O3", "-march=native", "-funroll-loops")
#: The library's name in the cache (:mod:`jaxrna.native`).
LIBRARY_NAME = "bpmax"


def library():
    """The compiled tables (``jaxrna_single``, ``jaxrna_bpmax``), or None without a C compiler
    (:func:`jaxrna.native.library`)."""
    from jaxrna.native import library as native_library

    bpmax = "i64 i64 i64 i64 ptr ptr ptr i64 ptr ptr ptr"          # N M W1 W2 u t w K S1 S2 F
    return native_library(LIBRARY_NAME, SOURCE, FLAGS, signatures={
        "jaxrna_single": "i64 ptr ptr i64 ptr", "jaxrna_bpmax": bpmax,
        "jaxrna_bpmax_span": bpmax + " i64 i64 i64"})                 # d1 lo hi


class Tables(NamedTuple):
    """One pair's tables: ``F[i1, d1, i2, d2] = F(i1, i1 + d1, i2, i2 + d2)``; ``S1``, ``S2``
    dense single-strand tables of the outer and inner strands (integer units)."""

    F: np.ndarray
    S1: np.ndarray
    S2: np.ndarray


def table_bytes(n_outer: int, n_inner: int, w_outer: int, w_inner: int) -> int:
    """Bytes of one pair's tables (``w_*``: the largest span, window length - 1)."""
    return 4 * (n_outer * (w_outer + 1) * n_inner * (w_inner + 1) + n_outer ** 2 + n_inner ** 2)


def _triples(n: int, w: int) -> int:
    """Splits ``i <= k < j`` of the cells ``j - i <= w`` of a strand of ``n``."""
    d = np.arange(1, min(w, n - 1) + 1, dtype=np.float64)
    return int(np.sum((n - d) * d))


def _cells(n: int, w: int) -> int:
    d = np.arange(0, min(w, n - 1) + 1, dtype=np.float64)
    return int(np.sum(n - d))


def work(n_outer: int, n_inner: int, w_outer: int, w_inner: int) -> float:
    """Max-plus steps of one pair's fill: the double reduction over every outer split and
    inner split, plus H1-H4 (each a split on one strand times the other strand's cells).

    >>> work(30, 45, 29, 44) > work(30, 45, 11, 8)
    True
    """
    to, ti = _triples(n_outer, w_outer), _triples(n_inner, w_inner)
    co, ci = _cells(n_outer, w_outer), _cells(n_inner, w_inner)
    return float(to) * ti + 2.0 * (to * ci + co * ti)


def tables(codes_outer: np.ndarray, codes_inner: np.ndarray, wm: np.ndarray, w_outer: int,
           w_inner: int, lib=None, pool=None, threads: int = 1) -> Tables:
    """The tables of one pair (codes in internal orientation, :func:`jaxrna.alphabet.encode`;
    ``wm`` the weight matrix in integer units; ``w_*`` the largest spans). With ``pool`` (an
    executor) and ``threads > 1``, the boxes of each outer span are split over ``threads``
    calls on the pool (one large pair on every core)."""
    lib = lib or library()
    if lib is None:
        raise RuntimeError("the host engine needs a C compiler")
    u = np.ascontiguousarray(codes_outer, np.int8)
    t = np.ascontiguousarray(codes_inner, np.int8)
    wm = np.ascontiguousarray(wm, np.int32)
    n, m = len(u), len(t)
    w_outer, w_inner = min(w_outer, max(n - 1, 0)), min(w_inner, max(m - 1, 0))
    s1 = np.empty((n, n), np.int32)
    s2 = np.empty((m, m), np.int32)
    f = np.zeros((n, w_outer + 1, m, w_inner + 1), np.int32)
    k = wm.shape[0]
    if n and m:
        lib.jaxrna_single(n, u.ctypes.data, wm.ctypes.data, k, s1.ctypes.data)
        lib.jaxrna_single(m, t.ctypes.data, wm.ctypes.data, k, s2.ctypes.data)
        args = (n, m, w_outer, w_inner, u.ctypes.data, t.ctypes.data, wm.ctypes.data, k,
                s1.ctypes.data, s2.ctypes.data, f.ctypes.data)
        if pool is None or threads <= 1:
            lib.jaxrna_bpmax(*args)
        else:
            for d1 in range(w_outer + 1):
                boxes = n - d1
                step = -(-boxes // min(threads, boxes))
                list(pool.map(lambda lo: lib.jaxrna_bpmax_span(*args, d1, lo, lo + step),
                              range(0, boxes, step)))
    return Tables(F=f, S1=s1, S2=s2)


class HostBox:
    """The traceback's view of one window of :class:`Tables` (the interface of
    :class:`jaxrna.interact.windows.Box`): local outer positions ``0 .. P-1`` are ``o0 ..``,
    inner ``0 .. Q-1`` are ``q0 ..``."""

    def __init__(self, t: Tables, codes_outer: np.ndarray, codes_inner: np.ndarray, o0: int,
                 q0: int, p: int, q: int):
        self._f, self.o0, self.q0 = t.F, o0, q0
        self.codes_outer = np.asarray(codes_outer[o0:o0 + p])
        self.codes_inner = np.asarray(codes_inner[q0:q0 + q])
        self.s_outer = t.S1[o0:o0 + p, o0:o0 + p].astype(np.int64)
        self.s_inner = t.S2[q0:q0 + q, q0:q0 + q].astype(np.int64)

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.codes_outer), len(self.codes_inner)

    def F(self, i1: int, j1: int, i2, j2):
        """F at local coordinates; ``i2``/``j2`` may be NumPy arrays (broadcast)."""
        i2 = np.asarray(i2)
        return self._f[self.o0 + i1, j1 - i1, self.q0 + i2, np.asarray(j2) - i2]


__all__ = ["SOURCE", "library", "tables", "Tables", "HostBox", "work", "table_bytes"]
