"""How many programs ``jaxrna fold --model turner --partition`` (jaxrna's engine) compiles
(issues 25 and 26): one partition program per length class met
(:data:`jaxrna.energy.partition.PROGRAM`, kept in jaxrna's program store), beside the MFE
engine's one per class met, whatever the lengths inside the classes, the parameter set, the
temperature, the dangle model, unpaired positions and ``--mea``; none after ``jaxrna warmup fold
--model turner --partition``.

The bound: the energy model's classes (:func:`jaxrna.batching.energy_length_class`: 8 up to
10,240 nt), each with a fixed row count (:func:`jaxrna.energy.partition_jax.rows_for`), of
which a run uses at most :data:`~jaxrna.energy.partition_jax.CLASS_BUDGET` (4; a run meeting
more computes some records in a larger class, :mod:`jaxrna.energy.run_classes`), the MFE the
same: at most 4 partition programs and 4 MFE programs, 8 in all, for any mix of lengths
(fewer where the device's memory refuses the long classes: on a CPU with 23 GB, classes up to
1,024, so no run here meets more than 4). Planned for every class up to 10,240 nt and the GPU
backend's budgets in ``tests/test_partition_classes.py``.

Whole processes are counted (:mod:`compile_count`) on the CPU, classes 128 and 256 only (on
this 2-core CPU each partition program compiles in 5-12 s, each MFE program in about 10-20 s,
with the machine idle or busy).
"""

import random

import numpy as np
import pytest

from compile_count import run_counted, write_fasta
from jaxrna.batching import energy_length_class


def _keys(cases, padded):
    """The program key of the partition batch for each ``(sequences, params, dangles,
    temperature, unpaired)`` padded to ``padded``, on the CPU, as the engine asks for it."""
    import jax

    from jaxrna import programs
    from jaxrna.energy import partition

    device = jax.devices("cpu")[0]
    out = []
    with partition.x64():
        for seqs, params, dangles, temperature, unpaired in cases:
            args, _ = partition.batch_inputs(seqs, params, dangles, temperature, unpaired,
                                             padded)
            out.append(programs.program_key(partition.PROGRAM, args, {}, device))
    return out


def test_numeric_options_and_lengths_in_a_class_share_the_program():
    """The batch program's key (what selects a program) is the same for every length within a
    class, both parameter sets, any temperature, dangles and unpaired positions, and is the
    key that prefetching and warming up prepare; another class or row count is another."""
    import jax

    from jaxrna import programs
    from jaxrna.energy import partition
    from jaxrna.energy.partition_jax import specs

    rng = random.Random(26)

    def seqs(n, lo, hi):
        return ["".join(rng.choice("ACGU") for _ in range(rng.randint(lo, hi)))
                for _ in range(n)]

    cases = [(seqs(8, 1, 128), None, 2, 37.0, None),
             (seqs(7, 60, 128) + [""], "turner1999", 0, 30.0, [(0, 3)] + [()] * 7),
             (seqs(8, 100, 128), "turner2004", 1, 55.5, [(2,)] * 8),
             (seqs(8, 1, 5), "turner2004", 3, -10.0, None)]
    keys = _keys(cases, 128)
    assert len(set(keys)) == 1, keys
    with partition.x64():
        spec_key = programs.program_key(partition.PROGRAM, specs(128, 8), {},
                                        jax.devices("cpu")[0])
    assert spec_key == keys[0]
    other = _keys([(seqs(8, 129, 256), None, 2, 37.0, None),
                   (seqs(2, 129, 256), "turner1999", 0, 20.0, None)], 256)
    assert len({keys[0], *other}) == 3
    with partition.x64():
        assert programs.program_key(partition.PROGRAM, specs(256, 2), {},
                                    jax.devices("cpu")[0]) == other[1]


def test_plans_are_bounded_by_the_classes():
    from jaxrna.energy.partition_jax import CPU_BATCH_BYTES, budgets, estimate_bytes, plan
    from jaxrna.energy.warmup import partition_plan

    lengths = list(range(0, 10_241, 7))
    assert len(plan(lengths, "cpu", CPU_BATCH_BYTES)) == len({energy_length_class(n)
                                                        for n in lengths if n}) == 8
    assert plan([100, 0, 5, 129, 256, 1], "cpu", CPU_BATCH_BYTES) == [(128, 8), (256, 2)]
    assert plan([0, 0], "gpu", 1 << 34) == []
    device, classes = partition_plan(200, "cpu")
    assert device.platform == "cpu" and classes == [(128, 8), (256, 2)]
    # every class a record of up to 10,000 nt may meet, less those refused for memory here
    limit = budgets(device, "cpu")[1]
    assert [c for c, _ in partition_plan(10_000, "cpu")[1]] == [
        c for c in (128, 256, 512, 1024, 2048, 4096, 6144, 10240) if estimate_bytes(c) <= limit]


