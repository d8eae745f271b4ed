"""A chunk of targets packed into lanes, on the host and on every device.

:class:`Chunk` packs the targets into one stream of base codes (a reset flag on each target's
first base) cut into ``B`` lanes of ``S`` owned columns, each preceded by ``W`` overlap columns;
its device arrays take their shapes from the chunk's class (:mod:`jaxrna.targets.sizes`).
:class:`ChunkRun` is what one chunk's scan shares between the device threads: the value type,
the refill lead, the height classes, and each device's copy of the lanes and the refill stream
(:func:`pack_lanes`, built on the device from the letters). See :mod:`jaxrna.targets.engine`.

>>> c = Chunk(TargetText.from_sequences(["ACGU" * 40, "GGU"]), overlap=40)
>>> c.total, c.width, c.n_lanes, c.size_class
(163, 64, 1, 65536)
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.alphabet import CODE_OF_BYTE
from jaxrna.programs import stored_jit
from jaxrna.targets.queries import Query, Target, lead_for, value_dtype
from jaxrna.targets.scan import RESET, WORD
from jaxrna.targets.select import TargetText
from jaxrna.targets.sizes import (LANE_COLUMNS, MAX_LANES, MIN_CHUNK_CLASS, MIN_LANE, OVERLAP_STEP,
                                  bucket, height_classes, lanes_bucket, pow2_floor,
                                  round_up)


class Chunk:
    """Targets packed into one stream and cut into lanes of ``S`` owned columns, ``W`` overlap.

    ``lanes_t`` (lanes, rows) holds each lane's codes contiguously (the scans want them
    transposed, :attr:`lanes`). The devices pack their own copy from the letters
    (:func:`pack_lanes`); the host builds ``lanes_t`` and ``codes`` only when asked."""

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
            self.span = round_up(longest, WORD)
            self.n_lanes = lanes_bucket(len(lengths))
            lanes = np.full((self.n_lanes, self.span), 4 | RESET, dtype=np.int8)
            for k, (n, s) in enumerate(zip(lengths.tolist(), self.starts.tolist())):
                lanes[k, :n] = self.codes[s:s + n]
                lanes[k, 0] |= RESET
            self.lanes_t = lanes
            self.rows = self.span
            self.lane_of_target = True
            return
        self.lane_of_target = False
        self.width = round_up(overlap, OVERLAP_STEP)
        #: the chunk's class: its nucleotides padded to a power of two (at least ``min_class``,
        #: the class of the run's earlier chunks): every device array's shape follows from it
        self.size_class = bucket(max(self.total, 1, min_class), MIN_CHUNK_CLASS)
        if lane_columns:  # tests: short lanes, many lane boundaries
            self.span = lane_columns
            self.n_lanes = lanes_bucket(-(-self.total // lane_columns))
            self.lanes_out = self.n_lanes
            self.rows = round_up(self.span + self.width, WORD)
            self.rows_out = self.rows
            return
        want = max(MIN_LANE, 4 * self.width)  # owned columns per lane, at least
        #: lanes of the class (the arrays' width); the chunk uses the first ``n_lanes``
        self.lanes_out = max(1, min(self.size_class // LANE_COLUMNS, max_lanes))
        self.n_lanes = max(1, min(pow2_floor(self.total // want), self.lanes_out))
        self.span = -(-self.total // self.n_lanes)
        self.rows = round_up(self.span + self.width, WORD)  # whole flag words (scanned)
        # the class's lane length: room for the longest lanes any chunk of the class gets
        # (n_lanes = lanes_out: span <= class / lanes_out; fewer lanes: span < 2 want)
        # (``overlap_room``: the largest overlap of the option class, so the room is the same
        # for every run of it), in powers of two from 128 (W <= 128: every ordinary option set)
        room = bucket(max(self.width, overlap_room or 0), 4 * OVERLAP_STEP)
        longest = max(-(-self.size_class // self.lanes_out), 2 * max(MIN_LANE, 4 * room))
        self.rows_out = round_up(longest + room, WORD)

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
class OnDevice:
    """One chunk's arrays on one device."""

    lanes: object       # bulk-scan lanes (padded to whole words and Pallas blocks)
    stream: object      # codes with reset flags, ``front`` filler columns before and after
    starts: object      # each target's first stream position (int32)
    front: int


