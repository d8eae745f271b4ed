"""The device runner of a bulk alignment run: each chunk's pairs bucketed by length into a few
shapes (:meth:`DeviceRunner.plan`; on the CPU the fixed classes of :mod:`jaxrna.align.classes`,
on the GPU a job-wide square shape or a ladder), each batch's codes padded into arrays and its
JAX program dispatched on a device without waiting (:meth:`DeviceRunner.launch`), and its
results (scores, ends, and with alignments the traced-back ops) copied into the chunk
(:meth:`DeviceRunner.collect`). A batch that runs out of device memory is aligned again in
pieces (:meth:`DeviceRunner.retry_in_pieces`); pairs the batches do not take go through
:func:`jaxrna.align.chunks.record_path`. :mod:`jaxrna.align.engine` schedules the batches over
the devices.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

import numpy as np

from jaxrna.align import classes
from jaxrna.align.chunks import Chunk, Ragged, record_path
from jaxrna.align.jobs import Job
from jaxrna.align.scoring import Scoring
from jaxrna.align.text import ramp
from jaxrna.batching import bucket_length
from jaxrna.stages import stage

log = logging.getLogger("jaxrna")

#: GPU, with alignments: direction-bit bytes of one batch (at most), and its pairs at most.
GPU_DIRS_BYTES = 1 << 30
GPU_MAX_PAIRS = 8192
#: A job's GPU pairs share one padded shape unless that costs more than this many times the
#: real cells and more than GPU_MERGE_CELLS (a few tens of ms on an H200; less than compiling
#: another program); then: one square shape per power-of-two length class.
GPU_WASTE = 4.0
GPU_MERGE_CELLS = 2 * 10 ** 10


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
    col = ramp(ll)
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
             ragged: Ragged | None) -> list[_Batch]:
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
            record_path(job, positions[old], qi[old], ti[old], backend=self.backend,
                        max_bytes=self.max_bytes, on_error=self.on_error, c=c, ragged=ragged,
                        use_pallas=self.pallas or None)
        return batches

    # -- running ------------------------------------------------------------------------------
    def retry_in_pieces(self, b: _Batch, qi_all: np.ndarray, ti_all: np.ndarray, c: Chunk,
                        ragged: Ragged | None, exc: BaseException) -> None:
        """A batch that ran out of device memory, aligned again through the record path,
        which splits it in halves down to single pairs (:func:`jaxrna.oom.split_on_oom`); a
        pair that does not fit alone is refused by name (``on_error``)."""
        log.warning("align: a batch of %d pairs ran out of device memory (%s); retrying it in "
                    "smaller pieces", len(b.positions), str(exc).splitlines()[0][:120])
        pos = b.positions
        record_path(self.job, pos, qi_all[pos], ti_all[pos], backend=self.backend,
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

    def collect(self, b: _Batch, pending, c: Chunk, ragged: Ragged | None) -> None:
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
                                   + ramp(length)]
            if sw.any():                     # the target was on the rows: I and D swap
                swap_col = np.repeat(sw, length)
                flat = np.where(swap_col & (flat != 0), 3 - flat, flat).astype(np.uint8)
            offsets = np.zeros(k + 1, np.int64)
            np.cumsum(length, out=offsets[1:])
            c.score[p] = score
            c.ei[p], c.ej[p] = np.where(sw, ej, ei), np.where(sw, ei, ej)
            c.si[p], c.sj[p] = np.where(sw, sj, si), np.where(sw, si, sj)
            ragged.put(p, flat, offsets)
