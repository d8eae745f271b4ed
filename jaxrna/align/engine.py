"""Bulk alignment, what ``jaxrna align`` runs: two FASTA files in, formatted text out.

The records arrive as arrays (:func:`jaxrna.io.bulk.read_batch`) and are encoded with array
operations (:func:`~jaxrna.align.jobs.encode`); no Python object is made per record or pair on
the way. The pairs (every query against every target, query-major, or the i-th with the i-th)
are taken in *chunks* of consecutive pairs; each chunk's results are formatted
(:mod:`jaxrna.align.text`, in worker processes on machines with many cores) and written in order
by a background thread (:class:`jaxrna.pipeline.OrderedWriter`). Two engines compute:

* :class:`~jaxrna.align.device_runner.DeviceRunner` (JAX, GPU or CPU): the pairs of a chunk
  are bucketed by length into a few shapes, so a job compiles one program per shape (a warm
  run loads them all from the persistent cache). On the CPU (the vmapped sweep) the shapes are
  the fixed length classes of :mod:`jaxrna.align.classes` with fixed batch rows, the lengths
  inside a class runtime values (8 classes scoring only, each with an int16 variant at
  most, 12 with alignments, for any mix up to 10,240 nt and any scores:
  :mod:`jaxrna.align.warmup` prepares them); on the GPU (Pallas) the fixed GPU classes
  of :mod:`jaxrna.align.classes`, each with fixed rows. One run uses at most 8 programs
  whatever its input (:mod:`jaxrna.align.budget`: over that, classes are joined onto larger
  ones of the same ladder and variants folded, where that adds the least work), variants,
  tile wavefront shapes and the ``batch_align`` classes of long GPU alignments counted; the
  parasail engine compiles nothing. Alignments are traced back on the device
  (:func:`jaxrna.kernels.wavefront.lanes_align` on GPU,
  :func:`~jaxrna.kernels.wavefront.batch_align` on CPU): only the ops come back. Batches are
  spread over every device of the backend and launched ahead (:func:`jaxrna.pipeline.schedule`),
  so the devices compute the next ones while the host collects and formats; results are
  collected in input order.
* :class:`~jaxrna.align.host_runner.HostRunner` (CPU, when parasail is installed and
  :func:`jaxrna.align.host.supports` the scheme): parasail's SIMD kernels for the values, our
  traceback rules (:mod:`jaxrna.align.host`), one thread per core. It needs no JAX at all.

Pairs the batch paths do not take (tables too large for a batch's traceback: the checkpointed
path; few very long pairs, score only, on a GPU: the tile wavefront, within the budget at each
pair's shape, over it at its class's) go through :func:`jaxrna.align.api.align_records`,
whose results are merged in place. Results, errors and
their order are those of :func:`~jaxrna.align.api.align_records` over the pairs in order.

This module is the driver: it picks the backend and the engine, schedules the batches and
formats and writes the chunks (:func:`run`). The parts live beside it: the job and its
encoding in :mod:`jaxrna.align.jobs`, the result buffers in :mod:`jaxrna.align.chunks`, the
runners in :mod:`jaxrna.align.host_runner` and :mod:`jaxrna.align.device_runner`; their
names are importable from here too.
"""

from __future__ import annotations

import os
import threading
from typing import Callable, Iterator

import numpy as np

from jaxrna.align.chunks import Chunk, Ragged, to_aligned
from jaxrna.align.device_runner import (GPU_DIRS_BYTES, GPU_MAX_PAIRS, GPU_MERGE_CELLS,
                                        GPU_WASTE, DeviceRunner, kernel_scoring)
from jaxrna.align.host_runner import HostRunner
from jaxrna.align.jobs import CHUNK_ALIGN, CHUNK_SCORES, Job, encode, letter_error
from jaxrna.align.scoring import Scoring
from jaxrna.align.text import AlignedBatch, file_parts, format_batch
from jaxrna.stages import stage

