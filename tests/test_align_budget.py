"""Issue 26, ``jaxrna align``: a run uses at most 8 programs (:mod:`jaxrna.align.budget`),
whatever its mix of lengths up to 10,240 nt and its scores, on the CPU and in the GPU plan;
a run within the budget keeps today's classes; merged classes give the same bytes.

The plans are computed without compiling anything (the GPU plan on the CPU: the runner of
``interpret`` mode with the real kernel shapes); the outputs run the JAX path on the CPU
(``engine="device"``), the GPU plan's Pallas kernels in interpret mode on small shapes.
"""

from __future__ import annotations

import io
import random

import numpy as np
import pytest
from test_align_engine import _asymmetric
from test_align_gpu_plan import SMALL, _batch, _plan, _programs

from jaxrna.align import api, budget, classes as cl, engine, warmup
from jaxrna.align.recurrence import fits_int16
from jaxrna.align.scoring import make_scoring, match_mismatch
from jaxrna.kernels.wavefront_packed import packed_ok

#: Every edge of the class ladders up to 10,240 nt: all pairs of these lengths meet every
#: CPU and GPU class, in both variants under small scores.
EDGES = sorted({1, 10_240} | {v for h in cl.CPU_LANES for v in (h, h + 1, 4 * h, 4 * h + 1,
                                                                   8 * h, 8 * h + 1)
                              if v <= 10_240})
SCORINGS = [make_scoring(), match_mismatch(1, -1, 1, 1), make_scoring(90, -70, None, 200, 3)]


def _job(ql, tl, scoring, score_only, local=False, letters="A"):
    return engine.Job(_batch(list(ql), 1, "q", letters), _batch(list(tl), 2, "t", letters),
                      scoring, local, False, score_only)


def _check_plan(job, gpu):
    """The plan of every pair of ``job``: at most 8 programs, every pair in a class that holds
    it, a forced small variant only where every batch fits, every program one warm-up
    prepares. Returns the run's plan."""
    runner, batches, sent, qi, ti = _plan(job) if gpu else _cpu_plan(job)
    plan = runner.run_plan
    planned = np.concatenate([b.positions for b in batches] + [sent])
    assert sorted(planned.tolist()) == list(range(job.n_pairs))
    m, n = job.qlen[qi], job.tlen[ti]
    for b in batches:
        short, long_ = np.minimum(m, n)[b.positions], np.maximum(m, n)[b.positions]
        assert (short <= b.h).all() and (long_ <= b.w).all()
        if b.small and gpu:
            assert packed_ok(runner.kscoring, int(short.max()) + 64, int(long_.max()))
        elif b.small:
            assert fits_int16(runner.kscoring, b.h, int(long_.max()))
    progs = _programs(runner, batches, qi, ti)
    assert len(progs) <= budget.PROGRAM_BUDGET, sorted(progs)
    if plan.serve is not None:
        assert len(plan.programs) <= budget.PROGRAM_BUDGET
    if gpu:
        allowed = set(warmup.gpu_programs(runner, 10_240))
        assert {p[:4] for p in progs} <= allowed
    else:
        align = not job.score_only
        allowed = set(warmup.classes(10_240, alignments=align))
        small = {(int(h[0]), int(w[0])) for h, w in (
            cl.cpu_class(np.array([a]), np.array([b]), True)
            for a, b in warmup._small_pairs(10_240))}
        for kind, h, w, _, is_small in progs:
            assert (h, w) in allowed
            assert not is_small or (h, w) in small
    return plan


def _cpu_plan(job):
    from jaxrna.align import device_runner
    from jaxrna.align.chunks import Chunk, Ragged

    runner = device_runner.DeviceRunner(job, "cpu")
    qi, ti = job.pairs(0, job.n_pairs)
    ragged = None if job.score_only else Ragged(len(qi))
    batches = runner.plan(0, qi, ti, Chunk.empty(0, qi, ti), ragged)
    return runner, batches, np.zeros(0, np.int64), qi, ti


@pytest.mark.parametrize("gpu", [False, True])
@pytest.mark.parametrize("score_only", [True, False])
def test_every_class_up_to_10240_at_most_8_programs(gpu, score_only):
    """All pairs of every ladder edge up to 10,240 nt (every class, both variants where the
    scores allow): over the budget today, at most 8 programs after the merge, under three
    schemes; the pairs' classes hold them and warm-up prepares every program used."""
    over = False
    for scoring in SCORINGS:
        job = _job(EDGES, EDGES, scoring, score_only)
        plan = _check_plan(job, gpu)
        over |= plan.possible > budget.PROGRAM_BUDGET
    assert over                               # the mix does exceed the budget


