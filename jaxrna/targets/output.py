"""Host work of a target scan spread over processes, and the report written in miRanda's order.

The devices hand over traced candidates per block of miRNAs (:meth:`Engine.iter_traced
<jaxrna.targets.engine.Engine.iter_traced>`). Each block becomes a
:class:`~jaxrna.targets.blocks.BlockJob`: hit selection (:mod:`jaxrna.targets.select`),
energies, and the block's report text, written to a file of its own. Jobs run in the shared
pool of worker processes (:func:`jaxrna.pipeline.worker_pool`: spawned, so JAX is never used in
a forked child, and they never import it) while the devices scan the next blocks, or in this
process where the machine has few cores. :class:`OrderedReport` copies the finished files into
the output in miRanda's order (miRNA-major; for a target file read in several chunks, each
miRNA's text of every chunk in turn), so the output never depends on block sizes, devices or
workers; the copying runs in the background through :class:`jaxrna.pipeline.OrderedWriter`
(``os.sendfile`` of the files' ranges, :func:`copy_ranges`).

Energies (:mod:`jaxrna.targets.energy`) are folded in the job (the ``cpu`` and ``vienna``
engines, or ``device`` without worker processes), or, with worker processes and the ``device``
engine, by :class:`DeviceEnergies` in this process: a job first selects its hits and encodes
their fold strings in a worker (:func:`~jaxrna.targets.blocks.fold_inputs_block`), the hits of
many jobs are folded together on the devices while the scan goes on, and the job then goes back
to the pool with its energies to be written (:func:`~jaxrna.targets.blocks.run_block`).

What stays here rather than in :mod:`jaxrna.pipeline`, and why:

- the jobs' order: :func:`~jaxrna.pipeline.map_ordered` maps one function over items in
  order, but a block is written only once every chunk's job of it is done (the text of a
  miRNA interleaves the chunks), and a job with device energies goes to the pool twice (its
  fold strings, then its text): :class:`OrderedReport` keeps the futures by (chunk, block).
- :class:`DeviceEnergies`' device threads: its device calls are not known ahead, they are
  assembled from the hits of jobs as the workers hand them back (out of order, a job split
  over calls, a short call only after :attr:`DeviceEnergies.WAIT` seconds without more), and
  each device's threads take the next call when free. :func:`~jaxrna.pipeline.schedule` takes
  an iterable of batches and collects them in input order on one host thread; feeding it
  from a blocking queue would work, but would move the read-backs of every device and the
  jobs' completion onto that one thread, in a path tuned on GPUs (not measured here).
"""

from __future__ import annotations

import codecs
import concurrent.futures
import functools
import os
import pickle
import tempfile
import threading
import time

import numpy as np

from jaxrna.io import cleanup
from jaxrna.io.spool import copy_range
from jaxrna.pipeline import OrderedWriter, worker_pool
from jaxrna.stages import NO_EVENTS, Events, count, stage
from jaxrna.targets.blocks import BlockJob, ChunkInfo, fold_inputs_block, render_block, run_block
from jaxrna.targets.select import RowsRef

__all__ = ["OrderedReport", "DeviceEnergies", "BlockJob", "ChunkInfo", "render_block", "run_block",
           "fold_inputs_block", "copy_ranges", "LOCAL_JOBS"]


class _Pending:
    """A job waiting for its energies: its hits' encoded fold strings, how many rows have been
    handed to a device call and how many have come back."""

    def __init__(self, job, outer, inputs, special, where):
        self.job, self.outer, self.inputs, self.special, self.where = job, outer, inputs, special, where
        self.dcal = np.zeros(len(inputs), np.int32)
        self.taken = 0
        self.done = 0


