"""The max-plus kernels: Pallas (interpret mode on CPU) against the pure-JAX path and NumPy.

Fresh random inputs every run (the seed is printed on failure), ragged shapes, -infinity
entries and padding, batch broadcasting, triangular/banded block skipping, and seed 003's
check (section 5.6): the single largest value moved through every position of A and of B.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrna.kernels.tropical import maxplus, maxplus_update, maxplus_update_xla, resolve_backend
from jaxrna.kernels.tropical_pallas import (KernelConfig, Structure, maxplus_update_pallas,
                                            neg_value)

NEG = -(1 << 29)
SMALL = KernelConfig(block_m=16, block_n=32, unroll=4, ru=4, rv=8)   # several blocks per test
VARIANTS = [SMALL, dataclasses.replace(SMALL, variant="outer"),
            dataclasses.replace(SMALL, variant="bcast3d")]


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy % (1 << 32)
    print("seed", seed)
    return np.random.default_rng(seed)


def numpy_maxplus(c, a, b):
    """Independent oracle: ``max(c, max_k a[..., i, k] + b[..., k, j])`` in int64 / float64."""
    wide = np.float64 if np.asarray(a).dtype.kind == "f" else np.int64
    a64, b64 = np.asarray(a, wide), np.asarray(b, wide)
    prod = (a64[..., :, :, None] + b64[..., None, :, :]).max(axis=-2)
    return np.maximum(np.asarray(c, wide), prod)


def rand(rng, shape, lo=-1000, hi=1000, dtype=np.int32):
    return rng.integers(lo, hi, shape).astype(dtype)


@pytest.mark.slow
@pytest.mark.parametrize("cfg", VARIANTS, ids=["blocked", "outer", "bcast3d"])
@pytest.mark.parametrize("shape", [((), 37, 29, 45), ((2,), 16, 32, 32), ((3,), 5, 1, 70),
                                   ((), 1, 50, 1)])
def test_pallas_matches_xla_and_numpy(rng, cfg, shape):
    batch, m, k, n = shape
    a, b = rand(rng, batch + (m, k)), rand(rng, batch + (k, n))
    c = rand(rng, batch + (m, n), -3000, 3000)
    got = np.asarray(maxplus_update_pallas(jnp.asarray(c), jnp.asarray(a), jnp.asarray(b),
                                           config=cfg, interpret=True))
    assert (got == numpy_maxplus(c, a, b)).all()
    assert (got == np.asarray(maxplus_update_xla(c, a, b))).all()


def test_minus_infinity_entries_and_padding(rng):
    m, k, n = 33, 18, 40
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    a[rng.random((m, k)) < 0.5] = NEG            # half the entries are -infinity
    b[:, 3] = NEG                                # a column that is -infinity throughout
    a[7, :] = NEG                                # a row too
    c = np.full((m, n), NEG, np.int32)
    got = np.asarray(maxplus_update_pallas(c, a, b, config=SMALL, interpret=True))
    want = numpy_maxplus(c, a, b)
    sat = lambda x: np.maximum(x, NEG // 2)      # noqa: E731 -- everything <= NEG/2 is -infinity
    assert (sat(got) == sat(want)).all()
    assert (got[7] <= NEG // 2).all() and (got[:, 3] <= NEG // 2).all()
    assert neg_value(jnp.int32) == -(1 << 30) and neg_value(jnp.float32) == float("-inf")


def test_broadcast_batch_and_float32(rng):
    a = rand(rng, (1, 20, 24)).astype(np.float32)
    b = rand(rng, (4, 24, 17)).astype(np.float32)
    c = np.full((4, 20, 17), -np.inf, np.float32)
    got = np.asarray(maxplus_update_pallas(c, a, b, config=SMALL, interpret=True))
    assert got.dtype == np.float32
    assert (got == numpy_maxplus(c, np.broadcast_to(a, (4, 20, 24)), b)).all()


@pytest.mark.parametrize("structure", [Structure.upper(), Structure.band(9),
                                       Structure(a_lo=2, a_hi=20, b_lo=0, b_hi=None)])
def test_structure_skips_blocks_without_changing_the_result(rng, structure):
    m = 70
    ma, mb = structure.mask(m, m, m)
    a = np.where(ma, rand(rng, (m, m), 0, 1000), NEG).astype(np.int32)
    b = np.where(mb, rand(rng, (m, m), 0, 1000), NEG).astype(np.int32)
    c = np.where(np.triu(np.ones((m, m), bool)), rand(rng, (m, m), 0, 500), NEG).astype(np.int32)
    got = np.asarray(maxplus_update_pallas(c, a, b, config=SMALL, structure=structure,
                                           interpret=True))
    sat = lambda x: np.maximum(x, NEG // 2)      # noqa: E731
    assert (sat(got) == sat(numpy_maxplus(c, a, b))).all()


@pytest.mark.parametrize("cfg", VARIANTS[:2], ids=["blocked", "outer"])
def test_largest_value_through_every_position(rng, cfg):
    """Seed 003, section 5.6: every cell must see every k (no missed or extra terms)."""
    m, k, n = 19, 13, 21                         # ragged against the 16 x 32 blocks
    big = 1 << 20
    a0, b0 = rand(rng, (m, k), 0, 100), rand(rng, (k, n), 0, 100)
    cases_a, cases_b = [], []
    for i in range(m):
        for kk in range(k):
            a = a0.copy()
            a[i, kk] = big
            cases_a.append(a)
            cases_b.append(b0)
    for kk in range(k):
        for j in range(n):
            b = b0.copy()
            b[kk, j] = big
            cases_a.append(a0)
            cases_b.append(b)
    a, b = np.stack(cases_a), np.stack(cases_b)
    c = np.full((len(a), m, n), NEG, np.int32)
    got = np.asarray(maxplus_update_pallas(c, a, b, config=cfg, interpret=True))
    want = numpy_maxplus(c, a, b)
    assert (got == want).all()
    # the big value reaches exactly its row (from A) or its column (from B)
    assert ((got >= big).sum(axis=(1, 2)) == np.array([n] * (m * k) + [m] * (k * n))).all()


def test_seam_picks_by_platform(rng, monkeypatch):
    a, b, c = rand(rng, (24, 10)), rand(rng, (10, 12)), rand(rng, (24, 12))
    want = numpy_maxplus(c, a, b)
    for backend in ("xla", "interpret", "auto", None):
        assert (np.asarray(maxplus_update(c, a, b, backend=backend)) == want).all()
    monkeypatch.setenv("JAXRNA_TROPICAL_BACKEND", "interpret")
    assert resolve_backend(None) == "interpret"
    assert (np.asarray(maxplus_update(c, a, b)) == want).all()
    with pytest.raises(ValueError):
        resolve_backend("cuda-please")
    assert maxplus(jnp.zeros((2, 3), jnp.int32), jnp.zeros((3, 2), jnp.int32)).shape == (2, 2)


def test_seam_under_vmap_and_jit(rng):
    a, b, c = rand(rng, (3, 20, 9)), rand(rng, (3, 9, 17)), rand(rng, (3, 20, 17))
    f = jax.jit(jax.vmap(lambda c, a, b: maxplus_update(c, a, b, backend="interpret")))
    assert (np.asarray(f(c, a, b)) == numpy_maxplus(c, a, b)).all()


def test_gpu_lowering_uses_the_pallas_kernel():
    """On a CUDA device the automatic choice lowers to the Triton kernel (checked without a GPU).

    This also catches Pallas API drift between jax versions in CI, which has no GPU."""
    x = jax.ShapeDtypeStruct((256, 256), jnp.int32)
    for fn in (lambda c, a, b: maxplus_update(c, a, b),
               lambda c, a, b: maxplus_update_pallas(c, a, b, structure=Structure.upper()),
               lambda c, a, b: maxplus_update_pallas(c, a, b, config=KernelConfig(variant="outer",
                                                                                  asm=False))):
        text = jax.jit(fn).trace(x, x, x).lower(lowering_platforms=("cuda",)).as_text()
        assert "triton" in text
    cpu = jax.jit(lambda c, a, b: maxplus_update(c, a, b)).trace(x, x, x).lower(
        lowering_platforms=("cpu",)).as_text()
    assert "triton" not in cpu
