"""The host runner of a bulk alignment run: each chunk's pairs through parasail's SIMD kernels
for the values and our traceback rules (:class:`jaxrna.align.host.HostEngine`), split over
forked processes (one per core, :func:`jaxrna.pipeline.forked_pool`; the traceback is numpy
work, which threads would serialise) or threads where forking is not safe (JAX already running
in the process). It needs no JAX;
pairs whose tables are too large for the walk go through :func:`jaxrna.align.chunks.record_path`.
A run's chunks come back in parts (:meth:`HostRunner.parts`), each formatted by the process
that computed it, so that no process waits for another to format: on 16 cores the one process
writing would otherwise format every alignment. A forked process writes its part's text to a
file of a private directory (:mod:`jaxrna.io.spool`) rather than sending it back through its
pipe, and sends back nothing else: the writing process copies the file into the output with
``sendfile`` and never unpickles, fills or encodes the part (a 2-core VM, 48,000 local pairs
with alignments, 94 MB of text: that process's CPU time 0.54 -> 0.43 s).
"""

from __future__ import annotations

import concurrent.futures
import shutil
import tempfile
from collections.abc import Callable, Iterator

import numpy as np

from jaxrna import pipeline
from jaxrna.align import text_native
from jaxrna.align.chunks import Chunk, Ragged, record_path
from jaxrna.align.jobs import Job
from jaxrna.io import cleanup
from jaxrna.io.spool import spool
from jaxrna.stages import stage


_FORKED = None          # the HostRunner whose parts forked processes compute

#: Parts a core of a chunk :meth:`HostRunner.parts` cuts, so that formatting one part overlaps
#: computing the next (a 2-core VM, 3,600 local pairs: 1, 2, 4, 8 a core 0.45-0.55, 0.45-0.47,
#: 0.43-0.48, 0.45-0.47 s; an H100 host's 16 cores, 90,000 pairs: 1, 4, 16 a core 4.3-4.4,
#: 3.8, 3.9 s with small and large table groups; the benchmarks of this stop ran with 8).
PARTS_PER_CORE = 8


def _forked_part(args):
    out, text = _FORKED._part_text(*args)
    if text is not None and _FORKED.spool_dir is not None:
        try:
            text = spool(_FORKED.spool_dir, text, *_FORKED.encoding)
        except OSError:                      # no room for it there: through the pipe
            pass
    return out, text


