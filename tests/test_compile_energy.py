"""How many programs ``jaxrna fold --model turner`` compiles (issue 26): one per length class
met, whatever the lengths inside the classes, the parameter set, the temperature, the dangle
model and ``--score-only``; none after :func:`jaxrna.energy.warmup.warm`.

Whole processes are counted (:mod:`compile_count`), on the CPU, sharing one cache directory
across this module (three programs compiled in all: classes 128, 256 and 512).
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
    # the documented bound: one program per class met (and nothing else)
    assert 1 <= a.compiled <= len(met), a.counts
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
    assert warm_counted("energy", cache, backend="cpu", max_length=300) == len(classes(300)) == 3
    lengths = [300, 299, 257, 12, 140, 3, 64]
    run = run_counted(["fold", "--model", "turner", "--backend", "cpu", "-T", "25",
                       write_fasta(tmp_path / "w.fa", lengths, 3)], cache)
    assert run.returncode == 0, run.stderr
    assert _records(run.stdout) == len(lengths)
    assert run.compiled == 0, run.counts


def test_classes_bound_the_programs_up_to_10240_nt():
    """At most 8 classes (8 programs) for any mix of lengths up to 10,240 nt."""
    assert len({energy_length_class(n) for n in range(0, 10241)}) == 8
    assert classes(10_000) == [128, 256, 512, 1024, 2048, 4096, 6144, 10240]


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
                                 programs.default_device()) == 1
    r = api.fold_energy(["GGGGAAACCCCAUCGAAAGAUU", "ACGUAGCUAGCUAGCAUCGAUCGA"], backend="cpu")
    assert [x.energy for x in r] == [-650, api.fold_energy("ACGUAGCUAGCUAGCAUCGAUCGA",
                                                           backend="cpu").energy]
    assert stages.counts().get("executables_compiled", 0) == 1
    programs.forget()
