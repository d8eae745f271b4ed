"""High-level folding: strings or records in, :class:`FoldResult` objects out, in input order.

>>> r = fold("GGGAAAUCCC")
>>> r.structure, r.score
('(((...))).', 3)
>>> [x.score for x in fold(["GGGAAAUCC", "GCGCAAAGCGC"], weights="bpmax")]
[7.5, 12]
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from typing import Iterable, Iterator, Sequence

import numpy as np

from jaxrna import stages
from jaxrna.alphabet import encode
from jaxrna.batching import batch_rows, bucket_length, map_rows
# the batch plan lives in :mod:`jaxrna.fold.plan`; its names are importable from here as before
from jaxrna.fold.plan import (DEVICE_BYTES_PER_CELL, GPU_BATCH_BUDGET, GPU_WORK_FROM,  # noqa
                              MAX_ROWS, PARTITION_GPU_WORK_FROM, batch_cap, choose_engine,
                              TILE, class_of, length_classes, packed_length, plan_batches,
                              work_estimate)
from jaxrna.fold.traceback import pairs_to_dotbracket
from jaxrna.io.errors import ResourceError
from jaxrna.io.fasta import Record
from jaxrna.oom import split_on_oom
from jaxrna.runtime import human_bytes, memory_bytes
from jaxrna.weights import ScoredResult, WeightSet, parse_weights

#: Bytes per padded position squared: device tiles and row-shifted copy (2 x 4 B, plus group
#: padding), the host copy and the dense table used by the traceback.
BYTES_PER_CELL = 20
#: On a GPU, longer sequences are folded one at a time by the packed Pallas schedule
#: (:mod:`jaxrna.fold.gpu`), whose table and traceback stay on the device.
GPU_PACKED_ABOVE = 4096
#: Block-diagonal groups of the tiled fill (:func:`jaxrna.fold.blocked.blocked_fill`): on a
#: GPU one (the schedule is latency-bound; one loop body compiles fastest), on a CPU two
#: (less work on empty tiles, still a fraction of the compile time of eight).
FILL_GROUPS = {"cpu": 2, "gpu": 1}
#: Batches launched ahead of the one whose results are being read.
LAUNCH_AHEAD = 2


@dataclass(frozen=True)
class FoldResult(ScoredResult):
    """One folded sequence: pairs are 0-based ``(i, j)`` with ``i < j``."""

    id: str
    sequence: str
    score_units: int
    weights: WeightSet
    min_loop: int
    pairs: tuple[tuple[int, int], ...] | None = None
    description: str = field(default="", compare=False)
    structure_text: str | None = field(default=None, compare=False, repr=False)

    @property
    def length(self) -> int:
        return len(self.sequence)

    @property
    def score_fraction(self) -> Fraction:
        return self.weights.to_fraction(self.score_units)

    @property
    def structure(self) -> str | None:
        if self.structure_text is not None:
            return self.structure_text
        return None if self.pairs is None else pairs_to_dotbracket(list(self.pairs), self.length)


def estimate_bytes(length: int, padded: int | None = None) -> int:
    """Memory needed to fold (with traceback) one sequence of ``length`` nt on the CPU path
    (``padded``: the padded length it is folded at, default :func:`bucket_length`'s)."""
    n = padded or bucket_length(length)
    return BYTES_PER_CELL * n * n


def check_memory(length: int, record_id: str, max_bytes: int | None = None,
                 padded: int | None = None) -> None:
    """Refuse up front a sequence whose table would not fit, with an estimate and advice."""
    limit = max_bytes if max_bytes is not None else int(0.8 * memory_bytes())
    need = estimate_bytes(length, padded)
    if limit and need > limit:
        raise ResourceError(
            f"{length} nt need about {human_bytes(need)} to fold, more than the "
            f"{human_bytes(limit)} allowed; fold it on a GPU with more memory (--backend gpu), "
            f"split it into domains, or raise --max-memory")


# ------------------------------------------------------------------------------------------
# the batched device program: tiled fill, scores and the traceback, one compiled program


def _fold_program(codes, lengths, weights, min_loop, *, tile: int, groups: int,
                  with_pairs: bool, sequential: bool, walk: str = "xla", chunk: int = 4,
                  maxplus: str = "pallas", interpret: bool = False):
    """Scores ``(B,)`` and, with pairs, partners ``(B, L)`` (int16 or int32) and ``ok``.

    ``lengths`` and ``min_loop`` (an int32 scalar) are traced: one program serves every
    length of its padded class and every ``min_loop``, as the weights do.
    ``sequential``: fill the rows one after another (``lax.map``, empty rows skipped), each
    over its own tiles only (:func:`~jaxrna.fold.blocked.ragged_fill`, ``chunk`` tiles a
    step), as a CPU runs the tile schedule of one sequence faster than the same schedule
    vmapped over a batch; otherwise vmapped (GPU: every tile of the block diagonals up to the
    longest row's). ``walk``: the traceback as vmapped XLA steps
    (:func:`~jaxrna.fold.walk.walk_batch`) or as one Pallas kernel
    (:func:`~jaxrna.fold.walk.traceback_tiles_kernel`, GPU). ``maxplus``: the vmapped fill's
    max-plus products (:func:`jaxrna.kernels.tropical.maxplus_update`: the Pallas kernel, or
    ``"xla"`` its pure-JAX path). ``interpret``: the Pallas kernels in interpret mode (tests)."""
    import jax
    import jax.numpy as jnp

    from jaxrna.fold.blocked import blocked_fill_traced, ragged_fill
    from jaxrna.fold.walk import tile_cell, traceback_tiles_kernel, walk_batch

    weights = weights.astype(jnp.int32)
    min_loop = jnp.asarray(min_loop, jnp.int32)
    lengths = jnp.asarray(lengths, jnp.int32)
    nb_all = codes.shape[1] // tile

    if sequential:
        empty = jnp.zeros((nb_all, nb_all, tile, tile), jnp.int32)

        def fill_row(a):
            c, n = a
            return jax.lax.cond(n > 1, lambda: ragged_fill(c, weights, n, min_loop, tile, chunk),
                                lambda: empty)

        tiles = jax.lax.map(fill_row, (codes, lengths))
    else:
        diagonals = (jnp.max(lengths) + tile - 1) // tile
        tiles = map_rows(lambda c: blocked_fill_traced(     # one row (one long sequence): no vmap
            c, weights, min_loop, tile=tile, groups=groups, diag_blocks=1,
            maxplus="interpret" if interpret and maxplus == "pallas" else maxplus,
            diagonals=diagonals))(codes)
    B = codes.shape[0]
    last = jnp.maximum(lengths - 1, 0)
    scores = tiles[jnp.arange(B), 0, last // tile, 0, last % tile]
    scores = jnp.where(lengths > 1, scores, 0)
    if not with_pairs:
        return (scores,)
    if walk == "kernel":
        partner, ok = traceback_tiles_kernel(tiles, codes, lengths, weights, min_loop,
                                             interpret=interpret)
    else:
        partner, ok = walk_batch(lambda b, i, j: tile_cell(tiles, b, i, j), codes, lengths,
                                 weights, min_loop)
    small = codes.shape[1] < (1 << 15)
    return scores, partner.astype(jnp.int16 if small else jnp.int32), ok


_fold_program_jit = None
#: On a GPU, trace back with the one-kernel walk (:func:`jaxrna.fold.walk.traceback_tiles_kernel`;
#: the XLA walk if it does not build). ``JAXRNA_FOLD_WALK=xla`` forces the XLA walk.
WALK_KERNEL = os.environ.get("JAXRNA_FOLD_WALK", "kernel") != "xla"
#: Tiles per step of the CPU's ragged fill (:func:`jaxrna.fold.blocked.ragged_fill`).
CPU_CHUNK = 4


def _static(with_pairs: bool, backend: str) -> dict:
    return dict(tile=TILE, groups=FILL_GROUPS[backend], with_pairs=with_pairs,
                sequential=backend == "cpu", walk="xla", chunk=CPU_CHUNK)


def tiles_jitted():
    """The batch program's ``jax.jit`` function (what a compile worker lowers:
    :mod:`jaxrna.compile_workers`)."""
    return _jitted()


def _jitted():
    global _fold_program_jit
    if _fold_program_jit is None:
        import jax

        _fold_program_jit = jax.jit(_fold_program, static_argnames=(
            "tile", "groups", "with_pairs", "sequential", "walk", "chunk", "maxplus",
            "interpret"))
    return _fold_program_jit


#: The GPU batch program's Pallas kernels in interpret mode, so that it runs on a CPU (tests).
PALLAS_INTERPRET = False
#: The Pallas kernels of the GPU batch program (:mod:`jaxrna.kernels.fallback` names).
MAXPLUS_KERNEL, WALK_KERNEL_NAME = "tropical.maxplus", "fold.walk"


def _gpu_static(with_pairs: bool) -> dict:
    static = _static(with_pairs, "gpu")
    return dict(static, interpret=True) if PALLAS_INTERPRET else static


def _choices(with_pairs: bool, backend: str) -> list[tuple[tuple[str, ...], dict]]:
    """The batch program's static arguments in the order to try them, each with the Pallas
    kernels it holds: on a GPU, the Pallas fill with the kernel walk (with pairs, unless
    ``JAXRNA_FOLD_WALK=xla``), then the Pallas fill with the XLA walk, then the pure-JAX
    fill; elsewhere the pure-JAX program only."""
    if backend != "gpu":
        return [((), _static(with_pairs, backend))]
    static = _gpu_static(with_pairs)
    out = [((MAXPLUS_KERNEL,), static), ((), dict(static, maxplus="xla"))]
    if with_pairs and WALK_KERNEL:
        out.insert(0, ((MAXPLUS_KERNEL, WALK_KERNEL_NAME), dict(static, walk="kernel")))
    return out


def min_loop_arg(min_loop: int) -> np.ndarray:
    return np.asarray(min_loop, np.int32)


def _first_static(with_pairs: bool, backend: str) -> dict:
    """The static arguments :func:`batch_program` compiles now: the first choice none of
    whose kernels failed in this process (or is forced to; :mod:`jaxrna.kernels.fallback`)."""
    from jaxrna.kernels import fallback

    return next(static for kernels, static in _choices(with_pairs, backend)
                if all(fallback.usable(k) and not fallback.forced(k) for k in kernels))


def batch_program(codes, lengths, wm, min_loop, with_pairs: bool, backend: str, device):
    """The compiled batch program for these shapes (:mod:`jaxrna.programs`); ``min_loop``
    is an argument (:func:`min_loop_arg`), not part of the program. On a GPU a Pallas kernel
    that does not build falls back to its pure-JAX path (:func:`_choices`; a failure is
    put on the choice's last kernel: :func:`jaxrna.kernels.fallback.compile_or_fallback`)."""
    from jaxrna import programs
    from jaxrna.kernels.fallback import compile_or_fallback

    args = (codes, lengths, wm, min_loop)

    def attempt(choices):
        kernels, static = choices[0]

        def run():
            return programs.program("fold.tiles", _jitted(), args, static, device)

        for kernel in reversed(kernels):
            run = partial(compile_or_fallback, kernel, run, lambda: attempt(choices[1:]))
        return run()

    return attempt(_choices(with_pairs, backend))


def _ready(codes, lengths, wm, min_loop, with_pairs: bool, backend: str, device) -> bool:
    """Whether the batch program for these shapes is already in this process."""
    from jaxrna import programs

    return programs.ready("fold.tiles", (codes, lengths, wm, min_loop),
                          _first_static(with_pairs, backend), device)


def _shape_args(rows: int, padded: int):
    import jax

    return (jax.ShapeDtypeStruct((rows, padded), np.int8),
            jax.ShapeDtypeStruct((rows,), np.int32), jax.ShapeDtypeStruct((5, 5), np.int32),
            jax.ShapeDtypeStruct((), np.int32))


def _prefetch(rows: int, padded: int, with_pairs: bool, backend: str, device) -> None:
    """Start compiling (or loading) the program of a batch shape in the background."""
    from jaxrna import compile_workers

    compile_workers.prefetch("fold.tiles", "jaxrna.fold.api:tiles_jitted",
                             _shape_args(rows, padded), _first_static(with_pairs, backend),
                             device)


@dataclass
class _Job:
    """One unit of work of a chunk: ``kind`` is ``batch`` (a device batch), ``host`` (the
    chunk's records on the NumPy engine), ``packed`` (one long record on the GPU schedule) or
    ``end`` (every job of the chunk is done: its results can go out)."""

    kind: str
    chunk: object
    members: np.ndarray | None = None
    padded: int = 0
    cap: int = 1
    results: dict | None = None


class _Folder:
    """Turns chunks (:class:`~jaxrna.io.bulk.SeqBatch`) into jobs, launches and collects them."""

    def __init__(self, weights: WeightSet, min_loop: int, with_pairs: bool, backend: str,
                 max_bytes: int | None, batch_budget: int | None, on_done, on_error,
                 host_work: float | None = None) -> None:
        self.weights, self.min_loop, self.with_pairs = weights, min_loop, with_pairs
        self.backend, self.max_bytes, self.budget = backend, max_bytes, batch_budget
        self.on_done, self.on_error = on_done, on_error
        self.wm = weights.matrix()
        self.ml = min_loop_arg(min_loop)
        self.devices: list = [None]          # where batches run (pipeline.schedule)
        self.flying: list = []               # CPU: outputs launched since the last load
        self.host_work = host_work           # the whole job's work (fold_host's job_work)
        if backend != "host":
            from jaxrna.runtime import devices

            self.devices = devices(backend)

    # -- planning -------------------------------------------------------------------------

    def _refuse(self, chunk, k: int, exc: ResourceError) -> None:
        if self.on_error is None:
            raise exc
        self.on_error(chunk.record(k), exc)

    def jobs(self, chunks) -> Iterator[_Job]:
        for chunk in chunks:
            results: dict = {}
            lengths = np.asarray(chunk.lengths, np.int64)
            ok = np.ones(len(lengths), bool)
            packed = np.zeros(len(lengths), bool)
            if self.backend == "gpu":
                packed = lengths > GPU_PACKED_ABOVE
            for k in np.flatnonzero(~packed):
                n = int(lengths[k])
                if n > 1024 or self.max_bytes is not None:   # shorter ones always fit
                    try:
                        check_memory(n, chunk.ids[k], self.max_bytes,
                                     class_of(n, "cpu") if self.backend == "cpu" else None)
                    except ResourceError as exc:
                        ok[k] = False
                        self._refuse(chunk, int(k), exc)
            regular = np.flatnonzero(ok & ~packed)
            for k in np.flatnonzero(packed):
                # long records on the GPU go one by one, in input order with the batches
                before = regular[regular < k]
                yield from self._regular(chunk, lengths, before, results)
                regular = regular[regular > k]
                yield _Job("packed", chunk, np.array([k]), results=results)
            yield from self._regular(chunk, lengths, regular, results)
            yield _Job("end", chunk, results=results)

    def _regular(self, chunk, lengths, members, results) -> Iterator[_Job]:
        if not len(members):
            return
        if self.backend == "host":
            yield _Job("host", chunk, members, results=results)
            return
        plan = plan_batches(lengths, members, self.backend, self.budget)
        if self.backend == "gpu":          # compile (or load) the batch shapes side by side
            shapes = {(self.rows(len(g), cap), padded) for padded, cap, g in plan}
            for rows, padded in sorted(shapes, key=lambda x: -x[1]):
                for device in self.devices:
                    _prefetch(rows, padded, self.with_pairs, self.backend, device)
            from jaxrna import programs
            from jaxrna.pipeline import ready_first

            plan = ready_first(plan, *programs.readiness(self.program_of),   # a cold run
                               key=lambda batch: batch[:2])
        for padded, cap, group in plan:
            yield _Job("batch", chunk, group, padded, cap, results)

    def program_of(self, batch) -> tuple:
        """The program of a planned ``(padded, cap, members)`` batch on the first device, as
        :func:`jaxrna.programs.readiness` describes it."""
        padded, cap, members = batch
        return ("fold.tiles", _shape_args(self.rows(len(members), cap), padded),
                _first_static(self.with_pairs, self.backend), self.devices[0], False)

    def rows(self, count: int, cap: int) -> int:
        """Rows of a batch of ``count``: always the class's ``cap``, whatever the count (one
        program per padded length, the one :mod:`jaxrna.fold.warmup` compiles). A CPU's fill
        skips the empty rows; a GPU's vmapped fill computes them, which costs little there (a
        batch's time is set by its chain of dependent steps, not its rows: the BENCHMARKS
        section "Seventh session" measures one sequence in a full batch)."""
        del count
        return batch_rows(0, cap, fill=True)

    # -- launching and collecting ---------------------------------------------------------

    def launch(self, job: _Job, device=None):
        """Dispatch a batch job's program on ``device`` (default: the first) without waiting;
        a packed job gets its device back (it runs when collected), other jobs None."""
        device = device or self.devices[0]
        if job.kind == "packed":
            return device
        if job.kind != "batch":
            return None
        import jax

        from jaxrna.io.bulk import padded_codes

        rows = self.rows(len(job.members), job.cap)
        with stages.stage("encode"):
            codes = padded_codes(job.chunk, job.members, job.padded, rows=rows)
            lengths = np.zeros(rows, np.int32)
            lengths[:len(job.members)] = np.asarray(job.chunk.lengths)[job.members]
        if self.backend == "cpu" and not _ready(codes, lengths, self.wm, self.ml,
                                                self.with_pairs, self.backend, device):
            # XLA:CPU can fail an executable that runs while another one is being loaded
            # ("Function ... not found"): let what runs finish before loading a program
            with stages.stage("device"):
                jax.block_until_ready(self.flying)
            self.flying = []
        run = batch_program(codes, lengths, self.wm, self.ml, self.with_pairs, self.backend,
                            device)
        with stages.stage("device"):
            args = jax.device_put((codes, lengths, self.wm, self.ml), device)
            out = run(*args)       # out of device memory: retry() (pipeline.schedule)
            if self.backend == "cpu":
                self.flying.append(out)
            return out

    def collect(self, job: _Job, outputs) -> list[FoldResult]:
        """Finish a job; at a chunk's ``end``, its results in input order."""
        chunk, results = job.chunk, job.results
        if job.kind == "batch":
            if isinstance(outputs, BaseException):
                raise outputs
            self._collect_batch(job, outputs)
        elif job.kind == "host":
            from jaxrna.fold.host import fold_host

            seqs = [chunk.sequence(int(k)) for k in job.members]
            with stages.stage("device"):
                done = fold_host(seqs, self.wm, self.min_loop, self.with_pairs,
                                 job_work=self.host_work)
            for k, (score, pairs) in zip(job.members.tolist(), done):
                results[k] = (score, pairs, None)
        elif job.kind == "packed":
            k = int(job.members[0])
            try:
                results[k] = _fold_gpu_packed(chunk.sequence(k), chunk.ids[k], self.weights,
                                              self.min_loop, self.with_pairs, self.max_bytes,
                                              outputs)
            except ResourceError as exc:
                self._refuse(chunk, k, exc)
        return self._done(job)

    def _done(self, job: _Job) -> list[FoldResult]:
        """After a job: progress, and at a chunk's ``end`` its results in input order."""
        chunk, results = job.chunk, job.results
        if job.kind in ("batch", "host", "packed") and self.on_done:
            self.on_done(len(job.members))
        if job.kind != "end":
            return []
        out = []
        for k in sorted(results):
            score, pairs, text = results[k]
            out.append(FoldResult(id=chunk.ids[k], sequence=chunk.sequence(k), score_units=score,
                                  weights=self.weights, min_loop=self.min_loop, pairs=pairs,
                                  description=chunk.descriptions[k], structure_text=text))
        return out

    def retry(self, job: _Job, device, failed: BaseException) -> list[FoldResult]:
        """A batch that ran out of device memory (at launch or when collected: ``failed``),
        folded again on ``device`` in halves, down to single records
        (:func:`jaxrna.oom.split_on_oom`); then as :meth:`collect`."""

        def run(part):
            rows = 1 << (len(part) - 1).bit_length()      # fewer rows than the batch had
            sub = _Job("batch", job.chunk, np.asarray(part), job.padded, rows, {})
            out = self.launch(sub, device)
            if isinstance(out, BaseException):
                raise out
            self._collect_batch(sub, out)
            return [sub.results[k] for k in part]

        members = job.members.tolist()
        done = split_on_oom(run, members, lambda k: f"record '{job.chunk.ids[k]}'",
                            self.on_error and (lambda k, e: self.on_error(job.chunk.record(k), e)),
                            failed=failed)
        job.results.update((k, r) for k, r in zip(members, done) if r is not None)
        return self._done(job)

    def _collect_batch(self, job: _Job, outputs) -> None:
        import jax

        with stages.stage("device"):
            host = jax.device_get(outputs)
        scores = host[0]
        m = len(job.members)
        if not self.with_pairs:
            for r, k in enumerate(job.members.tolist()):
                job.results[k] = (int(scores[r]), None, None)
            return
        partner, ok = host[1], host[2]
        if not ok[:m].all():
            raise AssertionError("table inconsistent during the device traceback")
        lengths = np.asarray(job.chunk.lengths)[job.members]
        with stages.stage("traceback"):
            for r, k in enumerate(job.members.tolist()):
                n = int(lengths[r])
                p = partner[r, :n]
                idx = np.flatnonzero(p > np.arange(n))
                mate = p[idx]
                text = np.full(n, 46, np.uint8)                  # "."
                text[idx] = 40                                   # "("
                text[mate] = 41                                  # ")"
                job.results[k] = (int(scores[r]), tuple(zip(idx.tolist(), mate.tolist())),
                                  text.tobytes().decode("ascii"))


def fold_batches(chunks, weights: WeightSet | str = "unit", min_loop: int = 3,
                 with_pairs: bool = True, max_bytes: int | None = None,
                 batch_budget: int | None = None, on_done=None, backend: str = "cpu",
                 on_error=None, depth: int = LAUNCH_AHEAD,
                 host_work: float | None = None) -> Iterator[FoldResult]:
    """Fold every record of ``chunks`` (:class:`~jaxrna.io.bulk.SeqBatch` blocks, e.g. from
    :func:`jaxrna.io.bulk.iter_batches`), yielding results in input order.

    Each chunk's records are grouped by padded length into batches of at most
    ``batch_budget`` bytes (one compiled program per padded length and batch size; tables
    filled and traced back on the device: only scores and partners come back), spread over
    every device of ``backend`` (:func:`jaxrna.runtime.devices`, :func:`jaxrna.pipeline.schedule`)
    with ``depth`` batches per device launched ahead of the one being collected, so the
    devices work while the host reads, collects and formats; results in input order whatever
    the device count. ``on_done(k)`` is called as ``k`` more records finish.
    ``backend`` is a JAX platform name (``"cpu"`` or ``"gpu"``), or ``"host"`` for NumPy
    without JAX (:mod:`jaxrna.fold.host`, for small work). A record that cannot be folded
    (too large) raises :class:`ResourceError`, or, when ``on_error(record, error)`` is given,
    is reported to it and skipped. ``host_work``: the whole job's split operations, for the
    host engine (:func:`jaxrna.fold.host.fold_host`'s ``job_work``; None: each chunk's own).
    """
    from jaxrna.pipeline import schedule

    if isinstance(weights, str):
        weights = parse_weights(weights)
    if min_loop < 0:
        raise ValueError("min_loop must be >= 0")
    if backend not in ("host", "cpu", "gpu"):
        raise ValueError(f"backend must be host, cpu or gpu, not {backend!r}")
    folder = _Folder(weights, min_loop, with_pairs, backend, max_bytes, batch_budget, on_done,
                     on_error, host_work)
    for _, results in schedule(folder.jobs(chunks), folder.launch, folder.collect,
                               folder.devices, depth, retry=folder.retry):
        yield from results


def fold_records(records: Iterable[Record], weights: WeightSet | str = "unit", min_loop: int = 3,
                 with_pairs: bool = True, chunk: int = 2048, max_bytes: int | None = None,
                 batch_budget: int | None = None, on_done=None,
                 backend: str = "cpu", on_error=None) -> Iterator[FoldResult]:
    """Fold a stream of records, yielding results in input order: :func:`fold_batches` over
    groups of ``chunk`` records (the next group is read and launched while the last one's
    results are collected)."""
    from jaxrna.io.bulk import SeqBatch

    def chunks():
        group: list[Record] = []
        for rec in records:
            group.append(rec)
            if len(group) >= chunk:
                yield SeqBatch.from_records(group)
                group = []
        if group:
            yield SeqBatch.from_records(group)

    yield from fold_batches(chunks(), weights, min_loop, with_pairs, max_bytes, batch_budget,
                            on_done, backend, on_error)


def _fold_gpu_packed(sequence: str, record_id: str, weights: WeightSet, min_loop: int,
                     with_pairs: bool, max_bytes: int | None, device=None) -> tuple:
    """``(score, pairs, None)`` of one long sequence through the packed GPU schedule on
    ``device`` (default: the first GPU; memory checked up front; :class:`ResourceError` if it
    does not fit)."""
    import jax

    from jaxrna.fold.gpu import GpuMemoryError, fold_gpu

    try:
        with stages.stage("device"), jax.default_device(device or jax.devices("gpu")[0]):
            score, pairs = fold_gpu(encode(sequence), weights.matrix(), min_loop,
                                    with_pairs=with_pairs, record_id=record_id,
                                    max_bytes=max_bytes, pad_to=packed_length(len(sequence)))
    except GpuMemoryError as exc:
        raise ResourceError(str(exc)) from None
    return score, None if pairs is None else tuple(pairs), None


def fold(sequences: str | Sequence[str], weights: WeightSet | str = "unit", min_loop: int = 3,
         with_pairs: bool = True, backend: str = "auto") -> FoldResult | list[FoldResult]:
    """Fold one sequence (returns a :class:`FoldResult`) or a list (returns a list).

    Sequences are strings over ACGU (T read as U; other IUPAC codes never pair).
    ``weights``: ``"unit"``, ``"bpmax"``, ``"integer"``, ``"GC=3,AU=2,GU=1"`` or a
    :class:`~jaxrna.weights.WeightSet`. A pair (i, j) needs ``j - i > min_loop``.
    ``backend``: ``"auto"`` (the GPU when JAX sees one), ``"cpu"`` or ``"gpu"``.
    """
    from jaxrna.runtime import resolve_backend

    single = isinstance(sequences, str)
    seqs = [sequences] if single else list(sequences)
    recs = [Record(id=f"seq{i + 1}" if not single else "seq", sequence=s.upper().replace("T", "U"))
            for i, s in enumerate(seqs)]
    results = list(fold_records(recs, weights, min_loop, with_pairs=with_pairs,
                                backend=resolve_backend(backend)))
    return results[0] if single else results
