"""The interaction partition function against exhaustive enumeration and BPMax.

Oracles: every valid joint structure enumerated (``brute_sum``, itself checked against a naive
search over all sets of pairs filtered by ``check_joint``), and the BPMax recurrence
(``reference_score``, the spec's table). Float64 throughout; every JAX call runs at one of two
padded shapes so that the whole file compiles three functions.
"""

from __future__ import annotations

import math
import random

import jax
import numpy as np
import pytest

from jaxrna.alphabet import PAD, encode
from jaxrna.interact.brute import check_joint
from jaxrna.interact.pairs import Pair
from jaxrna.interact.brute_sum import brute_partition, valid_structures, weighted_structures
from jaxrna.interact.partition import (JointScores, batch_partition, batch_probabilities,
                                       joint_scores)
from jaxrna.interact.partition_reference import reference_partition
from jaxrna.interact.reference import pair_weight, reference_score
from jaxrna.semiring import MAX_PLUS
from jaxrna.weights import parse_weights

WEIGHTS = {name: parse_weights(name) for name in ("bpmax", "integer", "unit")}
SMALL = (9, 9)          # padded shape of the enumeration tests
LARGE = (28, 20)        # padded shape of the BPMax tests (the spec's vectors)
BATCH = 24

# (s1, s2, {weights: (S1, S2, F)}) from the spec
VECTORS = [
    ("UCGCUGCU", "GUCGGA", {"bpmax": 14.5, "integer": 15, "unit": 6}),
    ("CUCCUAGUUACG", "UGGCGUUGCU", {"bpmax": 20, "integer": 22, "unit": 8}),
    ("CCACAGGUAGCCUGCC", "GUCGUGGUCCGCAACACUCG", {"bpmax": 35, "integer": 40, "unit": 15}),
    ("CACGCUGUUUCAGGGCGAUCCUCCG", "GAUAACACCACCUCCACA", {"bpmax": 32, "integer": 40,
                                                          "unit": 16}),
    ("GGGAAAUCC", "GGAUUUCCC", {"bpmax": 19}),
    ("ACGU", "ACGU", {"bpmax": 8}),
]


@pytest.fixture(scope="module", autouse=True)
def x64():
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)


def rand_seq(rng: random.Random, lo: int, hi: int) -> str:
    alphabet = rng.choice(["ACGU", "ACGU", "GCU", "GC", "GU"])
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))


def encoded_batch(items, shape, zero_scores=False, batch=BATCH):
    """Stack ``(s1, s2, weights)`` items, padded to ``shape`` and to ``batch`` rows (a row
    beyond the items repeats the first), into batched :class:`JointScores`."""
    rows = list(items) + [items[0]] * (batch - len(items))
    assert len(rows) == batch
    sc, al = [], []
    for s1, s2, w in rows:
        c1, c2 = np.full(shape[0], PAD, np.int8), np.full(shape[1], PAD, np.int8)
        c1[:len(s1)], c2[:len(s2)] = encode(s1), encode(s2)
        s, a = joint_scores(c1, c2, w)
        if zero_scores:
            s = JointScores(*(x * 0 for x in s))
        sc.append(s)
        al.append(a)
    stack = lambda parts: JointScores(*(np.stack(x) for x in zip(*parts)))  # noqa: E731
    return stack(sc), stack(al)


def probabilities(items, temperature=1.0, zero_scores=False):
    lz, P = batch_probabilities(*encoded_batch(items, SMALL, zero_scores), temperature)
    return np.asarray(lz), JointScores(*(np.asarray(x) for x in P))


# ---- the enumeration itself ------------------------------------------------------------------

def naive_structures(s1, s2, w):
    """All sets of allowed pairs with every base in at most one pair, kept by check_joint."""
    cand = [Pair("intra1", a, b) for a in range(len(s1)) for b in range(a + 4, len(s1))
            if pair_weight(s1[a], s1[b], w) > 0]
    cand += [Pair("intra2", c, d) for c in range(len(s2)) for d in range(c + 4, len(s2))
             if pair_weight(s2[c], s2[d], w) > 0]
    cand += [Pair("inter", x, y) for x in range(len(s1)) for y in range(len(s2))
             if pair_weight(s1[x], s2[y], w) > 0]
    out = []

    def ends(p):
        return ({(1, p.i), (1, p.j)} if p.kind == "intra1" else
                {(2, p.i), (2, p.j)} if p.kind == "intra2" else {(1, p.i), (2, p.j)})

    def rec(k, chosen, used):
        if k == len(cand):
            try:
                check_joint(chosen, s1, s2, w)
            except ValueError:
                return
            out.append(frozenset(chosen))
            return
        rec(k + 1, chosen, used)
        e = ends(cand[k])
        if not e & used:
            rec(k + 1, chosen + [cand[k]], used | e)

    rec(0, [], set())
    return out


