"""How many programs ``jaxrna fold --model turner`` compiles (issue 26): two per length class
used (its fill and its traceback; ``--score-only`` runs the fill alone), at most four classes a
run, whatever the lengths inside the classes, the parameter set, the temperature and the dangle
model; none after :func:`jaxrna.energy.warmup.warm`.

Whole processes are counted (:mod:`compile_count`), on the CPU, sharing one cache directory
across this module (six programs compiled in all: classes 128, 256 and 512).
"""

import random

import pytest

from compile_count import run_counted, warm_counted, write_fasta
from jaxrna.batching import energy_length_class
from jaxrna.energy.warmup import classes


def _records(out: str) -> int:
    return out.count(">")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("energy-cache"))


@pytest.mark.slow
def test_other_lengths_and_options_compile_nothing(cache, tmp_path):
    rng = random.Random("mix")
    first = [rng.randint(30, 256) for _ in range(11)] + [1]        # classes 128 and 256
    second = [rng.randint(1, 256) for _ in range(9)]
    met = {energy_length_class(n) for n in first}
    a = run_counted(["fold", "--model", "turner", "--backend", "cpu",
                     write_fasta(tmp_path / "a.fa", first, 1)], cache)
    assert a.returncode == 0, a.stderr
    assert _records(a.stdout) == len(first)
    # the documented bound: a fill and a traceback per class met (and nothing else)
    assert 2 <= a.compiled <= 2 * len(met), a.counts
    b = run_counted(["fold", "--model", "turner", "--backend", "cpu", "--params", "turner1999",
                     "-T", "30", "--dangles", "0", "--score-only", "-f", "tsv",
                     write_fasta(tmp_path / "b.fa", second, 2)], cache)
    assert b.returncode == 0, b.stderr
    rows = [line.split("\t") for line in b.stdout.splitlines() if line.startswith("r")]
    assert len(rows) == len(second) and not any("(" in x for row in rows for x in row)
    assert b.compiled == 0, b.counts
    c = run_counted(["fold", "--model", "turner", "--backend", "cpu", "--dangles", "1",
                     write_fasta(tmp_path / "c.fa", second[::-1], 2)], cache)
    assert c.returncode == 0 and c.compiled == 0, c.counts


@pytest.mark.slow
def test_after_warm_a_run_compiles_nothing(cache, tmp_path):
    assert warm_counted("energy", cache, backend="cpu", max_length=300) \
        == 2 * len(classes(300)) == 6
    lengths = [300, 299, 257, 12, 140, 3, 64]
    run = run_counted(["fold", "--model", "turner", "--backend", "cpu", "-T", "25",
                       write_fasta(tmp_path / "w.fa", lengths, 3)], cache)
    assert run.returncode == 0, run.stderr
    assert _records(run.stdout) == len(lengths)
    assert run.compiled == 0, run.counts


def test_classes_bound_the_programs_up_to_10240_nt():
    """8 classes up to 10,240 nt; a run uses at most 4 of them (8 programs: a fill and a
    traceback each), every record in a class that holds it, chunk by chunk."""
    from jaxrna.energy import api
    from jaxrna.energy.batch_plan import device_batches

    assert len({energy_length_class(n) for n in range(0, 10241)}) == 8
    assert classes(10_000) == [128, 256, 512, 1024, 2048, 4096, 6144, 10240]
    rng = random.Random("budget")
    for backend, budget in (("cpu", 1 << 30), ("gpu", 20 << 30)):
        run = api.run_classes(None, backend, budget)
        used = set()
        for final in (False, False, True):
            lengths = [rng.randint(0, 10240) for _ in range(300)]
            at = run.length_class(lengths, final)
            assert all(at(n) >= energy_length_class(n) for n in lengths)
            plan = device_batches(lengths, backend, budget, at)
            assert sorted(k for _, _, b in plan for k in b) == list(range(len(lengths)))
            used |= {padded for padded, _, _ in plan}
        assert len(used) <= api.CLASS_BUDGET == 4, used
    # a run (or its last chunk) meeting at most 4 classes keeps its own; a chunk that more
    # records follow keeps a class free for them
    at = api.run_classes(None, "cpu", 1 << 30).length_class([100, 300, 700, 1500], True)
    assert [at(n) for n in (100, 300, 700, 1500)] == [128, 512, 1024, 2048]
    at = api.run_classes(None, "cpu", 1 << 30).length_class([100, 300, 700, 1500], False)
    assert len({at(n) for n in (100, 300, 700, 1500)}) == 3