class ChunkRun:
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

    def on_device(self, device) -> OnDevice:
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
                stream = np.full(self.stream_len(), 4 | RESET, dtype=np.int8)
                body = stream[front:front + chunk.total]
                body[:] = chunk.codes
                body[chunk.starts] |= RESET
                self._host = (stream, self._padded_starts())
            return self._host

    def lane_shape(self) -> tuple[int, int]:
        """``(rows_out, lanes_out)``: the shape of the bulk scan's lanes on every device
        (fixed by the chunk's class; Pallas: lanes in whole kernel blocks)."""
        chunk = self.chunk
        lanes_out = chunk.n_lanes if chunk.lane_of_target else chunk.lanes_out
        rows_out = round_up(chunk.rows if chunk.lane_of_target else chunk.rows_out, WORD)
        if self.engine.kernel == "pallas":
            from jaxrna.kernels.miranda_fill import BLOCK

            lanes_out = round_up(lanes_out, BLOCK)
        return rows_out, lanes_out

    def block_heights(self, blocks: list[list[int]]) -> list[int]:
        """The heights the blocks of miRNA indices ``blocks`` are scanned at (each block's
        tallest height class among its live miRNAs), in first-use order."""
        out: dict[int, None] = {}
        for ks in blocks:
            hs = [self.heights[self.queries[k].height] for k in ks if self.live[k]]
            if hs:
                out.setdefault(max(hs))
        return list(out)

    def _put(self, device) -> OnDevice:
        chunk = self.chunk
        rows_out, lanes_out = self.lane_shape()
        if chunk.lane_of_target:  # lanes of whole targets, built on the host
            lanes = transpose_pad(jax.device_put(chunk.lanes_t, device), rows_out - chunk.rows,
                                   lanes_out - chunk.n_lanes)
            stream, starts = self._host_arrays()
            return OnDevice(lanes, jax.device_put(stream, device), jax.device_put(starts, device), self.lead)
        letters, starts = self.letters()
        sizes = np.array([chunk.total, chunk.width, chunk.span, chunk.n_lanes, chunk.rows, self.lead],
                         np.int32)
        letters, starts, table, sizes = (jax.device_put(x, device)
                                         for x in (letters, starts, CODE_OF_BYTE, sizes))
        lanes, stream = pack_lanes(letters, starts, table, sizes, lanes_out=lanes_out, rows_out=rows_out,
                                    stream_len=self.stream_len())
        return OnDevice(lanes, stream, starts, self.lead)

    def stream_len(self) -> int:
        """The refill stream's length (fixed by the chunk's class and the lead)."""
        if self.chunk.lane_of_target:
            return bucket(self.lead + self.chunk.total + self.lead + 2 * WORD, 1 << 16)
        return self.chunk.size_class + 2 * self.lead + 2 * WORD

    def letters(self) -> tuple:
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
        starts = np.full(bucket(len(self.chunk.starts), floor), np.iinfo(np.int32).max, np.int32)
        starts[:len(self.chunk.starts)] = self.chunk.starts
        return starts



@stored_jit("targets.engine._pack_lanes", static_argnames=("lanes_out", "rows_out", "stream_len"),
            cpu_store=True)
def pack_lanes(letters, starts, table, sizes, *, lanes_out: int, rows_out: int, stream_len: int):
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
def transpose_pad(lanes_t, rows: int, lanes: int):
    """(rows, lanes) codes from (lanes, rows), padded with inert filler (on the device)."""
    return jnp.pad(lanes_t.T, ((0, rows), (0, lanes)), constant_values=4 | RESET)
