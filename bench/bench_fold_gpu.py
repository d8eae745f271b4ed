"""Benchmark the GPU Nussinov fill (jaxrna.fold.gpu) against seed 001's Table 2 (Li, Ranka,
Sahni 2014, NVIDIA C2050): fill seconds, split operations per second (n^3/6 / s), % of the
max-plus ceiling measured in the same run, compile time apart, and the traceback.

    PYTHONPATH=. python3 bench/bench_fold_gpu.py --sizes 2000,6000,16000 \
        [--check 1500] [--traceback 16000] [--ceiling-json c.json] [--json out.json]

``--check N`` first compares the GPU table with the CPU fill (jaxrna.fold.fill on the CPU
device) for every weight set at length N, and the GPU traceback with the host traceback.
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

from jaxrna.alphabet import encode
from jaxrna.fold.fill import nussinov_fill
from jaxrna.fold.gpu import (LARGE_CONFIG, SMALL_CONFIG, GpuFoldConfig, config_for_length,
                             device_memory_limit, estimate_gpu_bytes, fill_packed, max_length_for,
                             packed_score, traceback_device)
from jaxrna.fold.packed import packed_to_dense
from jaxrna.fold.traceback import traceback
from jaxrna.weights import parse_weights

#: Seed 001, Table 2: seconds on an NVIDIA Tesla C2050 (Ours1 full table, Ours2 packed).
SEED_TABLE2 = {2000: (0.1, 0.1), 6000: (0.6, 0.7), 10000: (1.9, 2.2), 14000: (4.5, 5.1),
               18000: (8.8, 9.9), 22000: (15.1, 16.9), 26000: (23.9, 26.7), 37000: (None, 71.5)}


def random_seq(n: int, seed: int) -> str:
    return "".join(np.random.default_rng(seed).choice(list("ACGU"), n))


def pad_codes(seq: str, tile: int) -> np.ndarray:
    out = np.full(-(-len(seq) // tile) * tile, 4, dtype=np.int32)
    out[:len(seq)] = encode(seq)
    return out


def dense_from_rows(rows: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, n), dtype=np.int32)
    for d in range(n):
        i = np.arange(n - d)
        out[i, i + d] = rows[1 + d, :n - d]
    return out


def check(n: int, cfg: GpuFoldConfig, interpret: bool = False) -> list[dict]:
    cpu = jax.devices("cpu")[0]
    res = []
    for k, ws in enumerate(["unit", "bpmax", "integer", "GC=2.5,AU=1,GU=0.5"]):
        for min_loop in (3, 0):
            seq = random_seq(n + 7 * k, 100 + k)
            w = parse_weights(ws)
            codes = pad_codes(seq, cfg.tile)
            tab = fill_packed(jnp.asarray(codes), jnp.asarray(w.matrix()), min_loop, cfg, interpret)
            gpu = packed_to_dense(np.asarray(tab), len(seq))
            with jax.default_device(cpu):
                rows = nussinov_fill(jax.device_put(encode(seq), cpu),
                                     jax.device_put(w.matrix(), cpu), min_loop=min_loop)
            ref = dense_from_rows(np.asarray(rows), len(seq))
            same = bool((gpu == ref).all())
            partner, ok = traceback_device(tab, jnp.asarray(codes), jnp.asarray(w.matrix()),
                                           len(seq), min_loop)
            partner = np.asarray(partner)[:len(seq)]
            pairs = [(int(i), int(partner[i])) for i in np.flatnonzero(partner > np.arange(len(seq)))]
            host = traceback(ref, encode(seq), w.matrix(), min_loop)
            r = {"n": len(seq), "weights": ws, "min_loop": min_loop, "table_equal": same,
                 "pairs_equal": pairs == host and bool(ok), "score": int(ref[0, -1])}
            res.append(r)
            print("check", json.dumps(r), flush=True)
    return res


def bench_size(n: int, cfg: GpuFoldConfig, reps: int, with_tb: bool, interpret: bool = False,
               stages: str = "all") -> dict:
    seq = random_seq(n, n)
    codes = jnp.asarray(pad_codes(seq, cfg.tile))
    w = jnp.asarray(parse_weights("unit").matrix())
    t0 = time.perf_counter()
    min_loop = jnp.int32(3)     # traced: an argument of the compiled program
    compiled = fill_packed.lower(codes, w, min_loop, cfg, interpret, stages).compile()
    compile_s = time.perf_counter() - t0
    times = []
    tab = None
    for _ in range(reps):
        tab = None
        t0 = time.perf_counter()
        tab = jax.block_until_ready(compiled(codes, w, min_loop))
        times.append(time.perf_counter() - t0)
    sec = statistics.median(times)
    score = int(packed_score(tab, n))
    stats = jax.devices()[0].memory_stats() or {}
    r = {"n": n, "config": dataclasses.asdict(cfg), "stages": stages, "fill_s": sec, "fill_all_s": times,
         "compile_s": compile_s, "split_ops_per_s": n ** 3 / 6 / sec, "score": score,
         "estimate_bytes": estimate_gpu_bytes(n, cfg),
         "peak_bytes": stats.get("peak_bytes_in_use")}
    if with_tb:
        t0 = time.perf_counter()
        partner, ok = traceback_device(tab, codes, w, n, 3)
        partner = np.asarray(partner)[:n]
        r["traceback_first_s"] = time.perf_counter() - t0     # includes its compilation
        t0 = time.perf_counter()
        partner, ok = traceback_device(tab, codes, w, n, 3)
        partner = np.asarray(partner)[:n]
        r["traceback_s"] = time.perf_counter() - t0
        r["traceback_ok"] = bool(ok)
        r["pairs"] = int((partner >= 0).sum() // 2)
    del tab
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,6000,10000,14000,16000,26000,37000,65536,100000")
    ap.add_argument("--tile", type=int, default=128)
    ap.add_argument("--block", type=int, default=128)
    ap.add_argument("--block-n", type=int, default=0)
    ap.add_argument("--unroll", type=int, default=16)
    ap.add_argument("--variant", default="outer")
    ap.add_argument("--ru", type=int, default=8)
    ap.add_argument("--rv", type=int, default=8)
    ap.add_argument("--stages", default="all", help="profiling: all, bulk or finish")
    ap.add_argument("--asm", action="store_true", help="inline-PTX add+max in the bulk kernel")
    ap.add_argument("--bulk-warps", type=int, default=4)
    ap.add_argument("--finish-warps", type=int, default=8)
    ap.add_argument("--target", type=int, default=528)
    ap.add_argument("--check", type=int, default=0)
    ap.add_argument("--traceback", default="", help="sizes whose traceback is timed")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--ceiling-json")
    ap.add_argument("--auto", action="store_true",
                    help="the library's per-length configuration (config_for_length)")
    ap.add_argument("--configs", help="JSON list of GpuFoldConfig overrides to try at --select-at")
    ap.add_argument("--select-at", type=int, default=16000)
    ap.add_argument("--json")
    ap.add_argument("--interpret", action="store_true", help="Pallas interpret mode (CPU dry run)")
    args = ap.parse_args(argv)
    cfg = GpuFoldConfig(tile=args.tile, block=args.block, block_n=args.block_n, unroll=args.unroll,
                        variant=args.variant, ru=args.ru, rv=args.rv, asm=args.asm,
                        bulk_warps=args.bulk_warps, finish_warps=args.finish_warps,
                        target_programs=args.target)
    print("jax", jax.__version__, jax.devices(), cfg, flush=True)
    ceiling = None
    if args.ceiling_json:
        for line in open(args.ceiling_json):
            if line.startswith("{"):
                ceiling = json.loads(line)["updates_per_s"]["int32"]
    out = {"config": dataclasses.asdict(cfg), "ceiling_int32": ceiling, "jax": jax.__version__,
           "device": str(jax.devices()[0]), "device_kind": jax.devices()[0].device_kind,
           "checks": [], "rows": [],
           "memory_limit_bytes": device_memory_limit(), "argv": sys.argv,
           "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    out["max_length_nt"] = max_length_for(out["memory_limit_bytes"]) if out["memory_limit_bytes"] else None
    print("memory limit", out["memory_limit_bytes"], "longest foldable", out["max_length_nt"], flush=True)
    if args.configs:
        trials = []
        for over in json.loads(args.configs):
            c = dataclasses.replace(cfg, **over)
            try:
                r = bench_size(args.select_at, c, args.reps, False, args.interpret)
            except Exception as exc:
                r = {"n": args.select_at, "config": dataclasses.asdict(c), "error": repr(exc)[:300]}
            trials.append(r)
            print("trial", json.dumps(r), flush=True)
        out["trials"] = trials
        good = [r for r in trials if "fill_s" in r]
        if good:
            cfg = GpuFoldConfig(**min(good, key=lambda r: r["fill_s"])["config"])
            out["config"] = dataclasses.asdict(cfg)
        for r in trials:
            print(f"trial {r['n']} {r.get('fill_s', float('nan')):.4f} s  {json.dumps({k: v for k, v in r['config'].items() if v != getattr(GpuFoldConfig(), k)})}")
        print("selected", cfg, flush=True)
    if args.check:
        for c in ([SMALL_CONFIG, LARGE_CONFIG] if args.auto else [cfg]):
            out["checks"] += check(args.check, c, args.interpret)
    tb = {int(x) for x in args.traceback.split(",") if x}
    for n in [int(x) for x in args.sizes.split(",") if x]:
        try:
            c = config_for_length(n) if args.auto else cfg
            r = bench_size(n, c, args.reps if n < 30000 else 1, n in tb, args.interpret, args.stages)
        except Exception as exc:
            r = {"n": n, "error": repr(exc)[:500]}
        out["rows"].append(r)
        print(json.dumps(r), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print(f"\n{'n':>7s} {'tile':>4s} {'fill s':>8s} {'G split/s':>10s} {'% ceil':>7s} {'compile s':>9s} "
          f"{'tb s':>6s} {'peak GB':>7s} {'Ours1 s':>7s} {'Ours2 s':>7s}")
    for r in out["rows"]:
        if "error" in r:
            print(f"{r['n']:7d} ERROR {r['error'][:90]}")
            continue
        s1, s2 = SEED_TABLE2.get(r["n"], (None, None))
        pct = f"{100 * r['split_ops_per_s'] / ceiling:6.1f}%" if ceiling else "   n/a"
        tbs = f"{r['traceback_s']:6.2f}" if "traceback_s" in r else "     -"
        peak = f"{r['peak_bytes'] / 1e9:7.1f}" if r.get("peak_bytes") else "      -"
        print(f"{r['n']:7d} {r['config']['tile']:4d} {r['fill_s']:8.3f} {r['split_ops_per_s'] / 1e9:10.0f} {pct:>7s} "
              f"{r['compile_s']:9.1f} {tbs} {peak} {s1 if s1 else '-':>7} {s2 if s2 else '-':>7}")
    if out["checks"]:
        bad = [c for c in out["checks"] if not (c["table_equal"] and c["pairs_equal"])]
        print(f"checks: {len(out['checks']) - len(bad)}/{len(out['checks'])} equal to the CPU path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
