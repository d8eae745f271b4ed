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

import atexit
import codecs
import concurrent.futures
import functools
import multiprocessing
import os
import pickle
import queue
import tempfile
import threading
from dataclasses import dataclass, field

from jaxrna.targets.records import PairResult
from jaxrna.targets.scoring import ScanParams
from jaxrna.targets.select import TargetText, Traced, accepted_hits, select


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
    traced: Traced                   # q indexes ks
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
    table = select(job.traced, job.sequences, chunk.text, job.params.strict)
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


def run_block(job: BlockJob) -> tuple[str, list[int], list[int]]:
    """Render a block into ``job.out_path``: ``(path, bytes per miRNA, hits per miRNA)``."""
    if job.energy is not None:  # fold here, a string at a time (no process pool in a worker)
        job.energy = functools.partial(job.energy)
    texts, hits = render_block(job)
    sizes = []
    with open(job.out_path, "wb") as fh:
        for text in texts:
            data = text.encode(job.encoding)
            sizes.append(len(data))
            fh.write(data)
    return job.out_path, sizes, hits


def _ready() -> bool:
    return True


def default_workers() -> int:
    """Worker processes for host work: every core but one, on machines with 4 or more."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return cores - 1 if cores >= 4 else 0


_POOLS: dict[int, concurrent.futures.ProcessPoolExecutor] = {}


def worker_pool(workers: int) -> concurrent.futures.ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes, kept for the life of this process (started at
    once: every worker imports its modules while the devices compile)."""
    if workers not in _POOLS:
        pool = concurrent.futures.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
        for _ in range(workers):
            pool.submit(_ready)
        _POOLS[workers] = pool
    return _POOLS[workers]


@atexit.register
def _shutdown() -> None:
    for pool in _POOLS.values():
        pool.shutdown(wait=False, cancel_futures=True)
    _POOLS.clear()


class OrderedReport:
    """Runs block jobs (in a pool or here) and copies their files into the writer's output in
    miRanda's order: block by block, and in a block miRNA by miRNA, every chunk's text in turn.
    Blocks are written as soon as they and every block before them are done in every chunk,
    which is at once for a target file read in one chunk."""

    def __init__(self, writer, blocks: list[list[int]], workers: int = 0, directory: str | None = None):
        self.writer = writer
        self.blocks = blocks
        self.pool = worker_pool(workers) if workers > 0 else None
        self.tmp = tempfile.TemporaryDirectory(prefix="jaxrna-targets-", dir=directory)
        self.jobs: dict[tuple[int, int], object] = {}   # (chunk, block) -> future or result
        self.order: list[tuple[int, int]] = []
        self.last_chunk: int | None = None
        self.next_block = 0
        self.hits = 0
        self.encoding = getattr(writer.out, "encoding", None) or "utf-8"
        self.limit = 4 * workers + 4
        self.copier: _Copier | None = None

    def chunk_path(self, c: int, info: ChunkInfo) -> ChunkInfo | str:
        """The chunk as jobs get it: in a file for worker processes."""
        if self.pool is None:
            return info
        path = os.path.join(self.tmp.name, f"chunk-{c}.pkl")
        with open(path, "wb") as fh:
            pickle.dump(info, fh, protocol=pickle.HIGHEST_PROTOCOL)
        return path

    def submit(self, c: int, bi: int, job: BlockJob, last: bool) -> None:
        job.out_path = os.path.join(self.tmp.name, f"{c}-{bi}.txt")
        job.encoding = self.encoding
        self.jobs[(c, bi)] = self.pool.submit(run_block, job) if self.pool else run_block(job)
        self.order.append((c, bi))
        if last:
            self.last_chunk = c
        self.flush(wait=False)
        while self.pool is not None and sum(1 for k in self.order if not self._done(k)) > self.limit:
            self._result(next(k for k in self.order if not self._done(k)))
            self.flush(wait=False)

    def _done(self, key) -> bool:
        job = self.jobs[key]
        return not isinstance(job, concurrent.futures.Future) or job.done()

    def _result(self, key):
        job = self.jobs[key]
        if isinstance(job, concurrent.futures.Future):
            job = self.jobs[key] = job.result()
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
                for path, sizes, hits in pieces:
                    ranges.append((path, sum(sizes[:x]), sizes[x]))
            self.hits += sum(sum(hits) for _, _, hits in pieces)
            self._write(ranges, [path for path, _, _ in pieces])
            self.next_block += 1
        if wait:
            self._join()

    def _write(self, ranges, paths) -> None:
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
                self.copier = _Copier(fd)
        if self.copier is not None:
            self.copier.put(ranges, paths)
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

    def _join(self) -> None:
        if self.copier is not None:
            self.copier.join()
            self.copier = None

    def close(self) -> None:
        if self.copier is not None:
            self.copier.stop()
        for key in self.order:
            job = self.jobs.get(key)
            if isinstance(job, concurrent.futures.Future):
                job.cancel()
        self.tmp.cleanup()


class _Copier:
    """A thread copying file ranges to a file descriptor in order (``os.sendfile``, or reads and
    writes where the descriptor takes no ``sendfile``)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.queue: queue.Queue = queue.Queue()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name="jaxrna-targets-copy")
        self.thread.start()

    def put(self, ranges, paths) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put((ranges, paths))

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            if self.error is not None:
                continue
            try:
                ranges, paths = item
                for path, offset, size in ranges:
                    with open(path, "rb") as src:
                        _send(self.fd, src, offset, size)
                for path in paths:
                    os.unlink(path)
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
