"""Nussinov folding against independent oracles: enumeration, the plain reference, tracebacks."""

import random

import numpy as np
import pytest

from fold_brute import all_structures, brute_force_score
from jaxrna.alphabet import encode
from jaxrna.fold.api import fold
from jaxrna.fold.blocked import blocked_fill, dense_table
from jaxrna.fold.fill import nussinov_fill
from jaxrna.fold.reference import reference_score, reference_table
from jaxrna.fold.traceback import check_structure, structure_weight
from jaxrna.weights import parse_weights

WEIGHT_SETS = ["unit", "bpmax", "integer", "GC=2.5,AU=2,GU=0.5"]


def rand_seq(rng, n, alphabet="ACGU"):
    return "".join(rng.choice(alphabet) for _ in range(n))


def test_enumeration_oracle_is_sane():
    # 'GGGAAAUCC' with min loop 3: the three-pair stem is the only way to 3 pairs.
    w = parse_weights("unit")
    structs = all_structures("GGGAAAUCC", w, 3)
    assert () in structs and ((0, 8), (1, 7), (2, 6)) in structs
    assert brute_force_score("GGGAAAUCC", w, 3) == 3
    assert brute_force_score("GGGAAAUCC", w, 6) == 1   # only (0, 8), (0,7),(1,8) span > 6


@pytest.mark.parametrize("weights", WEIGHT_SETS)
@pytest.mark.parametrize("min_loop", [0, 1, 3])
def test_scores_equal_exhaustive_enumeration(weights, min_loop):
    rng = random.Random(f"{weights}-{min_loop}")
    w = parse_weights(weights)
    seqs = [rand_seq(rng, rng.randint(1, 14), "ACGUN" if k % 5 == 0 else "ACGU") for k in range(25)]
    results = fold(seqs, weights=w, min_loop=min_loop)
    for seq, res in zip(seqs, results):
        assert res.score_units == brute_force_score(seq, w, min_loop), seq
        check_structure(list(res.pairs), encode(seq), w.matrix(), min_loop)
        assert structure_weight(list(res.pairs), encode(seq), w.matrix()) == res.score_units


@pytest.mark.slow
@pytest.mark.parametrize("weights", ["unit", "bpmax"])
def test_scores_equal_reference_up_to_300nt(weights):
    rng = random.Random(weights)
    w = parse_weights(weights)
    lengths = [rng.randint(15, 120) for _ in range(10)] + [200, 300]
    seqs = [rand_seq(rng, n) for n in lengths]
    ml = 3
    results = fold(seqs, weights=w, min_loop=ml)
    for seq, res in zip(seqs, results):
        assert res.score_units == reference_score(seq, w, ml)
        check_structure(list(res.pairs), encode(seq), w.matrix(), ml)
        assert structure_weight(list(res.pairs), encode(seq), w.matrix()) == res.score_units


