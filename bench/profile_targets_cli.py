"""Where the wall time of one ``jaxrna targets`` process goes: the CLI's own ``main`` run in
this fresh process with a timeline (``bench/timeline.py``) given to the scan engine and a stall
probe (``bench_targets.StallProbe``), printed as seconds since this process started (the
interpreter's start-up included, read from ``/proc``). Run it twice with the same
``JAXRNA_CACHE_DIR`` for a warm run; the arguments are the CLI's.

    JAXRNA_CACHE_DIR=/tmp/c PYTHONPATH=. python3 bench/profile_targets_cli.py \\
        MIRNAS UTRS --no-energy --quiet -o /tmp/out.txt [--json-out tl.json]

``--workers N``, ``--threads N`` and ``--energy-threads N`` (experiments) set the host worker
processes, the scan's device threads per GPU and the energy folding threads per GPU instead of
the defaults.

The summary says when the first target chunk was ready, when the device blocks ran, when the
host jobs ran and how long they waited, when the last block was written, and when ``main``
returned; compare with the wall time of a plain ``python -m jaxrna targets`` run.
"""

from __future__ import annotations

import json
import os
import sys
import time

T_MAIN = time.perf_counter()
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)


def process_age() -> float:
    """Seconds since this process was started (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/stat") as fh:
            start = int(fh.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/uptime") as fh:
            return float(fh.read().split()[0]) - start
    except (OSError, ValueError, IndexError):
        return 0.0


def dirty_mb() -> float:
    """The kernel's dirty plus under-writeback page cache, MB (Linux; -1 elsewhere): output
    still on its way to disk, which a following run's writes may wait for."""
    try:
        with open("/proc/meminfo") as fh:
            info = dict(line.split(":", 1) for line in fh)
        return sum(int(info[k].split()[0]) for k in ("Dirty", "Writeback")) / 1024
    except (OSError, KeyError, ValueError):
        return -1.0


def time_energy_calls() -> dict:
    """Split the energy engine's device calls (summed over its threads): building the
    arguments on the host (``call``), starting the program (``launch``, asynchronous), and
    the rest of ``fold`` (waiting for the device, copying the energies back)."""
    from jaxrna.targets.energy import DeviceEngine

    split = {"calls": 0, "host arguments": 0.0, "launch": 0.0, "fold": 0.0}
    real_call, real_launch, real_fold = DeviceEngine.call, DeviceEngine._launch, DeviceEngine.fold

    def timed(name, fn):
        def run(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                split[name] += time.perf_counter() - t0
        return run

    def fold(self, *args, **kwargs):
        split["calls"] += 1
        return timed("fold", real_fold)(self, *args, **kwargs)

    DeviceEngine.call = timed("host arguments", real_call)
    DeviceEngine._launch = timed("launch", real_launch)
    DeviceEngine.fold = fold
    return split


def main() -> int:
    origin = time.perf_counter() - process_age()       # perf_counter time of the exec
    argv = sys.argv[1:]
    def option(name):                                  # this script's own options
        if name not in argv:
            return None
        k = argv.index(name)
        value = argv[k + 1]
        del argv[k:k + 2]
        return value

    json_out = option("--json-out")
    workers, threads = option("--workers"), option("--threads")   # experiments
    energy_threads = option("--energy-threads")
    marks = {"bench module": T_MAIN - origin}
    import jaxrna.targets.api as api
    from bench_targets import StallProbe, timeline_summary
    from jaxrna.cli import main as cli_main
    from timeline import Timeline

    marks["cli imported"] = time.perf_counter() - origin
    timeline = Timeline()
    real = api.Engine

    class TimedEngine(real):                           # the CLI's engine, with a timeline
        def __init__(self, params, **options):
            options.setdefault("timeline", timeline)
            if threads:
                options["threads_per_device"] = int(threads)
            super().__init__(params, **options)

    api.Engine = TimedEngine
    real_scan, real_replace = api.write_scan, os.replace

    def write_scan(*args, **kwargs):                   # when the scan itself ends
        try:
            return real_scan(*args, **kwargs)
        finally:
            marks["write_scan returned"] = time.perf_counter() - origin

    def replace(src, dst, **kwargs):                   # the output's rename into place
        marks["rename start"] = time.perf_counter() - origin
        try:
            return real_replace(src, dst, **kwargs)
        finally:
            marks["rename end"] = time.perf_counter() - origin

    api.write_scan, os.replace = write_scan, replace
    if energy_threads:
        from jaxrna.targets.output import DeviceEnergies

        DeviceEnergies.THREADS_PER_DEVICE = int(energy_threads)
    energy_split = time_energy_calls()
    if workers:
        import jaxrna.pipeline

        jaxrna.pipeline.default_workers = lambda: int(workers)
    marks["dirty MB at start"] = dirty_mb()
    probe = StallProbe(timeline)
    status = cli_main(["targets"] + argv)
    marks["main returned"] = time.perf_counter() - origin
    marks["dirty MB at end"] = dirty_mb()
    stalls = probe.stop()
    from jaxrna import stages

    events = timeline.as_records(origin)
    print(f"process: {', '.join(f'{k} {v:.3f}' for k, v in marks.items())} (s since exec; MB)")
    print(timeline_summary(events) + "\n  " + stalls)
    if energy_split["calls"]:
        print("  energy calls, thread seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in energy_split.items()))
    folds = sorted((e["t"], e["run"], e["rows"]) for e in events if e["event"] == "fold")
    if folds:                                          # the energy engine's device calls
        busy = sum(r for _, r, _ in folds)
        print(f"  energy: {len(folds)} device calls, {folds[0][0]:.3f}-{folds[-1][0] + folds[-1][1]:.3f} s, "
              f"{sum(n for _, _, n in folds):,} strings, median call {sorted(r for _, r, _ in folds)[len(folds) // 2] * 1e3:.0f} ms, "
              f"thread-busy {busy:.2f} s")
    print("stages: " + ", ".join(f"{k} {v:.2f}" for k, v in stages.report()["stages"].items()))
    if json_out:
        with open(json_out, "w") as fh:
            json.dump({"marks": marks, "events": events, "stages": stages.report()}, fh)
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