class HostRunner:
    """Chunks through parasail (:class:`jaxrna.align.host.HostEngine`), split over forked
    processes (one per core; the traceback is numpy work, which threads would serialise), or
    threads where forking is not safe (JAX already running)."""

    def __init__(self, job: Job, threads: int, max_bytes=None, on_error=None,
                 text: Callable[[Chunk, bool], str] | None = None,
                 encoding: tuple[str, str] = ("utf-8", "strict")) -> None:
        from jaxrna.align.host import GROUP_CELLS, HostEngine
        from jaxrna.align.parasail_memory import keep_freed_memory

        self.job = job
        self.engine = HostEngine(job.scoring, job.local)
        keep_freed_memory()                  # before any process is forked: they inherit it
        self.threads = max(1, threads)
        self.pool = concurrent.futures.ThreadPoolExecutor(self.threads) if self.threads > 1 \
            else None
        self.max_bytes, self.on_error = max_bytes, on_error
        self.text = text                     # formats a part where it was computed
        self.encoding = encoding             # the output's (encoding, errors): spooled text's
        self.spool_dir: str | None = None    # forked processes' text files (see _processes)
        self.group_cells = GROUP_CELLS
        self._codes = None
        self._procs = None

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

    def _part_text(self, qi: np.ndarray, ti: np.ndarray, first: bool | None):
        """:meth:`_part`'s results and None, or (``first`` not None, a ``text`` given) None
        and their text (``text(chunk, first)``), formatted in the process or thread that
        computed them (the text is all the writer needs of them)."""
        out = self._part(qi, ti)
        if first is None or self.text is None:
            return out, None
        c, ragged = self._empty(0, qi, ti)
        self._fill(c, ragged, np.arange(len(qi)), out)
        return None, self.text(self._finish(c, ragged, np.zeros(0, np.int64)), first)

    def _processes(self):
        """The forked processes of this run's chunks, started at the first chunk that needs
        them (the job is complete by then: every later chunk is indices into it) and kept
        until :meth:`close` (a pool per chunk forked the whole process again each time)."""
        if self._procs is None:
            global _FORKED

            if self.text is not None:
                self.spool_dir = cleanup.register(
                    tempfile.mkdtemp(prefix="jaxrna-align-"), directory=True)
                text_native.library()        # built or loaded once, before the processes
            _FORKED = self
            try:
                self._procs = pipeline.forked_pool(self.threads)
            finally:
                _FORKED = None
        return self._procs

    def close(self) -> None:
        """Stop the forked processes, if any, and remove their text files' directory."""
        procs, self._procs = self._procs, None
        if procs is not None:
            procs.terminate()
            procs.join()
        spool_dir, self.spool_dir = self.spool_dir, None
        if spool_dir is not None:
            shutil.rmtree(spool_dir, ignore_errors=True)
            cleanup.unregister(spool_dir)
        if self.pool is not None:
            self.pool.shutdown(wait=False)

    def run(self, start: int, qi: np.ndarray, ti: np.ndarray) -> Chunk:
        """The results of pairs ``start ..`` (``(qi, ti)``) as one chunk, its pairs split
        over the processes or threads."""
        fast, big = self._fast(qi, ti)
        count = min(self.threads, max(1, len(fast) // 256))  # parts of >= 256 pairs (a walk's group)
        groups = [p for p in np.array_split(fast, count) if len(p)] if len(fast) else []
        c, ragged = self._empty(start, qi, ti)
        for p, (out, _) in zip(groups, self._outputs(qi, ti, groups, [None] * len(groups))):
            self._fill(c, ragged, p, out)
        return self._finish(c, ragged, big)

    def parts(self, start: int, qi: np.ndarray, ti: np.ndarray) -> Iterator[Chunk]:
        """The results of pairs ``start ..`` as consecutive chunks in order, each yielded as
        soon as its pairs are done, so that the caller formats one while the processes compute
        the next (:data:`PARTS_PER_CORE` a core, of at least 256 pairs: a walk's group).
        Together they hold what :meth:`run` gives. With a ``text`` function, a part without
        pairs for the checkpointed path comes with its text (``chunk.text``), formatted where
        it was computed as the file's first part or not (``chunk.text_first``: whether it
        starts the file). :meth:`submit` and :meth:`collect` are its two halves."""
        return self.collect(self.submit(start, qi, ti))

    def submit(self, start: int, qi: np.ndarray, ti: np.ndarray) -> tuple:
        """Hand pairs ``start ..`` to the processes or threads now; :meth:`collect` yields
        their parts. Submitting the next pairs before collecting these keeps every process
        busy across the boundary (collected one after the other, the processes waited at the
        end of each 16,384 pairs for its last part)."""
        fast, big = self._fast(qi, ti)
        count = max(1, min(self.threads * PARTS_PER_CORE, len(qi) // 256))
        edges = np.linspace(0, len(qi), count + 1).astype(np.int64).tolist()
        ranges = [(a, z) for a, z in zip(edges[:-1], edges[1:]) if z > a]
        groups = [fast[(fast >= a) & (fast < z)] for a, z in ranges]
        firsts = [start + a == 0 if len(p) == z - a else None
                  for (a, z), p in zip(ranges, groups)]
        outs = self._outputs(qi, ti, groups, firsts)
        return start, qi, ti, big, ranges, groups, firsts, outs

    def collect(self, submitted: tuple) -> Iterator[Chunk]:
        """The parts of :meth:`submit`'s pairs, in order, as they are done."""
        start, qi, ti, big, ranges, groups, firsts, outs = submitted
        for (a, z), p, first in zip(ranges, groups, firsts):
            c, ragged = self._empty(start + a, qi[a:z], ti[a:z])
            if len(p):
                out, c.text = next(outs)
                c.text_first = bool(first)
                if out is not None:
                    self._fill(c, ragged, p - a, out)
            yield self._finish(c, ragged, big[(big >= a) & (big < z)] - a)

    def _fast(self, qi: np.ndarray, ti: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of the pairs the fast path takes, and of those whose tables are too large
        to hold (the checkpointed path: :func:`~jaxrna.align.chunks.record_path`)."""
        job = self.job
        big = np.zeros(len(qi), bool)
        if not job.score_only:
            big = (job.qlen[qi] + 1) * (job.tlen[ti] + 1) > self.group_cells
        job.code_texts()                     # once, before the threads or processes
        if self._codes is None and not job.score_only:
            self._codes = np.concatenate([job.qcodes, job.tcodes])
        return np.flatnonzero(~big), np.flatnonzero(big)

    def _outputs(self, qi: np.ndarray, ti: np.ndarray, groups: list, firsts: list) -> Iterator:
        """:meth:`_part_text` of each non-empty group of positions, in order, computed over
        the processes (forked where that is safe: no GIL between the walks) or the threads."""
        args = [(qi[p], ti[p], f) for p, f in zip(groups, firsts) if len(p)]
        forked = self.threads > 1 and sum(map(len, groups)) >= 512 and pipeline.can_fork()
        if forked and len(args) > 1:
            with stage("device"):
                procs = self._processes()
            return self._timed(procs.imap(_forked_part, args, chunksize=1))
        if self.pool is not None and len(args) > 1:
            return self._timed(self.pool.map(lambda a: self._part_text(*a), args))
        return self._timed(self._part_text(*a) for a in args)

    @staticmethod
    def _timed(outs: Iterator) -> Iterator:
        """``outs``, the wait for each counted as the device stage."""
        outs = iter(outs)
        while True:
            with stage("device"):
                out = next(outs, None)
            if out is None:
                return
            yield out

    def _empty(self, start: int, qi: np.ndarray, ti: np.ndarray):
        return Chunk.empty(start, qi, ti), None if self.job.score_only else Ragged(len(qi))

    def _fill(self, c: Chunk, ragged, p: np.ndarray, out) -> None:
        """Write :meth:`_part`'s results for positions ``p`` of chunk ``c``."""
        if self.job.score_only:
            c.score[p], c.ei[p], c.ej[p] = out
            if self.job.local:
                c.si[p] = c.sj[p] = np.where(out[0] > 0, -1, 0)
        else:
            score, ei, ej, si, sj, ops, offsets = out
            c.score[p], c.ei[p], c.ej[p], c.si[p], c.sj[p] = score, ei, ej, si, sj
            ragged.put(p, ops, offsets)

    def _finish(self, c: Chunk, ragged, big: np.ndarray) -> Chunk:
        """The pairs at positions ``big`` through the checkpointed path; the ops assembled."""
        if len(big):
            record_path(self.job, big, c.qi[big], c.ti[big], backend="cpu",
                        max_bytes=self.max_bytes, on_error=self.on_error, c=c, ragged=ragged)
        if ragged is not None:
            c.ops, c.op_offsets = ragged.assemble()
        return c
