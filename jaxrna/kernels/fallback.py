"""A Pallas kernel that does not build falls back to its pure-JAX path, with one warning.

Pallas' Triton backend is deprecated (jax 0.11.2 warns on every GPU run) and will go; a later
JAX may refuse to lower or compile a kernel. Lowering and compilation errors appear when the
program holding the kernel is compiled (``jit(...).lower(...).compile()``, as
:func:`jaxrna.programs.program` does), not when it is traced, so a call site wraps the compile
of its program: :func:`compile_or_fallback` tries the Pallas variant, and on any error
remembers the kernel as failed for the rest of the process, prints one warning line on stderr
(once per process, whichever kernel fails first) and compiles the pure-JAX variant, whose
output is the same.

``JAXRNA_FORCE_PALLAS_FAILURE=1`` (or a comma-separated list of kernel names) makes those
kernels fail as a broken JAX would (the tests use it, in interpret mode on a CPU).

>>> import io, contextlib
>>> reset()
>>> err = io.StringIO()
>>> with contextlib.redirect_stderr(err):
...     compile_or_fallback("demo", lambda: 1 / 0, lambda: "pure")
...     compile_or_fallback("demo", lambda: "pallas", lambda: "pure")   # remembered
'pure'
'pure'
>>> print(err.getvalue(), end="")  # doctest: +ELLIPSIS
jaxrna: warning: the Pallas kernel demo does not build with this JAX (ZeroDivisionError: ...); using its pure-JAX path (same results, slower)
>>> reset()
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Callable, TypeVar

T = TypeVar("T")

#: Names kernels to fail on purpose: "1" (or "all") for every kernel, else a comma list.
FORCE_ENV = "JAXRNA_FORCE_PALLAS_FAILURE"

_lock = threading.Lock()
_failed: dict[str, str] = {}
_warned = False


class ForcedFailure(RuntimeError):
    """The failure :data:`FORCE_ENV` asks for (as a lowering error would be raised)."""


def forced(kernel: str) -> bool:
    """Whether :data:`FORCE_ENV` makes ``kernel`` fail."""
    value = os.environ.get(FORCE_ENV, "").strip()
    if value in ("", "0"):
        return False
    return value in ("1", "all") or kernel in {v.strip() for v in value.split(",")}


def usable(kernel: str) -> bool:
    """Whether the Pallas variant of ``kernel`` is still to be tried in this process."""
    return kernel not in _failed


def failed(kernel: str, exc: BaseException) -> None:
    """Remember ``kernel`` as failed; the first failure of the process warns on stderr."""
    global _warned
    with _lock:
        _failed.setdefault(kernel, f"{type(exc).__name__}: {exc}")
        warn, _warned = not _warned, True
    if warn:
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        print(f"jaxrna: warning: the Pallas kernel {kernel} does not build with this JAX "
              f"({type(exc).__name__}: {first}); using its pure-JAX path (same results, "
              f"slower)", file=sys.stderr, flush=True)


def compile_or_fallback(kernel: str, pallas: Callable[[], T], pure: Callable[[], T]) -> T:
    """``pallas()`` -- which compiles (or loads) the program that uses ``kernel`` -- unless the
    kernel failed before in this process or fails now; then ``pure()``, the same program on
    its pure-JAX path. Errors of ``pure()`` propagate."""
    if usable(kernel):
        try:
            if forced(kernel):
                raise ForcedFailure(f"{FORCE_ENV} is set")
            return pallas()
        except Exception as exc:  # noqa: BLE001 - any lowering/compile error of the kernel
            failed(kernel, exc)
    return pure()


_probed: dict[bool, BaseException | None] = {}


def _probe(interpret: bool) -> None:
    """Compile (and run once) the smallest Pallas kernel: raises where Pallas does not build
    with this JAX (on this platform). Done once per process and mode."""
    if interpret not in _probed:
        try:
            import jax
            import jax.numpy as jnp
            import numpy as np
            from jax.experimental import pallas as pl

            def kernel(x_ref, o_ref):
                o_ref[...] = x_ref[...] + 1

            call = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.int32),
                                  interpret=interpret)
            # a host array: jnp.zeros would compile two more programs (0.2 s on a cold GPU)
            jax.block_until_ready(jax.jit(call)(np.zeros((8, 128), np.int32)))
            _probed[interpret] = None
        except Exception as exc:  # noqa: BLE001 - whatever a broken Pallas raises
            _probed[interpret] = exc
    if _probed[interpret] is not None:
        raise _probed[interpret]


def pallas_builds(kernel: str, interpret: bool = False) -> bool:
    """For call sites that must choose their path before building anything (the shapes of
    their data depend on it): whether to take ``kernel``'s Pallas path -- not failed before,
    not forced to fail (:data:`FORCE_ENV`), and the smallest Pallas kernel builds here. Where
    not, ``kernel`` is remembered as failed (one warning per process, as for
    :func:`compile_or_fallback`).

    >>> reset(); pallas_builds("demo", interpret=True)
    True
    """
    return compile_or_fallback(kernel, lambda: _probe(interpret) or True, lambda: False)


def reset() -> None:
    """Forget every failure and the warning (tests)."""
    global _warned
    with _lock:
        _failed.clear()
        _warned = False
