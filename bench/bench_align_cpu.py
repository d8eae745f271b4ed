"""CPU benchmark for `jaxrna align` (issue 4) against parasail (sw_striped_16 / nw_striped_16).

Same pairs, same scores (match 2, mismatch -3, gap open 5, extend 2: a gap of length L costs
5 + 2 (L - 1)), same machine, score only, random DNA. Cases:
  1. one pair of 22 x 20,000;
  2. one pair of 1,000 x 1,000;
  3. a batch of 10,000 pairs of 100 x 100 (10^8 cells; parasail called once per pair).
jaxrna runs end to end through ``align_records`` (encoding, length buckets, batches) after one
warm-up call; its compile time is reported apart. Every jaxrna score is checked against
parasail's. Where parasail's 16-bit lanes saturate (the global 22 x 20,000 score is below
-32,768) its 32-bit striped function is used instead, and the table names it. GCUPS = cells / seconds / 1e9 (median of the repeats).

    python bench/bench_align_cpu.py [--repeats 3] [--batch 10000] [--batch-length 100]

Needs parasail (``pip install parasail``; a bench-only dependency).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import parasail  # noqa: E402

from jaxrna.align.api import align_records  # noqa: E402
from jaxrna.align.scoring import match_mismatch  # noqa: E402
from jaxrna.io.fasta import Record  # noqa: E402

MATCH, MISMATCH, OPEN, EXTEND = 2, -3, 5, 2


def rand_seq(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("ACGT") for _ in range(n))


def median_time(fn, repeats: int) -> tuple[float, object]:
    runs, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs), out


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--batch-length", type=int, default=100)
    args = ap.parse_args()
    rng = random.Random(0)
    scoring = match_mismatch(MATCH, MISMATCH, OPEN, EXTEND)
    matrix = parasail.matrix_create("ACGT", MATCH, MISMATCH)
    L = args.batch_length
    cases = [("22 x 20,000", [(rand_seq(rng, 22), rand_seq(rng, 20_000))]),
             ("1,000 x 1,000", [(rand_seq(rng, 1000), rand_seq(rng, 1000))]),
             (f"{args.batch:,} pairs of {L} x {L}",
              [(rand_seq(rng, L), rand_seq(rng, L)) for _ in range(args.batch)])]
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores; jax {jax.__version__} "
          f"({jax.default_backend()}); parasail {parasail.__version__}", flush=True)
    rows = []
    for name, pairs in cases:
        cells = sum(len(a) * len(b) for a, b in pairs)
        recs = [(Record(f"q{k}", a), Record(f"t{k}", b)) for k, (a, b) in enumerate(pairs)]
        for mode in ("local", "global"):
            fn = parasail.sw_striped_16 if mode == "local" else parasail.nw_striped_16
            if any(fn(a, b, OPEN, EXTEND, matrix).saturated for a, b in pairs[:50]):
                # 16-bit lanes overflow (e.g. a global score of -39,927): use 32-bit lanes
                fn = parasail.sw_striped_32 if mode == "local" else parasail.nw_striped_32
            t0 = time.perf_counter()
            list(align_records(recs, scoring, mode, score_only=True, chunk=len(recs)))
            first = time.perf_counter() - t0
            t_jax, res = median_time(
                lambda: list(align_records(recs, scoring, mode, score_only=True, chunk=len(recs))),
                args.repeats)
            t_par, ref = median_time(lambda: [fn(a, b, OPEN, EXTEND, matrix).score for a, b in pairs],
                                     args.repeats)
            assert [r.score for r in res] == ref, f"scores differ from parasail ({name}, {mode})"
            rows.append((name, mode, fn.__name__, t_jax, max(0.0, first - t_jax),
                         cells / t_jax / 1e9, t_par, cells / t_par / 1e9))
            print(rows[-1], flush=True)
    print()
    print("| case | mode | jaxrna s | jaxrna compile s | jaxrna GCUPS | parasail s | parasail GCUPS | parasail / jaxrna |")
    print("|---|---|---|---|---|---|---|---|")
    for name, mode, fn, tj, comp, gj, tp, gp in rows:
        print(f"| {name} | {mode} ({fn}) | {tj:.4f} | {comp:.1f} | {gj:.3f} | {tp:.4f} | {gp:.3f} | "
              f"{gp / gj:.0f}x |")


if __name__ == "__main__":
    main()
