"""``jaxrna fold`` timed as a user runs it: whole processes, cold and warm, with a stage breakdown.

Issue 14's fold rows, generated from fixed seeds: ``seq100`` (``--sequence`` of 100 nt),
``many`` (1,000 sequences of 50-500 nt), ``long`` (one 16,000-nt sequence, with its structure)
and ``partition`` (``--partition`` of one 2,000-nt sequence). ``--scale`` multiplies the count
of ``many`` and the lengths of ``long`` and ``partition`` (``--long`` and ``--partition-length``
set those two directly). Each job runs as fresh ``python -m jaxrna`` processes: *cold* with an
empty ``JAXRNA_CACHE_DIR``, *warm* the ``--warm`` runs after it with the same directory
(median reported). Every run writes its stage times (``JAXRNA_PROFILE``): ``startup`` is the
interpreter before jaxrna's first module, ``compile`` tracing/compiling or loading programs
(``compiled``: programs built rather than loaded), ``device`` waiting for results, ``other``
the rest of the wall time. The outputs of all runs of a job must be identical.

    python bench/bench_fold_cli.py --long 2000                       # this 2-core CPU
    PYTHONPATH=. python3 bench/bench_fold_cli.py --json fold_cli.json  # one H200 machine
    python bench/bench_fold_cli.py --jobs seq100,many --warm 3 --backend cpu
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
ROOT = os.path.dirname(HERE)
SEED = 20261125
JOBS = ["seq100", "many", "long", "partition"]
STAGES = ["startup", "imports", "setup", "read", "encode", "compile", "device", "traceback",
          "format", "write"]


def _rna(rng: np.random.Generator, n: int) -> str:
    return np.frombuffer(b"ACGU", np.uint8)[rng.integers(0, 4, n)].tobytes().decode()


def _fasta(path: str, prefix: str, seqs: list[str]) -> str:
    with open(path, "w") as fh:
        for k, s in enumerate(seqs):
            fh.write(f">{prefix}{k + 1}\n")
            for i in range(0, len(s), 60):
                fh.write(s[i:i + 60] + "\n")
    return path


def make_job(name: str, sizes: dict, data: str, extra: list[str]) -> tuple[list[str], str]:
    """CLI arguments of job ``name`` (its input written under ``data``) and its output path."""
    rng = np.random.default_rng([SEED, JOBS.index(name)])
    d = os.path.join(data, name)
    os.makedirs(d, exist_ok=True)
    out = os.path.join(d, "out.txt")
    common = ["-q", "-o", out] + extra
    if name == "seq100":
        return ["fold", "--sequence", _rna(rng, 100)] + common, out
    if name == "many":
        lens = rng.integers(50, 501, sizes["many"])
        fa = _fasta(os.path.join(d, "many.fa"), "s", [_rna(rng, int(n)) for n in lens])
        return ["fold", fa] + common, out
    if name == "long":
        fa = _fasta(os.path.join(d, "long.fa"), "long", [_rna(rng, sizes["long"])])
        return ["fold", fa] + common, out
    if name == "partition":
        fa = _fasta(os.path.join(d, "one.fa"), "p", [_rna(rng, sizes["partition"])])
        return ["fold", fa, "--partition"] + common, out
    raise ValueError(name)


def _sha(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()[:16]


def run_cli(args: list[str], cache: str, out: str, env_extra: dict | None = None) -> dict:
    """One fresh process: wall time, stages, counts and the output's hash."""
    fd, profile = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env = dict(os.environ, JAXRNA_CACHE_DIR=cache, JAXRNA_PROFILE=profile,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               **(env_extra or {}))
    if os.path.exists(out):
        os.unlink(out)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "jaxrna"] + args, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"jaxrna {' '.join(args)[:200]} exited {proc.returncode}:\n"
                           + proc.stderr.decode()[-3000:])
    try:
        with open(profile) as fh:
            prof = json.load(fh)
    except ValueError:              # a jaxrna without stage profiles: wall time only
        prof = {"stages": {}, "counts": {}, "in_process_s": wall}
    os.unlink(profile)
    stages = {k: v for k, v in prof["stages"].items() if not k.startswith("_")}
    stages["startup"] = wall - prof["in_process_s"]
    stages["other"] = wall - sum(v for k, v in stages.items() if "(background)" not in k)
    return {"wall": wall, "stages": stages, "counts": prof["counts"],
            "compile_parts": {k: v for k, v in prof["stages"].items() if k.startswith("_")},
            "sha": _sha(out)}


