"""Benchmark ``jaxrna targets`` with energies: whole CLI runs on the synthetic set of
``bench/make_targets_data.py``, jaxrna's energy engines against the ViennaRNA path.

Every run is a fresh process, ``python -m jaxrna targets MIRNAS UTRS --quiet -o FILE [...]``,
with a compile cache shared by the runs (the first run of a preset warms it); wall time, the CPU
time of the process and its workers, the hits (``>`` lines of the report), the report's sha256
and the stage times the CLI writes with ``JAXRNA_PROFILE``. Runs that must agree (the same job
with two engines) are checked byte for byte.

Presets:

- ``cpu`` (this 2-core machine): 16 miRNAs x 30,000 targets with ``--energy-engine vienna``
  (the ViennaRNA path: every hit folded by ViennaRNA, a string at a time) and with the default
  engine (``cpu`` here: jaxrna's energy model vectorised with NumPy), the same without energies
  (the scan alone), and the folding alone: random 50-60 nt duplex strings folded by each engine
  on one core and on every core.
- ``gpu`` (one H200): the device engine's folds/s on random duplex strings (compile apart);
  16 x 30,000 (warms the cache); 2,000 x 30,000 with miRanda's defaults; the same with
  ``-en -20``; 16 x 30,000 with ``--energy-engine vienna`` (must equal the device run).

Results go to stdout as they come and, with ``--json-out FILE``, to FILE after every step (so
a run stopped by a time limit keeps what it measured). ``--deadline S`` skips steps once S
seconds have passed.

    python bench/bench_targets_energy.py --preset cpu --json-out cpu.json
    PYTHONPATH=. python3 bench/bench_targets_energy.py --preset gpu --deadline 220 --json-out gpu.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import make_targets_data  # noqa: E402
from as_installed import installed_env  # noqa: E402

T0 = time.perf_counter()


def ensure_data(path: str) -> tuple[str, str]:
    mirnas, utrs = os.path.join(path, "mirnas.fa"), os.path.join(path, "utrs.fa")
    if not (os.path.exists(mirnas) and os.path.exists(utrs)):
        make_targets_data.main(["--out", path])
    return mirnas, utrs


def first_mirnas(path: str, count: int, out: str) -> str:
    records, rid, seq = [], None, []
    with open(path) as fh:
        for line in fh:
            if line.startswith(">"):
                if rid is not None:
                    records.append((rid, "".join(seq)))
                rid, seq = line[1:].strip(), []
            else:
                seq.append(line.strip())
    if rid is not None:
        records.append((rid, "".join(seq)))
    with open(out, "w") as fh:
        fh.writelines(f">{r}\n{s}\n" for r, s in records[:count])
    return out


def sha256_and_hits(path: str) -> tuple[str, int]:
    digest, hits, tail = hashlib.sha256(), 0, b"\n"
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 24), b""):
            digest.update(block)
            text = tail + block
            hits += text.count(b"\n>") - text.count(b"\n>>")
            tail = block[-1:]
    return digest.hexdigest()[:16], hits


def cli_run(name: str, mirnas: str, utrs: str, args: list[str], work: str, env: dict,
            timeout: float | None = None) -> dict:
    """One ``jaxrna targets`` process; its wall and CPU time, output hash and hits."""
    out = os.path.join(work, f"{name}.txt")
    profile = os.path.join(work, f"{name}.profile.json")
    cmd = [sys.executable, "-m", "jaxrna", "targets", mirnas, utrs, "--quiet", "-o", out, *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    t = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=dict(env, JAXRNA_PROFILE=profile), capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"name": name, "args": args, "timed_out": True, "wall_s": time.perf_counter() - t}
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    rec = {"name": name, "args": args, "rc": proc.returncode, "wall_s": round(wall, 2),
           "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
           "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)}
    if proc.returncode != 0:
        rec["stderr"] = proc.stderr[-3000:]
        return rec
    rec["sha256"], rec["hits"] = sha256_and_hits(out)
    rec["bytes"] = os.path.getsize(out)
    try:
        with open(profile) as fh:
            rec["stages"] = json.load(fh)
    except (OSError, ValueError):
        pass
    os.unlink(out)
    return rec


def duplex_strings(count: int, seed: int = 1) -> list[str]:
    """Random fold strings as targets folds them: miRNA 3'->5' + XXXXXXX + site, 50-60 nt."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randint(43, 53)
        a = rng.randint(18, n - 18)
        out.append("".join(rng.choice("ACGU") for _ in range(a)) + "XXXXXXX"
                   + "".join(rng.choice("ACGU") for _ in range(n - a)))
    return out


def fold_rates(count: int, threads: list[int], vienna: bool = True) -> dict:
    """Folds per second of each engine on random duplex strings (this process)."""
    from jaxrna.targets import energy as E

    strings = duplex_strings(count)
    res = {"strings": count}
    ref = None
    if vienna:
        t = time.perf_counter()
        ref = [E.fold_energy(s) for s in strings]
        res["vienna_1_core_per_s"] = round(count / (time.perf_counter() - t))
    for k in threads:
        t = time.perf_counter()
        got = E.CpuEngine(threads=k).energies(strings)
        res[f"cpu_{k}_threads_per_s"] = round(count / (time.perf_counter() - t))
        if ref is not None and got != ref:
            res["MISMATCH"] = True
    return res


