"""The Nussinov fill on the host: compiled C on every core, or NumPy; no JAX.

A CLI run that folds one short sequence spends ~0.7 s importing JAX and a few tenths of a
second more loading (or tracing) its compiled programs, for ~1 ms of device work; on a CPU
without a GPU, JAX's fill of a padded batch is also slower than a plain loop over the cells a
sequence has. This engine fills each sequence's table at its true length in a small C function
(:data:`SOURCE`, built once with the system's C compiler: :func:`jaxrna.native.library`), the
sequences on a thread per core, or, without a C compiler, batches of one padded length with
NumPy (:func:`fill_host`). The table is unique, so the traceback of :mod:`jaxrna.fold.traceback`
gives the same structure as every other path. ``jaxrna fold`` uses it as
:func:`jaxrna.fold.plan.choose_engine` decides (every job on a CPU-only machine with a C
compiler; small jobs elsewhere).

Layout as :mod:`jaxrna.fold.fill`: ``rows[1 + d, i] = N(i, i + d)`` and ``cols[n - 1 - d, j] =
N(j - d, j)``; the split maximum of every cell of diagonal ``d`` is a reduction over ``d``
contiguous rows of both (vectorised by the compiler, or one NumPy reduction).

>>> from jaxrna.alphabet import encode
>>> from jaxrna.weights import parse_weights
>>> rows = fill_host(encode("GGGAAAUCC")[None], parse_weights("unit").matrix(), 3)
>>> int(rows[0, 9, 0])
3
>>> lib = library()
>>> lib is None or int(fill_c(encode("GGGAAAUCC"), parse_weights("unit").matrix(), 3, lib)[9, 0])
3
"""

from __future__ import annotations

import numpy as np

#: Cells not computed yet (as :data:`jaxrna.fold.fill.NEG`).
NEG = -(1 << 29)
#: Jobs below this many split operations (sum of n^3 / 6) run on the NumPy engine when the CPU
#: is asked for (or chosen by ``--backend auto``): about 0.3 s of NumPy on one core.
HOST_WORK_LIMIT = 4e8
#: Split operations per second and core of the C fill (the development VM, ``-O3
#: -march=native``: 2-4e9 on sequences of 500-2,000 nt): a GPU host keeps a job on the host
#: while it takes its cores less than :data:`SMALL_JOB_S` (:func:`jaxrna.fold.plan.choose_engine`).
C_SPLITS_PER_S = 2e9
SMALL_JOB_S = 0.5

#: The C fill of one sequence (see the module docstring; ``rows`` and ``cols`` preset to NEG).
SOURCE = r"""
#include <stdint.h>

void jaxrna_nussinov(int64_t n, const int8_t *c, const int32_t *w, int64_t K,
                     int64_t min_loop, int32_t *rows, int32_t *cols, int32_t *dense) {
    for (int64_t i = 0; i < n; i++) {
        rows[i] = 0; rows[n + i] = 0;               /* the empty and one-letter diagonals */
        cols[(n - 1) * n + i] = 0;
    }
    for (int64_t d = 1; d < n; d++) {
        const int64_t h = n - d;
        int32_t *restrict best = rows + (1 + d) * n;
        const int32_t *first = rows + n, *last = cols + (n - d) * n + d;
        for (int64_t i = 0; i < h; i++) best[i] = first[i] + last[i];       /* t = 0 */
        for (int64_t t = 1; t < d; t++) {
            const int32_t *restrict a = rows + (1 + t) * n;
            const int32_t *restrict b = cols + (n - d + t) * n + d;
            for (int64_t i = 0; i < h; i++) {
                int32_t v = a[i] + b[i];
                best[i] = v > best[i] ? v : best[i];
            }
        }
        if (d > min_loop) {
            const int32_t *inner = rows + (d - 1) * n + 1;
            for (int64_t i = 0; i < h; i++) {
                int32_t p = w[c[i] * K + c[i + d]];
                int32_t v = p > 0 ? inner[i] + p : best[i];
                best[i] = v > best[i] ? v : best[i];
            }
        }
        int32_t *col = cols + (n - 1 - d) * n + d;
        for (int64_t i = 0; i < h; i++) col[i] = best[i];
        if (dense)                                  /* N[i, i + d] of the square table */
            for (int64_t i = 0; i < h; i++) dense[i * n + i + d] = best[i];
    }
}
"""
FLAGS = ("-O3", "-march=native")
#: The library's name in the cache (:mod:`jaxrna.native`).
LIBRARY_NAME = "nussinov"


