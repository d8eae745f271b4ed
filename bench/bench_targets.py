"""Benchmark ``jaxrna targets`` on the deterministic synthetic set (bench/make_targets_data.py).

Self-contained: generates the data if it is missing, then times

- ``scan``: the bulk column scan alone (cells/s of the fill, compile excluded), on one chunk;
- ``end-to-end``: ``jaxrna targets MIRNAS TARGETS --no-energy --quiet -o FILE`` as a library
  call (FASTA reading, scan, candidate refills, sorting, filtering, traceback and miranda-format
  output written to a file), first miRNAs of the set against all targets unless told otherwise,
  and extrapolates to the whole set (time per miRNA is constant: every miRNA scans every
  target). Cells = sum of miRNA lengths x sum of target lengths.

    python bench/bench_targets.py                         # CPU, 8 miRNAs x 30,000 targets
    python bench/bench_targets.py --backend gpu --mirnas 200
    python bench/bench_targets.py --mirnas 2000           # the whole set (hours on a CPU)

Prints a short table; ``--json`` adds one machine-readable line.
"""

from __future__ import annotations

import argparse
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
    ap.add_argument("--energy", action="store_true", help="include the ViennaRNA energy step")
    ap.add_argument("--chunk-nt", type=int, default=None)
    ap.add_argument("--kernel", default="auto", choices=["auto", "xla", "pallas"],
                    help="bulk-scan kernel (auto: Pallas on GPUs, pure JAX on CPUs)")
    ap.add_argument("--query-block", type=int, default=8, help="miRNAs per Pallas launch")
    ap.add_argument("--refill", default="default", choices=["default", "cpu"],
                    help="device of the short segment refills (default: the scan device)")
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

    mirna_path, utr_path = ensure_data(args.data)
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

    with jax.default_device(device):
        # 1. the bulk scan alone, on the first chunk
        targets, size = [], 0
        for r in read_records(sub_utrs):
            targets.append(make_target(r.id, r.description, r.sequence))
            size += len(r)
            if size >= chunk_nt:
                break
        queries = [prepare_query(r.id, r.description, r.sequence, params) for r in records[:args.query_block]]
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
        options = {"kernel": kernel, "query_block": args.query_block,
                   "devices": jax.devices(args.backend)[:args.devices or None]}
        if args.refill == "cpu":
            options["refill_device"] = jax.devices("cpu")[0]
        if args.warmup:
            warm = os.path.join(work, "warm.fa")
            with open(warm, "w") as fh:
                fh.writelines(f">{r.id}\n{r.sequence}\n" for r in list(read_records(mirna_path))[-args.warmup:])
            t0 = time.perf_counter()
            with open(os.devnull, "w") as out:
                write_scan(warm, sub_utrs, writer_for("miranda", out, no_energy=params.no_energy, quiet=True),
                           params, chunk_nt=chunk_nt, engine_options=options)
            warm_s = time.perf_counter() - t0
        out_path = args.keep or os.path.join(work, "report.txt")
        c0 = time.process_time()
        t0 = time.perf_counter()
        with open(out_path, "w") as out:
            writer = writer_for("miranda", out, no_energy=params.no_energy, quiet=True)
            stats = write_scan(sub_mirnas, sub_utrs, writer, params, chunk_nt=chunk_nt,
                               engine_options=options)
        e2e = time.perf_counter() - t0
        cpu_s = time.process_time() - c0
        out_bytes = os.path.getsize(out_path)
        if not args.keep:
            os.unlink(out_path)

    cells = stats["cells"]
    per_mirna = e2e / max(1, stats["mirnas"])
    full_cells = all_mirna_nt * stats["target_nt"]
    full_time = e2e * full_cells / cells
    rows = [
        ("machine", f"{platform.node()} {device.device_kind} ({os.cpu_count()} CPUs)"),
        ("subset", f"{stats['mirnas']} miRNAs x {stats['targets']} targets, {stats['target_nt']:,} target nt"),
        ("scan only", f"{scan_rate / 1e6:,.0f} M cells/s ({kernel}; real cells; {padded_cells / best / 1e6:,.0f} "
                      f"M padded cells/s; compile {compile_s:.1f} s)"),
        ("end to end", f"{e2e:.1f} s = {cells / e2e / 1e6:,.0f} M cells/s, {stats['hits']:,} hits, "
                       f"{out_bytes / 1e6:,.1f} MB of miranda output"
                       + (f" (after a {args.warmup}-miRNA warm-up run of {warm_s:.1f} s)" if args.warmup else " (cold)")),
        ("per miRNA", f"{per_mirna:.2f} s against all {stats['targets']} targets"),
        ("CPU time", f"{cpu_s:.1f} s of process CPU time over {e2e:.1f} s wall "
                     f"({cpu_s / e2e:.2f} cores busy on average; load average {os.getloadavg()[0]:.1f})"),
        ("breakdown", ", ".join(f"{k} {v:.1f} s" for k, v in stats["timings"].items())
                      + f", reading/formatting/other {e2e - sum(stats['timings'].values()):.1f} s"),
        ("whole set", f"{n_all_mirnas} miRNAs x {stats['targets']} targets = {full_cells:.3g} cells: "
                      f"~{full_time / 60:,.1f} min extrapolated ({full_time:,.0f} s)"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    if args.json:
        print(json.dumps({"backend": args.backend, "device": device.device_kind, "mirnas": stats["mirnas"],
                          "targets": stats["targets"], "cells": cells, "end_to_end_s": e2e,
                          "cells_per_s": cells / e2e, "scan_cells_per_s": scan_rate, "hits": stats["hits"],
                          "extrapolated_full_s": full_time, "cpu_s": cpu_s,
                          "load_average": os.getloadavg()[0]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
