"""Whole ``jaxrna align`` processes, cold and warm, against parasail on every core (issue 14).

Two jobs, generated from fixed seeds (random RNA), sized by ``--scale`` (1 = issue 14's sizes):

* ``zip``: ``--pairs zip --score-only -f tsv``, 100,000 pairs of 1,000 x 1,000 (global);
* ``all``: every query against every target, 300 x 300 of 200-400 nt, ``--mode local``, with
  alignments, in the default ``pair`` format and in ``tsv`` (``all_tsv``).

Each runs as a fresh ``python -m jaxrna align`` process: *cold* with an empty
``JAXRNA_CACHE_DIR``, then ``--warm`` times with the same one (median reported), each with
``JAXRNA_PROFILE`` (:mod:`jaxrna.stages`) for the stage breakdown and the number of programs
compiled (``compiled``: not found in the persistent cache). Outputs of every run must be
identical. ``--engines host,device`` also runs the JAX path on a CPU (``JAXRNA_ALIGN_ENGINE``).
The peer is ``bench/peer_parasail.py`` on the same files (parasail on every core, score and
CIGAR per pair; ``sw_trace_striped_16`` for alignments), in the same call.

    python bench/bench_align_cli.py --scale 0.2 --jobs all,all_tsv --warm 3   # this CPU
    python bench/bench_align_cli.py --scale 0.02 --jobs zip
    PYTHONPATH=. python3 bench/bench_align_cli.py --scale 1 --backend gpu --no-peer  # an H200

Needs parasail for the peer (``pip install ".[bench]"``); ``--no-peer`` skips it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SEED = 14
STAGES = ["startup", "imports", "setup", "read", "encode", "compile", "device", "traceback",
          "format", "write", "other"]


def _seqs(rng: np.random.Generator, count: int, lo: int, hi: int) -> list[str]:
    lens = rng.integers(lo, hi + 1, count)
    letters = np.frombuffer(b"ACGU", np.uint8)
    return [letters[rng.integers(0, 4, int(n))].tobytes().decode() for n in lens]


def _fasta(path: str, prefix: str, seqs: list[str]) -> str:
    with open(path, "w") as fh:
        for k, s in enumerate(seqs):
            fh.write(f">{prefix}{k + 1}\n")
            for i in range(0, len(s), 60):
                fh.write(s[i:i + 60] + "\n")
    return path


def make_jobs(scale: float, data: str) -> dict:
    """Job name -> (jaxrna arguments without -o, peer arguments, cells)."""
    rng = np.random.default_rng(SEED)
    pairs = max(1, round(100_000 * scale))
    q = _fasta(os.path.join(data, "zip_q.fa"), "q", _seqs(rng, pairs, 1000, 1000))
    t = _fasta(os.path.join(data, "zip_t.fa"), "t", _seqs(rng, pairs, 1000, 1000))
    side = max(1, round(300 * scale))
    aq = _seqs(rng, side, 200, 400)
    at = _seqs(rng, side, 200, 400)
    qa = _fasta(os.path.join(data, "all_q.fa"), "q", aq)
    ta = _fasta(os.path.join(data, "all_t.fa"), "t", at)
    cells_all = sum(map(len, aq)) * sum(map(len, at))
    return {
        "zip": ([q, t, "--pairs", "zip", "--score-only", "-f", "tsv"],
                [q, t, "--pairs", "zip", "--score-only"], pairs * 10 ** 6),
        "all": ([qa, ta, "--mode", "local"], [qa, ta, "--mode", "local"], cells_all),
        "all_tsv": ([qa, ta, "--mode", "local", "-f", "tsv"], [qa, ta, "--mode", "local"],
                    cells_all),
    }


def run_cli(args: list[str], cache: str, out: str, backend: str, engine: str | None) -> dict:
    fd, profile = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env = dict(os.environ, JAXRNA_CACHE_DIR=cache, JAXRNA_PROFILE=profile,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("JAXRNA_ALIGN_ENGINE", None)
    if engine:
        env["JAXRNA_ALIGN_ENGINE"] = engine
    cmd = [sys.executable, "-m", "jaxrna", "align", *args, "-q", "-o", out, "--backend", backend]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n"
                           + proc.stderr.decode()[-3000:])
    with open(profile) as fh:
        prof = json.load(fh)
    os.unlink(profile)
    stages = {k: v for k, v in prof["stages"].items() if not k.startswith("_")}
    stages["startup"] = wall - prof["in_process_s"]
    stages["other"] = wall - sum(v for k, v in stages.items() if "(background)" not in k)
    with open(out, "rb") as fh:
        import hashlib

        sha = hashlib.sha256(fh.read()).hexdigest()[:16]
    return {"wall": wall, "stages": stages, "counts": prof["counts"], "sha": sha,
            "bytes": os.path.getsize(out)}


def run_peer(args: list[str], workers: int) -> dict:
    cmd = [sys.executable, os.path.join(HERE, "peer_parasail.py"), *args, "--workers",
           str(workers)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        return {"error": proc.stderr.decode()[-500:]}
    return {"wall": wall, "summary": proc.stdout.decode().strip().splitlines()[-1]}


def _breakdown(r: dict) -> str:
    st = r["stages"]
    parts = [f"{k} {st[k]:.2f}" for k in STAGES if st.get(k, 0) >= 0.005]
    bg = [f"{k} {v:.2f}" for k, v in st.items() if "(background)" in k and v >= 0.005]
    return ", ".join(parts + bg)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.2)
    ap.add_argument("--jobs", default="zip,all,all_tsv")
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--engines", default="default",
                    help="comma list of default, host, device (JAXRNA_ALIGN_ENGINE)")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--peer-workers", type=int, default=os.cpu_count())
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    data = tempfile.mkdtemp(prefix="bench-align-")
    results = []
    try:
        jobs = make_jobs(args.scale, data)
        print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}; "
              f"scale {args.scale}; {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
        for name in args.jobs.split(","):
            cli_args, peer_args, cells = jobs[name]
            for engine in args.engines.split(","):
                eng = None if engine == "default" else engine
                cache = tempfile.mkdtemp(prefix="jaxrna-cache-")
                out = os.path.join(data, f"{name}.out")
                try:
                    cold = run_cli(cli_args, cache, out, args.backend, eng)
                    warms = [run_cli(cli_args, cache, out, args.backend, eng)
                             for _ in range(args.warm)]
                except RuntimeError as exc:      # report, and go on with the other jobs
                    print(f"{name} [{engine}]: FAILED\n{exc}", flush=True)
                    continue
                finally:
                    shutil.rmtree(cache, ignore_errors=True)
                shas = {r["sha"] for r in [cold] + warms}
                if len(shas) != 1:
                    raise RuntimeError(f"{name}: outputs differ between runs")
                warm = sorted(warms, key=lambda r: r["wall"])[len(warms) // 2] if warms else cold
                row = {"job": name, "engine": engine, "cells": cells, "cold": cold,
                       "warm": warm, "warm_walls": [r["wall"] for r in warms]}
                print(f"{name} [{engine}]: cold {cold['wall']:.2f} s (compiled "
                      f"{cold['counts'].get('compiled', 0)}), warm {warm['wall']:.2f} s (compiled "
                      f"{warm['counts'].get('compiled', 0)}), {cold['bytes'] / 1e6:.1f} MB out, "
                      f"sha {cold['sha']}", flush=True)
                print(f"    warm stages: {_breakdown(warm)}", flush=True)
                print(f"    cold stages: {_breakdown(cold)}", flush=True)
                results.append(row)
            if not args.no_peer:
                peer = [run_peer(peer_args, args.peer_workers) for _ in range(max(1, args.warm))]
                ok = [p for p in peer if "wall" in p]
                if ok:
                    walls = sorted(p["wall"] for p in ok)
                    med = walls[len(walls) // 2]
                    print(f"{name} [parasail, {args.peer_workers} processes]: {med:.2f} s "
                          f"(median of {len(walls)}; {ok[0]['summary']})", flush=True)
                    results.append({"job": name, "engine": "parasail", "wall": med,
                                    "walls": walls, "summary": ok[0]["summary"]})
                else:
                    print(f"{name} [parasail]: {peer[0].get('error')}", flush=True)
        print()
        print("| job | engine | cold s | warm s | compiled (cold/warm) | parasail s |")
        print("|---|---|---:|---:|---|---:|")
        peers = {r["job"]: r["wall"] for r in results if r["engine"] == "parasail"}
        for r in results:
            if r["engine"] == "parasail":
                continue
            p = peers.get(r["job"])
            print(f"| {r['job']} | {r['engine']} | {r['cold']['wall']:.2f} | "
                  f"{statistics.median(r['warm_walls'] or [r['cold']['wall']]):.2f} | "
                  f"{r['cold']['counts'].get('compiled', 0)}/"
                  f"{r['warm']['counts'].get('compiled', 0)} | "
                  f"{'-' if p is None else f'{p:.2f}'} |")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(results, fh, indent=1)
    finally:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
