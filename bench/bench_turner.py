"""Benchmark of the Turner energy engine (jaxrna fold --model turner) with ViennaRNA as the peer
in the same run, on whatever device JAX sees (GPU when there is one).

Workloads (issue 16's goals):

- ``batch``: N random sequences of L nt (default 100,000 x 100), minimum free energy and
  structure, end to end through the CLI (``python -m jaxrna fold --model turner``, a fresh
  compile cache: one cold run, one warm run); peer: ViennaRNA ``RNA.fold`` on every core.
- ``duplex``: N strings of 50-60 nt folded as ``targets`` folds them (Turner 1999, 30 C,
  dangles 1, the 7-nt linker unpaired), energies only, through the library (device time);
  peer: ViennaRNA on every core with the same settings.
- ``duplex-engine``: the same strings through what ``jaxrna targets`` runs (its device energy
  engine, :class:`jaxrna.targets.energy.DeviceEngine`, host encoding included; its NumPy engine
  on a CPU).
- ``long``: one sequence of L nt (default 4,000), structure included; peer: ViennaRNA on one
  core (it does not parallelise one sequence).

Every jaxrna energy is compared with the peer's (the run fails on any difference), so the
table is also a GPU-equals-CPU check. Prints one table; ``--json FILE`` keeps the numbers.

    python bench/bench_turner.py                              # all three, issue sizes
    python bench/bench_turner.py --workloads batch --count 1000 --length 100   # CPU goal
    python bench/bench_turner.py --workloads duplex --count 20000 --quick
    python bench/bench_turner.py --workloads batch --count 1000 --min-length 50 --length 500
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from as_installed import installed_env  # noqa: E402

LINKER = 7


def random_sequences(count: int, lo: int, hi: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice("ACGU") for _ in range(rng.randint(lo, hi))) for _ in range(count)]


def duplex_strings(count: int, seed: int) -> list[str]:
    """miRNA (3'->5') + GGGGGGG linker + site, 50-60 nt in all, as targets folds them."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        n = rng.randint(50 - LINKER, 60 - LINKER)
        a = rng.randint(18, n - 18)
        mirna = "".join(rng.choice("ACGU") for _ in range(a))
        site = "".join(rng.choice("ACGU") for _ in range(n - a))
        out.append(mirna + "G" * LINKER + site)
    return out


# --------------------------------------------------------------------------- the peer

_PEER = {}


def _peer_init(params: str, temperature: float, dangles: int, linker: bool) -> None:
    import RNA

    if params == "turner1999":
        RNA.params_load_RNA_Turner1999()
    md = RNA.md()
    md.temperature = temperature
    md.dangles = dangles
    _PEER.update(RNA=RNA, md=md, linker=linker)


def _peer_fold(seq: str) -> int:
    RNA, md = _PEER["RNA"], _PEER["md"]
    fc = RNA.fold_compound(seq, md)
    if _PEER["linker"]:
        start = seq.index("G" * LINKER)
        for k in range(start, start + LINKER):
            fc.hc_add_up(k + 1)
    _, e = fc.mfe()
    return int(round(e * 100))


def peer(seqs, params="turner2004", temperature=37.0, dangles=2, linker=False, processes=None):
    """ViennaRNA's energies (dcal/mol) and the wall time, on ``processes`` cores."""
    processes = processes or os.cpu_count() or 1
    t = time.perf_counter()
    if processes == 1:
        _peer_init(params, temperature, dangles, linker)
        out = [_peer_fold(s) for s in seqs]
    else:
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(processes, _peer_init, (params, temperature, dangles, linker)) as pool:
            out = pool.map(_peer_fold, seqs, chunksize=max(1, len(seqs) // (processes * 16)))
    return out, time.perf_counter() - t


# --------------------------------------------------------------------------- workloads

def device_name() -> str:
    import jax

    d = jax.devices()[0]
    return f"{d.platform}:{getattr(d, 'device_kind', '')}"


def run_batch(count: int, length: int, seed: int, log_dir: str | None = None,
              min_length: int | None = None, backend: str = "auto") -> dict:
    seqs = random_sequences(count, min_length or length, length, seed)
    with tempfile.TemporaryDirectory() as tmp:
        fa = os.path.join(tmp, "in.fa")
        with open(fa, "w") as fh:
            for k, s in enumerate(seqs):
                fh.write(f">s{k}\n{s}\n")
        path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)  # keep the caller's
        env = installed_env(dict(os.environ, PYTHONPATH=path, JAXRNA_CACHE_DIR=os.path.join(tmp, "cache")))
        times, stages, failed = [], [], None
        out = os.path.join(tmp, "out.tsv")
        for run in ("cold", "warm"):
            env["JAXRNA_PROFILE"] = os.path.join(tmp, f"{run}.json")
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "jaxrna", "fold", "--model", "turner", fa,
                                   "-v", "-f", "tsv", "-o", out, "--backend", backend], env=env, capture_output=True,
                                  text=True)
            times.append(time.perf_counter() - t)
            if log_dir:
                with open(os.path.join(log_dir, f"turner_batch_{run}.stderr"), "w") as fh:
                    fh.write(proc.stderr)
            if proc.returncode != 0:      # keep what it said: the table says why
                failed = f"{run} run exit {proc.returncode}: {proc.stderr.strip()[-600:]}"
                print(failed, file=sys.stderr)
                break
            try:
                stages.append(json.load(open(env["JAXRNA_PROFILE"])))
            except OSError:
                stages.append(None)
        energies = None if failed else [round(float(line.split("\t")[2]) * 100)
                                         for line in open(out).read().splitlines()[1:]]
    want, t_peer = peer(seqs)
    span = f"{min_length}-{length}" if min_length else f"{length}"
    row = {"workload": f"batch {count} x {span} nt (CLI, structures)",
           "jaxrna_s": times[-1] if not failed else float("nan"),
           "jaxrna_cold_s": times[0], "peer_s": t_peer, "peer": f"ViennaRNA, {os.cpu_count()} cores",
           "per_s": count / times[-1] if not failed else 0.0, "exact": energies == want,
           "profiles": stages}
    if failed:
        row["error"] = failed
    return row