class DeviceEnergies:
    """The ``device`` energy engine fed by worker processes: each job's hits are selected and
    encoded in a worker (:func:`fold_inputs_block`); here their fold strings queue up, in job
    order, and device threads (two per device, so one call is prepared while another runs) fold
    them in calls of exactly the engine's batch size, a job's strings split over calls where
    they fall (a call is short only when nothing more comes within :attr:`WAIT` seconds); a job
    whose strings are all folded goes back to the pool with its energies (:func:`run_block`).
    :meth:`submit` returns a future of the job's :func:`run_block` result."""

    #: Seconds a device thread waits for more strings before folding a batch that is not full.
    WAIT = 0.02
    THREADS_PER_DEVICE = 2

    def __init__(self, engine, pool, timeline: Events = NO_EVENTS):
        import collections

        import jax

        self.engine = engine
        self.pool = pool
        self.timeline = timeline
        self.pending: collections.deque = collections.deque()
        self.rows = 0                      # rows queued, not yet handed to a device call
        self.cv = threading.Condition()
        self.closed = False
        self.stats = {"folds": 0, "hits": 0, "calls": 0, "busy_s": 0.0}
        devices = engine.devices or jax.devices()[:1]
        self.threads = [threading.Thread(target=self._run, args=(dev,), daemon=True,
                                         name=f"jaxrna-targets-energy-{k}")
                        for k, dev in enumerate(d for d in devices for _ in range(self.THREADS_PER_DEVICE))]
        for th in self.threads:
            th.start()

    def submit(self, job: BlockJob) -> concurrent.futures.Future:
        outer: concurrent.futures.Future = concurrent.futures.Future()
        outer.set_running_or_notify_cancel()  # not cancellable: close() stops the workers
        inputs = self.pool.submit(fold_inputs_block, job)
        inputs.add_done_callback(lambda f: self._inputs_done(job, outer, f))
        return outer

    def _inputs_done(self, job, outer, future) -> None:
        try:
            inputs, special, where, _ = future.result()
        except BaseException as exc:  # the worker's error, or cancelled
            _fail(outer, exc)
            return
        entry = _Pending(job, outer, inputs, special, where)
        if not len(inputs):
            self._finish(entry)
            return
        with self.cv:
            self.pending.append(entry)
            self.rows += len(inputs)
            self.cv.notify()

    def _take(self, target: int) -> list | None:
        """Up to ``target`` queued rows, as ``(entry, lo, hi)`` pieces (None: closing)."""
        with self.cv:
            deadline = None
            while not self.closed and self.rows < target:
                if not self.rows:
                    self.cv.wait()
                    continue
                if deadline is None:
                    deadline = time.monotonic() + self.WAIT
                wait = deadline - time.monotonic()
                if wait <= 0:
                    break
                self.cv.wait(wait)
            if self.closed:
                return None
            pieces, want = [], target
            while want and self.pending:
                entry = self.pending[0]
                n = min(want, len(entry.inputs) - entry.taken)
                pieces.append((entry, entry.taken, entry.taken + n))
                entry.taken += n
                want -= n
                if entry.taken == len(entry.inputs):
                    self.pending.popleft()
            self.rows -= target - want
            return pieces

    def _run(self, device) -> None:
        target = self.engine.batch_rows(device.platform, device)
        while True:
            pieces = self._take(target)
            if pieces is None:
                return
            self._fold(pieces, device)

    def _fold(self, pieces, device) -> None:
        from jaxrna.targets.energy import FoldInputs

        try:
            t0 = time.perf_counter()
            parts, specials, at = [], [], 0
            for entry, lo, hi in pieces:
                parts.append(entry.inputs.take(slice(lo, hi)))
                rows, kinds, pos, energy = entry.special
                pick = (rows >= lo) & (rows < hi)
                specials.append((rows[pick] - lo + at, kinds[pick], pos[pick], energy[pick]))
                at += hi - lo
            special = tuple(np.concatenate([sp[k] for sp in specials]) for k in range(4))
            with stage("energy"):
                dcal = self.engine.fold(FoldInputs.concat(parts), special, device)
            t1 = time.perf_counter()
        except BaseException as exc:
            for entry, _, _ in pieces:
                _fail(entry.outer, exc)
            return
        count("energy folds", at)
        count("energy device calls")
        self.timeline.mark("fold", None, at=t0, run=t1 - t0, rows=at)
        finished, at = [], 0
        with self.cv:
            self.stats["folds"] += sum(hi - lo for _, lo, hi in pieces)
            self.stats["calls"] += 1
            self.stats["busy_s"] += t1 - t0
            for entry, lo, hi in pieces:
                entry.dcal[lo:hi] = dcal[at:at + hi - lo]
                at += hi - lo
                entry.done += hi - lo
                if entry.done == len(entry.inputs):
                    finished.append(entry)
                    self.stats["hits"] += len(entry.where)
        for entry in finished:
            self._finish(entry)

    def _finish(self, entry: _Pending) -> None:
        """Hand a job whose strings are folded back to the pool, with its energies."""
        from jaxrna.targets.energy import kcal

        entry.job.energies = kcal(entry.dcal)[entry.where]
        try:
            done = self.pool.submit(run_block, entry.job)
        except BaseException as exc:  # the pool was shut down
            _fail(entry.outer, exc)
            return
        done.add_done_callback(lambda f, outer=entry.outer: _settle(outer, f))

    def close(self) -> None:
        with self.cv:
            self.closed = True
            left = list(self.pending)
            self.pending.clear()
            self.cv.notify_all()
        for th in self.threads:
            th.join()
        for entry in left:  # the run ended early (an error, a signal)
            _fail(entry.outer, concurrent.futures.CancelledError())


def _fail(outer: concurrent.futures.Future, exc: BaseException) -> None:
    try:
        outer.set_exception(exc)
    except concurrent.futures.InvalidStateError:  # already settled (another piece failed)
        pass


