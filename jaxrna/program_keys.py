"""What a compiled program is known by: :func:`program_key` in a process (a name, the argument
shapes and dtypes, the static arguments, the device, the JAX and jaxlib versions, ``XLA_FLAGS``
without the forced CPU device count, the x64 switch, the compiler options and a hash of
jaxrna's sources) and :func:`store_key` on disk (the device's kind rather than the device where
one executable serves every device of a kind: :func:`shared`). :mod:`jaxrna.programs` keeps
and stores programs under these keys.

>>> import jax
>>> from jax import ShapeDtypeStruct as S
>>> cpu = jax.devices("cpu")[0]
>>> a = program_key("doc.f", (S((3,), "float32"),), {"k": 2}, cpu)
>>> a == program_key("doc.f", (S((3,), "float32"),), {"k": 3}, cpu), len(a)
(False, 40)
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any

from jaxrna.executable_files import FORMAT as _FORMAT
from jaxrna.xla_options import compiler_options

_source_hash: str | None = None


def source_hash() -> str:
    """A hash of every ``.py`` file of the jaxrna package (computed once per process): any
    change to jaxrna's code invalidates every stored executable."""
    global _source_hash
    if _source_hash is None:
        root = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256()
        for base, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "__")))
            for name in sorted(f for f in files if f.endswith(".py")):
                path = os.path.join(base, name)
                h.update(os.path.relpath(path, root).encode())
                try:
                    with open(path, "rb") as fh:
                        h.update(fh.read())
                except OSError:
                    h.update(b"-")
        _source_hash = h.hexdigest()[:24]
    return _source_hash


def leaf_key(x: Any) -> str:
    if isinstance(x, (bool, int, float, complex)):
        return f"{type(x).__name__}:scalar"   # a traced Python scalar: any value will do
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    if shape is None or dtype is None:
        return f"{type(x).__name__}:{x!r}"
    weak = getattr(x, "weak_type", False)
    return f"{tuple(shape)}:{dtype}{':w' if weak else ''}"


def _xla_flags(flags: str | None = None) -> str:
    """``XLA_FLAGS`` (or ``flags``) as it bears on a compiled program: without
    ``--xla_force_host_platform_device_count`` (how many CPU devices a process has, not what
    one of them runs), so runs on 1 and 4 forced CPU devices share their programs.

    >>> _xla_flags("--xla_force_host_platform_device_count=4 --xla_foo=1")
    '--xla_foo=1'
    """
    flags = os.environ.get("XLA_FLAGS", "") if flags is None else flags
    return re.sub(r"\s*--xla_force_host_platform_device_count=\S*", "", flags).strip()


def program_key(name: str, args: tuple, static: dict, device, *, device_id: bool = True) -> str:
    """What program ``name`` for these arguments on ``device`` is known by in this process (a
    program runs on the device it was compiled or loaded for); ``device_id=False``: the same
    without the device's id, as :func:`store_key` keeps it."""
    import jax
    import jaxlib

    leaves, tree = jax.tree_util.tree_flatten(args)
    parts = [f"format={_FORMAT}", name, str(tree), ";".join(leaf_key(x) for x in leaves),
             repr(sorted(static.items())),
             f"{device.platform}:{device.device_kind}" + (f":{device.id}" if device_id else ""),
             f"jax={jax.__version__}", f"jaxlib={jaxlib.__version__}",
             f"x64={bool(jax.config.jax_enable_x64)}", _xla_flags(),
             source_hash()]
    options = compiler_options(name, device.platform)
    if options:
        parts.append(repr(sorted(options.items())))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


def shared(device, cpu_store: bool = False) -> bool:
    """Whether one stored executable serves every device of ``device``'s kind: on a GPU, and for
    CPU programs the store keeps (``cpu_store``). It is compiled once and loaded onto each
    device (:func:`jaxrna.executable_files.deserialize_onto`), so a job on N GPUs compiles its
    programs once, not N times."""
    return device.platform != "cpu" or cpu_store


def store_key(name: str, args: tuple, static: dict, device, cpu_store: bool = False) -> str:
    """The key program ``name`` is stored under on disk: :func:`program_key` without the
    device's id where one executable serves all devices of a kind (:func:`shared`)."""
    return program_key(name, args, static, device,
                       device_id=not shared(device, cpu_store))
