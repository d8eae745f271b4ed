"""What a ``jaxrna fold`` process pays before any work: fresh-process probes of interpreter
start, imports, JAX backend start-up (with and without GPU memory preallocation, CPU only),
and loading a stored executable, each the median of ``--reps`` fresh processes.

    PYTHONPATH=. python3 bench/probe_fold_startup.py [--reps 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBES = {
    "python": ("pass", {}),
    "import numpy": ("import numpy", {}),
    "import jaxrna.cli": ("import jaxrna.cli as c; c.build_parser()", {}),
    "import jax": ("import jax, jax.numpy", {}),
    "jax.devices() (all)": ("import jax; jax.devices()", {}),
    "jax.devices() no prealloc": ("import jax; jax.devices()",
                                  {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
    "jax.devices() cpu only": ("import jax; jax.devices()", {"JAX_PLATFORMS": "cpu"}),
    "gpu + first op": ("import jax, jax.numpy as jnp; jnp.ones(3).block_until_ready()", {}),
    "gpu + first op no prealloc": ("import jax, jax.numpy as jnp; jnp.ones(3).block_until_ready()",
                                   {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
}

LOAD = """
import time, jax, jax.numpy as jnp, numpy as np
from jaxrna import programs
programs.use_disk({cache!r})
f = jax.jit(lambda x: jnp.cumsum(x * 2 + 1))
t = time.perf_counter()
run = programs.program("probe.cumsum", f, (np.ones(1000, np.float32),))
run(np.ones(1000, np.float32)).block_until_ready()
print(time.perf_counter() - t)
"""


def probe(code: str, env: dict) -> float:
    """Wall seconds of one fresh ``python -c code``."""
    import time

    full = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                **env)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env=full, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    out = {}
    for name, (code, env) in PROBES.items():
        try:
            times = [probe(code, env) for _ in range(args.reps)]
            out[name] = statistics.median(times)
            print(f"{name:30s} {out[name]:6.3f} s  (runs: {', '.join(f'{t:.3f}' for t in times)})",
                  flush=True)
        except subprocess.CalledProcessError as exc:
            print(f"{name:30s} failed ({exc.returncode})", flush=True)
    cache = tempfile.mkdtemp(prefix="probe-aot-")
    for label in ("compile and store", "load stored", "load stored"):
        full = dict(os.environ, PYTHONPATH=ROOT)
        proc = subprocess.run([sys.executable, "-c", LOAD.format(cache=cache)], env=full,
                              capture_output=True, text=True)
        value = float(proc.stdout.strip()) if proc.returncode == 0 else None
        out.setdefault(f"aot {label}", value)
        print(f"aot {label:26s} {value if value is None else round(value, 3)} s (in process)",
              flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
