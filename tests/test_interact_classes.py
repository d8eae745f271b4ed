"""Issue 26 for ``jaxrna interact``: a run's plan (:mod:`jaxrna.interact.classes`) -- at most 8
geometries whatever the length mix up to 10,240 nt, the windows and the backend; today's classes
when a run meets at most 8; every pair held by its geometry within the memory limit; every
geometry prepared by ``jaxrna warmup``. Planning only (nothing compiles): the GPU's plan is
checked here with the GPU backend's parameters."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from jaxrna.interact.api import make_problem, plan_run
from jaxrna.interact.classes import FULL, ClassKey, geometry, join, key_of
from jaxrna.interact.warmup import _lengths, run_classes
from jaxrna.interact.windows import plan
from jaxrna.io.fasta import Record

LENGTHS = (1, 7, 8, 9, 16, 17, 24, 25, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
           300, 511, 512, 513, 1023, 1024, 4095, 4096, 8191, 8192, 8193, 10000, 12288, 20000)
WINDOWS = (None, 1, 8, 9, 16, 17, 100, 128, 129, 256, 300, 5000)
#: memory a pair may use: this kind of CPU host, and an H100 (80% of 80 GB)
LIMITS = {"cpu": 16 << 30, "gpu": int(0.8 * 80e9)}


def problem(n1: int, n2: int, w1=None, w2=None, backend="cpu", outer="auto"):
    return make_problem(Record("a", "A" * n1), Record("b", "U" * n2), w1, w2, outer,
                        backend=backend)


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_a_pairs_class_is_todays_geometry(backend):
    """``geometry(key_of(pair))`` is the geometry ``plan`` gives the pair (so a run that merges
    nothing runs today's programs)."""
    rng = random.Random(7)
    for n_o in LENGTHS:
        for n_i in LENGTHS:
            for w_o in rng.sample(WINDOWS, 4):
                for w_i in WINDOWS:
                    want = plan(n_o, n_i, w_o, w_i, backend=backend).geo
                    assert geometry(key_of(n_o, n_i, w_o, w_i), backend) == want, \
                        (n_o, n_i, w_o, w_i)


def holds(geo, prob) -> bool:
    """Whether ``geo`` can run ``prob`` exactly: its true lengths (inner + 1: end-exclusive
    columns) and window spans within the padded lengths and bands."""
    p = prob.plan
    return (p.n_outer <= geo.n_outer and p.n_inner + 1 <= geo.n_inner
            and p.l_outer - 1 <= geo.w_outer and p.l_inner - 1 <= geo.w_inner)


def test_join_holds_both_and_is_a_lattice_join():
    rng = random.Random(3)
    probs = [problem(rng.choice(LENGTHS), rng.choice(LENGTHS), rng.choice(WINDOWS),
                     rng.choice(WINDOWS)) for _ in range(300)]
    for a, b in zip(probs, reversed(probs)):
        j = join(a.key, b.key)
        assert j == join(b.key, a.key) and join(j, a.key) == j and join(j, j) == j
        for backend in ("cpu", "gpu"):
            assert holds(geometry(j, backend), a) and holds(geometry(j, backend), b)
    assert join(ClassKey(8, 31, 16, FULL), ClassKey(16, 511, 128, 16)) == \
        ClassKey(16, 511, 128, FULL)


def test_a_run_of_at_most_8_classes_keeps_them():
    """The bench's ordinary job (40 pairs of 1-30 x 1-45 nt; 3 classes) and one strand against
    a mix of 8 classes: every pair keeps its own geometry."""
    rng = random.Random(26)
    small = [problem(rng.randint(1, 30), rng.randint(1, 45)) for _ in range(40)]
    one = [problem(20, m, None, 128) for m in (10, 40, 90, 200, 400, 900, 3000, 9000)]
    for probs, count in ((small, 3), (one, 8)):
        assert len({p.plan.geo for p in probs}) == count
        assert plan_run(probs, limit=LIMITS["cpu"]) == probs
    nine = one + [problem(20, 20000, None, 128)]
    assert len({p.plan.geo for p in plan_run(nine, limit=LIMITS["cpu"])}) == 8


def every_class(backend: str, window1, window2, limit: int) -> list:
    """One pair of each class warm-up plans up to 10,000 nt (every class up to 10,240 nt),
    both orientations, that fits in ``limit``."""
    inner, outer = _lengths(10_000)
    out = []
    for m in inner:
        for n in outer:
            for a, b in ((n, m), (m, n)):
                p = problem(a, b, window1, window2, backend)
                if p.plan.bytes_needed() <= limit:
                    out.append(p)
    return out


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("windows", [(None, None), (None, 128), (12, 9), (64, 256)])
def test_every_class_to_10240_nt_plans_at_most_8_geometries(backend, windows):
    """The adversarial mix: a pair of every class, with the run's windows. At most 8
    geometries; each pair's holds it (exact results) within the memory limit; each is one
    warm-up prepares."""
    limit = LIMITS[backend]
    probs = every_class(backend, *windows, limit)
    own = {p.plan.geo for p in probs}
    assert len(own) > 20
    run = plan_run(probs, limit=limit, backend=backend)
    geos = {p.plan.geo for p in run}
    assert len(geos) <= 8
    for before, after in zip(probs, run):
        assert after.plan == replace(before.plan, geo=after.plan.geo)     # true lengths kept
        assert holds(after.plan.geo, before)
        assert after.plan.bytes_needed() <= limit
    warm = set(run_classes(backend, 10_000, *windows, max_bytes=limit))
    assert own <= warm and geos <= warm


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_random_mixes_plan_at_most_8_geometries(backend):
    """Random mixes to 10,000 nt (mostly short strand 1, as sRNA against transcripts), the run's
    windows drawn too."""
    limit = LIMITS[backend]
    rng = random.Random(11)
    for _ in range(4):
        w1, w2 = rng.choice([None, 12, 64]), rng.choice([None, 9, 128, 300])
        probs = []
        for _ in range(400):
            n1 = rng.randint(1, 300) if rng.random() < 0.7 else rng.randint(1, 10_000)
            p = problem(n1, rng.randint(1, 10_000), w1, w2, backend)
            if p.plan.bytes_needed() <= limit:
                probs.append(p)
        run = plan_run(probs, limit=limit, backend=backend)
        assert len({p.plan.geo for p in run}) <= 8
        assert all(holds(a.plan.geo, b) for a, b in zip(run, probs))
        assert {p.plan.geo for p in run} <= set(run_classes(backend, 10_000, w1, w2,
                                                            max_bytes=limit))


def test_merging_never_exceeds_the_memory_limit():
    """Under a tight limit the plan never serves a class by a geometry past it (it may then
    need more than 8: said so in run_geometries)."""
    limit = 1 << 30
    probs = every_class("cpu", None, 128, limit)
    run = plan_run(probs, limit=limit)
    assert all(p.plan.bytes_needed() <= limit for p in run)
    assert len({p.plan.geo for p in run}) <= 8


def test_unknown_memory_never_joins_past_the_largest_class():
    probs = every_class("cpu", None, 128, 1 << 30)
    top = max(p.plan.bytes_needed() for p in probs)
    run = plan_run(probs, limit=0)
    assert len({p.plan.geo for p in run}) <= 8
    assert all(p.plan.bytes_needed() <= top for p in run)


def test_classes_past_the_limit_keep_their_geometry_and_the_rest_merge():
    """Pairs past the limit (the run refuses them: check_memory) are left out of the joins."""
    limit = 1 << 30
    probs = every_class("cpu", None, 128, 1 << 40)
    fit = [p for p in probs if p.plan.bytes_needed() <= limit]
    assert len(fit) < len(probs)
    run = plan_run(probs, limit=limit)
    assert all(a.plan.geo == b.plan.geo for a, b in zip(run, probs) if b not in fit)
    assert len({a.plan.geo for a, b in zip(run, probs) if b in fit}) <= 8
