"""The outside pass of the partition function (log space): pair probabilities as the exact
gradient of ``ln Z``, in O(n^2) memory.

For the inside recurrence of :mod:`jaxrna.fold.partition` (``Z[i, j] = Z[i, j-1] +
sum_k Z[i, k] P[k, j]``, ``P[k, j] = w(k, j-1) Z[k+1, j-1]``), the adjoints
``Zbar = d Z[0, n] / d Z`` and ``Pbar = d Z[0, n] / d P`` obey, from the largest span down::

    Zbar[0, n] = 1
    Zbar[i, j] = Zbar[i, j+1] + sum_{j' >= j+2} Zbar[i, j'] P[j, j'] + w(i-1, j) Pbar[i-1, j+1]
    Pbar[k, j] = sum_{i <= k} Zbar[i, j] Z[i, k]

and the probability of the pair ``(k, j-1)`` is ``Pbar[k, j] P[k, j] / Z[0, n]``. Like the
inside sweep, each span is one step whose sums read contiguous slices of skewed tables:
``zb[d, i] = Zbar[i, i+d]`` (row-skewed) for the first sum and ``zbc[s, j] = Zbar[j-s, j]``
with ``zc[u, k] = Z[k-u, k]`` (column-skewed) for ``Pbar``.

>>> import jax.numpy as jnp
>>> from jaxrna.alphabet import encode
>>> from jaxrna.fold.partition import pair_score_matrix, inside_spans, skew_pair_weights, skew_size
>>> from jaxrna.semiring import log_semiring
>>> from jaxrna.weights import parse_weights
>>> s = pair_score_matrix(encode("GGGAAAUCC"), parse_weights("unit").matrix(), 3, jnp.float32)
>>> sr = log_semiring(1.0)
>>> rows = inside_spans(s, sr, min_loop=3)
>>> P = outside_probabilities(rows, skew_pair_weights(s, sr, 3, rows.shape[0]), 9)
>>> round(float(P[0, 8]), 4)
0.4673
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from jaxrna.fold.inside import range_blocks, runtime_length, skew_size, sweep_blocks
from jaxrna.semiring import NEG_FLOAT, log_semiring

_SR = log_semiring(1.0)


def _lse(*xs):
    x = jnp.stack(xs)
    return _SR.sum(x, axis=0)


@partial(jax.jit, static_argnames=("n", "blocks"))
def outside_probabilities(rows: jax.Array, lws: jax.Array, n: int,
                          blocks: int | None = None, length=None) -> jax.Array:
    """The ``(n, n)`` pair probabilities from the inside table ``rows`` (``rows[d, i] =
    ln Z[i, i+d]``) and the skewed log pair weights ``lws`` (``lws[e, k]`` for pair
    ``(k, k+e)``) of :func:`jaxrna.fold.partition.inside_from_skew`; both ``(M, M)`` with
    ``M >= skew_size(n, blocks)`` (``blocks`` defaults to :func:`sweep_blocks`). ``length``: the
    sequence's own length ``m <= n`` as a runtime value, as in ``inside_from_skew`` (the root is
    ``Zbar[0, m]``, spans above ``m`` are skipped); None: ``n``."""
    M = rows.shape[0]
    blocks = blocks or sweep_blocks(n)
    if M < skew_size(n, blocks):
        raise ValueError(f"tables of side {M} are too small for {blocks} span blocks")
    dtype = rows.dtype
    NEG = jnp.asarray(NEG_FLOAT, dtype)
    N = n + 1
    length = runtime_length(length)
    m = n if length is None else length
    lnz = rows[m, 0]
    a = jnp.arange(M)[:, None]
    b = jnp.arange(M)[None, :]
    cl = lambda x: jnp.clip(x, 0, M - 1)  # noqa: E731
    # zc[u, k] = Z[k-u, k];  prow[e, k] = P[k, k+e] = w(k, k+e-1) + Z[k+1, k+e-1]
    zc = jnp.where((a <= b) & (b <= n), rows[a, cl(b - a)], NEG)
    prow = jnp.where((a >= 2) & (a + b <= n), lws[cl(a - 1), b] + rows[cl(a - 2), cl(b + 1)], NEG)
    zb = jnp.full((M, M), NEG, dtype)
    zbc = jnp.full((M, M), NEG, dtype)
    pbs = jnp.full((M, M), NEG, dtype)
    for d0, d1 in reversed(range_blocks(1, N, blocks)):
        H = N - d0
        w2 = max(n - d0 - 1, 1)
        wp = n - d0 + 1
        i = jnp.arange(H)

        top = d1 if length is None else jnp.clip(length + 1, d0, d1)

        def body(step, carry, top=top, H=H, w2=w2, wp=wp, i=i):
            zb, zbc, pbs = carry
            d = top - 1 - step
            valid = i <= m - d
            t1 = jax.lax.dynamic_slice(zb, (d + 1, 0), (1, H))[0]                # Zbar[i, j+1]
            t2 = _SR.sum(jax.lax.dynamic_slice(zb, (d + 2, 0), (w2, H))
                         + jax.lax.dynamic_slice(prow, (2, d), (w2, H)), axis=0)
            pw = jax.lax.dynamic_slice(lws, (d + 1, 0), (1, H))[0]               # pair (i, i+d+1)
            pb_up = jax.lax.dynamic_slice(pbs, (d + 2, 0), (1, H))[0]            # Pbar[i, i+d+2]
            t3 = jnp.concatenate([NEG[None], (pw + pb_up)[:-1]])                 # shifted to i+1
            root = jnp.where((i == 0) & (d == m), jnp.zeros((), dtype), NEG)
            z = jnp.where(valid, _lse(t1, t2, t3, root), NEG)
            zb = jax.lax.dynamic_update_slice(zb, z[None, :], (d, 0))
            zbc = jax.lax.dynamic_update_slice(zbc, z[None, :], (d, d))
            pb = _SR.sum(jax.lax.dynamic_slice(zbc, (d, d), (wp, H)) + zc[0:wp, 0:H], axis=0)
            pb = jnp.where(valid, pb, NEG)
            pbs = jax.lax.dynamic_update_slice(pbs, pb[None, :], (d, 0))
            return zb, zbc, pbs

        zb, zbc, pbs = jax.lax.fori_loop(0, top - d0, body, (zb, zbc, pbs))
    # pair (k, l) is P[k, l+1]: skew span e = l - k + 1
    k = jnp.arange(n)[:, None]
    l = jnp.arange(n)[None, :]
    e = cl(l - k + 1)
    logp = pbs[e, k] + prow[e, k] - lnz
    return jnp.where(l > k, jnp.exp(logp), jnp.zeros((), dtype))
