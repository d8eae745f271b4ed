"""The host runner of a bulk alignment run: each chunk's pairs through parasail's SIMD kernels
for the values and our traceback rules (:class:`jaxrna.align.host.HostEngine`), split over
forked processes (one per core; the traceback is numpy work, which threads would serialise) or
threads where forking is not safe (JAX already running in the process). It needs no JAX;
pairs whose tables are too large for the walk go through :func:`jaxrna.align.chunks.record_path`.
"""

from __future__ import annotations

import concurrent.futures
import os

import numpy as np

from jaxrna.align.chunks import Chunk, Ragged, record_path
from jaxrna.align.jobs import Job
from jaxrna.stages import stage


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
        from jaxrna.align.host import GROUP_CELLS, HostEngine, keep_freed_memory

        self.job = job
        self.engine = HostEngine(job.scoring, job.local)
        keep_freed_memory()                  # before any process is forked: they inherit it
        self.threads = max(1, threads)
        self.pool = concurrent.futures.ThreadPoolExecutor(self.threads) if self.threads > 1 \
            else None
        self.max_bytes, self.on_error = max_bytes, on_error
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

    def _processes(self):
        """The forked processes of this run's chunks, started at the first chunk that needs
        them (the job is complete by then: every later chunk is indices into it) and kept
        until :meth:`close` (a pool per chunk forked the whole process again each time)."""
        if self._procs is None:
            global _FORKED
            import multiprocessing

            _FORKED = self
            try:
                self._procs = multiprocessing.get_context("fork").Pool(
                    self.threads, initializer=_forked_setup)
            finally:
                _FORKED = None
        return self._procs

    def close(self) -> None:
        """Stop the forked processes, if any."""
        procs, self._procs = self._procs, None
        if procs is not None:
            procs.terminate()
            procs.join()
        if self.pool is not None:
            self.pool.shutdown(wait=False)

    def run(self, start: int, qi: np.ndarray, ti: np.ndarray) -> Chunk:
        job = self.job
        c = Chunk.empty(start, qi, ti)
        positions = np.arange(len(qi))
        ragged = None if job.score_only else Ragged(len(qi))
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
            with stage("device"):
                outs = self._processes().map(_forked_part, [(qi[p], ti[p]) for p in parts],
                                             chunksize=1)
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
            record_path(job, positions[big], qi[big], ti[big], backend="cpu",
                        max_bytes=self.max_bytes, on_error=self.on_error, c=c, ragged=ragged)
        if ragged is not None:
            c.ops, c.op_offsets = ragged.assemble()
        return c
