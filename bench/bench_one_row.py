"""Tracing, lowering and compile times of the programs that run one row (one long sequence),
the size of their StableHLO, and one run each, on whatever device JAX sees: the energy model's
partition program (``energy.partition``, JAX engine), its MFE fill and traceback, and the
Nussinov GPU fill (``fold._fold_program``, its Pallas path traced in interpret mode off a GPU).
Run it from two trees (``PYTHONPATH``) to compare them, e.g. ``main`` against the branch that
runs a one-row batch without ``vmap`` (``batching.map_rows``):

    PYTHONPATH=. python bench/bench_one_row.py --partition 1024 --mfe 2048 --fold 16384

Each program is measured in a fresh process (no tracing cache shared); one line each.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time


def _lines(lowered) -> int:
    return lowered.as_text().count("\n")


def _timed(jitted, specs, static=None, run_args=None) -> str:
    import jax

    t0 = time.perf_counter()
    traced = jitted.trace(*specs, **(static or {}))
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    out = f"trace {t1 - t0:.2f} lower {t2 - t1:.2f} compile {t3 - t2:.2f} s, {_lines(lowered)} lines"
    if run_args is not None:
        runs = []
        for _ in range(2):
            t = time.perf_counter()
            jax.block_until_ready(compiled(*run_args))
            runs.append(time.perf_counter() - t)
        out += f", runs {' / '.join(f'{r:.3f}' for r in runs)} s"
    return out


def _spec(x):
    import jax
    import numpy as np

    return jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype)


def partition(length: int) -> str:
    import jax

    jax.config.update("jax_enable_x64", True)
    from jaxrna.energy.partition import batch_inputs, batch_jitted

    rng = random.Random(length)
    seq = "".join(rng.choice("ACGU") for _ in range(length - 10))
    args, _ = batch_inputs([seq], length=length)
    specs = jax.tree_util.tree_map(_spec, args)
    return f"partition {length} nt x 1: " + _timed(batch_jitted(), specs, run_args=args)


def mfe(length: int) -> str:
    from jaxrna.energy import mfe_programs as mp

    params = mp.load_params()
    import jax

    platform = jax.devices()[0].platform
    fill = mp._specs(length, 1, params)[:-1]
    static = mp.static_for(platform, length)
    out = f"mfe fill {length} nt x 1: " + _timed(mp.fill_jitted(), fill, static)
    trace = mp._trace_specs(length, 1) + fill[:6]
    return out + f"\nmfe traceback {length} nt x 1: " + _timed(mp.trace_jitted(), trace)


def fold(length: int) -> str:
    from functools import partial

    import jax
    import jax.numpy as jnp

    from jaxrna.fold import api

    gpu = jax.devices()[0].platform == "gpu"
    f = jax.jit(partial(api._fold_program, tile=64, groups=8, with_pairs=True, sequential=False,
                        walk="kernel", maxplus="pallas", interpret=not gpu))
    specs = (jax.ShapeDtypeStruct((1, length), jnp.int8), jax.ShapeDtypeStruct((1,), jnp.int32),
             jax.ShapeDtypeStruct((5, 5), jnp.int32), jax.ShapeDtypeStruct((), jnp.int32))
    if not gpu:         # the Pallas path in interpret mode: traced and lowered, not compiled
        t0 = time.perf_counter()
        lowered = f.trace(*specs).lower()
        return (f"fold (Nussinov, GPU path, interpret) {length} nt x 1: traced and lowered in "
                f"{time.perf_counter() - t0:.2f} s, {_lines(lowered)} lines")
    return f"fold (Nussinov) {length} nt x 1: " + _timed(f, specs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partition", type=int, default=0, help="padded length (0: skip)")
    ap.add_argument("--mfe", type=int, default=0, help="padded length (0: skip)")
    ap.add_argument("--fold", type=int, default=0, help="padded length (0: skip)")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        kind, length = args.one
        print({"partition": partition, "mfe": mfe, "fold": fold}[kind](int(length)), flush=True)
        return
    for kind in ("partition", "mfe", "fold"):
        length = getattr(args, kind)
        if length:
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", kind,
                                   str(length)], capture_output=True, text=True)
            print(done.stdout.strip() if done.returncode == 0
                  else f"{kind} {length}: failed\n{done.stderr[-2000:]}", flush=True)


if __name__ == "__main__":
    main()
