"""In one process, where a GPU fold spends its time: backend start-up, the first allocation,
and for each program of the fold CLI (a batch of 1,000 x 512 nt, one 16,000-nt sequence, the
partition function of 2,000 nt) its compile time and run time, freshly compiled and again
after a round trip through the stored-executable cache (:mod:`jaxrna.programs`); the
traceback both as the one-kernel walk and as the XLA walk.

    PYTHONPATH=. python3 bench/probe_fold_device.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

T0 = time.perf_counter()
import jax  # noqa: E402
import numpy as np  # noqa: E402

OUT: dict = {"import_jax": time.perf_counter() - T0}


def note(key, value):
    OUT[key] = value
    print(f"{key:45s} {value if not isinstance(value, float) else round(value, 4)}", flush=True)


def timed_runs(run, args, reps=3):
    times, dispatch = [], []
    for _ in range(reps):
        t = time.perf_counter()
        out = run(*args)
        dispatch.append(time.perf_counter() - t)
        jax.block_until_ready(out)
        times.append(time.perf_counter() - t)
    return out, times, dispatch


def probe_program(label, jitted, args, static, device):
    from jaxrna import programs

    try:
        t = time.perf_counter()
        with jax.default_device(device):
            compiled = jitted.lower(*args, **static).compile()
        note(f"{label}: compile s", time.perf_counter() - t)
    except Exception as exc:  # noqa: BLE001
        note(f"{label}: compile FAILED", repr(exc)[:400])
        return None
    dev_args = jax.device_put(args, device)
    out, times, dispatch = timed_runs(compiled, dev_args)
    note(f"{label}: run s (fresh)", [round(x, 4) for x in times])
    note(f"{label}: dispatch s (fresh)", [round(x, 4) for x in dispatch])
    path = os.path.join(tempfile.mkdtemp(), "x.bin")
    t = time.perf_counter()
    programs._save(path, compiled)
    loaded = programs._load(path, device)
    note(f"{label}: save+load s", time.perf_counter() - t)
    if loaded is None:
        note(f"{label}: load FAILED", True)
        return out
    out2, times, dispatch = timed_runs(loaded, dev_args)
    note(f"{label}: run s (loaded)", [round(x, 4) for x in times])
    note(f"{label}: dispatch s (loaded)", [round(x, 4) for x in dispatch])
    same = all(np.array_equal(np.asarray(a), np.asarray(b))
               for a, b in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(out2)))
    note(f"{label}: loaded output equal", same)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--skip", default="", help="comma-separated: many,long,partition")
    args = ap.parse_args()
    skip = set(args.skip.split(","))
    t = time.perf_counter()
    device = jax.devices()[0]
    note("backend start (jax.devices) s", time.perf_counter() - t)
    note("device", str(device))
    note("preallocate env", os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"))
    t = time.perf_counter()
    jax.device_put(np.ones(4, np.float32), device).block_until_ready()
    note("first allocation s", time.perf_counter() - t)
    rng = np.random.default_rng(1)
    from jaxrna.weights import parse_weights

    wm = parse_weights("unit").matrix()
    if "many" not in skip:
        from jaxrna.fold import api

        rows, L = 1024, 512
        codes = rng.integers(0, 4, (rows, L)).astype(np.int8)
        lengths = rng.integers(257, 513, rows).astype(np.int32)
        for walk in ("kernel", "xla"):
            static = api._static(3, True, "gpu")
            static["walk"] = walk
            out = probe_program(f"many 1024x512 walk={walk}", api._jitted(), (codes, lengths, wm),
                                static, device)
            if out is not None:
                note(f"many walk={walk}: ok all", bool(np.asarray(out[2]).all()))
                OUT.setdefault("many_partner_sums", []).append(int(np.asarray(out[1]).sum()))
    if "long" not in skip:
        from jaxrna.fold import gpu

        n = 16000
        cfg = gpu.config_for_length(16384)
        codes = np.full(16384, 4, np.int32)
        codes[:n] = rng.integers(0, 4, n)
        for walk in ("kernel", "xla"):
            static = dict(min_loop=3, config=cfg, interpret=False, with_pairs=True, walk=walk)
            out = probe_program(f"long 16000 walk={walk}", gpu._packed_jit,
                                (codes, wm, np.asarray(n, np.int32)), static, device)
            if out is not None:
                note(f"long walk={walk}: score, ok", (int(out[0]), bool(out[2])))
                OUT.setdefault("long_partner_sums", []).append(int(np.asarray(out[1]).sum()))
        static = dict(min_loop=3, config=cfg, interpret=False, with_pairs=False, walk="xla")
        probe_program("long 16000 fill+score only", gpu._packed_jit,
                      (codes, wm, np.asarray(n, np.int32)), static, device)
    if "partition" not in skip:
        from jaxrna.fold import partition as pt

        n = 2000
        padded = pt.padded_length(n)
        with pt.float64():
            codes = np.full(padded, 4, np.int32)
            codes[:n] = rng.integers(0, 4, n)
            w = np.asarray(wm, np.float64)
            for groups in (1, 2):
                static = dict(min_loop=3, method="blocked", tile=pt.default_tile(padded),
                              groups=groups)
                out = probe_program(f"partition 2000 groups={groups}", pt.solve_jit,
                                    (codes, w, np.asarray(1.0)), static, device)
                if out is not None:
                    note(f"partition groups={groups}: lnZ", float(out[0]))
    if "api" not in skip:               # which programs the CLI's many-job path asks for
        import logging

        from jaxrna import programs
        from jaxrna.fold import api
        from jaxrna.io.fasta import Record

        logging.basicConfig(level=logging.WARNING)
        logging.getLogger("jaxrna").setLevel(logging.DEBUG)
        programs.PREFETCH_FROM_CORES = 1 if os.cpu_count() >= 4 else 99
        rng2 = np.random.default_rng([20261125, 1])
        lens = rng2.integers(50, 501, 1000)
        recs = [Record(id=f"s{k}", sequence=np.frombuffer(b"ACGU", np.uint8)[
            rng2.integers(0, 4, int(n))].tobytes().decode()) for k, n in enumerate(lens)]
        for rep in range(2):
            t = time.perf_counter()
            res = list(api.fold_records(recs, "unit", 3, backend="gpu"))
            note(f"api many 1000 run {rep} s", time.perf_counter() - t)
        note("api many programs", programs.memo_size())
        note("api many kernel walk failed", api._kernel_walk_failed)
        note("api many score sum", sum(r.score_units for r in res))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(OUT, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
