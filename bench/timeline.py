"""A record of when things happen in a target scan (device blocks, host jobs, writes), for
benchmarks: where the wall time of a run goes, and what waits for what. Pass a
:class:`Timeline` as the ``timeline`` of :class:`jaxrna.targets.engine.Engine` (any
:class:`jaxrna.stages.Events`).

Times are ``time.perf_counter()`` seconds (CLOCK_MONOTONIC on Linux: comparable between the
worker processes and this one). Off by default; :data:`OFF` records nothing.

>>> tl = Timeline()
>>> tl.mark("block", 3, device="gpu:0")
>>> [(e[0], e[1]) for e in tl.events]
[('block', 3)]
>>> OFF.mark("block", 3); OFF.events
[]
>>> from jaxrna.stages import Events
>>> isinstance(tl, Events)
True
"""

from __future__ import annotations

import threading
import time

from jaxrna.stages import Events


class Timeline(Events):
    """Events ``(name, key, time, thread name, extra)`` appended as they happen."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.events: list[tuple] = []

    def mark(self, name: str, key=None, at: float | None = None, **extra) -> None:
        if self.enabled:
            self.events.append((name, key, time.perf_counter() if at is None else at,
                                threading.current_thread().name, extra))

    def as_records(self, origin: float) -> list[dict]:
        """The events as JSON-ready dicts, times in seconds since ``origin``."""
        return [{"event": n, "key": k, "t": round(t - origin, 6), "thread": th, **extra}
                for n, k, t, th, extra in sorted(self.events, key=lambda e: e[2])]


OFF = Timeline(enabled=False)
