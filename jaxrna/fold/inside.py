"""The inside sweep of the base-pair partition function over spans, shared by the exact path
(:mod:`jaxrna.fold.partition`), its outside pass (:mod:`jaxrna.fold.outside`) and the diagonal
tiles of the tiled path (:mod:`jaxrna.fold.partition_blocked`).

``rows[d, i] = Z[i, i + d]`` in a skewed table, every read of the split sum one contiguous
slice (see :mod:`jaxrna.fold.partition` for the recurrence). In any
:class:`~jaxrna.semiring.Semiring`.

>>> import jax.numpy as jnp
>>> from jaxrna.semiring import MAX_PLUS
>>> s = jnp.full((6, 6), -(1 << 29), jnp.int32).at[0, 5].set(1)   # one allowed pair (0, 5)
>>> lws = skew_pair_weights(s, MAX_PLUS, 3, skew_size(6, 1))
>>> int(inside_from_skew(lws, 6, MAX_PLUS, 1)[6, 0])
1
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrna.semiring import NEG_FLOAT, NEG_INT, Semiring


def range_blocks(lo: int, hi: int, count: int) -> list[tuple[int, int]]:
    """Split ``[lo, hi)`` into at most ``count`` ranges of similar size.

    >>> range_blocks(2, 11, 3)
    [(2, 5), (5, 8), (8, 11)]
    """
    if hi <= lo:
        return []
    size = max(1, -(-(hi - lo) // count))
    return [(a, min(a + size, hi)) for a in range(lo, hi, size)]


def runtime_length(length):
    """``length`` as an index of JAX's default integer type (int64 under x64), so loop counters
    and slice starts built from it agree with those built from Python ints; None stays None."""
    if length is None:
        return None
    return jnp.asarray(length).astype(jax.dtypes.canonicalize_dtype(jnp.int64))


def semiring_zero(dtype) -> float | int:
    return NEG_INT if jnp.issubdtype(dtype, jnp.integer) else NEG_FLOAT


def skew_pair_weights(scores: jax.Array, semiring: Semiring, min_loop: int, size: int) -> jax.Array:
    """``lws[e, k]`` = the semiring weight of pair ``(k, k + e)``, zero where not allowed,
    as a ``(size, size)`` array (``size`` >= n + 1; the rest is padding)."""
    n = scores.shape[0]
    dtype = scores.dtype
    zero = jnp.asarray(semiring_zero(dtype), dtype)
    e = jnp.arange(size)[:, None]
    k = jnp.arange(size)[None, :]
    j = k + e
    valid = (j < n) & (e > min_loop)
    vals = scores[jnp.clip(k, 0, max(n - 1, 0)), jnp.clip(j, 0, max(n - 1, 0))] if n else \
        jnp.zeros((size, size), dtype)
    valid = valid & (vals > zero // 2 if jnp.issubdtype(dtype, jnp.integer) else vals > zero / 2)
    return jnp.where(valid, semiring.weight(vals), zero).astype(dtype)


def inside_from_skew(lws: jax.Array, n: int, semiring: Semiring, blocks: int = 16,
                     length=None) -> jax.Array:
    """The sweep over spans given skewed pair weights (:func:`skew_pair_weights`).

    Returns ``rows`` with ``rows[d, i] = Z[i, i + d]`` (``0 <= d <= n``), shape of ``lws``.
    ``length``: the sequence's own length ``m <= n`` as a runtime value (the rest of the ``n``
    positions padding that never pairs): the sweep stops at span ``m`` (``rows[m, 0]`` is the
    result, longer spans stay the semiring zero), so one program serves every ``m``; None:
    ``m = n``, the loops' bounds static (plain autodiff works through them).
    """
    size = lws.shape[0]
    dtype = lws.dtype
    zero = semiring.zero(dtype)
    one = semiring.one(dtype)
    N = n + 1
    length = runtime_length(length)
    rows = jnp.full((size, size), zero, dtype).at[0:2, :].set(one)   # Z[i,i] = Z[i,i+1] = 1
    # pcol[n - e, j] = P[j - e, j]: the split terms of cell (i, i + d) are rows[t, i] (x)
    # pcol[n - d + t, i + d], t = 0, 1, ...: one rectangular slice per span.
    pcol = jnp.full((size, size), zero, dtype)
    for d0, d1 in range_blocks(2, N, blocks):
        width, height = max(d1 - 2, 1), N - d0

        def body(d, carry, width=width, height=height):
            rows, pcol = carry
            inner = jax.lax.dynamic_slice(rows, (d - 2, 1), (1, height))[0]    # Z[i+1, i+d-1]
            w = jax.lax.dynamic_slice(lws, (d - 1, 0), (1, height))[0]        # pair (i, i+d-1)
            pcol = jax.lax.dynamic_update_slice(pcol, (w + inner)[None, :], (n - d, d))
            left = rows[0:width, 0:height]
            right = jax.lax.dynamic_slice(pcol, (n - d, d), (width, height))
            split = semiring.sum(left + right, axis=0)
            prev = jax.lax.dynamic_slice(rows, (d - 1, 0), (1, height))[0]    # Z[i, i+d-1]
            val = semiring.plus(prev, split)
            return jax.lax.dynamic_update_slice(rows, val[None, :], (d, 0)), pcol

        hi = d1 if length is None else jnp.clip(length + 1, d0, d1)
        rows, pcol = jax.lax.fori_loop(d0, hi, body, (rows, pcol))
    return rows


def skew_size(n: int, blocks: int = 16) -> int:
    """Side of the skewed tables for length ``n`` (n + 1 plus slack for the block slices)."""
    N = n + 1
    bmax = max((b - a for a, b in range_blocks(1, N, blocks)), default=1)
    return N + bmax + 4


def sweep_blocks(n: int) -> int:
    """Span blocks of the exact sweeps for length ``n``: each block is one compiled loop with
    static slice sizes, so more blocks waste less work on padding but compile longer."""
    return max(1, min(16, n // 96))
