"""`jaxrna.interact` end to end: spec vectors, brute force, the reference DP, windows, tracebacks.

Strand lengths are chosen so the tests share a few compiled geometries (each costs seconds).
"""

import random

import pytest

from jaxrna.interact.api import interact, interact_pairs
from jaxrna.interact.brute import check_joint, enumerate_best
from jaxrna.interact.pairs import joint_weight
from jaxrna.interact.reference import reference_tables, reference_windows
from jaxrna.io.errors import ResourceError
from jaxrna.io.fasta import Record
from jaxrna.weights import parse_weights
from test_interact_reference import TV1_STRUCTURE, VECTORS, random_strand


def run(pairs, weights, **kw):
    recs = [(Record(f"a{k}", a), Record(f"b{k}", b)) for k, (a, b) in enumerate(pairs)]
    return list(interact_pairs(recs, weights, **kw))


def assert_valid(r, weights):
    """The traceback is a valid joint structure (the spec's four rules) weighing the score."""
    w = parse_weights(weights) if isinstance(weights, str) else weights
    check_joint(r.pairs, r.sequence1, r.sequence2, w)
    assert joint_weight(r.pairs, r.sequence1, r.sequence2, w) == r.score_units
    for p in r.pairs:                       # inside the reported windows
        if p.kind in ("intra1", "inter"):
            assert r.window1[0] <= p.i <= r.window1[1]
        for pos, on2 in ((p.j, p.kind == "inter"), (p.i, p.kind == "intra2"), (p.j, p.kind == "intra2")):
            if on2:
                assert r.window2[0] <= pos <= r.window2[1]


@pytest.mark.parametrize("wname", ["bpmax", "integer", "unit"])
def test_spec_vectors(wname):
    for name, s1, s2, table in VECTORS:
        if wname not in table:
            continue
        (r,) = run([(s1, s2)], wname)                  # one at a time: the CLI tests reuse these
        s1_exp, s2_exp, f_exp = table[wname]
        assert r.score == f_exp, name
        if s1_exp is not None:
            assert (r.s1_score, r.s2_score) == (s1_exp, s2_exp), name
        assert_valid(r, wname)


def test_tv1_traceback_is_the_spec_structure():
    r = interact("UCGCUGCU", "GUCGGA", "bpmax")
    assert sorted(r.pairs) == sorted(TV1_STRUCTURE)
    assert r.dotbracket == ".[([.[)[&](]]])"
    assert r.score_text == "14.5" and not r.windowed


@pytest.mark.parametrize("wname", ["bpmax", "integer", "unit"])
def test_brute_force_random_small(wname):
    rng = random.Random({"bpmax": 1, "integer": 2, "unit": 3}[wname])
    pairs = [(random_strand(rng, rng.randint(1, 8)), random_strand(rng, rng.randint(1, 8)))
             for _ in range(32)]
    w = parse_weights(wname)
    for (s1, s2), r in zip(pairs, run(pairs, w)):
        assert r.score_units == enumerate_best(s1, s2, w)[0], (s1, s2)
        assert_valid(r, w)


def test_brute_force_random_9nt():
    rng = random.Random(99)
    w = parse_weights("bpmax")
    for _ in range(4):
        s1, s2 = random_strand(rng, 9), random_strand(rng, 9)
        (r,) = run([(s1, s2)], w)
        assert r.score_units == enumerate_best(s1, s2, w)[0], (s1, s2)
        assert_valid(r, w)


def test_reference_random_up_to_25nt():
    rng = random.Random(25)
    for k in range(4):
        w = parse_weights(("bpmax", "integer", "unit", "GC=3,AU=2.5,GU=0.5")[k])
        s1, s2 = random_strand(rng, rng.randint(17, 24)), random_strand(rng, 25)
        F, S1, S2 = reference_tables(s1, s2, w)
        (r,) = run([(s1, s2)], w)
        assert r.score_units == F[0][len(s1) - 1][0][len(s2) - 1], (s1, s2)
        assert (r.s1_units, r.s2_units) == (S1[0][-1], S2[0][-1])
        assert_valid(r, w)


def test_tv3_windowed():
    s1, s2 = "CCACAGGUAGCCUGCC", "GUCGUGGUCCGCAACACUCG"
    w = parse_weights("bpmax")
    (r,) = run([(s1, s2)], w, window1=8, window2=8, keep_windows=True)
    assert r.score == 17.5 and r.windowed
    assert (r.window1, r.window2) == ((8, 15), (0, 7))          # the spec's best window
    F, S1, S2 = reference_tables(s1, s2, w, 7, 7)
    assert (r.s1_units, r.s2_units) == (S1[8][15], S2[12][19])  # s2[0..7] is t[12..19]
    spec = reference_windows(s1, s2, w, 8, 8)
    assert r.windows.max() == max(spec.values())
    for a in range(r.windows.shape[0]):                         # every full window
        for b in range(r.windows.shape[1]):
            assert r.windows[a, b] == spec[(a, len(s2) - 8 - b)]
    assert_valid(r, w)


