"""How a run ends when it is stopped: temporary files removed, worker processes stopped, one
line on standard error, exit status 128 + the signal (130 for SIGINT, 143 for SIGTERM).

Temporary paths (atomic outputs' ``.jaxrna-*.tmp`` files, a scan's spill directory, a copy of
standard input) are registered here while they exist (:func:`register`, :func:`temporary`).
During a CLI run (:func:`install` ... :func:`uninstall`, done by :func:`jaxrna.cli.main`):

- SIGINT and SIGTERM raise :class:`Interrupted` (a ``KeyboardInterrupt``) in the main thread,
  so every ``finally`` runs and every context manager cleans up as on any other error; the
  CLI then prints ``jaxrna: interrupted`` or ``jaxrna: terminated`` and returns 130 or 143.
- Python runs signal handlers only between bytecodes of the main thread, and the main thread
  may be blocked in native code for a long time (a JAX computation on a device, an XLA
  compile, a wait on the device). A watchdog thread, woken by the signal through
  :func:`signal.set_wakeup_fd`, gives the main thread :data:`GRACE` seconds to take the
  signal and :data:`UNWIND` seconds more to clean up; past them (or at a second signal) it
  does the cleanup itself (stops worker processes, removes every registered path), prints
  the line and ends the process with :func:`os._exit`.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> with temporary(os.path.join(d, "x.tmp")) as p:
...     _ = open(p, "w").write("x")
...     p in registered()
True
>>> registered()
[]
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import sys
import threading
import time
from typing import Iterator

#: Seconds the main thread has to take a signal before the watchdog cleans up and exits.
GRACE = 2.0
#: Seconds it then has to unwind (its ``finally`` blocks) before the watchdog takes over.
UNWIND = 10.0
#: The signals that stop a run, and the line printed for each.
STOP_SIGNALS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}

_lock = threading.RLock()
_paths: dict[str, bool] = {}        # path -> is a directory


def register(path: str | os.PathLike, directory: bool = False) -> str:
    """Remember ``path`` (a file, or a directory removed with its contents) for cleanup."""
    path = os.fspath(path)
    with _lock:
        _paths[path] = directory
    return path


def unregister(path: str | os.PathLike) -> None:
    with _lock:
        _paths.pop(os.fspath(path), None)


def registered() -> list[str]:
    with _lock:
        return list(_paths)


@contextlib.contextmanager
def temporary(path: str | os.PathLike, directory: bool = False) -> Iterator[str]:
    """Register ``path`` for the block; removed if the block fails (or the run is stopped)."""
    path = register(path, directory)
    try:
        yield path
    except BaseException:
        remove(path, directory)
        raise
    finally:
        unregister(path)


def remove(path: str, directory: bool = False) -> None:
    """Remove a file or a directory tree, ignoring what is already gone."""
    try:
        if directory:
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


def remove_registered() -> None:
    """Remove every registered path (the watchdog's cleanup)."""
    with _lock:
        items = list(_paths.items())
        _paths.clear()
    for path, directory in items:
        remove(path, directory)


def stop_children(timeout: float = 2.0) -> None:
    """Stop this process's worker processes (``multiprocessing`` children) and wait for them."""
    import multiprocessing

    try:
        children = multiprocessing.active_children()
    except Exception:  # noqa: BLE001 - during shutdown
        return
    for child in children:
        with contextlib.suppress(Exception):
            child.kill()
    deadline = time.monotonic() + timeout
    for child in children:
        with contextlib.suppress(Exception):
            child.join(max(0.0, deadline - time.monotonic()))
    pipeline = sys.modules.get("jaxrna.pipeline")  # its pools are broken now: start afresh
    if children and pipeline is not None:
        with contextlib.suppress(Exception):
            pipeline.shutdown_pools()


def ignore_interrupts() -> None:
    """In a worker process: ignore SIGINT. Ctrl-C reaches the whole process group; the parent
    stops its workers itself, rather than each printing a KeyboardInterrupt traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class Interrupted(KeyboardInterrupt):
    """A stop signal (SIGINT or SIGTERM) taken by the main thread."""

    def __init__(self, signum: int) -> None:
        super().__init__(STOP_SIGNALS.get(signum, f"signal {signum}"))
        self.signum = signum

    @property
    def status(self) -> int:
        return 128 + self.signum


class _State:
    def __init__(self) -> None:
        self.signum: int | None = None          # the first stop signal
        self.taken = threading.Event()          # the main thread has taken it
        self.reported = False                   # its line is printed
        self.old_handlers: dict[int, object] = {}
        self.old_wakeup: int | None = None
        self.pipe: tuple[int, int] | None = None
        self.watchdog: threading.Thread | None = None


_state: _State | None = None


def stopping() -> int | None:
    """The stop signal received during this run, or None."""
    return _state.signum if _state is not None else None


def _handler(signum, frame) -> None:
    state = _state
    if state is None or state.signum is not None:
        return  # a second signal: the watchdog ends the run now, the cleanup goes on meanwhile
    state.signum = signum
    state.taken.set()
    raise Interrupted(signum)


def install() -> bool:
    """Take SIGINT and SIGTERM for a CLI run (from the main thread; False elsewhere)."""
    global _state
    if _state is not None or threading.current_thread() is not threading.main_thread():
        return False
    state = _State()
    try:
        r, w = os.pipe()
        os.set_blocking(w, False)
        state.pipe = (r, w)
        state.old_wakeup = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        for signum in STOP_SIGNALS:
            state.old_handlers[signum] = signal.signal(signum, _handler)
    except (ValueError, OSError):  # pragma: no cover - not allowed here
        _restore(state)
        return False
    state.watchdog = threading.Thread(target=_watch, args=(state,), daemon=True,
                                      name="jaxrna-signals")
    _state = state
    state.watchdog.start()
    return True


def _restore(state: _State) -> None:
    for signum, old in state.old_handlers.items():
        with contextlib.suppress(Exception):
            signal.signal(signum, old)
    if state.pipe is not None:
        with contextlib.suppress(Exception):
            signal.set_wakeup_fd(state.old_wakeup if state.old_wakeup is not None else -1)
        with contextlib.suppress(OSError):
            os.close(state.pipe[1])  # the watchdog reads the end of the pipe and returns


def uninstall() -> None:
    """Give the signals back (the end of a CLI run)."""
    global _state
    state, _state = _state, None
    if state is None:
        return
    _restore(state)
    if state.watchdog is not None:
        state.watchdog.join(1.0)


def report(signum: int) -> int:
    """Print the stop line once; the exit status for ``signum``."""
    state = _state
    if state is None or not state.reported:
        if state is not None:
            state.reported = True
        with contextlib.suppress(Exception):
            sys.stderr.write(f"jaxrna: {STOP_SIGNALS.get(signum, f'signal {signum}')}\n")
            sys.stderr.flush()
    return 128 + signum


def _force(state: _State, signum: int) -> None:
    """The watchdog's ending: children stopped, temporary paths removed, one line, exit."""
    with contextlib.suppress(Exception):
        stop_children(1.0)
    remove_registered()
    _release_multiprocessing()
    if not state.reported:
        state.reported = True
        with contextlib.suppress(OSError):
            os.write(2, f"jaxrna: {STOP_SIGNALS.get(signum, f'signal {signum}')}\n".encode())
    os._exit(128 + signum)


def _watch(state: _State) -> None:
    rfd = state.pipe[0]
    first = None        # the first stop signal, as the watchdog saw it
    deadline = None     # when the main thread's time is up
    unwinding = False   # the main thread took the signal in time and is cleaning up
    try:
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                ready, _, _ = select.select([rfd], [], [], timeout)
            except InterruptedError:  # pragma: no cover - PEP 475 retries select
                continue
            except (OSError, ValueError):
                return
            if ready:
                try:
                    data = os.read(rfd, 64)
                except OSError:
                    return
                if not data:
                    return  # uninstalled
                stops = [b for b in data if b in STOP_SIGNALS]
                if not stops:
                    continue
                if first is not None or len(stops) > 1:
                    _force(state, first or stops[0])  # a second stop signal: now
                first = stops[0]
                deadline = time.monotonic() + GRACE
                continue
            if _state is not state:
                return
            if unwinding or not state.taken.is_set():
                _force(state, state.signum or first)
            unwinding = True
            deadline = time.monotonic() + UNWIND
    finally:
        with contextlib.suppress(OSError):
            os.close(rfd)


def _release_multiprocessing(timeout: float = 5.0) -> None:
    """Run ``multiprocessing``'s exit handler (its queues' semaphores are released; else its
    resource tracker, which outlives us, warns about them on stderr), in a thread of its own
    so that nothing there can hold the exit up for more than ``timeout`` seconds. (It usually
    ends at once; on a loaded 2-core host a bound of 1 s cut it off between a semaphore's
    removal and its unregistering, and the tracker's warnings followed a stopped run's last
    line: CI, 2026-11-27.)"""
    util = sys.modules.get("multiprocessing.util")
    handler = getattr(util, "_exit_function", None)
    if handler is None:
        return

    def run():
        with contextlib.suppress(Exception):
            handler()

    t = threading.Thread(target=run, daemon=True, name="jaxrna-mp-exit")
    t.start()
    t.join(timeout)


def exit_now(status: int) -> None:
    """End the process at once after a stop signal, skipping the interpreter's finalisation:
    device computations may still be running in XLA's threads, and tearing the interpreter
    down under them can crash (a segmentation fault instead of the exit status)."""
    remove_registered()
    workers = sys.modules.get("jaxrna.compile_workers")
    if workers is not None:
        with contextlib.suppress(Exception):
            workers.shutdown()
    _release_multiprocessing()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


def leave(status: int) -> None:
    """End a finished run's process at once: worker pools stopped (they wait for work
    otherwise), what is left registered removed, the streams flushed, then :func:`os._exit`,
    skipping the interpreter's finalisation and JAX's and CUDA's teardown (a second or more
    after a GPU run; nothing it does is needed once the outputs are in place)."""
    pipeline = sys.modules.get("jaxrna.pipeline")
    if pipeline is not None:
        with contextlib.suppress(Exception):
            pipeline.shutdown_pools(wait=True)
    workers = sys.modules.get("jaxrna.compile_workers")
    if workers is not None:             # programs still compiling are not waited for
        with contextlib.suppress(Exception):
            workers.shutdown()
    remove_registered()
    _release_multiprocessing()
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()
        status = status or 141
    except Exception:  # noqa: BLE001 - nothing more can be said about it
        pass
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    logging_module = sys.modules.get("logging")
    if logging_module is not None:
        with contextlib.suppress(Exception):
            logging_module.shutdown()
    os._exit(status)


def quiet_stdout() -> None:
    """After a broken pipe or a failed write: point standard output at /dev/null, so that the
    interpreter's last flush at exit neither fails nor prints "Exception ignored"."""
    with contextlib.suppress(Exception):
        fd = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(fd, sys.stdout.fileno())
        finally:
            os.close(fd)


__all__ = ["Interrupted", "register", "unregister", "registered", "temporary", "remove",
           "remove_registered", "stop_children", "install", "uninstall", "stopping", "report",
           "exit_now", "leave", "quiet_stdout", "ignore_interrupts", "GRACE", "UNWIND"]
