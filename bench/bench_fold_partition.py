"""Benchmark: base-pair probabilities of the Nussinov model (`jaxrna fold --partition`).

For each length: one random sequence (fixed seed, ACGU uniform), unit weights, min loop 3,
T = 1, float64. Times, after compilation (compile times reported apart): the forward pass
(ln Z) and the outside pass (all pair probabilities) of the tiled path (or --method exact),
and -- for comparison of scale only -- ViennaRNA's partition function with base-pair
probabilities on the same sequence (`RNA.fold_compound(seq)`, `mfe()` to rescale, then
`pf()`), which is a *different, energy-based model* (Turner 2004 nearest-neighbour loop
energies, far more terms per cell than base-pair counting): the times are not a like-for-like
comparison. ViennaRNA runs on the CPU in a child process with a time limit; it is skipped
when not installed.

    PYTHONPATH=. python3 bench/bench_fold_partition.py --lengths 1000 4000 10000
    PYTHONPATH=. python3 bench/bench_fold_partition.py --lengths 1000 --check-up-to 1000 --json out.json
    PYTHONPATH=. python3 bench/bench_fold_partition.py --api --lengths 100 300 700 2000

`--check-up-to N` also runs the exact log-space path for lengths <= N (default 1000) and
reports the largest difference of the two paths' probabilities. Measured on this project's
2-core CPU (jax 0.10.2, float64): 1,000 nt 0.47 s (exact path 2.4 s, ViennaRNA pf 2.9 s),
4,000 nt 11 s (ViennaRNA 160 s), 10,000 nt 266 s at 11 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrna.alphabet import encode  # noqa: E402
from jaxrna.fold import partition as pt  # noqa: E402
from jaxrna.weights import parse_weights  # noqa: E402

VIENNA_CHILD = r"""
import sys, time, json
import RNA
seq = sys.stdin.read().strip()
fc = RNA.fold_compound(seq)
t0 = time.perf_counter(); _, mfe = fc.mfe(); t1 = time.perf_counter()
fc.exp_params_rescale(mfe)
t2 = time.perf_counter(); _, g = fc.pf(); t3 = time.perf_counter()
bpp = fc.bpp()
print(json.dumps({"mfe_s": t1 - t0, "pf_s": t3 - t2, "ensemble_energy": g,
                  "version": RNA.__version__}))
