"""A job's programs compiled in worker processes (:mod:`jaxrna.compile_workers`, issue 26):
the same output and the same compile counts as compiling in the job's process, the executables
stored by the workers loaded by the job, nothing compiled on the next run, and a worker that
fails leaving the job to compile the program itself.

On this CPU ``JAXRNA_COMPILE_PROCESSES`` forces the workers (a host of many cores gets them
by default, :func:`jaxrna.compile_workers.workers`).
"""

import pytest

from compile_count import run_counted, write_fasta


@pytest.mark.slow
def test_workers_compile_a_plan_with_the_same_output_and_counts(tmp_path):
    lengths = [20, 150, 90, 240, 3, 130]                  # energy classes 128 and 256
    fasta = write_fasta(tmp_path / "a.fa", lengths, 7)
    args = ["fold", "--model", "turner", "--backend", "cpu", fasta]
    here = run_counted(args, str(tmp_path / "here"), env={"JAXRNA_COMPILE_PROCESSES": "0"})
    assert here.returncode == 0, here.stderr
    assert here.counts.get("executables_loaded", 0) == 0
    workers = run_counted(args, str(tmp_path / "workers"),
                          env={"JAXRNA_COMPILE_PROCESSES": "2"})
    assert workers.returncode == 0, workers.stderr
    assert workers.stdout == here.stdout and workers.stdout.count(">") == len(lengths)
    # the first class's fill and traceback traced here, the other's by workers (stored, then
    # loaded by the job)
    assert workers.counts.get("executables_loaded", 0) >= 1, workers.counts
    assert workers.counts["executables_compiled"] == here.counts["executables_compiled"] == 4
    assert workers.compiled == here.compiled, (workers.counts, here.counts)
    again = run_counted(args, str(tmp_path / "workers"), env={"JAXRNA_COMPILE_PROCESSES": "2"})
    assert again.stdout == here.stdout
    assert again.compiled == 0 and again.counts.get("executables_compiled", 0) == 0, \
        again.counts


def test_a_worker_stores_the_program_or_reports_why_not(tmp_path):
    import jax

    from jaxrna import compile_workers, programs, stages

    programs.use_disk(str(tmp_path))
    try:
        device = programs.default_device()
        good = "jaxrna.compile_workers:_example"
        key = programs.program_key("test.workers.good", (), {}, device)
        spec = compile_workers.spec_for("test.workers.good", good, (), {}, {}, device, key,
                                        programs.disk_dir(), True)
        report = compile_workers.submit(spec).result(timeout=300)
        assert "error" not in report and report["key"] == key, report
        assert report["counts"]["executables_compiled"] == 1
        loaded = stages.counts().get("executables_loaded", 0)
        run = programs.program("test.workers.good", compile_workers._example(), (), {},
                               device, cpu_store=True)
        assert int(run()) == 0
        assert stages.counts().get("executables_loaded", 0) == loaded + 1   # not compiled here
        # a source that does not import: nothing stored, the reason reported
        bad = compile_workers.spec_for("test.workers.bad", "jaxrna.no_such_module:f", (), {},
                                       {}, device, programs.program_key(
                                           "test.workers.bad", (), {}, device),
                                       programs.disk_dir(), True)
        report = compile_workers.submit(bad).result(timeout=300)
        assert "no_such_module" in report["error"] and not report["counts"]["programs"]
        f = jax.jit(lambda: 1)
        assert int(programs.program("test.workers.bad", f, (), {}, device, cpu_store=True)()) == 1
    finally:
        programs.use_disk(None)
        programs.forget()


def test_a_program_a_worker_stored_is_loaded_in_the_background(tmp_path, monkeypatch):
    """Once a worker has stored its program, a thread of the job loads it: the run finds it
    in the process when it asks, nothing compiled here."""
    import time

    from jaxrna import compile_workers, programs, stages

    monkeypatch.setenv("JAXRNA_COMPILE_PROCESSES", "1")
    monkeypatch.setattr(programs, "local_busy", lambda: True)    # as while a thread lowers
    programs.use_disk(str(tmp_path))
    try:
        device = programs.default_device()
        name, source = "test.workers.background", "jaxrna.compile_workers:_example"
        compiled = stages.counts().get("executables_compiled", 0)
        loaded = stages.counts().get("executables_loaded", 0)
        compile_workers.prefetch(name, source, (), {}, device, cpu_store=True)
        future = programs.in_flight(name, (), {}, device)
        assert future is not None                      # handed to the worker
        assert "error" not in future.result(timeout=300)
        deadline = time.time() + 120
        while not programs.ready(name, (), {}, device) and time.time() < deadline:
            time.sleep(0.05)
        assert programs.ready(name, (), {}, device)     # loaded without being asked for
        assert stages.counts().get("executables_loaded", 0) == loaded + 1
        # the worker's compilation (its counters merged here), none in this process
        assert stages.counts().get("executables_compiled", 0) == compiled + 1
        run = programs.program(name, compile_workers._example(), (), {}, device, cpu_store=True)
        assert int(run()) == 0
        assert stages.counts().get("executables_loaded", 0) == loaded + 1   # not again
    finally:
        programs.use_disk(None)
        programs.forget()


