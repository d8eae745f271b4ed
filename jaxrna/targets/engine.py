"""The fast scan of a block of targets: packed lanes, the bulk column scan, segment refills.

1. A chunk of targets is packed into one stream of base codes (a reset flag on each target's
   first base) and cut into ``B`` lanes of ``S`` columns, each lane preceded by ``W`` columns of
   the stream before it. ``W`` is :func:`~jaxrna.targets.scoring.exact_overlap`: from that far
   in, a lane's values equal the whole target's, so every stream column is owned by exactly
   one lane and computed exactly.
2. :func:`~jaxrna.targets.scan.scan_lanes` gives, per miRNA, each column's best candidate
   score; the nonzero columns of each target are grouped into clusters.
3. Each cluster is refilled as a short segment starting ``2 W`` columns before it (or at the
   target start), with full matrices (:func:`~jaxrna.targets.scan.fill_segments`); the
   candidates and their tracebacks lie in its exact part.
4. :mod:`jaxrna.targets.hits` pools the candidates of each (miRNA, target) pair, sorts and
   filters them over the whole target, and traces the survivors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np

from jaxrna.alphabet import encode
from jaxrna.targets import hits as hitlib
from jaxrna.targets.scan import RESET, fill_segments, scan_lanes, unpack_track
from jaxrna.targets.scoring import RowTables, ScanParams, exact_overlap, max_gain, row_tables

ROW_STEP = 8          # miRNA heights are padded to multiples of this (few compiled shapes)
OVERLAP_STEP = 64     # lane overlaps are rounded up to multiples of this
SEGMENT_STEP = 64     # lane lengths are rounded up to multiples of this
SEGMENT_MIN = 128     # segment lengths are powers of two from this
SEGMENT_BATCH = 4096  # segments per refill call
MAX_LANES = 32768
MIN_LANE = 512


def _round_up(x: int, step: int) -> int:
    return -(-x // step) * step


def _pow2(x: int) -> int:
    p = 1
    while p < x:
        p *= 2
    return p


def _lanes_bucket(x: int) -> int:
    """Lane counts are powers of 8 up to MAX_LANES (few compiled shapes)."""
    p = 1
    while p < x and p < MAX_LANES:
        p *= 8
    return min(p, MAX_LANES)


@dataclass
class Query:
    """One miRNA prepared for scanning (row tables padded at the top to ``height`` rows)."""

    id: str
    description: str
    sequence: str                  # as read (case and T/U kept for display)
    tables: RowTables
    height: int
    gain: int
    overlap: int | None            # exact lane overlap in columns (None: gaps are free)
    profile: np.ndarray = field(repr=False)   # (5, height, 1)
    gap_open: np.ndarray = field(repr=False)  # (height, 1)
    gap_extend: np.ndarray = field(repr=False)
    seed: np.ndarray = field(repr=False)

    @property
    def n(self) -> int:
        return len(self.sequence)

    def tables_at(self, height: int):
        """(profile (5, height), gap_open, gap_extend, seed (height,)) padded at the top."""
        extra = height - self.height
        profile = np.concatenate([np.full((5, extra), -(self.gain + 1), np.int32), self.profile[:, :, 0]], axis=1)
        zeros = np.zeros(extra, np.int32)
        return (profile, np.concatenate([zeros, self.gap_open[:, 0]]),
                np.concatenate([zeros, self.gap_extend[:, 0]]),
                np.concatenate([np.zeros(extra, bool), self.seed[:, 0]]))


def prepare_query(id: str, description: str, sequence: str, params: ScanParams) -> Query:
    tables = row_tables(sequence, params)
    n = tables.n
    height = _round_up(max(n, 1), ROW_STEP)
    gain = max_gain(tables)
    pad = height - n
    profile = np.full((5, height, 1), -(gain + 1), dtype=np.int32)
    profile[:, pad:, 0] = tables.profile.T
    gap_open = np.zeros((height, 1), np.int32)
    gap_extend = np.zeros((height, 1), np.int32)
    seed = np.zeros((height, 1), bool)
    gap_open[pad:, 0] = tables.open
    gap_extend[pad:, 0] = tables.extend
    seed[pad:, 0] = tables.seed
    overlap = exact_overlap(n, gain, params)
    return Query(id, description, sequence, tables, height, gain, overlap,
                 profile, gap_open, gap_extend, seed)


def value_dtype(queries: list[Query], params: ScanParams):
    """int16 when every value the fill can reach fits comfortably, else int32."""
    if not queries:
        return jnp.int16
    if params.gaps_can_gain:
        return jnp.int32
    gain = max(q.gain for q in queries)
    low = min(int(q.profile.min()) for q in queries)
    gaps = (max(abs(params.gap_open), abs(params.seed_open))
            + max(abs(params.gap_extend), abs(params.seed_extend)))
    bound = 2 * gain + abs(low) + 2 * gaps + 2
    return jnp.int16 if bound < 30000 else jnp.int32


@dataclass
class Target:
    id: str
    description: str
    sequence: str
    codes: np.ndarray = field(repr=False)

    def __len__(self) -> int:
        return len(self.sequence)


def make_target(id: str, description: str, sequence: str) -> Target:
    return Target(id, description, sequence, encode(sequence))


class Chunk:
    """Targets packed into one stream and cut into lanes of ``S`` owned columns, ``W`` overlap."""

    def __init__(self, targets: list[Target], overlap: int | None, max_lanes: int = MAX_LANES,
                 lane_columns: int | None = None):
        self.targets = targets
        lengths = np.array([len(t) for t in targets], dtype=np.int64)
        self.starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self.total = int(lengths.sum())
        if overlap is None:  # free gaps: no finite overlap, one whole target per lane
            longest = int(lengths.max())
            self.width = 0
            self.span = _round_up(longest, SEGMENT_STEP)
            self.n_lanes = _lanes_bucket(len(targets))
            lanes = np.full((self.span, self.n_lanes), 4 | RESET, dtype=np.int8)
            for k, t in enumerate(targets):
                lanes[:len(t), k] = t.codes
                lanes[0, k] |= RESET
            self.lanes = lanes
            self.lane_of_target = True
            return
        self.lane_of_target = False
        self.width = _round_up(overlap, OVERLAP_STEP)
        if lane_columns:  # tests: short lanes, many lane boundaries
            self.span = lane_columns
            self.n_lanes = _lanes_bucket(-(-self.total // lane_columns))
        else:
            want = max(MIN_LANE, 4 * self.width)
            self.n_lanes = min(_lanes_bucket(-(-self.total // want)), max_lanes)
            self.span = _round_up(-(-self.total // self.n_lanes), SEGMENT_STEP)
        stream = np.full(self.width + self.n_lanes * self.span, 4, dtype=np.int8)
        body = stream[self.width:self.width + self.total]
        for t, s in zip(targets, self.starts):
            body[s:s + len(t)] = t.codes
        body[self.starts] |= RESET
        stream[self.width + self.total:] |= RESET  # past the end: inert filler
        idx = (np.arange(self.span + self.width)[:, None]
               + np.arange(self.n_lanes)[None, :] * self.span)
        self.lanes = stream[idx]

    def candidate_columns(self, colmax: np.ndarray):
        """``(target index, 0-based column)`` of every column with a candidate."""
        if self.lane_of_target:
            cols, lanes = np.nonzero(colmax)
            keep = lanes < len(self.targets)
            cols, lanes = cols[keep], lanes[keep]
            keep = cols < np.array([len(t) for t in self.targets])[lanes]
            return lanes[keep], cols[keep]
        owned = colmax[self.width:]                     # (S, B)
        flat = owned.T.reshape(-1)[:self.total]         # stream order
        pos = np.flatnonzero(flat)
        tidx = np.searchsorted(self.starts, pos, side="right") - 1
        return tidx, pos - self.starts[tidx]


def clusters(cols: np.ndarray, gap: int) -> list[tuple[int, int]]:
    """Runs of sorted columns with no gap wider than ``gap``, as ``(first, last)``."""
    if len(cols) == 0:
        return []
    cols = np.sort(cols)
    breaks = np.flatnonzero(np.diff(cols) > gap)
    firsts = np.concatenate([[cols[0]], cols[breaks + 1]])
    lasts = np.concatenate([cols[breaks], [cols[-1]]])
    return list(zip(firsts.tolist(), lasts.tolist()))


class Engine:
    """Scans prepared miRNAs against chunks of targets; returns accepted hits per pair."""

    def __init__(self, params: ScanParams, energy=None, max_lanes: int = MAX_LANES,
                 lane_columns: int | None = None):
        self.params = params
        self.energy = energy
        self.max_lanes = max_lanes
        self.lane_columns = lane_columns

    def overlap(self, queries: list[Query]) -> int | None:
        if any(q.overlap is None for q in queries):
            return None
        return max(q.overlap for q in queries)

    def scan_chunk(self, queries: list[Query], targets: list[Target], progress=None):
        """Hits of every query against every target of the chunk: ``{(q, t): [Hit, ...]}``
        for the pairs with at least one accepted hit (indices into the two lists).
        ``progress.update(n)`` is called with the pairs done as the scan goes."""
        params = self.params
        if not targets or not queries:
            return {}
        # a miRNA whose best possible score is below the threshold cannot have hits
        live = [k for k, q in enumerate(queries)
                if q.gain >= params.score_threshold or params.gaps_can_gain]
        if progress is not None and len(live) < len(queries):
            progress.update((len(queries) - len(live)) * len(targets))
        if not live:
            return {}
        chunk = Chunk(targets, self.overlap([queries[k] for k in live]), self.max_lanes,
                      self.lane_columns)
        dtype = value_dtype([queries[k] for k in live], params)
        lanes = jnp.asarray(chunk.lanes)
        jobs = []  # (query index, target index, first col, last col) clusters (0-based cols)
        for k in live:
            q = queries[k]
            colmax = np.asarray(scan_lanes(q.profile, q.gap_open, q.gap_extend, q.seed, lanes,
                                           threshold=params.score_threshold, dtype=dtype))
            tidx, cols = chunk.candidate_columns(colmax)
            if progress is not None:
                progress.update(len(targets))
            if len(tidx) == 0:
                continue
            order = np.lexsort((cols, tidx))
            tidx, cols = tidx[order], cols[order]
            bounds = np.flatnonzero(np.diff(tidx)) + 1
            for tt, cc in zip(np.split(tidx, bounds), np.split(cols, bounds)):
                gap = 2 * (q.overlap or len(targets[tt[0]]))
                for first, last in clusters(cc, gap):
                    jobs.append((k, int(tt[0]), first, last))
        segments = self._fill(queries, targets, jobs, dtype)
        return self._select(queries, targets, jobs, segments)

    def _fill(self, queries, targets, jobs, dtype):
        """Full matrices for every cluster, batched by segment length (rows padded to the
        tallest miRNA)."""
        out = [None] * len(jobs)
        groups: dict[int, list[int]] = {}
        starts = []
        height = max((queries[k].height for k, _, _, _ in jobs), default=0)
        for idx, (k, t, first, last) in enumerate(jobs):
            q = queries[k]
            back = 2 * q.overlap if q.overlap is not None else first
            start = max(0, first - back)
            starts.append(start)
            length = max(SEGMENT_MIN, _pow2(last + 1 - start))
            groups.setdefault(length, []).append(idx)
        for length, members in groups.items():
            for s in range(0, len(members), SEGMENT_BATCH):
                part = members[s:s + SEGMENT_BATCH]
                width = _lanes_bucket(len(part))
                lanes = np.full((length, width), 4, dtype=np.int8)
                prof = np.zeros((5, height, width), np.int32)
                gopen = np.zeros((height, width), np.int32)
                gext = np.zeros((height, width), np.int32)
                seed = np.zeros((height, width), bool)
                for lane, idx in enumerate(part):
                    k, t, first, last = jobs[idx]
                    q = queries[k]
                    codes = targets[t].codes[starts[idx]:last + 1]
                    lanes[:len(codes), lane] = codes
                    prof[:, :, lane], gopen[:, lane], gext[:, lane], seed[:, lane] = q.tables_at(height)
                best, code = fill_segments(prof, gopen, gext, seed, lanes,
                                           threshold=self.params.score_threshold, dtype=dtype)
                best = np.asarray(best).astype(np.int32)
                code = np.asarray(code)
                for lane, idx in enumerate(part):
                    q = queries[jobs[idx][0]]
                    t0, t1, t2, t3 = unpack_track(code[:, :, lane])
                    out[idx] = hitlib.Segment(starts[idx], best[:, :, lane], t0, t1, t2, t3, height - q.n)
        return out

    def _select(self, queries, targets, jobs, segments):
        params = self.params
        per_pair: dict[tuple[int, int], list[int]] = {}
        for idx, (k, t, _, _) in enumerate(jobs):
            per_pair.setdefault((k, t), []).append(idx)
        results = {}
        for (k, t), members in per_pair.items():
            scores, rows, cols, owner = [], [], [], []
            for idx in members:
                _, _, first, last = jobs[idx]
                s, r, c = segments[idx].candidates(first + 1, last + 1, params.score_threshold)
                scores.append(s)
                rows.append(r)
                cols.append(c)
                owner.append(np.full(len(s), idx))
            scores, rows, cols, owner = (np.concatenate(x) for x in (scores, rows, cols, owner))
            order = hitlib.rank_candidates(scores, rows, cols)
            scores, rows, cols, owner = scores[order], rows[order], cols[order], owner[order]
            keep = hitlib.diagonal_filter(rows, cols)
            ranked = [(int(scores[x]), int(rows[x]), int(cols[x]), segments[owner[x]]) for x in keep]
            q, tg = queries[k], targets[t]
            found = hitlib.build_hits(q.sequence, q.tables.codes, tg.sequence, tg.codes, ranked,
                                      params, self.energy)
            if found:
                results[(k, t)] = found
        return results
