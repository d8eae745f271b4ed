"""The length classes of one ``jaxrna fold --model turner --partition`` run (jaxrna's engine,
issue 26): at most :data:`jaxrna.energy.partition_jax.CLASS_BUDGET` (4) for the partition
programs and the same for the MFE programs, 8 programs in all, for any mix of lengths and any
chunking; a run meeting at most 4 keeps exactly its classes; the results do not depend on the
class a record is computed in; warm-up's plan holds every class a run can use.

Planner-level (the program keys a run asks for, counted without compiling: the long classes'
programs take minutes each on this CPU, and the device's memory admits classes up to 1,024
here), with the GPU backend's parameters too; one small run checks the results.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from jaxrna.batching import ENERGY_LENGTH_CLASSES, energy_length_class
from jaxrna.class_budget import merge_to_budget
from jaxrna.energy import partition_jax as pj
from jaxrna.energy.run_classes import RunClasses, choose, padded_work, serving

LADDER = list(ENERGY_LENGTH_CLASSES)


def _length_in(rng, c):
    """A random length of class ``c``."""
    below = [x for x in LADDER if x < c]
    return rng.randint(below[-1] + 1 if below else 1, c)


def _stream(rng, top):
    """A run: chunks of random lengths (classes up to ``top``), the last one final."""
    classes = [c for c in LADDER if c <= top]
    chunks = []
    for _ in range(rng.randint(1, 5)):
        picked = rng.sample(classes, rng.randint(1, len(classes)))
        chunks.append([_length_in(rng, c) for c in picked for _ in range(rng.randint(1, 6))])
    return chunks


@pytest.mark.parametrize("top", [1024, 2048, 6144, 10240])
def test_any_run_uses_at_most_the_budget_and_every_record_fits(top):
    rng = random.Random(f"classes-{top}")
    for _ in range(300):
        run = RunClasses(top, 4)
        chunks = _stream(rng, top)
        used = set()
        for k, lengths in enumerate(chunks):
            serve = run.serve(lengths, final=k == len(chunks) - 1)
            for n in lengths:
                c = energy_length_class(n)
                assert serve[c] >= c and serve[c] in LADDER and serve[c] <= top
                used.add(serve[c])
            assert len(run.classes) <= 4
            if k < len(chunks) - 1:     # room for any later record
                assert len(run.classes) < 4 or top in run.classes
        assert used <= set(run.classes)


def test_a_run_meeting_at_most_the_budget_keeps_its_classes():
    rng = random.Random("keep")
    for _ in range(300):
        met = rng.sample(LADDER, rng.randint(1, 4))
        lengths = [_length_in(rng, c) for c in met for _ in range(3)]
        serve = RunClasses(10240, 4).serve(lengths, final=True)
        assert serve == {c: c for c in met}
        # a long run (more records to come) keeps them where one class stays free
        if len(met) <= 3:
            assert RunClasses(10240, 4).serve(lengths, final=False) == {c: c for c in met}


def test_the_search_does_no_more_work_than_the_greedy_joins():
    """On a single chunk, :func:`choose`'s classes cost no more padded work than
    :func:`jaxrna.class_budget.merge_to_budget`'s (the same cubic cost), and never more than 4."""
    rng = random.Random("greedy")
    for _ in range(300):
        met = rng.sample(LADDER, rng.randint(5, 8))
        counts = {c: rng.randint(1, 50) for c in sorted(met)}
        added = choose(counts, [], 4, 10240, final=True)
        ours = sum(counts[c] * float(s) ** 3 for c, s in serving(counts, added).items())
        greedy = merge_to_budget(counts, 4, join=max, cost=lambda c: float(c) ** 3)
        theirs = sum(counts[c] * float(greedy[c]) ** 3 for c in counts)
        assert len(added) <= 4 and ours <= theirs * (1 + 1e-12)


def test_a_later_longer_record_finds_a_class():
    """A first chunk that meets 4 classes while records may follow keeps room: a later chunk's
    record longer than all of them is served, and the run's classes stay 4."""
    run = RunClasses(2048, 4)
    first = run.serve([100, 200, 400, 900] * 10, final=False)
    assert len(set(first.values())) <= 3 or 2048 in run.classes
    later = run.serve([2000, 60], final=True)
    assert later[2048] == 2048 and len(run.classes) <= 4


def _mfe_keys(lengths, serve, backend, budget):
    from jaxrna.energy.batch_plan import device_batches

    return {(c, r) for c, r, _ in device_batches(
        lengths, backend, budget, lambda n: serve[energy_length_class(n)])}


@pytest.mark.parametrize("platform,memory", [("cpu", 23 << 30), ("cpu", 512 << 30),
                                             ("gpu", 80 << 30), ("gpu", 141 << 30),
                                             ("gpu", 4 << 40)])
