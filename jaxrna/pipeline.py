"""The host pipeline every subcommand runs on: read, launch, collect, format, write, overlapped.

A subcommand turns its input into batches (planned into its size classes, each with its fixed
program) and hands them to :func:`schedule` with ``run(batch, device)``, which dispatches the
batch's program on a device without waiting, and ``collect(batch, pending)``, which waits for
it and reads the results back. The scheduler spreads the batches over every device it is
given (a queue per device, each with at most ``depth`` batches in flight beyond the one being
collected), and returns the results in input order: JAX runs device programs
asynchronously, so the devices compute the next batches while the host collects, traces back
and formats the last one, and the output never depends on how many devices there were. A
batch that runs out of device memory (at dispatch or when collected) goes to ``retry``
(which splits it: :func:`jaxrna.oom.split_on_oom`). :func:`launch_ahead` is its one-device
case. Formatting can go to
worker processes (:func:`map_ordered` over :func:`worker_pool`, spawned; or
:func:`forked_pool` where no JAX runs, whose processes inherit the job) on machines with many
cores, and text is written in order by a background thread (:class:`OrderedWriter`; text, or
files that worker processes wrote, copied by the kernel), so the host never waits on the
disk. Every subcommand's results leave through it, in an output that appears whole or not at
all (:func:`ordered_output`).

>>> import io
>>> out = io.StringIO()
>>> with OrderedWriter(out) as w:
...     for text, pending in launch_ahead(["a", "b", "c"], str.upper, depth=2):
...         w.write(f"{text}{pending}\\n")
>>> out.getvalue()
'aA\\nbB\\ncC\\n'
>>> list(map_ordered(len, ["xx", "y", ""], workers=0))
[2, 1, 0]
>>> [(b, r) for b, r in schedule([1, 2, 3, 4, 5], lambda b, d: (d, b * 10),
...                               lambda b, p: p, devices=["d0", "d1"], depth=1)]
[(1, ('d0', 10)), (2, ('d1', 20)), (3, ('d0', 30)), (4, ('d1', 40)), (5, ('d0', 50))]
"""

from __future__ import annotations

import atexit
import collections
import concurrent.futures
import contextlib
import multiprocessing
import os
import queue
import threading
from typing import IO, Callable, Iterable, Iterator, Sequence, TypeVar

from jaxrna.io.spool import Spooled, send
from jaxrna.stages import stage

T = TypeVar("T")
P = TypeVar("P")
R = TypeVar("R")


def launch_ahead(items: Iterable[T], launch: Callable[[T], P], depth: int = 2) -> Iterator[tuple[T, P]]:
    """``(item, launch(item))`` in order, with ``launch`` called up to ``depth`` items ahead of
    the consumer (``launch`` should only dispatch work, e.g. call jitted functions without
    reading their results): :func:`schedule` on one device, collecting nothing."""
    return schedule(items, lambda item, device: launch(item), lambda item, pending: pending,
                    devices=None, depth=depth)


