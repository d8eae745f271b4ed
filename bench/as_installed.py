"""Run ``jaxrna`` processes in benchmarks as an installed package runs: with bytecode.

``pip install`` byte-compiles a package, so its processes load bytecode; a checkout run with
``PYTHONDONTWRITEBYTECODE`` set (the lent GPU machines set it) compiles every module from source
in every process: on an H200 machine 0.2-0.4 s more per warm ``jaxrna`` run and up to 2 s more
cold (BENCHMARKS.md, issue 14). :func:`installed_env` byte-compiles jaxrna once and returns an
environment for the child processes that lets them write bytecode for the rest.

>>> env = installed_env({"PYTHONDONTWRITEBYTECODE": "1", "X": "y"})
>>> sorted(env)
['X']
"""

from __future__ import annotations

import compileall
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_compiled = False


def installed_env(env: dict, bytecode: bool = True) -> dict:
    """``env`` for benchmarked child processes: with ``bytecode`` (the default) jaxrna is
    byte-compiled (once per benchmark process) and ``PYTHONDONTWRITEBYTECODE`` dropped; without
    it, ``env`` unchanged (every process compiles from source where that is set)."""
    global _compiled
    env = dict(env)
    if not bytecode:
        return env
    if not _compiled:
        compileall.compile_dir(os.path.join(ROOT, "jaxrna"), quiet=1)
        _compiled = True
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env