@pytest.mark.slow
def test_a_prefetched_program_is_the_one_the_batch_uses(monkeypatch):
    """The plan's programs prepared in the background (``prefetch_programs``, as on hosts of
    many cores) are keyed as the batches ask for them: each is compiled once, not twice."""
    from jaxrna import programs, stages
    from jaxrna.energy import api

    monkeypatch.setattr(programs, "PREFETCH_FROM_CORES", 1)
    programs.forget()
    stages.reset()
    assert api.prefetch_programs([(128, 8), (128, 8)], api.load_params(),
                                 programs.default_device()) == 2     # its fill and traceback
    r = api.fold_energy(["GGGGAAACCCCAUCGAAAGAUU", "ACGUAGCUAGCUAGCAUCGAUCGA"], backend="cpu")
    assert [x.energy for x in r] == [-650, api.fold_energy("ACGUAGCUAGCUAGCAUCGAUCGA",
                                                           backend="cpu").energy]
    assert stages.counts().get("executables_compiled", 0) == 2
    programs.forget()


@pytest.mark.slow
def test_score_only_compiles_the_fill_alone(tmp_path):
    """``--score-only`` runs a class's fill program only; a later run with structures adds its
    traceback program and nothing else (the fill is the same program)."""
    cache = str(tmp_path / "cache")
    fasta = write_fasta(tmp_path / "s.fa", [40, 90, 120, 7], 5)          # class 128
    a = run_counted(["fold", "--model", "turner", "--backend", "cpu", "--score-only", "-f",
                     "tsv", fasta], cache)
    assert a.returncode == 0, a.stderr
    assert a.compiled == 1 and a.counts.get("executables_compiled") == 1, a.counts
    b = run_counted(["fold", "--model", "turner", "--backend", "cpu", fasta], cache)
    assert b.returncode == 0, b.stderr
    assert b.counts.get("executables_compiled") == 1 and b.loaded == 1, b.counts
    energies = [row.split("\t")[2] for row in a.stdout.splitlines()[1:]]
    assert [line.rsplit("(", 1)[1].strip(" )") for line in b.stdout.splitlines()
            if line.endswith(")")] == [e.strip() for e in energies]


@pytest.mark.slow
def test_a_score_only_plan_prefetches_the_fill_alone(monkeypatch):
    """On hosts of many cores (forced here) a plan's programs are prepared in the background:
    without structures only the fill is asked for, and a score-only run compiles nothing else."""
    from jaxrna import programs, stages
    from jaxrna.energy import api
    from jaxrna.io.fasta import Record

    monkeypatch.setattr(programs, "PREFETCH_FROM_CORES", 1)
    programs.forget()
    stages.reset()
    params, device = api.load_params(), programs.default_device()
    assert api.prefetch_programs([(128, 8)], params, device, with_pairs=False) == 1
    records = [Record("a", "GGGGAAACCCCAUCGAAAGAUU"), Record("b", "ACGUAGCUAGCUAGCAUCGAUCGA")]
    got = list(api.fold_energy_records(records, with_pairs=False, backend="cpu"))
    for future in list(programs._local_futures):    # a prefetch still under way, finished
        future.result()
    assert stages.counts().get("executables_compiled", 0) == 1       # the fill, nothing else
    assert [r.energy for r in got] == [-650, api.fold_energy(records[1].sequence,
                                                             backend="cpu").energy]
    assert stages.counts().get("executables_compiled", 0) == 2       # and now its traceback
    assert api.prefetch_programs([(128, 8)], params, device) == 2
    programs.forget()


