"""Compile and run times of the energy model's two MFE programs of a length class (the fill,
``energy.fill_batch``, and the traceback, ``energy.traceback_batch``) per form of the fill's
interior loop and band count, on whatever device JAX sees: what a cold ``jaxrna fold --model
turner`` compiles, measured program by program (issue 26).

Each (length, form, bands) runs in a fresh process (so that no compilation or tracing cache
is shared): a batch of the class's rows (the device's, or ``--rows``) of random sequences
(seeded by the length), the fill lowered and compiled, run once, the traceback lowered and
compiled on its tables, then both run ``--reps`` times. One line each: lowering and XLA
compile seconds, run seconds (min-max), whether every traceback succeeded, and a hash of the
energies and partner arrays, equal across forms when they give the same answers (the check that
a faster form is the same fold).

    python bench/bench_energy_programs.py --lengths 512,1024,4096 --forms gather,loop
    python bench/bench_energy_programs.py --lengths 2048 --forms gather,jax --rows 1
    python bench/bench_energy_programs.py --lengths 2048,4096 --forms gather --bands 1,2

The twenty-second session's figures (BENCHMARKS.md) were taken with this code as a git-ignored
probe (``.gpu/probe_s22.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(length: int, form: str, rows: int | None, bands: int | None, reps: int) -> str:
    """One (length, form, bands) in this process: the result line."""
    import hashlib
    import time

    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxrna.energy import mfe_programs as mp
    from jaxrna.energy.batch_plan import batch_rows_for, gpu_budget
    from jaxrna.energy.fill import prepare_batch
    from jaxrna.energy.params import load_params

    device = jax.devices()[0]
    gpu = device.platform == "gpu"
    if rows is None:
        rows = batch_rows_for(length, "gpu", gpu_budget(device)) if gpu \
            else batch_rows_for(length, "cpu", 1 << 30)
    params = load_params()
    static = dict(mp.static_for(device.platform, length), interior=form)
    if bands:
        static["bands"] = bands
    rng = np.random.default_rng(length)
    lo = max(1, length // 2 - 30) if length > 64 else 1
    seqs = ["".join(rng.choice(list("ACGU"), size=int(rng.integers(lo, length - 8))))
            for _ in range(rows)]
    args = mp.program_args(prepare_batch(seqs, params, length), params, length, 2, True)[:-1]
    jax.jit(lambda x: x + 1)(jnp.zeros(3)).block_until_ready()     # the backend, first
    fill = jax.jit(mp._fill_rows, static_argnames=("interior", "bands"))
    trace = jax.jit(mp._trace_rows)

    def timed(fn):
        start = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - start

    lowered, fill_lower = timed(lambda: fill.lower(*args, **static))
    fill_exe, fill_compile = timed(lowered.compile)
    out = jax.block_until_ready(fill_exe(*args))
    lowered, trace_lower = timed(lambda: trace.lower(out[1], out[2], *args[:6]))
    trace_exe, trace_compile = timed(lowered.compile)
    fill_runs, trace_runs = [], []
    for _ in range(reps):
        out, t = timed(lambda: jax.block_until_ready(fill_exe(*args)))
        fill_runs.append(t)
        pairs, t = timed(lambda: jax.block_until_ready(trace_exe(out[1], out[2], *args[:6])))
        trace_runs.append(t)
    energies, partners = np.asarray(out[0]), np.asarray(pairs[0])
    digest = hashlib.sha256(energies.tobytes() + partners.tobytes()).hexdigest()[:12]
    return (f"{length} nt x {rows} rows, {form}, {static['bands']} band(s): fill lower "
            f"{fill_lower:.2f} s compile {fill_compile:.2f} s run {min(fill_runs):.3f}-"
            f"{max(fill_runs):.3f} s; traceback lower {trace_lower:.2f} s compile "
            f"{trace_compile:.2f} s run {min(trace_runs):.3f}-{max(trace_runs):.3f} s; "
            f"all traced {bool(np.asarray(pairs[1]).all())}; hash {digest}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", default="512,1024,4096", help="padded length classes")
    ap.add_argument("--forms", default="gather", help="interior forms: gather, loop, jax, pallas")
    ap.add_argument("--bands", default="", help="sweep band counts (default: the platform's)")
    ap.add_argument("--rows", type=int, default=None, help="batch rows (default: the device's)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--one", nargs=3, metavar=("LENGTH", "FORM", "BANDS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:                      # a child: one measurement
        length, form, bands = args.one
        print(measure(int(length), form, args.rows, int(bands) or None, args.reps), flush=True)
        return
    bands = [int(b) for b in args.bands.split(",") if b] or [0]
    for length in (int(x) for x in args.lengths.split(",")):
        for form in args.forms.split(","):
            for b in bands:
                cmd = [sys.executable, os.path.abspath(__file__), "--one", str(length), form,
                       str(b), "--reps", str(args.reps)]
                if args.rows:
                    cmd += ["--rows", str(args.rows)]
                done = subprocess.run(cmd, capture_output=True, text=True)
                line = done.stdout.strip().splitlines()
                print(line[-1] if done.returncode == 0 and line
                      else f"{length} nt, {form}: failed\n{done.stderr[-2000:]}", flush=True)


if __name__ == "__main__":
    main()
