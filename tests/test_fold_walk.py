"""The traceback on the device (jaxrna.fold.walk) and the NumPy engine (jaxrna.fold.host)
against the host reference traceback, the plain reference table and enumeration."""

from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fold_brute import brute_force_score
from jaxrna.alphabet import encode
from jaxrna.fold.blocked import blocked_fill, dense_table
from jaxrna.fold.gpu import GpuFoldConfig, fill_packed
from jaxrna.fold.host import dense_from_rows, fill_host, fold_host
from jaxrna.fold.packed import packed_to_dense
from jaxrna.fold.reference import reference_table
from jaxrna.fold.traceback import check_structure, structure_weight, traceback
from jaxrna.fold.walk import (partner_pairs, traceback_packed_kernel, traceback_tiles,
                              traceback_tiles_kernel)
from jaxrna.weights import parse_weights

WEIGHTS = ["unit", "bpmax", "integer", "GC=2.5,AU=1,GU=0.5"]


def rand_seq(rng, n, alphabet="ACGU"):
    return "".join(rng.choice(alphabet) for _ in range(n))


def batch(seqs, length, w, min_loop, tile):
    codes = np.full((len(seqs), length), 4, np.int8)
    for r, s in enumerate(seqs):
        codes[r, :len(s)] = encode(s)
    tiles = jax.vmap(lambda c: blocked_fill(c, w.matrix(), min_loop, tile=tile))(codes)
    return codes, tiles, jnp.array([len(s) for s in seqs], jnp.int32)


def host_pairs(tiles, r, seq, w, min_loop):
    if len(seq) <= 1:
        return []
    return traceback(dense_table(np.asarray(tiles[r]), len(seq)), encode(seq), w.matrix(),
                     min_loop)


@pytest.mark.slow
@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("min_loop", [0, 3])
def test_batched_walk_equals_host_traceback(weights, min_loop):
    """Every sequence of a padded batch (lengths 0 .. 64, N codes): the same pairs as the host
    reference. A small search window and unroll make splits take several steps."""
    rng = random.Random(f"{weights}{min_loop}")
    w = parse_weights(weights)
    lengths = [0, 1, 2, 5, 17, 33, 48, 64] + [rng.randint(0, 64) for _ in range(8)]
    seqs = [rand_seq(rng, n, "ACGUN" if k % 5 == 0 else "ACGU") for k, n in enumerate(lengths)]
    codes, tiles, lengths = batch(seqs, 64, w, min_loop, 16)
    partner, ok = traceback_tiles(tiles, jnp.asarray(codes), lengths, w.matrix(), min_loop,
                                  search=4, unroll=3)
    assert np.asarray(ok).all()
    for r, s in enumerate(seqs):
        got = partner_pairs(np.asarray(partner[r]), len(s))
        assert got == host_pairs(tiles, r, s, w, min_loop), s


@pytest.mark.parametrize("weights", ["unit", "bpmax"])
def test_walk_structures_are_optimal_by_enumeration(weights):
    rng = random.Random(weights)
    w = parse_weights(weights)
    seqs = [rand_seq(rng, rng.randint(1, 13)) for _ in range(12)]
    codes, tiles, lengths = batch(seqs, 16, w, 3, 8)
    partner, _ = traceback_tiles(tiles, jnp.asarray(codes), lengths, w.matrix(), 3, search=2)
    for r, s in enumerate(seqs):
        pairs = partner_pairs(np.asarray(partner[r]), len(s))
        check_structure(pairs, encode(s), w.matrix(), 3)
        assert structure_weight(pairs, encode(s), w.matrix()) == brute_force_score(s, w, 3)


