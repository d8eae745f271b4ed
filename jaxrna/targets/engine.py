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
from jaxrna.targets.scan import RESET, fill_segments, scan_lanes
from jaxrna.targets.scoring import RowTables, ScanParams, exact_overlap, max_gain, row_tables

ROW_STEP = 8          # miRNA heights are padded to multiples of this (few compiled shapes)
OVERLAP_STEP = 32     # lane overlaps are rounded up to multiples of this
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

    @property
    def pad(self) -> int:
        return self.height - self.n

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
        self.codes = np.concatenate([t.codes for t in targets]).astype(np.int8)
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
            self.span = -(-self.total // self.n_lanes)
        stream = np.full(self.width + self.n_lanes * self.span, 4, dtype=np.int8)
        body = stream[self.width:self.width + self.total]
        body[:] = self.codes
        body[self.starts] |= RESET
        stream[self.width + self.total:] |= RESET  # past the end: inert filler
        idx = (np.arange(self.span + self.width)[:, None]
               + np.arange(self.n_lanes)[None, :] * self.span)
        self.lanes = stream[idx]

    def candidate_columns(self, flags: np.ndarray):
        """``(target index, 0-based column)`` of every column flagged as holding a candidate,
        in stream order."""
        if self.lane_of_target:
            lanes, cols = np.nonzero(flags.T)
            keep = lanes < len(self.targets)
            cols, lanes = cols[keep], lanes[keep]
            keep = cols < np.array([len(t) for t in self.targets])[lanes]
            return lanes[keep], cols[keep]
        col, lane = np.nonzero(flags[self.width:])     # owned columns (S, B)
        pos = np.sort(lane.astype(np.int64) * self.span + col)
        pos = pos[pos < self.total]
        tidx = np.searchsorted(self.starts, pos, side="right") - 1
        return tidx, pos - self.starts[tidx]


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
        """Hits of every query against every target of the chunk: ``{(q, t): [Hit, ...]}`` for
        the pairs with at least one accepted hit (indices into the two lists)."""
        return {(k, t): h for k, found in self.iter_chunk(queries, targets, progress)
                for t, h in found.items()}

    def iter_chunk(self, queries: list[Query], targets: list[Target], progress=None):
        """Yield ``(query index, {target index: [Hit, ...]})`` for every query, in order.
        ``progress.update(n)`` is called with the pairs done as the scan goes."""
        params = self.params
        if not targets:
            for k in range(len(queries)):
                yield k, {}
            return
        # a miRNA whose best possible score is below the threshold cannot have hits
        live = [q.gain >= params.score_threshold or params.gaps_can_gain for q in queries]
        chunk = None
        if any(live):
            chunk = Chunk(targets, self.overlap([q for q, ok in zip(queries, live) if ok]),
                          self.max_lanes, self.lane_columns)
            dtype = value_dtype([q for q, ok in zip(queries, live) if ok], params)
            lanes = jnp.asarray(chunk.lanes)
        for k, q in enumerate(queries):
            found = {}
            if live[k]:
                flags = np.asarray(scan_lanes(q.profile, q.gap_open, q.gap_extend, q.seed, lanes,
                                              threshold=params.score_threshold, dtype=dtype))
                tidx, cols = chunk.candidate_columns(flags)
                if len(tidx):
                    batches = self._fill(q, chunk, tidx, cols, dtype)
                    found = hitlib.select_hits(batches, q.sequence, q.tables.codes, targets, params,
                                               self.energy)
            if progress is not None:
                progress.update(len(targets))
            yield k, found

    def _fill(self, q: Query, chunk: "Chunk", tidx: np.ndarray, cols: np.ndarray, dtype):
        """Full matrices of every cluster of candidate columns (``tidx``/``cols`` in stream
        order), batched by segment length."""
        new = np.ones(len(tidx), dtype=bool)
        gap = 2 * q.overlap if q.overlap is not None else None
        new[1:] = (tidx[1:] != tidx[:-1]) | ((cols[1:] - cols[:-1] > gap) if gap is not None else False)
        heads = np.flatnonzero(new)
        tails = np.append(heads[1:], len(tidx)) - 1
        target, first, last = tidx[heads], cols[heads], cols[tails]
        start = np.maximum(0, first - gap) if gap is not None else np.zeros_like(first)
        span = (last + 1 - start).astype(np.int64)
        length = np.maximum(SEGMENT_MIN, 1 << np.ceil(np.log2(span)).astype(np.int64))
        batches = []
        for size in np.unique(length).tolist():
            members = np.flatnonzero(length == size)
            for s in range(0, len(members), SEGMENT_BATCH):
                part = members[s:s + SEGMENT_BATCH]
                width = _lanes_bucket(len(part))
                pos = chunk.starts[target[part]][None, :] + start[part][None, :] + np.arange(size)[:, None]
                inside = (start[part][None, :] + np.arange(size)[:, None]) <= last[part][None, :]
                lanes = np.full((size, width), 4, dtype=np.int8)
                lanes[:, :len(part)] = np.where(inside, chunk.codes[np.minimum(pos, chunk.total - 1)], 4)
                best, code = fill_segments(q.profile, q.gap_open, q.gap_extend, q.seed, lanes,
                                           threshold=self.params.score_threshold, dtype=dtype)
                batches.append(hitlib.SegmentBatch(
                    np.asarray(best)[:, :, :len(part)], np.asarray(code)[:, :, :len(part)],
                    target[part], start[part], first[part] + 1, last[part] + 1, q.pad))
        return batches
