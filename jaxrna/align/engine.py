"""Bulk alignment, what ``jaxrna align`` runs: two FASTA files in, formatted text out.

The records arrive as arrays (:func:`jaxrna.io.bulk.read_batch`) and are encoded with array
operations (:func:`encode`); no Python object is made per record or pair on the way. The pairs
(every query against every target, query-major, or the i-th with the i-th) are taken in
*chunks* of consecutive pairs; each chunk's results are formatted (:mod:`jaxrna.align.text`,
in worker processes on machines with many cores) and written in order by a background thread
(:class:`jaxrna.pipeline.OrderedWriter`). Two engines compute:

* :class:`DeviceRunner` (JAX, GPU or CPU): the pairs of a chunk are bucketed by length into a
  few shapes, so a job compiles one program per shape (a warm run loads them all from the
  persistent cache). On the CPU (the vmapped sweep) the shapes are the fixed length classes of
  :mod:`jaxrna.align.classes` with fixed batch rows, the lengths inside a class runtime values
  (at most 8 programs scoring only, each with an int16 variant at most, 12 with alignments, for
  any mix up to 10,240 nt and any scores: :mod:`jaxrna.align.warmup` prepares them); on the GPU
  (Pallas) a job-wide plan from its lengths (one square shape, or a ladder). Alignments are traced back on the device
  (:func:`jaxrna.kernels.wavefront.lanes_align` on GPU, :func:`~jaxrna.kernels.wavefront.batch_align`
  on CPU): only the ops come back. Batches are spread over every device of the backend and
  launched ahead (:func:`jaxrna.pipeline.schedule`), so the devices compute the next ones while
  the host collects and formats; results are collected in input order.
* :class:`HostRunner` (CPU, when parasail is installed and :func:`jaxrna.align.host.supports`
  the scheme): parasail's SIMD kernels for the values, our traceback rules
  (:mod:`jaxrna.align.host`), one thread per core. It needs no JAX at all.

Pairs the batch paths do not take (tables too large for a batch's traceback: the checkpointed
path; few very long pairs, score only, on a GPU: the tile wavefront) go through
:func:`jaxrna.align.api.align_records`, whose results are merged in place. Results, errors and
their order are those of :func:`~jaxrna.align.api.align_records` over the pairs in order.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
from dataclasses import dataclass
from functools import partial
from typing import Callable, Iterator

import numpy as np

from jaxrna.align import classes
from jaxrna.align.scoring import LIMIT, Scoring
from jaxrna.batching import bucket_length
from jaxrna.align.text import AlignedBatch, file_parts, format_batch
from jaxrna.io.bulk import SeqBatch
from jaxrna.io.errors import InputError
from jaxrna.stages import stage

log = logging.getLogger("jaxrna")

#: Pairs per chunk (a unit of formatting and writing; bounds the memory of results).
CHUNK_ALIGN = 1 << 14
CHUNK_SCORES = 1 << 20
#: GPU, with alignments: direction-bit bytes of one batch (at most), and its pairs at most.
GPU_DIRS_BYTES = 1 << 30
GPU_MAX_PAIRS = 8192
#: A job's GPU pairs share one padded shape unless that costs more than this many times the
#: real cells and more than GPU_MERGE_CELLS (a few tens of ms on an H200; less than compiling
#: another program); then: one square shape per power-of-two length class.
GPU_WASTE = 4.0
GPU_MERGE_CELLS = 2 * 10 ** 10
#: --backend auto: jobs of at most this many cells run on the CPU (parasail) when it can, and
#: pay no GPU start-up.
AUTO_HOST_CELLS = 2 * 10 ** 8
#: Alignments (pair, json) per formatting job, and the least number worth worker processes.
FORMAT_BATCH = 4096
WORKERS_FROM = 20000


# --------------------------------------------------------------------------------------
# input


def encode(batch: SeqBatch, scoring: Scoring) -> tuple[np.ndarray, np.ndarray]:
    """The records' letters as codes of ``scoring`` (int16, concatenated as ``batch.letters``)
    and, per record, the 0-based position of its first letter outside the alphabet (-1: none)."""
    table = scoring.table()
    codes = table.astype(np.int8)[batch.letters] if scoring.size < 127 else \
        table[batch.letters]
    first_bad = np.full(len(batch), -1, np.int64)
    if not len(codes) or codes.min() >= 0:
        return codes, first_bad
    bad = np.flatnonzero(codes < 0)
    if bad.size:
        rec = np.searchsorted(batch.offsets, bad, side="right") - 1
        recs, first = np.unique(rec, return_index=True)
        first_bad[recs] = bad[first] - batch.offsets[recs]
    return codes, first_bad


def letter_error(batch: SeqBatch, k: int, pos: int, scoring: Scoring) -> InputError:
    """The error :meth:`Scoring.encode` raises for record ``k``, located as before."""
    letter = chr(int(batch.letters[batch.offsets[k] + pos]))
    return InputError(f"letter {letter!r} at position {pos + 1} is not in the alphabet of "
                      f"{scoring.name} ({scoring.alphabet})", path=batch.source,
                      line=int(batch.lines[k]) or None, record=batch.ids[k])


@dataclass
class Job:
    """What to align: two record batches, encoded, and how to pair them."""

    queries: SeqBatch
    targets: SeqBatch
    scoring: Scoring
    local: bool
    zip: bool
    score_only: bool

    def __post_init__(self) -> None:
        with stage("encode"):
            self.qcodes, self.qbad = encode(self.queries, self.scoring)
            self.tcodes, self.tbad = encode(self.targets, self.scoring)
        self.qoff, self.toff = self.queries.offsets, self.targets.offsets
        self.qlen, self.tlen = np.diff(self.qoff), np.diff(self.toff)
        self._texts = None

    @property
    def mode(self) -> str:
        return "local" if self.local else "global"

    @property
    def n_pairs(self) -> int:
        if self.zip:
            return len(self.queries)
        return len(self.queries) * len(self.targets)

    def pairs(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Query and target indices of pairs ``start .. stop - 1`` (in output order)."""
        p = np.arange(start, stop, dtype=np.int64)
        if self.zip:
            return p, p
        nt = len(self.targets)
        return p // nt, p % nt

    def cells(self) -> int:
        if self.zip:
            return int(np.dot(self.qlen.astype(np.float64), self.tlen))
        return int(self.qlen.sum()) * int(self.tlen.sum())

    def check(self) -> None:
        """Raise the error the first failing pair (in order) would raise: its query's letter,
        its target's letter, or a score range its longest path could leave."""
        amax = self.scoring.max_abs()

        def too_long(total):
            return (total + 2) * amax >= LIMIT

        def range_error(k, l):
            from jaxrna.align.scoring import check_range

            try:
                check_range(self.scoring, int(self.qlen[k] + self.tlen[l]))
            except ValueError as exc:
                return InputError(str(exc), record=f"{self.queries.ids[k]} x {self.targets.ids[l]}")
            raise AssertionError("unreachable")

        qbad, tbad = self.qbad >= 0, self.tbad >= 0
        if self.zip:
            fail = qbad | tbad | too_long(self.qlen + self.tlen)
            if not fail.any():
                return
            k = int(np.argmax(fail))
            if qbad[k]:
                raise letter_error(self.queries, k, int(self.qbad[k]), self.scoring)
            if tbad[k]:
                raise letter_error(self.targets, k, int(self.tbad[k]), self.scoring)
            raise range_error(k, k)
        if not len(self.targets):
            return
        row_fail = qbad | tbad.any() | too_long(self.qlen + self.tlen.max())
        if not row_fail.any():
            return
        k = int(np.argmax(row_fail))
        if qbad[k]:
            raise letter_error(self.queries, k, int(self.qbad[k]), self.scoring)
        col = tbad | too_long(self.qlen[k] + self.tlen)
        l = int(np.argmax(col))
        if tbad[l]:
            raise letter_error(self.targets, l, int(self.tbad[l]), self.scoring)
        raise range_error(k, l)

    def code_texts(self) -> tuple[list[str], list[str]]:
        """Every record's codes as :func:`jaxrna.align.host.code_text` letters."""
        from jaxrna.align.host import code_text

        if self._texts is None:
            texts = []
            for codes, off in ((self.qcodes, self.qoff), (self.tcodes, self.toff)):
                text = code_text(codes)
                b = off.tolist()
                texts.append([text[b[k]:b[k + 1]] for k in range(len(b) - 1)])
            self._texts = tuple(texts)
        return self._texts