@pytest.mark.parametrize("gpu", [False, True])
def test_random_mixes_at_most_8_programs(gpu):
    rng = np.random.default_rng(8)
    for score_only in (True, False):
        for top, nq, nt in ((10_240, 30, 25), (3_000, 40, 30), (600, 50, 50)):
            ql, tl = rng.integers(0, top + 1, nq), rng.integers(1, top + 1, nt)
            scoring = SCORINGS[int(rng.integers(0, len(SCORINGS)))]
            _check_plan(_job(ql, tl, scoring, score_only), gpu)


@pytest.mark.parametrize("gpu", [False, True])
def test_within_budget_keeps_todays_classes(gpu):
    """An ordinary job (60 x 60 pairs of 50-500 nt) meets few classes: no serving map, each
    pair in its own class and each batch choosing its variant (as before the budget)."""
    rng = random.Random(60)
    ql = [rng.randint(50, 500) for _ in range(60)]
    tl = [rng.randint(50, 500) for _ in range(60)]
    for score_only in (True, False):
        job = _job(ql, tl, make_scoring(), score_only, local=True)
        plan = _check_plan(job, gpu)
        assert plan.serve is None and plan.possible <= budget.PROGRAM_BUDGET
        runner, batches, _, qi, ti = _plan(job) if gpu else _cpu_plan(job)
        kind, h, w, _, _ = runner.classes_of(job.qlen[qi], job.tlen[ti])
        for b in batches:
            assert b.small is None
            assert set(h[b.positions].tolist()) == {b.h} and set(w[b.positions].tolist()) == {b.w}


def test_length_pairs_counts_every_pair():
    rng = np.random.default_rng(3)
    ql, tl = rng.integers(0, 50, 40), rng.integers(0, 50, 30)
    for zip_pairs in (False, True):
        m, n, c = budget.length_pairs(ql, tl, zip_pairs)
        if zip_pairs:
            want = list(zip(ql[:30].tolist(), tl.tolist()))
        else:
            want = [(a, b) for a in ql.tolist() for b in tl.tolist()]
        got = [(a, b) for a, b, k in zip(m.tolist(), n.tolist(), c.tolist()) for _ in range(k)]
        assert sorted(got) == sorted(want)


def _run(job, interpret=False, **kw):
    out = io.StringIO()
    if interpret:
        kw.update(interpret=True, kernel=kw.get("kernel", SMALL))
    engine.run(job, "tsv" if job.score_only else "json", out, backend="cpu", engine="device",
               **kw)
    return out.getvalue()


@pytest.mark.parametrize("score_only,local", [
    (True, False), pytest.param(False, True, marks=pytest.mark.slow)])  # the fast subset: one
def test_merged_classes_same_bytes(monkeypatch, score_only, local):
    """The JAX path on the CPU with budgets of 8, 2 and 1 program (merges of classes and of
    int16 into int32): the same bytes, an asymmetric matrix (transposed pairs) included.
    (No empty record: on the JAX path a pair with an empty side scores right only where a
    longer pair of its batch makes the sweep reach its last cell, before and after the
    budget: a separate bug.)"""
    rng = random.Random(4)
    ql = [rng.randint(1, 300) for _ in range(9)] + [300, 1]   # not 0: see below
    tl = [rng.randint(1, 300) for _ in range(7)] + [250, 2]
    for scoring, letters in ((match_mismatch(1, -1, 1, 1), "ACGT"), (_asymmetric(), "AC")):
        texts, plans = [], []
        for bud in (8, 2, 1):
            monkeypatch.setattr(budget, "PROGRAM_BUDGET", bud)
            job = _job(ql, tl, scoring, score_only, local, letters)
            texts.append(_run(job))
            plans.append(_cpu_plan(job)[0].run_plan)
        assert texts[0] == texts[1] == texts[2]
        assert plans[0].serve is None and len(plans[2].programs) == 1
        assert len(plans[1].programs) <= 2


@pytest.mark.slow
def test_gpu_plan_merged_and_tiles_same_bytes(monkeypatch):
    """The GPU plan in interpret mode, score only, with the tile wavefront for few long pairs
    (its threshold lowered): within the budget (each pair's own tile shape), and over it
    (tiles padded to their serving class, classes merged), the bytes of the CPU path."""
    monkeypatch.setattr(api, "TILED_MIN_LENGTH", 70)
    monkeypatch.setattr(api, "TILE", 16)
    kernel = dict(SMALL, tiles=True)
    ql, tl = [3, 20, 75, 90, 130], [5, 80, 150, 60]
    for scoring, local in ((make_scoring(), False), (match_mismatch(1, -1, 1, 1), True)):
        job = _job(ql, tl, scoring, True, local, "ACGT")
        want = _run(job)
        for bud in (20, 3, 1):
            monkeypatch.setattr(budget, "PROGRAM_BUDGET", bud)
            job = _job(ql, tl, scoring, True, local, "ACGT")
            runner = engine.DeviceRunner(job, "cpu", interpret=True, kernel=kernel)
            assert runner.tiled
            assert (runner.run_plan.serve is None) == (bud == 20)
            assert _run(job, True, kernel=kernel) == want