def test_enumeration_equals_naive_search():
    rng = random.Random(11)
    for _ in range(25):
        s1, s2 = rand_seq(rng, 1, 6), rand_seq(rng, 1, 6)
        w = WEIGHTS[rng.choice(list(WEIGHTS))]
        naive = naive_structures(s1, s2, w)
        fast = [frozenset(st) for st in valid_structures(s1, s2, w)]
        assert len(fast) == len(set(fast))                       # each structure once
        assert set(fast) == set(naive), (s1, s2)


# ---- the plain-Python grammar ----------------------------------------------------------------

def test_reference_grammar_equals_enumeration():
    rng = random.Random(5)
    for k in range(90):
        s1, s2 = ("ACGU", "ACGU") if k == 0 else (rand_seq(rng, 1, 8), rand_seq(rng, 1, 8))
        w = WEIGHTS[rng.choice(list(WEIGHTS))]
        temperature = rng.choice([1.0, 0.5, 2.0])
        b = brute_partition(s1, s2, w, temperature)
        assert reference_partition(s1, s2, w, "count") == b.count, (s1, s2)
        best = reference_partition(s1, s2, w, "max")
        assert best == b.best == reference_score(s1, s2, w), (s1, s2)
        z = reference_partition(s1, s2, w, "boltzmann", temperature)
        assert math.log(z) == pytest.approx(b.log_z, rel=1e-12, abs=1e-12), (s1, s2)


def test_reference_grammar_max_is_bpmax_on_spec_vectors():
    for s1, s2, want in VECTORS[:2] + VECTORS[4:]:
        for name, value in want.items():
            w = WEIGHTS[name]
            assert reference_partition(s1, s2, w, "max") / w.scale == value


# ---- the JAX evaluation: log semiring --------------------------------------------------------

@pytest.fixture(scope="module")
def small_items():
    rng = random.Random(2024)
    items = [("ACGU", "ACGU", WEIGHTS["bpmax"]), ("UCGCUGCU", "GUCGGA", WEIGHTS["bpmax"])]
    items += [("GGGAAAUCC", "GGAUUUCCC", WEIGHTS["unit"]), ("A", "U", WEIGHTS["integer"])]
    while len(items) < BATCH:
        items.append((rand_seq(rng, 1, 7), rand_seq(rng, 1, 7),
                      WEIGHTS[rng.choice(list(WEIGHTS))]))
    return items


@pytest.fixture(scope="module")
def small_brute(small_items):
    out = {1.0: [], 0.6: []}
    for s1, s2, w in small_items:
        enumerated = weighted_structures(s1, s2, w)
        for t in out:
            out[t].append(brute_partition(s1, s2, w, t, enumerated))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_log_partition_and_probabilities_equal_enumeration(small_items, small_brute,
                                                           temperature):
    lz, P = probabilities(small_items, temperature)
    for k, ((s1, s2, _), b) in enumerate(zip(small_items, small_brute[temperature])):
        n, m = len(s1), len(s2)
        assert lz[k] == pytest.approx(b.log_z, rel=1e-9, abs=1e-9), (s1, s2)
        np.testing.assert_allclose(P.inter[k, :n, :m], b.inter, atol=1e-9)
        np.testing.assert_allclose(np.triu(P.intra1[k, :n, :n], 1), b.intra1, atol=1e-9)
        np.testing.assert_allclose(np.triu(P.intra2[k, :m, :m], 1), b.intra2, atol=1e-9)
        # nothing at padded positions, and each base pairs at most once
        assert np.abs(P.inter[k, n:, :]).max(initial=0) < 1e-12
        assert np.abs(P.inter[k, :, m:]).max(initial=0) < 1e-12
        P1 = np.triu(P.intra1[k], 1)
        P2 = np.triu(P.intra2[k], 1)
        per1 = P1.sum(0) + P1.sum(1) + P.inter[k].sum(1)
        per2 = P2.sum(0) + P2.sum(1) + P.inter[k].sum(0)
        assert per1.max() <= 1 + 1e-12 and per2.max() <= 1 + 1e-12
        assert P.inter[k].min() >= -1e-12