# --------------------------------------------------------------------------------------
# results


@dataclass
class Chunk:
    """Results of pairs ``start .. start + len(qi) - 1``: scores, 1-based ends, 0-based
    starts (-1: unknown), and (with alignments) their ops concatenated; ``keep`` is False for
    pairs refused (reported through ``on_error``)."""

    start: int
    qi: np.ndarray
    ti: np.ndarray
    score: np.ndarray
    ei: np.ndarray
    ej: np.ndarray
    si: np.ndarray
    sj: np.ndarray
    keep: np.ndarray
    ops: np.ndarray | None = None
    op_offsets: np.ndarray | None = None

    @classmethod
    def empty(cls, start: int, qi: np.ndarray, ti: np.ndarray) -> "Chunk":
        z = lambda: np.zeros(len(qi), np.int64)  # noqa: E731
        return cls(start, qi, ti, z(), z(), z(), z(), z(), np.ones(len(qi), bool))


def _ramp(counts: np.ndarray) -> np.ndarray:
    total = int(counts.sum())
    if not total:
        return np.zeros(0, np.int64)
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


def _gather(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``flat[starts[k] : starts[k] + lengths[k]]`` for every k, concatenated."""
    return flat[np.repeat(starts, lengths) + _ramp(lengths)]


class _Ragged:
    """Per-pair op arrays arriving in any order, assembled in pair order at the end."""

    def __init__(self, n: int) -> None:
        self.parts: list[np.ndarray] = []
        self.where = np.zeros(n, np.int64)
        self.lengths = np.zeros(n, np.int64)
        self.base = 0

    def put(self, positions: np.ndarray, ops: np.ndarray, offsets: np.ndarray) -> None:
        self.parts.append(ops)
        self.where[positions] = self.base + offsets[:-1]
        self.lengths[positions] = np.diff(offsets)
        self.base += len(ops)

    def assemble(self) -> tuple[np.ndarray, np.ndarray]:
        flat = np.concatenate(self.parts) if self.parts else np.zeros(0, np.uint8)
        offsets = np.zeros(len(self.lengths) + 1, np.int64)
        np.cumsum(self.lengths, out=offsets[1:])
        return _gather(flat, self.where, self.lengths).astype(np.uint8), offsets


def to_aligned(job: Job, c: Chunk) -> AlignedBatch:
    """The kept pairs of a chunk as an :class:`AlignedBatch` (ids, aligned stretches)."""
    keep = np.flatnonzero(c.keep)
    qi, ti = c.qi[keep], c.ti[keep]
    qids, tids = job.queries.ids, job.targets.ids
    b = AlignedBatch(job.scoring, job.mode, [qids[k] for k in qi.tolist()],
                     [tids[k] for k in ti.tolist()], c.score[keep], c.si[keep], c.ei[keep],
                     c.sj[keep], c.ej[keep])
    if c.ops is not None:
        lengths = np.diff(c.op_offsets)[keep]
        b.ops = _gather(c.ops, c.op_offsets[:-1][keep], lengths)
        b.op_offsets = np.zeros(len(keep) + 1, np.int64)
        np.cumsum(lengths, out=b.op_offsets[1:])
        for side, letters, off, s, e in (("query", job.queries.letters, job.qoff, b.query_start,
                                          b.query_end),
                                         ("target", job.targets.letters, job.toff,
                                          b.target_start, b.target_end)):
            idx = qi if side == "query" else ti
            seglen = np.maximum(e - s, 0)
            setattr(b, f"{side}_seg", _gather(letters, off[idx] + s, seglen))
            so = np.zeros(len(keep) + 1, np.int64)
            np.cumsum(seglen, out=so[1:])
            setattr(b, f"{side}_seg_offsets", so)
    return b


def _format_job(args) -> str:
    batch, fmt, first = args
    with stage("format"):
        return format_batch(batch, fmt, first)


# --------------------------------------------------------------------------------------
# old path for the pairs batches do not take


def _old_path(job: Job, positions: np.ndarray, qi: np.ndarray, ti: np.ndarray, *,
              backend: str, max_bytes, on_error, c: Chunk, ragged: _Ragged | None,
              use_pallas=None) -> None:
    from jaxrna.align.api import align_records

    pairs = [(job.queries.record(a), job.targets.record(b)) for a, b in zip(qi.tolist(),
                                                                            ti.tolist())]
    index = {id(p): k for k, p in enumerate(pairs)}
    refused = []

    def failed(pair, exc):
        refused.append(index[id(pair)])
        on_error(pair, exc)

    results = align_records(iter(pairs), job.scoring, job.mode, job.score_only,
                            backend=backend, max_bytes=max_bytes, on_error=failed,
                            use_pallas=use_pallas)
    done = [k for k in range(len(pairs)) if k not in set(refused)]
    table = np.zeros(256, np.uint8)
    table[[ord("M"), ord("I"), ord("D")]] = [0, 1, 2]
    ops_parts, lengths = [], []
    for k, r in zip(done, results):
        p = positions[k]
        c.score[p] = r.score_units
        c.ei[p], c.ej[p] = r.query_end, r.target_end
        c.si[p] = -1 if r.query_start is None else r.query_start
        c.sj[p] = -1 if r.target_start is None else r.target_start
        if ragged is not None:
            ops_parts.append(table[np.frombuffer(r.ops.encode(), np.uint8)])
            lengths.append(len(r.ops))
    c.keep[positions[refused]] = False
    if ragged is not None:
        offsets = np.zeros(len(done) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.concatenate(ops_parts) if ops_parts else np.zeros(0, np.uint8)
        ragged.put(positions[np.array(done, np.int64)], flat, offsets)
        if refused:
            ragged.put(positions[np.array(refused, np.int64)], np.zeros(0, np.uint8),
                       np.zeros(len(refused) + 1, np.int64))


# --------------------------------------------------------------------------------------
# engines


_FORKED = None          # the HostRunner whose parts forked processes compute


def _can_fork() -> bool:
    """Worker processes may be forked: POSIX, and no JAX runtime (threads) in this process."""
    import sys

    return hasattr(os, "fork") and "jax" not in sys.modules


def _forked_setup() -> None:
    """A forked worker: SIGTERM ends it quietly (it inherited the run's handler, which would
    print a traceback when the pool is closed) and Ctrl-C is the parent's to handle."""
    import signal

    from jaxrna.io.cleanup import ignore_interrupts

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ignore_interrupts()


def _forked_part(args):
    qi, ti = args
    return _FORKED._part(qi, ti)


class HostRunner:
    """Chunks through parasail (:class:`jaxrna.align.host.HostEngine`), split over forked
    processes (one per core; the traceback is numpy work, which threads would serialise), or
    threads where forking is not safe (JAX already running)."""

    def __init__(self, job: Job, threads: int, max_bytes=None, on_error=None) -> None:
        from jaxrna.align.host import GROUP_CELLS, HostEngine

        self.job = job
        self.engine = HostEngine(job.scoring, job.local)
        self.threads = max(1, threads)
        self.pool = concurrent.futures.ThreadPoolExecutor(self.threads) if self.threads > 1 \
            else None
        self.max_bytes, self.on_error = max_bytes, on_error
        self.group_cells = GROUP_CELLS
        self._codes = None

    def _part(self, qi: np.ndarray, ti: np.ndarray):
        """Results of pairs ``(qi, ti)``. A pair whose query is longer than its target is
        computed the other way round (the target on the table's rows, as the batch paths put
        the shorter sequence there, with their tie rules), and turned back."""
        job = self.job
        qtext, ttext = job.code_texts()
        sw = job.qlen[qi] > job.tlen[ti]
        rows = [ttext[t] if s else qtext[q] for q, t, s in zip(qi.tolist(), ti.tolist(),
                                                                 sw.tolist())]
        cols = [qtext[q] if s else ttext[t] for q, t, s in zip(qi.tolist(), ti.tolist(),
                                                                 sw.tolist())]
        if job.score_only:
            score, ei, ej = self.engine.scores(rows, cols, sw)
            return score, np.where(sw, ej, ei), np.where(sw, ei, ej)
        nq = len(job.qcodes)
        qs, ts = job.qoff[qi], nq + job.toff[ti]
        score, ei, ej, si, sj, ops, offsets = self.engine.align(
            rows, cols, sw, self._codes, np.where(sw, ts, qs), self._codes,
            np.where(sw, qs, ts))
        flip = np.repeat(sw, np.diff(offsets))
        ops = np.where(flip & (ops != 0), 3 - ops, ops).astype(np.uint8)
        return (score, np.where(sw, ej, ei), np.where(sw, ei, ej), np.where(sw, sj, si),
                np.where(sw, si, sj), ops, offsets)

    def run(self, start: int, qi: np.ndarray, ti: np.ndarray) -> Chunk:
        job = self.job
        c = Chunk.empty(start, qi, ti)
        positions = np.arange(len(qi))
        ragged = None if job.score_only else _Ragged(len(qi))
        big = np.zeros(len(qi), bool)
        if not job.score_only:               # tables too large to hold: the checkpointed path
            big = (job.qlen[qi] + 1) * (job.tlen[ti] + 1) > self.group_cells
        job.code_texts()                     # once, before the threads or processes
        if self._codes is None and not job.score_only:
            self._codes = np.concatenate([job.qcodes, job.tcodes])
        fast = positions[~big]
        per = max(1, len(fast) // 256)       # parts of at least 256 pairs (a walk's group)
        forked = self.threads > 1 and len(fast) >= 512 and _can_fork()
        count = min(self.threads, per)
        parts = [p for p in np.array_split(fast, count) if len(p)] if len(fast) else []
        if forked and len(parts) > 1:        # no GIL between the walks: processes
            global _FORKED
            _FORKED = self
            import multiprocessing

            with stage("device"), multiprocessing.get_context("fork").Pool(
                    min(self.threads, len(parts)), initializer=_forked_setup) as procs:
                outs = procs.map(_forked_part, [(qi[p], ti[p]) for p in parts], chunksize=1)
            _FORKED = None
        elif self.pool is not None and len(parts) > 1:
            outs = list(self.pool.map(lambda p: self._part(qi[p], ti[p]), parts))
        else:
            outs = [self._part(qi[p], ti[p]) for p in parts]
        for p, out in zip(parts, outs):
            if job.score_only:
                c.score[p], c.ei[p], c.ej[p] = out
                if job.local:
                    c.si[p] = c.sj[p] = np.where(out[0] > 0, -1, 0)
            else:
                score, ei, ej, si, sj, ops, offsets = out
                c.score[p], c.ei[p], c.ej[p], c.si[p], c.sj[p] = score, ei, ej, si, sj
                ragged.put(p, ops, offsets)
        if big.any():
            _old_path(job, positions[big], qi[big], ti[big], backend="cpu",
                      max_bytes=self.max_bytes, on_error=self.on_error, c=c, ragged=ragged)
        if ragged is not None:
            c.ops, c.op_offsets = ragged.assemble()
        return c


@dataclass
class _Batch:
    chunk: int                 # index of its chunk
    positions: np.ndarray      # pairs of the chunk it holds
    h: int
    w: int
    rows: int                  # padded batch size
    swapped: np.ndarray        # per pair: the target is on the lanes / rows
    transposed: bool           # the scores of swapped pairs (an asymmetric matrix)
    kind: str                  # "align", "lanes", "packed", "pallas", "sweep"


def kernel_scoring(job: Job) -> Scoring:
    """The scheme the kernels run: ``job.scoring``, or, when the letters the job uses score as
    a match/mismatch scheme under its matrix (NUC.4.4 on A, C, G, T/U: 5 and -4), that
    match/mismatch scheme on the same codes (the same scores for every pair of the job; the
    kernels compare codes instead of looking the matrix up, and smaller values may fit int16
    lanes)."""
    sc = job.scoring
    if sc.equality or sc.minimise:
        return sc
    used = np.flatnonzero(_present(job.qcodes, sc.size) | _present(job.tcodes, sc.size))
    if used.size < 2:
        return sc
    sub = sc.matrix[np.ix_(used, used)]
    diag = np.diag(sub)
    off = sub[~np.eye(len(used), dtype=bool)]
    if not ((diag == diag[0]).all() and (off == off[0]).all() and diag[0] >= off[0]):
        return sc
    mat = np.full_like(sc.matrix, off[0])
    np.fill_diagonal(mat, diag[0])
    from dataclasses import replace

    return replace(sc, matrix=mat, equality=True, name=f"{sc.name} (as match/mismatch)")


def _present(codes: np.ndarray, size: int) -> np.ndarray:
    """Which of the codes ``0 .. size - 1`` occur: the codes of a sample, checked to cover
    every code in one pass (else counted in blocks)."""
    seen = np.zeros(size, bool)
    if not len(codes):
        return seen
    sample = codes[::max(1, len(codes) // (1 << 16))]
    seen[np.unique(sample[sample >= 0])] = True
    lut = np.zeros(256, bool)
    lut[np.flatnonzero(seen)] = True
    if all(lut[codes[a:a + (1 << 25)].view(np.uint8) if codes.dtype == np.int8
               else codes[a:a + (1 << 25)]].all() for a in range(0, len(codes), 1 << 25)):
        return seen
    for a in range(0, len(codes), 1 << 24):
        block = codes[a:a + (1 << 24)]
        seen |= np.bincount(block[block >= 0], minlength=size)[:size] > 0
    return seen


def _fill(arr: np.ndarray, lens: np.ndarray, rows: np.ndarray, side: tuple,
          records: np.ndarray) -> None:
    """Rows ``rows`` of ``arr`` get the codes of ``records`` (of ``side``: codes, offsets,
    lengths), ``lens`` their lengths."""
    if not rows.size:
        return
    codes, off, ln = side
    ll = ln[records]
    lens[rows] = ll
    first, length = int(off[records[0]]), int(ll[0])
    if (ll == length).all() and (np.diff(records) == 1).all() and \
            (np.diff(rows) == 1).all() and length <= arr.shape[1]:
        # consecutive records of one length (zip pairs of fixed-length reads): one copy
        arr[rows[0]:rows[0] + len(rows), :length] = \
            codes[first:first + len(rows) * length].reshape(len(rows), length)
        return
    if ll.mean() > 64:                       # long rows: a slice copy each beats index arrays
        for r, a, n in zip(rows.tolist(), off[records].tolist(), ll.tolist()):
            arr[r, :n] = codes[a:a + n]
        return
    col = _ramp(ll)
    arr[np.repeat(rows, ll), col] = codes[np.repeat(off[records], ll) + col]


class DeviceRunner:
    """Chunks through JAX programs on ``backend`` (see the module docstring)."""

    def __init__(self, job: Job, backend: str, max_bytes=None, on_error=None,
                 interpret: bool = False, kernel: dict | None = None) -> None:
        import jax

        from jaxrna.align.api import memory_limit as _memory_limit

        self.jax = jax
        self.job = job
        self.backend = backend
        self.gpu = backend == "gpu"
        self.interpret = interpret
        self.kernel = dict(kernel or {})
        self.pallas = self.gpu or interpret
        from jaxrna.runtime import devices

        self.devices = devices(backend)      # every device of the backend, or --devices N
        self.device = self.devices[0]
        self.max_bytes, self.on_error = max_bytes, on_error
        sc = self.kscoring = kernel_scoring(job)
        self.symmetric = bool(np.array_equal(sc.matrix, sc.matrix.T))
        self._params: dict = {}              # per device: (params, transposed params)
        self.params, self.params_t = self.params_on(self.device)
        self.limit = _memory_limit(backend, max_bytes)
        self._rows: dict[tuple, int] = {}
        self._plan_shapes()

    # -- planning -----------------------------------------------------------------------------
    def _plan_shapes(self) -> None:
        """Job-wide shape rules (so that every chunk uses the same few programs)."""
        job = self.job
        self.side = None
        if self.pallas and not job.score_only:
            longest = int(max(job.qlen.max(initial=1), job.tlen.max(initial=1)))
            side = self._square(longest)
            real = max(job.cells(), 1)
            fits = side * side * self.kernel.get("lanes", 128) <= GPU_DIRS_BYTES
            if fits and job.n_pairs * side * side <= max(GPU_WASTE * real, GPU_MERGE_CELLS):
                self.side = side             # one shape for the whole job

    def params_on(self, device) -> tuple:
        """The scheme's scalars on ``device``, and those of the transposed scheme."""
        if device not in self._params:
            from jaxrna.align.recurrence import params_of

            sc = self.kscoring
            with self.jax.default_device(device):
                params = params_of(sc)
                self._params[device] = (params, params if self.symmetric
                                        else params_of(sc.transposed()))
        return self._params[device]

    def _square(self, n: int) -> int:
        lanes_rows = self.kernel.get("rows", 8)
        s = max(self.kernel.get("min_side", 128), 1 << max(0, int(n) - 1).bit_length())
        return -(-s // lanes_rows) * lanes_rows

    def _bucket(self, n: np.ndarray) -> np.ndarray:
        """Padded lengths: on GPU the ladder of :func:`jaxrna.batching.bucket_length`; on CPU
        multiples of 16 up to 128 (short pairs waste little there), then the ladder (few
        shapes: each costs a compilation)."""
        n = np.maximum(n, 1)
        values = np.unique(n)
        padded = np.array([bucket_length(int(v)) for v in values], np.int64)
        out = padded[np.searchsorted(values, n)]
        if self.gpu or self.pallas:
            return out
        return np.where(n <= 128, -(-n // 16) * 16, out)

    cpu_class = staticmethod(classes.cpu_class)
    cpu_rows = staticmethod(classes.cpu_rows)

    def _batch_rows(self, key: tuple, count: int, cap: int, multiple: int) -> int:
        """A fixed batch size per shape for the whole job: the first chunk's group size
        (rounded up) capped by ``cap``."""
        if key not in self._rows:
            if self.pallas:                  # as equal batches as the multiple allows
                parts = -(-count // cap)
                rows = max(multiple, -(-(-(-count // parts)) // multiple) * multiple)
                rows = min(rows, cap)
            else:
                rows = min(cap, 1 << max(0, count - 1).bit_length())
            self._rows[key] = max(1, rows)
        return self._rows[key]

    def plan(self, ci: int, qi: np.ndarray, ti: np.ndarray, c: Chunk,
             ragged: _Ragged | None) -> list[_Batch]:
        job = self.job
        m, n = job.qlen[qi], job.tlen[ti]
        positions = np.arange(len(qi))
        batches: list[_Batch] = []
        old = np.zeros(len(qi), bool)
        from jaxrna.align.api import TABLE_BYTES, TILED_MIN_LENGTH

        if not job.score_only and self.pallas:
            side = self.side
            sides = np.full(len(qi), side or 0) if side else \
                np.array([self._square(v) for v in np.maximum(m, n).tolist()], np.int64)
            lanes = self.kernel.get("lanes", 128)
            old = sides.astype(np.int64) ** 2 * lanes > GPU_DIRS_BYTES
            for s in sorted(set(sides[~old].tolist())):
                members = positions[(sides == s) & ~old]
                cap = max(lanes, min(GPU_MAX_PAIRS, GPU_DIRS_BYTES // (s * s)) // lanes * lanes)
                cap = min(cap, max(lanes, (self.limit // 4) // (s * s) // lanes * lanes))
                rows = self._batch_rows(("lanes", s), len(members), cap, lanes)
                for a in range(0, len(members), rows):
                    part = members[a:a + rows]
                    for tt in (False, True) if not self.symmetric else (None,):
                        sub = part if tt is None else part[(m[part] > n[part]) == tt]
                        if len(sub):
                            batches.append(_Batch(ci, sub, s, s, rows, m[sub] > n[sub],
                                                  bool(tt), "lanes"))
        elif not self.pallas:
            # CPU: a few length classes with fixed batch rows; the lengths are runtime values
            swapped = m > n
            short, long_ = np.minimum(m, n), np.maximum(m, n)
            h, w = self.cpu_class(short, long_, job.score_only)
            if not job.score_only:
                old = (h + w) * h > TABLE_BYTES
            trans = swapped & (not self.symmetric)
            kind = "scores" if job.score_only else "align"
            keys = sorted(set(zip(h[~old].tolist(), w[~old].tolist(), trans[~old].tolist())))
            for hh, ww, tt in keys:
                members = positions[(h == hh) & (w == ww) & (trans == tt) & ~old]
                members = members[np.argsort(long_[members] + short[members], kind="stable")]
                rows = self.cpu_rows(hh, ww, job.score_only)
                for a in range(0, len(members), rows):
                    part = members[a:a + rows]
                    batches.append(_Batch(ci, part, hh, ww, rows, swapped[part], tt, kind))
        else:
            swapped = m > n
            short, long_ = np.minimum(m, n), np.maximum(m, n)
            h, w = self._bucket(short), self._bucket(long_)
            if not job.score_only:
                old = (h + w) * h > TABLE_BYTES
            elif self.gpu:
                old = short >= TILED_MIN_LENGTH
            if self.gpu and job.score_only:      # one shape when padding costs little
                real = float(np.dot(m.astype(np.float64), n)) if len(m) else 0.0
                hm, wm = int(h[~old].max(initial=0)), int(w[~old].max(initial=0))
                if (~old).sum() * hm * wm <= max(GPU_WASTE * real, GPU_MERGE_CELLS):
                    h = np.where(old, h, hm)
                    w = np.where(old, w, wm)
            trans = swapped & (not self.symmetric)
            keys = sorted(set(zip(h[~old].tolist(), w[~old].tolist(), trans[~old].tolist())))
            for hh, ww, tt in keys:
                sel = (h == hh) & (w == ww) & (trans == tt) & ~old
                members = positions[sel]
                if job.score_only:
                    from jaxrna.align.api import LANE_BUDGET

                    cap = max(1, LANE_BUDGET.get(self.backend, 1 << 21) // hh)
                    if self.pallas:
                        cap = max(256, cap // 256 * 256)
                    kind = "scores"
                    mult = 256 if self.pallas else 1
                else:
                    from jaxrna.align.api import DIRS_BUDGET

                    cap = max(1, DIRS_BUDGET // ((hh + ww) * hh))
                    cap = 1 << (cap.bit_length() - 1)
                    kind = "align"
                    mult = 1
                rows = self._batch_rows((kind, hh, ww, tt), len(members), cap, mult)
                for a in range(0, len(members), rows):
                    part = members[a:a + rows]
                    batches.append(_Batch(ci, part, hh, ww, rows, swapped[part], tt, kind))
        if old.any():
            _old_path(job, positions[old], qi[old], ti[old], backend=self.backend,
                      max_bytes=self.max_bytes, on_error=self.on_error, c=c, ragged=ragged,
                      use_pallas=self.pallas or None)
        return batches

    # -- running ------------------------------------------------------------------------------
    def retry_in_pieces(self, b: _Batch, qi_all: np.ndarray, ti_all: np.ndarray, c: Chunk,
                        ragged: _Ragged | None, exc: BaseException) -> None:
        """A batch that ran out of device memory, aligned again through the record path,
        which splits it in halves down to single pairs (:func:`jaxrna.oom.split_on_oom`); a
        pair that does not fit alone is refused by name (``on_error``)."""
        log.warning("align: a batch of %d pairs ran out of device memory (%s); retrying it in "
                    "smaller pieces", len(b.positions), str(exc).splitlines()[0][:120])
        pos = b.positions
        _old_path(self.job, pos, qi_all[pos], ti_all[pos], backend=self.backend,
                  max_bytes=self.max_bytes, on_error=self.on_error, c=c, ragged=ragged,
                  use_pallas=self.pallas or None)

    def launch(self, b: _Batch, qi_all: np.ndarray, ti_all: np.ndarray, device=None):
        """Dispatch batch ``b``'s program on ``device`` (default: the first) without waiting."""
        job = self.job
        device = device or self.device
        from jaxrna.kernels import wavefront

        with stage("encode"):
            qi, ti = qi_all[b.positions], ti_all[b.positions]
            sw = b.swapped
            dtype = np.int8 if job.scoring.size <= 127 else np.int32
            q = np.zeros((b.rows, b.h), dtype)
            t = np.zeros((b.rows, b.w), dtype)
            fill = 0 if b.kind == "lanes" else 1      # padding rows: empty, or 1 x 1
            m = np.full(b.rows, fill, np.int32)
            n = np.full(b.rows, fill, np.int32)
            keep, turn = np.flatnonzero(~sw), np.flatnonzero(sw)
            qside = (job.qcodes, job.qoff, job.qlen)
            tside = (job.tcodes, job.toff, job.tlen)
            _fill(q, m, keep, qside, qi[keep])        # rows: the query, or the target if swapped
            _fill(q, m, turn, tside, ti[turn])
            _fill(t, n, keep, tside, ti[keep])
            _fill(t, n, turn, qside, qi[turn])
        params, params_t = self.params_on(device)
        params = params_t if b.transposed else params
        sc = self.kscoring
        eq = sc.equality
        ends = {"ends": True} if sc.separate_end_gaps else {}   # default: the same programs
        from jaxrna.kernels.fallback import compile_or_fallback as pallas_or

        with self.jax.default_device(device):    # a Pallas kernel that does not build: its
            aligned = partial(wavefront.batch_align.bind, q, t, m, n, params,  # pure-JAX path
                              local=job.local, equality=eq, **ends)
            swept = partial(wavefront.batch_sweep.bind, q, t, m, n, params, local=job.local,
                            equality=eq, small=self._small(b, m, n), **ends)
            if b.kind == "lanes":
                opts = {key: v for key, v in self.kernel.items() if key in ("rows", "lanes",
                                                                             "num_warps")}
                return pallas_or("align.lanes_align", lambda: wavefront.lanes_align.bind(
                    q, t, m, n, params, local=job.local, equality=eq, interpret=self.interpret,
                    **opts, **ends), aligned)()
            if b.kind == "align":               # int32 (int16 gains nothing here)
                return aligned()()
            if self.pallas:
                from jaxrna.kernels.wavefront_packed import packed_ok, packed_scores

                opts = {key: v for key, v in self.kernel.items() if key in ("rows", "lanes",
                                                                             "num_warps")}
                if packed_ok(sc, b.h + 64, b.w):
                    return pallas_or("align.packed_scores", lambda: packed_scores.bind(
                        q, t, m, n, params, local=job.local, interpret=self.interpret, **opts,
                        **ends), swept)()[:3]
                return pallas_or("align.pallas_scores", lambda: wavefront.pallas_scores.bind(
                    q, t, m, n, params, local=job.local, equality=eq, interpret=self.interpret,
                    **opts, **ends), swept)()[:3]
            return swept()()[:3]

    def _small(self, b: _Batch, m: np.ndarray, n: np.ndarray) -> bool:
        """Whether the batch sweeps in int16: every value of its lanes over the columns it
        computes (up to its longest row) fits (:func:`~jaxrna.align.recurrence.fits_int16`)."""
        from jaxrna.align.recurrence import fits_int16

        return fits_int16(self.kscoring, b.h, int(n.max(initial=1)))

    def collect(self, b: _Batch, pending, c: Chunk, ragged: _Ragged | None) -> None:
        job = self.job
        k = len(b.positions)
        with stage("device"):
            out = [np.asarray(a) for a in pending]
        p, sw = b.positions, b.swapped
        score = out[0][:k].astype(np.int64)
        ei, ej = out[1][:k].astype(np.int64), out[2][:k].astype(np.int64)
        if job.score_only:
            if job.local:
                empty = score <= 0
                ei, ej = np.where(empty, 0, ei), np.where(empty, 0, ej)
                si = sj = np.where(empty, 0, -1)
            else:
                si = sj = np.zeros(k, np.int64)
            c.score[p] = score
            c.ei[p], c.ej[p] = np.where(sw, ej, ei), np.where(sw, ei, ej)
            c.si[p], c.sj[p] = si, sj
            return
        with stage("traceback"):
            si, sj = out[3][:k].astype(np.int64), out[4][:k].astype(np.int64)
            ops, length = out[5], out[6][:k].astype(np.int64)
            flat = ops.reshape(-1)[np.repeat(np.arange(k) * ops.shape[1], length)
                                   + _ramp(length)]
            if sw.any():                     # the target was on the rows: I and D swap
                swap_col = np.repeat(sw, length)
                flat = np.where(swap_col & (flat != 0), 3 - flat, flat).astype(np.uint8)
            offsets = np.zeros(k + 1, np.int64)
            np.cumsum(length, out=offsets[1:])
            c.score[p] = score
            c.ei[p], c.ej[p] = np.where(sw, ej, ei), np.where(sw, ei, ej)
            c.si[p], c.sj[p] = np.where(sw, sj, si), np.where(sw, si, sj)
            ragged.put(p, flat, offsets)


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


def choose_backend(job: Job, choice: str, allow_host: bool = True,
                   started: Prestart | None = None) -> tuple[str, bool]:
    """``(backend, host)``: where to compute, and whether through parasail
    (:class:`HostRunner`). ``auto`` keeps small jobs on the CPU when parasail can take them
    (no GPU start-up), and every job where JAX has no GPU plugin; ``cpu`` uses parasail
    whenever it can."""
    from jaxrna import runtime
    from jaxrna.align.host import supports

    host_ok = allow_host and supports(job.scoring, job.local)
    if choice == "cpu" and host_ok:
        runtime.announce_host("--backend cpu", "parasail")
        return "cpu", True
    if choice == "auto" and host_ok and (job.cells() <= AUTO_HOST_CELLS
                                         or not runtime.gpu_possible()):
        runtime.announce_host("--backend auto" + (", a small job" if runtime.gpu_possible()
                                                  else ""), "parasail")
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
        runner = HostRunner(job, pipeline.cores(), max_bytes, on_error)
    else:
        with stage("setup"):
            runner = DeviceRunner(job, backend, max_bytes, on_error, interpret=interpret,
                                  kernel=kernel)
    total = job.n_pairs
    starts = list(range(0, total, chunk))
    written = 0
    pending_text: list = []

    def chunks() -> Iterator[Chunk]:
        if host:
            for s in starts:
                qi, ti = job.pairs(s, min(total, s + chunk))
                yield runner.run(s, qi, ti)
            return
        state: dict[int, tuple] = {}

        def batches():
            for ci, s in enumerate(starts):
                qi, ti = job.pairs(s, min(total, s + chunk))
                c = Chunk.empty(s, qi, ti)
                ragged = None if job.score_only else _Ragged(len(qi))
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

    with pipeline.OrderedWriter(out) as writer:
        if fmt != "pair":                   # pair: the header comes with the first alignment
            writer.write(file_parts(fmt, job.mode, job.scoring, total)[0])
        first = True
        for c in chunks():
            with stage("format"):
                batch = to_aligned(job, c)
            n = len(batch)
            if n and first and fmt == "pair":
                writer.write(file_parts(fmt, job.mode, job.scoring, n)[0])
            if fmt == "tsv" and batch.ops is None or pool is None:
                with stage("format"):
                    text = format_batch(batch, fmt, first and n > 0)
                writer.write(text)
            else:
                for a in range(0, n, FORMAT_BATCH):
                    part = _slice(batch, a, min(n, a + FORMAT_BATCH))
                    pending_text.append(pool.submit(_format_job, (part, fmt, first and a == 0)))
                while pending_text and pending_text[0].done():
                    writer.write(pending_text.pop(0).result())
            if n:
                first = False
            written += n
            if on_done:
                on_done(len(c.qi))
        for fut in pending_text:
            with stage("format"):            # waiting for the formatting processes
                text = fut.result()
            writer.write(text)
        _, tail = file_parts(fmt, job.mode, job.scoring, written)
        writer.write(tail)
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