def run_duplex_engine(count: int, seed: int, peer_count: int | None = None) -> dict:
    """The same strings through what ``jaxrna targets`` runs: its device energy engine
    (:class:`jaxrna.targets.energy.DeviceEngine`: host encoding, special hairpins, batches of
    16,384 strings padded to 64 nt) on a GPU, its NumPy engine on a CPU."""
    import jax

    from jaxrna.targets.energy import CpuEngine, DeviceEngine, encode, special_hairpins

    from jaxrna.targets.energy import fold_energy

    # the strings as targets writes them: the linker as X (held unpaired, folded as G)
    seqs = [s.replace("G" * LINKER, "X" * LINKER, 1) for s in duplex_strings(count, seed)]
    gpu = jax.devices()[0].platform != "cpu"
    engine = DeviceEngine() if gpu else CpuEngine()
    engine.fold(encode(seqs[:20000]))                                # compile or load
    t = time.perf_counter()
    inputs = encode(seqs)
    special = special_hairpins(inputs) if gpu else None
    t_encode = time.perf_counter() - t
    t1 = time.perf_counter()
    dcal = engine.fold(inputs, special) if gpu else engine.fold(inputs)
    t_engine = time.perf_counter() - t1
    t_ours = time.perf_counter() - t
    device_rate = None
    if gpu:   # the device program alone: one batch already on the device, called again
        device_rate = _device_rate(engine, inputs, special)
    # the peer: targets' ViennaRNA path on every core, on the first peer_count strings (its
    # time scaled to all of them; the energies compared on those)
    checked = min(count, peer_count or count)
    t = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(os.cpu_count() or 1) as pool:
        want = pool.map(fold_energy, seqs[:checked],
                        chunksize=max(1, checked // ((os.cpu_count() or 1) * 16)))
    t_peer = (time.perf_counter() - t) * count / checked
    exact = [int(x) for x in dcal[:checked]] == [int(round(w * 100)) for w in want]
    return {"workload": f"duplex {count} x 50-60 nt, targets' {engine.name} engine",
            "jaxrna_s": t_ours, "peer_s": t_peer, "peer": f"ViennaRNA, {os.cpu_count()} cores",
            "per_s": count / t_ours, "exact": exact, "encode_s": t_encode, "engine_s": t_engine,
            "engine_per_s": count / t_engine, "device_per_s": device_rate,
            "peer_checked": checked}


def _device_rate(engine, inputs, special, calls: int = 5) -> dict:
    """Folds per second of the device program alone: one batch of the engine's size, its
    inputs put on the device once, the program called ``calls`` times (median)."""
    import jax

    from jaxrna.targets import energy as E

    device = jax.devices()[0]
    size = engine.batch_rows(device.platform, device)
    part = np.arange(min(size, len(inputs)))
    program, args = engine.call(inputs, special, part, E.DEVICE_LENGTH, size, device.platform)
    args = jax.device_put(args)
    jax.block_until_ready(program(*args))
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        jax.block_until_ready(program(*args))
        times.append(time.perf_counter() - t)
    median = sorted(times)[len(times) // 2]
    return {"batch": size, "median_s": median, "per_s": size / median}


def run_duplex(count: int, seed: int, batch: int) -> dict:
    from jaxrna.energy.api import fold_batch
    from jaxrna.energy.params import load_params

    seqs = duplex_strings(count, seed)
    params = load_params("turner1999", 30.0)
    unpaired = [list(range(s.index("G" * LINKER), s.index("G" * LINKER) + LINKER)) for s in seqs]
    fold_batch(seqs[:batch], params, 1, unpaired=unpaired[:batch], with_pairs=False, length=64,
               batch=batch)                                   # compile
    t = time.perf_counter()
    energies = []
    for k in range(0, count, batch):
        got = fold_batch(seqs[k:k + batch], params, 1, unpaired=unpaired[k:k + batch],
                         with_pairs=False, length=64, batch=batch)
        energies += [e for e, _ in got]
    t_ours = time.perf_counter() - t
    want, t_peer = peer(seqs, "turner1999", 30.0, 1, linker=True)
    return {"workload": f"duplex {count} x 50-60 nt (T1999, 30 C, d1, energies)", "jaxrna_s": t_ours,
            "peer_s": t_peer, "peer": f"ViennaRNA, {os.cpu_count()} cores",
            "per_s": count / t_ours, "exact": energies == want}


def run_long(length: int, seed: int) -> dict:
    from jaxrna.energy.api import fold_batch
    from jaxrna.energy.params import load_params

    seq = random_sequences(1, length, length, seed)[0]
    params = load_params()
    t = time.perf_counter()
    fold_batch([seq], params, 2)
    t_cold = time.perf_counter() - t
    t = time.perf_counter()
    [(energy, _)] = fold_batch([seq], params, 2)
    t_ours = time.perf_counter() - t
    want, t_peer = peer([seq], processes=1)
    return {"workload": f"one {length} nt sequence (structure)", "jaxrna_s": t_ours,
            "jaxrna_cold_s": t_cold, "peer_s": t_peer, "peer": "ViennaRNA, 1 core",
            "per_s": 1 / t_ours, "exact": [energy] == want}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default="batch,duplex,long")
    ap.add_argument("--count", type=int, default=None, help="sequences (batch/duplex)")
    ap.add_argument("--peer-count", type=int, default=None,
                    help="duplex-engine: run the peer on this many of the strings (its time "
                         "scaled to all; energies compared on those)")
    ap.add_argument("--length", type=int, default=None, help="nt (batch: 100, long: 4000)")
    ap.add_argument("--min-length", type=int, default=None,
                    help="batch: random lengths from this to --length (a mix of classes)")
    ap.add_argument("--backend", default="auto", help="batch: the CLI's --backend")
    ap.add_argument("--duplex-batch", type=int, default=None,
                    help="device batch of the duplex workload (default 8192 on a GPU, 8 on a CPU)")
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--log-dir", metavar="DIR", help="keep the CLI runs' stderr here")
    args = ap.parse_args(argv)

    device = device_name()
    gpu = not device.startswith("cpu")
    rows = []
    for w in args.workloads.split(","):
        if w == "batch":
            rows.append(run_batch(args.count or (2000 if args.quick else 100_000), args.length or 100,
                                  args.seed, args.log_dir, args.min_length, args.backend))
        elif w == "duplex":
            batch = args.duplex_batch or (8192 if gpu else 8)
            rows.append(run_duplex(args.count or (20_000 if args.quick else 1_000_000), args.seed,
                                   batch))
        elif w == "duplex-engine":
            rows.append(run_duplex_engine(args.count or (20_000 if args.quick else 1_000_000),
                                          args.seed, args.peer_count))
        elif w == "long":
            rows.append(run_long(args.length or (1000 if args.quick else 4000), args.seed))
        else:
            ap.error(f"unknown workload {w!r}")
    print(f"device: {device}; cores: {os.cpu_count()}")
    print(f"{'workload':58s} {'jaxrna s':>9s} {'cold s':>8s} {'peer s':>9s} {'speed-up':>9s} "
          f"{'per s':>10s}  exact  peer")
    for r in rows:
        cold = f"{r['jaxrna_cold_s']:8.2f}" if "jaxrna_cold_s" in r else f"{'-':>8s}"
        print(f"{r['workload']:58s} {r['jaxrna_s']:9.2f} {cold} {r['peer_s']:9.2f} "
              f"{r['peer_s'] / r['jaxrna_s']:8.2f}x {r['per_s']:10.4g}  {str(r['exact']):5s}  {r['peer']}")
        if "engine_per_s" in r:
            dev = r.get("device_per_s")
            print(f"    encoding {r['encode_s']:.2f} s, engine {r['engine_s']:.2f} s "
                  f"({r['engine_per_s']:,.0f}/s)" + (
                      f", device program alone {dev['per_s']:,.0f}/s ({dev['batch']:,} a call)"
                      if dev else ""))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": device, "cores": os.cpu_count(), "rows": rows}, fh, indent=1)
    return 0 if all(r["exact"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
