"""The partition sweep's opt-in storage (jaxrna.energy.partition_sweep): a chunked reduction
(``Reduction``), short channels, output channels and band tables, on a toy recursion (fast)
and on the dangles-2 expected partition function (slow): the outside pass equals JAX's reverse
mode, and every storage gives the same values and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrna.energy import partition_sweep as ps
from jaxrna.energy.fill_plan import sweep_bands
from jaxrna.energy.params import INF
from jaxrna.energy.partition import x64
from jaxrna.energy.terms import ROW_PAD

LENGTH = 40
CHUNK = 3          # does not divide the split's widths


def _finite(x):
    return jnp.where(x >= INF / 2, 0.0, x)


def _chunk(k, d, R, diff, fixed, height, width):
    """Chunk k of a soft minimum over the split points e < d - 1 of channel 0 on diagonal e
    (a far window) and channel 1 on diagonal d - 1 - e (a far window, read skewed)."""
    c = CHUNK
    e0 = k * c
    start = jnp.minimum(e0, d - 1 - c)
    es = start + jnp.arange(c)
    ok = ((es >= e0) & (es <= d - 2))[:, None]
    u, _ = R.far((ROW_PAD + start, 0, 0), (c, 1, height), ROW_PAD + start + c - 1)
    r0 = ROW_PAD + d - start - c
    p, c0 = R.far((r0, 1, 1 + start), (c, 1, height + c), r0 + c - 1)
    cols = jnp.clip(1 + es[:, None] + jnp.arange(height)[None, :] - c0, 0, height + c - 1)
    pk = p[jnp.arange(c)[::-1][:, None], 0, cols]
    val = jnp.where(ok, jnp.tanh(_finite(u[:, 0]) * diff["x"][3] + _finite(pk)), INF)
    return -jax.nn.logsumexp(-diff["beta"] * val, axis=0) / diff["beta"]


REDUCTION = ps.Reduction(chunk=_chunk, count=lambda d, width: (d - 2) // CHUNK + 1,
                         max_count=lambda width: -(-(width - 2) // CHUNK),
                         beta=lambda diff: diff["beta"])


def _rows(d, R, diff, fixed, height, width, reduced):
    x = diff["x"]
    prev = _finite(R.T((ROW_PAD + d - 1, 0, 0), (1, 3, height))[0])    # channel 2: short
    block = _finite(R.T((ROW_PAD + d - 3, 0, 1), (3, 2, height))).sum(0)
    row0 = (jnp.sin(x[0] * d) + 0.5 * jnp.tanh(prev[0] + prev[2]) + 0.1 * jnp.tanh(block[1])
            + 0.2 * jnp.tanh(reduced))
    row1 = jnp.cos(x[1] + prev[1]) + 0.3 * jnp.tanh(block[0])
    row2 = jnp.tanh(x[2] * prev[0] + prev[2])
    return jnp.stack([row0, row1, row2])


def _loss(run, banded):
    def f(x, beta):
        T, _ = run(_rows, LENGTH, 3, 0, {"x": x, "beta": beta}, {}, INF, (), REDUCTION,
                   (2, 1), (0, 2), banded)
        i = jnp.arange(LENGTH)
        d = jnp.arange(LENGTH)[:, None]
        cells = T[ROW_PAD + d, :, i[None, :]]                       # (d, i, 2)
        ok = (d >= 4) & (i[None, :] < LENGTH - d)
        return jnp.sum(jnp.where(ok[..., None], cells, 0.0) * jnp.array([1.0, -0.5]))
    return jax.jit(jax.value_and_grad(f, argnums=(0, 1)))


def _check(count, storages, monkeypatch):
    monkeypatch.setattr(ps, "bands", lambda n: sweep_bands(n, count) if n > 4 else [])
    with x64():
        x, beta = jnp.array([0.7, -0.3, 0.5, 0.9], jnp.float64), jnp.float64(1.3)
        ref = None
        for banded in storages:
            v1, g1 = _loss(ps.sweep, banded)(x, beta)
            v2, g2 = _loss(ps.forward, banded)(x, beta)
            np.testing.assert_allclose(float(v1), float(v2), rtol=1e-13)
            for a, b in zip(g1, g2):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-10, atol=1e-12)
            if ref is None:
                ref = (v1, g1)
            np.testing.assert_allclose(float(v1), float(ref[0]), rtol=1e-13)
            for a, b in zip(g1, ref[1]):
                np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-13)
        assert abs(float(ref[1][1])) > 0 and np.all(np.asarray(ref[1][0]) != 0)


def test_band_tables_outside_pass_equals_reverse_mode(monkeypatch):
    """Four bands of 9 diagonals (the 3-diagonal block and the far windows straddle them),
    band tables: the outside pass of a sweep with a chunked reduction (chunks of 3), a short
    channel and two output channels equals JAX's reverse mode through the same sweep."""
    _check(4, (True,), monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("count", [1, 2, 4])
def test_storage_outside_pass_equals_reverse_mode(monkeypatch, count):
    """With 1, 2 and 4 bands, band tables or the square: the outside pass equals reverse
    mode, and the tables' storage changes nothing."""
    _check(count, (False, True), monkeypatch)


def test_band_layouts_and_storage_checks():
    lays = ps.layouts(1024, 3, True)
    assert [x.off for x in lays] == [d0 for d0, _ in ps.bands(1024)]
    cells = sum(x.shape[0] * x.shape[2] for x in lays)
    assert cells < 0.71 * (ROW_PAD + 1024) * (1024 + 40)      # four bands, halos included
    with pytest.raises(ValueError):
        ps.sweep(_rows, LENGTH, 3, 0, {"x": jnp.ones(4), "beta": 1.0}, {}, INF, (), REDUCTION,
                 (2, 1), None, True)


@pytest.mark.slow
def test_d2_chunks_and_bands_change_nothing(monkeypatch):
    """The dangles-2 gradient with a split chunk of 5 (dividing no width) and 4 bands of
    ~11 diagonals (the pair block of 32 straddles three) equals the program with chunks of
    39 split points, one band and the square table (value and gradient, float64)."""
    from jaxrna.energy import partition_expected_d2 as d2
    from jaxrna.energy.partition_expected import expected_log_z

    rng = np.random.default_rng(11)
    q = rng.dirichlet(np.ones(4) * 0.7, size=44)
    out = []
    with x64():
        for chunk, count, banded in ((39, 1, False), (5, 4, True)):
            jax.clear_caches()                   # (the programs are cached by length)
            monkeypatch.setattr(d2, "SPLIT_CHUNK", chunk)
            monkeypatch.setattr(d2, "BANDED", banded)
            monkeypatch.setattr(ps, "bands", lambda n, c=count: sweep_bands(n, c) if n > 4 else [])
            v, g = jax.value_and_grad(lambda q: expected_log_z(q, dangles=2))(jnp.asarray(q))
            out.append((float(v), np.asarray(g)))
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-12)
    np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-10, atol=1e-14)
