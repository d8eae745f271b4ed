"""Start-up floors of a fresh process on this machine: the interpreter, NumPy, `import jax`,
JAX's backends (all, CUDA only, CPU only), a first tiny GPU operation (with and without
interpreter teardown), and whether starting JAX in a thread beside host work hides it. The
median of 3 fresh processes each; prints JSON.

    PYTHONPATH=. python3 bench/startup_probe.py
"""
import json, os, subprocess, sys, time, statistics

def t(code, env=None, n=3):
    out = []
    for _ in range(n):
        s = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **(env or {})), check=False, stderr=subprocess.DEVNULL)
        out.append(time.perf_counter() - s)
    return round(statistics.median(out), 3)

res = {}
res["python -c pass"] = t("pass")
res["import numpy"] = t("import numpy")
res["import jax"] = t("import jax")
res["jax.devices() (all)"] = t("import jax; jax.devices()")
res["jax.devices() JAX_PLATFORMS=cuda"] = t("import jax; jax.devices()", {"JAX_PLATFORMS": "cuda"})
res["jax.devices() JAX_PLATFORMS=cpu"] = t("import jax; jax.devices()", {"JAX_PLATFORMS": "cpu"})
res["tiny op on gpu"] = t("import jax, jax.numpy as jnp; jnp.ones(3).block_until_ready()")
res["tiny op, os._exit"] = t("import os, jax, jax.numpy as jnp; jnp.ones(3).block_until_ready(); os._exit(0)")
code_bg = ("import threading\n"
           "def init():\n import jax; jax.devices()\n"
           "th = threading.Thread(target=init); th.start()\n"
           "import numpy as np\n"
           "a = np.random.default_rng(0).integers(0, 4, 50_000_000).astype(np.uint8); s = int(a.sum())\n"
           "th.join()")
code_fg = ("import numpy as np\n"
           "a = np.random.default_rng(0).integers(0, 4, 50_000_000).astype(np.uint8); s = int(a.sum())\n"
           "import jax; jax.devices()")
res["host work then init"] = t(code_fg)
res["host work beside init thread"] = t(code_bg)
print(json.dumps(res, indent=1))
