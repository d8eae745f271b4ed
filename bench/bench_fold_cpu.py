"""CPU benchmark for `jaxrna fold` (issue: foundation).

Measures, on this machine:
  1. fill time for one random sequence of n = 500, 1,000, 2,000, 4,000 (median of repeats,
     after compilation; compilation time separately), with the split operations n^3/6 per second;
  2. 1,000 random sequences of 50-500 nt (uniform), score only and with traceback, end to end
     through the Python API (compilation included and excluded);
  3. wall time of the CLI folding one 100-nt sequence with a warm compilation cache.

    python bench/bench_fold_cpu.py [--sizes 500,1000,2000,4000] [--count 1000]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402

from jaxrna.alphabet import encode  # noqa: E402
from jaxrna.batching import bucket_length  # noqa: E402
from jaxrna.fold.api import TILE, fold  # noqa: E402
from jaxrna.fold.blocked import blocked_fill  # noqa: E402
from jaxrna.weights import parse_weights  # noqa: E402


def rand_seq(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("ACGU") for _ in range(n))


def time_fill(n: int, repeats: int) -> tuple[float, float, int]:
    rng = random.Random(n)
    padded = -(-n // TILE) * TILE
    codes = encode(rand_seq(rng, n) + "N" * (padded - n))
    w = parse_weights("unit").matrix()
    t0 = time.perf_counter()
    blocked_fill(codes, w, min_loop=3, tile=TILE).block_until_ready()
    first = time.perf_counter() - t0
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        blocked_fill(codes, w, min_loop=3, tile=TILE).block_until_ready()
        runs.append(time.perf_counter() - t0)
    med = statistics.median(runs)
    return med, first - med, padded


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="500,1000,2000,4000")
    ap.add_argument("--count", type=int, default=1000)
    args = ap.parse_args()
    print(f"# jaxrna fold CPU benchmark; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, jax {jax.__version__}, {time.strftime('%Y-%m-%d')}")
    print("\n| n | padded | fill (s) | compile (s) | split ops/s (n^3/6) |")
    print("|---:|---:|---:|---:|---:|")
    for n in [int(x) for x in args.sizes.split(",")]:
        med, comp, padded = time_fill(n, repeats=3 if n <= 2000 else 1)
        print(f"| {n:,} | {padded:,} | {med:.3f} | {comp:.2f} | {n**3 / 6 / med / 1e9:.2f} G |",
              flush=True)

    rng = random.Random(1000)
    seqs = [rand_seq(rng, rng.randint(50, 500)) for _ in range(args.count)]
    ops = sum(len(s) ** 3 / 6 for s in seqs)
    buckets = sorted({bucket_length(len(s)) for s in seqs})
    print(f"\n{args.count} sequences of 50-500 nt ({len(buckets)} length buckets: {buckets})\n")
    print("| mode | first run (s, with compilation) | second run (s) | sequences/s | split ops/s |")
    print("|---|---:|---:|---:|---:|")
    for mode, pairs in (("score only", False), ("with traceback", True)):
        t0 = time.perf_counter()
        fold(seqs, with_pairs=pairs, backend="cpu")
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        fold(seqs, with_pairs=pairs, backend="cpu")
        second = time.perf_counter() - t0
        print(f"| {mode} | {first:.2f} | {second:.2f} | {args.count / second:.0f} | "
              f"{ops / second / 1e9:.2f} G |", flush=True)

    seq = rand_seq(random.Random(100), 100)
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, JAXRNA_CACHE_DIR=cache,
                   PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        walls = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "jaxrna", "fold", "--model", "nussinov", "--sequence", seq,
                            "-q"],
                           check=True, env=env, stdout=subprocess.DEVNULL)
            walls.append(time.perf_counter() - t0)
    print(f"\nCLI, one 100-nt sequence: cold cache {walls[0]:.2f} s, warm cache "
          f"{min(walls[1:]):.2f} s wall")


if __name__ == "__main__":
    main()