def device_probe(count: int) -> dict:
    """The device engine on random duplex strings: compile (or load), host-side encoding, then
    the device's folds/s (energies checked against the cpu engine)."""
    import jax

    from jaxrna.runtime import enable_compilation_cache
    from jaxrna.targets import energy as E

    enable_compilation_cache()
    device = jax.devices()[0]
    engine = E.DeviceEngine([device])
    strings = duplex_strings(count, seed=2)
    t = time.perf_counter()
    engine.energies(strings[:64])
    first = time.perf_counter() - t
    t = time.perf_counter()
    inputs = E.encode(strings)
    special = E.special_hairpins(inputs)
    host = time.perf_counter() - t
    t = time.perf_counter()
    dcal = engine.fold(inputs, special)
    rate = count / (time.perf_counter() - t)
    check = min(count, 20000)
    same = E.kcal(dcal[:check]).tolist() == E.CpuEngine().energies(strings[:check])
    return {"device": str(device), "kind": getattr(device, "device_kind", ""), "jax": jax.__version__,
            "batch": engine.batch_rows(device.platform, device),
            "compile_or_load_s": round(first, 1), "strings": count,
            "host_encode_per_s": round(count / host), "device_folds_per_s": round(rate),
            "checked_against_cpu_engine": check, "same": same}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--data", default=os.path.join(HERE, "data", "targets"))
    ap.add_argument("--json-out", metavar="FILE")
    ap.add_argument("--deadline", type=float, default=None, metavar="S",
                    help="skip steps once S seconds have passed since the start")
    ap.add_argument("--subset", type=int, default=16, help="miRNAs of the small runs (default 16)")
    ap.add_argument("--folds", type=int, default=None, help="strings of the folding-alone step")
    ap.add_argument("--skip", default="", help="comma-separated steps to leave out")
    args = ap.parse_args(argv)
    mirnas, utrs = ensure_data(args.data)
    work = tempfile.mkdtemp(prefix="bench-targets-energy-")
    env = installed_env(dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                             JAXRNA_CACHE_DIR=os.environ.get("JAXRNA_CACHE_DIR") or os.path.join(work, "cache")))
    env.pop("JAXRNA_ENERGY_ENGINE", None)
    sub = first_mirnas(mirnas, args.subset, os.path.join(work, f"mirnas{args.subset}.fa"))
    record = {"preset": args.preset, "machine": platform.node(), "cpus": os.cpu_count(),
              "python": platform.python_version(), "steps": {}}
    skip = set(filter(None, args.skip.split(",")))

    def left() -> float | None:
        return None if args.deadline is None else args.deadline - (time.perf_counter() - T0)

    def save(name, value):
        record["steps"][name] = value
        print(f"[{time.perf_counter() - T0:6.1f} s] {name}: {json.dumps(value)}", flush=True)
        if args.json_out:
            with open(args.json_out, "w") as fh:
                json.dump(record, fh, indent=1)

    def run(name, m, extra, need=0.0):
        if name in skip:
            return None
        budget = left()
        if budget is not None and budget < need:
            save(name, {"skipped": f"{budget:.0f} s left"})
            return None
        rec = cli_run(name, m, utrs, extra, work, env, timeout=budget)
        save(name, rec)
        return rec

    if args.preset == "gpu":
        if "probe" not in skip:
            code = ("import sys, json; sys.path.insert(0, %r); import bench_targets_energy as b; "
                    "print(json.dumps(b.device_probe(%d)))" % (HERE, args.folds or 262144))
            proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                  timeout=left())
            save("device_probe", json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0
                 else {"rc": proc.returncode, "stderr": proc.stderr[-3000:]})
        small = run(f"{args.subset}x30000 device (warm-up)", sub, [])
        run("2000x30000 defaults", mirnas, [], need=20)
        run("2000x30000 -en -20", mirnas, ["-en", "-20"], need=20)
        ref = run(f"{args.subset}x30000 vienna", sub, ["--energy-engine", "vienna"], need=20)
        if small and ref and "sha256" in small and "sha256" in ref:
            save("same_output_device_vs_vienna", small["sha256"] == ref["sha256"])
    else:
        if "folds" not in skip:
            from jaxrna.pipeline import cores

            save("fold_rates", fold_rates(args.folds or 3000, sorted({1, cores()})))
        run("warm-up (2 miRNAs, no energy)", first_mirnas(mirnas, 2, os.path.join(work, "m2.fa")), ["--no-energy"])
        base = run(f"{args.subset}x30000 no energy", sub, ["--no-energy"])
        ours = run(f"{args.subset}x30000 jaxrna (auto)", sub, [])
        ref = run(f"{args.subset}x30000 vienna", sub, ["--energy-engine", "vienna"])
        if ours and ref and "sha256" in ours and "sha256" in ref:
            save("summary", {"same_output": ours["sha256"] == ref["sha256"], "hits": ours["hits"],
                             "speedup_vs_vienna": round(ref["wall_s"] / ours["wall_s"], 2),
                             "energy_wall_s": {"jaxrna": round(ours["wall_s"] - base["wall_s"], 1),
                                               "vienna": round(ref["wall_s"] - base["wall_s"], 1)}
                             if base and "wall_s" in base else None})
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
