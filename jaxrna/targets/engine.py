"""The fast scan of a block of targets: packed lanes, the bulk column scan, segment refills.

1. A chunk of targets is packed into one stream of base codes (a reset flag on each target's
   first base) and cut into ``B`` lanes of ``S`` columns, each lane preceded by ``W`` columns of
   the stream before it. ``W`` is :func:`~jaxrna.targets.scoring.exact_overlap`: from that far
   in, a lane's values equal the whole target's, so every stream column is owned by exactly
   one lane and computed exactly.
2. The bulk scan (:func:`~jaxrna.targets.scan.scan_lanes_words`, or on GPUs the Pallas kernel
   :func:`~jaxrna.kernels.miranda_fill.scan_lanes_packed`) flags, per miRNA, every column that
   holds a candidate; the flagged columns of each target are grouped into clusters.
3. Each cluster is refilled as a short segment starting ``2 W`` columns before it (or at the
   target start), with full matrices (:func:`~jaxrna.targets.scan.fill_segments`, on GPUs
   :func:`~jaxrna.kernels.miranda_fill.fill_segments_pallas`); the candidates and their
   tracebacks lie in its exact part.
4. :mod:`jaxrna.targets.hits` pools the candidates of each (miRNA, target) pair, sorts and
   filters them over the whole target, and traces the survivors.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.alphabet import encode
from jaxrna.targets import hits as hitlib
from jaxrna.kernels.miranda_fill import packed_positions
from jaxrna.targets.scan import RESET, WORD, fill_segments, scan_lanes_words
from jaxrna.targets.scoring import RowTables, ScanParams, exact_overlap, max_gain, row_tables

ROW_STEP = 8          # miRNA heights are padded to multiples of this (few compiled shapes)
OVERLAP_STEP = 32     # lane overlaps are rounded up to multiples of this
SEGMENT_MIN = 128     # segment lengths are powers of two from this
SEGMENT_BATCH = 4096  # segments per refill call
PALLAS_SEGMENT_BATCH = 1024  # segments per Pallas refill launch (fixed: one shape per length)
MAX_LANES = 32768
MIN_LANE = 512


def _round_up(x: int, step: int) -> int:
    return -(-x // step) * step


def _pow2(x: int) -> int:
    p = 1
    while p < x:
        p *= 2
    return p


def _pow2_floor(x: int) -> int:
    return 1 << (max(int(x), 1).bit_length() - 1)


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
            self.span = _round_up(longest, WORD)
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
            want = max(MIN_LANE, 4 * self.width)  # owned columns per lane, at least
            self.n_lanes = max(1, min(_pow2_floor(self.total // want), max_lanes))
            self.span = -(-self.total // self.n_lanes)
        stream = np.full(self.width + self.n_lanes * self.span, 4, dtype=np.int8)
        body = stream[self.width:self.width + self.total]
        body[:] = self.codes
        body[self.starts] |= RESET
        stream[self.width + self.total:] |= RESET  # past the end: inert filler
        rows = _round_up(self.span + self.width, WORD)  # whole flag words
        stream = np.concatenate([stream, np.full(rows, 4 | RESET, dtype=np.int8)])
        # lane b = stream[b * span : b * span + rows], laid out (rows, lanes)
        view = np.lib.stride_tricks.as_strided(stream, shape=(rows, self.n_lanes),
                                               strides=(1, self.span), writeable=False)
        self.lanes = np.ascontiguousarray(view)

    def candidate_columns(self, col: np.ndarray, lane: np.ndarray):
        """``(target index, 0-based column)`` of every flagged lane column (``col``, ``lane``
        index the lanes array), owned by its lane, in stream order."""
        if self.lane_of_target:
            keep = lane < len(self.targets)
            col, lane = col[keep], lane[keep]
            keep = col < np.array([len(t) for t in self.targets])[lane]
            col, lane = col[keep], lane[keep]
            order = np.lexsort((col, lane))
            return lane[order], col[order]
        keep = (col >= self.width) & (lane < self.n_lanes)
        pos = np.sort(lane[keep].astype(np.int64) * self.span + (col[keep] - self.width))
        pos = pos[pos < self.total]
        tidx = np.searchsorted(self.starts, pos, side="right") - 1
        return tidx, pos - self.starts[tidx]


class Engine:
    """Scans prepared miRNAs against chunks of targets; returns accepted hits per pair."""

    def __init__(self, params: ScanParams, energy=None, max_lanes: int = MAX_LANES,
                 lane_columns: int | None = None, kernel: str = "auto", devices=None,
                 query_block: int = 8, refill_device=None):
        """``kernel``: ``"xla"`` (the pure-JAX scan), ``"pallas"`` (the GPU kernel of
        :mod:`jaxrna.kernels.miranda_fill`, ``query_block`` miRNAs per launch and device,
        spread over ``devices``) or ``"auto"`` (Pallas on GPUs). ``refill_device``: where the
        short segment refills run (default: the first device)."""
        self.params = params
        self.energy = energy
        self.max_lanes = max_lanes
        self.lane_columns = lane_columns
        self.devices = list(devices) if devices else jax.devices()
        if kernel == "auto":
            kernel = "pallas" if self.devices[0].platform == "gpu" else "xla"
        self.kernel = kernel
        self.query_block = query_block
        self.refill_device = refill_device or self.devices[0]
        #: wall seconds spent in the bulk scan, the segment refills and hit selection
        self.timings = {"scan": 0.0, "refill": 0.0, "select": 0.0}

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
        dtype = value_dtype([q for q, ok in zip(queries, live) if ok], params)
        if any(live):
            chunk = Chunk(targets, self.overlap([q for q, ok in zip(queries, live) if ok]),
                          self.max_lanes, self.lane_columns)
        flagged = self._flag_pallas if self.kernel != "xla" else self._flag_xla
        clock = time.perf_counter
        t0 = clock()
        for k, q, cols_lanes in flagged(queries, live, chunk):
            found = {}
            t1 = clock()
            self.timings["scan"] += t1 - t0
            if cols_lanes is not None:
                tidx, cols = chunk.candidate_columns(*cols_lanes)
                if len(tidx):
                    batches = self._fill(q, chunk, tidx, cols, dtype)
                    t2 = clock()
                    self.timings["refill"] += t2 - t1
                    found = hitlib.select_hits(batches, q.sequence, q.tables.codes, targets, params,
                                               self.energy)
                    self.timings["select"] += clock() - t2
            if progress is not None:
                progress.update(len(targets))
            yield k, found
            t0 = clock()

    def _flag_xla(self, queries, live, chunk):
        """``(query index, query, (cols, lanes) of flagged columns or None)``, one at a time."""
        if chunk is not None:
            lanes = jnp.asarray(chunk.lanes)
            dtype = value_dtype([q for q, ok in zip(queries, live) if ok], self.params)
        for k, q in enumerate(queries):
            if not live[k]:
                yield k, q, None
                continue
            words = np.asarray(scan_lanes_words(q.profile, q.gap_open, q.gap_extend, q.seed, lanes,
                                                threshold=self.params.score_threshold, dtype=dtype))
            yield k, q, packed_positions(words)

    def _flag_pallas(self, queries, live, chunk):
        """As :meth:`_flag_xla`, through the Pallas kernel: ``query_block`` miRNAs per launch
        and device, the blocks of consecutive miRNAs spread over the devices (dispatched
        asynchronously, collected in order)."""
        from jaxrna.kernels.miranda_fill import BLOCK, scan_lanes_packed

        if chunk is None:
            for k, q in enumerate(queries):
                yield k, q, None
            return
        length = _round_up(chunk.lanes.shape[0], WORD)
        width = _round_up(chunk.lanes.shape[1], BLOCK)
        lanes = np.full((length, width), 4 | RESET, dtype=np.int8)
        lanes[:chunk.lanes.shape[0], :chunk.lanes.shape[1]] = chunk.lanes
        on_device = [jax.device_put(lanes, d) for d in self.devices]
        order = [k for k in range(len(queries)) if live[k]]
        qb = self.query_block
        blocks = [order[s:s + qb] for s in range(0, len(order), qb)]
        pending = []  # (block, device array), at most one block in flight per device
        done: dict[int, tuple] = {}
        nxt = 0
        for bi, block in enumerate(blocks):
            height = max(queries[k].height for k in block)
            tabs = [queries[k].tables_at(height) for k in block]
            tabs += [tabs[-1]] * (qb - len(block))  # a full block: one compiled shape
            dev = self.devices[bi % len(self.devices)]
            args = [jax.device_put(np.stack([t[x] for t in tabs]), dev) for x in range(4)]
            out = scan_lanes_packed(*args, on_device[bi % len(self.devices)],
                                    self.params.score_threshold)
            pending.append((block, out))
            if len(pending) >= len(self.devices):
                blk, arr = pending.pop(0)
                words = np.asarray(arr)
                for x, k in enumerate(blk):
                    done[k] = packed_positions(words[x])
            while nxt < len(queries) and (not live[nxt] or nxt in done):
                yield nxt, queries[nxt], done.pop(nxt, None)
                nxt += 1
        for blk, arr in pending:
            words = np.asarray(arr)
            for x, k in enumerate(blk):
                done[k] = packed_positions(words[x])
        while nxt < len(queries):
            yield nxt, queries[nxt], done.pop(nxt, None)
            nxt += 1
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
        use_pallas = (self.kernel == "pallas" and dtype == jnp.int16
                      and self.refill_device.platform == "gpu")
        if use_pallas:
            from jaxrna.kernels.miranda_fill import fill_segments_pallas
        batches = []
        for size in np.unique(length).tolist():
            members = np.flatnonzero(length == size)
            step = PALLAS_SEGMENT_BATCH if use_pallas else SEGMENT_BATCH
            for s in range(0, len(members), step):
                part = members[s:s + step]
                # Pallas: one fixed width (few compiled shapes, little padding); XLA: powers of 2
                width = PALLAS_SEGMENT_BATCH if use_pallas else max(64, _pow2(len(part)))
                pos = chunk.starts[target[part]][None, :] + start[part][None, :] + np.arange(size)[:, None]
                inside = (start[part][None, :] + np.arange(size)[:, None]) <= last[part][None, :]
                lanes = np.full((size, width), 4, dtype=np.int8)
                lanes[:, :len(part)] = np.where(inside, chunk.codes[np.minimum(pos, chunk.total - 1)], 4)
                with jax.default_device(self.refill_device):
                    if use_pallas:
                        best, code = fill_segments_pallas(q.profile[:, :, 0], q.gap_open[:, 0],
                                                          q.gap_extend[:, 0], q.seed[:, 0], lanes)
                    else:
                        best, code = fill_segments(q.profile, q.gap_open, q.gap_extend, q.seed, lanes,
                                                   threshold=self.params.score_threshold, dtype=dtype)
                batches.append(hitlib.SegmentBatch(
                    np.asarray(best)[:, :, :len(part)], np.asarray(code)[:, :, :len(part)],
                    target[part], start[part], first[part] + 1, last[part] + 1, q.pad))
        return batches
