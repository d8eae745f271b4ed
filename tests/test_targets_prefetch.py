"""Issue 26 for ``jaxrna targets``: a run's programs are compiled side by side at its start
(:mod:`jaxrna.targets.prefetch`, through :mod:`jaxrna.compile_workers`).

The prefetched programs must be the very programs the scan calls (same program keys), else a
thread compiles something nobody uses: checked in-process against the keys of the calls
themselves (here the CPU's scan: in C with its tile-count program where a C compiler works; the
Pallas scan's in interpret mode on the programs of tests/test_targets_gpu.py's engine test), and
in whole CLI processes on the CPU with ``JAXRNA_COMPILE_PROCESSES=2`` against ``=0`` (same
output, the same programs compiled, and a warm run that compiles nothing). The scan's programs
are prepared in threads even where compile workers are available
(:func:`jaxrna.targets.prefetch.prefetch_chunk`); only the ``device`` energy engine's program
goes to a worker.
"""

from __future__ import annotations

import numpy as np
import pytest

from compile_count import run_counted
from test_compile_targets import _data, _hits


def _recorded_keys(monkeypatch):
    """Record the key of every :func:`jaxrna.programs.program` call from now on."""
    from jaxrna import programs

    seen: list[tuple[str, str]] = []
    real = programs.program

    def program(name, jitted, args, static=None, device=None, kwargs=None, cpu_store=False):
        dev = device if device is not None else programs.default_device()
        key = programs.program_key(name, (args, kwargs) if kwargs else args, dict(static or {}), dev)
        seen.append((name, key))
        return real(name, jitted, args, static, device, kwargs, cpu_store)

    monkeypatch.setattr(programs, "program", program)
    return seen


def _planted(rng, mirnas, n_targets, length):
    comp = str.maketrans("ACGU", "UGCA")
    letters = np.array(list("ACGU"))
    out = []
    for k in range(n_targets):
        s = list(rng.choice(letters, size=length))
        site = mirnas[k % len(mirnas)].translate(comp)[::-1]
        s[40:40 + len(site)] = list(site)
        out.append("".join(s))
    return out


def test_prefetched_programs_are_the_programs_the_scan_calls(monkeypatch):
    """Every program a chunk's scan calls (two heights, hits in both) is one that
    :func:`chunk_programs` lists, with the same key, and no listed one goes unused. (The
    Pallas kernels' case, blocks of two miRNAs, is
    ``test_targets_gpu.py::test_pallas_engine_interpret_matches_xla_engine``, on the programs
    that test compiles: a scan of its own here compiled six Pallas programs in interpret
    mode, ~25 CPU-seconds, CI time.)"""
    from jaxrna import programs
    from jaxrna.targets.engine import Engine, prepare_query
    from jaxrna.targets.lanes import Chunk, ChunkRun
    from jaxrna.targets.prefetch import chunk_programs
    from jaxrna.targets.scoring import ScanParams
    from jaxrna.targets.select import TargetText

    monkeypatch.setenv("JAXRNA_COMPILE_PROCESSES", "0")
    programs.forget()
    rng = np.random.default_rng(7)
    mirnas = ["UGAGGUAGUAGGUUGUAUAGUU", "UAGCACCAUCUGAAAUCGGUUAUAU", "UGAGAUCAUUUUGAAA"]
    params = ScanParams(no_energy=True)
    queries = [prepare_query(f"m{k}", "", m, params) for k, m in enumerate(mirnas)]
    assert len({q.height for q in queries}) == 3          # three heights: two classes
    text = TargetText.from_sequences(_planted(rng, mirnas, 40, 300))
    engine = Engine(params)
    engine.prefetch = False
    seen = _recorded_keys(monkeypatch)
    found = engine.scan_chunk(queries, text)
    assert {k for k, _ in found} == {0, 1, 2}             # hits for every miRNA
    called = {key for name, key in seen if name.startswith("targets.")}
    chunk = Chunk(text, engine.overlap(queries), engine.max_lanes, engine.lane_columns)
    run = ChunkRun(engine, queries, chunk, [True] * len(queries))
    device = engine.devices[0]
    listed = {programs.program_key(name, args, static, device)
              for name, args, static in chunk_programs(engine, run, device)}
    assert listed == called
    # 2 + 2 per height class (engine.py's bound): two classes of these heights on a CPU; the
    # GPU's blocks group them in one (H200: 4 programs); with the scan in C (CPUs), the tile
    # counts once instead of a scan per class: 3 + 1 per class
    classes = (len(listed) - 3) if engine.host_scan else (len(listed) - 2) / 2
    assert classes in (1, 2), (len(listed), engine.host_scan)


def test_the_energy_program_prefetched_is_the_one_called():
    """The ``device`` energy engine's batch program: the listed key is the call's."""
    import jax

    from jaxrna import programs
    from jaxrna.targets.energy import DeviceEngine, encode, special_hairpins
    from jaxrna.targets.prefetch import energy_program

    device = jax.devices("cpu")[0]
    engine = DeviceEngine([device])
    inputs = encode(["gtCGAAAGTTTTACTAGAGTgXXXXXXXtACTCTAGTTATTACTATaaat", "ACGUXXXXXXXACGU"])
    size = engine.batch_rows("cpu", device)
    program, args = engine.call(inputs, special_hairpins(inputs), np.arange(len(inputs)), 64, size)
    called = programs.program_key("targets.energy.fold_batch", args, dict(program.keywords), device)
    name, specs, static = energy_program(engine, device)
    assert programs.program_key(name, specs, static, device) == called


@pytest.mark.slow  # whole cold processes; the keys test stays in the fast subset
@pytest.mark.parametrize("devices", [None, pytest.param(2, marks=pytest.mark.slow, id="2-devices")])
def test_a_cold_run_with_compile_workers_compiles_the_same_programs(tmp_path, devices):
    """The CLI with two compile workers at hand: the same output and the same programs compiled
    as without them (none compiled twice, none for nothing: with two devices, each prepares the
    heights of the blocks it scans); a warm run then compiles nothing."""
    m, u = _data(tmp_path, "w", 1, 6, [20, 21, 22, 23, 25], 150_000)  # one of height 32: on one device
    args = ["targets", m, u, "--no-energy"]
    plain = run_counted(args, str(tmp_path / "plain"), env={"JAXRNA_COMPILE_PROCESSES": "0"},
                        devices=devices)
    cache = str(tmp_path / "workers")
    workers = run_counted(args, cache, env={"JAXRNA_COMPILE_PROCESSES": "2"}, devices=devices)
    assert _hits(plain) > 0
    assert workers.returncode == 0, workers.stderr[-2000:]
    assert workers.stdout == plain.stdout
    for key in ("executables_compiled", "programs", "compiled"):
        assert workers.counts.get(key, 0) == plain.counts.get(key, 0), (key, workers.counts,
                                                                       plain.counts)
    warm = run_counted(args, cache, env={"JAXRNA_COMPILE_PROCESSES": "2"}, devices=devices)
    assert warm.stdout == plain.stdout
    assert warm.compiled == 0 and warm.counts.get("executables_compiled", 0) == 0, warm.counts
