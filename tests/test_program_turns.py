"""Issue 26: how a cold run's programs reach their first call sooner.

- :func:`jaxrna.programs.prefetch`'s threads lower their programs one at a time in the order
  they were asked for (``_lowering_turn``: a ticket each, :mod:`jaxrna.turns`), while their
  compilations run side by side; targets hands its longest to compile (the refill) first.
- With :func:`jaxrna.store_writes.save_in_background` (the CLI's setting) a compiled program is
  handed out before its executable is written; loading or asking whether it is stored waits for
  the write, and :func:`jaxrna.store_writes.finish_all` waits for all.
"""

from __future__ import annotations

import os
import threading
import time

import pytest


def test_turns_go_in_ticket_order_whatever_the_order_threads_arrive():
    """Six threads with tickets 1..6 reach their turns in reverse order while this thread
    holds ticket 0; they pass in ticket order; a ticket given up lets later ones pass; a
    holder may take its turn again."""
    from jaxrna.turns import Turns

    turns = Turns()
    order: list[int] = []
    tickets = [turns.ticket() for _ in range(7)]
    threads = []
    for k in reversed(range(1, 7)):
        t = threading.Thread(target=_take, args=(turns, tickets[k], order, k))
        t.start()
        threads.append(t)
        time.sleep(0.01)
    assert order == []                     # all wait for ticket 0
    with turns.turn(tickets[0]):
        with turns.turn(tickets[0]):       # the holder again: no deadlock
            order.append(0)
    for t in threads:
        t.join(5)
    assert order == [0, 1, 2, 3, 4, 5, 6]
    assert turns.waiting() == 0
    late = turns.ticket(), turns.ticket()
    turns.done(late[0])                    # given up without its turn
    with turns.turn(late[1]):
        order.append(7)
    assert order[-1] == 7 and turns.waiting() == 0


def _take(turns, ticket, order, k):
    with turns.turn(ticket):
        order.append(k)
        time.sleep(0.002)


def test_prefetch_threads_lower_one_at_a_time_in_the_order_asked(monkeypatch):
    """Four programs prefetched on a (pretended) many-core host: their lowerings never overlap
    and start in the order of the prefetch calls."""
    import jax
    import jax.numpy as jnp

    from jaxrna import programs

    monkeypatch.setattr(programs, "cores", lambda: 16)
    monkeypatch.setattr(programs, "_pool", None)
    spans: list[tuple[str, float, float]] = []
    lock = threading.Lock()

    def make(tag: str):
        def f(x):
            start = time.perf_counter()
            time.sleep(0.05)          # tracing time, under the turn
            with lock:
                spans.append((tag, start, time.perf_counter()))
            return x * 2 + len(tag)
        return jax.jit(f)

    real_program = programs.program

    def slow_to_start(name, *a, **k):     # the first asked for reaches its lowering last
        time.sleep(0.1 * (3 - int(name[-1])))
        return real_program(name, *a, **k)

    monkeypatch.setattr(programs, "program", slow_to_start)

    device = jax.devices()[0]
    tags = [f"turns.p{k}" for k in range(4)]
    for tag in tags:
        programs.prefetch(tag, make(tag), (jax.ShapeDtypeStruct((3 + len(tag),), jnp.float32),),
                          {}, device, always=True)
    for tag in tags:
        programs._wait(programs.program_key(tag, (jax.ShapeDtypeStruct((3 + len(tag),), jnp.float32),),
                                            {}, device))
    assert [s[0] for s in sorted(spans, key=lambda s: s[1])] == tags
    ordered = sorted(spans, key=lambda s: s[1])
    for (_, _, end), (_, start, _) in zip(ordered, ordered[1:]):
        assert start >= end, "two programs were lowered at once"
    programs._pool.shutdown(wait=True)


