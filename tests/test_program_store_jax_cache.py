"""A program that jaxrna's store keeps is not written to JAX's persistent cache as well (a
second serialized copy no run reads); other programs still are, in the same thread after it."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT

SCRIPT = """
import os, jax, jax.numpy as jnp
from jaxrna import programs, runtime
d = runtime.enable_compilation_cache()
names = lambda: [f.split("-")[0] for f in os.listdir(d) if f.endswith("-cache")]
def stored_fn(x):
    return jnp.sin(x) * 3 + 1
def plain_fn(x):
    return jnp.cos(x) * 2
x, z = jnp.ones(5), jnp.zeros(7)
run = programs.program("test.stored_once", jax.jit(stored_fn), (x,), {}, jax.devices()[0],
                       cpu_store=True)
print(float(run(x - 1)[0]), "jit_stored_fn" in names(),
      len(os.listdir(os.path.join(d, "executables"))))
print(float(jax.jit(plain_fn)(z)[0]), "jit_plain_fn" in names(), "jit_stored_fn" in names())
"""


def test_stored_programs_skip_jax_cache_and_others_keep_it(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, JAXRNA_CACHE_DIR=str(tmp_path / "cache"),
               JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    first, second = out.stdout.split("\n")[:2]
    assert first.split() == ["1.0", "False", "1"]  # stored, and no JAX cache entry
    assert second.split() == ["2.0", "True", "False"]  # a plain program: JAX's cache has it
