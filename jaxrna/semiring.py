"""Semirings for dynamic programs written once: max-plus (optimal scores) and log-sum-exp
(partition functions at a temperature ``T``).

A recurrence written with :meth:`Semiring.plus`, :meth:`Semiring.sum` and ordinary ``+`` for
the semiring product (both semirings work in log space) is evaluated in either:

* :data:`MAX_PLUS`: ``plus = max``; scores enter unchanged (integers stay integers), the result
  is the optimal score.
* :func:`log_semiring` ``(T)``: ``plus = logaddexp``; a score ``w`` enters as ``w / T`` (the
  log of its Boltzmann-like weight ``exp(w / T)``), the result is ``ln Z``.

``zero`` is a finite "minus infinity" (so gradients never meet ``inf - inf``); ``one`` is 0.

>>> import jax.numpy as jnp
>>> x = jnp.array([1.0, 2.0, 3.0])
>>> float(MAX_PLUS.sum(x))
3.0
>>> round(float(log_semiring(1.0).sum(x)), 6)
3.407606
>>> sr = log_semiring(0.5)
>>> float(sr.weight(jnp.float32(3)))
6.0
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp

#: Minus infinity for int32 max-plus tables (two still add without overflow); the same as
#: :data:`jaxrna.fold.fill.NEG`.
NEG_INT = -(1 << 29)
#: Minus infinity for floating-point tables: exp() of it is 0, and sums of a few stay finite.
NEG_FLOAT = -1e30


@dataclass(frozen=True)
class Semiring:
    """``name`` is ``"max"`` or ``"log"``; ``temperature`` is None for max-plus.

    Frozen and hashable, so it can be a static argument of ``jax.jit``.
    """

    name: str
    temperature: float | None = None

    def __post_init__(self):
        if self.name not in ("max", "log"):
            raise ValueError(f"unknown semiring {self.name!r}")
        if self.name == "log" and not (self.temperature and self.temperature > 0):
            raise ValueError(f"the log semiring needs a temperature > 0, not {self.temperature!r}")

    @property
    def is_max(self) -> bool:
        return self.name == "max"

    def zero(self, dtype) -> jax.Array:
        """The additive identity ("minus infinity") in ``dtype``."""
        if jnp.issubdtype(dtype, jnp.integer):
            return jnp.asarray(NEG_INT, dtype)
        return jnp.asarray(NEG_FLOAT, dtype)

    def one(self, dtype) -> jax.Array:
        """The multiplicative identity: 0 in log space."""
        return jnp.zeros((), dtype)

    def weight(self, score):
        """A score as a log-space value: itself for max-plus, ``score / T`` for the log semiring."""
        if self.is_max:
            return score
        return score / self.temperature

    def plus(self, a, b):
        """Semiring addition of two arrays."""
        if self.is_max:
            return jnp.maximum(a, b)
        return jnp.logaddexp(a, b)

    def sum(self, x, axis=None):
        """Semiring sum along ``axis`` (all axes when None)."""
        if self.is_max:
            return jnp.max(x, axis=axis)
        m = jax.lax.stop_gradient(jnp.max(x, axis=axis, keepdims=True))
        out = m + jnp.log(jnp.sum(jnp.exp(x - m), axis=axis, keepdims=True))
        return jnp.squeeze(out, axis=axis) if axis is not None else out.reshape(())


#: Optimal scores.
MAX_PLUS = Semiring("max")


def log_semiring(temperature: float = 1.0) -> Semiring:
    """The log-sum-exp semiring at ``temperature`` (partition functions, ``ln Z``)."""
    return Semiring("log", float(temperature))
