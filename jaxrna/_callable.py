"""Let an algorithm subpackage be called like its main function.

``jaxrna.fold`` is the subpackage (``jaxrna.fold.blocked``, ``jaxrna.fold.api``, ...) and
``jaxrna.fold("ACGU...")`` calls :func:`jaxrna.fold.api.fold`; a plain function exported at
the top level would hide the subpackage of the same name.
"""

from __future__ import annotations

import sys
import types
from typing import Callable


def make_callable(module_name: str, function: Callable) -> None:
    """Make ``sys.modules[module_name]`` callable, forwarding to ``function``."""

    class CallablePackage(types.ModuleType):
        def __call__(self, *args, **kwargs):
            return function(*args, **kwargs)

    CallablePackage.__call__.__doc__ = function.__doc__
    sys.modules[module_name].__class__ = CallablePackage
