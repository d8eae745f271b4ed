"""Benchmark the Pallas max-plus kernel alone: ``C = max(C, A (x) B)`` at M = K = N (default 4096).

Checks every variant against the pure-JAX path on fresh random inputs (ragged shapes too)
before timing it, then reports max-plus updates per second (M*N*K / time) and, given the
ceiling measured in the same run (``--ceiling-json``, the output of
``.gpu/maxplus_ceiling.py --json``), the fraction of it.

    PYTHONPATH=. python3 bench/bench_tropical.py [--size 4096] [--sweep] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.kernels.tropical import maxplus_update_xla
from jaxrna.kernels.tropical_pallas import KernelConfig, Structure, maxplus_update_pallas

SWEEP = [  # the candidates of the last tuning round (2026-11-21, H200); the default first
    KernelConfig(),
    KernelConfig(block_m=64, num_warps=2),
    KernelConfig(block_m=64, num_warps=2, ru=4, rv=16, unroll=16),
    KernelConfig(block_m=64, num_warps=2, asm=False),
    KernelConfig(block_m=128, num_warps=4, variant="outer", asm=False, unroll=16),
    KernelConfig(block_m=64, block_n=64, num_warps=2, unroll=8, variant="bcast3d", asm=False),
]


def check(cfg: KernelConfig, rng, dtype=jnp.int32) -> bool:
    ok = True
    for shape in [(1, 300, 77, 260), (3, 64, 128, 64), (1, 129, 1, 33)]:
        b, m, k, n = shape
        a = jnp.asarray(rng.integers(-1000, 1000, (b, m, k)), dtype)
        bb = jnp.asarray(rng.integers(-1000, 1000, (b, k, n)), dtype)
        c = jnp.asarray(rng.integers(-3000, 3000, (b, m, n)), dtype)
        got = maxplus_update_pallas(c, a, bb, config=cfg)
        ok &= bool((got == maxplus_update_xla(c, a, bb)).all())
    # triangular skip: upper-triangular operands
    m = 320
    st = Structure.upper()
    ma, mb = st.mask(m, m, m)
    neg = -(1 << 29)
    a = jnp.asarray(np.where(ma, rng.integers(0, 1000, (m, m)), neg), dtype)
    bb = jnp.asarray(np.where(mb, rng.integers(0, 1000, (m, m)), neg), dtype)
    c = jnp.full((m, m), neg, dtype)
    sat = lambda x: jnp.maximum(x, neg // 2)  # noqa: E731  (every value <= NEG/2 is -infinity)
    ok &= bool((sat(maxplus_update_pallas(c, a, bb, config=cfg, structure=st))
                == sat(maxplus_update_xla(c, a, bb))).all())
    return ok


def time_fn(fn, reps: int) -> float:
    jax.block_until_ready(fn())
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(cfg: KernelConfig, size: int, rng, reps: int, dtype=jnp.int32, structure=None) -> dict:
    sets = []
    for _ in range(2):  # rotate two input sets
        a = jnp.asarray(rng.integers(-1000, 1000, (size, size)), dtype)
        b = jnp.asarray(rng.integers(-1000, 1000, (size, size)), dtype)
        c = jnp.asarray(rng.integers(-3000, 3000, (size, size)), dtype)
        if structure is not None:
            ma, mb = structure.mask(size, size, size)
            a = jnp.where(jnp.asarray(ma), a, -(1 << 29)).astype(dtype)
            b = jnp.where(jnp.asarray(mb), b, -(1 << 29)).astype(dtype)
        sets.append((c, a, b))
    f = jax.jit(lambda c, a, b: maxplus_update_pallas(c, a, b, config=cfg, structure=structure))
    t0 = time.perf_counter()
    first = jax.block_until_ready(f(*sets[0]))
    compile_s = time.perf_counter() - t0
    correct_full = bool((first == maxplus_update_xla(*sets[0])).all())
    it = iter(range(10**9))
    sec = time_fn(lambda: f(*sets[next(it) % 2]), reps)
    return {"config": dataclasses.asdict(cfg), "dtype": jnp.dtype(dtype).name, "size": size,
            "structure": None if structure is None else dataclasses.asdict(structure),
            "seconds": sec, "compile_s": compile_s, "correct": correct_full,
            # useful updates: all of them, or the n^3/6 of two upper-triangular operands
            "updates_per_s": (size ** 3 if structure is None else size ** 3 / 6) / sec}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--sweep", action="store_true", help="try every config in SWEEP")
    ap.add_argument("--ceiling-json", help="file holding maxplus_ceiling.py --json output")
    ap.add_argument("--json", help="write all results here")
    args = ap.parse_args(argv)
    print("jax", jax.__version__, jax.devices(), flush=True)
    ceiling = None
    if args.ceiling_json:
        for line in open(args.ceiling_json):
            if line.startswith("{"):
                ceiling = json.loads(line)["updates_per_s"]
    rng = np.random.default_rng(int(time.time()))
    configs = SWEEP if args.sweep else [KernelConfig()]
    rows = []
    for cfg in configs:
        try:
            r = bench(cfg, args.size, rng, args.reps)
        except Exception as exc:  # keep going: report the failure
            r = {"config": dataclasses.asdict(cfg), "error": repr(exc)[:400]}
        rows.append(r)
        print(json.dumps(r), flush=True)
    # the pure-JAX path on the same device, for comparison
    try:
        a = jnp.asarray(rng.integers(-1000, 1000, (args.size, args.size)), jnp.int32)
        b = jnp.asarray(rng.integers(-1000, 1000, (args.size, args.size)), jnp.int32)
        c = jnp.asarray(rng.integers(-3000, 3000, (args.size, args.size)), jnp.int32)
        sec = time_fn(lambda: maxplus_update_xla(c, a, b), 3)
        xla_row = {"config": {"variant": "xla (pure JAX)", "block_m": 0, "block_n": 0, "unroll": 0,
                              "num_warps": 0, "num_stages": 0}, "dtype": "int32",
                   "size": args.size, "seconds": sec, "compile_s": 0.0, "correct": True,
                   "updates_per_s": args.size ** 3 / sec}
        print(json.dumps(xla_row), flush=True)
    except Exception as exc:
        xla_row = None
        print("xla timing failed", repr(exc)[:200])
    best = max((r for r in rows if "updates_per_s" in r and r.get("correct")),
               key=lambda r: r["updates_per_s"], default=None)
    if best is not None:
        cfg = KernelConfig(**best["config"])
        best["correct_ragged"] = check(cfg, rng)
        print("ragged/triangular check of the best config:", best["correct_ragged"], flush=True)
        for extra in (dict(dtype=jnp.float32), dict(structure=Structure.upper())):
            try:
                r = bench(cfg, args.size, rng, args.reps, **extra)
                rows.append(r)
                print(json.dumps(r), flush=True)
            except Exception as exc:
                print("extra failed", extra, repr(exc)[:300], flush=True)
    if xla_row:
        rows.append(xla_row)
    print(f"\n{'variant':44s} {'dtype':7s} {'ok':3s} {'ms':>8s} {'T upd/s':>8s} {'% ceil':>7s} {'compile s':>9s}")
    for r in rows:
        c = r["config"]
        name = f"{c['variant']} {c['block_m']}x{c['block_n']} u{c['unroll']} w{c['num_warps']} s{c['num_stages']}"
        if c.get("asm"):
            name += " asm"
        if c["variant"] == "blocked":
            name += f" r{c['ru']}x{c['rv']}"
        if r.get("structure"):
            name += " upper"
        if "error" in r:
            print(f"{name:44s} ERROR {r['error'][:60]}")
            continue
        ceil = ceiling.get("int32" if r["dtype"] == "int32" else "fp32") if ceiling else None
        pct = f"{100 * r['updates_per_s'] / ceil:6.1f}%" if ceil else "   n/a"
        print(f"{name:44s} {r['dtype']:7s} {str(r.get('correct', '-'))[:3]:3s} {1e3 * r['seconds']:8.2f} "
              f"{r['updates_per_s'] / 1e12:8.2f} {pct:>7s} {r['compile_s']:9.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"ceiling": ceiling, "rows": rows, "jax": jax.__version__,
                       "device": str(jax.devices()[0]), "device_kind": jax.devices()[0].device_kind,
                       "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
