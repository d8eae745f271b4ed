"""One stored executable for every device of a kind (:func:`jaxrna.programs.store_key`): a
program compiled for one device is loaded onto another (:func:`jaxrna.executable_files.load`) instead
of being compiled again, and runs there with the same results. Run with two forced CPU devices
in a fresh process (the device count is fixed when JAX starts); a CPU program takes part when
the store keeps it (``cpu_store``), as on a GPU every program does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
from jaxrna import executable_files, programs, stages

programs.use_disk(sys.argv[1])
if sys.argv[2] == "no-internals":        # JAX's internals gone: only JAX's public loader
    def broken(*args, **kwargs):
        raise AttributeError("no such internal")
    executable_files.deserialize_onto = broken
d0, d1 = jax.devices()
f = jax.jit(lambda x, k: jnp.cumsum(x * k) - x[::-1], static_argnames="k")
out = {}
for name, dev, store in (("a", d0, True), ("b", d1, True), ("c", d0, False), ("d", d1, False)):
    x = jax.device_put(jnp.arange(6.0), dev)
    run = programs.program("test.store." + ("kept" if store else "own"), f, (x,), {"k": 3},
                           device=dev, cpu_store=store)
    y = run(x)
    out[name] = [np.asarray(y).tolist(), str(next(iter(y.devices())))]
out["counts"] = stages.counts()
print(json.dumps(out))
"""


def _run(tmp_path, mode: str) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=2",
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "store"), mode],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _expected() -> list[float]:
    import numpy as np

    x = np.arange(6.0)
    return (np.cumsum(x * 3) - x[::-1]).tolist()


def test_a_stored_program_compiles_once_and_runs_on_each_device(tmp_path):
    got = _run(tmp_path, "normal")
    want = _expected()
    assert got["a"][0] == want and got["a"][1].endswith("0")
    assert got["b"][0] == want and got["b"][1].endswith("1")      # ran on the second device
    assert got["c"][0] == want and got["d"][0] == want and got["d"][1].endswith("1")
    counts = got["counts"]
    # the kept program: compiled for cpu:0, loaded onto cpu:1; the other one compiled for each
    assert counts["executables_compiled"] == 3, counts
    assert counts["executables_loaded"] == 1, counts
    assert len(os.listdir(tmp_path / "store" / "executables")) == 1


def test_without_jax_internals_each_device_compiles_its_own(tmp_path):
    got = _run(tmp_path, "no-internals")
    want = _expected()
    assert [got[k][0] for k in "abcd"] == [want] * 4
    assert got["b"][1].endswith("1") and got["d"][1].endswith("1")
    counts = got["counts"]
    # JAX's public loader cannot move the executable to cpu:1: compiled there instead
    assert counts["executables_compiled"] == 4, counts
    assert counts.get("executables_loaded", 0) == 0, counts
