"""Alignment match posteriors (forward partition function + jax.grad) on random pairs.

For each n: one n x n pair of random DNA (NUC.4.4, gap open 10, extend 0.5, global and
local), timed as the jitted :func:`jaxrna.align.partition.batch_posteriors` (the CLI's
path): compile once, then the best of ``--repeat`` runs. Columns: ln Z, the time, GCUPS-like
cells per second of the forward+backward pass, the estimate of
:func:`~jaxrna.align.partition.posterior_bytes` and the measured peak (device memory stats
on a GPU; on CPU the peak resident set of a fresh subprocess per size, minus its baseline).
``--check`` also compares float32 posteriors with float64 (CPU) on the smallest size.

    PYTHONPATH=. python3 bench/bench_align_partition.py                 # 1,000 and 2,000
    PYTHONPATH=. python3 bench/bench_align_partition.py --sizes 1000 4000 10000 --check
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _pair(n: int, seed: int = 0) -> tuple[str, str]:
    """A query and a target of length n: the target is the query with ~15% mutations (so
    the posteriors are concentrated, as for homologous sequences)."""
    rng = np.random.default_rng(seed + n)
    q = rng.choice(list("ACGT"), n)
    t = q.copy()
    mut = rng.random(n) < 0.15
    t[mut] = rng.choice(list("ACGT"), int(mut.sum()))
    return "".join(q), "".join(t)


def run_one(n: int, mode: str, repeat: int, x64: bool = False) -> dict:
    import jax

    if x64:
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from jaxrna.align.partition import (_padded, batch_posteriors, gap_scores,
                                        posterior_bytes, substitution_scores)
    from jaxrna.align.scoring import make_scoring

    scoring = make_scoring()
    q, t = _pair(n)
    h, w = _padded(n), _padded(n)
    dtype = jnp.float64 if x64 else jnp.float32
    qc = np.zeros(h, np.int32)
    tc = np.zeros(w, np.int32)
    qc[:n], tc[:n] = scoring.encode(q), scoring.encode(t)
    S = substitution_scores(qc, tc, scoring, dtype)[None]
    go, ge = gap_scores(scoring)
    m = jnp.array([n])
    args = (S, go, ge, m, m)
    kw = dict(local=mode == "local", temperature=1.0)
    gpu = jax.default_backend() == "gpu"
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    lz, P = batch_posteriors(*args, **kw)
    P.block_until_ready()
    first = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        lz, P = batch_posteriors(*args, **kw)
        P.block_until_ready()
        best = min(best, time.perf_counter() - t0)
    if gpu:
        peak = jax.devices()[0].memory_stats().get("peak_bytes_in_use", 0)
    else:
        peak = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024
    P = np.asarray(P[0, :n, :n], np.float64)
    return {"n": n, "mode": mode, "dtype": "float64" if x64 else "float32",
            "backend": jax.default_backend(), "log_partition": float(lz[0]),
            "first_s": first, "best_s": best, "gcups": n * n / best / 1e9,
            "estimate_bytes": posterior_bytes(h, w, 8 if x64 else 4), "peak_bytes": peak,
            "row_sum_max": float(P.sum(axis=1).max()),
            "P": P.tolist() if n <= 1000 and os.environ.get("BENCH_KEEP_P") else None}


def _child(n: int, mode: str, repeat: int, x64: bool) -> dict:
    """One measurement in a fresh process (a clean peak resident set)."""
    cmd = [sys.executable, __file__, "--child", str(n), mode, str(repeat), str(int(x64))]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.path.dirname(
                             os.path.dirname(os.path.abspath(__file__)))})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000])
    ap.add_argument("--modes", nargs="+", default=["global", "local"])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--check", action="store_true",
                    help="compare float32 with float64 posteriors at the smallest size")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        n, mode, repeat, x64 = args.child
        print(json.dumps(run_one(int(n), mode, int(repeat), bool(int(x64)))))
        return 0
    import jax

    print(f"backend {jax.default_backend()}, {jax.devices()[0].device_kind}, "
          f"{os.cpu_count()} CPUs visible")
    print(f"{'n':>6} {'mode':>6} {'dtype':>7} {'ln Z':>12} {'compile+run s':>13} "
          f"{'run s':>8} {'Gcells/s':>8} {'estimate MB':>11} {'peak MB':>8} {'max row sum':>11}")
    rows = []
    for n in args.sizes:
        for mode in args.modes:
            r = _child(n, mode, args.repeat, False)
            rows.append(r)
            print(f"{n:>6} {mode:>6} {r['dtype']:>7} {r['log_partition']:>12.4f} "
                  f"{r['first_s']:>13.2f} {r['best_s']:>8.3f} {r['gcups']:>8.4f} "
                  f"{r['estimate_bytes'] / 2**20:>11.0f} {r['peak_bytes'] / 2**20:>8.0f} "
                  f"{r['row_sum_max']:>11.6f}", flush=True)
    if args.check:
        n = min(args.sizes)
        os.environ["BENCH_KEEP_P"] = "1"
        for mode in args.modes:
            a = _child(n, mode, 0, False)
            b = _child(n, mode, 0, True)
            pa, pb = np.array(a["P"]), np.array(b["P"])
            print(f"float32 vs float64, {n} x {n} {mode}: ln Z {a['log_partition']:.6f} vs "
                  f"{b['log_partition']:.6f}; max |dP| {np.abs(pa - pb).max():.2e}; "
                  f"float64 run {b['best_s'] if b['best_s'] != float('inf') else b['first_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