def test_worker_count_follows_the_environment(monkeypatch):
    from jaxrna import compile_workers

    monkeypatch.setenv("JAXRNA_COMPILE_PROCESSES", "3")
    assert compile_workers.workers() == 3
    monkeypatch.setenv("JAXRNA_COMPILE_PROCESSES", "0")
    assert compile_workers.workers() == 0
    monkeypatch.setenv("JAXRNA_COMPILE_PROCESSES", "99")
    assert compile_workers.workers() == compile_workers.MAX_WORKERS
    monkeypatch.delenv("JAXRNA_COMPILE_PROCESSES")
    monkeypatch.setattr("jaxrna.programs.cores", lambda: 2)
    assert compile_workers.workers() == 0
    monkeypatch.setattr("jaxrna.programs.cores", lambda: 6)
    assert compile_workers.workers() == 3
    monkeypatch.setattr("jaxrna.programs.cores", lambda: 16)
    assert compile_workers.workers() == compile_workers.MAX_WORKERS == 6


def test_threads_asking_at_once_compile_a_program_once():
    """Device threads reaching a program at the same moment share one compilation (they
    compiled a copy each: targets' 10 executables for 6 programs on a GPU), and a failing
    compilation fails each of them (so each can take its fall-back)."""
    import threading

    import jax
    import jax.numpy as jnp

    from jaxrna import programs, stages

    f = jax.jit(lambda x, k: x * k, static_argnames="k")
    before = stages.counts().get("executables_compiled", 0)
    got, errors = [], []
    start = threading.Barrier(4)

    def ask(k):
        start.wait()
        try:
            got.append(programs.program("test.workers.once", f, (jnp.ones(5),), {"k": k}))
        except Exception as exc:  # noqa: BLE001 - recorded
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(3,)) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors and len(got) == 4 and len({id(g) for g in got}) == 1
    assert stages.counts().get("executables_compiled", 0) - before == 1
    assert got[0](jnp.ones(5)).tolist() == [3.0] * 5

    def broken(x):
        raise ValueError("does not lower")

    bad = jax.jit(broken)
    errors.clear()
    start = threading.Barrier(3)

    def ask_bad():
        start.wait()
        try:
            programs.program("test.workers.broken", bad, (jnp.ones(2),), {})
        except ValueError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=ask_bad) for _ in range(3)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(errors) == 3
    programs.forget()


def test_a_program_asked_for_without_processes_is_prepared_in_a_thread(tmp_path, monkeypatch):
    """``prefetch(..., processes=False)`` (targets' scan programs): a thread of this process
    prepares the program even where a worker would be started (workers available, a thread
    already busy, the program not stored); the same call without it starts a worker."""
    import threading

    import jax

    from jaxrna import compile_workers, programs

    monkeypatch.setenv("JAXRNA_COMPILE_PROCESSES", "2")
    monkeypatch.setattr(programs, "local_busy", lambda: True)
    started, threaded = [], []
    monkeypatch.setattr(compile_workers, "_start", lambda spec, future: started.append(spec["name"]))
    monkeypatch.setattr(programs, "prefetch",
                        lambda name, *a, **k: threaded.append((name, threading.current_thread())))
    programs.use_disk(str(tmp_path))
    try:
        spec = (jax.ShapeDtypeStruct((3,), "int32"),)
        compile_workers.prefetch("test.workers.thread", "jaxrna.compile_workers:_example", spec,
                                 {}, cpu_store=True, processes=False)
        assert started == [] and [n for n, _ in threaded] == ["test.workers.thread"]
        compile_workers.prefetch("test.workers.process", "jaxrna.compile_workers:_example", spec,
                                 {}, cpu_store=True)
        assert started == ["test.workers.process"]
    finally:
        programs.use_disk(None)
        programs.forget()


