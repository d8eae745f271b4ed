"""GPU kernel time of ``targets``' energy program, kernel by kernel (JAX's profiler).

Folds ``N`` random duplex strings (miRNA + linker + site, 50-60 nt) with
:class:`jaxrna.targets.energy.DeviceEngine` in one call of ``N`` strings: first call (compile or
load), two timed calls, then one call under ``jax.profiler`` with a perfetto trace, whose GPU
events are summed per kernel name (the top 30 printed). ``JAXRNA_ENERGY_INTERIOR=jax|pallas``
picks the fill's interior-loop reduction (see :func:`jaxrna.energy.fill.interior_mode`).

    PYTHONPATH=. python3 bench/profile_energy_device.py 65536 --out /tmp/prof
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("count", type=int, nargs="?", default=65536)
    ap.add_argument("--out", default="/tmp/jaxrna-energy-profile")
    args = ap.parse_args()

    import jax

    from jaxrna.targets import energy as E

    rng = np.random.default_rng(1)
    bases = np.frombuffer(b"ACGU", np.uint8)

    def rand(n: int) -> str:
        return bases[rng.integers(0, 4, n)].tobytes().decode()

    strings = [rand(22) + E.LINKER + rand(int(rng.integers(22, 31))) for _ in range(args.count)]
    inputs = E.encode(strings)
    special = E.special_hairpins(inputs)
    engine = E.DeviceEngine(batch=args.count)
    t = time.perf_counter()
    first = engine.fold(inputs, special)
    print(f"first call (compile or load): {time.perf_counter() - t:.2f} s", flush=True)
    for _ in range(2):
        t = time.perf_counter()
        again = engine.fold(inputs, special)
        dt = time.perf_counter() - t
        print(f"call: {dt:.3f} s, {args.count / dt:,.0f} folds/s", flush=True)
        assert (again == first).all()
    trace_dir = os.path.join(args.out, "trace")
    os.makedirs(trace_dir, exist_ok=True)
    jax.profiler.start_trace(trace_dir, create_perfetto_trace=True)
    engine.fold(inputs, special)
    jax.profiler.stop_trace()
    path = sorted(glob.glob(os.path.join(trace_dir, "**", "*.trace.json.gz"), recursive=True))[-1]
    trace = json.load(gzip.open(path))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    per = collections.defaultdict(lambda: [0, 0.0])
    for e in events:
        if e.get("ph") == "X" and "GPU" in names.get(e["pid"], ""):
            per[e["name"]][0] += 1
            per[e["name"]][1] += e.get("dur", 0)
    total = sum(us for _, us in per.values())
    print(f"GPU kernel time {total / 1e3:.1f} ms in {sum(c for c, _ in per.values())} launches")
    for name, (count, us) in sorted(per.items(), key=lambda kv: -kv[1][1])[:30]:
        print(f"{us / 1e3:9.2f} ms {count:6d}  {name[:100]}")


if __name__ == "__main__":
    main()
