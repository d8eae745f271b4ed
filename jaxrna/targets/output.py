"""Host work of a target scan spread over processes, and the report written in miRanda's order.

The devices hand over traced candidates per block of miRNAs (:meth:`Engine.iter_traced
<jaxrna.targets.engine.Engine.iter_traced>`). Each block becomes a :class:`BlockJob`: hit
selection (:mod:`jaxrna.targets.select`), energies, and the block's report text, written to a
file of its own. Jobs run in a pool of worker processes (started with ``spawn``: JAX is never
used in a forked child) while the devices scan the next blocks, or in this process where the
machine has few cores. :class:`OrderedReport` copies the finished files into the output in
miRanda's order (miRNA-major; for a target file read in several chunks, each miRNA's text of
every chunk in turn), so the output never depends on block sizes, devices or workers.

>>> import io
>>> from jaxrna.formats.miranda import writer_for
>>> from jaxrna.targets.select import TargetText, Traced
>>> chunk = ChunkInfo(["t1"], ["t1"], TargetText.from_sequences(["AAAA"]), seen=0, total=1)
>>> tr = Traced.from_moves(q=[0], t=[0], i=[4], j=[4], score=[20], moves=[[1, 1, 1, 1]])
>>> job = BlockJob(chunk, [0], ["m1"], ["m1"], ["UUUU"], tr, ("miranda", True, True), 0, True)
>>> texts, hits = render_block(job)
>>> print(texts[0].splitlines()[1])
   Forward:	Score: 20.000000  Q:1 to 5  R:1 to 4 Align Len (4) (100.00%) (100.00%)
"""

from __future__ import annotations

import codecs
import concurrent.futures
import functools
import os
import pickle
import queue
import tempfile
import threading
import time
from dataclasses import dataclass, field

from jaxrna.pipeline import worker_pool
from jaxrna.targets.records import PairResult
from jaxrna.targets.scoring import ScanParams
from jaxrna.targets.select import RowsRef, TargetText, Traced, accepted_hits, select
from jaxrna.targets.timeline import OFF, Timeline


@dataclass
class ChunkInfo:
    """What the report of one chunk of targets needs (ids, descriptions, letters)."""

    ids: list[str]
    descriptions: list[str]
    text: TargetText
    seen: int    # targets before this chunk
    total: int   # targets in the whole file (miRanda's running pair counter)


@dataclass
class BlockJob:
    """One block of miRNAs against one chunk: traced candidates in, report text out."""

    chunk: ChunkInfo | str           # or the path of a pickled ChunkInfo (worker processes)
    ks: list[int]                    # the miRNAs' indices in the run
    ids: list[str]
    descriptions: list[str]
    sequences: list[str]
    traced: Traced | RowsRef         # q indexes ks (RowsRef: in a file, for worker processes)
    writer: object                   # TargetsWriter.spec(), or (in this process) a writer
    pair_offset: int
    first_chunk: bool                # start each miRNA's text with its own header
    params: ScanParams = field(default_factory=ScanParams)
    energy: object = None
    out_path: str | None = None
    encoding: str = "utf-8"


_CHUNKS: dict[str, ChunkInfo] = {}


def _chunk_of(job: BlockJob) -> ChunkInfo:
    if isinstance(job.chunk, ChunkInfo):
        return job.chunk
    if job.chunk not in _CHUNKS:
        _CHUNKS.clear()  # one chunk at a time
        with open(job.chunk, "rb") as fh:
            _CHUNKS[job.chunk] = pickle.load(fh)
    return _CHUNKS[job.chunk]


def render_block(job: BlockJob) -> tuple[list[str], list[int]]:
    """The report text and the number of accepted hits of each miRNA of a block, in order."""
    from jaxrna.formats.miranda import writer_for

    chunk = _chunk_of(job)
    if isinstance(job.writer, tuple):
        fmt, no_energy, quiet = job.writer
        writer = writer_for(fmt, None, no_energy=no_energy, quiet=quiet)
    else:  # a writer object (rendering in this process)
        writer = job.writer
    traced = job.traced.load() if isinstance(job.traced, RowsRef) else job.traced
    table = select(traced, job.sequences, chunk.text, job.params.strict)
    bounds = table.q.searchsorted(range(len(job.ks) + 1)).tolist() if len(table) else [0] * (len(job.ks) + 1)
    per_q = None
    texts, hits = [], []
    for x, k in enumerate(job.ks):
        n = len(job.sequences[x])
        head = writer.mirna_text(job.ids[x], job.descriptions[x], n) if job.first_chunk else ""
        pair_base = job.pair_offset + k * chunk.total + chunk.seen + 1
        text = writer.table_text(job.ids[x], n, table, bounds[x], bounds[x + 1], chunk, pair_base)
        if text is not None:
            hits.append(bounds[x + 1] - bounds[x])
        else:  # energies, or a format rendered a record at a time
            if per_q is None:
                per_q = {}
                for (q, t), h in accepted_hits(table, job.params, job.energy).items():
                    per_q.setdefault(q, {})[t] = h
            found = per_q.get(x, {})
            hits.append(sum(len(h) for h in found.values()))
            wanted = range(len(chunk.ids)) if writer.pairs_need_text() else sorted(found)
            text = "".join(writer.pair_text(PairResult(
                job.ids[x], chunk.ids[t], n, int(chunk.text.lengths[t]), pair_base + t,
                found.get(t, []), job.descriptions[x], chunk.descriptions[t])) for t in wanted)
        texts.append(head + text)
    return texts, hits