def library(build: bool = True):
    """The compiled fill (``jaxrna_nussinov``), or None without a C compiler (or with
    ``JAXRNA_FOLD_HOST_FILL=numpy``); ``build=False``: only one the cache already holds."""
    import os

    if os.environ.get("JAXRNA_FOLD_HOST_FILL", "").lower() == "numpy":
        return None
    from jaxrna.native import library as native_library

    return native_library(LIBRARY_NAME, SOURCE, FLAGS, build,
                          {"jaxrna_nussinov": "i64 ptr ptr i64 i64 ptr ptr ptr"})


def fill_c(codes: np.ndarray, weights: np.ndarray, min_loop: int, lib=None,
           dense: bool = False):
    """``rows`` ``(n + 1, n)`` of one sequence's codes (as :func:`fill_host`'s, unpadded)
    through the compiled fill (``lib``: :func:`library`); with ``dense``, ``(rows, table)``
    where ``table`` is the square table of :func:`dense_from_rows`, written by the fill."""
    lib = lib or library()
    if lib is None:
        raise RuntimeError("the compiled Nussinov fill needs a C compiler")
    c = np.ascontiguousarray(codes, np.int8)
    w = np.ascontiguousarray(weights, np.int32)
    n = len(c)
    rows = np.full((n + 1, n), NEG, np.int32)
    cols = np.full((n, n), NEG, np.int32)
    table = np.zeros((n, n), np.int32) if dense else None
    if n:
        lib.jaxrna_nussinov(n, c.ctypes.data, w.ctypes.data, w.shape[0], int(min_loop),
                            rows.ctypes.data, cols.ctypes.data,
                            table.ctypes.data if dense else None)
    return (rows, table) if dense else rows


def fill_host(codes: np.ndarray, weights: np.ndarray, min_loop: int) -> np.ndarray:
    """Fill the tables of a ``(B, n)`` batch of codes (pad with 4, which never pairs).

    Returns ``rows`` ``(B, n + 1, n)`` int32 with ``rows[b, 1 + d, i] = N(i, i + d)`` for
    ``i + d < n`` (``rows[b, 0]`` is the empty diagonal, 0).
    """
    codes = np.asarray(codes, dtype=np.intp)
    if codes.ndim != 2:
        raise ValueError("codes must be a (batch, length) array")
    B, n = codes.shape
    w = np.asarray(weights, dtype=np.int32)
    rows = np.full((B, n + 1, n), NEG, dtype=np.int32)
    rows[:, 0:2, :] = 0
    cols = np.full((B, n, n), NEG, dtype=np.int32)
    if n:
        cols[:, n - 1, :] = 0
    pw = w[codes[:, :, None], codes[:, None, :]]           # (B, n, n) pair weight of (i, j)
    tmp = np.empty(B * n * n if n else 0, dtype=np.int32)
    for d in range(1, n):
        h = n - d
        left = rows[:, 1:1 + d, :h]                         # N(i, i + t), t < d
        right = cols[:, n - d:n, d:d + h]                   # N(i + t + 1, i + d)
        buf = tmp[:B * d * h].reshape(B, d, h)
        np.add(left, right, out=buf)
        best = buf.max(axis=1)
        if d > min_loop:
            i = np.arange(h)
            wd = pw[:, i, i + d]
            inner = rows[:, d - 1, 1:1 + h]                 # N(i + 1, i + d - 1)
            np.maximum(best, np.where(wd > 0, inner + wd, NEG), out=best)
        rows[:, 1 + d, :h] = best
        cols[:, n - 1 - d, d:] = best
    return rows


def dense_from_rows(rows: np.ndarray, length: int) -> np.ndarray:
    """The square table ``N[i, j]`` (0 on and below the diagonal) of one sequence's ``rows``."""
    n = length
    out = np.zeros((n, n), dtype=np.int32)
    if n <= 1:
        return out
    d = np.arange(n)[:, None]
    i = np.arange(n)[None, :]
    ok = (i + d < n) & (d >= 1)
    dd, ii = np.broadcast_to(d, ok.shape)[ok], np.broadcast_to(i, ok.shape)[ok]
    out[ii, ii + dd] = rows[1 + dd, ii]
    return out


