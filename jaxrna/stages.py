"""Where a CLI run's wall time goes: a stage clock, reported when ``JAXRNA_PROFILE`` is set.

The host code marks its stages (``with stage("read"): ...``); JAX's own monitoring events add
the time spent tracing, lowering and compiling programs and loading them from the persistent
cache, and count compilations and cache hits. A stage's time is its own (exclusive): time in a
nested stage, or in compilation inside it, is booked there, not twice. With
``JAXRNA_PROFILE=FILE`` the CLI writes the totals to FILE as JSON when it ends (what
``bench/bench_cli.py`` reads); otherwise the clock costs a few hundred nanoseconds a stage.

Stage names used by the subcommands: ``imports`` (jaxrna and JAX modules), ``setup`` (backend
and cache), ``read`` (reading and validation), ``encode``, ``compile`` (from JAX's events:
tracing, lowering, and backend compilation or, on a cache hit, loading from the persistent cache), ``device`` (waiting for device
results), ``traceback``, ``format``, ``write``; work done in background threads is booked under
its own name with the suffix ``(background)``.

>>> reset()
>>> with stage("read"):
...     with stage("encode"):
...         pass
>>> sorted(k for k in totals() if not k.startswith("_"))
['encode', 'read']
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")

#: When this module was first imported (the CLI imports it first thing).
T0 = time.perf_counter()

_lock = threading.Lock()
_totals: dict[str, float] = {}
_counts: dict[str, int] = {}
_local = threading.local()
_listening = False

#: JAX monitoring events booked as compilation (durations in seconds).
COMPILE_EVENTS = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "backend_compile",
    "/jax/compilation_cache/cache_retrieval_time_sec": "cache_load",
}
#: JAX monitoring events counted.
COUNT_EVENTS = {
    "/jax/compilation_cache/cache_hits": "cache_hits",
    "/jax/compilation_cache/cache_misses": "cache_misses",
}


class Events:
    """Something told when things happen (``mark(name, key, at=None, **extra)``): benchmarks
    pass a recorder (``bench/timeline.py``); the package's default, :data:`NO_EVENTS`, ignores
    every mark."""

    enabled = False
    events: list = []

    def mark(self, name: str, key=None, at: float | None = None, **extra) -> None:
        pass


#: The recorder that records nothing.
NO_EVENTS = Events()


def reset() -> None:
    """Forget every total (tests)."""
    with _lock:
        _totals.clear()
        _counts.clear()
    _local.stack = []


def _stack() -> list:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack


def _book(name: str, seconds: float) -> None:
    with _lock:
        _totals[name] = _totals.get(name, 0.0) + seconds


def count(name: str, k: int = 1) -> None:
    """Add ``k`` to the counter ``name``."""
    with _lock:
        _counts[name] = _counts.get(name, 0) + k


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Book the block's wall time, less that of nested stages and compilation, to ``name``.

    In a thread other than the main one, ``name`` gets the suffix ``" (background)"``.
    """
    if threading.current_thread() is not threading.main_thread():
        name = f"{name} (background)"
    stack = _stack()
    frame = [name, 0.0]               # [name, seconds booked to nested stages]
    stack.append(frame)
    start = time.perf_counter()
    try:
        yield
    finally:
        spent = time.perf_counter() - start
        stack.pop()
        _book(name, spent - frame[1])
        if stack:
            stack[-1][1] += spent


def staged(name: str, items: Iterable[T]) -> Iterator[T]:
    """``items``, with the time spent producing each one booked to stage ``name``.

    >>> reset()
    >>> list(staged("read", iter("ab")))
    ['a', 'b']
    >>> "read" in totals()
    True
    """
    it = iter(items)
    while True:
        with stage(name):
            try:
                item = next(it)
            except StopIteration:
                return
        yield item


def _on_duration(event: str, seconds: float, **_: object) -> None:
    kind = COMPILE_EVENTS.get(event)
    if kind is None:
        return
    _book(f"_compile.{kind}", seconds)
    if kind == "cache_load":          # already inside backend_compile's span
        return
    _book("compile", seconds)
    if kind == "backend_compile":
        count("programs")             # compiled, or loaded from the persistent cache
    stack = _stack()
    if stack:                         # not the enclosing stage's own time
        stack[-1][1] += seconds


def _on_event(event: str, **_: object) -> None:
    kind = COUNT_EVENTS.get(event)
    if kind is not None:
        count(kind)


def listen_to_jax() -> None:
    """Register the JAX monitoring listeners (once; call after importing jax)."""
    global _listening
    if _listening:
        return
    from jax import monitoring

    monitoring.register_event_duration_secs_listener(_on_duration)
    monitoring.register_event_listener(_on_event)
    _listening = True


def totals() -> dict[str, float]:
    """Seconds per stage so far (``_compile.*``: the parts of ``compile``)."""
    with _lock:
        return dict(_totals)


def counts() -> dict[str, int]:
    """Counters so far; ``compiled`` = programs not found in the persistent cache."""
    with _lock:
        out = dict(_counts)
    out["compiled"] = out.get("programs", 0) - out.get("cache_hits", 0)
    return out


def devices_line(command: str) -> str | None:
    """For ``-v`` at a run's end: how many batches each device computed
    (:func:`jaxrna.pipeline.schedule` counts them) and how many programs were compiled and
    loaded, and how many pairs a host engine computed (``interact``:
    :mod:`jaxrna.interact.host_engine`); None when neither computed anything.

    >>> reset(); count("batches on cpu:0", 2); count("batches on cpu:1")
    >>> devices_line("fold")
    'jaxrna: fold computed batches on cpu:0 2, cpu:1 1 (programs: 0 compiled, 0 loaded)'
    >>> reset(); count("host engine pairs", 40); count("host engine threads", 2)
    >>> devices_line("interact")
    'jaxrna: interact computed 40 pairs on the host engine (2 threads)'
    """
    got = counts()
    per = [(k[len("batches on "):], v) for k, v in got.items() if k.startswith("batches on ")]
    host = got.get("host engine pairs", 0)
    parts = []
    if host:
        parts.append(f"{host} pairs on the host engine ({got.get('host engine threads', 1)} "
                     f"threads)")
    if per:
        parts.append("batches on " + ", ".join(f"{d} {v}" for d, v in per)
                     + f" (programs: {got['compiled']} compiled, "
                       f"{got.get('executables_loaded', 0)} loaded)")
    return f"jaxrna: {command} computed " + "; ".join(parts) if parts else None


def report() -> dict:
    """Totals, counters and the wall time since :data:`T0`, as one JSON-ready dict."""
    return {"stages": {k: round(v, 6) for k, v in sorted(totals().items())},
            "counts": counts(), "in_process_s": round(time.perf_counter() - T0, 6),
            "pid": os.getpid()}


def write_report_if_asked() -> None:
    """Write :func:`report` to ``$JAXRNA_PROFILE`` when that is set (never raises)."""
    path = os.environ.get("JAXRNA_PROFILE")
    if not path:
        return
    try:
        with open(path, "w") as fh:
            json.dump(report(), fh, indent=1)
    except OSError:
        pass