def bench_job(name: str, sizes: dict, data: str, extra: list[str], warm: int,
              check: bool = False) -> dict:
    args, out = make_job(name, sizes, data, extra)
    cache = tempfile.mkdtemp(prefix=f"jaxrna-fold-cache-{name}-")
    try:
        cold = run_cli(args, cache, out)
        warms = [run_cli(args, cache, out) for _ in range(warm)]
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    shas = {r["sha"] for r in [cold] + warms}
    if len(shas) != 1:
        raise RuntimeError(f"{name}: outputs differ between runs: {shas}")
    r = {"job": name, "cold": cold, "warm": warms, "sha": shas.pop(),
         "size": {"seq100": 100, "many": sizes["many"], "long": sizes["long"],
                  "partition": sizes["partition"]}[name]}
    if warms:
        r["warm_median"] = statistics.median(x["wall"] for x in warms)
    if check:     # the same job on the NumPy engine (host traceback): the same bytes?
        cache = tempfile.mkdtemp(prefix="jaxrna-fold-check-")
        try:
            ref = run_cli(args, cache, out, {"JAXRNA_FOLD_HOST_WORK": "1e30"})
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        r["check"] = {"engine": "host", "wall": ref["wall"], "equal": ref["sha"] == r["sha"]}
        print(f"check {name}: NumPy engine {'EQUAL' if r['check']['equal'] else 'DIFFERENT'}"
              f" ({ref['wall']:.2f} s)", flush=True)
    return r


def _parts(run: dict) -> str:
    st = run["stages"]
    keys = STAGES + ["other"]
    parts = " ".join(f"{k[:6]} {st[k]:.2f}" for k in keys if st.get(k, 0) >= 0.005)
    bg = " ".join(f"{k.split()[0][:6]}(bg) {v:.2f}" for k, v in st.items() if "(background)" in k)
    return (parts + " " + bg).strip()


def table(results: list[dict]) -> str:
    lines = [f"{'job':10s} {'size':>6s} {'cold s':>7s} {'warm s':>7s} {'compiled':>9s}  "
             f"warm stages (s) | cold stages (s)"]
    for r in results:
        w = min(r["warm"], key=lambda x: abs(x["wall"] - r["warm_median"])) if r["warm"] else None
        warm = f"{r['warm_median']:7.2f}" if w else "      -"
        compiled = f"{r['cold']['counts'].get('compiled', 0)}/" \
                   f"{w['counts'].get('compiled', 0) if w else '-'}"
        lines.append(f"{r['job']:10s} {r['size']:>6d} {r['cold']['wall']:7.2f} {warm} "
                     f"{compiled:>9s}  {_parts(w) if w else ''} | {_parts(r['cold'])}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", default=",".join(JOBS), help="comma-separated, of: " + ", ".join(JOBS))
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--long", type=int, default=None, help="length of the long job (16,000 x scale)")
    ap.add_argument("--partition-length", type=int, default=None, help="(2,000 x scale)")
    ap.add_argument("--backend", default="auto", choices=["auto", "cpu", "gpu"])
    ap.add_argument("--warm", type=int, default=2, help="warm runs per job (median reported)")
    ap.add_argument("--data", default=None, help="where the inputs go (default: a temporary dir)")
    ap.add_argument("--json", default=None, help="write every run's numbers here")
    ap.add_argument("--check", default="", help="jobs (comma-separated) whose output is also "
                    "computed on the NumPy engine and compared (seq100, many)")
    args = ap.parse_args()
    jobs = [j for j in args.jobs.split(",") if j]
    for j in jobs:
        if j not in JOBS:
            ap.error(f"unknown job {j}")
    sizes = {"many": max(1, round(1000 * args.scale)),
             "long": args.long or max(2, round(16000 * args.scale)),
             "partition": args.partition_length or max(2, round(2000 * args.scale))}
    data = args.data or tempfile.mkdtemp(prefix="jaxrna-fold-bench-")
    extra = ["--backend", args.backend]
    info = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": f"{os.uname().nodename}, "
            f"{os.cpu_count()} cores", "python": sys.version.split()[0],
            "command": " ".join(sys.argv), "sizes": sizes}
    print(json.dumps(info), flush=True)
    results = []
    for name in jobs:
        results.append(bench_job(name, sizes, data, extra, args.warm,
                                 name in args.check.split(",")))
        print(table(results[-1:]).splitlines()[-1] if results[1:] else table(results), flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"info": info, "results": results}, fh, indent=1)
    print()
    print(table(results))
    if not args.data:
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