class _Failed:
    """A batch whose dispatch raised an out-of-memory error (handed to ``retry`` in order)."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def ready_first(items: Iterable[T], ready: Callable[[T], bool],
                pending: Callable[[T], Sequence], key: Callable[[T], object] | None = None,
                recheck_s: float = 0.5) -> Iterator[T]:
    """``items``, each once, in the order their programs become available: each time the first
    remaining item (in the given order) whose program is ready (``ready(item)``); when none
    is, it waits until one of the futures ``pending(item)`` of the remaining items (their
    programs under way in the background) completes, or ``recheck_s`` passes, and looks again;
    when no item has a future under way, the first remaining item (whose caller then prepares
    or waits for its program, as without this order). Items of one ``key`` (default: each its
    own) share a program: it is asked about once a round, and once ready stays ready, so a
    round costs a question per key, not per item.

    For :func:`schedule`'s batches in a run that compiles: a device runs the batches of
    classes whose programs are ready while the others still compile (a run's results are
    returned in input order whatever the order of its batches). Where every program is ready
    (a warm run) or none is prepared in the background, the order is ``items``'.

    >>> import concurrent.futures
    >>> late = concurrent.futures.Future()
    >>> late.set_running_or_notify_cancel()
    True
    >>> it = ready_first(["a", "b", "c"], lambda x: x != "a" or late.done(),
    ...                  lambda x: [late] if x == "a" and not late.done() else [])
    >>> next(it), next(it)
    ('b', 'c')
    >>> late.set_result(None); next(it)
    'a'
    >>> list(ready_first([1, 2, 3], lambda x: False, lambda x: []))
    [1, 2, 3]
    >>> list(ready_first(["a1", "b1", "a2", "b2"], lambda x: x[0] == "b", lambda x: [],
    ...                  key=lambda x: x[0]))
    ['b1', 'b2', 'a1', 'a2']
    """
    lines: dict = {}                 # key -> its items (position, item), in order
    for k, item in enumerate(items):
        lines.setdefault(k if key is None else key(item), collections.deque()).append((k, item))
    known: set = set()               # keys whose program is ready
    while lines:
        for q, line in lines.items():
            if q not in known and ready(line[0][1]):
                known.add(q)
        chosen = [q for q in lines if q in known]
        if not chosen:
            waiting = {f for line in lines.values() for f in pending(line[0][1]) if not f.done()}
            if waiting:
                concurrent.futures.wait(waiting, timeout=recheck_s,
                                        return_when=concurrent.futures.FIRST_COMPLETED)
                continue
            chosen = list(lines)
        q = min(chosen, key=lambda q: lines[q][0][0])
        line = lines[q]
        yield line.popleft()[1]
        if not line:
            del lines[q]


def schedule(batches: Iterable[T], run: Callable[[T, object], P],
             collect: Callable[[T, P], R], devices: Sequence | None = None, depth: int = 2,
             retry: Callable[[T, object, BaseException], R] | None = None
             ) -> Iterator[tuple[T, R]]:
    """``(batch, collect(batch, run(batch, device)))`` for every batch, in input order.

    ``devices``: where to run (None: one unnamed device, ``run`` gets None). Batch ``k`` goes
    to the device with the fewest batches in flight, the next one in turn on a tie (round
    robin: the devices take turns, each with its own queue); up to ``depth`` batches per
    device are dispatched ahead of the one being collected, so every device has work queued
    while the host collects, formats and reads. ``run`` must only dispatch (JAX's calls
    return before the device finishes); ``collect`` waits and reads the results back, on the
    host thread, in input order -- so what is written does not depend on the device count
    as long as each device runs the same program for a batch. Each dispatch is counted as
    ``batches on <device>`` (:func:`jaxrna.stages.count`: the profile of a run shows which
    devices computed).

    Out of device memory (:func:`jaxrna.oom.is_out_of_memory`) in ``run`` or ``collect``:
    ``retry(batch, device, error)`` gives the batch's result instead (it splits the batch,
    :func:`jaxrna.oom.split_on_oom`, on that device); without ``retry`` the error is raised.
    """
    from jaxrna import stages
    from jaxrna.oom import is_out_of_memory

    slots = list(devices) if devices else [None]
    counters = [None if d is None else f"batches on {d}" for d in slots]
    flying = [0] * len(slots)                 # batches in flight per device
    turn = 0
    window: collections.deque = collections.deque()

    def pick() -> int:
        nonlocal turn
        order = [(turn + k) % len(slots) for k in range(len(slots))]
        best = min(order, key=lambda d: flying[d])
        turn = (best + 1) % len(slots)
        return best

    def finish():
        batch, d, pending = window.popleft()
        flying[d] -= 1
        try:
            if isinstance(pending, _Failed):
                raise pending.exc
            return batch, collect(batch, pending)
        except Exception as exc:  # noqa: BLE001 - only out-of-memory errors are retried
            if retry is None or not is_out_of_memory(exc):
                raise
            return batch, retry(batch, slots[d], exc)

    for batch in batches:
        d = pick()
        try:
            pending = run(batch, slots[d])
        except Exception as exc:  # noqa: BLE001 - out of memory: retried when collected
            if retry is None or not is_out_of_memory(exc):
                raise
            pending = _Failed(exc)
        window.append((batch, d, pending))
        flying[d] += 1
        if counters[d]:
            stages.count(counters[d])          # -v and the profile: every device used
        if len(window) > depth * len(slots):
            yield finish()
    while window:
        yield finish()


def schedule_on_threads(batches: Iterable[T], run: Callable[[T, object], P],
                        collect: Callable[[T, P], R], devices: Sequence | None = None,
                        depth: int = 1, retry: Callable[[T, object, BaseException], R] | None = None,
                        threads: int = 1) -> Iterator[tuple[T, R]]:
    """:func:`schedule` with each device's ``run`` on ``threads`` threads of its own, for
    programs whose call returns only when the device is done (a program whose loops the host
    drives: the energy model's partition function, the alignment posteriors on a GPU, a
    ``targets`` block, which waits on its device between launches): called from one thread,
    such calls would keep every device but one idle (and, with more threads a device, a
    device idle while its thread reads back). ``collect(batch, result)`` gets ``run``'s
    result, in input order, on the calling thread; an error of ``run`` reaches it there (and
    ``retry`` for out of device memory, as in :func:`schedule`). One device and one thread:
    plain :func:`schedule`.

    >>> [(b, r) for b, r in schedule_on_threads([1, 2, 3], lambda b, d: (d, b * 10),
    ...                                         lambda b, r: r, ["a", "b"])]
    [(1, ('a', 10)), (2, ('b', 20)), (3, ('a', 30))]
    >>> [r for _, r in schedule_on_threads(range(4), lambda b, d: b * b, lambda b, r: r,
    ...                                    ["a"], depth=4, threads=2)]
    [0, 1, 4, 9]
    """
    import concurrent.futures

    slots = list(devices) if devices else [None]
    if len(slots) == 1 and threads <= 1:
        yield from schedule(batches, run, collect, slots, depth=depth, retry=retry)
        return
    pools = {d: concurrent.futures.ThreadPoolExecutor(max(1, threads),
                                                      thread_name_prefix=f"jaxrna-device-{k}")
             for k, d in enumerate(slots)}
    try:
        yield from schedule(batches, lambda b, d: pools[d].submit(run, b, d),
                            lambda b, future: collect(b, future.result()), slots,
                            depth=depth, retry=retry)
    finally:  # an error, or the consumer stopped: batches not started are dropped
        for pool in pools.values():
            pool.shutdown(wait=True, cancel_futures=True)


class OrderedWriter:
    """Writes text to ``out`` from a background thread, in the order of :meth:`write` calls.

    At most ``max_pending`` pieces wait (the producer blocks beyond that, bounding memory; 0:
    no bound). An error while writing (disk full) is raised by the next :meth:`write` or by
    :meth:`close`. Use as a context manager: leaving the block waits for every piece to be
    written (or, on an exception, stops writing and drops what is left). A piece is text, or
    a :class:`~jaxrna.io.spool.Spooled` file a worker process wrote, copied into ``out`` by the
    kernel and removed. ``write``: what writes a piece, in place of that (a piece is then
    anything it takes, e.g. the file ranges that ``jaxrna targets`` copies into its output).

    >>> done = []
    >>> with OrderedWriter(None, write=lambda piece: done.append(sum(piece))) as w:
    ...     w.write((1, 2))
    ...     w.write((3, 4))
    >>> done
    [3, 7]
    """

    _STOP = object()

    def __init__(self, out: IO | None, max_pending: int = 16,
                 write: Callable[[object], object] | None = None) -> None:
        self.out = out
        self._write = write if write is not None else self._piece
        self._queue: queue.Queue = queue.Queue(max_pending)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="jaxrna-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            piece = self._queue.get()
            if piece is self._STOP:
                return
            if self._error is not None:
                continue
            try:
                with stage("write"):
                    self._write(piece)
            except BaseException as exc:  # noqa: BLE001 - handed to the producer
                self._error = exc

    def _piece(self, piece) -> None:
        if isinstance(piece, Spooled):
            send(self.out, piece)
        else:
            self.out.write(piece)

    def _check(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def write(self, text) -> None:
        self._check()
        if text:
            self._queue.put(text)

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(self._STOP)
            self._thread.join()
        self._check()

    def abort(self) -> None:
        """Stop writing: what is queued is dropped."""
        self._error = self._error or RuntimeError("aborted")
        if self._thread.is_alive():
            self._queue.put(self._STOP)
            self._thread.join()
        self._error = None

    def __enter__(self) -> "OrderedWriter":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:
            self.close()
        else:
            self.abort()


class TextPieces:
    """A text handle that hands what is written to an :class:`OrderedWriter` in pieces of about
    ``size`` characters (many small writes, one queue entry each, would make the writer
    thread's hand-offs the cost). :meth:`flush` hands on the rest."""

    def __init__(self, ordered: OrderedWriter, size: int = 1 << 20) -> None:
        self.ordered, self.limit = ordered, size
        self.parts: list[str] = []
        self.size = 0

    def write(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)
        if self.size >= self.limit:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.ordered.write("".join(self.parts))
            self.parts, self.size = [], 0


@contextlib.contextmanager
def ordered_output(output) -> Iterator[TextPieces]:
    """The output every subcommand writes its results to: ``output`` (a path; None or ``-``:
    standard output) opened atomically (:func:`jaxrna.io.atomic_output`: the file appears
    whole or not at all) as a text handle whose writes go out in large pieces, in order, from a
    background thread (:class:`OrderedWriter`), so that formatting never waits on the disk.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> with ordered_output(path) as out:
    ...     _ = [out.write(f"{k}\\n") for k in range(3)]
    >>> open(path).read()
    '0\\n1\\n2\\n'
    """
    from jaxrna.io import atomic_output

    with atomic_output(output) as out, OrderedWriter(out) as ordered:
        pieces = TextPieces(ordered)
        yield pieces
        pieces.flush()


# ------------------------------------------------------------------------------------------
# worker processes

#: Host worker processes run at this niceness: the threads that feed the devices come first.
WORKER_NICENESS = 10
#: glibc malloc in workers: blocks up to this size come from the heap (not fresh mmap pages),
#: and this much freed heap is kept rather than returned to the system (the sliding mmap
#: threshold's ceiling): page faults from many processes at once slow the whole host.
WORKER_MMAP_THRESHOLD = 32 << 20
WORKER_HEAP_KEEP = 512 << 20


def keep_heap(mmap_threshold: int = WORKER_MMAP_THRESHOLD, keep: int = WORKER_HEAP_KEEP) -> bool:
    """Tune glibc malloc of this process as above (``mallopt``); False where it is not glibc."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
        return bool(libc.mallopt(m_mmap_threshold, mmap_threshold)) and \
            bool(libc.mallopt(m_trim_threshold, keep))
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return False


def _worker_setup() -> None:
    """Every worker process: a lower priority, and a heap kept between jobs. Ctrl-C reaches
    the whole process group: the parent stops the workers (:mod:`jaxrna.io.cleanup`), so
    they ignore SIGINT rather than each print a KeyboardInterrupt traceback."""
    from jaxrna.io.cleanup import ignore_interrupts

    ignore_interrupts()
    try:
        os.nice(WORKER_NICENESS)
    except (AttributeError, OSError):  # pragma: no cover - not POSIX, or not allowed
        pass
    keep_heap()


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def default_workers() -> int:
    """Worker processes for host work: every core but one, on machines with 4 or more."""
    n = cores()
    return n - 1 if n >= 4 else 0


def _ready() -> None:
    """A no-op job: the pool starts every worker at once."""


_POOLS: dict[int, concurrent.futures.ProcessPoolExecutor] = {}


def worker_pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes (not forked: JAX's threads are running) at a
    lower priority that keep their heaps, kept for the life of this process and started at
    once (every worker imports its modules while the device compiles)."""
    if workers not in _POOLS:
        pool = concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_setup)
        for _ in range(workers):
            pool.submit(_ready)
        _POOLS[workers] = pool
    return _POOLS[workers]