@pytest.mark.slow
def test_structure_counts_equal_enumeration(small_items, small_brute):
    lz, _ = probabilities(small_items, 1.0, zero_scores=True)       # every structure weighs 1
    for k, b in enumerate(small_brute[1.0]):
        assert round(math.exp(lz[k])) == b.count
        assert lz[k] == pytest.approx(math.log(b.count), rel=1e-12, abs=1e-12)


@pytest.mark.slow  # finite differences; the outside-pass test stays in the fast subset
def test_gradient_equals_finite_differences():
    w = WEIGHTS["bpmax"]
    s1, s2 = "GGCAUCCG", "CGGAUGCC"
    scores, allowed = encoded_batch([(s1, s2, w)], SMALL)
    _, P = batch_probabilities(scores, allowed, 0.8)
    picks = [("inter", int(x), int(y)) for x, y in zip(*np.nonzero(allowed.inter[0]))][:6]
    picks += [(kind, int(i), int(j)) for kind in ("intra1", "intra2")
              for i, j in zip(*np.nonzero(allowed._asdict()[kind][0]))][:5]
    assert len(picks) >= 8
    h = 1e-5
    rows = []
    for kind, i, j in picks:                                  # +h and -h on row 2p, 2p+1
        for sign in (1, -1):
            arrs = {k: v[0].copy() for k, v in scores._asdict().items()}
            arrs[kind][i, j] += sign * h
            rows.append(arrs)
    rows += [rows[0]] * (BATCH - len(rows))
    pert = JointScores(**{k: np.stack([r[k] for r in rows]) for k in JointScores._fields})
    al = JointScores(*(np.repeat(a[:1], BATCH, 0) for a in allowed))
    lz, _ = batch_probabilities(pert, al, 0.8)
    lz = np.asarray(lz)
    for p, (kind, i, j) in enumerate(picks):
        fd = 0.8 * (lz[2 * p] - lz[2 * p + 1]) / (2 * h)
        assert fd == pytest.approx(float(P._asdict()[kind][0, i, j]), abs=1e-8), (kind, i, j)


@pytest.mark.slow  # the enumeration tests stay in the fast subset
def test_low_temperature_tends_to_bpmax(small_items):
    items = small_items[:8]
    best = np.array([reference_score(s1, s2, w) / w.scale for s1, s2, w in items])
    log_count, _ = probabilities(items, 1.0, zero_scores=True)
    gaps = []
    for t in (1.0, 0.2, 0.05, 0.01):
        lz, _ = probabilities(items, t)
        gap = t * lz[:len(items)] - best
        assert (gap >= -1e-9).all()                          # Z >= exp(best / T)
        assert (gap <= t * log_count[:len(items)] + 1e-9).all()    # Z <= count exp(best / T)
        gaps.append(gap)
    assert (np.diff(gaps, axis=0) <= 1e-9).all()
    assert np.abs(gaps[-1]).max() < 0.05


# ---- the JAX evaluation: max-plus is BPMax ---------------------------------------------------

@pytest.mark.slow
def test_max_plus_equals_bpmax():
    items, want = [], []
    for s1, s2, values in VECTORS:
        for name, value in values.items():
            items.append((s1, s2, WEIGHTS[name]))
            want.append(value)
    rng = random.Random(8)
    while len(items) < 16:
        s1, s2 = rand_seq(rng, 10, 12), rand_seq(rng, 10, 12)
        w = WEIGHTS[rng.choice(list(WEIGHTS))]
        items.append((s1, s2, w))
        want.append(reference_score(s1, s2, w) / w.scale)
    got = np.asarray(batch_partition(*encoded_batch(items, LARGE, batch=16), 1.0,
                                     semiring=MAX_PLUS))
    np.testing.assert_array_equal(got[:len(items)], want)
