"""The fast scan of a chunk of targets: packed lanes, the bulk column scan, device-side
candidate extraction, spread over every device.

1. A chunk of targets is packed into one stream of base codes (a reset flag on each target's
   first base) and cut into ``B`` lanes of ``S`` columns, each lane preceded by ``W`` columns of
   the stream before it. ``W`` is :func:`~jaxrna.targets.scoring.exact_overlap`: from that far
   in, a lane's values equal the whole target's, so every stream column is owned by exactly
   one lane and computed exactly.
2. The bulk scan (:func:`~jaxrna.targets.scan.scan_lanes_words`, or on GPUs the Pallas kernel
   :func:`~jaxrna.kernels.miranda_fill.scan_lanes_packed`) flags, per miRNA, every column that
   holds a candidate, 32 columns to a word.
3. On the same device, :mod:`jaxrna.targets.extract` refills every flagged word's columns as a
   short segment and extracts and traces back the candidates; only they come back.
4. :mod:`jaxrna.targets.select` (host, NumPy) pools the candidates of each (miRNA, target)
   pair, sorts and filters them over the whole target and builds the hit strings.

miRNAs go in blocks of ``query_block`` (one bulk-scan launch); device threads (three per GPU,
so one block's read-backs overlap the other blocks' work) take the blocks in turn from every
device, and :meth:`Engine.iter_traced` hands them back in miRNA order whatever device ran
them. Where gaps are free (no finite overlap) a whole target is one lane and the candidates are
extracted on the host (:mod:`jaxrna.targets.hits`).

Compiled programs (issue 26): a chunk's device arrays take their shapes from its *class*, its
nucleotides padded to a power of two from :data:`MIN_CHUNK_CLASS` (later chunks keep the first
one's class): :data:`LANE_COLUMNS`-column lanes, the lane room, the letters, the refill stream
and the target starts all follow from it; the chunk's own sizes (nucleotides, lanes used, lane
length, overlap) are traced values, the scans' loops bounded by them. The refill lead, the lane
room and the value type follow from the options and the run's tallest miRNA height
(:func:`lead_for`), not from the letters; miRNA heights are mapped to at most
:data:`MAX_HEIGHTS` per run (:func:`height_classes`); refill launches have a fixed size
(:data:`LANE_BATCH`), their candidates fetched ``capacity`` at a time by the same program.
Thresholds, scale and penalties are traced. So a run with one chunk class compiles at most
**6 programs** (``2 + 2 * MAX_HEIGHTS``: lane packing, tiling, and per height the bulk scan
with its tile counts and the refill with its traceback), whatever its lengths and scores; a
second class (a later chunk larger than the first's class, a run on a file of another power of
two) or another lead (gap penalties or a scale that widen the exact overlap W past the lead's
power of two) prepares the same set again. :mod:`jaxrna.targets.warmup` prepares them ahead.
Not covered: free gaps (a zero gap penalty or a scale <= 0: whole targets per lane, host
extraction) and ``profile`` (each stage its own program).

>>> p = ScanParams(no_energy=True)
>>> q = prepare_query("m", "", "GUGAGAUCAUUUUGAAAGCUG", p)
>>> found = Engine(p).scan_chunk([q], [make_target("t", "", "UAGUUUUCACAAUGAUCUCGG")])
>>> [(k, [h.score for h in hits]) for k, hits in found.items()]
[((0, 0), [167])]
"""

from __future__ import annotations

import functools
import itertools
import os
import sys
import threading
import time
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.programs import stored_jit
from jaxrna.alphabet import CODE_OF_BYTE
from jaxrna.alphabet import encode
from jaxrna.kernels.miranda_fill import packed_positions
from jaxrna.targets import extract
from jaxrna.targets import hits as hitlib
from jaxrna.targets.scan import RESET, WORD, fill_segments, scan_lanes_words
from jaxrna.targets.scoring import (RowTables, ScanParams, exact_overlap, gain_bound, max_gain,
                                    row_tables)
from jaxrna.stages import NO_EVENTS, Events
from jaxrna.targets.select import (MOVES_PER_WORD, SpilledRows, TargetText, Traced, accepted_hits,
                                   select, traced_from_batches)

ROW_STEP = 8          # miRNA heights are padded to multiples of this (few compiled shapes)
OVERLAP_STEP = 32     # lane overlaps are rounded up to multiples of this
SEGMENT_MIN = 128     # segment lengths are powers of two from this
SEGMENT_BATCH = 4096  # free gaps: segments per refill call
#: refill lanes (tiles) per device call: a fixed size (one program), the last call topped up
#: with empty lanes (a GPU refills 32,768 tiles in well under a millisecond; a CPU's work is
#: per tile, so small calls waste less)
LANE_BATCH = {"pallas": 32768, "xla": 1024}
THREADS_PER_DEVICE = {"gpu": 3}               # device threads (default 1)
LOOKAHEAD = 4         # blocks a device thread may run ahead of the consumer, per thread
MAX_LANES = 32768
MIN_LANE = 512
#: Chunks are sized in classes: their nucleotides padded to a power of two from this (the
#: device arrays' shapes follow from the class, the chunk's own sizes are traced values)
MIN_CHUNK_CLASS = 1 << 16
#: Columns per lane of a full class: a class of C nucleotides gets C / LANE_COLUMNS lanes
#: (at most ``max_lanes``), so its lanes are 512-1024 columns long, as MIN_LANE asks
LANE_COLUMNS = 1024
#: miRNA heights (lengths rounded up to ROW_STEP) are mapped to at most this many per run
#: (the most common one and the tallest; the miRNAs between are padded to the tallest)
MAX_HEIGHTS = 2
#: Python's thread switch interval while several device threads run (seconds; Python's default
#: is 5 ms): a thread back from the device gets the interpreter sooner, so the devices idle less
SWITCH_INTERVAL = 0.0005


