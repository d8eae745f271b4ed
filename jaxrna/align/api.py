"""Pairwise alignment: strings or records in, :class:`Alignment` objects out, in input order.

>>> a = align("GATTACA", "GATCA", match=1, mismatch=-1, gap_open=2, gap_extend=1)
>>> a.score, a.cigar, a.query_start, a.query_end
(2, '3=2I2=', 0, 7)
>>> align("AAAA", "CCCC", mode="local", match=1, mismatch=-1).score
0
>>> align("GATTACA", "GACTACA", preset="edit").score  # edit distance: one substitution
1
>>> a = align("GATTACA", "TTGATTACATT", match=1, mismatch=-1, gap_open=2, gap_extend=1,
...           end_gaps="free")                           # needle's default: end gaps cost 0
>>> a.score, a.cigar
(7, '2D7=2D')

For encoded arrays, :func:`pair_sweep` (one pair; jit it, vmap it) and :func:`batch_sweep`
are the lower level; :func:`align_records` streams any number of pairs with bounded memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from typing import Iterable, Iterator, Sequence

import jax
import numpy as np

from jaxrna.align import classes
from jaxrna.align.recurrence import (NEG, STATE_H, STATE_M, border_col_host, border_gaps,
                                     border_row_host, fits_int16, params_of)
from jaxrna.align.scoring import Scoring, check_end_gaps, check_range, make_scoring
from jaxrna.align.traceback import OP_LETTERS, DenseBits, SkewedBits, Walk, finish, walk
from jaxrna.batching import bucket_length
from jaxrna.io.errors import InputError, ResourceError
from jaxrna.io.fasta import Record
from jaxrna.kernels.fallback import compile_or_fallback
from jaxrna.kernels.wavefront import (batch_align, batch_sweep, block_dirs,
                                      checkpoint_bytes, checkpoint_sweep, pair_sweep,
                                      pallas_scores, tile_wavefront)
from jaxrna.kernels.wavefront_packed import packed_ok, packed_scores
from jaxrna.oom import split_on_oom
from jaxrna.runtime import device_memory_bytes, human_bytes, memory_bytes
from jaxrna.weights import ScoredResult

__all__ = ["Alignment", "align", "align_records", "pair_sweep", "batch_sweep", "make_scoring"]

MODES = ("global", "local")
#: A pair whose direction bits would exceed this goes to the checkpointed (block) traceback.
TABLE_BYTES = 256 << 20
#: Block edge of the checkpointed traceback.
BLOCK = 2048
#: Direction bits per batch, and lanes (pairs x padded rows) per batch when scoring only.
DIRS_BUDGET = classes.DIRS_BUDGET
#: (CPU: small enough for the sweep's arrays to stay in cache.)
LANE_BUDGET = {"cpu": 1 << 18, "gpu": 1 << 25}
#: On GPU, groups of fewer pairs than this whose shorter sequence is at least
#: ``TILED_MIN_LENGTH`` run one pair at a time through the tile wavefront (seed 002's block
#: schedule, Pallas); more pairs run one pair per lane.
TILED_MAX_PAIRS = 512
TILED_MIN_LENGTH = 2048
#: Tile edge of the tile wavefront.
TILE = 128


@dataclass(frozen=True)
class Alignment(ScoredResult):
    """One aligned pair. Coordinates are 0-based half-open; ``ops`` is a string over ``M``
    (aligned pair), ``I`` (query residue against a gap) and ``D`` (target residue against a
    gap), or None when only the score was computed (then a local alignment's start is None).
    """

    query_id: str
    target_id: str
    score_units: int
    mode: str
    query_start: int | None
    query_end: int
    target_start: int | None
    target_end: int
    ops: str | None
    query: str = field(repr=False, default="")
    target: str = field(repr=False, default="")
    scoring: Scoring | None = field(repr=False, compare=False, default=None)

    @property
    def score_fraction(self) -> Fraction:
        return self.scoring.report(self.score_units)

    @property
    def empty(self) -> bool:
        return self.ops == ""

    def columns(self) -> tuple[str, str]:
        """The aligned query and target rows, gaps as ``-``."""
        if self.ops is None:
            raise ValueError("score-only alignment: no columns")
        qa, ta, i, j = [], [], self.query_start, self.target_start
        for op in self.ops:
            if op in "MI":
                qa.append(self.query[i])
                i += 1
            else:
                qa.append("-")
            if op in "MD":
                ta.append(self.target[j])
                j += 1
            else:
                ta.append("-")
        return "".join(qa), "".join(ta)

    def pair_codes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The ops as bytes, and the query and target codes of every ``M`` column in order."""
        if self.ops is None:
            raise ValueError("score-only alignment: no columns")
        q = self.scoring.encode(self.query[self.query_start:self.query_end])
        t = self.scoring.encode(self.target[self.target_start:self.target_end])
        ops = np.frombuffer(self.ops.encode(), np.uint8)
        is_m = ops == ord("M")
        qi = np.cumsum(ops != ord("D"))[is_m] - 1     # residue consumed by each M column
        ti = np.cumsum(ops != ord("I"))[is_m] - 1
        return ops, q[qi], t[ti]

    def stats(self) -> dict:
        """Columns, identical, similar (positive score; no cost for minimised presets) and
        gap columns."""
        ops, qm, tm = self.pair_codes()
        sub = self.scoring.matrix[qm, tm]
        similar = int(np.sum(sub >= 0 if self.scoring.minimise else sub > 0))
        return {"length": ops.size, "identical": int(np.sum(qm == tm)), "similar": similar,
                "gaps": ops.size - qm.size}

    @property
    def identity(self) -> float:
        """Identical columns / alignment columns (0 for an empty alignment)."""
        st = self.stats()
        return st["identical"] / st["length"] if st["length"] else 0.0

    @property
    def cigar(self) -> str | None:
        """Extended CIGAR of the aligned region: ``=`` identical, ``X`` mismatch, ``I`` query
        residue against a gap, ``D`` target residue against a gap; ``*`` when empty."""
        if self.ops is None:
            return None
        if not self.ops:
            return "*"
        ops, qm, tm = self.pair_codes()
        letters = ops.copy()
        letters[ops == ord("M")] = np.where(qm == tm, ord("="), ord("X"))
        change = np.flatnonzero(np.diff(letters)) + 1
        starts = np.concatenate([[0], change])
        runs = np.diff(np.concatenate([starts, [letters.size]]))
        return "".join(f"{r}{chr(letters[s])}" for s, r in zip(starts, runs))


# --------------------------------------------------------------------------------------
# planning


@dataclass
class _Job:
    index: int
    query: Record
    target: Record
    q: np.ndarray          # codes on the lanes (the shorter sequence)
    t: np.ndarray
    swapped: bool


def _encode(rec: Record, scoring: Scoring, cache: dict) -> np.ndarray:
    key = id(rec)
    if key not in cache:
        try:
            cache[key] = (rec, scoring.encode(rec.sequence))
        except ValueError as exc:
            raise InputError(str(exc), path=rec.source, line=rec.line, record=rec.id) from None
    return cache[key][1]


def memory_limit(backend: str, max_bytes: int | None) -> int:
    if max_bytes is not None:
        return max_bytes
    limit = device_memory_bytes("gpu") if backend == "gpu" else 0
    return int(0.8 * (limit or memory_bytes()))


def _bucket(n: int) -> int:
    """Padded length: a multiple of 16 up to 256 (short pairs waste little), then the
    project's ladder (a few compiled shapes for any mix of lengths)."""
    return -(-max(n, 1) // 16) * 16 if n <= 256 else bucket_length(n)


def _batch_rows(count: int) -> int:
    """Padded batch size: exact below 2, powers of two up to 1024, then multiples of 256."""
    if count < 2:
        return count
    if count <= 1024:
        return 1 << (count - 1).bit_length()
    return -(-count // 256) * 256


def _split(members: list, cap: int) -> list[list]:
    """``members`` in consecutive batches of at most ``cap``, as equal in size as possible."""
    count = -(-len(members) // cap)
    size = -(-len(members) // count)
    return [members[s:s + size] for s in range(0, len(members), size)]


def _pad(arrays: list[np.ndarray], length: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    out = np.zeros((rows, length), np.int32)
    lens = np.ones(rows, np.int32)
    for r, a in enumerate(arrays):
        out[r, :a.size] = a
        lens[r] = a.size
    return out, lens


# --------------------------------------------------------------------------------------
# running


def _result(job: _Job, scoring: Scoring, mode: str, score: int, qs, qe, ts, te, ops):
    if job.swapped:
        qs, qe, ts, te = ts, te, qs, qe
        if ops is not None:
            ops = ops.translate(str.maketrans("ID", "DI"))
    return Alignment(query_id=job.query.id, target_id=job.target.id, score_units=int(score),
                     mode=mode, query_start=qs, query_end=int(qe), target_start=ts,
                     target_end=int(te), ops=ops, query=job.query.sequence,
                     target=job.target.sequence, scoring=scoring)


def _run_batch(jobs: list[_Job], h: int, w: int, params, scoring: Scoring, local: bool,
               score_only: bool, pallas: dict | None, rows: int | None = None
               ) -> list[Alignment]:
    """One batch of one length bucket through the vmapped sweep (tracebacks walked on the
    device: :func:`jaxrna.kernels.wavefront.batch_align`), or (score only, ``pallas`` options
    given) the one-pair-per-lane kernel. ``rows``: the batch's padded size (default
    :func:`_batch_rows`). The vmapped sweep runs its class in int32, or (score only) in int16
    when the batch's longest path fits (:mod:`jaxrna.align.classes`)."""
    mode = "local" if local else "global"
    ends = scoring.separate_end_gaps
    rows = rows or _batch_rows(len(jobs))
    q, m = _pad([j.q for j in jobs], h, rows)
    t, n = _pad([j.t for j in jobs], w, rows)
    results = []
    if score_only:
        def sweep():                            # the pure-JAX path
            return batch_sweep.bind(q, t, m, n, params, local=local, equality=scoring.equality,
                                    small=fits_int16(scoring, h, int(n.max(initial=1))),
                                    ends=ends)

        run = sweep
        if pallas:
            opts = {k: v for k, v in pallas.items() if k != "tile"}
            if packed_ok(scoring, h + 64, w):      # two pairs per 32-bit lane (int16 halves)
                run = partial(compile_or_fallback, "align.packed_scores", lambda: (
                    packed_scores.bind(q, t, m, n, params, local=local, ends=ends, **opts)),
                    sweep)
            else:
                run = partial(compile_or_fallback, "align.pallas_scores", lambda: (
                    pallas_scores.bind(q, t, m, n, params, local=local,
                                       equality=scoring.equality, ends=ends, **opts)), sweep)
        score, ei, ej = (np.asarray(a) for a in run()()[:3])
        if pallas:
            score, ei, ej = empty_sides(score, ei, ej, m, n, scoring, local)
        for b, job in enumerate(jobs):
            start = None if local else 0
            qs = 0 if (local and score[b] <= 0) else start
            results.append(_result(job, scoring, mode, score[b], qs, ei[b], qs, ej[b], None))
        return results
    out = batch_align(q, t, m, n, params, local=local, equality=scoring.equality, ends=ends)
    score, ei, ej, si, sj, ops, length = (np.asarray(a) for a in out)
    letters = OP_LETTERS
    for b, job in enumerate(jobs):
        text = letters[ops[b, :length[b]]].tobytes().decode()
        results.append(_result(job, scoring, mode, score[b], int(si[b]), ei[b], int(sj[b]),
                               ej[b], text))
    return results


def empty_sides(score: np.ndarray, ei: np.ndarray, ej: np.ndarray, m: np.ndarray,
                n: np.ndarray, scoring: Scoring, local: bool):
    """Scores and ends of a batch with the pairs that have an empty side set to their border's
    gap run (global; end gap scores where they differ) or 0 (local): the lane kernels compute
    a pair's score on its last row and column, which such a pair does not have.

    >>> from jaxrna.align.scoring import match_mismatch
    >>> z = np.zeros(3, np.int64)
    >>> s, i, j = empty_sides(z - 99, z, z, np.array([0, 0, 2]), np.array([3, 0, 4]),
    ...                       match_mismatch(2, -3, 5, 2), False)
    >>> s.tolist(), i.tolist(), j.tolist()
    ([-9, 0, -99], [0, 0, 0], [3, 0, 0])
    """
    m, n = np.asarray(m)[:len(score)], np.asarray(n)[:len(score)]
    empty = (m == 0) | (n == 0)
    if not empty.any():
        return score, ei, ej
    run = np.maximum(m, n).astype(np.int64)
    if local:
        gap = np.zeros_like(run)
    else:
        gap = np.where(run > 0, scoring.end_open_score + (run - 1) * scoring.end_extend_score, 0)
    score = np.where(empty, gap, score)
    if not local:
        ei, ej = np.where(empty, m, ei), np.where(empty, n, ej)
    else:
        ei, ej = np.where(empty, 0, ei), np.where(empty, 0, ej)
    return score, ei, ej


def _edge(line: np.ndarray, start: int, size: int) -> np.ndarray:
    """``line[:, start : start + size + 1]`` padded with minus infinity."""
    out = np.full((3, size + 1), NEG, np.int32)
    part = line[:, start:start + size + 1]
    out[:, :part.shape[1]] = part
    return out


def _long_forward(q, t, m: int, n: int, params, scoring: Scoring, local: bool, block: int,
                  tiles: dict | None):
    """Score, end cell, end state and block-edge checkpoints of one long pair: seed 002's
    tile wavefront (Pallas, ``tiles`` = its options) or one pure-JAX antidiagonal sweep."""
    ends = scoring.separate_end_gaps
    run = None
    if tiles is not None:
        h, w = q.size, t.size
        gaps = border_gaps(params, ends)
        run = _tiled(lambda: tile_wavefront.bind(
            q, t, border_row_host(0, w, *gaps, local), border_col_host(0, h, *gaps, local), m, n,
            params,
            local=local, equality=scoring.equality, block=block, ends=ends, **tiles))
    if run is None:
        return checkpoint_sweep(np.asarray(q), np.asarray(t), m, n, params, local=local,
                                equality=scoring.equality, block=block, ends=ends)
    out = run()
    ends = (int(out["score"]), int(out["end_i"]), int(out["end_j"]),
            STATE_M if local else STATE_H)
    lines = [list(np.asarray(out[k])) if k in out else [] for k in ("rows", "cols")]
    return ends, lines[0], lines[1]


def _block_lookup(q, t, top, left, r0: int, c0: int, params, scoring: Scoring, local: bool,
                  block: int, tiles: dict | None, m: int = 0, n: int = 0):
    """Direction bits of the block whose first cell is (r0 + 1, c0 + 1), as a ``bits_at``
    (``m``, ``n``: the table's last row and column, for end gaps scored apart)."""
    qb = np.zeros(block, np.int32)
    tb = np.zeros(block, np.int32)
    qseg, tseg = q[r0:r0 + block], t[c0:c0 + block]
    qb[:qseg.size], tb[:tseg.size] = qseg, tseg
    ends = scoring.separate_end_gaps
    at = (np.int32(m - r0), np.int32(n - c0)) if ends else (None, None)
    run = None if tiles is None else _tiled(lambda: tile_wavefront.bind(
        qb, tb, top, left, block, block, params, *at, local=local, equality=scoring.equality,
        want_dirs=True, ends=ends, **tiles))
    if run is None:
        dirs = np.asarray(block_dirs(qb, tb, top, left, params, *at, local=local,
                                     equality=scoring.equality, ends=ends))
        return SkewedBits(dirs[None], r0, c0)
    return DenseBits(np.asarray(run()["dirs"]), r0, c0)


def _tiled(bind):
    """``bind()`` (the tile wavefront's call, compiled now), or None where the Pallas kernel
    does not build (:mod:`jaxrna.kernels.fallback`): the caller takes the pure-JAX sweep."""
    return compile_or_fallback("align.tile_wavefront", bind, lambda: None)


def _run_long(job: _Job, params, scoring: Scoring, local: bool, block: int,
              tiles: dict | None, score_only: bool = False,
              shape: tuple[int, int] | None = None) -> Alignment:
    """A long pair: block-edge checkpoints from one forward pass, then only the blocks on the
    traceback's path are recomputed (memory O((m + n)^2 / block + block^2)). ``shape``: the
    padded table (multiples of the tile; default: each side's bucket)."""
    mode = "local" if local else "global"
    m, n = job.q.size, job.t.size
    h, w = shape or tile_shape(m, n, tiles["tile"] if tiles else 16)
    q, _ = _pad([job.q], h, 1)
    t, _ = _pad([job.t], w, 1)
    q, t = q[0], t[0]
    (score, ei, ej, state), rows, cols = _long_forward(q, t, m, n, params, scoring, local,
                                                       0 if score_only else block, tiles)
    if score_only:
        start = 0 if (not local or score <= 0) else None
        return _result(job, scoring, mode, score, start, ei, start, ej, None)
    go, ge = border_gaps(params, scoring.separate_end_gaps)
    wk = Walk.start([ei], [ej], [state], done=[local and score <= 0])
    while not wk.done[0] and wk.i[0] > 0 and wk.j[0] > 0:
        i, j = int(wk.i[0]), int(wk.j[0])
        r0, c0 = (i - 1) // block * block, (j - 1) // block * block
        top = _edge(rows[r0 // block - 1], c0, block) if r0 else \
            border_row_host(c0, block, go, ge, local)
        left = _edge(cols[c0 // block - 1], r0, block) if c0 else \
            border_col_host(r0, block, go, ge, local)
        bits_at = _block_lookup(q, t, top, left, r0, c0, params, scoring, local, block, tiles,
                                m, n)
        walk(wk, bits_at, local=local, top=r0, left=c0)
    ops = finish(wk, local=local)[0]
    if local and score <= 0:
        return _result(job, scoring, mode, 0, 0, 0, 0, 0, "")
    return _result(job, scoring, mode, score, int(wk.i[0]), ei, int(wk.j[0]), ej, ops)


def tile_shape(m: int, n: int, tile: int = TILE) -> tuple[int, int]:
    """The padded table of a long pair of ``m`` x ``n`` (the shorter side first) on the tile
    wavefront: each side's bucket, a multiple of ``tile``.

    >>> tile_shape(2100, 5000)
    (3072, 5120)
    """
    return (-(-_bucket(m) // tile) * tile, -(-_bucket(n) // tile) * tile)


def tiled_score(query: Record, target: Record, qcodes: np.ndarray, tcodes: np.ndarray,
                params, params_t, scoring: Scoring, local: bool, tiles: dict,
                shape: tuple[int, int] | None = None) -> Alignment:
    """Score only: one long pair through the tile wavefront (``tiles``: its options), the
    shorter sequence on the rows, padded to ``shape`` (default :func:`tile_shape`);
    ``params_t``: the scheme's transposed scalars, for a query longer than its target."""
    swapped = qcodes.size > tcodes.size
    job = _Job(0, query, target, tcodes if swapped else qcodes,
               qcodes if swapped else tcodes, swapped)
    return _run_long(job, params_t if swapped else params, scoring, local, BLOCK, tiles,
                     score_only=True, shape=shape)


def align_records(pairs: Iterable[tuple[Record, Record]], scoring: Scoring,
                  mode: str = "global", score_only: bool = False, *, backend: str = "cpu",
                  chunk: int = 4096, max_bytes: int | None = None,
                  table_bytes: int = TABLE_BYTES, block: int = BLOCK,
                  use_pallas: bool | None = None, interpret: bool = False,
                  kernel: dict | None = None, tiled_min_length: int = TILED_MIN_LENGTH,
                  on_done=None, on_error=None) -> Iterator[Alignment]:
    """Align a stream of (query, target) record pairs, yielding results in input order.

    Pairs are taken ``chunk`` at a time, put in length buckets (the shorter sequence on the
    lanes) and aligned in batches of bounded memory. A pair whose traceback table would
    exceed ``table_bytes`` gets the checkpointed traceback (blocks of ``block``); one that
    would not fit in ``max_bytes`` even so raises :class:`ResourceError` (or, with
    ``on_error(pair, error)``, is reported and skipped). ``use_pallas`` (default: on GPU)
    runs the Pallas kernels: many pairs one per lane (score only), long pairs as tiles along
    block antidiagonals (shorter sequence >= ``tiled_min_length``); ``kernel`` overrides
    their shapes (``tile``, ``rows``, ``lanes``, ``num_warps``) and ``interpret`` runs them
    in interpret mode (tests). ``on_done(k)``: ``k`` more pairs done.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if scoring.minimise and mode != "global":
        raise ValueError("the edit preset is a global cost; use --mode global")
    check_end_gaps(scoring, mode)
    local = mode == "local"
    if use_pallas is None:
        use_pallas = backend == "gpu"
    tiles = {"tile": TILE, **(kernel or {}), "interpret": interpret} if use_pallas else None
    if tiles and block % tiles["tile"]:
        raise ValueError(f"block ({block}) must be a multiple of tile ({tiles['tile']})")
    limit = memory_limit(backend, max_bytes)
    device = jax.devices(backend)[0]
    symmetric = bool(np.array_equal(scoring.matrix, scoring.matrix.T))
    with jax.default_device(device):
        params = params_of(scoring)
        params_t = params if symmetric else params_of(scoring.transposed())
    buffer: list[tuple[Record, Record]] = []

    def flush() -> Iterator[Alignment]:
        cache: dict = {}
        done: dict[int, Alignment] = {}
        groups: dict[tuple, list[_Job]] = {}
        longs: list[_Job] = []
        for idx, (qr, tr) in enumerate(buffer):
            qc, tc = _encode(qr, scoring, cache), _encode(tr, scoring, cache)
            try:
                check_range(scoring, qc.size + tc.size)
            except ValueError as exc:
                raise InputError(str(exc), record=f"{qr.id} x {tr.id}") from None
            swapped = qc.size > tc.size
            job = _Job(idx, qr, tr, tc if swapped else qc, qc if swapped else tc, swapped)
            h, w = _bucket(job.q.size), _bucket(job.t.size)
            big = not score_only and (h + w) * h > table_bytes
            if not (score_only and tiles) and not big:   # the vmapped sweep: a few classes
                h, w = (int(v[0]) for v in classes.cpu_class(
                    np.array([job.q.size]), np.array([job.t.size]), score_only))
            if big:
                need = checkpoint_bytes(h, w, block)
                if limit and need > limit:
                    exc = ResourceError(
                        f"pair {qr.id} x {tr.id} ({qc.size} x {tc.size}) needs about "
                        f"{human_bytes(need)} to align with a traceback, more than the "
                        f"{human_bytes(limit)} allowed; use --score-only, a machine with more "
                        f"memory, or raise --max-memory")
                    if on_error is None:
                        raise exc
                    on_error((qr, tr), exc)
                    continue
                longs.append(job)
            else:
                groups.setdefault((h, w, swapped and not symmetric), []).append(job)
        with jax.default_device(device):
            for (h, w, transposed), members in groups.items():
                p = params_t if transposed else params
                if score_only and tiles and h >= tiled_min_length \
                        and len(members) < TILED_MAX_PAIRS:
                    for job in members:                  # few long pairs: tiles as lanes
                        done[job.index] = _run_long(job, p, scoring, local, block, tiles,
                                                    score_only=True)
                    if on_done:
                        on_done(len(members))
                    continue
                fixed = None
                if score_only and tiles:
                    cap = max(1, LANE_BUDGET.get(backend, 1 << 21) // h)
                else:                                    # a class's fixed batch rows
                    cap = fixed = classes.cpu_rows(h, w, score_only)
                    members = sorted(members, key=lambda j: j.q.size + j.t.size)
                for part in _split(members, cap) if fixed is None else \
                        [members[a:a + cap] for a in range(0, len(members), cap)]:
                    res = split_on_oom(  # out of device memory: halves, down to one pair
                        lambda jobs: _run_batch(jobs, h, w, p, scoring, local, score_only,
                                                tiles if score_only else None,
                                                fixed if len(jobs) == len(part) else None),
                        part, lambda j: f"pair {j.query.id} x {j.target.id}",
                        on_error and (lambda j, exc: on_error((j.query, j.target), exc)))
                    done.update((j.index, r) for j, r in zip(part, res) if r is not None)
                    if on_done:
                        on_done(len(part))
            for job in longs:
                p = params_t if (job.swapped and not symmetric) else params
                done[job.index] = _run_long(job, p, scoring, local, block, tiles)
                if on_done:
                    on_done(1)
        for idx in range(len(buffer)):
            if idx in done:
                yield done[idx]

    for pair in pairs:
        buffer.append(pair)
        if len(buffer) >= chunk:
            yield from flush()
            buffer = []
    if buffer:
        yield from flush()


def _records(seqs, prefix: str) -> list[Record]:
    if isinstance(seqs, (str, Record)):
        seqs = [seqs]
    return [s if isinstance(s, Record) else Record(id=f"{prefix}{k + 1}", sequence=s.upper())
            for k, s in enumerate(seqs)]


def align(query: str | Sequence[str], target: str | Sequence[str], mode: str = "global", *,
          scoring: Scoring | None = None, match=None, mismatch=None, matrix: str | None = None,
          gap_open=None, gap_extend=None, preset: str | None = None, pairs: str = "all",
          score_only: bool = False, backend: str = "auto", end_gaps: str = "penalized",
          end_open=None, end_extend=None) -> Alignment | list[Alignment]:
    """Align strings: one query and one target give one :class:`Alignment`; lists give all
    query x target pairs (query-major), or the i-th with the i-th when ``pairs="zip"``.

    Scores: ``scoring``, or ``match``/``mismatch``, a ``matrix`` name (Biopython's, e.g.
    ``BLOSUM62``), or ``preset="edit"``; gap penalties ``gap_open``/``gap_extend`` (a gap of
    length L costs ``open + (L - 1) * extend``). Defaults: NUC.4.4, 10, 0.5. Global mode:
    ``end_gaps="free"`` makes gaps before the first or after the last residue of either
    sequence cost nothing (EMBOSS needle's default), ``end_open``/``end_extend`` give them
    penalties of their own (needle's ``-endweight -endopen -endextend``).
    """
    from jaxrna.runtime import resolve_backend

    single = isinstance(query, str) and isinstance(target, str)
    if scoring is None:
        scoring = make_scoring(match, mismatch, matrix, gap_open, gap_extend, preset,
                               end_gaps, end_open, end_extend)
    elif end_gaps != "penalized" or end_open is not None or end_extend is not None:
        raise ValueError("give end gaps with the score options or inside scoring, not both")
    qs, ts = _records(query, "query"), _records(target, "target")
    if pairs == "zip":
        if len(qs) != len(ts):
            raise ValueError(f"pairs='zip' needs as many queries as targets "
                             f"({len(qs)} != {len(ts)})")
        todo = list(zip(qs, ts))
    elif pairs == "all":
        todo = [(a, b) for a in qs for b in ts]
    else:
        raise ValueError(f"pairs must be 'all' or 'zip', not {pairs!r}")
    out = list(align_records(todo, scoring, mode, score_only, backend=resolve_backend(backend)))
    return out[0] if single else out