def run_block(job: BlockJob) -> tuple[str, list[int], list[int], tuple[float, float, float]]:
    """Render a block into ``job.out_path``: ``(path, bytes per miRNA, hits per miRNA, (start,
    end, CPU seconds))``."""
    start, cpu = time.perf_counter(), time.process_time()
    if job.energy is not None:  # fold here, a string at a time (no process pool in a worker)
        job.energy = functools.partial(job.energy)
    texts, hits = render_block(job)
    sizes = []
    with open(job.out_path, "wb") as fh:
        for text in texts:
            data = text.encode(job.encoding)
            sizes.append(len(data))
            fh.write(data)
    return job.out_path, sizes, hits, (start, time.perf_counter(), time.process_time() - cpu)


class OrderedReport:
    """Runs block jobs (in a pool or here) and copies their files into the writer's output in
    miRanda's order: block by block, and in a block miRNA by miRNA, every chunk's text in turn.
    Blocks are written as soon as they and every block before them are done in every chunk,
    which is at once for a target file read in one chunk."""

    def __init__(self, writer, blocks: list[list[int]], workers: int = 0, directory: str | None = None,
                 timeline: Timeline = OFF):
        self.writer = writer
        self.timeline = timeline
        self.blocks = blocks
        self.pool = worker_pool(workers) if workers > 0 else None
        self.tmp = tempfile.TemporaryDirectory(prefix="jaxrna-targets-", dir=directory)
        self.jobs: dict[tuple[int, int], object] = {}   # (chunk, block) -> future or result
        self.order: list[tuple[int, int]] = []
        self.running: list[tuple[int, int]] = []     # jobs handed to the pool, maybe not done
        self.last_chunk: int | None = None
        self.next_block = 0
        self.hits = 0
        self.encoding = getattr(writer.out, "encoding", None) or "utf-8"
        self.limit = 4 * workers + 4
        self.copier: _Copier | None = None
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
        self.jobs[(c, bi)] = self.pool.submit(run_block, job) if self.pool else run_block(job)
        self.order.append((c, bi))
        if self.pool is not None:
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
                self.readers[path] -= 1
                if not self.readers[path]:
                    del self.readers[path]
                    os.unlink(path)
        return job

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
            if fd is not None:
                self.copier = _Copier(fd, self.timeline)
        if self.copier is not None:
            self.copier.put(ranges, paths, block)
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
            self.copier.join()
            self.copier = None

    def close(self) -> None:
        if self._chunk_writer is not None:
            self._chunk_writer.thread.join()
        if self.copier is not None:
            self.copier.stop()
        for key in self.order:
            job = self.jobs.get(key)
            if isinstance(job, concurrent.futures.Future):
                job.cancel()
        self.tmp.cleanup()


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


class _Copier:
    """A thread copying file ranges to a file descriptor in order (``os.sendfile``, or reads and
    writes where the descriptor takes no ``sendfile``)."""

    def __init__(self, fd: int, timeline: Timeline = OFF):
        self.fd = fd
        self.timeline = timeline
        self.queue: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name="jaxrna-targets-copy")
        self.thread.start()

    def put(self, ranges, paths, block: int) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put((ranges, paths, block))

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            if self.error is not None:
                continue
            try:
                ranges, paths, block = item
                for path, offset, size in ranges:
                    with open(path, "rb") as src:
                        _send(self.fd, src, offset, size)
                for path in paths:
                    os.unlink(path)
                self.timeline.mark("written", block)
            except BaseException as exc:  # raised in the main thread
                self.error = exc

    def join(self) -> None:
        self.queue.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self.error = self.error or RuntimeError("stopped")
        self.queue.put(None)
        self.thread.join()


def _send(fd: int, src, offset: int, size: int) -> None:
    """Copy ``size`` bytes of ``src`` from ``offset`` to ``fd`` (at its current position)."""
    try:
        while size > 0:
            sent = os.sendfile(fd, src.fileno(), offset, size)
            if sent <= 0:
                raise OSError("sendfile made no progress")
            offset += sent
            size -= sent
        return
    except OSError:
        pass  # a descriptor sendfile cannot write: plain reads and writes
    src.seek(offset)
    while size > 0:
        data = src.read(min(size, 1 << 24))
        size -= len(data)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