def test_an_adversarial_mix_plans_at_most_8_programs(monkeypatch, platform, memory):
    """Every class of the ladder up to 10,240 nt (those the memory admits), in one chunk and
    spread over several: the partition programs and the MFE programs a run asks for are at
    most 4 + 4, on the CPU and with the GPU backend's parameters (budgets as
    :func:`jaxrna.energy.partition_jax.budgets` gives them for that memory)."""
    if platform == "gpu":
        budget, most = max(2 << 30, memory // 4), int(memory * 0.8)
        mfe_budget = max(8 << 30, memory // 4)       # batch_plan.gpu_budget, without a device
    else:
        budget, most, mfe_budget = pj.CPU_BATCH_BYTES, memory // 2, 1 << 30
    top = pj.top_class(most)
    lengths = [n for n in range(1, 10_241, 37) if pj.estimate_bytes(n) <= most]
    met = {energy_length_class(n) for n in lengths}
    assert max(met) <= top
    for chunking in (1, 3, 7):
        run = pj.run_classes(most, platform, budget)
        part_keys, mfe_keys = set(), set()
        pieces = [lengths[k::chunking] for k in range(chunking)]
        for k, piece in enumerate(pieces):
            serve = run.serve(piece, final=k == len(pieces) - 1)
            part_keys |= set(pj.plan(piece, platform, budget, serve))
            mfe_keys |= _mfe_keys(piece, serve, platform, mfe_budget)
        assert len(part_keys) <= pj.CLASS_BUDGET and len(mfe_keys) <= pj.CLASS_BUDGET
        assert len(part_keys) + len(mfe_keys) <= 8
        if len(met) <= pj.CLASS_BUDGET and chunking == 1:    # nothing to merge: today's
            assert {c for c, _ in part_keys} == met


@pytest.mark.parametrize("memory", [None, 64 << 30, 600 << 30])
def test_warmup_plan_holds_every_class_a_run_can_use(monkeypatch, memory):
    """Whatever the run (random streams of records up to ``max_length``), its partition
    programs are among :func:`jaxrna.energy.warmup.partition_plan`'s, on this CPU (and as if
    it had ``memory`` for a record: a larger top class than the longest record's)."""
    from jaxrna.energy.warmup import partition_plan

    if memory:
        monkeypatch.setattr(pj, "budgets", lambda device, platform: (1 << 30, memory))
    device, platform = pj.device_of("cpu")
    budget, most = pj.budgets(device, platform)
    rng = random.Random("warm")
    for max_length in (128, 300, 900, 10_000):
        warm = set(partition_plan(max_length, "cpu")[1])
        top = min(pj.top_class(most), energy_length_class(max_length))
        for _ in range(100):
            run = pj.run_classes(most, platform, budget)
            chunks = [[min(n, max_length) for n in chunk] for chunk in _stream(rng, top)]
            for k, lengths in enumerate(chunks):
                serve = run.serve(lengths, final=k == len(chunks) - 1)
                assert set(pj.plan(lengths, platform, budget, serve)) <= warm, (max_length,
                                                                                 serve)


def test_top_class_is_the_refusal_bound():
    for limit in (1 << 28, 8 << 30, 60 << 30, 1 << 40):
        top = pj.top_class(limit)
        assert pj.estimate_bytes(top) <= limit < pj.estimate_bytes(top + 1)


@pytest.mark.slow  # 35-47 s on 2 cores; the fast subset keeps test_fold_turner_partition_jax's oracle tests
def test_results_do_not_depend_on_the_class(monkeypatch):
    """Records computed in a larger class (a budget of 1: every record in class 256) give the
    same results as in their own (128 and 256): energies, structures, probabilities."""
    from jaxrna.energy.api import EnergyModel
    from jaxrna.io.fasta import Record

    rng = random.Random("exact")
    recs = [Record(f"r{k}", "".join(rng.choice("ACGU") for _ in range(n)))
            for k, n in enumerate([40, 0, 130, 90, 7, 150])]
    model = EnergyModel(dangles=2)
    plain = list(pj.partition_records(recs, model, mea_gamma=1.0, backend="cpu"))
    monkeypatch.setattr(pj, "CLASS_BUDGET", 1)
    seen = Counter()
    real = pj.plan

    def spy(lengths, platform, budget, serve=None):
        out = real(lengths, platform, budget, serve)
        seen.update(c for c, _ in out)
        return out

    monkeypatch.setattr(pj, "plan", spy)
    merged = list(pj.partition_records(recs, model, mea_gamma=1.0, backend="cpu"))
    assert set(seen) == {256}
    for a, b in zip(plain, merged):
        assert (a.id, a.energy, a.structure, a.centroid, a.mea_structure, a.ensemble_symbols) \
            == (b.id, b.energy, b.structure, b.centroid, b.mea_structure, b.ensemble_symbols)
        assert abs(a.ensemble_energy - b.ensemble_energy) < 1e-12   # (summation order: ~1e-19)
        assert list(a.pair_i) == list(b.pair_i) and list(a.pair_j) == list(b.pair_j)
        assert max(abs(a.pair_p - b.pair_p), default=0.0) < 1e-12
    assert padded_work(2, 3) == 24.0