def test_windowed_random():
    rng = random.Random(8)
    for k in range(3):
        w = parse_weights(("integer", "bpmax", "unit")[k])
        s1, s2 = random_strand(rng, rng.randint(9, 16)), random_strand(rng, rng.randint(17, 25))
        (r,) = run([(s1, s2)], w, window1=8, window2=8)
        spec = reference_windows(s1, s2, w, 8, 8)
        assert r.score_units == max(spec.values())
        # the reported window has the reported score
        t0 = len(s2) - 1 - r.window2[1]
        assert spec[(r.window1[0], t0)] == r.score_units
        assert_valid(r, w)


def test_either_strand_outside_gives_the_same_answer():
    s1, s2 = VECTORS[1][1], VECTORS[1][2]
    a = interact(s1, s2, "integer", outer="1")
    b = interact(s1, s2, "integer", outer="2")
    assert a.score == b.score == 22
    assert_valid(a, "integer")
    assert_valid(b, "integer")


def test_n_never_pairs_and_score_only():
    s1, s2 = "GGNNAUCC", "GGANNUCC"
    w = parse_weights("unit")
    (r,) = run([(s1, s2)], w, with_pairs=False)
    F, _, _ = reference_tables(s1, s2, w)
    assert r.score_units == F[0][7][0][7] and r.pairs is None and r.dotbracket is None


def test_memory_estimate_refuses_what_does_not_fit():
    recs = [(Record("big", "ACGU" * 10), Record("long", "ACGU" * 500))]
    with pytest.raises(ResourceError, match="needs about"):
        list(interact_pairs(recs, "bpmax", max_bytes=1 << 20))
    errors = []
    assert list(interact_pairs(recs, "bpmax", max_bytes=1 << 20,
                               on_error=lambda pair, exc: errors.append(pair[1].id))) == []
    assert errors == ["long"]


@pytest.mark.parametrize("outer", ["1", "2"])
def test_best_window_ties_follow_the_host_rule(outer):
    """The device picks the best window; among ties (many with unit weights) it must be the
    one the host rule picks from every window's score: the highest strand-1 start, then the
    lowest strand-2 start. Windows on both strands (geometry of test_windowed_random)."""
    import numpy as np

    from jaxrna.interact.program import best_window

    rng = random.Random(31)
    w = parse_weights("unit")
    pairs = [(random_strand(rng, rng.randint(12, 14)), random_strand(rng, rng.randint(25, 30)))
             for _ in range(4)]
    results = run(pairs, w, outer=outer, window1=8, window2=8, keep_windows=True)
    ties = 0
    for r in results:
        win = r.windows
        best = win == win.max()
        ties += int(best.sum()) > 1
        a = int(np.flatnonzero(best.any(axis=1))[-1])
        b = int(np.flatnonzero(best[a])[0])
        assert (r.window1[0], r.window2[0]) == (a, b)
        assert r.score_units == win.max()
        assert_valid(r, w)
    assert ties >= 2                         # the rule was exercised
    # the same rule on the scores as the program holds them (internal orientation)
    scores = np.array([[3, 1, 3], [0, 3, 2]])
    assert best_window(scores, True) == (1, 1) and best_window(scores, False) == (0, 2)


def test_one_strand_whole_the_other_windowed():
    """The CLI's job shape (strand 1 whole, a window on strand 2; the traceback box holds every
    outer cell but only the tile rows of the window), and its mirror with strand 2 outside."""
    rng = random.Random(41)
    w = parse_weights("bpmax")
    s1, s2 = random_strand(rng, 7), random_strand(rng, 30)
    spec = reference_windows(s1, s2, w, len(s1), 8)
    for outer in ("1", "2"):
        (r,) = run([(s1, s2)], w, window2=8, outer=outer, keep_windows=True)
        assert r.score_units == max(spec.values()) and r.window1 == (0, len(s1) - 1)
        assert spec[(0, len(s2) - 1 - r.window2[1])] == r.score_units
        assert r.windows.shape == (1, len(s2) - 7)
        assert_valid(r, w)


@pytest.mark.slow
def test_window_in_a_large_class():
    """A strand long enough for a large class (its band is the window's class, 16 diagonals,
    while the window spans 12: the fill stops at the batch's span; the traceback box is
    gathered from the table at the best window), on either side of the grid."""
    rng = random.Random(43)
    w = parse_weights("bpmax")
    s1, s2 = random_strand(rng, 7), random_strand(rng, 280)
    spec = reference_windows(s1, s2, w, len(s1), 12)
    for outer in ("1", "2"):
        (r,) = run([(s1, s2)], w, window2=12, outer=outer, keep_windows=True)
        assert r.score_units == max(spec.values()) and r.window1 == (0, len(s1) - 1)
        assert spec[(0, len(s2) - 1 - r.window2[1])] == r.score_units
        assert r.windows.shape == (1, len(s2) - 11)
        assert [spec[(0, b)] for b in range(len(s2) - 11)] == r.windows[0][::-1].tolist()
        assert_valid(r, w)


