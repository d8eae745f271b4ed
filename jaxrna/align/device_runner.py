"""The device runner of a bulk alignment run: each chunk's pairs put in the fixed length classes
of :mod:`jaxrna.align.classes` (:meth:`DeviceRunner.plan`; on the CPU those of the vmapped
sweep, on the GPU those of the Pallas lane kernels), each class with a fixed batch row count (a
last batch topped up with empty rows), so a job's programs are those of its classes, known in
advance (:mod:`jaxrna.align.warmup`), never of its pair count or the mix of its lengths, and at
most :data:`jaxrna.align.budget.PROGRAM_BUDGET` of them in one run (:meth:`DeviceRunner._plan_run`
looks at every pair of the job before the first chunk); each
batch's codes padded into arrays and its JAX program dispatched on a device without waiting
(:meth:`DeviceRunner.launch`), and its results (scores, ends, and with alignments the
traced-back ops) copied into the chunk (:meth:`DeviceRunner.collect`). A batch that runs out of
device memory is aligned again in pieces (:meth:`DeviceRunner.retry_in_pieces`); pairs the
batches do not take go through :func:`jaxrna.align.chunks.record_path`.
:mod:`jaxrna.align.engine` schedules the batches over the devices.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

import numpy as np

from jaxrna.align import classes
from jaxrna.align.chunks import Chunk, Ragged, gather, record_path
from jaxrna.align.jobs import Job
from jaxrna.align.scoring import Scoring
from jaxrna.align.text import ramp
from jaxrna.stages import stage

log = logging.getLogger("jaxrna")

#: GPU, with alignments: direction-bit bytes of one batch (at most), and its pairs at most
#: (:mod:`jaxrna.align.classes`).
GPU_DIRS_BYTES = classes.GPU_DIRS_BYTES
GPU_MAX_PAIRS = classes.GPU_MAX_PAIRS
#: GPU, with alignments: a job's pairs share one square class (the one of its longest pair)
#: unless that costs more than this many times the real cells and more than GPU_MERGE_CELLS
#: (direction bits of fewer pairs per batch); then each pair takes its own square class. Either
#: way the shapes are among the fixed classes of :func:`jaxrna.align.classes.gpu_square`.
GPU_WASTE = 4.0
GPU_MERGE_CELLS = 2 * 10 ** 10


@dataclass
class Batch:
    """One batch of a chunk: its pairs, its class and its fixed rows (the program's shape)."""
    chunk: int                 # index of its chunk
    positions: np.ndarray      # pairs of the chunk it holds, at most ``rows``
    h: int                     # the class: padded shorter side (rows of the table) ...
    w: int                     # ... and longer side
    rows: int                  # padded batch size: the class's, whatever the pair count
    swapped: np.ndarray        # per pair: the target is on the lanes / rows
    transposed: bool           # the scores of swapped pairs (an asymmetric matrix)
    kind: str                  # "scores", "align" (the sweep), "lanes" (GPU alignments)
    small: bool | None = None  # the run's variant (int16 / packed) or None: the batch's own


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
        # score only on a GPU: few long pairs of a class through the tile wavefront
        self.tiles = job.score_only and (self.gpu or bool(self.kernel.get("tiles")))
        self._plan_shapes()
        self.run_plan = self._plan_run()

    # -- planning -----------------------------------------------------------------------------
    def _plan_shapes(self) -> None:
        """GPU alignments: one of the fixed square classes for the whole job (that of its
        longest pair) where that costs little (:data:`GPU_WASTE`): fewer programs to compile
        or load; else each pair its own square class."""
        job = self.job
        self.side = None
        if self.pallas and not job.score_only:
            longest = int(max(job.qlen.max(initial=1), job.tlen.max(initial=1)))
            side = self._square(longest)
            real = max(job.cells(), 1)
            fits = side * side * self.kernel.get("lanes", 128) <= GPU_DIRS_BYTES
            if fits and job.n_pairs * side * side <= max(GPU_WASTE * real, GPU_MERGE_CELLS):
                self.side = side             # one shape for the whole job

    def _rule(self):
        from jaxrna.align.budget import Rule

        return Rule(self.kscoring, self.pallas, (self.kernel.get("min_side", 128),
                                                 self.kernel.get("rows", 8)))

    def _plan_run(self):
        """The run's programs (:func:`jaxrna.align.budget.plan_run`): every pair of the job
        looked at once, by distinct length pair; over :data:`jaxrna.align.budget.PROGRAM_BUDGET`
        programs, a map of each pair's class and variant to the one serving it."""
        from jaxrna.align import budget

        job = self.job
        m, n, count = budget.length_pairs(job.qlen, job.tlen, job.zip)
        if not len(m):
            return budget.RunPlan(0, None, [])
        kind, h, w, _, old = self.classes_of(m, n)
        keep = ~old
        s, l = np.minimum(m, n)[keep], np.maximum(m, n)[keep]
        kind, h, w, count = kind[keep], h[keep], w[keep], count[keep]
        shapes = 0
        self.tiled = set()
        if self.tiles:                       # few long pairs of a class: the tile wavefront
            from jaxrna.align.api import TILE, TILED_MAX_PAIRS, TILED_MIN_LENGTH, tile_shape

            long_ = s >= TILED_MIN_LENGTH
            per: dict = {}
            for a, b, c in zip(h[long_].tolist(), w[long_].tolist(), count[long_].tolist()):
                per[(a, b)] = per.get((a, b), 0) + c
            self.tiled = {k for k, v in per.items() if 0 < v < TILED_MAX_PAIRS}
            tile = long_ & self._in_tiled(h, w)
            kind[tile] = "tile"
            shapes = len({tile_shape(a, b, TILE) for a, b in zip(s[tile].tolist(),
                                                                 l[tile].tolist())})
        cost = budget.Cost("gpu" if self.pallas else "cpu")
        self._rule_ = self._rule()
        from jaxrna.align.jobs import CHUNK_SCORES

        exact = self._variants_of() if job.n_pairs <= CHUNK_SCORES else None   # one chunk
        return budget.plan_run(kind, h, w, s, l, count, self._rule_, cost,
                               budget.PROGRAM_BUDGET, shapes, exact)

    def _variants_of(self):
        """Score only, a job of one chunk: ``variants(kind, h, w)``, the variants the batches
        of class ``(h, w)`` use, as :meth:`plan` makes them and :meth:`launch` picks them
        (each batch its own); the job's pairs are classed once, at the first call."""
        pairs: list = []

        def variants(kind: str, h: int, w: int) -> set:
            if not pairs:
                pairs.append(self._classed_pairs())
            return self._batch_variants(kind, h, w, *pairs[0])
        return variants

    def _classed_pairs(self) -> tuple:
        """Every pair of the job: lengths, class, transposition, and whether it goes to the
        tile wavefront."""
        from jaxrna.align.api import TILED_MIN_LENGTH

        job = self.job
        qi, ti = job.pairs(0, job.n_pairs)
        m, n = job.qlen[qi], job.tlen[ti]
        _, hh, ww, trans, _ = self.classes_of(m, n)
        tile = (np.minimum(m, n) >= TILED_MIN_LENGTH) & self._in_tiled(hh, ww)
        return m, n, hh, ww, trans, tile

    def _batch_variants(self, kind: str, h: int, w: int, m, n, hh, ww, trans, tile) -> set:
        """The variants of class ``(h, w)``'s batches over the classed pairs
        (:meth:`_classed_pairs`)."""
        rows = self.rows(kind, h, w)
        out = set()
        for tt in (False, True):
            members = np.flatnonzero((hh == h) & (ww == w) & (trans == tt) & ~tile)
            short, long_ = np.minimum(m, n)[members], np.maximum(m, n)[members]
            order = np.argsort(short + long_, kind="stable")   # as plan() sorts them
            short, long_ = np.maximum(short[order], 1), np.maximum(long_[order], 1)
            for a in range(0, len(members), rows):
                b = Batch(0, members[a:a + rows], h, w, rows, None, tt, kind)
                sb, lb = short[a:a + rows], long_[a:a + rows]
                out.add(bool(self.packed(sb, lb) if self.pallas else self._small(b, sb, lb)))
        return out

    def _in_tiled(self, h: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Per pair: whether its class ``(h, w)`` sends its long pairs to the tile wavefront."""
        keys = np.array([a * (1 << 32) + b for a, b in self.tiled], np.int64)
        return np.isin(np.asarray(h, np.int64) * (1 << 32) + np.asarray(w, np.int64), keys)

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
        return classes.gpu_square(n, self.kernel.get("min_side", 128),
                                  self.kernel.get("rows", 8))

    cpu_class = staticmethod(classes.cpu_class)
    cpu_rows = staticmethod(classes.cpu_rows)

    def packed(self, m: np.ndarray, n: np.ndarray) -> bool:
        """Whether a score-only GPU batch of pairs ``m`` x ``n`` (the rows' and the columns'
        lengths) runs two pairs per 32-bit lane (int16 halves): every value of its tables fits
        (:func:`~jaxrna.kernels.wavefront_packed.packed_ok` on its longest sides: the kernel's
        loops run to them, and the rows above a pair that it computes are at most a strip
        more than the longest). Each class has these two variants at most."""
        from jaxrna.kernels.wavefront_packed import packed_ok

        return packed_ok(self.kscoring, int(np.max(m, initial=1)) + 64,
                         int(np.max(n, initial=1)))

    def rows(self, kind: str, h: int, w: int) -> int:
        """The fixed batch rows of a class: never the number of pairs (a last batch is
        topped up with empty rows), so the programs are those of the classes alone."""
        lanes = self.kernel.get("lanes", classes.GPU_LANES_PER_PROGRAM)
        if kind == "lanes":
            return classes.gpu_lanes_rows(h, lanes, self.limit)
        if self.pallas and kind == "scores":
            return classes.gpu_score_rows(h, w, self.limit, lanes)
        return self.cpu_rows(h, w, kind == "scores")

    def classes_of(self, m: np.ndarray, n: np.ndarray) -> tuple:
        """``(kind, h, w, transposed, old)`` of pairs of lengths ``m`` x ``n``: their class
        (kind per pair, padded shorter and longer side; see :mod:`jaxrna.align.classes`),
        whether the scores are transposed (the target on the rows, an asymmetric matrix), and
        whether the batches do not take them (the record path does). GPU alignments: pairs
        whose square's direction bits do not fit a batch take the CPU classes of the pure-JAX
        ``batch_align`` (kind ``"align"``), as the record path did."""
        from jaxrna.align.api import TABLE_BYTES

        job = self.job
        m, n = np.asarray(m), np.asarray(n)
        short, long_ = np.minimum(m, n), np.maximum(m, n)
        trans = (m > n) & (not self.symmetric)
        kind = np.full(len(m), "scores" if job.score_only else "align", "<U6")
        if not self.pallas:                  # CPU: the vmapped sweep's classes
            h, w = self.cpu_class(short, long_, job.score_only)
            old = np.zeros(len(m), bool) if job.score_only else (h + w) * h > TABLE_BYTES
            return kind, h, w, trans, old
        if job.score_only:
            h, w = classes.gpu_score_class(short, long_)
            return kind, h, w, trans, np.zeros(len(m), bool)
        lanes = self.kernel.get("lanes", classes.GPU_LANES_PER_PROGRAM)
        if self.side:
            side = np.full(len(m), self.side, np.int64)
        else:
            values, at = np.unique(long_, return_inverse=True)
            side = np.array([self._square(v) for v in values.tolist()], np.int64)[
                np.asarray(at).reshape(-1)]
        longer = side * side * lanes > classes.GPU_DIRS_BYTES  # not classes.gpu_lanes_fit
        h, w = side.copy(), side.copy()
        kind[~longer] = "lanes"
        old = np.zeros(len(m), bool)
        if longer.any():
            hh, ww = self.cpu_class(short[longer], long_[longer], False)
            h[longer], w[longer] = hh, ww
            old[longer] = (hh + ww) * hh > TABLE_BYTES
        return kind, h, w, trans, old

    def plan(self, ci: int, qi: np.ndarray, ti: np.ndarray, c: Chunk,
             ragged: Ragged | None) -> list[Batch]:
        """The batches of a chunk: its pairs by class (:meth:`classes_of`), ordered by length
        inside a class (each program's loops run to its longest pair), in batches of the
        class's fixed rows (:meth:`rows`); pairs the batches do not take go through the record
        path now."""
        from jaxrna.align.api import TILED_MIN_LENGTH

        job = self.job
        m, n = job.qlen[qi], job.tlen[ti]
        positions = np.arange(len(qi))
        swapped = m > n
        kind, h, w, trans, old = self.classes_of(m, n)
        small = np.zeros(len(m), np.int8) - 1          # -1: the batch's own variant
        serve = self.run_plan.serve
        if self.tiled:                       # the run's few long pairs of a class
            tile = (np.minimum(m, n) >= TILED_MIN_LENGTH) & self._in_tiled(h, w) & ~old
            kind[tile] = "tile"
            if serve is None:                # within the budget: each at its own shape
                old |= tile
        if serve is not None:                # over the budget: the programs serving them
            from jaxrna.align.budget import split_small

            own = split_small(self._rule_, kind, h, np.maximum(m, n))
            k0, h0, w0 = kind.copy(), h.copy(), w.copy()
            for key in set(zip(k0[~old].tolist(), h0[~old].tolist(), w0[~old].tolist(),
                               own[~old].tolist())):
                # (a pair the run's plan saw only rounded up to 16: its class's int32 program)
                to = serve.get(key) or serve.get(key[:3] + (False,)) or key[:3] + (False,)
                sel = (k0 == key[0]) & (h0 == key[1]) & (w0 == key[2]) & (own == key[3]) & ~old
                kind[sel], h[sel], w[sel], small[sel] = to[0], to[1], to[2], int(to[3])
        size = np.minimum(m, n) + np.maximum(m, n)
        keys = sorted(set(zip(kind[~old].tolist(), h[~old].tolist(), w[~old].tolist(),
                              small[~old].tolist(), trans[~old].tolist())))
        batches: list[Batch] = []
        for kk, hh, ww, ss, tt in keys:
            members = positions[(kind == kk) & (h == hh) & (w == ww) & (small == ss)
                                & (trans == tt) & ~old]
            if kk == "tile":                 # over the budget: at the serving class's shape
                self._tiles(members, qi, ti, hh, ww, c)
                continue
            if (np.diff(size[members]) < 0).any():   # like lengths in each program
                members = members[np.argsort(size[members], kind="stable")]
            rows = self.rows(kk, hh, ww)
            for a in range(0, len(members), rows):
                part = members[a:a + rows]
                batches.append(Batch(ci, part, hh, ww, rows, swapped[part], tt, kk,
                                     None if ss < 0 else bool(ss)))
        if old.any():
            record_path(job, positions[old], qi[old], ti[old], backend=self.backend,
                        max_bytes=self.max_bytes, on_error=self.on_error, c=c, ragged=ragged,
                        use_pallas=self.pallas or None)
        return batches

    def _tiles(self, positions: np.ndarray, qi: np.ndarray, ti: np.ndarray, h: int, w: int,
               c: Chunk) -> None:
        """Score only, over the budget: few long pairs one at a time through the tile
        wavefront (:func:`jaxrna.align.api.tiled_score`) padded to their serving class
        ``h`` x ``w`` (one program per class, not per pair's shape), results into ``c``."""
        from jaxrna.align import api

        job = self.job
        opts = {k: v for k, v in self.kernel.items() if k in ("rows", "lanes", "num_warps")}
        tiles = {"tile": api.TILE, **opts, "interpret": self.interpret}
        params, params_t = self.params_on(self.device)
        for p in positions.tolist():
            a, b = int(qi[p]), int(ti[p])
            qc = job.qcodes[job.qoff[a]:job.qoff[a + 1]].astype(np.int32)
            tc = job.tcodes[job.toff[b]:job.toff[b + 1]].astype(np.int32)
            with self.jax.default_device(self.device):
                r = api.tiled_score(job.queries.record(a), job.targets.record(b), qc, tc,
                                    params, params_t, self.kscoring, job.local, tiles,
                                    shape=(h, w))
            c.score[p] = r.score_units
            c.ei[p], c.ej[p] = r.query_end, r.target_end
            c.si[p] = -1 if r.query_start is None else r.query_start
            c.sj[p] = -1 if r.target_start is None else r.target_start

    # -- running ------------------------------------------------------------------------------
    def retry_in_pieces(self, b: Batch, qi_all: np.ndarray, ti_all: np.ndarray, c: Chunk,
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

    def launch(self, b: Batch, qi_all: np.ndarray, ti_all: np.ndarray, device=None):
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
                from jaxrna.kernels.wavefront_packed import packed_scores

                opts = {key: v for key, v in self.kernel.items() if key in ("rows", "lanes",
                                                                             "num_warps")}
                if self.packed(m, n) if b.small is None else b.small:
                    return pallas_or("align.packed_scores", lambda: packed_scores.bind(
                        q, t, m, n, params, local=job.local, interpret=self.interpret, **opts,
                        **ends), swept)()[:3]
                return pallas_or("align.pallas_scores", lambda: wavefront.pallas_scores.bind(
                    q, t, m, n, params, local=job.local, equality=eq, interpret=self.interpret,
                    **opts, **ends), swept)()[:3]
            return swept()()[:3]

    def _small(self, b: Batch, m: np.ndarray, n: np.ndarray) -> bool:
        """Whether the batch sweeps in int16: every value of its lanes over the columns it
        computes (up to its longest row) fits (:func:`~jaxrna.align.recurrence.fits_int16`)."""
        from jaxrna.align.recurrence import fits_int16

        if b.small is not None:              # the run's variant (jaxrna.align.budget)
            return b.small
        return fits_int16(self.kscoring, b.h, int(n.max(initial=1)))

    def collect(self, b: Batch, pending, c: Chunk, ragged: Ragged | None) -> None:
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
            flat = gather(ops.reshape(-1), np.arange(k) * ops.shape[1], length)
            if sw.any():                     # the target was on the rows: I and D swap
                swap_col = np.repeat(sw, length)
                flat = np.where(swap_col & (flat != 0), 3 - flat, flat).astype(np.uint8)
            offsets = np.zeros(k + 1, np.int64)
            np.cumsum(length, out=offsets[1:])
            c.score[p] = score
            c.ei[p], c.ej[p] = np.where(sw, ej, ei), np.where(sw, ei, ej)
            c.si[p], c.sj[p] = np.where(sw, sj, si), np.where(sw, si, sj)
            ragged.put(p, flat, offsets)
