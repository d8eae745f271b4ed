"""GPU benchmark for `jaxrna align` (issue 4), meant for one H200.

Measures, after compilation (compile time reported apart where it can be):
  0. checks, compiled, on the GPU: the one-pair-per-lane Pallas kernel gives the pure-JAX
     path's scores and end cells (mixed lengths, global and local, match/mismatch and
     BLOSUM62); the tile wavefront (seed 002's block schedule in Pallas) gives the pure-JAX
     sweep's score, end cell, block-edge checkpoints and direction bits (1,000 x 1,500);
  1. score-only GCUPS for many pairs of 1,000 x 1,000 (default 100,000 pairs: 10^11 cells),
     global and local, through the lane kernel for a few shapes (rows x lanes x warps); the
     pure-JAX batched wavefront on a subset for comparison;
  2. one global pair of 100,000 x 100,000: score only (tile wavefront; pure JAX for
     comparison) and with traceback (tile wavefront, block-edge checkpoints, blocks on the
     path recomputed with direction bits), wall time end to end (compilation included),
     peak GPU memory, the traceback rescored and checked against the score.

    PYTHONPATH=. python3 bench/bench_align_gpu.py [--pairs 100000] [--length 1000] \
        [--long 100000] [--configs 8x128x4,16x128x4,16x64x2,32x32x1] [--tile 128] \
        [--block 2048] [--json out.json]

Needs jax with CUDA and Biopython (imported by jaxrna's I/O). Scores: match 2, mismatch -3,
gap open 5, extend 2 (a gap of length L costs 5 + 2 (L - 1)); random DNA, the long pair a
mutated copy (about 10% substitutions and indels).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from functools import partial

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from jaxrna.align.recurrence import params_of  # noqa: E402
from jaxrna.align.scoring import match_mismatch  # noqa: E402
from jaxrna.kernels.wavefront import batch_sweep, pallas_scores  # noqa: E402
from jaxrna.kernels.wavefront_packed import packed_ok, packed_scores  # noqa: E402

SCORING = match_mismatch(2, -3, 5, 2)


def timed(fn, repeats: int) -> tuple[float, float]:
    """(median seconds after the first call, first call minus that median = compile)."""
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        runs.append(time.perf_counter() - t0)
    med = statistics.median(runs)
    return med, max(0.0, first - med)


def check_kernel(args) -> bool:
    """Compiled Pallas kernel == pure JAX on mixed lengths, both modes, both scorings."""
    from jaxrna.align.scoring import from_matrix

    rng = np.random.default_rng(2)
    ok = True
    for scoring, k in ((SCORING, 4), (from_matrix("BLOSUM62", 11, 1), 20)):
        p = params_of(scoring)
        B, h, w = 300, 77, 129
        q = rng.integers(0, k, (B, h), dtype=np.int32)
        t = rng.integers(0, k, (B, w), dtype=np.int32)
        m = rng.integers(1, h + 1, B, dtype=np.int32)
        n = rng.integers(1, w + 1, B, dtype=np.int32)
        for local in (False, True):
            want = batch_sweep(q, t, m, n, p, local=local, equality=scoring.equality)
            lane = partial(pallas_scores, q, t, m, n, p, local=local, equality=scoring.equality)
            ok &= check_configs(f"check {scoring.name} local={local}", args.configs, lane, want)
            if scoring.equality and args.packed_configs:
                ok &= check_packed(args, q, t, m, n, p, local, want, scoring)
        if not args.no_tile_check:
            ok &= check_tiles(args, scoring, k, rng)
    return ok


def check_configs(label: str, configs: str, run, want) -> bool:
    """Compile and run ``run(rows=, lanes=, num_warps=)`` for each ``RxLxW`` config and compare
    its (score, end row, end column) with ``want``; print one line per config."""
    ok = True
    for cfg in configs.split(","):
        rows, lanes, warps = (int(x) for x in cfg.split("x"))
        try:
            got = run(rows=rows, lanes=lanes, num_warps=warps)
            same = all(bool(jnp.array_equal(a, b)) for a, b in zip(want[:3], got))
        except Exception as exc:
            print(f"{label} {cfg}: failed: {type(exc).__name__}: {str(exc)[:3000]}", flush=True)
            same = False
        ok &= same
        print(f"{label} {cfg}: {'equal' if same else 'DIFFERENT'}", flush=True)
    return ok


def check_packed(args, q, t, m, n, p, local, want, scoring) -> bool:
    """The packed int16x2 kernel (compiled) == pure JAX."""
    assert packed_ok(scoring, q.shape[1] + 32, t.shape[1])
    run = partial(packed_scores, q, t, m, n, p, local=local)
    return check_configs(f"check packed {scoring.name} local={local}", args.packed_configs,
                         run, want)


def check_tiles(args, scoring, k, rng) -> bool:
    """The tile wavefront (compiled) against the pure-JAX sweep on one 1,000 x 1,500 pair:
    score, end cell, block-edge checkpoints and direction bits over the true cells."""
    from jaxrna.align.recurrence import border_col, border_row
    from jaxrna.kernels.wavefront import block_dirs, checkpoint_sweep, tile_wavefront

    p = params_of(scoring)
    tile, block = args.tile, 2 * args.tile
    h, w = 1024, 1536
    ok = True
    for local in (False, True):
        m, n = 1000, 1500
        q = np.zeros(h, np.int32)
        t = np.zeros(w, np.int32)
        q[:m] = rng.integers(0, k, m)
        t[:n] = rng.integers(0, k, n)
        top = border_row(0, w, p.go, p.ge, local)
        left = border_col(0, h, p.go, p.ge, local)
        try:
            out = tile_wavefront(q, t, top, left, m, n, p, local=local, equality=scoring.equality,
                                 tile=tile, block=block, want_dirs=True)
            ends, rows, cols = checkpoint_sweep(jnp.asarray(q), jnp.asarray(t), m, n, p,
                                                local=local, equality=scoring.equality,
                                                block=block)
            same = (int(out["score"]), int(out["end_i"]), int(out["end_j"])) == ends[:3]
            lines = [r for r in range(block, h, block)]
            same &= all(np.array_equal(np.asarray(out["rows"][x])[:, :n + 1], rows[x][:, :n + 1])
                        for x, r in enumerate(lines) if r <= m)
            lines = [c for c in range(block, w, block)]
            same &= all(np.array_equal(np.asarray(out["cols"][x])[:, :m + 1], cols[x][:, :m + 1])
                        for x, c in enumerate(lines) if c <= n)
            sk = np.asarray(block_dirs(q, t, top, left, p, local=local, equality=scoring.equality))
            ii, jj = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
            same &= np.array_equal(np.asarray(out["dirs"])[:m, :n], sk[jj + ii, ii])
        except Exception as exc:
            print(f"check tiles {scoring.name} local={local}: failed: {type(exc).__name__}: "
                  f"{str(exc)[:2000]}", flush=True)
            same = False
        ok &= same
        print(f"check tiles {scoring.name} local={local} tile={tile}: "
              f"{'equal' if same else 'DIFFERENT'}", flush=True)
    return ok


def many_pairs(args, out: list) -> None:
    rng = np.random.default_rng(0)
    B, L = args.pairs, args.length
    q = jnp.asarray(rng.integers(0, 4, (B, L), dtype=np.int32))
    t = jnp.asarray(rng.integers(0, 4, (B, L), dtype=np.int32))
    m = jnp.full((B,), L, jnp.int32)
    n = jnp.full((B,), L, jnp.int32)
    p = params_of(SCORING)
    cells = B * L * L
    check = min(B, 256)
    for mode in ("global", "local"):
        local = mode == "local"
        ref = batch_sweep(q[:check], t[:check], m[:check], n[:check], p, local=local,
                          equality=True)
        for cfg in args.configs.split(","):
            rows, lanes, warps = (int(x) for x in cfg.split("x"))
            fn = lambda: pallas_scores(q, t, m, n, p, local=local, equality=True, rows=rows,  # noqa: E731
                                       lanes=lanes, num_warps=warps)
            try:
                sec, comp = timed(fn, args.repeats)
            except Exception as exc:  # report and go on: one shape may not lower
                print(f"pallas {mode} {cfg}: failed: {type(exc).__name__}: {str(exc)[:300]}")
                continue
            got = pallas_scores(q[:check], t[:check], m[:check], n[:check], p, local=local,
                                equality=True, rows=rows, lanes=lanes, num_warps=warps)
            same = all(bool(jnp.array_equal(a, b)) for a, b in zip(ref[:3], got))
            row = dict(case=f"{B} pairs {L}x{L}", mode=mode, path=f"pallas rows={rows} lanes={lanes} warps={warps}",
                       seconds=sec, compile_s=comp, gcups=cells / sec / 1e9, equal_to_pure_jax=same)
            out.append(row)
            print(row, flush=True)
        assert not args.packed_configs or packed_ok(SCORING, L + 64, L)
        for cfg in (args.packed_configs.split(",") if args.packed_configs else []):
            rows, lanes, warps = (int(x) for x in cfg.split("x"))
            fn = lambda: packed_scores(q, t, m, n, p, local=local, rows=rows, lanes=lanes,  # noqa: E731
                                       num_warps=warps)
            try:
                sec, comp = timed(fn, args.repeats)
            except Exception as exc:
                print(f"packed {mode} {cfg}: failed: {type(exc).__name__}: {str(exc)[:2000]}")
                continue
            got = fn()
            same = all(bool(jnp.array_equal(a[:check], b)) for a, b in zip(got, ref[:3]))
            row = dict(case=f"{B} pairs {L}x{L}", mode=mode,
                       path=f"packed int16x2 rows={rows} lanes={lanes} warps={warps}",
                       seconds=sec, compile_s=comp, gcups=cells / sec / 1e9, equal_to_pure_jax=same)
            out.append(row)
            print(row, flush=True)
        if not args.jax_pairs:
            continue
        sub = min(B, args.jax_pairs)
        fn = lambda: batch_sweep(q[:sub], t[:sub], m[:sub], n[:sub], p, local=local,  # noqa: E731
                                 equality=True, small=False)
        sec, comp = timed(fn, args.repeats)
        row = dict(case=f"{sub} pairs {L}x{L}", mode=mode, path="pure JAX (vmapped antidiagonals)",
                   seconds=sec, compile_s=comp, gcups=sub * L * L / sec / 1e9, equal_to_pure_jax=True)
        out.append(row)
        print(row, flush=True)


def mutate(rng, codes: np.ndarray, rate: float) -> np.ndarray:
    out = []
    r = rng.random(codes.size)
    for c, x in zip(codes, r):
        if x < rate / 3:
            continue                                      # deletion
        if x < 2 * rate / 3:
            out.append(rng.integers(0, 4))                # substitution
        elif x < rate:
            out.extend([c, rng.integers(0, 4)])           # insertion
        else:
            out.append(c)
    return np.asarray(out, np.int32)


def long_pair(args, out: list) -> None:
    """One long global pair: score only and with traceback, through the tile wavefront
    (Pallas, the default on GPU) and, for comparison, the pure-JAX antidiagonal sweep."""
    from jaxrna.align.api import align_records
    from jaxrna.align.reference import rescore
    from jaxrna.io.fasta import Record

    rng = np.random.default_rng(1)
    a = rng.integers(0, 4, args.long).astype(np.int32)
    b = mutate(rng, a, 0.1)[:args.long]
    sa, sb = "".join("ACGT"[c] for c in a), "".join("ACGT"[c] for c in b)
    pair = [(Record("a", sa), Record("b", sb))]
    cells = len(sa) * len(sb)
    backend = jax.default_backend()
    kernel = {"tile": args.tile}
    scores = {}
    runs = [("score only, tile wavefront (Pallas)", dict(score_only=True, use_pallas=True)),
            ("traceback, tile wavefront + checkpointed blocks", dict(use_pallas=True)),
            ("score only, pure JAX antidiagonals", dict(score_only=True, use_pallas=False))]
    if args.long_pure_jax_traceback:
        runs.append(("traceback, pure JAX + checkpointed blocks", dict(use_pallas=False)))
    for label, kw in runs:
        t0 = time.perf_counter()
        try:
            [aln] = align_records(pair, SCORING, "global", backend=backend, kernel=kernel,
                                  block=args.block, **kw)
        except Exception as exc:
            print(f"{label}: failed: {type(exc).__name__}: {str(exc)[:2000]}", flush=True)
            continue
        sec = time.perf_counter() - t0
        stats = jax.devices()[0].memory_stats() or {}
        scores[label] = aln.score_units
        ok = len(set(scores.values())) == 1
        if aln.ops is not None:
            ok &= rescore(sa, sb, SCORING, 0, 0, aln.ops) == aln.score_units
        row = dict(case=f"1 pair {len(sa)}x{len(sb)}", mode="global", path=label, seconds=sec,
                   compile_s=None, gcups=cells / sec / 1e9, equal_to_pure_jax=ok,
                   peak_gpu_gib=stats.get("peak_bytes_in_use", 0) / 2**30, score=aln.score,
                   columns=None if aln.ops is None else len(aln.ops))
        out.append(row)
        print(row, flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=100_000)
    ap.add_argument("--length", type=int, default=1000)
    ap.add_argument("--jax-pairs", type=int, default=10_000,
                    help="pairs for the pure-JAX comparison")
    ap.add_argument("--configs", default="8x128x4,16x128x4,16x64x2,32x32x1",
                    help="Pallas shapes rows x lanes x warps, comma-separated")
    ap.add_argument("--packed-configs", default="16x128x4,32x128x4",
                    help="packed int16x2 kernel shapes rows x lanes x warps ('' to skip)")
    ap.add_argument("--long", type=int, default=100_000, help="length of the long pair (0: skip)")
    ap.add_argument("--tile", type=int, default=128, help="tile edge of the tile wavefront")
    ap.add_argument("--block", type=int, default=2048, help="traceback block (multiple of tile)")
    ap.add_argument("--long-pure-jax-traceback", action="store_true",
                    help="also time the long traceback through the pure-JAX sweep (slow)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-check", action="store_true", help="skip the kernel-equality check")
    ap.add_argument("--no-tile-check", action="store_true",
                    help="skip the tile-wavefront part of the kernel-equality check")
    args = ap.parse_args()
    dev = jax.devices()[0]
    print(f"device: {dev.device_kind} ({dev.platform}); jax {jax.__version__}", flush=True)
    rows: list = []
    if not args.no_check:
        print("kernel check:", "passed" if check_kernel(args) else "FAILED", flush=True)
    if args.pairs:
        many_pairs(args, rows)
    if args.long:
        long_pair(args, rows)
    print()
    print("| case | mode | path | seconds | compile s | GCUPS | checked |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        comp = "" if r["compile_s"] is None else f"{r['compile_s']:.1f}"
        print(f"| {r['case']} | {r['mode']} | {r['path']} | {r['seconds']:.3f} | {comp} | "
              f"{r['gcups']:.1f} | {'yes' if r['equal_to_pure_jax'] else 'NO'} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": dev.device_kind, "jax": jax.__version__, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