def test_a_prefetch_that_loads_gives_its_turn_up(monkeypatch, tmp_path):
    """The first program asked for is in the store (its load held back here), the second must
    be lowered: the second's lowering does not wait for the first's load."""
    import jax
    import jax.numpy as jnp

    from jaxrna import programs

    monkeypatch.setattr(programs, "cores", lambda: 16)
    monkeypatch.setattr(programs, "_pool", None)
    programs.use_disk(str(tmp_path))
    try:
        device = jax.devices()[0]
        spec = (jax.ShapeDtypeStruct((6,), jnp.float32),)
        first = jax.jit(lambda x: x - 1)
        programs.program("turns.stored", first, spec, {}, device, cpu_store=True)   # stored
        programs.forget()
        release, lowered = threading.Event(), threading.Event()
        real_load = programs._load

        def slow_load(path, dev):
            if os.path.exists(path):    # the stored program's load (not the other's look)
                release.wait(10)
            return real_load(path, dev)

        monkeypatch.setattr(programs, "_load", slow_load)

        def second(x):
            lowered.set()
            return x + 2

        programs.prefetch("turns.stored", first, spec, {}, device, cpu_store=True, always=True)
        programs.prefetch("turns.fresh", jax.jit(second), spec, {}, device, cpu_store=True,
                          always=True)
        assert lowered.wait(10), "the second program waited for the first's load"
        release.set()
        for name, fn in (("turns.stored", first), ("turns.fresh", jax.jit(second))):
            run = programs.program(name, fn, spec, {}, device, cpu_store=True)
            assert run(jnp.zeros(6)).tolist() == ([-1.0] * 6 if name == "turns.stored" else [2.0] * 6)
        programs._pool.shutdown(wait=True)
    finally:
        programs.use_disk(None)


def test_saved_in_background_then_loaded_and_stored(monkeypatch, tmp_path):
    """A program compiled with background saves is returned before its file is written (the
    write held back here); ``stored`` and a load for another process wait for the write."""
    import jax
    import jax.numpy as jnp

    from jaxrna import programs, store_writes

    monkeypatch.setattr(programs, "_disk", None)
    programs.use_disk(str(tmp_path))
    release = threading.Event()
    real_save = programs._save
    written: list[str] = []

    def slow_save(path, compiled):
        release.wait(10)
        real_save(path, compiled)
        written.append(path)

    monkeypatch.setattr(programs, "_save", slow_save)
    before = store_writes.save_in_background(True)
    try:
        f = jax.jit(lambda x: x + 41)
        device = jax.devices()[0]
        args = (jax.ShapeDtypeStruct((5,), jnp.int32),)
        run = programs.program("bg.add", f, args, {}, device, cpu_store=True)
        assert run(jnp.ones(5, jnp.int32)).tolist() == [42] * 5     # usable before the write
        assert written == []
        files = os.listdir(tmp_path / "executables") if (tmp_path / "executables").exists() else []
        assert not [n for n in files if n.endswith(".bin")]
        threading.Timer(0.2, release.set).start()
        assert programs.stored("bg.add", args, {}, device, cpu_store=True)   # waited for it
        assert len(written) == 1
        store_writes.finish_all()
        assert store_writes.pending() == []
    finally:
        release.set()
        store_writes.finish_all()
        store_writes.save_in_background(before)
        programs.use_disk(None)


def test_finish_saves_waits_for_every_write(monkeypatch, tmp_path):
    import jax
    import jax.numpy as jnp

    from jaxrna import programs, store_writes

    programs.use_disk(str(tmp_path))
    real_save = programs._save

    def slow_save(path, compiled):
        time.sleep(0.2)
        real_save(path, compiled)

    monkeypatch.setattr(programs, "_save", slow_save)
    before = store_writes.save_in_background(True)
    try:
        device = jax.devices()[0]
        for k in range(3):
            programs.program(f"bg.mul{k}", jax.jit(lambda x, k=k: x * (k + 2)),
                             (jax.ShapeDtypeStruct((4,), jnp.float32),), {}, device, cpu_store=True)
        store_writes.finish_all()
        bins = [n for n in os.listdir(tmp_path / "executables") if n.endswith(".bin")]
        assert len(bins) == 3
    finally:
        store_writes.save_in_background(before)
        programs.use_disk(None)


