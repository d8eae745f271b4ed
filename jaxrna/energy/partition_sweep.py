"""The diagonal sweep of the partition functions, and its derivative: the outside pass.

A sweep fills tables stored by diagonal, ``T[ROW_PAD + d, k, i] = table_k(i, i + d)``, for
d = 4 .. L-1, each diagonal's rows a function ``rows_fn(d, T, V, diff, fixed, height, width)``
of the *shorter* diagonals only, for the cells i < ``height`` (above 256 nt the diagonals run
in the MFE fill's bands, :func:`jaxrna.energy.fill.sweep_bands`: a band's height is the cell
count of its first diagonal, ``width`` its end, a bound on the multiloop split's extent;
``V`` is a column-major copy of one table, channel ``copy``, for the
multiloop split: ``V[j, L - 1 - d'] = table(j - d', j)``). Because a diagonal reads only
shorter ones, the final tables hold every diagonal's inputs as they were when it was
computed. The derivative (a ``jax.custom_vjp``) uses that: the diagonals in reverse order,
each diagonal's cotangent, complete once every longer diagonal (the only readers) is done,
pulled back through ``jax.vjp`` of ``rows_fn`` on the final tables. That is the outside
recursion of the partition function, derived from the inside one: memory O(L^2) (the tables
and their cotangents) instead of reverse mode's O(L^3) residuals, about three times the
forward's time.

``diff``: a pytree of float arrays (the cotangents come back for them); ``fixed``: a pytree
of arrays treated as constants (integer codes, masks; float leaves get zero cotangents).

>>> import jax.numpy as jnp
>>> def rows_fn(d, T, V, diff, fixed, height, width):   # x * (1 + the previous diagonal)
...     prev = jax.lax.dynamic_slice(T, (ROW_PAD + d - 1, 0, 0), (1, 1, height))[0]
...     return diff["x"] * (1 + jnp.where(prev >= INF / 2, 0.0, prev))
>>> f = lambda x: sweep(rows_fn, 6, 1, 0, {"x": x}, {}, 0.0)[0][ROW_PAD + 5, 0, 0]
>>> float(f(2.0)), float(jax.grad(f)(2.0))
(6.0, 5.0)
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.energy.fill import sweep_bands
from jaxrna.energy.params import INF
from jaxrna.energy.terms import COL_PAD, ROW_PAD


def _write(T, V, rows, d, length, copy):
    T = jax.lax.dynamic_update_slice(T, rows[None], (ROW_PAD + d, 0, 0))
    V = jax.lax.dynamic_update_slice(V, rows[copy][:, None], (d, length - 1 - d))
    return T, V


#: Padded lengths up to this sweep in one band (each band is its own loop body, forward and
#: outside: at short lengths compiling a second costs more than the cells it saves).
ONE_BAND_MAX = 256


def bands(length: int) -> list[tuple[int, int]]:
    """The sweep's bands of diagonals: one up to :data:`ONE_BAND_MAX`, then the MFE fill's
    (none below 5 positions).

    >>> bands(128), bands(384)
    ([(4, 128)], [(4, 194), (194, 384)])
    """
    if length <= 4:
        return []
    return [(4, length)] if length <= ONE_BAND_MAX else sweep_bands(length)


def forward(rows_fn, length, channels, copy, diff, fixed, init=INF):
    """The tables ``(T, V)`` (``init`` where not computed), with JAX's own derivative."""
    dtype = jnp.result_type(*jax.tree.leaves(diff))
    T = jnp.full((ROW_PAD + length, channels, length + COL_PAD), init, dtype)
    V = jnp.full((2 * length + 1, 2 * length + 1), init, dtype)
    for d0, d1 in bands(length):
        def body(d, carry, height=length - d0, width=d1):
            T, V = carry
            rows = rows_fn(d, T, V, diff, fixed, height, width).astype(dtype)
            return _write(T, V, rows, d, length, copy)

        T, V = jax.lax.fori_loop(d0, d1, body, (T, V))
    return T, V


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3, 6))
def sweep(rows_fn, length, channels, copy, diff, fixed, init=INF):
    """:func:`forward` whose derivative is the outside pass (see the module)."""
    return forward(rows_fn, length, channels, copy, diff, fixed, init)


def _sweep_fwd(rows_fn, length, channels, copy, diff, fixed, init):
    T, V = forward(rows_fn, length, channels, copy, diff, fixed, init)
    return (T, V), (T, V, diff, fixed)


def _sweep_bwd(rows_fn, length, channels, copy, init, res, cts):
    T, V, diff, fixed = res
    Tbar, Vbar = cts

    carry = (Tbar, Vbar, jax.tree.map(jnp.zeros_like, diff))
    for d0, d1 in reversed(bands(length)):
        def body(k, carry, d0=d0, d1=d1, height=length - d0):
            Tbar, Vbar, dbar = carry
            d = d1 - 1 - k
            rowbar = jax.lax.dynamic_slice(Tbar, (ROW_PAD + d, 0, 0), (1, channels, height))[0]
            vcol = jax.lax.dynamic_slice(Vbar, (d, length - 1 - d), (height, 1))[:, 0]
            rowbar = rowbar.at[copy].add(vcol)
            _, pull = jax.vjp(lambda T, V, diff: rows_fn(d, T, V, diff, fixed, height,
                                                         d1).astype(T.dtype), T, V, diff)
            tb, vb, db = pull(rowbar)
            return Tbar + tb, Vbar + vb, jax.tree.map(jnp.add, dbar, db)

        carry = jax.lax.fori_loop(0, d1 - d0, body, carry)
    dbar = carry[2]

    def zero(x):
        if jnp.issubdtype(jnp.result_type(x), jnp.inexact):
            return jnp.zeros_like(x)
        return np.zeros(np.shape(x), jax.dtypes.float0)

    return dbar, jax.tree.map(zero, fixed)


sweep.defvjp(_sweep_fwd, _sweep_bwd)
