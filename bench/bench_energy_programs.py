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
    python bench/bench_energy_programs.py --lengths 512 --phases \
        --trace-options "none;xla_gpu_autotune_level=0;xla_llvm_disable_expensive_passes=true"

Each line is followed by the first calls' times (the inputs copied to the device, the fresh
fill's and traceback's first runs: a cold run's first calls). ``--envs``: environment sets of
the measuring processes (an allocator, CUDA's module loading); ``--pretouch GB``: a buffer
made and dropped twice before compiling (what a first large allocation costs).
``--trace-options`` / ``--fill-options``: XLA compiler option sets (``;``-separated, each run in
its own process) the traceback / the fill is compiled with, as
:data:`jaxrna.xla_options.GPU_COMPILER_OPTIONS` would set them for a program; ``--phases``:
where the traceback's compile spends its time, by the JAX profiler's events.

The twenty-second session's figures (BENCHMARKS.md) were taken with this code as a git-ignored
probe (``.gpu/probe_s22.py``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_options(text: str) -> dict:
    """``"k=v,k=v"`` (or ``none``) as XLA compiler options, read as ``JAXRNA_XLA_OPTIONS``
    reads them (:func:`jaxrna.xla_options.env_options`): ``true``/``false`` as booleans, whole
    numbers as ints, anything else a string.

    >>> parse_options("xla_gpu_autotune_level=0,xla_llvm_disable_expensive_passes=true")
    {'xla_gpu_autotune_level': 0, 'xla_llvm_disable_expensive_passes': True}
    >>> parse_options("none")
    {}
    """
    from jaxrna.xla_options import env_options

    text = text.strip()
    return {} if text in ("", "none") else env_options(":" + text)[0][1]


def parse_env(text: str) -> dict:
    """``"K=V,K=V"`` (or ``none``) as environment variables, values as written.

    >>> parse_env("XLA_PYTHON_CLIENT_PREALLOCATE=false,CUDA_MODULE_LOADING=EAGER")
    {'XLA_PYTHON_CLIENT_PREALLOCATE': 'false', 'CUDA_MODULE_LOADING': 'EAGER'}
    """
    text = text.strip()
    pairs = (item.strip().partition("=") for item in text.split(",")) if text not in ("", "none") \
        else ()
    return {k.strip(): v.strip() for k, eq, v in pairs if eq and k.strip()}


def compile_phases(compile_fn, top: int = 12):
    """``(result, lines)``: ``compile_fn()`` under JAX's profiler, and the ``top`` events of
    the compilation by their summed duration (the XLA passes, LLVM, ptxas: where a compile's
    seconds go; events of several threads are summed, so they can add up past the wall time)."""
    import tempfile

    import jax
    from cli_timeline import longest_events, profiler_options

    where = tempfile.mkdtemp(prefix="jaxrna-phases-")
    with jax.profiler.trace(where, create_perfetto_trace=True, profiler_options=profiler_options()):
        result = compile_fn()
    events = longest_events(where, top)
    if events is None:
        return result, ["  (no profile written)"]
    return result, [f"  {t:7.3f} s {k:6d} x {n[:90]}" for t, k, n in events]


def measure(length: int, form: str, rows: int | None, bands: int | None, reps: int,
            trace_options: dict | None = None, fill_options: dict | None = None,
            phases: bool = False, pretouch_gb: float = 0.0) -> str:
    """One (length, form, bands) in this process: the result line (``phases``: then the
    traceback's compile events; ``pretouch_gb``: a buffer of that many GB made and dropped
    twice before anything is compiled, each timed)."""
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

    touched = []
    for _ in range(2 if pretouch_gb > 0 else 0):
        big, t = timed(lambda: jax.block_until_ready(
            jnp.ones((int(pretouch_gb * (1 << 30)) // 4,), jnp.int32)))
        del big
        touched.append(t)
    lowered, fill_lower = timed(lambda: fill.lower(*args, **static))
    fill_exe, fill_compile = timed(lambda: lowered.compile(fill_options or None))
    # a first call as a run makes it: its inputs copied to the device, then the fresh program
    dev_args, put = timed(lambda: jax.block_until_ready(jax.device_put(args)))
    out, fill_first = timed(lambda: jax.block_until_ready(fill_exe(*dev_args)))
    lowered, trace_lower = timed(lambda: trace.lower(out[1], out[2], *args[:6]))
    events = []
    if phases:
        start = time.perf_counter()
        trace_exe, events = compile_phases(lambda: lowered.compile(trace_options or None))
        trace_compile = time.perf_counter() - start
    else:
        trace_exe, trace_compile = timed(lambda: lowered.compile(trace_options or None))
    _, trace_first = timed(lambda: jax.block_until_ready(trace_exe(out[1], out[2],
                                                                    *dev_args[:6])))
    fill_runs, trace_runs = [], []
    for _ in range(reps):
        out, t = timed(lambda: jax.block_until_ready(fill_exe(*args)))
        fill_runs.append(t)
        pairs, t = timed(lambda: jax.block_until_ready(trace_exe(out[1], out[2], *args[:6])))
        trace_runs.append(t)
    energies, partners = np.asarray(out[0]), np.asarray(pairs[0])
    digest = hashlib.sha256(energies.tobytes() + partners.tobytes()).hexdigest()[:12]
    named = "".join(f" [{w} {o}]" for w, o in (("fill", fill_options), ("traceback", trace_options))
                    if o)
    return "\n".join([f"{length} nt x {rows} rows, {form}, {static['bands']} band(s){named}: fill lower "
            f"{fill_lower:.2f} s compile {fill_compile:.2f} s run {min(fill_runs):.3f}-"
            f"{max(fill_runs):.3f} s; traceback lower {trace_lower:.2f} s compile "
            f"{trace_compile:.2f} s run {min(trace_runs):.3f}-{max(trace_runs):.3f} s; "
            f"all traced {bool(np.asarray(pairs[1]).all())}; hash {digest}",
            f"  first calls: inputs to the device {put:.3f} s, fill {fill_first:.3f} s, "
            f"traceback {trace_first:.3f} s"
            + (f"; {pretouch_gb:g} GB made in {touched[0]:.3f} s, again {touched[1]:.3f} s"
               if touched else "")] + events)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", default="512,1024,4096", help="padded length classes")
    ap.add_argument("--forms", default="gather", help="interior forms: gather, loop, jax, pallas")
    ap.add_argument("--bands", default="", help="sweep band counts (default: the platform's)")
    ap.add_argument("--rows", type=int, default=None, help="batch rows (default: the device's)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--trace-options", default="none",
                    help="XLA compiler option sets for the traceback's compile, separated by "
                         "';', each 'k=v,k=v' or none (e.g. 'none;xla_gpu_autotune_level=0')")
    ap.add_argument("--fill-options", default="none", help="the same for the fill")
    ap.add_argument("--phases", action="store_true",
                    help="print where the traceback's compile spends its time (JAX profiler)")
    ap.add_argument("--pretouch", type=float, default=0.0, metavar="GB",
                    help="make and drop a buffer of GB twice before compiling (timed)")
    ap.add_argument("--envs", default="none",
                    help="environment sets for the measuring processes, separated by ';', each "
                         "'K=V,K=V' or none (e.g. 'none;XLA_PYTHON_CLIENT_ALLOCATOR=platform')")
    ap.add_argument("--one", nargs=3, metavar=("LENGTH", "FORM", "BANDS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:                      # a child: one measurement
        length, form, bands = args.one
        print(measure(int(length), form, args.rows, int(bands) or None, args.reps,
                      parse_options(args.trace_options), parse_options(args.fill_options),
                      args.phases, args.pretouch), flush=True)
        return
    bands = [int(b) for b in args.bands.split(",") if b] or [0]
    for length in (int(x) for x in args.lengths.split(",")):
        for form in args.forms.split(","):
            for b in bands:
                for fill_set, trace_set, env_set in ((f, t, e)
                                                     for f in args.fill_options.split(";")
                                                     for t in args.trace_options.split(";")
                                                     for e in args.envs.split(";")):
                    cmd = [sys.executable, os.path.abspath(__file__), "--one", str(length),
                           form, str(b), "--reps", str(args.reps),
                           "--trace-options", trace_set, "--fill-options", fill_set,
                           "--pretouch", str(args.pretouch)]
                    cmd += ["--rows", str(args.rows)] if args.rows else []
                    cmd += ["--phases"] if args.phases else []
                    env = dict(os.environ, **parse_env(env_set))
                    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
                    out = done.stdout.strip()
                    if out and env_set.strip() not in ("", "none"):
                        out = f"[env {env_set.strip()}] " + out
                    print(out if done.returncode == 0 and out
                          else f"{length} nt, {form}: failed\n{done.stderr[-2000:]}",
                          flush=True)


if __name__ == "__main__":
    main()