def test_a_program_started_early_is_loaded_by_the_run(tmp_path, monkeypatch):
    """:func:`jaxrna.compile_workers.submit_early` (``targets`` with energies on a cold GPU
    run, before JAX is imported): the worker works out the device energy engine's program
    itself, compiles and stores it; the run's later prefetch of that program waits for the
    worker and the run loads the executable (nothing compiled here), which gives the energies
    of the CPU engine."""
    from jaxrna import compile_workers, programs, stages
    from jaxrna.targets.energy import CpuEngine, DeviceEngine, encode, kcal, special_hairpins
    from jaxrna.targets.prefetch import SOURCES, energy_program

    compile_workers.shutdown()
    monkeypatch.setenv("JAXRNA_COMPILE_PROCESSES", "1")
    programs.use_disk(str(tmp_path))
    try:
        early = compile_workers.submit_early(
            "targets.energy.fold_batch", "jaxrna.targets.prefetch:energy_program_here",
            programs.disk_dir(), platform="cpu", cpu_store=True)
        assert early is not None
        device = programs.default_device()
        engine = DeviceEngine([device])
        name, args, static = energy_program(engine, device)
        compile_workers.prefetch(name, SOURCES[name], args, static, device, cpu_store=True)
        before = dict(stages.counts())
        run = programs.program(name, compile_workers.resolve(SOURCES[name]), args, static,
                               device, cpu_store=True)
        report = early.result(timeout=600)
        assert "error" not in report, report
        assert report["key"] == programs.program_key(name, args, static, device)
        after = stages.counts()
        assert after.get("executables_loaded", 0) == before.get("executables_loaded", 0) + 1
        strings = ["GGGGAAAACCCCXXXXXXUUUUGGGG", "ACGUACGUAAAACGUACGU", "GCGCGCAAAGCGCGC"]
        inputs = encode(strings)
        size = engine.batch_rows(device.platform, device)
        _, call_args = engine.call(inputs, special_hairpins(inputs), list(range(len(strings))),
                                   static["length"], size, device.platform)
        got = kcal(run(*call_args)[:len(strings)]).tolist()
        assert got == CpuEngine().energies(strings)
    finally:
        compile_workers.shutdown()
        programs.use_disk(None)
        programs.forget()


def test_targets_starts_its_energy_program_early_only_when_it_will_compile_it(tmp_path,
                                                                             monkeypatch):
    """The CLI's rule (:func:`jaxrna.cli.targets._energy_program_early`): with energies from
    the device engine, on a GPU (possible), a scan not left to the CPU and a trusted store
    holding no executable."""
    import argparse

    from jaxrna.cachetrust import EXECUTABLES
    from jaxrna.cli import targets as cli_targets
    from jaxrna.targets.scoring import ScanParams

    asked = []
    monkeypatch.setattr("jaxrna.compile_workers.submit_early",
                        lambda name, derive, store, **kw: asked.append((name, derive, store)) or 1)
    cache = tmp_path / "cache"
    monkeypatch.setenv("JAXRNA_CACHE_DIR", str(cache))
    monkeypatch.delenv("JAXRNA_ENERGY_ENGINE", raising=False)
    monkeypatch.setattr("jaxrna.runtime.gpu_possible", lambda: True)

    def ns(**kw):
        return argparse.Namespace(**{"energy_engine": None, "backend": "auto", **kw})

    early, big, small = cli_targets._energy_program_early, 1e12, 1e3
    assert not early(ns(), ScanParams(no_energy=True), big)
    assert not early(ns(energy_engine="cpu"), ScanParams(), big)
    assert not early(ns(backend="cpu"), ScanParams(), big)
    assert not early(ns(), ScanParams(), small)
    assert asked == []
    assert early(ns(), ScanParams(), big)
    assert asked == [("targets.energy.fold_batch", "jaxrna.targets.prefetch:energy_program_here",
                      str(cache / EXECUTABLES))]
    assert early(ns(backend="gpu", energy_engine="device"), ScanParams(), small)
    (cache / EXECUTABLES).mkdir(exist_ok=True)
    (cache / EXECUTABLES / "x.bin").write_bytes(b"")          # a warm store: no worker
    assert not early(ns(), ScanParams(), big) and len(asked) == 2
    monkeypatch.setattr("jaxrna.runtime.gpu_possible", lambda: False)
    (cache / EXECUTABLES / "x.bin").unlink()
    assert not early(ns(), ScanParams(), big) and len(asked) == 2


def test_the_early_worker_takes_no_pallas_probe(monkeypatch):
    """The program an early worker works out (``energy_program_here``) assumes a Pallas
    interior builds rather than compiling the tiny probe kernel first (a program of its own on
    that worker's path); the run's own engine still probes."""
    import jax

    from jaxrna.energy import fill, mfe_programs
    from jaxrna.targets import prefetch
    from jaxrna.targets.energy import DeviceEngine

    probed = []
    monkeypatch.setattr(fill, "interior_mode", lambda platform, length: "pallas")
    monkeypatch.setattr(mfe_programs, "pallas_builds",
                        lambda kernel, interpret=False: probed.append(kernel) or True)
    device = jax.devices()[0]
    source, args, static = prefetch.energy_program_here(device)
    assert probed == [] and static["interior"] == "pallas"
    prefetch.energy_program(DeviceEngine([device]), device)
    assert probed == [mfe_programs.INTERIOR_KERNEL]