@pytest.mark.slow
@pytest.mark.parametrize("tile", [4, 8, 16])
def test_blocked_table_equals_reference_table(tile):
    rng = random.Random(tile)
    w = parse_weights("integer")
    for _ in range(4):
        n = rng.randint(1, 5 * tile + 3)
        seq = rand_seq(rng, n)
        padded = -(-n // tile) * tile
        tiles = blocked_fill(encode(seq + "N" * (padded - n)), w.matrix(), min_loop=1, tile=tile)
        assert np.array_equal(dense_table(tiles, n), np.triu(np.array(reference_table(seq, w, 1))))


@pytest.mark.slow
def test_diagonal_sweep_equals_reference():
    rng = random.Random(5)
    w = parse_weights("bpmax")
    for n in (2, 7, 33, 70):
        seq = rand_seq(rng, n)
        rows = nussinov_fill(encode(seq), w.matrix(), min_loop=3)
        assert int(rows[n, 0]) == reference_score(seq, w, 3)


def test_batched_equals_one_at_a_time_whatever_the_batch():
    rng = random.Random(11)
    w = parse_weights("unit")
    seqs = [rand_seq(rng, rng.choice([1, 2, 5, 40, 63, 64, 65, 130, 250])) for _ in range(24)]
    alone = [fold(s, weights=w) for s in seqs]
    together = fold(seqs, weights=w)
    shuffled_idx = list(range(len(seqs)))
    rng.shuffle(shuffled_idx)
    shuffled = fold([seqs[i] for i in shuffled_idx], weights=w)
    for a, b in zip(alone, together):
        assert (a.score_units, a.pairs) == (b.score_units, b.pairs)
    for pos, i in enumerate(shuffled_idx):
        assert (shuffled[pos].score_units, shuffled[pos].pairs) == (alone[i].score_units, alone[i].pairs)


def test_ambiguity_codes_never_pair_and_t_is_u():
    assert fold("NNNNNNNNNNNN").score == 0
    assert fold("GGGAAAUCC").score == fold("gggaaatcc").score == 3
    r = fold("GGGAAANCC")                        # with A at 6 a third pair (2, 6) is impossible too,
    assert r.score == 2 and all(6 not in p for p in r.pairs)   # but U there would make 3
    assert fold("GGGAAAUCC").score == 3
    assert fold("UUUUUNNNNNNAAAAA", min_loop=0).score == 5


def test_half_integer_weights_are_exact():
    r = fold("GGGAAAUCC", weights="bpmax")      # GC 3 + GC 3 + GU 1.5
    assert r.score == 7.5 and r.score_text == "7.5"
    assert fold("GCAAAAGU", weights="GC=3,AU=2,GU=1.25").score_text == "4.25"


def test_empty_and_single_base():
    assert fold("A").score == 0 and fold("A").structure == "."
    assert fold("AU", min_loop=0).structure == "()"
    assert fold("AU", min_loop=1).structure == ".."


@pytest.mark.slow
def test_mixed_lengths_compile_a_handful_of_shapes():
    from jaxrna import programs as aot

    def programs():
        return aot.memo_size()

    rng = random.Random(3)
    # 130 sequences: 3 batches of 64 rows on a CPU (class 256 twice, class 512 once), so a
    # program is reused across batches within the run (300 made 5 batches, for the same check)
    seqs = [rand_seq(rng, rng.randint(10, 400)) for _ in range(130)]
    from jaxrna.fold.plan import plan_batches
    plan = plan_batches(np.array([len(s) for s in seqs]), np.arange(len(seqs)), "cpu", None)
    assert sorted(p for p, _, _ in plan) == [256, 256, 512]
    aot.forget()
    results = fold(seqs, with_pairs=False, backend="cpu", min_loop=2)
    assert len(results) == 130
    # lengths 10..400 fall in 2 classes (256 and 512): one score-only program each
    assert programs() == 2

    def checked(group):
        """Every sequence under 100 nt and the two shortest of each batch: each batch and
        class, in input order (the pure-Python reference is cubic: the first 20 of each call,
        up to 500 nt, took most of the test's 30 CPU-seconds here)."""
        lengths = np.array([len(s) for s in group])
        picked = {k for k, n in enumerate(lengths) if n < 100}
        for _, _, members in plan_batches(lengths, np.arange(len(group)), "cpu", None):
            picked.update(sorted(members.tolist(), key=lambda k: lengths[k])[:2])
        return sorted(picked)

    picked = checked(seqs)
    assert len(picked) > 20 and max(len(seqs[k]) for k in picked) > 256
    for k in picked:
        assert results[k].score_units == reference_score(seqs[k], parse_weights("unit"), 2)
    # other lengths, another min_loop and other weights: the same programs
    other = [rand_seq(rng, rng.randint(2, 500)) for _ in range(40)]
    again = fold(other, weights="integer", with_pairs=False, backend="cpu", min_loop=0)
    assert programs() == 2
    picked = checked(other)
    assert max(len(other[k]) for k in picked) > 256
    for k in picked:
        assert again[k].score_units == reference_score(other[k], parse_weights("integer"), 0)
