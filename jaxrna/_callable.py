"""Let an algorithm subpackage be called like its main function, and import its heavy parts
(JAX) only on first use.

``jaxrna.fold`` is the subpackage (``jaxrna.fold.blocked``, ``jaxrna.fold.api``, ...) and
``jaxrna.fold("ACGU...")`` calls :func:`jaxrna.fold.api.fold`; a plain function exported at
the top level would hide the subpackage of the same name. The exported names are resolved
when first read, so importing a light module of the package (a format writer, the brute-force
oracle) does not import JAX.

>>> import jaxrna.fold
>>> callable(jaxrna.fold), jaxrna.fold.fold is jaxrna.fold.api.fold
(True, True)
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


def lazy_callable_package(module_name: str, exports: dict[str, str], call: str) -> None:
    """Make ``sys.modules[module_name]`` callable (forwarding to the export named ``call``)
    and give it the attributes ``exports`` (name -> module that defines it), imported on
    first access."""

    def resolve(name: str) -> Any:
        value = getattr(importlib.import_module(exports[name]), name)
        setattr(sys.modules[module_name], name, value)
        return value

    class CallablePackage(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return resolve(call)(*args, **kwargs)

        def __getattr__(self, name: str) -> Any:
            if name in exports:
                return resolve(name)
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")

        def __dir__(self) -> list[str]:
            return sorted(set(super().__dir__()) | set(exports))

    CallablePackage.__call__.__doc__ = f"Call :func:`{exports[call]}.{call}`."
    sys.modules[module_name].__class__ = CallablePackage