#: The names this module has always offered (the job, the buffers and the runners live in
#: modules of their own; callers and tests import them from here).
__all__ = ["AUTO_HOST_CELLS", "CHUNK_ALIGN", "CHUNK_SCORES", "Chunk", "DeviceRunner",
           "FORMAT_BATCH", "GPU_DIRS_BYTES", "GPU_MAX_PAIRS", "GPU_MERGE_CELLS", "GPU_WASTE",
           "HostRunner", "Job", "Prestart", "Ragged", "WORKERS_FROM", "choose_backend",
           "encode", "estimate_cells", "kernel_scoring", "letter_error", "prestart", "run",
           "to_aligned"]

#: --backend auto: jobs of at most this many cells run on the CPU (parasail) when it can, and
#: pay no GPU start-up.
AUTO_HOST_CELLS = 2 * 10 ** 8
#: Alignments (pair, json) per formatting job, and the least number worth worker processes.
FORMAT_BATCH = 4096
WORKERS_FROM = 20000


def _format_job(args) -> str:
    batch, fmt, first = args
    with stage("format"):
        return format_batch(batch, fmt, first)


# --------------------------------------------------------------------------------------
# the run


class Prestart(threading.Thread):
    """Imports JAX, turns the compilation cache on and starts the backend (a GPU's start-up
    takes a second or more) in the background, while the main thread reads the input."""

    def __init__(self, choice: str) -> None:
        super().__init__(name="jaxrna-jax-start", daemon=True)
        self.choice = choice
        self.backend: str | None = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            with stage("setup"):
                from jaxrna import runtime

                self.backend = runtime.choose_backend(self.choice)
                runtime.enable_compilation_cache()
                import jaxrna.kernels.wavefront  # noqa: F401  (JAX and Pallas modules)
        except BaseException as exc:  # noqa: BLE001 - raised again by result()
            self.error = exc

    def result(self) -> str:
        with stage("setup"):
            self.join()
        if self.error is not None:
            raise self.error
        return self.backend


