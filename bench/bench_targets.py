"""Benchmark ``jaxrna targets`` on the deterministic synthetic set (bench/make_targets_data.py).

Self-contained: generates the data if it is missing, then times

- ``scan``: the bulk column scan alone (cells/s of the fill, compile excluded), on one chunk;
- ``end-to-end``: ``jaxrna targets MIRNAS TARGETS --no-energy --quiet -o FILE`` as a library
  call (FASTA reading, scan, device-side extraction and traceback, sorting, filtering and
  miranda-format output written to a file, host work in worker processes), first miRNAs of the
  set against all targets unless told otherwise, and extrapolates to the whole set (time per
  miRNA is constant: every miRNA scans every target). Cells = sum of miRNA lengths x sum of
  target lengths.

    python bench/bench_targets.py                         # CPU, 8 miRNAs x 30,000 targets
    python bench/bench_targets.py --backend gpu --mirnas 2000
    python bench/bench_targets.py --backend gpu --mirnas 2000 --compare-devices 2   # 1 vs 2 GPUs
    python bench/bench_targets.py --mirnas 2000           # the whole set (hours on a CPU)

``--compare-devices N`` runs the end-to-end measurement twice, on the first device and on the
first N devices, after one warm-up run on all N (so every device has compiled), and prints the
speed-up.

Prints a short table; ``--json`` adds one machine-readable line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import make_targets_data  # noqa: E402


def tree_cpu_seconds() -> float:
    """CPU seconds of this process and of its host worker processes (Linux /proc; else this
    process only)."""
    total = time.process_time()
    try:
        from jaxrna.pipeline import _POOLS

        tick = os.sysconf("SC_CLK_TCK")
        for pool in _POOLS.values():
            for pid in list(getattr(pool, "_processes", {}) or {}):
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) / tick
    except (OSError, ValueError, IndexError):
        pass
    return total


def ensure_data(path: str) -> tuple[str, str]:
    mirnas, utrs = os.path.join(path, "mirnas.fa"), os.path.join(path, "utrs.fa")
    if not (os.path.exists(mirnas) and os.path.exists(utrs)):
        make_targets_data.main(["--out", path])
    return mirnas, utrs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=os.path.join(HERE, "data", "targets"))
    ap.add_argument("--mirnas", type=int, default=8, help="first K miRNAs of the set (default 8)")
    ap.add_argument("--devices", type=int, default=None, help="use the first N devices (default all)")
    ap.add_argument("--targets", type=int, default=None, help="first M targets (default all)")
    ap.add_argument("--backend", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--energy", action="store_true",
                    help="include the energy step (jaxrna's energy engine; see --energy-engine)")
    ap.add_argument("--energy-engine", default=None, choices=["auto", "device", "cpu", "vienna"],
                    help="with --energy: the engine (default auto: device on a GPU, cpu on a CPU); "
                         "bench/bench_targets_energy.py times whole CLI runs with energies")
    ap.add_argument("--chunk-nt", type=int, default=None)
    ap.add_argument("--kernel", default="auto", choices=["auto", "xla", "pallas"],
                    help="bulk-scan kernel (auto: Pallas on GPUs, pure JAX on CPUs)")
    ap.add_argument("--query-block", type=int, default=None,
                    help="miRNAs per bulk-scan launch (default: the engine's, 16 with Pallas)")
    ap.add_argument("--threads", type=int, default=None, help="device threads per device (default 2 on GPUs)")
    ap.add_argument("--lane-batch", type=int, default=None, help="tiles refilled per device call")
    ap.add_argument("--profile", action="store_true",
                    help="time every device stage on its own (device work no longer overlaps)")
    ap.add_argument("--host-workers", type=int, default=None,
                    help="worker processes for hit selection and text (default: cores - 1 with 4 or more)")
    ap.add_argument("--compare-devices", type=int, default=0, metavar="N",
                    help="measure end to end on 1 device and on N devices (after a warm-up on N)")
    ap.add_argument("--devices-only", action="store_true",
                    help="with --compare-devices: time the device side alone (bulk scan, extraction, "
                         "traceback, candidates fetched; no hit selection or text) on 1 and N devices")
    ap.add_argument("--switch-interval", type=float, default=None,
                    help="sys.setswitchinterval for the run (seconds; Python's default 0.005)")
    ap.add_argument("--spill", action="store_true", help="--devices-only: write the candidates to files")
    ap.add_argument("--job-mirnas", type=int, default=None, help="miRNAs per host job (default: the library's)")
    ap.add_argument("--devnull", action="store_true", help="write the report to /dev/null (no output file)")
    ap.add_argument("--keep-heap", action="store_true",
                    help="tune this process's malloc as the host workers' (jaxrna.pipeline.keep_heap)")
    ap.add_argument("--gc-off", action="store_true", help="no garbage collection during the timed runs")
    ap.add_argument("--timeline", action="store_true",
                    help="record when each block, host job and write happens (a summary is printed; "
                         "the events go to --json-out)")
    ap.add_argument("--json-out", metavar="FILE", help="also write the JSON record to FILE")
    ap.add_argument("--keep", metavar="FILE", help="keep the report here (default: a temp file)")
    ap.add_argument("--warmup", type=int, default=8,
                    help="first run this many other miRNAs (the last of the set) so the measured run "
                         "is not paying for compilation (0: measure cold)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxrna.formats.miranda import writer_for
    from jaxrna.targets.api import DEFAULT_CHUNK_NT, write_scan
    from jaxrna.targets.engine import Chunk, make_target, prepare_query, value_dtype
    from jaxrna.targets.scan import scan_lanes_words
    from jaxrna.targets.scoring import ScanParams
    from jaxrna.targets.sequences import read_records
    from timeline import Timeline

    mirna_path, utr_path = ensure_data(args.data)
    if args.keep_heap:
        from jaxrna.pipeline import keep_heap

        keep_heap()
    if args.job_mirnas:
        import jaxrna.targets.api

        jaxrna.targets.api.JOB_MIRNAS = args.job_mirnas
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    work = tempfile.mkdtemp(prefix="bench-targets-")
    sub_mirnas = os.path.join(work, "mirnas.fa")
    records = list(read_records(mirna_path))[:args.mirnas]
    with open(sub_mirnas, "w") as fh:
        fh.writelines(f">{r.id}\n{r.sequence}\n" for r in records)
    sub_utrs = utr_path
    if args.targets:
        sub_utrs = os.path.join(work, "utrs.fa")
        with open(sub_utrs, "w") as fh:
            for k, r in enumerate(read_records(utr_path)):
                if k >= args.targets:
                    break
                fh.write(f">{r.id}\n{r.sequence}\n")
    all_mirna_nt = sum(len(r) for r in read_records(mirna_path))
    n_all_mirnas = sum(1 for _ in read_records(mirna_path))
    device = jax.devices(args.backend)[0]
    params = ScanParams(no_energy=not args.energy)
    chunk_nt = args.chunk_nt or DEFAULT_CHUNK_NT

    if args.devices_only:
        return devices_only(args, records, sub_utrs, params, chunk_nt)

    with jax.default_device(device):
        # 1. the bulk scan alone, on the first chunk
        targets, size = [], 0
        for r in read_records(sub_utrs):
            targets.append(make_target(r.id, r.description, r.sequence))
            size += len(r)
            if size >= chunk_nt:
                break
        qb = args.query_block or 16
        queries = [prepare_query(r.id, r.description, r.sequence, params) for r in records[:qb]]
        chunk = Chunk(targets, max(q.overlap for q in queries))
        kernel = args.kernel if args.kernel != "auto" else ("pallas" if device.platform == "gpu" else "xla")
        if kernel == "pallas":
            from jaxrna.kernels.miranda_fill import BLOCK, WORD, scan_lanes_packed

            length = -(-chunk.lanes.shape[0] // WORD) * WORD
            width = -(-chunk.lanes.shape[1] // BLOCK) * BLOCK
            padded = np.full((length, width), 12, np.int8)
            padded[:chunk.lanes.shape[0], :chunk.lanes.shape[1]] = chunk.lanes
            lanes = jnp.asarray(padded)
            height = max(q.height for q in queries)
            tabs = [q.tables_at(height) for q in queries]
            args4 = [jnp.asarray(np.stack([t[x] for t in tabs])) for x in range(4)]
            run = lambda: scan_lanes_packed(*args4, lanes, 140).block_until_ready()  # noqa: E731
            real = sum(q.n for q in queries) * chunk.total
            padded_cells = length * width * height * len(queries)
        else:
            lanes = jnp.asarray(chunk.lanes)
            dtype = value_dtype(queries, params)
            q = queries[0]
            run = lambda: scan_lanes_words(q.profile, q.gap_open, q.gap_extend, q.seed,  # noqa: E731
                                           lanes, threshold=140, dtype=dtype).block_until_ready()
            real = q.n * chunk.total
            padded_cells = lanes.shape[0] * lanes.shape[1] * q.height
        t0 = time.perf_counter()
        run()
        compile_s = time.perf_counter() - t0
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            run()
            best = min(best, time.perf_counter() - t0)
        scan_rate = real / best
        lanes = run = None  # free the device copy

        # 2. end to end (after a warm-up run on other miRNAs: compiled shapes are then cached)
        all_devices = jax.devices(args.backend)
        n_dev = args.compare_devices or args.devices or len(all_devices)
        options = {"kernel": kernel, "query_block": args.query_block, "threads_per_device": args.threads,
                   "lane_batch": args.lane_batch, "profile": args.profile}
        warm_s = 0.0
        if args.warmup:
            # enough blocks that every device thread of every device compiles
            n_warm = (max(args.warmup, 2 * qb * n_dev * (args.threads or 3)) if kernel == "pallas"
                      else args.warmup)
            warm = os.path.join(work, "warm.fa")
            with open(warm, "w") as fh:
                fh.writelines(f">{r.id}\n{r.sequence}\n" for r in list(read_records(mirna_path))[-n_warm:])
            t0 = time.perf_counter()
            with open(os.devnull, "w") as out:
                write_scan(warm, sub_utrs, writer_for("miranda", out, no_energy=params.no_energy, quiet=True),
                           params, energy_engine=args.energy_engine, chunk_nt=chunk_nt, host_workers=args.host_workers,
                           engine_options=dict(options, devices=all_devices[:n_dev]))
            warm_s = time.perf_counter() - t0

        def end_to_end(devices):
            out_path = args.keep or os.path.join(work, "report.txt")
            timeline = Timeline(enabled=args.timeline)
            probe = StallProbe(timeline) if args.timeline else None
            if args.gc_off:
                import gc

                gc.disable()
            c0 = tree_cpu_seconds()
            m0 = time.process_time()
            t0 = time.perf_counter()
            with open(os.devnull if args.devnull else out_path, "w") as out:
                writer = writer_for("miranda", out, no_energy=params.no_energy, quiet=True)
                stats = write_scan(sub_mirnas, sub_utrs, writer, params, chunk_nt=chunk_nt,
                                   energy_engine=args.energy_engine,
                                   host_workers=args.host_workers,
                                   engine_options=dict(options, devices=devices, timeline=timeline))
            stats["e2e"] = time.perf_counter() - t0
            if probe is not None:
                stats["probe"] = probe.stop()
            if args.gc_off:
                gc.enable()
            if args.timeline:
                stats["timeline"] = timeline.as_records(t0)
                print(f"timeline, {len(devices)} device(s), {stats['e2e']:.2f} s:\n"
                      + timeline_summary(stats["timeline"]) + "\n  " + stats["probe"])
            stats["cpu_s"] = tree_cpu_seconds() - c0
            stats["main_cpu_s"] = time.process_time() - m0
            if args.devnull:
                open(out_path, "w").close()
            stats["out_bytes"] = os.path.getsize(out_path)
            with open(out_path, "rb") as fh:
                digest = hashlib.sha256()
                for block in iter(lambda: fh.read(1 << 24), b""):
                    digest.update(block)
            stats["sha256"] = digest.hexdigest()[:16]
            if not args.keep:
                os.unlink(out_path)
            return stats

        runs = {}
        if args.compare_devices:
            runs[1] = end_to_end(all_devices[:1])
        runs[n_dev] = end_to_end(all_devices[:n_dev])
        stats = runs[n_dev]
        e2e, cpu_s, out_bytes = stats["e2e"], stats["cpu_s"], stats["out_bytes"]

    cells = stats["cells"]
    per_mirna = e2e / max(1, stats["mirnas"])
    full_cells = all_mirna_nt * stats["target_nt"]
    full_time = e2e * full_cells / cells
    rows = [
        ("machine", f"{platform.node()} {device.device_kind} ({os.cpu_count()} CPUs)"),
        ("subset", f"{stats['mirnas']} miRNAs x {stats['targets']} targets, {stats['target_nt']:,} target nt"),
        ("scan only", f"{scan_rate / 1e6:,.0f} M cells/s ({kernel}; real cells; {padded_cells / best / 1e6:,.0f} "
                      f"M padded cells/s; compile {compile_s:.1f} s)"),
        ("end to end", f"{e2e:.1f} s = {cells / e2e / 1e6:,.0f} M cells/s on {n_dev} device(s), "
                       f"{stats['hits']:,} hits, {out_bytes / 1e6:,.1f} MB of miranda output "
                       f"(sha256 {stats['sha256']})"
                       + (f" (after a warm-up run of {warm_s:.1f} s)" if args.warmup else " (cold)")),
        ("per miRNA", f"{per_mirna:.2f} s against all {stats['targets']} targets"),
        ("CPU time", f"{cpu_s:.1f} s of CPU time (this process {stats['main_cpu_s']:.1f} s, the rest its workers) over {e2e:.1f} s wall "
                     f"({cpu_s / e2e:.2f} cores busy on average; load average {os.getloadavg()[0]:.1f})"),
        ("breakdown", f"waiting for the devices {stats['timings']['device']:.1f} s, handing out and "
                      f"writing host work {stats['timings']['select']:.1f} s, reading/other "
                      f"{e2e - stats['timings']['device'] - stats['timings']['select']:.1f} s (reading and "
                      f"packing the targets {stats['timings']['setup']:.2f} s, tail after the devices "
                      f"{stats['timings']['tail']:.2f} s); device "
                      f"threads: bulk scan {stats['timings']['scan']:.1f} s, extraction and traceback "
                      f"{stats['timings']['extract']:.1f} s"
                      + "".join(f", {k} {v:.2f} s" for k, v in stats["timings"].items() if k.startswith("profile"))),
        ("whole set", f"{n_all_mirnas} miRNAs x {stats['targets']} targets = {full_cells:.3g} cells: "
                      f"~{full_time / 60:,.1f} min extrapolated ({full_time:,.0f} s)"
                      if stats["mirnas"] < n_all_mirnas else f"{e2e:.1f} s measured"),
    ]
    if stats.get("samples"):
        import statistics

        rows.append(("profile", "; ".join(
            f"{k}: {len(v)} calls, {sum(v):.2f} s, median {statistics.median(v) * 1e3:.1f} ms"
            for k, v in stats["samples"].items())))
    if args.compare_devices:
        one = runs[1]
        rows.append(("1 device", f"{one['e2e']:.1f} s end to end ({cells / one['e2e'] / 1e6:,.0f} M cells/s), "
                                 f"output sha256 {one['sha256']}"))
        rows.append((f"{n_dev} devices", f"{e2e:.1f} s: {one['e2e'] / e2e:.2f}x one device"
                                        + ("" if one["sha256"] == stats["sha256"] else " (OUTPUT DIFFERS)")))
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    record = {"backend": args.backend, "device": device.device_kind, "devices": n_dev,
              "mirnas": stats["mirnas"], "targets": stats["targets"], "cells": cells, "end_to_end_s": e2e,
              "cells_per_s": cells / e2e, "scan_cells_per_s": scan_rate, "hits": stats["hits"],
              "extrapolated_full_s": full_time, "cpu_s": cpu_s, "timings": stats["timings"],
              "output_sha256": stats["sha256"], "output_bytes": out_bytes, "warmup_s": warm_s,
              "main_cpu_s": stats["main_cpu_s"], "samples": stats.get("samples"),
              "cpus": os.cpu_count(), "load_average": os.getloadavg()[0]}
    if args.timeline:
        record["timelines"] = {n: r["timeline"] for n, r in runs.items()}
    if args.compare_devices:
        record["one_device_s"] = runs[1]["e2e"]
        record["speedup"] = runs[1]["e2e"] / e2e
        record["same_output"] = runs[1]["sha256"] == stats["sha256"]
    if args.json:
        print(json.dumps(record))
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(record, fh, indent=1)
    return 0


class StallProbe:
    """For --timeline: Python's garbage collections, and every time a thread asking to wake up
    each 2 ms woke up more than 20 ms late (the interpreter or the process was held up)."""

    def __init__(self, timeline):
        import gc
        import threading

        self.timeline = timeline
        self.running = True
        self.gc_start = None

        def on_gc(phase, info):
            now = time.perf_counter()
            if phase == "start":
                self.gc_start = now
            elif self.gc_start is not None and now - self.gc_start > 0.005:
                timeline.mark("gc", info.get("generation"), at=self.gc_start, run=now - self.gc_start)

        self.late: list[float] = []

        def watch():
            last = time.perf_counter()
            while self.running:
                time.sleep(0.002)
                now = time.perf_counter()
                self.late.append(now - last - 0.002)
                if now - last > 0.022:
                    timeline.mark("stall", None, at=last, run=now - last)
                last = now

        self.on_gc = on_gc
        gc.callbacks.append(on_gc)
        self.thread = threading.Thread(target=watch, daemon=True)
        self.thread.start()

    def stop(self) -> str:
        """Stop; a line on how late the wake-ups were (how contended the interpreter was)."""
        import gc

        self.running = False
        self.thread.join()
        gc.callbacks.remove(self.on_gc)
        late = sorted(self.late) or [0.0]
        pick = lambda f: late[min(len(late) - 1, int(f * len(late)))] * 1e3  # noqa: E731
        return (f"wake-ups {len(late)}: late by {sum(late) / len(late) * 1e3:.2f} ms on average, "
                f"median {pick(0.5):.2f}, p90 {pick(0.9):.2f}, p99 {pick(0.99):.2f} ms")


def timeline_summary(events: list[dict]) -> str:
    """A few lines on where the time of a run went (events of a Timeline, seconds from the start)."""
    import statistics

    def first(name, default=float("nan")):
        return next((e["t"] for e in events if e["event"] == name), default)

    def last(name, default=float("nan")):
        return max((e["t"] for e in events if e["event"] == name), default=default)

    lines = [f"  chunk ready {first('chunk ready'):.3f}, first block start {first('block start'):.3f}, "
             f"first yield {first('yield'):.3f}, last block end {last('block end'):.3f}, last yield "
             f"{last('yield'):.3f}, devices done {first('devices done'):.3f}, last job end "
             f"{max((e['t'] + e['run'] for e in events if e['event'] == 'job'), default=float('nan')):.3f}, "
             f"last written {last('written'):.3f}, end {first('end'):.3f}"]
    starts = {e["key"]: e for e in events if e["event"] == "block start"}
    ends = {e["key"]: e["t"] for e in events if e["event"] == "block end"}
    per_dev: dict = {}
    for k, e in starts.items():
        if k in ends:
            per_dev.setdefault(e["device"], []).append((e["t"], ends[k]))
    for dev, spans in sorted(per_dev.items()):
        busy = sum(b - a for a, b in spans)
        lines.append(f"  {dev}: {len(spans)} blocks, {min(a for a, _ in spans):.3f}-{max(b for _, b in spans):.3f} s, "
                     f"median block {statistics.median(b - a for a, b in spans) * 1e3:.0f} ms, "
                     f"thread-busy {busy:.2f} s")
    submits = {tuple(e["key"]): e["t"] for e in events if e["event"] == "submit"}
    jobs = [e for e in events if e["event"] == "job"]
    if jobs:
        wait = [e["t"] - submits.get(tuple(e["key"]), e["t"]) for e in jobs]
        dur = [e["run"] for e in jobs]
        cpu = [e["cpu"] for e in jobs]
        lines.append(f"  {len(jobs)} host jobs: queue wait median {statistics.median(wait) * 1e3:.0f} ms max "
                     f"{max(wait) * 1e3:.0f} ms; run median {statistics.median(dur) * 1e3:.0f} ms max "
                     f"{max(dur) * 1e3:.0f} ms; CPU {sum(cpu):.1f} s (median {statistics.median(cpu) * 1e3:.0f} ms)")
    for name in ("gc", "stall"):
        found = [e for e in events if e["event"] == name]
        if found:
            longest = sorted(found, key=lambda e: -e["run"])[:4]
            lines.append(f"  {name}: {len(found)}, {sum(e['run'] for e in found):.3f} s in all; longest "
                         + ", ".join(f"{e['run'] * 1e3:.0f} ms at {e['t']:.2f} s" for e in longest))
    written = sorted((e["t"], e["key"]) for e in events if e["event"] == "written")
    if written:
        lines.append(f"  writes: {len(written)} blocks, first {written[0][0]:.3f} s, last {written[-1][0]:.3f} s")
    return "\n".join(lines)


def devices_only(args, records, utrs: str, params, chunk_nt: int) -> int:
    """Time :meth:`Engine.iter_traced` alone (the device threads and the candidates' fetch, no
    host hit selection or text) on the first chunk, on 1 and on ``--compare-devices`` devices."""
    import jax

    from jaxrna.targets.api import _target_chunks
    from jaxrna.targets.engine import Engine, prepare_query

    _, _, text, _, _ = next(_target_chunks(utrs, chunk_nt))
    queries = [prepare_query(r.id, r.description, r.sequence, params) for r in records]
    all_devices = jax.devices(args.backend)
    n_dev = args.compare_devices or len(all_devices)
    record = {"mirnas": len(queries), "targets": len(text.starts), "devices_only": {}}
    for n in sorted({1, n_dev}):
        engine = Engine(params, kernel=args.kernel, devices=all_devices[:n], query_block=args.query_block,
                        threads_per_device=args.threads, lane_batch=args.lane_batch)
        if args.spill:  # the candidates written to files, as for host worker processes
            engine.spill_dir = tempfile.mkdtemp(prefix="bench-spill-")
        qb = engine.query_block
        warm = queries[-2 * qb * n * engine.threads_per_device:]
        for _ in engine.iter_traced(warm, text):
            pass
        engine.timings = {k: 0.0 for k in engine.timings}
        from timeline import Timeline

        probe = StallProbe(Timeline())
        t0 = time.perf_counter()
        candidates = 0
        for _, traced in engine.iter_traced(queries, text):
            candidates += len(traced)
            if args.spill and len(traced):
                os.unlink(traced.path)
        wall = time.perf_counter() - t0
        print(f"devices only, {n} device(s): {probe.stop()}")
        record["devices_only"][n] = {"wall_s": wall, "candidates": candidates, "timings": engine.timings}
        print(f"devices only, {n} device(s): {wall:.2f} s, {candidates:,} candidates; device threads: "
              f"bulk scan {engine.timings['scan']:.1f} s, extraction and traceback "
              f"{engine.timings['extract']:.1f} s")
    if n_dev > 1:
        one, many = (record["devices_only"][k]["wall_s"] for k in (1, n_dev))
        record["speedup"] = one / many
        print(f"devices only, {n_dev} devices: {one / many:.2f}x one device")
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump(record, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