BACKENDS = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


@pytest.mark.slow            # the fast subset keeps the windowed merged geometry below
@pytest.mark.parametrize("backend", BACKENDS)
def test_pairs_in_a_merged_geometry_are_exact(backend):
    """Issue 26: a run meeting more classes than its budget serves several by one larger
    geometry (:func:`jaxrna.interact.api.plan_run`); lengths are runtime values, so each pair
    is still exact. Budget 1: pairs of three classes, either strand outside, in one program,
    against brute force and the reference DP."""
    from jaxrna.interact.api import make_problem, memory_limit, plan_run

    rng = random.Random(126)
    pairs = [(random_strand(rng, a), random_strand(rng, b))
             for a, b in ((5, 7), (8, 6), (6, 40), (40, 5), (3, 70), (17, 18))]
    w = parse_weights("bpmax")
    probs = [make_problem(Record("a", a), Record("b", b), backend=backend) for a, b in pairs]
    assert len({p.plan.geo for p in probs}) == 3
    (geo,) = {p.plan.geo for p in plan_run(probs, 1, memory_limit(None, backend), backend)}
    assert geo not in {p.plan.geo for p in probs}      # a geometry none of them has alone
    for (s1, s2), r in zip(pairs, run(pairs, w, budget=1, backend=backend)):
        if len(s1) + len(s2) <= 16:
            assert r.score_units == enumerate_best(s1, s2, w)[0], (s1, s2)
        F, S1, S2 = reference_tables(s1, s2, w)
        assert r.score_units == F[0][len(s1) - 1][0][len(s2) - 1], (s1, s2)
        assert (r.s1_units, r.s2_units) == (S1[0][-1], S2[0][-1])
        assert_valid(r, w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_windowed_pairs_in_a_merged_large_geometry_are_exact(backend):
    """Budget 1 with windows of 8 on both strands: pairs whose own classes keep whole bands
    (inner 32 and 128) and one of a large class (inner 512, band of 16 diagonals) share the
    large class's geometry; every window's score, the best window and its traceback are the
    reference's."""
    from jaxrna.interact.api import make_problem, memory_limit, plan_run

    rng = random.Random(127)
    pairs = [(random_strand(rng, a), random_strand(rng, b))
             for a, b in ((12, 25), (14, 70), (6, 260), (30, 9))]
    w = parse_weights("integer")
    probs = [make_problem(Record("a", a), Record("b", b), 8, 8, backend=backend)
             for a, b in pairs]
    (geo,) = {p.plan.geo for p in plan_run(probs, 1, memory_limit(None, backend), backend)}
    assert (geo.n_inner, geo.w_inner) == (512, 15) and len({p.plan.geo for p in probs}) == 3
    for (s1, s2), r in zip(pairs, run(pairs, w, window1=8, window2=8, keep_windows=True,
                                      budget=1, backend=backend)):
        spec = reference_windows(s1, s2, w, 8, 8)
        n1, n2 = len(s1), len(s2)
        l1, l2 = min(8, n1), min(8, n2)         # a strand shorter than its window is whole
        assert r.windows.shape == (n1 - l1 + 1, n2 - l2 + 1)
        for a in range(n1 - l1 + 1):
            for b in range(n2 - l2 + 1):
                assert r.windows[a, b] == spec[(a, n2 - l2 - b)], (s1, s2, a, b)
        assert r.score_units == max(spec.values())
        assert spec[(r.window1[0], n2 - 1 - r.window2[1])] == r.score_units
        assert_valid(r, w)


def test_one_row_batches_equal_many_row_batches_and_the_reference():
    """A batch of one row runs the pair's program with a batch axis added
    (:func:`jaxrna.interact.program.interact_program`), the same values as the batched
    program of several rows: scores against the reference DP, windows and tracebacks equal."""
    from jaxrna.interact.api import make_problem, run_problems

    rng = random.Random(7)
    w = parse_weights("bpmax")
    recs = [(Record(f"a{k}", random_strand(rng, rng.randint(5, 14))),
             Record(f"b{k}", random_strand(rng, rng.randint(15, 30)))) for k in range(5)]
    problems = [make_problem(a, b, window2=12) for a, b in recs]
    one = run_problems(problems, w, batch_budget=1)            # rows of 1
    many = run_problems(problems, w, batch_budget=1 << 30)     # rows of 4 (CPU)
    assert [(r.score_units, r.window1, r.window2, r.pairs) for r in one] == \
           [(r.score_units, r.window1, r.window2, r.pairs) for r in many]
    for (a, b), r in zip(recs, one):
        scores = reference_windows(a.sequence, b.sequence, w, len(a.sequence), 12)
        assert r.score_units == max(scores.values())
        assert_valid(r, w)
