"""Alignment core: the reference and every fast path against Biopython's PairwiseAligner.

Scores must equal Biopython's; alignments may differ on ties, so each is checked by
rescoring it and by the ranges it covers.
"""

import random
from fractions import Fraction

import numpy as np
import pytest
from Bio.Align import PairwiseAligner, substitution_matrices

from jaxrna.align.recurrence import fits_int16, params_of
from jaxrna.align.reference import gotoh, rescore
from jaxrna.align.scoring import edit_preset, from_matrix, match_mismatch
from jaxrna.align.traceback import SkewedBits, Walk, finish, walk
from jaxrna.kernels.wavefront import batch_sweep, pallas_scores

DNA = "ACGT"
PROTEIN = "ARNDCQEGHILKMFPSTWYV"

# (scoring, alphabet, Biopython keyword arguments)
CONFIGS = {
    "linear": (match_mismatch(1, -1, 1, 1), DNA, dict(match_score=1, mismatch_score=-1)),
    "affine": (match_mismatch(2, -3, 5, 2), DNA, dict(match_score=2, mismatch_score=-3)),
    "halves": (match_mismatch(5, -4, 10, 0.5), DNA, dict(match_score=5, mismatch_score=-4)),
    "open<extend": (match_mismatch(1, -2, 1, 3), DNA, dict(match_score=1, mismatch_score=-2)),
    "free gaps": (match_mismatch(1, 0, 0, 0), DNA, dict(match_score=1, mismatch_score=0)),
    "NUC.4.4": (from_matrix("NUC.4.4", 10, 0.5), "ACGTNRY", {}),
    "BLOSUM62": (from_matrix("BLOSUM62", 11, 1), PROTEIN, {}),
    "PAM30": (from_matrix("PAM30", 9, 1), PROTEIN, {}),
    "GONNET1992": (from_matrix("GONNET1992", 10, 0.2), PROTEIN, {}),
}


def aligner(name, mode):
    scoring, _, kw = CONFIGS[name]
    kw = dict(kw)
    if not scoring.equality:
        kw["substitution_matrix"] = substitution_matrices.load(scoring.name)
    return PairwiseAligner(mode=mode, open_gap_score=-float(Fraction(scoring.gap_open, scoring.scale)),
                           extend_gap_score=-float(Fraction(scoring.gap_extend, scoring.scale)), **kw)