def test_targets_prefetch_hands_the_refill_first(monkeypatch):
    """:func:`jaxrna.targets.prefetch.prefetch_chunk` asks for the refill (the longest to
    compile) before the scan, the tiling and the lane packing, which a block needs first."""
    from jaxrna import compile_workers
    from jaxrna.targets import prefetch
    from jaxrna.targets.engine import Engine, prepare_query
    from jaxrna.targets.lanes import Chunk, ChunkRun
    from jaxrna.targets.scoring import ScanParams
    from jaxrna.targets.select import TargetText

    asked: list[str] = []
    monkeypatch.setattr(compile_workers, "prefetch",
                        lambda name, *a, **k: asked.append(name))
    p = ScanParams(no_energy=True)
    engine = Engine(p, host_scan=False)
    qs = [prepare_query("m", "", "GUGAGAUCAUUUUGAAAGCUG", p)]
    run = ChunkRun(engine, qs, Chunk(TargetText.from_sequences(["ACGU" * 50]), qs[0].overlap), [True])
    listed = [name for name, *_ in prefetch.chunk_programs(engine, run, engine.devices[0])]
    assert listed[0] == "targets.engine._pack_lanes"           # the order a block needs them
    assert prefetch.prefetch_chunk(engine, run) == len(listed)
    assert asked[0] == "targets.extract.refill_and_trace"
    assert sorted(asked) == sorted(listed)
    assert asked == sorted(asked, key=prefetch.COMPILE_ORDER.get)


@pytest.mark.parametrize("argv", [["fold", "--sequence", "GGGGAAAACCCC", "--backend", "cpu", "-q"]])
def test_cli_turns_background_saves_off_again(argv, capsys):
    """The CLI writes in the background during its run and leaves the setting as it was."""
    from jaxrna import store_writes
    from jaxrna.cli import main

    assert store_writes.save_in_background(False) is False
    assert main(argv) == 0
    assert store_writes.save_in_background(False) is False
    assert store_writes.pending() == []


_JAX_CACHE_PROBE = r"""
import os, sys
import jax
import jax.numpy as jnp
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
from jaxrna import programs

def entries():
    return sum(len(files) for _, _, files in os.walk(sys.argv[1]))

programs.use_disk(sys.argv[2])
device = jax.devices()[0]
spec = (jax.ShapeDtypeStruct((7,), jnp.int32),)
stored = programs.program("t.stored", jax.jit(lambda x: x * 3 + 1), spec, {}, device,
                          cpu_store=True)
print(entries(), stored(jnp.arange(7, dtype=jnp.int32)).tolist()[2])
plain = jax.jit(lambda x: x * 5 - 2)
print(entries(), plain(jnp.arange(7, dtype=jnp.int32)).tolist()[2])
"""


def test_a_program_the_store_keeps_writes_no_jax_cache_entry(tmp_path):
    """A program compiled for jaxrna's store is not serialized a second time into JAX's
    persistent cache (``executable_files.no_jax_cache_entry``), while a plain ``jax.jit`` program of
    the same process still is; the stored program is the one a later process loads."""
    import subprocess
    import sys

    jax_cache, store = tmp_path / "jax", tmp_path / "store"
    jax_cache.mkdir()
    run = subprocess.run([sys.executable, "-c", _JAX_CACHE_PROBE, str(jax_cache), str(store)],
                         capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert run.returncode == 0, run.stderr[-2000:]
    (after_stored, value), (after_plain, plain) = (map(int, line.split())
                                                   for line in run.stdout.split("\n")[:2])
    assert value == 7 and plain == 8
    assert after_stored == 0                 # no JAX entry for the program the store keeps
    assert after_plain > 0                   # JAX's cache works in this process
    assert [n for n in os.listdir(store / "executables") if n.endswith(".bin")]
