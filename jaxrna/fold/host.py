"""The Nussinov fill in NumPy, for work too small to be worth starting JAX.

A CLI run that folds one short sequence spends ~0.7 s importing JAX and a few tenths of a
second more loading (or tracing) its compiled programs, for ~1 ms of device work. This engine
fills the same table with NumPy (the table is unique, so the traceback of
:mod:`jaxrna.fold.traceback` gives the same structure as every other path) and never imports
JAX. ``jaxrna fold`` uses it when the whole job is below :data:`HOST_WORK_LIMIT` split
operations (:func:`jaxrna.fold.plan.choose_engine`).

Layout as :mod:`jaxrna.fold.fill`, for a batch of ``B`` sequences of one padded length ``n``:
``rows[b, 1 + d, i] = N(i, i + d)`` and ``cols[b, n - 1 - d, j] = N(j - d, j)``; the split
maximum of every cell of diagonal ``d`` is one reduction over the leading axis of two
rectangular slices.

>>> from jaxrna.alphabet import encode
>>> from jaxrna.weights import parse_weights
>>> rows = fill_host(encode("GGGAAAUCC")[None], parse_weights("unit").matrix(), 3)
>>> int(rows[0, 9, 0])
3
"""

from __future__ import annotations

import numpy as np

#: Cells not computed yet (as :data:`jaxrna.fold.fill.NEG`).
NEG = -(1 << 29)
#: Jobs below this many split operations (sum of n^3 / 6) run on this engine when the CPU is
#: asked for (or chosen by ``--backend auto``): about 0.3 s of NumPy on one core.
HOST_WORK_LIMIT = 4e8


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


def fold_host(sequences: list[str], weights: np.ndarray, min_loop: int,
              with_pairs: bool = True) -> list[tuple[int, tuple | None]]:
    """``(score, pairs)`` of each sequence (pairs None without ``with_pairs``), in order.

    Sequences are grouped by padded length so each group is one batched fill.
    """
    from jaxrna.alphabet import encode
    from jaxrna.batching import bucket_length
    from jaxrna.fold.traceback import traceback

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
