"""The gradient of the expected partition function (issue 25): ``jax.jit(jax.value_and_grad(f))``
of :func:`jaxrna.energy.partition_expected.expected_log_z` for a random probabilistic sequence
(a fixed seed), float64, per length: the trace + compile seconds, the first call, the mean of
``--repeats`` further calls, and memory: XLA's memory analysis of the compiled program
(temporaries, arguments, outputs; every platform) and, where the device reports it (a GPU),
``peak_bytes_in_use``. One line per length (and a JSON file with ``--json``):

    PYTHONPATH=. python bench/bench_expected_grad.py --lengths 128,256,512 --dangles 2 --repeats 3

``--no-run`` compiles only (the memory analysis without running: the large classes on a CPU).
``--chunk`` sets the dangles-2 segment split's chunk
(:data:`jaxrna.energy.partition_expected_d2.SPLIT_CHUNK`) where the tree has one.
"""

from __future__ import annotations

import argparse
import json
import time


def measure(n: int, dangles: int, repeats: int, run: bool = True, seed: int = 0) -> dict:
    """One length's figures (a dict)."""
    import jax
    import numpy as np

    from jaxrna.energy.partition import length_class, x64
    from jaxrna.energy.partition_expected import expected_log_z

    rng = np.random.default_rng(seed)
    out = {"n": n, "length": length_class(n), "dangles": dangles}
    with x64():
        q = jax.numpy.asarray(rng.dirichlet(np.ones(4), size=n))
        f = jax.jit(jax.value_and_grad(lambda q: expected_log_z(q, dangles=dangles)))
        t0 = time.perf_counter()
        compiled = f.lower(q).compile()
        out["compile_s"] = time.perf_counter() - t0
        mem = compiled.memory_analysis()
        if mem is not None:
            for key in ("temp", "argument", "output", "generated_code"):
                out[f"{key}_bytes"] = int(getattr(mem, f"{key}_size_in_bytes", 0))
        if run:
            t1 = time.perf_counter()
            value, grad = compiled(q)
            jax.block_until_ready(grad)
            out["first_s"] = out["compile_s"] + time.perf_counter() - t1
            out["value"] = float(value)
            out["grad_norm"] = float(np.linalg.norm(np.asarray(grad)))
            times = []
            for _ in range(repeats):
                t1 = time.perf_counter()
                jax.block_until_ready(compiled(q))
                times.append(time.perf_counter() - t1)
            out["mean_s"] = float(np.mean(times)) if times else None
            out["min_s"] = float(np.min(times)) if times else None
        stats = jax.devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            out["peak_bytes"] = int(stats["peak_bytes_in_use"])
    return out


def _line(r: dict) -> str:
    gb = 1e9
    parts = [f"n {r['n']} (class {r['length']}) dangles {r['dangles']}:",
             f"compile {r['compile_s']:.2f} s"]
    if "first_s" in r:
        parts.append(f"first {r['first_s']:.2f} s" + (
            f", mean {r['mean_s']:.3f} s (min {r['min_s']:.3f})" if r.get("mean_s") else ""))
    if "temp_bytes" in r:
        parts.append(f"temp {r['temp_bytes'] / gb:.3f} GB, args {r['argument_bytes'] / gb:.4f}, "
                     f"out {r['output_bytes'] / gb:.4f}")
    if "peak_bytes" in r:
        parts.append(f"peak {r['peak_bytes'] / gb:.3f} GB")
    return ", ".join(parts)


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", default="128,256", help="comma-separated sequence lengths")
    ap.add_argument("--dangles", default="2", help="comma-separated dangle models (0, 2)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-run", action="store_true", help="compile only (memory analysis)")
    ap.add_argument("--chunk", type=int, default=None, help="the d2 split's chunk (if any)")
    ap.add_argument("--json", default=None, help="write the results to this file")
    args = ap.parse_args(argv)
    if args.chunk is not None:
        from jaxrna.energy import partition_expected_d2

        partition_expected_d2.SPLIT_CHUNK = args.chunk
    results = []
    for dangles in (int(x) for x in args.dangles.split(",")):
        for n in (int(x) for x in args.lengths.split(",")):
            r = measure(n, dangles, args.repeats, not args.no_run, args.seed)
            print(_line(r), flush=True)
            results.append(r)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return results


if __name__ == "__main__":
    main()