@atexit.register
def shutdown_pools(wait: bool = False) -> None:
    """Stop every worker pool (at exit, or when a run is cancelled); ``wait``: until its
    processes have ended (before the process ends with ``os._exit``, which would leave them
    waiting for work)."""
    for pool in _POOLS.values():
        pool.shutdown(wait=wait, cancel_futures=True)
    _POOLS.clear()


def can_fork() -> bool:
    """Worker processes may be forked: POSIX, and no JAX runtime (its threads) in this
    process."""
    import sys

    return hasattr(os, "fork") and "jax" not in sys.modules


def forked_pool(workers: int):
    """A ``multiprocessing`` pool of ``workers`` processes forked from this one (only where
    :func:`can_fork`): they inherit its state (a job's arrays, read by a module-level function)
    instead of receiving it pickled. SIGTERM ends one quietly (it inherited the run's handler,
    which would print a traceback when the pool is terminated) and Ctrl-C is this process's to
    handle. The caller ends it (``terminate()``, ``join()``)."""
    return multiprocessing.get_context("fork").Pool(workers, initializer=_forked_setup)


def _forked_setup() -> None:
    import signal

    from jaxrna.io.cleanup import ignore_interrupts

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ignore_interrupts()


def map_ordered(func: Callable[[T], R], items: Iterable[T], workers: int,
                ahead: int | None = None) -> Iterator[R]:
    """``func(item)`` for each item, in order: here when ``workers`` is 0, else in the worker
    pool with at most ``ahead`` (default ``2 * workers + 2``) jobs in flight. ``func`` and the
    items must pickle (a module-level function)."""
    if workers <= 0:
        for item in items:
            yield func(item)
        return
    for _, fut in submitted_in_order(worker_pool(workers), func, items,
                                     ahead or 2 * workers + 2):
        yield fut.result()


def submitted_in_order(pool: concurrent.futures.Executor, func: Callable[[T], R],
                       items: Iterable[T], ahead: int) -> Iterator[tuple[T, concurrent.futures.Future]]:
    """``(item, future of func(item))`` in input order, ``func`` run on ``pool`` (threads or
    processes) with at most ``ahead`` items submitted and not yet handed back: the caller
    waits on each future (and books the wait) while the next ones compute.

    >>> with concurrent.futures.ThreadPoolExecutor(2) as pool:
    ...     [(x, f.result()) for x, f in submitted_in_order(pool, lambda x: x * x, range(4), 2)]
    [(0, 0), (1, 1), (2, 4), (3, 9)]
    """
    window: collections.deque = collections.deque()
    for item in items:
        window.append((item, pool.submit(func, item)))
        if len(window) >= ahead:
            yield window.popleft()
    while window:
        yield window.popleft()


__all__ = ["schedule", "launch_ahead", "OrderedWriter", "map_ordered", "submitted_in_order",
           "worker_pool", "default_workers",
           "cores", "keep_heap", "shutdown_pools", "WORKER_NICENESS"]