def height_classes(heights: list[int], limit: int = MAX_HEIGHTS) -> dict[int, int]:
    """Map each height to the height it is scanned with: itself where the run has at most
    ``limit`` distinct heights, else one of ``limit`` kept heights (the tallest, then the most
    common ones) at least as tall (padding rows above a miRNA are inert: the same answer).

    >>> height_classes([24, 24, 32]), height_classes([24, 24, 32, 40, 24])
    ({24: 24, 32: 32}, {24: 24, 32: 40, 40: 40})
    """
    distinct = sorted(set(heights))
    if len(distinct) <= limit:
        return {h: h for h in distinct}
    counts = {h: heights.count(h) for h in distinct}
    kept = {distinct[-1]} | set(sorted(distinct[:-1], key=lambda h: (-counts[h], h))[:limit - 1])
    return {h: min(k for k in kept if k >= h) for h in distinct}


def _round_up(x: int, step: int) -> int:
    return -(-x // step) * step


def _bucket(x: int, minimum: int, factor: int = 2) -> int:
    """The smallest ``minimum * factor**k`` that is at least ``x`` (few compiled shapes)."""
    b = max(int(minimum), 1)
    while b < x:
        b *= factor
    return b


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


def overlap_bound(height: int, params: ScanParams) -> int | None:
    """The largest exact overlap W of any miRNA up to ``height`` nt under ``params`` (None:
    gaps are free): the run's lead and lane room follow from it, so they are fixed by the
    options and the run's tallest height, whatever the miRNAs' letters."""
    return exact_overlap(height, gain_bound(height, params), params)


def lead_for(height: int, params: ScanParams) -> int:
    """Columns refilled before a tile (at least 2 W, W = :func:`overlap_bound`): a power of two
    less one word, so a segment is a power of two long."""
    return _bucket(2 * overlap_bound(height, params) + WORD, SEGMENT_MIN) - WORD


def value_dtype(queries: list[Query], params: ScanParams):
    """int16 when every value the fill can reach fits comfortably, else int32 (judged by the
    bound for the tallest miRNA's height: the same for every run of that option class)."""
    if not queries:
        return jnp.int16
    if params.gaps_can_gain:
        return jnp.int32
    gain = gain_bound(max(q.height for q in queries), params)
    low = -(gain + 1)  # padding rows' scores (the lowest of any profile)
    gaps = (max(abs(params.gap_open), abs(params.seed_open))
            + max(abs(params.gap_extend), abs(params.seed_extend)))
    bound = 2 * gain + abs(low) + 2 * gaps + 2
    return jnp.int16 if bound < 30000 else jnp.int32


@dataclass
class Target:
    id: str
    description: str
    sequence: str

    def __len__(self) -> int:
        return len(self.sequence)

    @property
    def codes(self) -> np.ndarray:
        return encode(self.sequence)


def make_target(id: str, description: str, sequence: str) -> Target:
    return Target(id, description, sequence)


class Chunk:
    """Targets packed into one stream and cut into lanes of ``S`` owned columns, ``W`` overlap.

    ``lanes_t`` (lanes, rows) holds each lane's codes contiguously (the scans want them
    transposed, :attr:`lanes`). The devices pack their own copy from the letters
    (:func:`_pack_lanes`); the host builds ``lanes_t`` and ``codes`` only when asked."""

    def __init__(self, targets: "list[Target] | TargetText", overlap: int | None,
                 max_lanes: int = MAX_LANES, lane_columns: int | None = None, min_class: int = 0,
                 overlap_room: int | None = None):
        if isinstance(targets, TargetText):  # letters read in bulk
            lengths = targets.lengths.astype(np.int64)
            self.letters = targets.chars
        else:
            lengths = np.array([len(t) for t in targets], dtype=np.int64)
            self.letters = np.frombuffer("".join(t.sequence for t in targets).encode("ascii"), np.uint8)
        self.lengths = lengths
        self.starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self.total = int(lengths.sum())
        if overlap is None:  # free gaps: no finite overlap, one whole target per lane
            longest = int(lengths.max())
            self.width = 0
            self.span = _round_up(longest, WORD)
            self.n_lanes = _lanes_bucket(len(lengths))
            lanes = np.full((self.n_lanes, self.span), 4 | RESET, dtype=np.int8)
            for k, (n, s) in enumerate(zip(lengths.tolist(), self.starts.tolist())):
                lanes[k, :n] = self.codes[s:s + n]
                lanes[k, 0] |= RESET
            self.lanes_t = lanes
            self.rows = self.span
            self.lane_of_target = True
            return
        self.lane_of_target = False
        self.width = _round_up(overlap, OVERLAP_STEP)
        #: the chunk's class: its nucleotides padded to a power of two (at least ``min_class``,
        #: the class of the run's earlier chunks): every device array's shape follows from it
        self.size_class = _bucket(max(self.total, 1, min_class), MIN_CHUNK_CLASS)
        if lane_columns:  # tests: short lanes, many lane boundaries
            self.span = lane_columns
            self.n_lanes = _lanes_bucket(-(-self.total // lane_columns))
            self.lanes_out = self.n_lanes
            self.rows = _round_up(self.span + self.width, WORD)
            self.rows_out = self.rows
            return
        want = max(MIN_LANE, 4 * self.width)  # owned columns per lane, at least
        #: lanes of the class (the arrays' width); the chunk uses the first ``n_lanes``
        self.lanes_out = max(1, min(self.size_class // LANE_COLUMNS, max_lanes))
        self.n_lanes = max(1, min(_pow2_floor(self.total // want), self.lanes_out))
        self.span = -(-self.total // self.n_lanes)
        self.rows = _round_up(self.span + self.width, WORD)  # whole flag words (scanned)
        # the class's lane length: room for the longest lanes any chunk of the class gets
        # (n_lanes = lanes_out: span <= class / lanes_out; fewer lanes: span < 2 want)
        # (``overlap_room``: the largest overlap of the option class, so the room is the same
        # for every run of it), in powers of two from 128 (W <= 128: every ordinary option set)
        room = _bucket(max(self.width, overlap_room or 0), 4 * OVERLAP_STEP)
        longest = max(-(-self.size_class // self.lanes_out), 2 * max(MIN_LANE, 4 * room))
        self.rows_out = _round_up(longest + room, WORD)

    @functools.cached_property
    def codes(self) -> np.ndarray:
        """The targets' base codes (int8), concatenated."""
        return CODE_OF_BYTE[self.letters]

    @functools.cached_property
    def lanes_t(self) -> np.ndarray:
        """(lanes, rows) codes with reset flags: lane ``b`` is stream columns ``b S .. b S + rows``
        of the stream ``W`` filler columns, the targets, then inert filler."""
        stream = np.full(self.width + self.n_lanes * self.span, 4, dtype=np.int8)
        body = stream[self.width:self.width + self.total]
        body[:] = self.codes
        body[self.starts] |= RESET
        stream[self.width + self.total:] |= RESET  # past the end: inert filler
        stream = np.concatenate([stream, np.full(self.rows, 4 | RESET, dtype=np.int8)])
        view = np.lib.stride_tricks.as_strided(stream, shape=(self.n_lanes, self.rows),
                                               strides=(self.span, 1), writeable=False)
        return np.ascontiguousarray(view)

    @property
    def lanes(self) -> np.ndarray:
        """(rows, lanes) codes, the layout of the scans (a transposed view of ``lanes_t``)."""
        return self.lanes_t.T

    def candidate_columns(self, col: np.ndarray, lane: np.ndarray):
        """``(target index, 0-based column)`` of every flagged lane column (``col``, ``lane``
        index the lanes array), owned by its lane, in stream order."""
        if self.lane_of_target:
            keep = lane < len(self.lengths)
            col, lane = col[keep], lane[keep]
            keep = col < self.lengths[lane]
            col, lane = col[keep], lane[keep]
            order = np.lexsort((col, lane))
            return lane[order], col[order]
        keep = (col >= self.width) & (lane < self.n_lanes)
        pos = np.sort(lane[keep].astype(np.int64) * self.span + (col[keep] - self.width))
        pos = pos[pos < self.total]
        tidx = np.searchsorted(self.starts, pos, side="right") - 1
        return tidx, pos - self.starts[tidx]


@dataclass
class _OnDevice:
    """One chunk's arrays on one device."""

    lanes: object       # bulk-scan lanes (padded to whole words and Pallas blocks)
    stream: object      # codes with reset flags, ``front`` filler columns before and after
    starts: object      # each target's first stream position (int32)
    front: int


class _Run:
    """What one chunk scan shares between its device threads."""

    def __init__(self, engine: "Engine", queries: list[Query], chunk: "Chunk", live: list[bool]):
        self.engine = engine
        self.queries = queries
        self.chunk = chunk
        self.live = live
        live_qs = [q for q, ok in zip(queries, live) if ok]
        self.dtype = value_dtype(live_qs, engine.params)
        # segments of a power-of-two length (few compiled shapes): a 32-column tile after a lead
        # of at least 2 W columns
        # (fixed by the options and the tallest height, not by the miRNAs' letters)
        self.lead = (lead_for(max(q.height for q in live_qs), engine.params)
                     if not chunk.lane_of_target else 0)
        #: each miRNA height's height in this run (at most MAX_HEIGHTS of them: few programs)
        self.heights = height_classes([q.height for q in live_qs])
        self._cache: dict = {}
        self._lock = threading.Lock()
        self._locks: dict = {}       # one per device: devices copy the chunk at the same time
        self._host: tuple | None = None
        self._host_letters: tuple | None = None

    def on_device(self, device) -> _OnDevice:
        with self._lock:
            lock = self._locks.setdefault(device, threading.Lock())
        with lock:
            if device not in self._cache:
                self._cache[device] = self._put(device)
            return self._cache[device]

    def _host_arrays(self) -> tuple:
        """The stream and the target starts as every device gets them (built once)."""
        with self._lock:
            if self._host is None:
                chunk, front = self.chunk, self.lead
                stream = np.full(self._stream_len(), 4 | RESET, dtype=np.int8)
                body = stream[front:front + chunk.total]
                body[:] = chunk.codes
                body[chunk.starts] |= RESET
                self._host = (stream, self._padded_starts())
            return self._host

    def _put(self, device) -> _OnDevice:
        chunk = self.chunk
        lanes_out = chunk.n_lanes if chunk.lane_of_target else chunk.lanes_out
        rows_out = _round_up(chunk.rows if chunk.lane_of_target else chunk.rows_out, WORD)
        if self.engine.kernel == "pallas":
            from jaxrna.kernels.miranda_fill import BLOCK

            lanes_out = _round_up(lanes_out, BLOCK)
        if chunk.lane_of_target:  # lanes of whole targets, built on the host
            lanes = _transpose_pad(jax.device_put(chunk.lanes_t, device), rows_out - chunk.rows,
                                   lanes_out - chunk.n_lanes)
            stream, starts = self._host_arrays()
            return _OnDevice(lanes, jax.device_put(stream, device), jax.device_put(starts, device), self.lead)
        letters, starts = self._letters()
        sizes = np.array([chunk.total, chunk.width, chunk.span, chunk.n_lanes, chunk.rows, self.lead],
                         np.int32)
        letters, starts, table, sizes = (jax.device_put(x, device)
                                         for x in (letters, starts, CODE_OF_BYTE, sizes))
        lanes, stream = _pack_lanes(letters, starts, table, sizes, lanes_out=lanes_out, rows_out=rows_out,
                                    stream_len=self._stream_len())
        return _OnDevice(lanes, stream, starts, self.lead)

    def _stream_len(self) -> int:
        """The refill stream's length (fixed by the chunk's class and the lead)."""
        if self.chunk.lane_of_target:
            return _bucket(self.lead + self.chunk.total + self.lead + 2 * WORD, 1 << 16)
        return self.chunk.size_class + 2 * self.lead + 2 * WORD

    def _letters(self) -> tuple:
        """The letters (padded to a bucket) and the target starts (padded with a large value),
        as every device gets them (built once)."""
        with self._lock:
            if self._host_letters is None:
                chunk = self.chunk
                letters = np.zeros(chunk.size_class, np.uint8)
                letters[:chunk.total] = chunk.letters
                self._host_letters = (letters, self._padded_starts())
            return self._host_letters

    def _padded_starts(self) -> np.ndarray:
        """The targets' starts padded with a large value, to a size fixed by the chunk's class
        (one slot per 64 nucleotides) unless its targets are shorter than that on average."""
        floor = max(1024, getattr(self.chunk, "size_class", 0) // 64)
        starts = np.full(_bucket(len(self.chunk.starts), floor), np.iinfo(np.int32).max, np.int32)
        starts[:len(self.chunk.starts)] = self.chunk.starts
        return starts


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    """Rows of several launches, padded with zero move words to the widest."""
    width = max(p.shape[1] for p in parts)
    out = np.zeros((sum(len(p) for p in parts), width), np.int32)
    at = 0
    for p in parts:
        out[at:at + len(p), :p.shape[1]] = p
        at += len(p)
    return out


@stored_jit("targets.engine._pack_lanes", static_argnames=("lanes_out", "rows_out", "stream_len"))
def _pack_lanes(letters, starts, table, sizes, *, lanes_out: int, rows_out: int, stream_len: int):
    """On the device, from the letters: the bulk scan's lanes (``rows_out``, ``lanes_out``), as
    :attr:`Chunk.lanes` padded with inert filler, and the refill stream (``front`` filler
    columns, the targets, filler to ``stream_len``); reset flags on each target's first base.
    ``sizes`` = (total, width, span, n_lanes, rows, front): the chunk's own sizes, traced (one
    program per class of shapes)."""
    total, width, span, n_lanes, rows, front = (sizes[k] for k in range(6))
    first = jnp.zeros(letters.shape[0], bool).at[starts].set(True, mode="drop")
    body = table[letters.astype(jnp.int32)] | jnp.where(first, RESET, 0).astype(jnp.int8)
    filler = jnp.int8(4 | RESET)

    def at(pos, before):  # stream column pos (relative to the targets' first base)
        inside = (pos >= 0) & (pos < total)
        return jnp.where(inside, body[jnp.clip(pos, 0, jnp.maximum(total - 1, 0))],
                         jnp.where(pos < 0, before, filler))

    col = jnp.arange(rows_out)[:, None]
    lane = jnp.arange(lanes_out)[None, :]
    lanes = jnp.where((col < rows) & (lane < n_lanes), at(lane * span + col - width, jnp.int8(4)), filler)
    stream = at(jnp.arange(stream_len) - front, filler)
    return lanes, stream


@stored_jit("targets.engine._transpose_pad", static_argnames=("rows", "lanes"))
def _transpose_pad(lanes_t, rows: int, lanes: int):
    """(rows, lanes) codes from (lanes, rows), padded with inert filler (on the device)."""
    return jnp.pad(lanes_t.T, ((0, rows), (0, lanes)), constant_values=4 | RESET)


class Engine:
    """Scans prepared miRNAs against chunks of targets on every device; the host selects hits."""

    def __init__(self, params: ScanParams, energy=None, max_lanes: int = MAX_LANES,
                 lane_columns: int | None = None, kernel: str = "auto", devices=None,
                 query_block: int | None = None, threads_per_device: int | None = None,
                 lane_batch: int | None = None, interpret: bool = False, profile: bool = False,
                 timeline: Events = NO_EVENTS):
        """``kernel``: ``"xla"`` (pure JAX), ``"pallas"`` (the GPU kernels of
        :mod:`jaxrna.kernels.miranda_fill`; ``interpret=True`` runs them in Pallas' interpret
        mode, for tests on CPUs) or ``"auto"`` (Pallas on GPUs). ``query_block`` miRNAs per
        bulk-scan launch (default 16 with Pallas, 1 with XLA), spread over ``devices`` (default:
        all) with ``threads_per_device`` threads each (default 3 on GPUs, else 1).
        ``lane_batch``: segments refilled per device call (at most). ``profile``: time each
        device stage on its own (:meth:`_stage`; slower). ``timeline``: a
        :class:`~jaxrna.stages.Events` recorder (``bench/timeline.py``'s ``Timeline``) told when each
        block runs."""
        self.params = params
        self.energy = energy
        self.max_lanes = max_lanes
        self.lane_columns = lane_columns
        self.devices = list(devices) if devices else jax.devices()
        if kernel == "auto":
            kernel = "pallas" if self.devices[0].platform == "gpu" else "xla"
        self.kernel = kernel
        self.interpret = interpret
        self.query_block = query_block or (16 if kernel == "pallas" else 1)
        self.threads_per_device = threads_per_device or THREADS_PER_DEVICE.get(self.devices[0].platform, 1)
        self.lane_batch = lane_batch or LANE_BATCH[kernel]
        self.profile = profile
        self.timeline = timeline
        #: a directory: blocks' candidates are written there (:class:`SpilledRows`) for worker
        #: processes to read, rather than handed over as :class:`Traced`
        self.spill_dir: str | None = None
        self._spilled = itertools.count()
        self.samples: dict[str, list[float]] = {}  # profile: seconds of every call of each stage
        #: wall seconds the consumer waited for the devices and spent on hit selection and text
        #: (in this process, or handing it to workers); "scan" and "extract": device-thread
        #: seconds (summed over threads) in the bulk scan and in extraction and traceback (with
        #: ``profile``; else "scan" counts launching it, and its run shows under "extract")
        self.timings = {"device": 0.0, "select": 0.0, "scan": 0.0, "extract": 0.0}
        self._timing_lock = threading.Lock()
        self._class_floor = 0        # the largest chunk class so far (chunks keep it)

    def overlap(self, queries: list[Query]) -> int | None:
        if any(q.overlap is None for q in queries):
            return None
        return max(q.overlap for q in queries)

    def blocks(self, n_queries: int) -> list[list[int]]:
        """The blocks of consecutive miRNA indices (the same for every chunk)."""
        qb = self.query_block
        return [list(range(s, min(s + qb, n_queries))) for s in range(0, n_queries, qb)]

    # --- in-process results (the library API and the tests) ---

    def scan_chunk(self, queries: list[Query], targets: "list[Target] | TargetText", progress=None):
        """Hits of every query against every target of the chunk: ``{(q, t): [Hit, ...]}`` for
        the pairs with at least one accepted hit (indices into the two lists)."""
        return {(k, t): h for k, found in self.iter_chunk(queries, targets, progress)
                for t, h in found.items()}

    def iter_chunk(self, queries: list[Query], targets: "list[Target] | TargetText", progress=None):
        """Yield ``(query index, {target index: [Hit, ...]})`` for every query, in order."""
        text = targets if isinstance(targets, TargetText) else \
            TargetText.from_sequences([t.sequence for t in targets]) if targets else None
        for ks, traced in self.iter_traced(queries, targets, progress):
            t0 = time.perf_counter()
            per_q: dict[int, dict] = {}
            if len(traced):
                table = select(traced, [queries[k].sequence for k in ks], text, self.params.strict)
                for (x, t), h in accepted_hits(table, self.params, self.energy).items():
                    per_q.setdefault(x, {})[t] = h
            self.timings["select"] += time.perf_counter() - t0
            for x, k in enumerate(ks):
                yield k, per_q.get(x, {})

    # --- the device side ---

    def iter_traced(self, queries: list[Query], targets: "list[Target] | TargetText", progress=None):
        """Yield ``(miRNA indices of a block, Traced)`` for every block, in order; ``q`` of the
        candidates indexes the block's list (with :attr:`spill_dir`, a
        :class:`~jaxrna.targets.select.SpilledRows` in its place, but for free gaps).
        ``progress.update(n)`` counts pairs done."""
        blocks = self.blocks(len(queries))
        live = [q.gain >= self.params.score_threshold or self.params.gaps_can_gain for q in queries]
        live_qs = [q for q, ok in zip(queries, live) if ok]
        if not len(targets) or not live_qs:
            for ks in blocks:
                if progress is not None:
                    progress.update(len(targets) * len(ks))
                yield ks, Traced.concat([])
            return
        overlap = self.overlap(live_qs)
        chunk = Chunk(targets, overlap, self.max_lanes, self.lane_columns, min_class=self._class_floor,
                      overlap_room=overlap_bound(max(q.height for q in live_qs), self.params)
                      if overlap is not None else None)
        if not chunk.lane_of_target:  # later chunks keep this class (or a larger one)
            self._class_floor = max(self._class_floor, chunk.size_class)
        run = _Run(self, queries, chunk, live)
        clock = time.perf_counter
        t0 = clock()
        for ks, traced in zip(blocks, self._pipeline(len(blocks), lambda bi, dev: self._block(run, dev, blocks[bi]))):
            self.timings["device"] += clock() - t0
            self.timeline.mark("yield", ks[0])
            if progress is not None:
                progress.update(len(targets) * len(ks))
            yield ks, traced
            t0 = clock()

    def _pipeline(self, n_blocks: int, job):
        """``job(block, device)`` for every block on the device threads; results in order."""
        slots = [d for d in self.devices for _ in range(self.threads_per_device)]
        if len(slots) == 1:
            for bi in range(n_blocks):
                yield job(bi, slots[0])
            return
        cv = threading.Condition()
        results: dict[int, object] = {}
        state = {"next": 0, "consumed": 0, "error": None, "stop": False}
        ahead = LOOKAHEAD * len(slots)

        def loop(device):
            try:
                while True:
                    with cv:
                        while (state["next"] - state["consumed"] >= ahead and not state["stop"]):
                            cv.wait()
                        if state["stop"] or state["next"] >= n_blocks:
                            return
                        bi = state["next"]
                        state["next"] += 1
                    self.timeline.mark("block start", bi, device=str(device))
                    res = job(bi, device)
                    self.timeline.mark("block end", bi)
                    with cv:
                        results[bi] = res
                        cv.notify_all()
            except BaseException as exc:  # handed to the consumer
                with cv:
                    state["error"] = exc
                    state["stop"] = True
                    cv.notify_all()

        threads = [threading.Thread(target=loop, args=(d,), daemon=True, name=f"jaxrna-targets-{k}")
                   for k, d in enumerate(slots)]
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, SWITCH_INTERVAL))
        for th in threads:
            th.start()
        try:
            for bi in range(n_blocks):
                with cv:
                    while bi not in results and state["error"] is None:
                        cv.wait()
                    if bi not in results:
                        raise state["error"]
                    res = results.pop(bi)
                    state["consumed"] = bi + 1
                    cv.notify_all()
                yield res
        finally:
            with cv:
                state["stop"] = True
                cv.notify_all()
            for th in threads:
                th.join()
            sys.setswitchinterval(interval)

    def _block(self, run: _Run, device, ks: list[int]) -> "Traced | SpilledRows":
        """Traced candidates of one block (``q`` indexes ``ks``); in a file with ``spill_dir``."""
        local = [x for x, k in enumerate(ks) if run.live[k]]
        if not local:
            return Traced.concat([])
        qs = [run.queries[ks[x]] for x in local]
        clock = time.perf_counter
        with jax.default_device(device):
            t0 = clock()
            dev = run.on_device(device)
            scanned = self._words(run, dev, qs)
            words = scanned[0]
            if self.profile:  # (else the tile counts wait for it)
                words.block_until_ready()
            t1 = clock()
            if run.chunk.lane_of_target:
                parts = []
                for x, q in enumerate(qs):
                    traced = self._host_extract(run, q, np.asarray(words[x]))
                    traced.q[:] = x
                    parts.append(traced)
                traced = Traced.concat(parts)
                traced.q = np.asarray(local, np.int32)[traced.q]
                rows = None
            else:
                rows = self._extract(run, dev, qs, scanned)
                if rows is None:
                    traced = Traced.concat([])
                elif len(local) < len(ks):  # some miRNAs cannot score: indices into ks
                    rows = np.array(rows)
                    rows[:, 0] = np.asarray(local, np.int32)[rows[:, 0]]
            if rows is not None:
                if self.spill_dir is not None:  # for worker processes: the rows in a file
                    path = os.path.join(self.spill_dir, f"rows-{next(self._spilled)}.i32")
                    traced = SpilledRows.write(path, rows, len(ks))
                else:
                    traced = Traced.from_rows(rows)
        with self._timing_lock:
            self.timings["scan"] += t1 - t0
            self.timings["extract"] += clock() - t1
        return traced

    def _stage(self, name: str, t0: float, value) -> float:
        """With ``profile``: wait for ``value`` and count the seconds since ``t0`` under
        ``timings["profile " + name]`` (device work then no longer overlaps)."""
        if not self.profile:
            return t0
        jax.block_until_ready(value)
        t1 = time.perf_counter()
        with self._timing_lock:
            key = "profile " + name
            self.timings[key] = self.timings.get(key, 0.0) + t1 - t0
            self.samples.setdefault(name, []).append(t1 - t0)
        return t1

    def _tables(self, run: _Run, qs: list[Query], rows: int):
        """The block's tables (profile (rows, 5, H), gap_open, gap_extend, seed (rows, H)) at
        its height (the run's height of its tallest miRNA), on the device; rows past
        ``len(qs)`` repeat the last miRNA (a full block: one compiled shape). Built once per
        block of miRNAs and device."""
        height = max(run.heights[q.height] for q in qs)
        tabs = [q.tables_at(height) for q in qs]
        tabs += [tabs[-1]] * (rows - len(tabs))
        return height, [jax.device_put(np.stack([t[x] for t in tabs])) for x in range(4)]

    def _words(self, run: _Run, dev: _OnDevice, qs: list[Query]):
        """(query_block, L/32, B) packed candidate-column flags of the bulk scan and the tiles
        per miRNA (:func:`~jaxrna.targets.extract.scan_block`), on the device; rows past
        ``len(qs)`` repeat the last miRNA."""
        chunk = run.chunk
        _, tables = self._tables(run, qs, self.query_block)
        sizes = [np.int32(x) for x in (self.params.score_threshold, chunk.rows // WORD, chunk.width,
                                       chunk.span, chunk.n_lanes, chunk.total)]  # traced values
        return extract.scan_block(*tables, dev.lanes, *sizes,
                                  pallas=self.kernel == "pallas", dtype=run.dtype,
                                  interpret=self.interpret)

    def _extract(self, run: _Run, dev: _OnDevice, qs: list[Query], scanned) -> np.ndarray | None:
        """Device-side refill, extraction and traceback (:mod:`jaxrna.targets.extract`): the
        candidates' rows (``q`` indexes ``qs``; see :meth:`Traced.from_rows`), None for none.

        Every program's sizes are fixed by the chunk's class, the block's height and the
        options' class: launches of a fixed number of tiles (``lane_batch``), the candidates of
        a launch fetched ``capacity`` at a time (more: the same program again, from where the
        last part ended)."""
        chunk = run.chunk
        words, counts = scanned
        geometry = np.array([chunk.width, chunk.span, chunk.n_lanes, chunk.total], np.int32)
        t0 = time.perf_counter()
        rows = words.shape[0]  # >= len(qs): a full block (one compiled shape), the rest ignored
        counts = np.asarray(counts).astype(np.int64)[:len(qs)]
        t0 = self._stage("counts", t0, None)
        if not counts.sum():
            return None
        block = extract.LANE_BLOCK
        padded = -(-counts // block) * block
        offsets = np.zeros(rows, np.int32)
        offsets[:len(qs)] = np.concatenate([[0], np.cumsum(padded)[:-1]])
        used = int(padded.sum())
        batch = self.lane_batch
        n_out = extract.tiles_size(words.shape, batch)
        tile_start, tile_own = extract.segment_tiles(words, *geometry, offsets, np.int32(len(qs)),
                                                     batch=batch)
        t0 = self._stage("tiles", t0, tile_own)
        block_q = np.full(n_out // block, -1, np.int32)
        for x in range(len(qs)):
            block_q[offsets[x] // block:(offsets[x] + padded[x]) // block] = x
        height, tables = self._tables(run, qs, rows)
        pads = np.array([height - q.n for q in qs] + [0] * (rows - len(qs)), np.int32)
        overlaps = np.array([q.overlap for q in qs], np.int64)
        max_steps = height + int(overlaps.max()) + 2  # a traceback crosses at most W columns
        overlap_rows = np.zeros(rows, np.int32)  # each block row's W (the device checks its tracebacks)
        overlap_rows[:len(qs)] = overlaps
        # move words for the longest traceback any miRNA of this height can have with this lead
        # (lead >= 2 W): fixed by the block's shapes
        n_words = _round_up(-(-(height + run.lead // 2 + 2) // MOVES_PER_WORD), extract.ROUND_WORDS)
        assert max_steps <= n_words * MOVES_PER_WORD
        threshold = self.params.score_threshold
        pallas = self.kernel == "pallas"
        capacity = 4 * batch
        threshold_d, max_steps_d = np.int32(threshold), np.int32(max_steps)

        def launch(first, skip):
            qidx = block_q[first // block:(first + batch) // block]
            at = (np.int32(first), np.int32(skip))
            if self.profile:  # the stages one by one, each timed
                t0 = time.perf_counter()
                p0 = jax.lax.dynamic_slice(tile_start, (at[0],), (batch,))
                own = jax.lax.dynamic_slice(tile_own, (at[0],), (batch,))
                best, code = extract.refill_tiles(dev.stream, dev.front, p0, qidx, *tables, threshold_d,
                                                  lead=run.lead, pallas=pallas, dtype=run.dtype,
                                                  interpret=self.interpret)
                t0 = self._stage("refill", t0, code)
                out = extract.trace_candidates(best, code, dev.starts, p0, own, qidx, pads, overlap_rows,
                                               threshold_d, max_steps_d, at[1], lead=run.lead,
                                               capacity=capacity, n_words=n_words)
                self._stage("trace", t0, out)
                cols = min(extract.FIELDS + extract.HEAD_WORDS, out[0].shape[1])
                return tuple(out[0][:capacity >> k, :cols] for k in extract.HEAD_SHIFTS), out[0], out[1]
            return extract.refill_and_trace(dev.stream, dev.front, tile_start, tile_own, at[0], qidx, *tables,
                                            dev.starts, pads, overlap_rows, threshold_d, max_steps_d, at[1],
                                            batch=batch, lead=run.lead, pallas=pallas, dtype=run.dtype,
                                            interpret=self.interpret, capacity=capacity, n_words=n_words)

        launched = [(first, launch(first, 0)) for first in range(0, _round_up(used, batch), batch)]
        t0 = time.perf_counter()
        sizes = jax.device_get([out[2] for _, out in launched])  # one read-back for them all
        wanted, parts = [], []
        for (first, out), size in zip(launched, sizes):
            while True:
                n, longest, broken, last = (int(x) for x in size)
                if broken:
                    raise AssertionError(f"{broken} tracebacks left the exact part of their segments "
                                         f"or ran past {max_steps} moves")
                got = min(n, capacity)
                if got:
                    # only about the rows and move words used cross (Traced.from_rows trims the
                    # moves to the longest traceback)
                    heads, whole, _ = out
                    narrow = longest <= extract.HEAD_WORDS * MOVES_PER_WORD
                    pick = next((h for h, k in zip(heads, extract.HEAD_SHIFTS) if got <= capacity >> k),
                                heads[-1]) if narrow else whole
                    wanted.append((pick, got))
                if n <= capacity:
                    break
                out = launch(first, last + 1)  # more candidates than room: the rest, in parts
                size = np.asarray(out[2])
        parts = [got[:n] for got, (_, n) in zip(jax.device_get([w for w, _ in wanted]), wanted)]
        self._stage("fetch", t0, None)
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else _concat(parts)

    def _host_extract(self, run: _Run, q: Query, words: np.ndarray) -> Traced:
        """Free gaps (a whole target per lane): candidates extracted and traced on the host."""
        tidx, cols = run.chunk.candidate_columns(*packed_positions(words))
        if not len(tidx):
            return Traced.concat([])
        batches = self._fill(q, run.chunk, tidx, cols, run.dtype)
        return traced_from_batches(batches, self.params.score_threshold)

    def _fill(self, q: Query, chunk: "Chunk", tidx: np.ndarray, cols: np.ndarray, dtype):
        """Full matrices of the targets' leading parts up to their last candidate column (free
        gaps: no finite overlap), batched by length."""
        target = np.unique(tidx)
        last = np.array([cols[tidx == t].max() for t in target], dtype=np.int64)
        start = np.zeros_like(last)
        span = last + 1
        length = np.maximum(SEGMENT_MIN, 1 << np.ceil(np.log2(span)).astype(np.int64))
        batches = []
        for size in np.unique(length).tolist():
            members = np.flatnonzero(length == size)
            for s in range(0, len(members), SEGMENT_BATCH):
                part = members[s:s + SEGMENT_BATCH]
                width = max(64, _pow2(len(part)))
                pos = chunk.starts[target[part]][None, :] + np.arange(size)[:, None]
                inside = np.arange(size)[:, None] <= last[part][None, :]
                lanes = np.full((size, width), 4, dtype=np.int8)
                lanes[:, :len(part)] = np.where(inside, chunk.codes[np.minimum(pos, chunk.total - 1)], 4)
                best, code = fill_segments(q.profile, q.gap_open, q.gap_extend, q.seed, lanes,
                                           threshold=self.params.score_threshold, dtype=dtype)
                batches.append(hitlib.SegmentBatch(
                    np.asarray(best)[:, :, :len(part)], np.asarray(code)[:, :, :len(part)],
                    target[part], start[part], np.ones(len(part), np.int64), last[part] + 1, q.pad))
        return batches
