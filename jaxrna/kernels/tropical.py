"""Max-plus (tropical) matrix products: ``C = max(C, A (x) B)``, ``(A (x) B)[i, j] = max_k A[i, k] + B[k, j]``.

:func:`maxplus_update` is the one entry point; it picks a backend when it is traced:

* ``"xla"`` -- the pure-JAX path below: runs on any backend and is the reference for the
  Pallas kernels. The contraction is done a few ``k`` at a time inside a loop, which XLA
  vectorises across ``j``; one big broadcast-and-reduce is far slower on CPU.
* ``"pallas"`` -- the Pallas/Triton GPU kernel of :mod:`jaxrna.kernels.tropical_pallas`
  (int32 and float32).
* ``"interpret"`` -- the same Pallas kernel in interpret mode (CPU; for tests).

``backend=None`` (the default) means ``$JAXRNA_TROPICAL_BACKEND`` if set, else ``"auto"``: the
choice is made when the computation is lowered for a device (``lax.platform_dependent``), so
the Pallas kernel runs wherever the product runs on a CUDA GPU (int32/float32) and the pure-JAX
path everywhere else -- also on the CPU of a machine that has a GPU. Callers cannot tell the
paths apart except by speed. Leading axes are batch axes.

>>> import jax.numpy as jnp
>>> a = jnp.array([[0, 1], [2, 0]], jnp.int32)
>>> b = jnp.array([[1, 0], [0, 3]], jnp.int32)
>>> maxplus(a, b).tolist()
[[1, 4], [3, 3]]
>>> maxplus_update(jnp.zeros((2, 2), jnp.int32), a, b, backend="interpret").tolist()
[[1, 4], [3, 3]]
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp

BACKENDS = ("xla", "pallas", "interpret")
_PALLAS_DTYPES = (jnp.dtype(jnp.int32), jnp.dtype(jnp.float32))


def _chunk(k: int) -> int:
    for c in (8, 4, 2, 1):
        if k % c == 0:
            return c
    return 1


def resolve_backend(backend: str | None) -> str:
    """``backend`` (None = ``$JAXRNA_TROPICAL_BACKEND`` or ``"auto"``) checked and normalised."""
    if backend is None:
        backend = os.environ.get("JAXRNA_TROPICAL_BACKEND", "").strip().lower() or "auto"
    if backend != "auto" and backend not in BACKENDS:
        raise ValueError(f"unknown max-plus backend {backend!r}; use one of {BACKENDS} or auto")
    return backend


@jax.jit
def maxplus_update_xla(c: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
    """The pure-JAX ``max(c, a (x) b)`` (see :func:`maxplus_update`)."""
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


def maxplus_update(c: jax.Array, a: jax.Array, b: jax.Array, *, backend: str | None = None,
                   structure=None) -> jax.Array:
    """Return ``max(c, a (x) b)`` for ``a: (..., M, K)``, ``b: (..., K, N)``, ``c: (..., M, N)``.

    Integer or floating dtypes; use a large negative value (not the dtype minimum, which would
    overflow on addition) for "minus infinity" entries. ``structure`` (a
    :class:`~jaxrna.kernels.tropical_pallas.Structure`) promises that the operands are
    -infinity outside a band, so the GPU kernel may skip those blocks; the result is the same.
    """
    be = resolve_backend(backend)
    if be == "xla":
        return maxplus_update_xla(c, a, b)
    from jaxrna.kernels.tropical_pallas import maxplus_update_pallas

    if be in ("pallas", "interpret"):
        return maxplus_update_pallas(c, a, b, structure=structure, interpret=(be == "interpret"))
    if jnp.result_type(c, a, b) not in _PALLAS_DTYPES:
        return maxplus_update_xla(c, a, b)
    return jax.lax.platform_dependent(
        c, a, b, default=maxplus_update_xla,
        cuda=lambda c, a, b: maxplus_update_pallas(c, a, b, structure=structure))


def maxplus(a: jax.Array, b: jax.Array, neg: int | float = -(1 << 29), *,
            backend: str | None = None) -> jax.Array:
    """The plain max-plus product ``a (x) b`` (no accumulator)."""
    shape = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1])
    return maxplus_update(jnp.full(shape, neg, dtype=jnp.result_type(a, b)), a, b, backend=backend)