def random_pairs(rng, alphabet, count, max_q, max_t):
    """Random pairs with 1-nt sequences and very unequal lengths well represented."""
    out = []
    for k in range(count):
        kind = k % 4
        if kind == 0:
            m, n = rng.randint(1, 2), rng.randint(1, max_t)
        elif kind == 1:
            m, n = rng.randint(1, 4), rng.randint(max_t // 2, max_t)
        else:
            m, n = rng.randint(1, max_q), rng.randint(1, max_t if kind == 2 else max_q)
        seq = lambda L: "".join(rng.choice(alphabet) for _ in range(L))  # noqa: E731
        out.append((seq(m), seq(n)))
    return out


def check_alignment(scoring, a, b, score, qs, qe, ts, te, ops, local):
    """The alignment covers its ranges exactly and rescoring gives the reported score."""
    assert ops.count("M") + ops.count("I") == qe - qs
    assert ops.count("M") + ops.count("D") == te - ts
    if local:
        assert (ops == "") == (score == 0)
        assert not ops or (ops[0] == "M" and ops[-1] == "M")
    else:
        assert (qs, qe, ts, te) == (0, len(a), 0, len(b))
    assert rescore(a, b, scoring, qs, ts, ops) == score


@pytest.mark.parametrize("mode", ["global", "local"])
def test_reference_matches_biopython(mode):
    rng = random.Random(7)
    for name, (scoring, alphabet, _) in CONFIGS.items():
        bio = aligner(name, mode)
        for a, b in random_pairs(rng, alphabet, 80, 9, 14):
            r = gotoh(a, b, scoring, local=mode == "local")
            assert float(scoring.to_fraction(r.score)) == pytest.approx(bio.score(a, b), abs=1e-9), (name, a, b)
            check_alignment(scoring, a, b, r.score, r.query_start, r.query_end, r.target_start,
                            r.target_end, r.ops, mode == "local")


def encode_batch(scoring, pairs, h, w):
    q = np.zeros((len(pairs), h), np.int32)
    t = np.zeros((len(pairs), w), np.int32)
    m = np.zeros(len(pairs), np.int32)
    n = np.zeros(len(pairs), np.int32)
    for k, (a, b) in enumerate(pairs):
        q[k, :len(a)], t[k, :len(b)] = scoring.encode(a), scoring.encode(b)
        m[k], n[k] = len(a), len(b)
    return q, t, m, n


@pytest.mark.parametrize("mode", ["global", "local"])
def test_batched_wavefront_matches_biopython(mode):
    """Thousands of pairs through the vmapped antidiagonal sweep, with traceback."""
    rng = random.Random(11 if mode == "global" else 12)
    local = mode == "local"
    total, dtypes = 0, set()
    for number, (name, (scoring, alphabet, _)) in enumerate(CONFIGS.items()):
        bio = aligner(name, mode)
        pairs = random_pairs(rng, alphabet, 256, 16, 96)
        q, t, m, n = encode_batch(scoring, pairs, 16, 96)
        small = number % 2 == 0 and fits_int16(scoring, 16, 96)   # int16 and int32 sweeps both
        score, ei, ej, state, dirs = (np.asarray(x) for x in batch_sweep(
            q, t, m, n, params_of(scoring), local=local, equality=scoring.equality, with_dirs=True,
            small=small))
        wk = Walk.start(ei, ej, state, done=(score <= 0) if local else None)
        walk(wk, SkewedBits(dirs), local=local)
        ops = finish(wk, local=local)
        for k, (a, b) in enumerate(pairs):
            want = bio.score(a, b)
            assert float(scoring.to_fraction(int(score[k]))) == pytest.approx(want, abs=1e-9), (name, a, b)
            check_alignment(scoring, a, b, int(score[k]), int(wk.i[k]), int(ei[k]), int(wk.j[k]),
                            int(ej[k]), ops[k], local)
        total += len(pairs)
        dtypes.add(small)
    assert total >= 2000 and dtypes == {True, False}


@pytest.mark.parametrize("mode", ["global", "local"])
@pytest.mark.parametrize("name", ["affine", "BLOSUM62"])
def test_pallas_interpret_equals_pure_jax(mode, name):
    scoring, alphabet, _ = CONFIGS[name]
    rng = random.Random(3)
    pairs = random_pairs(rng, alphabet, 20, 11, 13)
    q, t, m, n = encode_batch(scoring, pairs, 11, 13)
    p = params_of(scoring)
    local = mode == "local"
    want = batch_sweep(q, t, m, n, p, local=local, equality=scoring.equality)
    got = pallas_scores(q, t, m, n, p, local=local, equality=scoring.equality, interpret=True,
                        rows=4, lanes=8)
    for a, b in zip(want[:3], got):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_asymmetric_matrix_and_orientation():
    """A non-symmetric matrix aligned both ways round (the API puts the shorter on lanes)."""
    from jaxrna.align.api import align_records
    from jaxrna.io.fasta import Record

    base = match_mismatch(2, -1, 3, 1)
    mat = base.matrix.copy()
    a, c = base.alphabet.index("A"), base.alphabet.index("C")
    mat[a, c], mat[c, a] = 1, -3
    from dataclasses import replace

    scoring = replace(base, matrix=mat, equality=False, name="asymmetric")
    rng = random.Random(5)
    pairs = [(Record(f"q{k}", x), Record(f"t{k}", y))
             for k, (x, y) in enumerate(random_pairs(rng, "ACG", 40, 30, 8))]
    for mode in ("global", "local"):
        for r, (qr, tr) in zip(align_records(pairs, scoring, mode), pairs):
            ref = gotoh(qr.sequence, tr.sequence, scoring, local=mode == "local")
            assert r.score_units == ref.score
            check_alignment(scoring, qr.sequence, tr.sequence, r.score_units, r.query_start,
                            r.query_end, r.target_start, r.target_end, r.ops, mode == "local")


def edit_distance(a, b):
    d = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(len(a) + 1):
        for j in range(len(b) + 1):
            if i == 0 or j == 0:
                d[i][j] = 3 * (i + j)
            else:
                d[i][j] = min(d[i - 1][j - 1] + (a[i - 1] != b[j - 1]), d[i - 1][j] + 3, d[i][j - 1] + 3)
    return d[len(a)][len(b)]


def test_edit_preset_is_seed_002_cost():
    from jaxrna.align.api import align

    rng = random.Random(2)
    pairs = random_pairs(rng, "ACGU", 60, 20, 30)
    res = align([a for a, _ in pairs], [b for _, b in pairs], preset="edit", pairs="zip")
    for (a, b), r in zip(pairs, res):
        assert r.score == edit_distance(a, b)
        assert -rescore(a, b, edit_preset(), 0, 0, r.ops) == r.score


SMALL_KERNEL = {"tile": 8, "rows": 4, "lanes": 8}   # small shapes: quick to interpret


@pytest.mark.slow
def test_pallas_paths_through_the_api_interpret():
    """Many pairs one per lane, long pairs as tiles along block antidiagonals (score only and
    the checkpointed traceback): the Pallas paths in interpret mode against Biopython."""
    from jaxrna.align.api import align_records
    from jaxrna.io.fasta import Record

    scoring, alphabet, _ = CONFIGS["affine"]
    rng = random.Random(8)
    seq = lambda: "".join(rng.choice(alphabet) for _ in range(rng.randint(17, 32)))  # noqa: E731
    pairs = [(Record(f"q{k}", seq()), Record(f"t{k}", seq())) for k in range(6)]  # one shape
    for mode in ("global", "local"):
        bio = aligner("affine", mode)
        want = [bio.score(q.sequence, t.sequence) for q, t in pairs]
        lanes = align_records(pairs, scoring, mode, score_only=True, use_pallas=True,
                              interpret=True, kernel=SMALL_KERNEL, tiled_min_length=10 ** 9)
        assert [r.score for r in lanes] == want
        traced = list(align_records(pairs, scoring, mode, use_pallas=True, interpret=True,
                                    kernel=SMALL_KERNEL, table_bytes=0, block=16))
        assert [r.score for r in traced] == want
        for (q, t), r in zip(pairs, traced):
            check_alignment(scoring, q.sequence, t.sequence, r.score_units, r.query_start,
                            r.query_end, r.target_start, r.target_end, r.ops, mode == "local")
    tiled = align_records(pairs, scoring, "global", score_only=True, use_pallas=True,
                          interpret=True, kernel=SMALL_KERNEL, tiled_min_length=1)
    assert [r.score for r in tiled] == [aligner("affine", "global").score(q.sequence, t.sequence)
                                        for q, t in pairs]


@pytest.mark.parametrize("name", ["affine", "halves", "open<extend"])
def test_an_empty_side_scores_its_gap_run(name):
    """A pair with an empty query or target has no inner cell: its global score is the
    border's gap run (end gaps free or not), its local score 0 -- alone in a batch, beside
    longer pairs, in int16, through the Pallas lanes (interpret mode) and the API's traceback,
    as the reference's."""
    from jaxrna.align.api import align, align_records
    from jaxrna.io.fasta import Record

    scoring, alphabet, _ = CONFIGS[name]
    pairs = [("", "ACGTACG"), ("ACGT", ""), ("", ""), ("A", "ACGTACGGT"), ("", "A")]
    q, t, m, n = encode_batch(scoring, pairs, 11, 13)
    p = params_of(scoring)
    for local in (False, True):
        want = [gotoh(a, b, scoring, local).score for a, b in pairs]
        assert want[0] < 0 or local
        got = batch_sweep(q, t, m, n, p, local=local, equality=scoring.equality)[0]
        assert np.asarray(got).tolist() == want
        alone = [int(batch_sweep(q[k:k + 1], t[k:k + 1], m[k:k + 1], n[k:k + 1], p, local=local,
                                 equality=scoring.equality)[0][0]) for k in range(len(pairs))]
        assert alone == want
        if fits_int16(scoring, 11, 13):
            small = batch_sweep(q, t, m, n, p, local=local, equality=scoring.equality, small=True)
            assert np.asarray(small[0]).tolist() == want
        # the lane kernels leave such pairs unset: the API sets them (api.empty_sides)
        records = [(Record(f"q{k}", a), Record(f"t{k}", b)) for k, (a, b) in enumerate(pairs)]
        lanes = align_records(records, scoring, "local" if local else "global", score_only=True,
                              use_pallas=True, interpret=True, kernel=SMALL_KERNEL,
                              tiled_min_length=10 ** 9)
        assert [r.score_units for r in lanes] == want
        for (a, b), w in zip(pairs, want):
            r = align(a, b, "local" if local else "global", scoring=scoring)
            assert r.score_units == w
            assert r.ops.count("M") + r.ops.count("I") == r.query_end - r.query_start
            if not local:
                assert (r.query_end, r.target_end) == (len(a), len(b))