def compiled_possible(build: bool = True) -> bool:
    """Whether the compiled fill can be had: built already, or (``build``) a C compiler to
    build it, unless ``JAXRNA_FOLD_HOST_FILL=numpy``. Builds nothing."""
    import os

    from jaxrna.native import compiler_available

    if library(build=False) is not None:
        return True
    return (build and os.environ.get("JAXRNA_FOLD_HOST_FILL", "").lower() != "numpy"
            and compiler_available())


def will_use_compiled(work: float) -> bool:
    """Whether a job of ``work`` split operations folds with the compiled fill (already
    built, or a C compiler and work beyond NumPy's :data:`HOST_WORK_LIMIT`), as
    :func:`fold_host` decides when given the job's work."""
    return compiled_possible(build=work >= HOST_WORK_LIMIT)


def _fold_c(sequences: list[str], weights: np.ndarray, min_loop: int, with_pairs: bool,
            lib) -> list[tuple[int, tuple | None]]:
    """:func:`fold_host` through the compiled fill: each sequence at its own length, on a
    thread per core (ctypes releases the GIL), the tracebacks on this thread in order."""
    from concurrent.futures import ThreadPoolExecutor

    from jaxrna.alphabet import encode
    from jaxrna.fold.traceback import traceback
    from jaxrna.pipeline import cores, submitted_in_order

    out: list = []
    workers = max(1, min(cores(), len(sequences)))
    with ThreadPoolExecutor(workers) as pool:
        for codes, fut in submitted_in_order(
                pool, lambda codes: fill_c(codes, weights, min_loop, lib, with_pairs),
                (encode(seq) for seq in sequences), 2 * workers):
            got = fut.result()
            rows, table = got if with_pairs else (got, None)
            n = len(codes)
            if n <= 1:
                out.append((0, () if with_pairs else None))
                continue
            pairs = None
            if with_pairs:
                pairs = tuple(traceback(table, codes, weights, min_loop))
            out.append((int(rows[n, 0]), pairs))
    return out


def fold_host(sequences: list[str], weights: np.ndarray, min_loop: int,
              with_pairs: bool = True,
              job_work: float | None = None) -> list[tuple[int, tuple | None]]:
    """``(score, pairs)`` of each sequence (pairs None without ``with_pairs``), in order.

    With a C compiler each sequence is filled at its length by the compiled fill
    (:func:`fill_c`, a thread per core); without one (or for a job below
    :data:`HOST_WORK_LIMIT` while the compiled fill is not built yet), sequences are grouped by
    padded length so each group is one batched NumPy fill (:func:`fill_host`). ``job_work``:
    the split operations of the whole job these sequences are a chunk of (None: unknown), so
    a job of many small chunks builds the compiled fill.
    """
    from jaxrna.alphabet import encode
    from jaxrna.batching import bucket_length
    from jaxrna.fold.traceback import traceback

    # the compiled fill, unless it is not built yet and the job is small enough for NumPy
    # (building it takes ~0.3 s: a Galaxy job's empty cache would pay that for one short fold)
    work = sum(len(s) ** 3 for s in sequences) / 6
    small = max(work, job_work or 0.0) < HOST_WORK_LIMIT
    lib = library(build=not small)
    if lib is not None:
        return _fold_c(sequences, weights, min_loop, with_pairs, lib)
    out: list[tuple[int, tuple | None] | None] = [None] * len(sequences)
    groups: dict[int, list[int]] = {}
    for k, s in enumerate(sequences):
        if len(s) <= 1:
            out[k] = (0, () if with_pairs else None)
        else:
            groups.setdefault(bucket_length(len(s), 16), []).append(k)
    # a batch of at most ~64 MiB of temporaries
    for padded, members in groups.items():
        cap = max(1, (16 << 20) // (padded * padded))
        for s0 in range(0, len(members), cap):
            part = members[s0:s0 + cap]
            codes = np.full((len(part), padded), 4, dtype=np.int8)
            for r, k in enumerate(part):
                codes[r, :len(sequences[k])] = encode(sequences[k])
            rows = fill_host(codes, weights, min_loop)
            for r, k in enumerate(part):
                n = len(sequences[k])
                score = int(rows[r, n, 0])
                pairs = None
                if with_pairs:
                    table = dense_from_rows(rows[r], n)
                    pairs = tuple(traceback(table, codes[r, :n], weights, min_loop))
                out[k] = (score, pairs)
    return out  # type: ignore[return-value]
