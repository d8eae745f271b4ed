"""The research API (jaxrna.core): pure functions on encoded arrays, vmapped over padded
batches, against the record-level API and the plain references."""

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxrna
from jaxrna import core
from jaxrna.interact.reference import reference_score as bpmax_reference
from jaxrna.targets.reference import fill as miranda_reference
from jaxrna.targets.scoring import ScanParams
from jaxrna.weights import parse_weights


def _rna(rng, n, letters="ACGU"):
    return "".join(rng.choice(letters) for _ in range(n))


@pytest.mark.slow
@pytest.mark.parametrize("weights,min_loop", [("unit", 3), ("bpmax", 1), ("GC=3,AU=2,GU=1", 0)])
def test_fold_batch_equals_fold(weights, min_loop):
    rng = random.Random(7)
    seqs = [_rna(rng, rng.randint(0, 40)) for _ in range(12)] + ["GGGGAAACCCC"]
    w, scale = core.pair_weights(weights)
    codes, lengths = core.encode_batch(seqs, 48)
    # both functions, vmapped, in one program: one compilation per case (the batched
    # fold_score run apart was a second one, ~4 CPU-seconds each, CI time)
    both = jax.jit(lambda c, n: (jax.vmap(lambda c, n: core.fold_structure(c, w, n, min_loop))(
        c, n), jax.vmap(lambda c: core.fold_score(c, w, min_loop))(c)))
    (scores, partners), plain = both(codes, lengths)
    expected = jaxrna.fold(seqs, weights=weights, min_loop=min_loop)
    for k, res in enumerate(expected):
        assert int(scores[k]) == int(plain[k]) == res.score_units
        assert core.dot_bracket(partners[k], int(lengths[k])) == res.structure


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["global", "local"])
def test_align_batch_equals_align(mode):
    rng = random.Random(11)
    p, scoring = core.align_params(match=2, mismatch=-3, gap_open=5, gap_extend=2)
    qs = [_rna(rng, rng.randint(1, 30), "ACGT") for _ in range(16)]
    ts = [_rna(rng, rng.randint(1, 30), "ACGT") for _ in range(16)]
    qs[0], ts[0] = "A", "CCCC"                      # local: nothing scores above 0
    q, m = core.encode_batch(qs, 32, alphabet=scoring)
    t, n = core.encode_batch(ts, 32, alphabet=scoring)
    scores = jax.vmap(lambda a, b, x, y: core.align_score(a, b, x, y, p, mode=mode))(q, t, m, n)
    out = jax.vmap(lambda a, b, x, y: core.align_traceback(a, b, x, y, p, mode=mode))(q, t, m, n)
    for k in range(len(qs)):
        ref = jaxrna.align(qs[k], ts[k], mode, scoring=scoring)
        assert int(scores[k]) == int(out["score"][k]) == ref.score_units
        assert core.ops_string(out["ops"][k], out["length"][k]) == ref.ops
        if ref.ops:
            assert int(out["query_start"][k]) == ref.query_start + 1
            assert int(out["query_end"][k]) == ref.query_end
            assert int(out["target_start"][k]) == ref.target_start + 1
            assert int(out["target_end"][k]) == ref.target_end
        else:
            assert int(out["query_end"][k]) == 0 and int(out["length"][k]) == 0


def test_miranda_score_matrix_equals_reference():
    rng = random.Random(3)
    params = ScanParams()
    for _ in range(4):
        mirna = _rna(rng, rng.randint(8, 23))
        target = _rna(rng, rng.randint(5, 60))
        got = np.asarray(core.miranda_score_matrix(core.miranda_rows(mirna, params),
                                                   core.encode(target)))
        best, _, _ = miranda_reference(mirna, target, params)
        want = np.array(best)[1:, 1:].T                   # (target, rows)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@pytest.mark.slow
def test_bpmax_score_batch_equals_reference():
    rng = random.Random(5)
    ws = parse_weights("bpmax")
    w, scale = core.pair_weights(ws)
    assert scale == ws.scale
    pairs = [(_rna(rng, rng.randint(1, 9)), _rna(rng, rng.randint(1, 11))) for _ in range(6)]
    a, _ = core.encode_batch([x for x, _ in pairs], 9)
    b, _ = core.encode_batch([y for _, y in pairs], 11)
    got = jax.vmap(lambda x, y: core.bpmax_score(x, y, w))(a, b)
    for k, (s1, s2) in enumerate(pairs):
        assert int(got[k]) == bpmax_reference(s1, s2, ws)


def test_encode_batch_rejects_overlong():
    with pytest.raises(ValueError, match="does not fit"):
        core.encode_batch(["ACGU"], 3)


def test_align_mode_is_checked():
    p, _ = core.align_params(match=1, mismatch=-1, gap_open=1, gap_extend=1)
    with pytest.raises(ValueError, match="mode"):
        core.align_score(jnp.zeros(3, jnp.int32), jnp.zeros(3, jnp.int32), 3, 3, p, mode="semi")