"""


def rand_seq(n: int, seed: int = 2024) -> str:
    rng = random.Random(seed * 100003 + n)
    return "".join(rng.choice("ACGU") for _ in range(n))


def vienna_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("RNA") is not None


def time_vienna(seq: str, timeout: float) -> dict:
    try:
        out = subprocess.run([sys.executable, "-c", VIENNA_CHILD], input=seq, text=True,
                             capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"skipped": f"over {timeout:.0f} s"}
    if out.returncode != 0:
        return {"skipped": "failed: " + out.stderr.strip().splitlines()[-1][:120]}
    return json.loads(out.stdout)


def _block(x):
    return jax.tree_util.tree_map(lambda a: a.block_until_ready(), x)


def time_jaxrna(seq: str, method: str, tile: int, repeats: int) -> dict:
    """Compile times and best-of-``repeats`` run times of the forward and outside passes."""
    n = len(seq)
    w = parse_weights("unit")
    wm = jnp.asarray(w.matrix(), jnp.float64)
    lw = _block(pt._prepare(jnp.asarray(encode(seq), jnp.int32), wm, 3, jnp.float64(1.0)))
    t0 = time.perf_counter()
    fwd = pt._forward_jit.lower(lw, method=method, tile=tile).compile()
    t1 = time.perf_counter()
    lnz, guard, res = _block(fwd(lw))
    t2 = time.perf_counter()
    bwd = pt._backward_jit.lower(lw, res, lnz, method=method, tile=tile).compile()
    t3 = time.perf_counter()
    P = _block(bwd(lw, res, lnz))
    t4 = time.perf_counter()
    f_runs, b_runs = [t2 - t1], [t4 - t3]
    for _ in range(repeats - 1):
        a = time.perf_counter()
        lnz, guard, res = _block(fwd(lw))
        b = time.perf_counter()
        P = _block(bwd(lw, res, lnz))
        c = time.perf_counter()
        f_runs.append(b - a)
        b_runs.append(c - b)
    P = np.asarray(P)
    return {"n": n, "method": method, "tile": tile if method == "blocked" else None,
            "compile_forward_s": t1 - t0, "compile_outside_s": t3 - t2,
            "forward_s": min(f_runs), "outside_s": min(b_runs),
            "total_s": min(f_runs) + min(b_runs), "runs": len(f_runs),
            "log_partition": float(lnz), "guard": float(guard),
            "expected_pairs": float(P.sum()), "max_pair_sum": float((P + P.T).sum(1).max()),
            "_P": P}


def peak_memory(backend: str) -> float | None:
    """Peak bytes: the device's peak on a GPU, this process's peak RSS on a CPU."""
    if backend == "gpu":
        stats = jax.devices("gpu")[0].memory_stats() or {}
        return stats.get("peak_bytes_in_use")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def api_times(lengths: list[int], repeats: int, json_path: str | None) -> None:
    """Warm time of :func:`jaxrna.fold.partition.partition` for single random sequences on
    JAX's default device: the first call (compile or cache load) apart, then the best of
    ``repeats`` calls in this process. Only the public string API is called, so the same
    script times any jaxrna tree (``PYTHONPATH=that_tree``): run two trees on one machine to
    compare them (issue 26: warm runs no more than 10% slower)."""
    import jaxrna

    rows = []
    print(f"# {jaxrna.__file__} on {jax.devices()[0]}")
    print("length\tfirst_s\twarm_s\tlog_partition")
    for n in lengths:
        seq = rand_seq(n)
        start = time.perf_counter()
        r = pt.partition(seq)
        first = time.perf_counter() - start
        warm = []
        for _ in range(repeats):
            start = time.perf_counter()
            r = pt.partition(seq)
            warm.append(time.perf_counter() - start)
        rows.append(dict(length=n, first_s=first, warm_s=min(warm),
                         log_partition=r.log_partition))
        print(f"{n}\t{first:.2f}\t{min(warm):.4f}\t{r.log_partition:.10f}", flush=True)
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(dict(tree=jaxrna.__file__, device=str(jax.devices()[0]), rows=rows), fh,
                      indent=1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[1000, 4000])
    ap.add_argument("--method", choices=["blocked", "exact"], default="blocked")
    ap.add_argument("--tile", type=int, default=None, help="tile side (default: by length)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="timed runs per length (default 3 up to 2,000 nt, else 1)")
    ap.add_argument("--check-up-to", type=int, default=1000,
                    help="also run the exact path up to this length and compare (0: never)")
    ap.add_argument("--vienna-up-to", type=int, default=None,
                    help="run ViennaRNA up to this length (default 4000 on a CPU run, 1000 on "
                         "a GPU run: ViennaRNA is CPU-only and ~160 s at 4,000 nt)")
    ap.add_argument("--vienna-timeout", type=float, default=900.0)
    ap.add_argument("--no-vienna", action="store_true")
    ap.add_argument("--backend", choices=["auto", "cpu", "gpu"], default="auto")
    ap.add_argument("--json", metavar="FILE", help="write the results as JSON")
    ap.add_argument("--api", action="store_true",
                    help="time the string API instead (what the CLI runs per record, padded "
                         "to its class): first call and best of --repeats warm calls")
    args = ap.parse_args()
    if args.api:
        return api_times(args.lengths, args.repeats or 3, args.json)

    from jaxrna.runtime import resolve_backend

    backend = resolve_backend(args.backend)
    device = jax.devices(backend)[0]
    vienna = not args.no_vienna and vienna_available()
    vienna_up_to = args.vienna_up_to or (1000 if backend == "gpu" else 4000)
    info = {"date": time.strftime("%Y-%m-%d"), "jax": jax.__version__, "backend": backend,
            "device": getattr(device, "device_kind", str(device)),
            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "model": "Nussinov, unit weights, min loop 3, T = 1, float64"}
    print(f"# jaxrna fold --partition benchmark: {info['device']} ({backend}), "
          f"{info['cores']} CPU cores, jax {jax.__version__}, {info['date']}")
    print(f"# {info['model']}; ViennaRNA: "
          + ("energy model, CPU, a different model (scale only)" if vienna else "not run"))
    rows = []
    with pt.float64(), jax.default_device(device):
        print("\n| n | method | tile | compile (s) | ln Z forward (s) | outside (s) | "
              "total (s) | ln Z | E[pairs] | guard | exact path (s) | max dP | "
              "ViennaRNA pf (s) | peak memory |")
        print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n in args.lengths:
            seq = rand_seq(n)
            tile = args.tile or pt.default_tile(pt.padded_length(n))
            repeats = args.repeats or (3 if n <= 2000 else 1)
            r = time_jaxrna(seq, args.method, tile, repeats)
            P = r.pop("_P")
            if args.method == "blocked" and n <= args.check_up_to:
                e = time_jaxrna(seq, "exact", tile, 1)
                r["exact_total_s"] = e["total_s"]
                r["exact_compile_s"] = e["compile_forward_s"] + e["compile_outside_s"]
                r["max_abs_dP"] = float(np.abs(e.pop("_P") - P).max())
                r["log_partition_rel_diff"] = abs(e["log_partition"] - r["log_partition"]) / \
                    abs(e["log_partition"])
            r["peak_memory_bytes"] = peak_memory(backend)
            if vienna and n <= vienna_up_to:
                r["vienna"] = time_vienna(seq, args.vienna_timeout)
            rows.append(r)
            v = r.get("vienna", {})
            vtxt = f"{v['pf_s']:.2f}" if "pf_s" in v else v.get("skipped", "-")
            mem = r["peak_memory_bytes"]
            memtxt = f"{mem / 2**30:.2f} GiB" if mem else "-"
            print(f"| {n:,} | {r['method']} | {r['tile'] or '-'} | "
                  f"{r['compile_forward_s'] + r['compile_outside_s']:.1f} | "
                  f"{r['forward_s']:.3f} | {r['outside_s']:.3f} | {r['total_s']:.3f} | "
                  f"{r['log_partition']:.6f} | {r['expected_pairs']:.2f} | {r['guard']:.0f} | "
                  f"{r.get('exact_total_s', float('nan')):.2f} | "
                  f"{r.get('max_abs_dP', float('nan')):.1e} | {vtxt} | {memtxt} |", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"info": info, "results": rows}, fh, indent=1)
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
