"""Max-plus (tropical) matrix products: ``C = max(C, A (x) B)``, ``(A (x) B)[i, j] = max_k A[i, k] + B[k, j]``.

This is the pure-JAX path: it runs on any backend and is the reference for the Pallas GPU
kernels. Leading axes are batch axes. The contraction is done a few ``k`` at a time inside a
loop, which XLA vectorises across ``j``; one big broadcast-and-reduce is far slower on CPU.

>>> import jax.numpy as jnp
>>> a = jnp.array([[0, 1], [2, 0]], jnp.int32)
>>> b = jnp.array([[1, 0], [0, 3]], jnp.int32)
>>> maxplus(a, b).tolist()
[[1, 4], [3, 3]]
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp


def _chunk(k: int) -> int:
    for c in (8, 4, 2, 1):
        if k % c == 0:
            return c
    return 1


@partial(jax.jit, static_argnames=())
def maxplus_update(c: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    """Return ``max(c, a (x) b)`` for ``a: (..., M, K)``, ``b: (..., K, N)``, ``c: (..., M, N)``.

    Integer or floating dtypes; use a large negative value (not the dtype minimum, which would
    overflow on addition) for "minus infinity" entries.
    """
    k = a.shape[-1]
    step = _chunk(k)

    def body(s, acc):
        a_s = jax.lax.dynamic_slice_in_dim(a, s * step, step, axis=-1)
        b_s = jax.lax.dynamic_slice_in_dim(b, s * step, step, axis=-2)
        return jnp.maximum(acc, jnp.max(a_s[..., :, :, None] + b_s[..., None, :, :], axis=-2))

    n_steps = k // step
    if n_steps <= 16:
        for s in range(n_steps):
            c = body(s, c)
        return c
    return jax.lax.fori_loop(0, n_steps, body, c)


def maxplus(a: jax.Array, b: jax.Array, neg: int | float = -(1 << 29)) -> jax.Array:
    """The plain max-plus product ``a (x) b`` (no accumulator)."""
    shape = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    return maxplus_update(jnp.full(shape, neg, dtype=jnp.result_type(a, b)), a, b)