def test_a_gpu_asks_for_the_traceback_before_the_fill(monkeypatch):
    """The longest compilation first: on a GPU the traceback program of a class up to
    ``TRACE_FIRST_MAX`` nt is asked for (lowered) before its fill, a longer class's fill
    first; a CPU keeps the fill first. The compile workers are stubbed:
    this checks the order of the requests, and that the first class stays in this process."""
    from jaxrna import compile_workers
    from jaxrna.energy import mfe_programs as mp

    asked = []
    monkeypatch.setattr(compile_workers, "prefetch", lambda name, source, specs, static, device,
                        cpu_store, processes: asked.append((name, processes)))

    class Gpu:
        platform = "gpu"

    params = mp.load_params()
    assert mp.prefetch_programs([(512, 8), (1024, 4), (2048, 64)], params, Gpu()) == 6
    assert asked == [(mp.TRACE_PROGRAM, False), (mp.FILL_PROGRAM, False),
                     (mp.TRACE_PROGRAM, True), (mp.FILL_PROGRAM, True),
                     (mp.FILL_PROGRAM, True), (mp.TRACE_PROGRAM, True)]   # long: fill first
    asked.clear()
    mp.prefetch_programs([(2048, 64)], params, Gpu())
    assert asked == [(mp.FILL_PROGRAM, False), (mp.TRACE_PROGRAM, False)]
    asked.clear()
    mp.prefetch_programs([(128, 8)], params, type("Cpu", (), {"platform": "cpu"})())
    assert [name for name, _ in asked] == [mp.FILL_PROGRAM, mp.TRACE_PROGRAM]


def test_an_mfe_run_folds_in_at_most_four_classes(monkeypatch):
    """:func:`jaxrna.energy.api.fold_energy_records` maps a run's records onto at most 4
    classes (each record in one that holds it), chunk by chunk; the partition engine's own
    classes (``length_class``) are left as they are. The device work is stubbed: this checks
    the plan the run dispatches, every record once."""
    from jaxrna.energy import api
    from jaxrna.io.fasta import Record

    seen = []

    def launch(seqs, params, dangles, ups, with_pairs, padded, rows, platform, combined):
        seen.append((padded, [len(s) for s in seqs], combined))
        return seqs, len(seqs), None, with_pairs

    monkeypatch.setattr(api, "_launch", launch)
    monkeypatch.setattr(api, "_collect", lambda launched, as_pairs=False:
                        [(len(s), ()) for s in launched[0][:launched[1]]])
    monkeypatch.setattr(api, "prefetch_programs", lambda *a, **k: 0)
    rng = random.Random("four classes")
    lengths = [rng.choice([50, 200, 400, 900, 1800, 3500]) for _ in range(60)]
    records = [Record(f"r{k}", "A" * n) for k, n in enumerate(lengths)]
    out = list(api.fold_energy_records(records, backend="cpu", chunk=25, max_bytes=1 << 40))
    assert [r.energy for r in out] == lengths                     # every record, in order
    used = {padded for padded, _, _ in seen}
    assert len(used) <= api.CLASS_BUDGET == 4 and len({energy_length_class(n)
                                                         for n in lengths}) == 6, used
    assert all(padded >= energy_length_class(n) for padded, ns, _ in seen for n in ns)
    assert not any(combined for _, _, combined in seen)
    # with the partition engine's classes (and its one-program form) the run keeps them
    seen.clear()
    list(api.fold_energy_records(records, backend="cpu", chunk=25, max_bytes=1 << 40,
                                 length_class=energy_length_class, combined=True))
    assert {padded for padded, _, _ in seen} == {energy_length_class(n) for n in lengths}
    assert all(combined for _, _, combined in seen)