def _settle(outer: concurrent.futures.Future, future: concurrent.futures.Future) -> None:
    try:
        outer.set_result(future.result())
    except BaseException as exc:
        _fail(outer, exc)


#: Energy engines whose block jobs run in a thread of this process when there are no worker
#: processes (see OrderedReport); ViennaRNA holds the interpreter lock, so its jobs run inline.
LOCAL_JOBS = ("cpu", "device")


class OrderedReport:
    """Runs block jobs (in a pool or here) and copies their files into the writer's output in
    miRanda's order: block by block, and in a block miRNA by miRNA, every chunk's text in turn.
    Blocks are written as soon as they and every block before them are done in every chunk,
    which is at once for a target file read in one chunk."""

    def __init__(self, writer, blocks: list[list[int]], workers: int = 0, directory: str | None = None,
                 timeline: Events = NO_EVENTS, energy=None):
        self.writer = writer
        self.timeline = timeline
        self.blocks = blocks
        self.pool = worker_pool(workers) if workers > 0 else None
        # the device energy engine with workers: hits folded here, between the workers' steps
        self.energies = (DeviceEnergies(energy, self.pool, timeline)
                         if self.pool is not None and getattr(energy, "name", None) == "device" else None)
        # no workers but jaxrna's energy engines: jobs run in a thread of this process, so the
        # folding (NumPy or a device, outside the interpreter lock) overlaps the scan
        self.local = (concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jaxrna-targets-job")
                      if self.pool is None and getattr(energy, "name", None) in LOCAL_JOBS else None)
        self.tmp = tempfile.TemporaryDirectory(prefix="jaxrna-targets-", dir=directory)
        cleanup.register(self.tmp.name, directory=True)  # removed even if the run is killed
        self.jobs: dict[tuple[int, int], object] = {}   # (chunk, block) -> future or result
        self.order: list[tuple[int, int]] = []
        self.running: list[tuple[int, int]] = []     # jobs handed to the pool, maybe not done
        self.last_chunk: int | None = None
        self.next_block = 0
        self.hits = 0
        self.encoding = getattr(writer.out, "encoding", None) or "utf-8"
        self.limit = 4 * workers + 4
        self.copier: OrderedWriter | None = None
        self.spills: dict[tuple[int, int], str] = {}   # job -> the candidates' file it reads
        self.readers: dict[str, int] = {}              # file -> jobs yet to read it
        self._chunk_writer: _Background | None = None

    def chunk_path(self, c: int, info: ChunkInfo) -> ChunkInfo | str:
        """The chunk as jobs get it: in a file for worker processes (written by a thread while
        the devices start; jobs are handed out once it is there)."""
        if self.pool is None:
            return info
        path = os.path.join(self.tmp.name, f"chunk-{c}.pkl")
        self._wait_chunk()

        def dump():
            with open(path, "wb") as fh:
                pickle.dump(info, fh, protocol=pickle.HIGHEST_PROTOCOL)

        self._chunk_writer = _Background(dump)
        return path

    def _wait_chunk(self) -> None:
        if self._chunk_writer is not None:
            self._chunk_writer.join()
            self._chunk_writer = None

    def submit(self, c: int, bi: int, job: BlockJob, last: bool) -> None:
        self._wait_chunk()
        job.out_path = os.path.join(self.tmp.name, f"{c}-{bi}.txt")
        job.encoding = self.encoding
        self.timeline.mark("submit", (c, bi))
        if isinstance(job.traced, RowsRef):  # removed once every job reading it is done
            self.spills[(c, bi)] = job.traced.path
            self.readers[job.traced.path] = self.readers.get(job.traced.path, 0) + 1
        if self.energies is not None:
            self.jobs[(c, bi)] = self.energies.submit(job)
        elif self.local is not None:
            self.jobs[(c, bi)] = self.local.submit(run_block, job)
        else:
            self.jobs[(c, bi)] = self.pool.submit(run_block, job) if self.pool else run_block(job)
        self.order.append((c, bi))
        if self.pool is not None or self.local is not None:
            self.running.append((c, bi))
        if last:
            self.last_chunk = c
        self.flush(wait=False)
        while len(self.running) > self.limit:  # too many jobs out: wait for the oldest
            self.running = [k for k in self.running if not self._done(k)]
            if len(self.running) > self.limit:
                self._result(self.running[0])
                self.flush(wait=False)

    def _done(self, key) -> bool:
        job = self.jobs[key]
        return not isinstance(job, concurrent.futures.Future) or job.done()

    def _result(self, key):
        job = self.jobs[key]
        if isinstance(job, concurrent.futures.Future):
            job = self.jobs[key] = job.result()
            start, end, cpu = job[3]
            self.timeline.mark("job", key, at=start, run=end - start, cpu=cpu)
            path = self.spills.pop(key, None)
            if path is not None:
                self._unread(path)
        return job

    def hold(self, traced) -> None:
        """Keep a block's candidates file (a :class:`SpilledRows`) until :meth:`release`,
        while its jobs are handed out one by one: a job that is done before the next one is
        submitted must not remove the file under it."""
        path = getattr(traced, "path", None)
        if path is not None:
            self.readers[path] = self.readers.get(path, 0) + 1

    def release(self, traced) -> None:
        """The end of a :meth:`hold`: the file goes once every job reading it is done."""
        path = getattr(traced, "path", None)
        if path is not None and path in self.readers:
            self._unread(path)

    def _unread(self, path: str) -> None:
        self.readers[path] -= 1
        if not self.readers[path]:
            del self.readers[path]
            os.unlink(path)

    def flush(self, wait: bool) -> None:
        """Write every block that can be written (``wait``: wait for them all)."""
        if self.last_chunk is None:
            return
        chunks = range(self.last_chunk + 1)
        while self.next_block < len(self.blocks):
            keys = [(c, self.next_block) for c in chunks]
            if any(k not in self.jobs for k in keys):
                return
            if not wait and not all(self._done(k) for k in keys):
                return
            pieces = [self._result(k) for k in keys]
            ranges = []
            for x in range(len(self.blocks[self.next_block])):
                for path, sizes, hits, _ in pieces:
                    ranges.append((path, sum(sizes[:x]), sizes[x]))
            self.hits += sum(sum(piece[2]) for piece in pieces)
            self._write(ranges, [piece[0] for piece in pieces], self.next_block)
            self.next_block += 1
        if wait:
            self._join()

    def _write(self, ranges, paths, block: int) -> None:
        """Copy ``(path, offset, size)`` ranges to the output in order, then remove ``paths``;
        on a file descriptor, in a thread of its own (``sendfile``: no copy through Python)."""
        if self.copier is None and self.writer.raw_text:
            fd = None
            try:
                self.writer.out.flush()
                fd = self.writer.out.fileno()
            except (AttributeError, OSError, ValueError):
                pass
            if fd is not None:  # (no bound: a piece is a few file ranges)
                self.copier = OrderedWriter(self.writer.out, max_pending=0,
                                            write=functools.partial(copy_ranges, fd, self.timeline))
        if self.copier is not None:
            self.copier.write((ranges, paths, block))
            return
        for path, offset, size in ranges:
            with open(path, "rb") as src:
                src.seek(offset)
                decoder = codecs.getincrementaldecoder(self.encoding)()
                while size > 0:
                    data = src.read(min(size, 1 << 24))
                    size -= len(data)
                    self.writer.write(decoder.decode(data, final=size <= 0))
        for path in paths:
            os.unlink(path)
        self.timeline.mark("written", block)

    def _join(self) -> None:
        if self.copier is not None:
            self.copier.close()
            self.copier = None

    def close(self) -> None:
        if self._chunk_writer is not None:
            self._chunk_writer.thread.join()
        if self.copier is not None:
            self.copier.abort()
        if self.energies is not None:
            self.energies.close()
        running = False
        for key in self.order:
            job = self.jobs.get(key)
            if isinstance(job, concurrent.futures.Future):
                running |= not job.cancel() and not job.done()
        if self.local is not None:  # a job already running finishes its block
            self.local.shutdown(wait=False, cancel_futures=True)
        if running:  # stopped early (an error, a signal): workers must not write on
            cleanup.stop_children()
        try:
            self.tmp.cleanup()
        except OSError:
            cleanup.remove(self.tmp.name, directory=True)
        cleanup.unregister(self.tmp.name)


class _Background:
    """``fn()`` in a thread; :meth:`join` waits for it and raises what it raised."""

    def __init__(self, fn):
        self.error: BaseException | None = None

        def run():
            try:
                fn()
            except BaseException as exc:  # raised by join()
                self.error = exc

        self.thread = threading.Thread(target=run, daemon=True, name="jaxrna-targets-chunk")
        self.thread.start()

    def join(self) -> None:
        self.thread.join()
        if self.error is not None:
            raise self.error


def copy_ranges(fd: int, timeline: Events, piece) -> None:
    """Write one block of the report: ``piece`` = ``(ranges, paths, block)``, the ``(path, offset,
    size)`` ranges copied to ``fd`` in order, then the ``paths`` removed (the write function of
    :class:`OrderedReport`'s :class:`~jaxrna.pipeline.OrderedWriter`)."""
    ranges, paths, block = piece
    for path, offset, size in ranges:
        with open(path, "rb") as src:
            copy_range(fd, src, offset, size)
    for path in paths:
        os.unlink(path)
    timeline.mark("written", block)
