"""Compile and run times of ``targets``' refill kernel alone
(:func:`jaxrna.kernels.miranda_fill.refill_pallas`) per miRNA height and strip of rows, on
whatever device JAX sees (on a CPU: Pallas' interpret mode, compile figures meaningless there):
what a cold ``jaxrna targets`` run waits for (issue 26).

Per height, random tables of 16 miRNAs (gap open -9, extend -4, the seed's rows pinned), random
lane codes with 1% of the columns starting a new target, a block of 128 lanes skipped
(``qidx`` -1) at random; each strip size (a divisor of the height; the height itself is the
kernel with every row unrolled) is lowered and compiled with a fresh ``jax.jit`` (no compile
cache), run once, then ``--reps`` times. One line each: lowering and compile seconds, run
milliseconds (min / median / max) and whether its outputs equal the first strip's on every live
lane (the check that strips change nothing).

    python bench/bench_refill_kernel.py --heights 16,24,32 --strips 32,24,16,8 --reps 30
    python bench/bench_refill_kernel.py --heights 24 --strips 24,8 --variant my_kernel.py

``--variant FILE``: also a kernel module being tried (its ``refill_pallas``), timed strip by
strip right after the committed kernel and checked against the first strip's outputs.

The twenty-third session's figures (BENCHMARKS.md, calls S23a, S23b, S23g) were taken with this
code as a git-ignored probe (``.gpu/probe_refill_h.py``).
"""

from __future__ import annotations

import argparse
import os
import time


def load_variant(path: str):
    """The ``refill_pallas`` of a kernel module file (a variant of
    :mod:`jaxrna.kernels.miranda_fill` being tried, not installed)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("refill_variant", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.refill_pallas


def measure(height: int, strips: list[int], lanes: int, reps: int,
            variants: list[tuple[str, object]] | None = None) -> list[str]:
    """The result lines of one height, strips in the order given (each strip: the committed
    kernel, then each of ``variants``, ``(name, refill_pallas)``)."""
    import jax
    import numpy as np

    from jaxrna.kernels import miranda_fill
    from jaxrna.kernels.miranda_lanes import RESET

    interpret = jax.devices()[0].platform != "gpu"
    queries = 16
    rng = np.random.default_rng(height)
    lead = height + 8
    length = lead + 32
    profile = rng.integers(-6, 6, size=(queries, 5, height)).astype(np.int32)
    gap_open = np.full((queries, height), -9, np.int32)
    gap_extend = np.full((queries, height), -4, np.int32)
    seed = np.zeros((queries, height), np.int32)
    seed[:, max(height - 8, 0):height - 1] = 1
    codes = rng.integers(0, 4, size=(length, lanes)).astype(np.int8)
    codes[rng.random((length, lanes)) < 0.01] |= RESET
    qidx = rng.integers(-1, queries, size=(lanes // miranda_fill.BLOCK,)).astype(np.int32)
    live = np.repeat(qidx >= 0, miranda_fill.BLOCK)
    args = (qidx, profile, gap_open, gap_extend, seed, codes)
    out, first = [], None
    kernels = [("", miranda_fill.refill_pallas)] + list(variants or [])
    for strip, (name, kernel) in ((st, k) for st in strips for k in kernels):
        if strip > height or height % strip:
            continue
        fun = jax.jit(kernel.__wrapped__,
                      static_argnames=("lead", "block", "interpret", "num_warps", "strip"))
        t0 = time.perf_counter()
        lowered = fun.lower(*args, lead=lead, interpret=interpret, strip=strip)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
        got = jax.block_until_ready(compiled(*args))
        runs = []
        for _ in range(reps):
            t = time.perf_counter()
            jax.block_until_ready(compiled(*args))
            runs.append(time.perf_counter() - t)
        runs.sort()
        got = [np.asarray(x)[..., live] for x in got]
        same = "-" if first is None else str(all(np.array_equal(a, b) for a, b in zip(got, first)))
        first = got if first is None else first
        out.append(f"refill{name and ' ' + name} H {height} strip {strip}: lower {t1 - t0:.2f} s, compile {t2 - t1:.2f} s, "
                   f"run min {runs[0] * 1e3:.3f} / median {runs[len(runs) // 2] * 1e3:.3f} / max "
                   f"{runs[-1] * 1e3:.3f} ms, same as the first: {same}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--heights", default="16,24,32", help="miRNA heights (multiples of 8)")
    ap.add_argument("--strips", default="32,24,16,8", help="strip sizes, the first the reference")
    ap.add_argument("--lanes", type=int, default=None,
                    help="lanes (default 32,768 on a GPU, 256 in interpret mode)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--variant", action="append", default=[], metavar="FILE",
                    help="also time the refill_pallas of this kernel module file, strip by "
                         "strip after the committed kernel (a variant being tried)")
    args = ap.parse_args()
    variants = [(os.path.basename(f).removesuffix(".py"), load_variant(f)) for f in args.variant]
    import jax

    lanes = args.lanes or (32768 if jax.devices()[0].platform == "gpu" else 256)
    print(f"# {jax.devices()[0].device_kind}, jax {jax.__version__}, {lanes} lanes", flush=True)
    for height in (int(x) for x in args.heights.split(",")):
        for line in measure(height, [int(x) for x in args.strips.split(",")], lanes, args.reps,
                            variants):
            print(line, flush=True)


if __name__ == "__main__":
    main()