def estimate_cells(queries: str, targets: str, zip_pairs: bool) -> float:
    """A rough count of the cells of a job from its files' sizes (before reading them)."""
    try:
        sq, st = os.path.getsize(queries), os.path.getsize(targets)
    except OSError:
        return 0.0
    if not zip_pairs:
        return float(sq) * st
    try:
        with open(queries, "rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return 0.0
    if head[:2] == b"\x1f\x8b":
        return 0.0
    records = max(1.0, head.count(b"\n>") * sq / max(len(head), 1))
    return float(sq) * st / records


def prestart(choice: str, scoring: Scoring, local: bool, cells: float) -> Prestart | None:
    """Start JAX in the background when this job will need it (see :func:`choose_backend`)."""
    from jaxrna.align.host import supports
    from jaxrna.runtime import gpu_possible

    host_ok = supports(scoring, local)
    if choice == "cpu" and host_ok:
        return None
    if choice == "auto" and host_ok and (cells <= AUTO_HOST_CELLS or not gpu_possible()):
        return None
    return Prestart(choice)


def _host_without_jax(job: Job, choice: str) -> bool:
    """Whether :func:`choose_backend` picks the host runner without starting JAX."""
    from jaxrna import runtime
    from jaxrna.align.host import supports

    if not supports(job.scoring, job.local):
        return False
    return choice == "cpu" or choice == "auto" and (job.cells() <= AUTO_HOST_CELLS
                                                    or not runtime.gpu_possible())


def choose_backend(job: Job, choice: str, allow_host: bool = True,
                   started: Prestart | None = None) -> tuple[str, bool]:
    """``(backend, host)``: where to compute, and whether through parasail
    (:class:`HostRunner`). ``auto`` keeps small jobs on the CPU when parasail can take them
    (no GPU start-up), and every job where JAX has no GPU plugin; ``cpu`` uses parasail
    whenever it can."""
    from jaxrna import runtime
    from jaxrna.align.host import supports

    host_ok = allow_host and supports(job.scoring, job.local)
    if host_ok and _host_without_jax(job, choice):
        runtime.announce_host("--backend cpu" if choice == "cpu" else "--backend auto" + (
            ", a small job" if runtime.gpu_possible() else ""), "parasail")
        return "cpu", True
    if started is not None:
        backend = started.result()
    else:
        with stage("setup"):
            backend = runtime.choose_backend(choice)
            runtime.enable_compilation_cache()
    return backend, backend == "cpu" and host_ok


def run(job: Job, fmt: str, out, *, backend: str = "auto", max_bytes=None,
        on_error: Callable | None = None, on_done: Callable[[int], None] | None = None,
        workers: int | None = None, engine: str | None = None, interpret: bool = False,
        kernel: dict | None = None, started: Prestart | None = None) -> int:
    """Align ``job`` and write its results to the text handle ``out`` in format ``fmt``;
    returns the number of pairs written. ``backend``: ``auto|cpu|gpu``; ``engine``: force
    ``"device"`` (JAX) or ``"host"`` (parasail, where it supports the scheme) for tests and
    benchmarks (default: ``$JAXRNA_ALIGN_ENGINE``, else :func:`choose_backend`); ``workers``:
    formatting processes (default: every core but one on machines with 4 or more, for jobs
    of :data:`WORKERS_FROM` pairs or more)."""
    from jaxrna import pipeline

    from jaxrna.align.scoring import check_end_gaps

    check_end_gaps(job.scoring, job.mode)
    with stage("encode"):
        job.check()
    engine = engine or os.environ.get("JAXRNA_ALIGN_ENGINE") or None
    if engine not in (None, "host", "device"):
        raise ValueError(f"JAXRNA_ALIGN_ENGINE must be host or device, not {engine!r}")
    if engine == "host":
        from jaxrna.align.host import supports

        if not supports(job.scoring, job.local):
            engine = None
    if on_error is None:
        def on_error(pair, exc):
            raise exc
    if workers is None:
        workers = pipeline.default_workers() if job.n_pairs >= WORKERS_FROM else 0
    if fmt == "tsv" and job.score_only:
        workers = 0                          # vectorised enough on one core
    if engine == "host" or engine is None and _host_without_jax(job, backend):
        workers = 0                          # the host runner formats in its own processes
    pool = pipeline.worker_pool(workers) if workers > 0 else None   # starting meanwhile
    if engine == "host":
        backend, host = "cpu", True
        if started is not None:              # not needed, but let it finish before exit
            started.join()
    else:
        backend, host = choose_backend(job, backend, allow_host=engine != "device",
                                       started=started)
    chunk = CHUNK_SCORES if job.score_only else CHUNK_ALIGN
    if host:
        def text(c: Chunk, first: bool) -> str:
            return format_batch(to_aligned(job, c), fmt, first and bool(c.keep.any()))

        runner = HostRunner(job, pipeline.cores(), max_bytes, on_error, text=text,
                            encoding=(getattr(out, "encoding", None) or "utf-8",
                                      getattr(out, "errors", None) or "strict"))
    else:
        with stage("setup"):
            runner = DeviceRunner(job, backend, max_bytes, on_error, interpret=interpret,
                                  kernel=kernel)
    total = job.n_pairs
    starts = list(range(0, total, chunk))
    written = 0
    pending_text: list = []

    def chunks() -> Iterator[Chunk]:
        if host:                             # the next pairs handed out before these end
            submitted = None
            for s in starts:
                qi, ti = job.pairs(s, min(total, s + chunk))
                following = runner.submit(s, qi, ti)
                if submitted is not None:
                    yield from runner.collect(submitted)
                submitted = following
            if submitted is not None:
                yield from runner.collect(submitted)
            return
        state: dict[int, tuple] = {}

        def batches():
            for ci, s in enumerate(starts):
                qi, ti = job.pairs(s, min(total, s + chunk))
                c = Chunk.empty(s, qi, ti)
                ragged = None if job.score_only else Ragged(len(qi))
                with stage("encode"):
                    plan = runner.plan(ci, qi, ti, c, ragged)
                state[ci] = [c, ragged, len(plan), qi, ti]
                if not plan:
                    yield ci, None
                for b in plan:
                    yield ci, b

        def launch(item, device):
            ci, b = item
            if b is None:
                return None
            _, _, _, qi, ti = state[ci]
            return runner.launch(b, qi, ti, device)

        def collect(item, pend):
            ci, b = item
            if b is not None:
                entry = state[ci]
                runner.collect(b, pend, entry[0], entry[1])

        def retry(item, device, exc):        # out of device memory: in pieces
            ci, b = item
            entry = state[ci]
            runner.retry_in_pieces(b, entry[3], entry[4], entry[0], entry[1], exc)

        # the batches spread over every device, results collected in input order
        for (ci, b), _ in pipeline.schedule(batches(), launch, collect, runner.devices, depth=2,
                                            retry=retry):
            entry = state[ci]
            if b is not None:
                entry[2] -= 1
            if entry[2] <= 0:
                c, ragged = entry[0], entry[1]
                if ragged is not None:
                    c.ops, c.op_offsets = ragged.assemble()
                del state[ci]
                yield c

    try:
        with pipeline.OrderedWriter(out) as writer:
            if fmt != "pair":               # pair: the header comes with the first alignment
                writer.write(file_parts(fmt, job.mode, job.scoring, total)[0])
            first = True
            for c in chunks():
                n = int(np.count_nonzero(c.keep))
                if c.text is not None and c.text_first == (first and n > 0):
                    if n and first and fmt == "pair":    # formatted by the host runner
                        writer.write(file_parts(fmt, job.mode, job.scoring, n)[0])
                    writer.write(c.text)
                    first = first and not n
                    written += n
                    if on_done:
                        on_done(len(c.qi))
                    continue
                with stage("format"):
                    batch = to_aligned(job, c)
                if n and first and fmt == "pair":
                    writer.write(file_parts(fmt, job.mode, job.scoring, n)[0])
                if fmt == "tsv" and batch.ops is None or pool is None:
                    with stage("format"):
                        text = format_batch(batch, fmt, first and n > 0)
                    writer.write(text)
                else:
                    for a in range(0, n, FORMAT_BATCH):
                        part = _slice(batch, a, min(n, a + FORMAT_BATCH))
                        pending_text.append(
                            pool.submit(_format_job, (part, fmt, first and a == 0)))
                    while pending_text and pending_text[0].done():
                        writer.write(pending_text.pop(0).result())
                if n:
                    first = False
                written += n
                if on_done:
                    on_done(len(c.qi))
            for fut in pending_text:
                with stage("format"):        # waiting for the formatting processes
                    text = fut.result()
                writer.write(text)
            _, tail = file_parts(fmt, job.mode, job.scoring, written)
            writer.write(tail)
    finally:
        if host:
            runner.close()
    return written


def _slice(b: AlignedBatch, a: int, z: int) -> AlignedBatch:
    """Alignments ``a .. z - 1`` of a batch."""
    out = AlignedBatch(b.scoring, b.mode, b.query_ids[a:z], b.target_ids[a:z], b.units[a:z],
                       b.query_start[a:z], b.query_end[a:z], b.target_start[a:z],
                       b.target_end[a:z])
    if b.ops is not None:
        o = b.op_offsets
        out.ops = b.ops[o[a]:o[z]]
        out.op_offsets = o[a:z + 1] - o[a]
        for side in ("query", "target"):
            seg, so = getattr(b, f"{side}_seg"), getattr(b, f"{side}_seg_offsets")
            setattr(out, f"{side}_seg", seg[so[a]:so[z]])
            setattr(out, f"{side}_seg_offsets", so[a:z + 1] - so[a])
    return out
