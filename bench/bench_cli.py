"""Whole ``jaxrna`` processes timed as a user runs them, cold and warm, with a stage breakdown.

Each job of issue 14's and issue 26's tables is generated from a fixed seed, then run as a fresh process
(``python -m jaxrna ...``): *cold* with an empty ``JAXRNA_CACHE_DIR``, *warm* the runs after it
with the same cache directory (the median of ``--warm`` runs is reported). Issue 26's first-run
jobs (``turner_*``, ``fold_200``, ``interact_small``, ``align_all``, ``targets_energy``) also run
*then*: right after the cold run, another length mix and other numeric options on the same
cache, which should compile nothing. Every run writes its
stage times (``JAXRNA_PROFILE``, :mod:`jaxrna.stages`): ``startup`` is the wall time before
jaxrna's first module ran (interpreter start), ``imports`` JAX and jaxrna modules, ``compile``
tracing, lowering and compiling or loading programs from the persistent cache (with the
number of programs ``compiled`` rather than loaded), ``device`` the host waiting for device
results, the others the host stages; ``other`` is the rest of the wall time. Outputs of all runs
of a job must be identical (their sha256 is printed). Where a peer exists it runs on the same
job in the same call: parasail on every core for ``align`` (``bench/peer_parasail.py``).

    python bench/bench_cli.py --preset cpu                 # this 2-core machine's sizes
    python bench/bench_cli.py --preset gpu --json out.json # issue 14's sizes (one H200)
    python bench/bench_cli.py --jobs fold_seq100,align_all --preset cpu --warm 3
    python bench/bench_cli.py --preset gpu --devices 1,2,4 --no-peer   # scaling over GPUs

The table goes to stdout; ``--json`` keeps every run's numbers, ``--log DIR`` every run's stderr.
``--compile-log`` runs the cold run with JAX's compile log (``JAX_LOG_COMPILES``, compile
workers included) and prints under its row the programs whose tracing, lowering or XLA
compilation took longest, with their seconds: which program a cold run waits for.

Processes run as from an installed package: jaxrna's modules are byte-compiled first and the
children may write bytecode (``PYTHONDONTWRITEBYTECODE`` is dropped from their environment), as
``pip install`` leaves a package. With it set (the lent GPU machines set it) every process
compiles every module from source: on an H200 machine 0.2-0.4 s more per warm process and
0.5-2.0 s more cold (BENCHMARKS.md; ``--source-only`` keeps that, to compare with figures taken
so).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from as_installed import installed_env  # noqa: E402
ROOT = os.path.dirname(HERE)
SEED = 20261124
#: Run the CLI as an installed package runs: with bytecode (see the module docstring).
BYTECODE = True
#: ``--sha-warn``: outputs that differ between runs are reported, not an error.
SHA_WARN = False
#: ``--compile-log``: the cold run logs JAX's compilations; its longest are reported.
COMPILE_LOG = False
#: The jaxrna tree the CLI runs from (``--root``: another checkout, for before/after in one call).
JAXRNA_ROOT = ROOT

#: job -> sizes per preset. Counts and lengths are those of issue 14's table for "gpu".
PRESETS = {
    "gpu": {
        "fold_seq100": {"length": 100},
        "fold_1000": {"count": 1000, "lo": 50, "hi": 500},
        "fold_16k": {"length": 16000},
        "align_zip": {"pairs": 100_000, "length": 1000},
        "align_all": {"queries": 300, "targets": 300, "lo": 200, "hi": 400},
        "interact": {"len1": 23, "len2": 20000, "window2": 128},
        "targets": {"mirnas": 2000, "targets": 30000},
        "fold_partition": {"length": 2000},
        # issue 26's first-run jobs
        "turner_1000": {"count": 1000, "lo": 50, "hi": 500},
        "turner_404": {"count": 404, "lo": 1, "hi": 2600},
        "fold_200": {"count": 200, "lo": 20, "hi": 2000},
        "interact_small": {"pairs": 40, "hi1": 30, "hi2": 45},
        "targets_energy": {"mirnas": 2000, "targets": 30000},
        # ensembles (several GPUs: each job's batches or records over every device)
        "turner_partition": {"count": 2000, "lo": 200, "hi": 200},
        "turner_partition_one": {"length": 4000, "then": 3500},
        "fold_partition_many": {"count": 16, "length": 2000},
        "align_posterior": {"pairs": 200, "lo": 200, "hi": 1000},
    },
    "cpu": {
        "fold_seq100": {"length": 100},
        "fold_1000": {"count": 1000, "lo": 50, "hi": 500},
        "fold_16k": {"length": 2000},
        "align_zip": {"pairs": 2000, "length": 1000},
        "align_all": {"queries": 60, "targets": 60, "lo": 200, "hi": 400},
        "interact": {"len1": 23, "len2": 2000, "window2": 128},
        "targets": {"mirnas": 16, "targets": 30000},
        "fold_partition": {"length": 2000},
        "turner_1000": {"count": 100, "lo": 50, "hi": 500},
        "turner_404": {"count": 40, "lo": 1, "hi": 2600},
        "fold_200": {"count": 200, "lo": 20, "hi": 2000},
        "interact_small": {"pairs": 40, "hi1": 30, "hi2": 45},
        "targets_energy": {"mirnas": 16, "targets": 30000},
        "turner_partition": {"count": 40, "lo": 200, "hi": 200},
        "turner_partition_one": {"length": 1000, "then": 900},
        "fold_partition_many": {"count": 4, "length": 500},
        "align_posterior": {"pairs": 20, "lo": 50, "hi": 300},
    },
}
JOBS = list(PRESETS["gpu"])
STAGES = ["startup", "imports", "setup", "read", "encode", "compile", "mfe", "device",
          "traceback", "measures", "format", "write"]


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng([SEED, int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)])


def _random_rna(rng: np.random.Generator, n: int) -> str:
    return np.frombuffer(b"ACGU", np.uint8)[rng.integers(0, 4, n)].tobytes().decode()


def _write_fasta(path: str, prefix: str, seqs: list[str]) -> str:
    with open(path, "w") as fh:
        for k, s in enumerate(seqs):
            fh.write(f">{prefix}{k + 1}\n")
            for i in range(0, len(s), 60):
                fh.write(s[i:i + 60] + "\n")
    return path


def _mix(rng: np.random.Generator, d: str, fname: str, prefix: str, count: int, lo: int,
         hi: int) -> str:
    lens = rng.integers(lo, hi + 1, count)
    return _write_fasta(os.path.join(d, fname), prefix, [_random_rna(rng, int(n)) for n in lens])


def make_job(name: str, size: dict, data: str, backend: str
             ) -> tuple[list[str], str, list[str] | None]:
    """The CLI arguments of job ``name`` (data written under ``data``), its output file, and
    for issue 26's first-run jobs the arguments of a *then* run: another length mix and other
    numeric options on the same cache right after the cold run (it should compile nothing)."""
    rng = _rng(name)
    d = os.path.join(data, name)
    os.makedirs(d, exist_ok=True)
    out = os.path.join(d, "out.txt")
    common = ["-q", "-o", out, "--backend", backend]
    if name == "fold_seq100":
        return ["fold", "--model", "nussinov", "--sequence", _random_rna(rng, size["length"])] + common, out, None
    if name == "fold_1000":
        fa = _mix(rng, d, "seqs.fa", "s", size["count"], size["lo"], size["hi"])
        return ["fold", "--model", "nussinov", fa] + common, out, None
    if name == "fold_16k":
        fa = _write_fasta(os.path.join(d, "long.fa"), "long", [_random_rna(rng, size["length"])])
        return ["fold", "--model", "nussinov", fa] + common, out, None
    if name == "fold_partition":
        fa = _write_fasta(os.path.join(d, "one.fa"), "p", [_random_rna(rng, size["length"])])
        return ["fold", "--model", "nussinov", fa, "--partition"] + common, out, None
    if name == "fold_200":
        fa = _mix(rng, d, "seqs.fa", "s", size["count"], size["lo"], size["hi"])
        fb = _mix(rng, d, "other.fa", "o", size["count"] // 2, size["lo"], size["hi"])
        return (["fold", "--model", "nussinov", fa] + common, out,
                ["fold", "--model", "nussinov", fb, "--weights", "integer", "--min-loop", "2"]
                + common)
    if name in ("turner_1000", "turner_404"):
        fa = _mix(rng, d, "seqs.fa", "s", size["count"], size["lo"], size["hi"])
        fb = _mix(rng, d, "other.fa", "o", max(1, size["count"] // 3), size["lo"], size["hi"])
        return (["fold", "--model", "turner", fa] + common, out,
                ["fold", "--model", "turner", fb, "-T", "30", "--dangles", "0",
                 "--params", "turner1999"] + common)
    if name == "turner_partition":     # the engine: --backend's, or JAXRNA_ENERGY_ENGINE
        fa = _mix(rng, d, "seqs.fa", "s", size["count"], size["lo"], size["hi"])
        return ["fold", "--model", "turner", "--partition", "-f", "json", fa] + common, out, None
    if name == "turner_partition_one":   # issue 25's one long sequence; then another, -T 30
        fa = _write_fasta(os.path.join(d, "one.fa"), "p", [_random_rna(rng, size["length"])])
        fb = _write_fasta(os.path.join(d, "other.fa"), "o", [_random_rna(rng, size["then"])])
        cmd = ["fold", "--model", "turner", "--partition", "-f", "json"]
        return cmd + [fa] + common, out, cmd + [fb, "-T", "30"] + common
    if name == "fold_partition_many":
        fa = _write_fasta(os.path.join(d, "many.fa"), "p",
                          [_random_rna(rng, size["length"]) for _ in range(size["count"])])
        return ["fold", "--model", "nussinov", "--partition", fa] + common, out, None
    if name == "align_posterior":
        q = _mix(rng, d, "q.fa", "q", size["pairs"], size["lo"], size["hi"])
        t = _mix(rng, d, "t.fa", "t", size["pairs"], size["lo"], size["hi"])
        return (["align", q, t, "--pairs", "zip", "--posterior", "-f", "json"] + common, out,
                None)
    if name == "align_zip":
        n, m = size["pairs"], size["length"]
        q = _write_fasta(os.path.join(d, "q.fa"), "q", [_random_rna(rng, m) for _ in range(n)])
        t = _write_fasta(os.path.join(d, "t.fa"), "t", [_random_rna(rng, m) for _ in range(n)])
        return ["align", q, t, "--pairs", "zip", "--score-only", "-f", "tsv"] + common, out, None
    if name == "align_all":
        q = _mix(rng, d, "q.fa", "q", size["queries"], size["lo"], size["hi"])
        t = _mix(rng, d, "t.fa", "t", size["targets"], size["lo"], size["hi"])
        q2 = _mix(rng, d, "q2.fa", "q", max(1, size["queries"] // 3), 20, 1000)
        t2 = _mix(rng, d, "t2.fa", "t", max(1, size["targets"] // 3), 20, 1000)
        return (["align", q, t, "--mode", "local"] + common, out,
                ["align", q2, t2, "--mode", "local", "--match", "1", "--mismatch", "-2",
                 "--gap-open", "4", "--gap-extend", "1"] + common)
    if name == "interact":
        a = _write_fasta(os.path.join(d, "a.fa"), "a", [_random_rna(rng, size["len1"])])
        b = _write_fasta(os.path.join(d, "b.fa"), "b", [_random_rna(rng, size["len2"])])
        return ["interact", a, b, "--window2", str(size["window2"])] + common, out, None
    if name == "interact_small":
        a = _mix(rng, d, "a.fa", "a", size["pairs"], 1, size["hi1"])
        b = _mix(rng, d, "b.fa", "b", size["pairs"], 1, size["hi2"])
        return (["interact", a, b, "--pairs", "zip"] + common, out,
                ["interact", a, b, "--pairs", "zip", "--window1", "12", "--window2", "9"]
                + common)
    if name in ("targets", "targets_energy"):
        tdir = os.path.join(data, "targets_data", f"{size['mirnas']}x{size['targets']}")
        if not os.path.exists(os.path.join(tdir, "utrs.fa")):
            subprocess.run([sys.executable, os.path.join(HERE, "make_targets_data.py"), "--out",
                            tdir, "--mirnas", str(size["mirnas"]), "--targets",
                            str(size["targets"])], check=True, stdout=subprocess.DEVNULL)
        mir, utr = os.path.join(tdir, "mirnas.fa"), os.path.join(tdir, "utrs.fa")
        common = ["--quiet", "-o", out, "--backend", backend]
        energy = [] if name == "targets_energy" else ["--no-energy"]
        then = None
        if name == "targets_energy":
            small = os.path.join(d, "utrs_small.fa")
            _mix(rng, d, "utrs_small.fa", "u", 300, 200, 5000)
            then = ["targets", mir, small, "-sc", "150", "-en", "-15"] + common
        return ["targets", mir, utr] + energy + common, out, then
    raise ValueError(name)


def _sha(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            h.update(block)
    return h.hexdigest()[:16]


def compile_log(stderr: str, top: int = 6) -> list[tuple[float, str]]:
    """The ``top`` longest steps of JAX's compile log (``JAX_LOG_COMPILES``) in ``stderr``:
    (seconds, "XLA compilation of jit(name)" or "tracing name ..." or "jaxpr to MLIR ...").

    >>> compile_log("Finished XLA compilation of jit(f) in 2.5 sec\\nFinished tracing f for jit in 0.1 sec")
    [(2.5, 'XLA compilation of jit(f)'), (0.1, 'tracing f for jit')]
    """
    import re

    steps = [(float(m.group(2)), m.group(1)[:120])
             for m in re.finditer(r"Finished (.*?) in ([0-9.]+) sec", stderr)]
    return sorted(steps, reverse=True)[:top]


def run_cli(args: list[str], cache: str, log: str | None, out: str, *,
            log_compiles: bool = False) -> dict:
    """One fresh ``python -m jaxrna`` process: wall time, stage times, output hash (with
    ``log_compiles``, the longest steps of JAX's compile log)."""
    fd, profile = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env = dict(os.environ, JAXRNA_CACHE_DIR=cache, JAXRNA_PROFILE=profile,
               PYTHONPATH=JAXRNA_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if log_compiles:
        env["JAX_LOG_COMPILES"] = "1"
    env = installed_env(env, BYTECODE)
    if BYTECODE and JAXRNA_ROOT != ROOT:
        import compileall

        compileall.compile_dir(os.path.join(JAXRNA_ROOT, "jaxrna"), quiet=1)
    if os.path.exists(out):
        os.unlink(out)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "jaxrna"] + args, env=env, cwd=JAXRNA_ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # cwd: -m's path
    wall = time.perf_counter() - start
    if log:
        with open(log, "ab") as fh:
            fh.write(f"$ jaxrna {' '.join(args)[:300]}\n".encode() + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"jaxrna {' '.join(args)[:200]} exited {proc.returncode}:\n"
                           + proc.stderr.decode()[-2000:])
    with open(profile) as fh:
        prof = json.load(fh)
    os.unlink(profile)
    stages = {k: v for k, v in prof["stages"].items() if not k.startswith("_")}
    stages["startup"] = wall - prof["in_process_s"]
    stages["other"] = wall - sum(v for k, v in stages.items() if "(background)" not in k)
    result = {"wall": wall, "stages": stages, "counts": prof["counts"],
              "compile_parts": {k: v for k, v in prof["stages"].items() if k.startswith("_")},
              "sha": _sha(out)}
    if log_compiles:
        result["compile_log"] = compile_log(proc.stderr.decode(errors="replace"))
    return result


def run_peer(name: str, args: list[str], log: str | None) -> dict | None:
    """The peer on the same job, as one process: parasail on every core for align, ViennaRNA
    on every core for the energy model (``bench/peer_vienna.py``)."""
    if name.startswith("turner"):
        try:
            import RNA  # noqa: F401
        except ImportError:
            return {"error": "ViennaRNA not installed"}
        fasta = next(a for a in args if a.endswith(".fa"))
        return _timed_peer([sys.executable, os.path.join(HERE, "peer_vienna.py"), fasta]
                           + (["--partition"] if name.startswith("turner_partition") else []))
    if not name.startswith("align"):
        return None
    try:
        import parasail  # noqa: F401
    except ImportError:
        return {"error": "parasail not installed"}
    q, t = args[1], args[2]
    cmd = [sys.executable, os.path.join(HERE, "peer_parasail.py"), q, t]
    cmd += ["--pairs", "zip", "--score-only"] if name == "align_zip" else ["--mode", "local"]
    return _timed_peer(cmd)


def _timed_peer(cmd: list[str]) -> dict:
    """Run a peer's process: its wall time and last line of output, or its error."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        return {"error": proc.stderr.decode()[-500:]}
    return {"wall": wall, "summary": proc.stdout.decode().strip().splitlines()[-1]}


def bench_job(name: str, size: dict, data: str, backend: str, warm: int, log_dir: str | None,
              peer: bool, devices: int | None = None) -> dict:
    args, out, then_args = make_job(name, size, data, backend)
    if devices is not None:         # --devices N: the run uses the first N devices
        args = args + ["--devices", str(devices)]
        then_args = then_args and then_args + ["--devices", str(devices)]
    log = os.path.join(log_dir, f"{name}.log") if log_dir else None
    cache = tempfile.mkdtemp(prefix=f"jaxrna-cache-{name}-")
    then = None
    try:
        cold = run_cli(args, cache, log, out, log_compiles=COMPILE_LOG)
        if then_args:      # new data and options on the same cache: should compile nothing
            then = run_cli(then_args, cache, log, out)
        warms = [run_cli(args, cache, log, out) for _ in range(warm)]
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    shas = {r["sha"] for r in [cold] + warms}
    if len(shas) != 1:
        if not SHA_WARN:
            raise RuntimeError(f"{name}: outputs differ between runs: {shas}")
        print(f"# {name}: outputs differ between runs: {sorted(shas)}", flush=True)
    result = {"job": name, "size": size, "cold": cold, "warm": warms, "sha": "|".join(sorted(shas)),
              "then": then, "then_args": then_args, "devices": devices}
    if warms:
        result["warm_median"] = statistics.median(r["wall"] for r in warms)
    if peer:
        result["peer"] = run_peer(name, args, log)
    return result


def _row(r: dict) -> str:
    w = min(r["warm"], key=lambda x: abs(x["wall"] - r["warm_median"])) if r["warm"] else r["cold"]
    st = w["stages"]
    parts = " ".join(f"{k[:5]}={st[k]:.2f}" for k in STAGES + ["other"] if st.get(k, 0) >= 0.005)
    bg = " ".join(f"{k.split()[0][:5]}(bg)={v:.2f}" for k, v in st.items() if "(background)" in k)
    peer = ""
    if r.get("peer"):
        peer = f" | peer {r['peer']['wall']:.2f} s" if "wall" in r["peer"] else \
            f" | peer: {r['peer']['error'][:40]}"
    warm = f"{r['warm_median']:.2f}" if r["warm"] else "-"
    then = ""
    if r.get("then"):
        then = (f"  then {r['then']['wall']:6.2f} s (compiled "
                f"{r['then']['counts'].get('compiled', 0)})")
    cc = r["cold"]["stages"].get("compile", 0.0)
    used = ""
    per = {k[len("batches on "):]: v for k, v in w["counts"].items() if k.startswith("batches on ")}
    if r.get("devices") is not None:
        used = f"  batches {per}" + \
            f" loaded(cold) {r['cold']['counts'].get('executables_loaded', 0)}"
    job = r["job"] if r.get("devices") is None else f"{r['job']}@{r['devices']}"
    return (f"{job:15s} cold {r['cold']['wall']:6.2f} s (compiled {r['cold']['counts'].get('compiled', 0)}, "
            f"compile {cc:.1f} s){then}"
            f"  warm {warm} s (compiled {w['counts'].get('compiled', 0)})  [{parts} {bg}]{peer}"
            f"  sha {r['sha']}{used}"
            + "".join(f"\n    cold, longest: {sec:6.2f} s  {what}"
                      for sec, what in r["cold"].get("compile_log", [])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", choices=list(PRESETS), default="cpu")
    ap.add_argument("--jobs", default=",".join(JOBS), help="comma-separated, of: " + ", ".join(JOBS))
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"])
    ap.add_argument("--warm", type=int, default=2, help="warm runs per job (median reported)")
    ap.add_argument("--data", default=os.path.join(HERE, "data", "cli"))
    ap.add_argument("--json", default=None, help="write every run's numbers here")
    ap.add_argument("--log", default=None, help="directory for each job's stderr")
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--root", default=ROOT,
                    help="run the jaxrna package of this tree (default: this checkout), to time "
                         "an older version in the same call")
    ap.add_argument("--devices", default=None,
                    help="comma-separated device counts (1,2,4): each job runs with "
                         "--devices N for each, outputs checked identical across counts")
    ap.add_argument("--sha-warn", action="store_true",
                    help="report outputs that differ between runs instead of stopping")
    ap.add_argument("--compile-log", action="store_true",
                    help="log the cold runs' compilations; print the longest under each row")
    ap.add_argument("--source-only", action="store_true",
                    help="no bytecode: every process compiles jaxrna's modules from source")
    args = ap.parse_args()
    global BYTECODE, COMPILE_LOG, JAXRNA_ROOT, SHA_WARN
    BYTECODE = not args.source_only
    COMPILE_LOG = args.compile_log
    SHA_WARN = args.sha_warn
    JAXRNA_ROOT = os.path.abspath(args.root)
    if args.log:
        os.makedirs(args.log, exist_ok=True)
    jobs = [j for j in args.jobs.split(",") if j]
    for j in jobs:
        if j not in JOBS:
            ap.error(f"unknown job {j}")
    info = {"date": time.strftime("%Y-%m-%d %H:%M"), "preset": args.preset,
            "machine": f"{os.uname().nodename} {os.cpu_count()} cores",
            "python": sys.version.split()[0], "command": " ".join(sys.argv),
            "bytecode": BYTECODE, "root": JAXRNA_ROOT}
    try:
        import jax
        info["jax"] = jax.__version__
    except ImportError:
        pass
    print(json.dumps(info), flush=True)
    results = []
    counts = [int(c) for c in args.devices.split(",")] if args.devices else [None]
    for name in jobs:
        shas = set()
        for n in counts:
            r = bench_job(name, PRESETS[args.preset][name], args.data, args.backend, args.warm,
                          args.log, not args.no_peer and n == counts[0], n)
            results.append(r)
            shas.add(r["sha"])
            print(_row(r), flush=True)
        if len(shas) != 1:
            if not SHA_WARN:
                raise RuntimeError(f"{name}: outputs differ between device counts: {shas}")
            print(f"# {name}: outputs differ between device counts: {sorted(shas)}", flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"info": info, "results": results}, fh, indent=1)


if __name__ == "__main__":
    main()
