"""The packed int16x2 lane kernel (interpret mode) against the pure-JAX sweep and Biopython."""

import random

import numpy as np
import pytest
from test_align_core import CONFIGS, aligner, encode_batch, random_pairs

from jaxrna.align.recurrence import params_of
from jaxrna.align.scoring import edit_preset, from_matrix, match_mismatch
from jaxrna.kernels.wavefront import batch_sweep
from jaxrna.kernels.wavefront_packed import packed_ok, packed_scores


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["global", "local"])
@pytest.mark.parametrize("name", ["affine", "linear", "halves", "free gaps", "edit"])
def test_packed_equals_pure_jax(mode, name):
    if name == "edit":
        scoring, alphabet = edit_preset(), "ACGU"
    else:
        scoring, alphabet, _ = CONFIGS[name]
    rng = random.Random(hash((mode, name)) % 1000)
    pairs = random_pairs(rng, alphabet, 24, 9, 13)
    q, t, m, n = encode_batch(scoring, pairs, 9, 13)
    assert packed_ok(scoring, 12, 13)
    p = params_of(scoring)
    local = mode == "local"
    want = batch_sweep(q, t, m, n, p, local=local, equality=True)
    got = packed_scores(q, t, m, n, p, local=local, rows=4, lanes=8, interpret=True)
    for a, b in zip(want[:3], got):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    if name in ("affine", "halves"):
        bio = aligner(name, mode)
        assert [int(s) for s in np.asarray(got[0])] == [
            round(bio.score(a, b) * scoring.scale) for a, b in pairs]


@pytest.mark.slow
def test_packed_ties_and_extreme_values():
    """Local ties (repeats: the first row, then column, wins), a strip taller than the
    query, long gaps near the int16 bound that packed_ok allows."""
    scoring = match_mismatch(3, -2, 7, 3)
    h, w = 24, 200
    assert packed_ok(scoring, h, w) and not packed_ok(scoring, 2000, 2000)
    pairs = [("ACACACAC", "ACACACACGTACACACAC"), ("G", "A" * 150), ("ACGTTGCA" * 3, "T" * 7),
             ("AAAA", "CCCCCCAAAACCCCAAAA")]
    q, t, m, n = encode_batch(scoring, pairs, h, w)
    p = params_of(scoring)
    for local in (False, True):
        want = batch_sweep(q, t, m, n, p, local=local, equality=True)
        got = packed_scores(q, t, m, n, p, local=local, rows=8, lanes=2, interpret=True)
        for a, b in zip(want[:3], got):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_packed_ok_refuses():
    assert not packed_ok(CONFIGS["open<extend"][0], 10, 10)       # gaps may not open from H
    assert not packed_ok(from_matrix("BLOSUM62", 11, 1), 10, 10)  # no substitution matrices
    assert not packed_ok(match_mismatch(-1, 1, 2, 1), 10, 10)     # match below mismatch
    assert packed_ok(match_mismatch(2, -3, 5, 2), 1008, 1000)     # the benchmark's shape
    assert not packed_ok(match_mismatch(2, -3, 5, 2), 1600, 1600)
