"""The run's program budget (:mod:`jaxrna.class_budget`): against an exhaustive search of every
way to serve a few classes by at most ``budget`` classes of the same ladder."""

import itertools
import random

import pytest

from jaxrna.class_budget import classes_after, merge_to_budget

LADDER = (64, 128, 256, 512, 1024, 2048)


def _join2(a, b):
    return (max(a[0], b[0]), max(a[1], b[1]))


def _cost2(c):
    return c[0] * c[1]


def _best_cost(counts, budget):
    """The least padded work of any set of at most ``budget`` 2-D ladder classes serving every
    class of ``counts`` (each served by the cheapest chosen class holding it)."""
    cand = sorted({(h, w) for h in LADDER for w in LADDER})
    best = None
    for k in range(1, budget + 1):
        for chosen in itertools.combinations(cand, k):
            total = 0
            for (h, w), n in counts.items():
                fits = [_cost2(c) for c in chosen if c[0] >= h and c[1] >= w]
                if not fits:
                    break
                total += n * min(fits)
            else:
                best = total if best is None else min(best, total)
    return best


@pytest.mark.parametrize("seed", range(12))
def test_every_class_is_served_by_one_that_holds_it_within_the_budget(seed):
    rng = random.Random(seed)
    classes = rng.sample([(h, w) for h in LADDER for w in LADDER], rng.randint(1, 9))
    counts = {c: rng.randint(1, 50) for c in sorted(classes)}
    budget = rng.randint(1, 4)
    serve = merge_to_budget(counts, budget, _join2, _cost2)
    assert set(serve) == set(counts)
    assert len(set(serve.values())) <= budget
    for c, s in serve.items():
        assert s[0] >= c[0] and s[1] >= c[1]
    work = sum(n * _cost2(serve[c]) for c, n in counts.items())
    best = _best_cost(counts, budget)
    # the greedy join is not always optimal, but never far from it on such mixes
    assert best <= work <= 2 * best
    if len(counts) <= budget:
        assert serve == {c: c for c in counts}
    assert merge_to_budget(counts, budget, _join2, _cost2) == serve      # deterministic


def test_one_dimension_keeps_the_heavy_small_classes():
    counts = {64: 1000, 128: 1000, 256: 1, 512: 1, 1024: 1, 2048: 1}
    got = classes_after(counts, 3, max, lambda c: c * c)
    assert got[:2] == [64, 128] and got[-1] == 2048 and len(got) == 3


def test_a_budget_below_one_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        merge_to_budget({1: 1}, 0, max, float)
