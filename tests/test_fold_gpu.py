"""The GPU fold schedule (jaxrna.fold.gpu), run on CPU in Pallas interpret mode.

Its table must equal the plain reference and the CPU path cell for cell, for every weight set;
its device traceback must return the same structure as the host traceback; the packed layout
must index correctly; and the memory estimate must refuse what does not fit.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fold_brute import brute_force_score
from jaxrna.alphabet import encode
from jaxrna.fold.blocked import blocked_fill, dense_table
from jaxrna.fold.gpu import (LARGE_CONFIG, SMALL_CONFIG, GpuFoldConfig, GpuMemoryError,
                             check_gpu_memory, config_for_length, estimate_gpu_bytes,
                             fill_packed, fold_gpu, max_length_for, packed_score,
                             traceback_device)
from jaxrna.fold.packed import (cell, dense_to_packed, diag_offset, n_slots, packed_bytes,
                                packed_to_dense, slot)
from jaxrna.fold.reference import reference_table
from jaxrna.fold.traceback import check_structure, traceback
from jaxrna.weights import parse_weights

WEIGHTS = ["unit", "bpmax", "integer", "GC=2.5,AU=1,GU=0.5"]
#: small tiles so short sequences span several tiles, sub-blocks and split-K chunks
CFG = GpuFoldConfig(tile=16, block=16, unroll=4, variant="blocked", ru=4, rv=4,
                    target_programs=6)
CFG_OUTER = GpuFoldConfig(tile=32, block=16, block_n=32, unroll=8, variant="outer",
                          target_programs=3)


@pytest.fixture
def rng():
    seed = np.random.SeedSequence().entropy % (1 << 32)
    print("seed", seed)
    return np.random.default_rng(seed)


def random_seq(rng, n):
    return "".join(rng.choice(list("ACGU"), n))


def gpu_table(seq, weights, min_loop, cfg):
    t = cfg.tile
    codes = np.full(-(-len(seq) // t) * t, 4, np.int32)
    codes[:len(seq)] = encode(seq)
    tab = fill_packed(jnp.asarray(codes), jnp.asarray(weights.matrix()), min_loop, cfg, True)
    return tab, codes


@pytest.mark.slow
@pytest.mark.parametrize("ws", WEIGHTS)
def test_table_equals_reference_for_every_weight_set(rng, ws):
    w = parse_weights(ws)
    for n, min_loop, cfg in [(61, 3, CFG), (75, 0, CFG_OUTER)]:
        seq = random_seq(rng, n)
        tab, codes = gpu_table(seq, w, min_loop, cfg)
        ref = np.array(reference_table(seq, w, min_loop))
        assert (packed_to_dense(np.asarray(tab), n) == ref).all()
        assert int(packed_score(tab, n)) == ref[0, n - 1]
        partner, ok = traceback_device(tab, jnp.asarray(codes), jnp.asarray(w.matrix()),
                                       n, min_loop)
        partner = np.asarray(partner)[:n]
        pairs = [(int(i), int(partner[i])) for i in np.flatnonzero(partner > np.arange(n))]
        assert bool(ok)
        assert pairs == traceback(ref, encode(seq), w.matrix(), min_loop)


@pytest.mark.slow
def test_equals_cpu_path(rng):
    """Same table as the CPU path (jaxrna.fold.blocked, what api.py runs on CPU)."""
    w = parse_weights("bpmax")
    seq = random_seq(rng, 90)
    tab, _ = gpu_table(seq, w, 3, CFG_OUTER)
    codes = np.full(128, 4, np.int8)
    codes[:90] = encode(seq)
    cpu = dense_table(np.asarray(blocked_fill(jnp.asarray(codes), jnp.asarray(w.matrix()), 3,
                                              tile=32)), 90)
    assert (packed_to_dense(np.asarray(tab), 90) == cpu).all()


@pytest.mark.slow
def test_fold_gpu_structures_are_valid_and_optimal(rng):
    w = parse_weights("integer")
    for n in (0, 1, 2, 5, 14, 17, 40):             # one compiled shape for all (pad_to)
        seq = random_seq(rng, n)
        score, pairs = fold_gpu(encode(seq), w.matrix(), 3, config=CFG, interpret=True, pad_to=48)
        check_structure(pairs, encode(seq), w.matrix(), 3)
        assert sum(int(w.matrix()[encode(seq)[i], encode(seq)[j]]) for i, j in pairs) == score
        if n <= 14:
            assert score == (brute_force_score(seq, w, 3) if n else 0)
    score, pairs = fold_gpu(encode("GGGGAAAACCCC"), w.matrix(), 3, config=CFG, interpret=True,
                            with_pairs=False, pad_to=40)
    assert (score, pairs) == (12, None)


def test_packed_layout_indexing(rng):
    nb, t = 5, 4
    assert n_slots(nb) == 15 and diag_offset(0, nb) == 0 and diag_offset(1, nb) == 5
    seen = sorted(slot(i, j, nb) for i in range(nb) for j in range(i, nb))
    assert seen == list(range(n_slots(nb)))                 # a bijection onto the slots
    dense = np.triu(rng.integers(0, 1000, (nb * t, nb * t))).astype(np.int32)
    tab = dense_to_packed(dense, t)
    assert (packed_to_dense(tab, nb * t) == dense).all()
    assert (packed_to_dense(tab, 13) == dense[:13, :13]).all()
    i = rng.integers(0, nb * t, 200)
    j = rng.integers(0, nb * t, 200)
    got = np.asarray(cell(jnp.asarray(tab), i, j, nb))
    assert (got == np.where(i <= j, dense[i, np.maximum(i, j)], 0)).all()
    assert packed_bytes(100_000, 128) == 782 * 783 // 2 * 128 * 128 * 4


def test_memory_estimate_refuses_clearly():
    est = estimate_gpu_bytes(100_000)
    assert 20e9 < est < 23e9                                 # 100,000 nt fits a 141 GB GPU
    assert est < estimate_gpu_bytes(150_000) < 141e9
    assert check_gpu_memory(100_000, max_bytes=100 * 10 ** 9) == est
    with pytest.raises(GpuMemoryError) as info:
        check_gpu_memory(300_000, "chr1_fragment", max_bytes=100 * 10 ** 9)
    msg = str(info.value)
    assert "chr1_fragment" in msg and "300000 nt" in msg and "GB" in msg and "longest" in msg
    fit = max_length_for(100 * 10 ** 9)
    assert estimate_gpu_bytes(fit) <= 100 * 10 ** 9 < estimate_gpu_bytes(fit + 64)
    with pytest.raises(GpuMemoryError):
        fold_gpu(encode("ACGU" * 100), parse_weights("unit").matrix(), 3, max_bytes=10 ** 6)


def test_configs():
    assert config_for_length(16_000) is SMALL_CONFIG and config_for_length(100_000) is LARGE_CONFIG
    with pytest.raises(ValueError):
        GpuFoldConfig(tile=48)
    with pytest.raises(ValueError):
        GpuFoldConfig(tile=64, block=128)


def test_gpu_lowering_of_the_schedule():
    """The fill lowers to Triton kernels for CUDA (checked without a GPU; catches API drift),
    also for a table over 4 GB (64-bit addressing)."""
    w = jax.ShapeDtypeStruct((5, 5), jnp.int32)
    for n, cfg in [(1024, SMALL_CONFIG), (2048, LARGE_CONFIG), (70_016, LARGE_CONFIG)]:
        codes = jax.ShapeDtypeStruct((n,), jnp.int32)
        text = fill_packed.trace(codes, w, 3, cfg, False).lower(
            lowering_platforms=("cuda",)).as_text()
        assert text.count("triton") >= 2
