"""Where one ``jaxrna`` process waits: a timeline of its compilations, store loads and saves,
and the main thread's first entry into each stage, on stderr.

    python bench/cli_timeline.py fold --model turner seqs.fa -q -o out.txt 2> timeline.txt
    JAXRNA_CACHE_DIR=$(mktemp -d) python bench/cli_timeline.py targets m.fa u.fa --no-energy -q -o o

Runs the CLI in this process (as ``jaxrna ARGS...``) with JAX's compile log on
(``JAX_LOG_COMPILES``); each line is ``TL <ms since this script started> <thread> <event>``:
JAX's "Finished tracing / jaxpr to MLIR / XLA compilation" messages, ``load <key> ok|none``
and ``saved <key>`` for jaxrna's store of executables (:mod:`jaxrna.programs`), ``program
<name> ready after <s>`` for every :func:`jaxrna.programs.program` call (in the thread that
waited), ``stage <name> first`` (:mod:`jaxrna.stages`) and ``leave`` (the run's end). Compile
workers (:mod:`jaxrna.compile_workers`) log their compilations without times. The twentieth
session's timelines (BENCHMARKS.md) were taken with it.

``JAXRNA_TL_PROFILE=N`` runs the CLI under JAX's profiler and prints, at the run's end, the N
events of the whole run with the longest summed durations (``TL <ms> profile <s> <count> x
<name>``; Python frames left out; events of several threads add up): where a cold run's
compilations spend their time (XLA's passes, LLVM, ptxas, Triton), phase by phase.

``JAXRNA_TL_SAMPLE=MS`` also samples the main thread's stack every MS milliseconds and prints
``TL <ms> sample <innermost jaxrna frame> | <innermost frame>`` whenever the pair changes
(where a run spends the seconds before its first program is asked for); with
``JAXRNA_TL_SAMPLE_ALL=1`` every thread's, and ``late <ms>`` where the sampler woke late (some
thread held the interpreter's lock).
"""

from __future__ import annotations

import contextlib
import logging
import os
import runpy
import sys
import threading
import time

T0 = time.perf_counter()


def say(msg: str) -> None:
    name = threading.current_thread().name[:20]
    sys.stderr.write(f"TL {(time.perf_counter() - T0) * 1000:8.0f} {name:20s} {msg}\n")
    sys.stderr.flush()


class _Format(logging.Formatter):
    def format(self, record):
        name = threading.current_thread().name[:20]
        return f"TL {(time.perf_counter() - T0) * 1000:8.0f} {name:20s} {record.getMessage()[:150]}"


def install() -> None:
    """Hook the timeline into JAX's logging and jaxrna's program store and stages."""
    os.environ.setdefault("JAX_LOG_COMPILES", "1")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Format())
    logging.getLogger().addHandler(handler)
    import jaxrna.programs as programs
    import jaxrna.stages as stages
    from jaxrna.io import cleanup

    save, load, program, stage, leave = (programs._save, programs._load, programs.program,
                                         stages.stage, cleanup.leave)

    def timed_save(path, compiled):
        t = time.perf_counter()
        save(path, compiled)
        say(f"saved {os.path.basename(path)[:12]} in {time.perf_counter() - t:.3f}")

    def timed_load(path, device):
        t = time.perf_counter()
        got = load(path, device)
        say(f"load {os.path.basename(path)[:12]} {'ok' if got else 'none'} in "
            f"{time.perf_counter() - t:.3f}")
        return got

    def timed_program(name, *args, **kwargs):
        t = time.perf_counter()
        got = program(name, *args, **kwargs)
        say(f"program {name} ready after {time.perf_counter() - t:.3f}")
        return got

    seen: set[str] = set()

    @contextlib.contextmanager
    def first_stage(name):
        if name not in seen and threading.current_thread() is threading.main_thread():
            seen.add(name)
            say(f"stage {name} first")
        with stage(name):
            yield

    def timed_leave(status):
        say("leave")
        if _profile_dir is not None:
            profile_summary(_profile_dir, int(os.environ["JAXRNA_TL_PROFILE"]))
        leave(status)

    programs._save, programs._load, programs.program = timed_save, timed_load, timed_program
    stages.stage, cleanup.leave = first_stage, timed_leave


