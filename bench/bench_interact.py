"""Benchmark `jaxrna interact` (BPMax) on the seed's shape: a 23-nt RNA against 1,000, 5,000 and
20,000 nt, strand 1 whole, a window of 128 on strand 2 (seed 003, Gildemaster 2021, ch. 9).

Self-contained: random strands from a fixed seed, no input files. Prints a short table (and
--json). Times are for the score of the best window (fill + window scan, no traceback) after a
first call that compiles; --traceback adds the structure of the best window. With --batch K,
K strand-2 RNAs of each size run as one vmapped program and times are per pair.

Effective operations are counted honestly: one *update* is one add and one max of a term the
recurrence needs inside the windows, with no padding and no skipped-tile waste counted:
D contributes (j1 - i1)(j2 - i2) per cell, H1 + H2 2(j2 - i2), H3 + H4 2(j1 - i1). Counting add
and max as two operations would double the rates.

    python bench/bench_interact.py                       # CPU here, or the GPU when JAX sees one
    python bench/bench_interact.py --sizes 1000 5000 20000 --backend gpu --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxrna.interact.api import interact_pairs, make_problem, run_problems  # noqa: E402
from jaxrna.interact.windows import plan  # noqa: E402
from jaxrna.io.fasta import Record  # noqa: E402
from jaxrna.weights import parse_weights  # noqa: E402


def updates(n: int, m: int, w1: int, w2: int) -> int:
    """Updates of the recurrence on strands of n and m nt with spans <= w1, w2."""
    d1 = np.arange(min(w1, n - 1) + 1, dtype=np.float64)
    d2 = np.arange(min(w2, m - 1) + 1, dtype=np.float64)
    c1, c2 = n - d1, m - d2                     # cells on each diagonal
    cells1, cells2 = c1.sum(), c2.sum()
    s1, s2 = (c1 * d1).sum(), (c2 * d2).sum()   # sums of spans over cells
    return int(s1 * s2 + 2 * cells1 * s2 + 2 * s1 * cells2)


def strand(rng, n: int) -> str:
    return "".join(rng.choice(list("ACGU"), size=n))


def check(count: int, backend: str, weights) -> None:
    """Scores and tracebacks on ``backend`` against the reference DP (exits on a mismatch)."""
    from jaxrna.interact.brute import check_joint, joint_weight
    from jaxrna.interact.reference import reference_score, reference_windows

    rng = np.random.default_rng(7)
    pairs = [(Record(f"a{k}", strand(rng, int(rng.integers(8, 17)))),
              Record(f"b{k}", strand(rng, int(rng.integers(12, 25))))) for k in range(count)]
    t0 = time.perf_counter()
    results = list(interact_pairs(pairs, weights, backend=backend))
    for (a, b), r in zip(pairs, results):
        want = reference_score(a.sequence, b.sequence, weights)
        check_joint(r.pairs, a.sequence, b.sequence, weights)
        if r.score_units != want or joint_weight(r.pairs, a.sequence, b.sequence, weights) != want:
            sys.exit(f"check failed on {a.sequence} x {b.sequence}: {r.score_units} != {want}")
    s1, s2 = "CCACAGGUAGCCUGCC", "GUCGUGGUCCGCAACACUCG"
    (r,) = list(interact_pairs([(Record("tv3a", s1), Record("tv3b", s2))], weights, 8, 8,
                               backend=backend))
    spec = max(reference_windows(s1, s2, weights, 8, 8).values())
    if (r.score_units, r.window1, r.window2) != (spec, (8, 15), (0, 7)) or spec != 35:
        sys.exit(f"check failed on windowed tv3: {r.score} {r.window1} {r.window2}")
    print(f"# check: {count} random pairs and windowed tv3 equal the reference DP on {backend} "
          f"({time.perf_counter() - t0:.1f} s)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    ap.add_argument("--short", type=int, default=23, help="strand-1 length (default 23)")
    ap.add_argument("--window", type=int, default=128, help="strand-2 window (default 128)")
    ap.add_argument("--repeat", type=int, default=1, help="timed runs after the first (best is kept)")
    ap.add_argument("--batch", type=int, default=1,
                    help="strand-2 RNAs of each size computed together (one vmapped program); "
                         "times are then per pair")
    ap.add_argument("--backend", choices=["auto", "cpu", "gpu"], default="auto")
    ap.add_argument("--traceback", action="store_true", help="also time the best window's structure")
    ap.add_argument("--tile", type=int, default=None, help="tile size (default: automatic)")
    ap.add_argument("--outer-blocks", type=int, default=None, help="outer diagonal groups")
    ap.add_argument("--inner-blocks", type=int, default=None,
                    help="inner diagonal groups (reduce sweep; default: automatic)")
    ap.add_argument("--fused", choices=["auto", "on", "off"], default="auto",
                    help="all splits of an outer diagonal in one Pallas kernel (auto: on GPU)")
    ap.add_argument("--split-warps", type=int, default=None,
                    help="Triton warps per program of the fused split kernel")
    ap.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    ap.add_argument("--check", type=int, default=0, metavar="K",
                    help="first compare K random small pairs and the spec's windowed tv3 with "
                         "the plain reference DP on this backend")
    args = ap.parse_args()

    if args.split_warps:
        import jaxrna.kernels.bpmax_splits as splits
        splits.NUM_WARPS = args.split_warps
    backend = args.backend
    if backend == "auto":
        backend = "gpu" if jax.default_backend() == "gpu" else "cpu"
    device = jax.devices(backend)[0]
    rng = np.random.default_rng(2021)
    short = strand(rng, args.short)
    weights = parse_weights("bpmax")
    if args.check:
        check(args.check, backend, weights)
    rows = []
    print(f"# jaxrna interact benchmark: {device.device_kind} ({backend}), jax {jax.__version__}, "
          f"{platform.node()}, {os.cpu_count()} CPUs")
    print(f"# strand 1: {args.short} nt whole; strand 2 window {args.window}; bpmax weights")
    print(f"{'strand 2':>9} {'first s':>8} {'run s':>8} {'G updates':>10} {'G upd/s':>8} "
          f"{'score':>6} {'window2':>13} {'table GiB':>9}")
    for m in args.sizes:
        pairs = [(Record("short", short), Record(f"long{m}_{k}", strand(rng, m)))
                 for k in range(args.batch)]
        pair = pairs[0]
        probs = []
        for rec1, rec2 in pairs:
            prob = make_problem(rec1, rec2, None, args.window, tile=args.tile, backend=backend)
            p = prob.plan
            probs.append(dataclasses.replace(prob, plan=plan(
                p.n_outer, p.n_inner, p.l_outer, p.l_inner, tile=p.geo.tile, backend=backend,
                outer_blocks=args.outer_blocks, inner_blocks=args.inner_blocks,
                fused=None if args.fused == "auto" else args.fused == "on")))
        prob = probs[0]
        budget = max(1 << 30, len(probs) * prob.plan.bytes_needed())
        with jax.default_device(device):
            t0 = time.perf_counter()
            r = run_problems(probs, weights, with_pairs=False, batch_budget=budget)[0]
            first = (time.perf_counter() - t0) / len(probs)
            best = float("inf")
            for _ in range(max(args.repeat, 1)):
                t0 = time.perf_counter()
                r = run_problems(probs, weights, with_pairs=False, batch_budget=budget)[0]
                best = min(best, (time.perf_counter() - t0) / len(probs))
            tb = None
            if args.traceback:
                t0 = time.perf_counter()
                (rt,) = list(interact_pairs([pair], weights, None, args.window, backend=backend))
                tb = time.perf_counter() - t0
                assert rt.score_units == r.score_units
        n_upd = updates(args.short, m, args.short - 1, args.window - 1)
        row = {"strand1": args.short, "strand2": m, "window2": args.window, "batch": args.batch,
               "backend": backend, "geometry": str(prob.plan.geo),
               "device": device.device_kind, "first_s": round(first, 3), "run_s": round(best, 3),
               "updates": n_upd, "gupdates_per_s": round(n_upd / best / 1e9, 3),
               "score": r.score, "window2_range": [r.window2[0] + 1, r.window2[1] + 1],
               "table_gib": round(prob.plan.geo.table_bytes() / 2**30, 3),
               "traceback_total_s": None if tb is None else round(tb, 3)}
        rows.append(row)
        print(f"{m:>9} {first:>8.2f} {best:>8.2f} {n_upd / 1e9:>10.2f} {n_upd / best / 1e9:>8.2f} "
              f"{r.score_text:>6} {row['window2_range'][0]:>6}-{row['window2_range'][1]:<6} "
              f"{row['table_gib']:>9.2f}" + ("" if tb is None else f"  (with traceback {tb:.2f} s)"),
              flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
