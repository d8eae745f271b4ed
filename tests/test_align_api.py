"""Alignment API: strings in, results out; the checkpointed traceback; limits and edge cases."""

import random

import pytest
from Bio.Align import PairwiseAligner

from jaxrna.align.api import Alignment, align, align_records
from jaxrna.align.reference import gotoh, rescore
from jaxrna.align.scoring import make_scoring, match_mismatch
from jaxrna.io.errors import InputError, ResourceError
from jaxrna.io.fasta import Record


def mutate(rng, s, rate=0.15):
    out = []
    for ch in s:
        r = rng.random()
        if r < rate / 3:
            continue
        if r < 2 * rate / 3:
            out.append(rng.choice("ACGT"))
        elif r < rate:
            out.append(ch + rng.choice("ACGT") * rng.randint(1, 4))
        else:
            out.append(ch)
    return "".join(out) or "A"


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["global", "local"])
def test_checkpointed_traceback_equals_full_table(mode):
    """Blocks of 8 recomputed from edge checkpoints give the full table's alignments."""
    rng = random.Random(9)
    scoring = match_mismatch(2, -3, 5, 2)
    bio = PairwiseAligner(mode=mode, match_score=2, mismatch_score=-3, open_gap_score=-5,
                          extend_gap_score=-2)
    pairs = []
    for k in range(12):  # lengths in one bucket: one compiled shape per path
        a = "".join(rng.choice("ACGT") for _ in range(rng.randint(1, 50)))
        b = mutate(rng, a)[:64] if k % 2 else "".join(rng.choice("ACGT") for _ in range(rng.randint(1, 64)))
        pairs.append((Record(f"q{k}", a), Record(f"t{k}", b)))
    full = list(align_records(pairs, scoring, mode))
    blocked = list(align_records(pairs, scoring, mode, table_bytes=0, block=8))
    for (qr, tr), f, b in zip(pairs, full, blocked):
        assert f.score_units == b.score_units
        assert f.ops == b.ops            # same tie rules, so the very same alignment
        assert b.score == bio.score(qr.sequence, tr.sequence)
        assert rescore(qr.sequence, tr.sequence, scoring, b.query_start, b.target_start, b.ops) == b.score_units
        assert (b.query_end, b.target_end) == (f.query_end, f.target_end)


def test_long_pair_with_traceback_uses_bounded_memory():
    """A 3,000 x 2,800 global pair through the block path (blocks of 256)."""
    rng = random.Random(1)
    a = "".join(rng.choice("ACGT") for _ in range(3000))
    b = mutate(rng, a)[:2800]
    scoring = match_mismatch(1, -1, 2, 1)
    [r] = align_records([(Record("a", a), Record("b", b))], scoring, "global",
                        table_bytes=1 << 20, block=256)
    bio = PairwiseAligner(mode="global", match_score=1, mismatch_score=-1, open_gap_score=-2,
                          extend_gap_score=-1)
    assert r.score == bio.score(a, b)
    assert rescore(a, b, scoring, 0, 0, r.ops) == r.score_units


def test_refuses_what_cannot_fit():
    pair = (Record("a", "ACGT" * 100), Record("b", "ACGA" * 100))
    scoring = match_mismatch(1, -1, 2, 1)
    with pytest.raises(ResourceError, match=r"needs about .* to align with a traceback"):
        list(align_records([pair], scoring, table_bytes=1000, block=64,
                           max_bytes=10_000))
    seen = []
    out = list(align_records([pair, (Record("c", "AC"), Record("d", "AG"))], scoring,
                             table_bytes=10_000, block=64, max_bytes=50_000,
                             on_error=lambda p, e: seen.append(p[0].id)))
    assert seen == ["a"] and [r.query_id for r in out] == ["c"]
    # score only needs no table: it runs
    [r] = align_records([pair], scoring, score_only=True, table_bytes=1000, max_bytes=10_000)
    assert r.score == gotoh(pair[0].sequence, pair[1].sequence, scoring).score


def test_local_without_positive_cell_is_empty():
    r = align("AAAA", "CCCC", mode="local", match=1, mismatch=-1)
    assert (r.score, r.ops, r.cigar, r.query_start, r.query_end) == (0, "", "*", 0, 0)
    assert r.identity == 0.0
    s = align("AAAA", "CCCC", mode="local", match=1, mismatch=-1, score_only=True)
    assert (s.score, s.query_end, s.target_end) == (0, 0, 0)


def test_one_nucleotide_and_unequal_lengths():
    for mode in ("global", "local"):
        bio = PairwiseAligner(mode=mode, match_score=2, mismatch_score=-1, open_gap_score=-3,
                              extend_gap_score=-1)
        for a, b in [("A", "A"), ("A", "C"), ("G", "ACGTACGTTTGCA" * 20), ("ACGTACGTTTGCA" * 20, "T")]:
            r = align(a, b, mode=mode, match=2, mismatch=-1, gap_open=3, gap_extend=1)
            assert r.score == bio.score(a, b)


def test_t_and_u_are_the_same_letter():
    assert align("ACGU", "ACGT", match=1, mismatch=-1).cigar == "4="
    assert align("ACGU", "ACGT").score == 20          # NUC.4.4 reads U as T


def test_list_inputs_all_and_zip():
    res = align(["ACGT", "GG"], ["ACGT", "AGGA", "T"], match=1, mismatch=-1, gap_open=1, gap_extend=1)
    assert [(r.query_id, r.target_id) for r in res] == [
        (f"query{i}", f"target{j}") for i in (1, 2) for j in (1, 2, 3)]
    zipped = align(["ACGT", "GG"], ["ACGT", "AGGA"], pairs="zip")
    assert [(r.query_id, r.target_id) for r in zipped] == [("query1", "target1"), ("query2", "target2")]
    with pytest.raises(ValueError):
        align(["A"], ["A", "C"], pairs="zip")


def test_bad_letters_and_scores():
    with pytest.raises(InputError, match="not in the alphabet of BLOSUM62"):
        list(align_records([(Record("p", "MKUV"), Record("q", "MKV"))], make_scoring(matrix="BLOSUM62")))
    with pytest.raises(ValueError, match="positive costs"):
        make_scoring(gap_open=-1)
    with pytest.raises(ValueError, match="unknown substitution matrix"):
        make_scoring(matrix="NOPE")
    with pytest.raises(ValueError, match="codons"):
        make_scoring(matrix="SCHNEIDER")
    with pytest.raises(ValueError, match="3 decimals"):
        make_scoring(match="0.0001")
    with pytest.raises(InputError, match="int32"):
        list(align_records([(Record("a", "A" * 2000), Record("b", "A" * 2000))],
                           make_scoring(match=1_000_000, gap_open=1, gap_extend=1)))


def test_alignment_presentation():
    r = align("GATTACA", "GATCA", match=1, mismatch=-1, gap_open=2, gap_extend=1)
    assert isinstance(r, Alignment)
    assert r.columns() == ("GATTACA", "GAT--CA") and r.cigar == "3=2I2="
    assert r.stats()["length"] == 7 and r.stats()["gaps"] == 2
    assert r.score_text == "2"
    half = align("ACGT", "ACGA", match=1, mismatch=-1, gap_open=1, gap_extend=0.5)
    assert half.score_text == "2"
    gapped = align("AAAATTTT", "AAAATT", match=1, mismatch=-1, gap_open=1, gap_extend=0.5)
    assert gapped.score_text == "4.5"
