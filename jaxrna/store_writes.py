"""Executables written to the store (:mod:`jaxrna.programs`) in background threads.

Serializing and writing a compiled program takes 0.1-0.3 s (a GPU turner program): on the
critical path of a cold run when the program waits for it. With :func:`save_in_background`
(the CLI's setting for its run) the program is handed out at once and its file written by a
thread; a load or a "stored?" question about that file waits for it (:func:`finish`), and
:func:`finish_all` waits for every write (the CLI's end: a warm run finds every file).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "x.bin")
>>> before = save_in_background(True)
>>> store(path, b"payload", lambda p, c: open(p, "wb").write(c))
>>> finish(path); os.path.getsize(path)
7
>>> save_in_background(before)
True
"""

from __future__ import annotations

import threading
import time
from typing import Callable

#: A background write waits this long before serializing: serializing holds the interpreter's
#: lock (0.52 s for `interact`'s GPU program, H200, call S25b), and the thread that compiled or
#: waited for the program is about to launch it; launched, it waits for the device with the lock
#: released, and the write overlaps that wait instead of delaying the launch.
LAUNCH_FIRST_S = 0.1

_lock = threading.Lock()
_writes: dict[str, threading.Thread] = {}   # path -> the thread writing it
_background = False


def save_in_background(on: bool = True) -> bool:
    """Write executables from now on in background threads (``on``) or at once; returns the
    setting before."""
    global _background
    before, _background = _background, on
    return before


def store(path: str, compiled, save: Callable) -> None:
    """``save(path, compiled)``, in a thread where :func:`save_in_background` is on."""
    if not _background:
        save(path, compiled)
        return

    def write():
        try:
            time.sleep(LAUNCH_FIRST_S)
            save(path, compiled)
        finally:
            with _lock:
                if _writes.get(path) is thread:
                    del _writes[path]

    thread = threading.Thread(target=write, name="jaxrna-store", daemon=True)
    with _lock:
        # started before another thread can find it (finish() joins what it finds)
        _writes[path] = thread
        thread.start()


def finish(path: str) -> None:
    """Wait for the write of ``path`` under way, if any."""
    with _lock:
        thread = _writes.get(path)
    if thread is not None:
        thread.join()


def finish_all() -> None:
    """Wait for every write under way."""
    with _lock:
        pending = list(_writes.values())
    for thread in pending:
        thread.join()


def pending() -> list[str]:
    """The paths being written now."""
    with _lock:
        return list(_writes)