def test_a_prefetch_thread_compiles_under_the_callers_x64_switch(monkeypatch):
    """:func:`jaxrna.programs.prefetch` traces in a thread; JAX's x64 switch is thread-local,
    so the caller's is carried there: the prefetched program is the one a float64 call asks
    for (one compilation, float64 results)."""
    import jax

    from jaxrna import programs, stages
    from jaxrna.energy.partition import x64

    monkeypatch.setattr(programs, "PREFETCH_FROM_CORES", 1)
    programs.forget()
    stages.reset()
    f = jax.jit(lambda x: x * 2.0)
    with x64():
        spec = jax.ShapeDtypeStruct((3,), np.float64)
        programs.prefetch("test.x64", f, (spec,))
        run = programs.program("test.x64", f, (np.ones(3),))
        out = run(np.full(3, 1.0 + 2 ** -40))
    assert out.dtype == np.float64 and float(out[0]) == 2.0 + 2 ** -39
    assert stages.counts().get("executables_compiled", 0) == 1
    programs.forget()


def _ensembles(out: str) -> int:
    return sum(1 for line in out.splitlines() if line.startswith(">"))


@pytest.mark.slow
def test_warmup_then_other_lengths_and_options_compile_nothing(tmp_path):
    """``warmup`` of class 128 compiles its partition program and the MFE programs of both
    engines (the partition engine's fill and traceback in one, the MFE runs' two), after which
    a job of other options in that class compiles nothing; a mix of classes 128 and 256 then compiles
    the two programs of class 256 only (what a cold run compiles: one partition program and
    one MFE program per class met, nothing else), and runs of other lengths, parameters,
    temperatures, dangles and ``--mea`` nothing. (One cache: class 128's programs compiled
    once, where a warm-up test and a cold-run test compiled them twice, CI time;
    tests/test_compile_energy.py warms three MFE classes.)"""
    import json

    cache = str(tmp_path / "cache")
    warm = run_counted(["warmup", "fold", "--model", "turner", "--partition", "--max-length",
                        "128", "--backend", "cpu"], cache)
    assert warm.returncode == 0, warm.stderr
    row = warm.stdout.splitlines()[2].split("\t")
    assert row[:2] == ["fold turner partition", "4"], warm.stdout
    assert warm.counts.get("executables_compiled", 0) == 4, warm.counts
    lengths = [128, 3, 101, 77, 12]
    job = run_counted(["fold", "--model", "turner", "--partition", "--backend", "cpu", "-T",
                       "25", "--params", "turner1999", "--mea=1",
                       write_fasta(tmp_path / "w.fa", lengths, 4)], cache)
    assert job.returncode == 0, job.stderr
    assert _ensembles(job.stdout) == len(lengths)
    assert job.compiled == 0 and job.counts.get("executables_compiled", 0) == 0, job.counts

    rng = random.Random("pf-mix")
    first = [rng.randint(20, 128) for _ in range(7)] + [1, 150]      # classes 128 and 256
    second = [rng.randint(1, 128) for _ in range(5)] + [rng.randint(129, 256) for _ in range(3)]
    met = {energy_length_class(n) for n in first}
    assert met == {128, 256}
    a = run_counted(["fold", "--model", "turner", "--partition", "--backend", "cpu",
                     write_fasta(tmp_path / "a.fa", first, 1)], cache)
    assert a.returncode == 0, a.stderr
    assert _ensembles(a.stdout) == len(first)
    # the bound: one partition program and one MFE program per class met, nothing else --
    # class 128's loaded from the warm-up's, class 256's compiled
    assert a.counts.get("executables_loaded", 0) == 2, a.counts
    assert 1 <= a.compiled <= 2 * len(met - {128}), a.counts
    assert a.counts.get("executables_compiled", 0) == 2 * len(met - {128}), a.counts
    b = run_counted(["fold", "--model", "turner", "--partition", "--backend", "cpu",
                     "--params", "turner1999", "-T", "30", "--dangles", "0", "-f", "json",
                     write_fasta(tmp_path / "b.fa", second, 2), "--mea", "2"], cache)
    assert b.returncode == 0, b.stderr
    got = json.loads(b.stdout)
    assert [x["length"] for x in got] == second and all("mea_structure" in x for x in got)
    assert b.compiled == 0 and b.counts.get("executables_compiled", 0) == 0, b.counts
    c = run_counted(["fold", "--model", "turner", "--partition", "--backend", "cpu",
                     "--dangles", "1", "-T", "42", write_fasta(tmp_path / "c.fa", [5, 90, 41], 3)],
                    cache)
    assert c.returncode == 0 and _ensembles(c.stdout) == 3, c.stderr
    assert c.compiled == 0 and c.counts.get("executables_compiled", 0) == 0, c.counts


def test_warmup_partition_under_auto_on_a_cpu_has_nothing_to_compile(tmp_path):
    """Without a GPU, ``fold --model turner --partition`` (``--backend auto``) computes the
    ensemble with ViennaRNA (and the MFE too): nothing of jaxrna's engines to prepare."""
    pytest.importorskip("RNA")
    r = run_counted(["warmup", "fold", "--model", "turner", "--partition"],
                    str(tmp_path / "c"))
    assert r.returncode == 0, r.stderr
    assert "fold turner (ViennaRNA engine: nothing to compile)\t0\t0" in r.stdout
    assert r.compiled == 0