_profile_dir: str | None = None


def profiler_options():
    """JAX profiler options for compile phases: Python's tracer off (its frames would fill the
    trace's event cap)."""
    import jax

    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    return options


def longest_events(where: str, top: int) -> list[tuple[float, int, str]] | None:
    """``(seconds, count, name)`` of the ``top`` events of the profile written under
    ``where``, by summed duration (Python frames left out; events of several threads add up),
    None where no profile was written (also used by ``bench_energy_programs.py --phases``)."""
    import collections
    import glob
    import gzip
    import json

    found = glob.glob(os.path.join(where, "**", "perfetto_trace.json.gz"), recursive=True)
    if not found:
        return None
    with gzip.open(found[-1]) as fh:
        data = json.load(fh)
    events = data["traceEvents"] if isinstance(data, dict) else data
    total, count = collections.Counter(), collections.Counter()
    for e in events:
        if e.get("ph") == "X" and not str(e.get("name", "")).startswith("$"):
            total[e["name"]] += e.get("dur", 0)
            count[e["name"]] += 1
    return [(t / 1e6, count[name], name) for name, t in total.most_common(top)]


def start_profile() -> None:
    """Start JAX's profiler (``JAXRNA_TL_PROFILE``) into a fresh directory."""
    global _profile_dir
    import tempfile

    import jax

    _profile_dir = tempfile.mkdtemp(prefix="jaxrna-tl-profile-")
    jax.profiler.start_trace(_profile_dir, create_perfetto_trace=True,
                             profiler_options=profiler_options())


def profile_summary(where: str, top: int) -> None:
    """Stop the profiler and print the ``top`` events by summed duration."""
    import jax

    jax.profiler.stop_trace()
    events = longest_events(where, top)
    if events is None:
        say("profile: no trace written")
        return
    for seconds, count, name in events:
        say(f"profile {seconds:7.3f} s {count:6d} x {name[:100]}")


def _frame_name(frame) -> str:
    code = frame.f_code
    return f"{code.co_filename.split('site-packages/')[-1].split('/jaxrna/')[-1]}:{frame.f_lineno} {code.co_name}"


def _where(frame) -> tuple[str | None, str]:
    """(innermost jaxrna frame, innermost frame) of a thread's stack."""
    inner, f = _frame_name(frame), frame
    while f is not None:
        if "/jaxrna/" in f.f_code.co_filename and "cli_timeline" not in f.f_code.co_filename:
            return _frame_name(f), inner
        f = f.f_back
    return None, inner


def sample(every_ms: float, every_thread: bool = False) -> None:
    """Print where the main thread is (``every_thread``: every thread), every ``every_ms`` ms,
    when it moved (a daemon thread); ``late <ms>`` when the sampler itself woke more than
    three periods late (a thread held the interpreter's lock that long)."""
    main = threading.main_thread().ident

    def run():
        last: dict = {}
        names = {}
        while True:
            t = time.perf_counter()
            time.sleep(every_ms / 1000)
            late = (time.perf_counter() - t) * 1000 - every_ms
            if late > 3 * every_ms:
                say(f"late {late:.0f}")
            frames = sys._current_frames()
            if main not in frames:
                return
            if every_thread:
                names = {th.ident: th.name[:20] for th in threading.enumerate()}
            for ident, frame in frames.items():
                if ident == threading.get_ident() or (ident != main and not every_thread):
                    continue
                key = _where(frame)
                if key != last.get(ident):
                    label = "" if ident == main else f"[{names.get(ident, ident)}] "
                    say(f"sample {label}{key[0]} | {key[1]}")
                    last[ident] = key

    threading.Thread(target=run, name="tl-sampler", daemon=True).start()


if __name__ == "__main__":
    say("start")
    if os.environ.get("JAXRNA_TL_SAMPLE"):
        sample(float(os.environ["JAXRNA_TL_SAMPLE"]),
               os.environ.get("JAXRNA_TL_SAMPLE_ALL", "") not in ("", "0"))
    install()
    if os.environ.get("JAXRNA_TL_PROFILE"):
        start_profile()
    sys.argv = ["jaxrna"] + sys.argv[1:]
    runpy.run_module("jaxrna", run_name="__main__", alter_sys=True)
