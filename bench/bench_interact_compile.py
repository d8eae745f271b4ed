"""What the program of `jaxrna interact` costs to build and to run, per loop blocking.

For the CLI's job (23 nt whole x 20,000 nt, window 128 on strand 2, one pair) and each
``OUTERxINNER`` blocking of :func:`jaxrna.interact.windows.plan` (outer-diagonal groups x
inner-sweep groups), times the batch program of :mod:`jaxrna.interact.program` as a cold run
meets it -- trace, lower, backend compile (the persistent cache is off) -- and as a warm run
meets it -- loading its serialized executable (``jaxrna.programs``'s store) -- then the device
time of a run (best of ``--repeat``, outputs ready on the device) and of reading the outputs
back. Every configuration's outputs (the best window, all window scores, the traceback box)
must equal those of the first; ``--reference`` adds the fill without the fused split kernel
(max-plus products of :mod:`jaxrna.kernels.tropical`) as an independent check, and
``--check K`` compares K random small pairs and the spec's windowed tv3 with the reference DP.

    python bench/bench_interact_compile.py --configs 1x4,1x8,2x4,8x8 --reference --json out.json
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import jax  # noqa: E402
import numpy as np  # noqa: E402

from jaxrna.alphabet import encode_batch  # noqa: E402
from jaxrna.interact.api import make_problem  # noqa: E402
from jaxrna.interact.program import interact_program  # noqa: E402
from jaxrna.interact.windows import plan  # noqa: E402
from jaxrna.io.fasta import Record  # noqa: E402
from jaxrna.weights import parse_weights  # noqa: E402


def digest(out: dict) -> dict:
    """Small fingerprints of a program's outputs (host arrays)."""
    return {k: hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()[:16]
            for k, v in sorted(out.items())}


def measure(geo, args, repeat: int, device) -> dict:
    from jax.experimental.serialize_executable import deserialize_and_load, serialize

    jitted = jax.jit(interact_program, static_argnames=("geo", "box", "windows"))
    static = {"geo": geo, "box": True, "windows": True}
    row = {"geometry": str(geo)}
    t0 = time.perf_counter()
    traced = jitted.trace(*args, **static)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    comp = lowered.compile()
    t3 = time.perf_counter()
    row.update(trace_s=round(t1 - t0, 3), lower_s=round(t2 - t1, 3), compile_s=round(t3 - t2, 3))
    try:
        payload, in_tree, out_tree = serialize(comp)
        row["executable_mb"] = round(len(payload) / 2**20, 2)
        t0 = time.perf_counter()
        loaded = deserialize_and_load(payload, in_tree, out_tree, backend=device.platform,
                                      execution_devices=[device])
        row["load_s"] = round(time.perf_counter() - t0, 3)
        comp = loaded
    except Exception as exc:  # noqa: BLE001 - reported, the run goes on
        row["serialize_error"] = repr(exc)[:300]
    t0 = time.perf_counter()
    dev_args = jax.device_put(args, device)
    jax.block_until_ready(comp(*dev_args))              # first run (allocations, loading)
    row["first_run_s"] = round(time.perf_counter() - t0, 4)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = jax.block_until_ready(comp(*dev_args))
        best = min(best, time.perf_counter() - t0)
    t0 = time.perf_counter()
    host = jax.device_get(out)
    row["run_s"] = round(best, 4)
    row["read_back_s"] = round(time.perf_counter() - t0, 4)
    row["summary"] = [int(x) for x in host["summary"][0]]
    row["digest"] = digest(host)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="1x4,1x8,1x2,2x4,8x8",
                    help="comma-separated OUTERxINNER blockings (the first is the baseline)")
    ap.add_argument("--short", type=int, default=23)
    ap.add_argument("--long", type=int, default=20000)
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reference", action="store_true",
                    help="also the fill without the fused kernel (an independent check)")
    ap.add_argument("--check", type=int, default=0, metavar="K")
    ap.add_argument("--deadline", type=float, default=float("inf"),
                    help="start no configuration after this many seconds")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    start = time.perf_counter()
    backend = "gpu" if jax.default_backend() == "gpu" else "cpu"
    device = jax.devices(backend)[0]
    weights = parse_weights("bpmax")
    info = {"device": device.device_kind, "jax": jax.__version__, "host": platform.node(),
            "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M"),
            "command": " ".join(sys.argv)}
    print(json.dumps(info), flush=True)
    rows: list[dict] = []

    def save():
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"info": info, "rows": rows}, fh, indent=1)

    if args.check:
        from bench_interact import check

        check(args.check, backend, weights)
    rng = np.random.default_rng(2021)
    s1 = "".join(rng.choice(list("ACGU"), size=args.short))
    s2 = "".join(rng.choice(list("ACGU"), size=args.long))
    prob = make_problem(Record("a", s1), Record("b", s2), None, args.window, backend=backend)
    p = prob.plan
    cu = encode_batch([prob.outer], p.geo.n_outer)[0]
    cv = encode_batch([prob.inner], p.geo.n_inner)[0]
    wm = np.asarray(weights.matrix(), np.int32)
    inf = np.array([[p.n_outer, p.n_inner, p.l_outer, p.l_inner, int(prob.outer_is_1)]], np.int32)
    spans = np.array([p.l_outer, p.l_inner], np.int32)   # the diagonals the fill runs
    configs = [(c, None) for c in args.configs.split(",") if c]
    if args.reference:
        configs.append((configs[0][0] if configs else "8x8", False))
    base = None
    for name, fused in configs:
        if time.perf_counter() - start > args.deadline:
            print(f"# {name}: skipped (deadline)", flush=True)
            continue
        ob, ib = (int(x) for x in name.split("x"))
        geo = plan(p.n_outer, p.n_inner, p.l_outer, p.l_inner, backend=backend,
                   outer_blocks=ob, inner_blocks=ib, fused=fused).geo
        try:
            row = measure(geo, (cu, cv, wm, inf, spans), args.repeat, device)
        except Exception as exc:  # noqa: BLE001
            row = {"geometry": str(geo), "error": repr(exc)[:500]}
        row["config"] = name + ("" if fused is None else " unfused")
        if "digest" in row:
            if base is None:
                base = row["digest"]
            row["same_as_first"] = row["digest"] == base
        rows.append(row)
        print(json.dumps(row), flush=True)
        save()
    if any(r.get("same_as_first") is False for r in rows):
        print("# OUTPUTS DIFFER between configurations", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