@pytest.mark.slow
def test_kernel_walk_equals_host_traceback():
    """The one-kernel walk (Pallas, interpret mode here) on both table layouts."""
    rng = random.Random(7)
    w = parse_weights("bpmax")
    seqs = [rand_seq(rng, n) for n in (0, 1, 9, 30, 47, 48)]
    codes, tiles, lengths = batch(seqs, 48, w, 3, 16)
    partner, ok = traceback_tiles_kernel(tiles, jnp.asarray(codes), lengths, w.matrix(), 3,
                                         search=8, interpret=True)
    assert np.asarray(ok).all()
    for r, s in enumerate(seqs):
        assert partner_pairs(np.asarray(partner[r]), len(s)) == host_pairs(tiles, r, s, w, 3)
    cfg = GpuFoldConfig(tile=16, block=16, unroll=4, variant="blocked", ru=4, rv=4,
                        target_programs=6)
    for n in (2, 61, 90):
        s = rand_seq(rng, n)
        c = np.full(-(-n // 16) * 16, 4, np.int32)
        c[:n] = encode(s)
        tab = fill_packed(jnp.asarray(c), jnp.asarray(w.matrix()), 3, cfg, True)
        partner, ok = traceback_packed_kernel(tab, jnp.asarray(c), w.matrix(), n, 3, search=16,
                                              interpret=True)
        ref = traceback(packed_to_dense(np.asarray(tab), n), encode(s), w.matrix(), 3)
        assert bool(ok) and partner_pairs(np.asarray(partner), n) == ref


def test_kernel_walk_lowers_for_cuda():
    """Both kernels lower to Triton (checked without a GPU; catches API drift), also for a
    packed table over 4 GB."""
    w = jax.ShapeDtypeStruct((5, 5), jnp.int32)
    for n, t in [(16_384, 64), (100_096, 128)]:
        nb = n // t
        tab = jax.ShapeDtypeStruct((nb * (nb + 1) // 2, t, t), jnp.int32)
        codes = jax.ShapeDtypeStruct((n,), jnp.int32)
        text = traceback_packed_kernel.trace(tab, codes, w, jnp.int32(n), 3).lower(
            lowering_platforms=("cuda",)).as_text()
        assert "triton" in text
    tiles = jax.ShapeDtypeStruct((64, 8, 8, 64, 64), jnp.int32)
    text = traceback_tiles_kernel.trace(tiles, jax.ShapeDtypeStruct((64, 512), jnp.int8),
                                        jax.ShapeDtypeStruct((64,), jnp.int32), w, 3).lower(
        lowering_platforms=("cuda",)).as_text()
    assert "triton" in text


@pytest.mark.parametrize("weights", ["integer", "GC=2.5,AU=1,GU=0.5"])
def test_host_engine_table_and_structures(weights):
    """The NumPy fill is the reference table; fold_host's structures are the host reference's."""
    rng = random.Random(weights)
    w = parse_weights(weights)
    for min_loop in (0, 1, 3):
        seqs = [rand_seq(rng, rng.randint(0, 40), "ACGUN") for _ in range(10)]
        res = fold_host(seqs, w.matrix(), min_loop)
        for s, (score, pairs) in zip(seqs, res):
            if len(s) <= 1:
                assert (score, pairs) == (0, ())
                continue
            codes = encode(s)[None]
            table = dense_from_rows(fill_host(codes, w.matrix(), min_loop)[0], len(s))
            ref = np.triu(np.array(reference_table(s, w, min_loop)))
            assert np.array_equal(table, ref)
            assert score == ref[0, len(s) - 1]
            assert list(pairs) == traceback(ref, encode(s), w.matrix(), min_loop)


def test_engines_agree_through_the_api():
    """fold_records on the NumPy engine and on JAX's CPU (device traceback): same results."""
    from jaxrna.fold.api import fold_records
    from jaxrna.io.fasta import Record

    rng = random.Random(3)
    recs = [Record(id=f"r{k}", sequence=rand_seq(rng, n))
            for k, n in enumerate([1, 3, 70, 129, 200, 64, 65, 5])]
    host = list(fold_records(recs, "bpmax", 2, backend="host"))
    cpu = list(fold_records(recs, "bpmax", 2, backend="cpu"))
    assert [r.id for r in cpu] == [r.id for r in recs]
    assert [(r.score_units, r.pairs, r.structure) for r in host] == \
        [(r.score_units, r.pairs, r.structure) for r in cpu]
