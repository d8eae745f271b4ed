"""The partition program's reads without atomic scatter-adds in their derivatives
(jaxrna.energy.tap_rows, partition.exterior_c): the same values and derivatives as JAX's plain
gathers, and no scatter in the program that lacks unique indices (on a GPU, XLA runs those with
atomic additions, whose order changed the pair probabilities' last bits from run to run)."""

import re

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.energy import partition as P
from jaxrna.energy.tap_rows import tap_rows
from jaxrna.energy.terms import COL_PAD, ROW_PAD


def test_tap_rows_and_its_derivative_equal_the_plain_gather():
    with P.x64():                               # float64, as the partition function runs
        _compare_with_the_plain_gather()


def _compare_with_the_plain_gather():
    rng = np.random.default_rng(3)
    block = jnp.asarray(rng.normal(size=(6, 4, 30)))
    taps = 40                                   # cells read by several taps, rows by none
    r = rng.integers(0, 5, taps)
    k = rng.integers(0, 3, taps)
    di = rng.integers(0, 10, taps)
    height = 20
    weights = jnp.asarray(rng.normal(size=(taps, height)))

    def plain(b):
        return b[r[:, None], k[:, None], di[:, None] + np.arange(height)[None, :]]

    np.testing.assert_array_equal(tap_rows(block, r, k, di, height), plain(block))
    want = jax.grad(lambda b: jnp.sum(jnp.sin(plain(b)) * weights))(block)
    got = jax.grad(lambda b: jnp.sum(jnp.sin(tap_rows(b, r, k, di, height)) * weights))(block)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert float(jnp.abs(got[5]).sum()) == 0.0 and float(jnp.abs(got[:, 3]).sum()) == 0.0
    # taps last (as the partition function reads them): the same values and derivative
    np.testing.assert_array_equal(tap_rows(block, r, k, di, height, taps_last=True),
                                  plain(block).T)
    last = jax.grad(lambda b: jnp.sum(jnp.sin(tap_rows(b, r, k, di, height, taps_last=True))
                                      * weights.T))(block)
    np.testing.assert_allclose(last, want, rtol=1e-12, atol=1e-12)
    # under vmap (the batch program's rows), the same per row
    blocks = jnp.stack([block, 2 * block])
    batched = jax.vmap(jax.grad(lambda b: jnp.sum(tap_rows(b, r, k, di, height) ** 2)))(blocks)
    one = jax.grad(lambda b: jnp.sum(plain(b) ** 2))
    np.testing.assert_allclose(batched[1], one(2 * block), rtol=1e-12, atol=1e-12)


def test_exterior_c_reads_c_and_its_derivative_lands_on_the_cells_read():
    length = 6
    rng = np.random.default_rng(4)
    T = jnp.asarray(rng.normal(size=(ROW_PAD + length, 9, length + COL_PAD)))
    got = P.exterior_c(T, length)
    for j in range(length):
        for i in range(length):
            want = float(T[ROW_PAD + j - i, 0, i]) if j >= i else P.INF
            assert float(got[j, i]) == want
    w = jnp.asarray(rng.normal(size=(length, length)))
    g = jax.grad(lambda t: jnp.sum(jnp.where(jnp.tril(jnp.ones((length, length))) > 0,
                                             P.exterior_c(t, length), 0.0) * w))(T)
    assert float(jnp.abs(g[:, 1:]).sum()) == 0.0          # nothing but channel C
    assert float(g[ROW_PAD + 3, 0, 1]) == float(w[4, 1])


def test_the_partition_program_has_no_scatter_without_unique_indices():
    with P.x64():
        args, _ = P.batch_inputs(["GGGGAAACCCCAUGCAUCG" * 16], length=384)
        text = jax.jit(P._batch_lz_and_bpp).lower(*args).as_text()
    scatters = [line for line in text.splitlines() if "stablehlo.scatter" in line]
    assert len(scatters) >= 5                # the program's scatters are found (7 for one
    #                                           row, traced without vmap: map_rows) ...
    shared = [s for s in scatters if not re.search(r"unique_indices = true", s)]
    assert not shared, shared[:2]            # ... and every one has distinct cells


def test_the_derivatives_store_no_index_tables_in_the_program():
    """The derivatives' (taps x width) and (length x length) indices are built in the program
    from small constants: stored, they made the 1,024-nt partition program's StableHLO 80 MB
    instead of 21 (its executable 29 MB instead of 13)."""
    rng = np.random.default_rng(5)
    taps, width, height = 300, 2100, 2000
    r, k, di = rng.integers(0, 32, taps), rng.integers(0, 9, taps), rng.integers(0, 90, taps)
    block = jax.ShapeDtypeStruct((32, 9, width), jnp.float32)
    forward = jax.jit(lambda b: tap_rows(b, r, k, di, height).sum()).lower(block).as_text()
    both = jax.jit(jax.grad(lambda b: tap_rows(b, r, k, di, height).sum())).lower(block).as_text()
    assert len(both) - len(forward) < 100_000, len(both) - len(forward)   # (taps x width): MBs
    table = jax.ShapeDtypeStruct((ROW_PAD + 1000, 9, 1000 + COL_PAD), jnp.float32)
    text = jax.jit(lambda t: P.exterior_c(t, 1000)).lower(table).as_text()
    assert len(text) < 100_000, len(text)
