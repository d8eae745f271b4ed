"""Does a device call of `targets`' energy program return before the device is done?

Times, for 65,536 random duplex strings as `jaxrna targets` folds them, how long the program
call takes to return ("launch") and to finish ("total"), then the same for a plain
``fori_loop`` with a traced bound and one with a static bound. On a GPU XLA runs loops and
branches from the host (reading each condition back), so such a call returns only when the
device is done; XLA's command buffers for loops and branches change that:

    PYTHONPATH=. python3 bench/probe_energy_call.py
    XLA_FLAGS="--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,CONDITIONAL,WHILE \\
        --xla_gpu_graph_min_graph_size=1" PYTHONPATH=. python3 bench/probe_energy_call.py

(BENCHMARKS.md, issue 17: with those flags one of three whole runs wrote a different report,
so jaxrna does not set them.)
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def best(f, repeat: int = 4) -> tuple[float, float]:
    """The shortest (launch, total) seconds of ``f()`` over ``repeat`` calls after a warm-up."""
    f().block_until_ready()
    launch, total = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        t1 = time.perf_counter()
        out.block_until_ready()
        launch.append(t1 - t0)
        total.append(time.perf_counter() - t0)
    return min(launch), min(total)


def main() -> int:
    import jax
    import jax.numpy as jnp

    from jaxrna.energy.fill import interior_mode
    from jaxrna.targets import energy as E

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 65536
    rng = np.random.default_rng(1)
    letters = np.frombuffer(b"ACGU", np.uint8)

    def rand(n: int) -> str:
        return letters[rng.integers(0, 4, n)].tobytes().decode()

    strings = [rand(22) + E.LINKER + rand(int(rng.integers(22, 31))) for _ in range(count)]
    inputs = E.encode(strings)
    special = E.special_hairpins(inputs)
    device = jax.devices()[0]
    mode = interior_mode(device.platform, E.DEVICE_LENGTH)
    program, args = E.DeviceEngine().call(inputs, special, np.arange(count), E.DEVICE_LENGTH,
                                          count, device.platform)
    args = jax.device_put(list(args))
    print(f"{device.device_kind}, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}")
    launch, total = best(lambda: program(*args))
    print(f"energy program ({mode}), {count:,} strings: launch {launch * 1e3:.1f} ms, total "
          f"{total * 1e3:.1f} ms, {count / total:,.0f} folds/s")

    x = jnp.ones((2048, 2048), jnp.float32)
    traced = jax.jit(lambda x, n: jax.lax.fori_loop(0, n, lambda i, y: jnp.sin(y) @ y, x))
    static = jax.jit(lambda x: jax.lax.fori_loop(0, 200, lambda i, y: jnp.sin(y) @ y, x))
    for name, f in (("fori_loop, traced bound", lambda: traced(x, 200)),
                    ("fori_loop, static bound", lambda: static(x))):
        launch, total = best(f)
        print(f"{name}: launch {launch * 1e3:.1f} ms, total {total * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
