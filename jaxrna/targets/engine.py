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

miRNAs go in blocks of ``query_block`` (one bulk-scan launch), handed to the devices in turn by
the shared device scheduler (:func:`jaxrna.pipeline.schedule_on_threads`); each device runs its blocks on
threads of its own (three per GPU, so one block's read-backs overlap the other blocks' work),
and :meth:`Engine.iter_traced` hands them back in miRNA order whatever device ran them. Where
gaps are free (no finite overlap) a whole target is one lane and the candidates are extracted
on the host (:mod:`jaxrna.targets.hits`).

The pieces: :mod:`jaxrna.targets.sizes` (the rounded sizes that keep programs few),
:mod:`jaxrna.targets.queries` (miRNAs and targets as the scan takes them),
:mod:`jaxrna.targets.lanes` (a chunk packed into lanes, on the host and on each device) and,
here, :class:`Engine` (the blocks on the devices: bulk scan, refill, extraction).

Compiled programs (issue 26): a chunk's device arrays take their shapes from its *class*, its
nucleotides padded to a power of two from :data:`MIN_CHUNK_CLASS` (later chunks keep the first
one's class; a run whose first chunk is full takes from the start the class of the largest
chunk it can have, :meth:`Engine.expect_chunks`): :data:`LANE_COLUMNS`-column lanes, the lane room, the letters, the refill stream
and the target starts all follow from it; the chunk's own sizes (nucleotides, lanes used, lane
length, overlap) are traced values, the scans' loops bounded by them. The refill lead, the lane
room and the value type follow from the options and the run's tallest miRNA height
(:func:`lead_for`), not from the letters; miRNA heights are mapped to at most
:data:`MAX_HEIGHTS` per run (:func:`height_classes`); refill launches have a fixed size
(:data:`LANE_BATCH`), their candidates fetched ``capacity`` at a time by the same program.
Thresholds, scale and penalties are traced. So a run compiles at most **6 programs**
(``2 + 2 * MAX_HEIGHTS``: lane packing, tiling, and per height the bulk scan with its tile
counts and the refill with its traceback), whatever its lengths and scores, and with energies
one more (:mod:`jaxrna.targets.energy`: the ``device`` engine's one program of fixed shape per
device; the ``cpu`` and ``vienna`` engines none): **at most 7 per run** (per device). A run
meets one chunk class: a single chunk has its own; a run of several takes, at its first chunk,
the class of the largest chunk it can have (:func:`~jaxrna.targets.sizes.full_chunk_class`:
the chunk size plus the longest record, at least :data:`~jaxrna.targets.sizes.RECORD_NT`),
so no later chunk (a last, smaller one, or one closed by a long record) needs another --
for later records up to that length; a longer one can open a second class. Another run (a
file of another power of two, another lead: gap penalties or a scale that widen the exact
overlap W past the lead's power of two) prepares its own set. :mod:`jaxrna.targets.warmup` prepares them ahead;
at a chunk's start, :mod:`jaxrna.targets.prefetch` starts every one of them at once (worker
processes where the host has cores to spare, :mod:`jaxrna.compile_workers`), so the device
threads load them rather than compile them in turn -- or each its own copy: threads that reach
a program not yet compiled would compile it side by side (three per GPU).
Not covered: free gaps (a zero gap penalty or a scale <= 0: whole targets per lane, host
extraction) and ``profile`` (each stage its own program).

>>> p = ScanParams(no_energy=True)
>>> q = prepare_query("m", "", "GUGAGAUCAUUUUGAAAGCUG", p)
>>> found = Engine(p).scan_chunk([q], [make_target("t", "", "UAGUUUUCACAAUGAUCUCGG")])
>>> [(k, [h.score for h in hits]) for k, hits in found.items()]
[((0, 0), [167])]
"""

from __future__ import annotations

import itertools
import logging
import os
import sys
import threading
import time

import jax
import numpy as np

from jaxrna.kernels.fallback import pallas_builds
from jaxrna.kernels.miranda_fill import packed_positions
from jaxrna.pipeline import schedule, schedule_on_threads
from jaxrna.stages import NO_EVENTS, Events
from jaxrna.targets import extract
from jaxrna.targets import host_scan as host_scan_module
from jaxrna.targets import hits as hitlib
from jaxrna.targets.lanes import Chunk, ChunkRun, OnDevice
from jaxrna.targets.queries import (Query, Target, lead_for, make_target, overlap_bound,
                                    prepare_query, value_dtype)
from jaxrna.targets.scan import WORD, fill_segments
from jaxrna.targets.scoring import ScanParams
from jaxrna.targets.select import (MOVES_PER_WORD, SpilledRows, TargetText, Traced, accepted_hits,
                                   select, traced_from_batches)
from jaxrna.targets.sizes import (MAX_HEIGHTS, MAX_LANES, MIN_CHUNK_CLASS, ROW_STEP, SEGMENT_MIN,
                                  bucket, height_classes, pow2, round_up)

#: The scan's pieces, for the code that imports them from here (``Engine``'s parts live in
#: :mod:`~jaxrna.targets.sizes`, :mod:`~jaxrna.targets.queries` and :mod:`~jaxrna.targets.lanes`)
__all__ = ["Engine", "Chunk", "ChunkRun", "OnDevice", "Query", "Target", "prepare_query", "make_target",
           "lead_for", "overlap_bound", "value_dtype", "height_classes", "round_up", "bucket",
           "MAX_HEIGHTS", "MAX_LANES", "MIN_CHUNK_CLASS", "ROW_STEP", "WORD"]

log = logging.getLogger("jaxrna")

SEGMENT_BATCH = 4096  # free gaps: segments per refill call
#: refill lanes (tiles) per device call: a fixed size (one program), the last call topped up
#: with empty lanes (a GPU refills 32,768 tiles in well under a millisecond; a CPU's work is
#: per tile, so small calls waste less)
LANE_BATCH = {"pallas": 32768, "xla": 1024}
#: The name :mod:`jaxrna.kernels.fallback` knows the scan's Pallas kernels by
#: (:mod:`jaxrna.kernels.miranda_fill`; the pure-JAX scan is ``kernel="xla"``).
PALLAS_KERNEL = "targets.miranda"
THREADS_PER_DEVICE = {"gpu": 3}               # device threads (default 1)
LOOKAHEAD = 4         # blocks a device thread may run ahead of the consumer, per thread
#: Python's thread switch interval while several device threads run (seconds; Python's default
#: is 5 ms): a thread back from the device gets the interpreter sooner, so the devices idle less
SWITCH_INTERVAL = 0.0005


def _concat(parts: list[np.ndarray]) -> np.ndarray:
    """Rows of several launches, padded with zero move words to the widest."""
    width = max(p.shape[1] for p in parts)
    out = np.zeros((sum(len(p) for p in parts), width), np.int32)
    at = 0
    for p in parts:
        out[at:at + len(p), :p.shape[1]] = p
        at += len(p)
    return out


class Engine:
    """Scans prepared miRNAs against chunks of targets on every device; the host selects hits."""

    def __init__(self, params: ScanParams, energy=None, max_lanes: int = MAX_LANES,
                 lane_columns: int | None = None, kernel: str = "auto", devices=None,
                 query_block: int | None = None, threads_per_device: int | None = None,
                 lane_batch: int | None = None, interpret: bool = False, profile: bool = False,
                 timeline: Events = NO_EVENTS, host_scan: bool | None = None):
        """``kernel``: ``"xla"`` (pure JAX), ``"pallas"`` (the GPU kernels of
        :mod:`jaxrna.kernels.miranda_fill`; ``interpret=True`` runs them in Pallas' interpret
        mode, for tests on CPUs) or ``"auto"`` (Pallas on GPUs). ``query_block`` miRNAs per
        bulk-scan launch (default 16 with Pallas, 1 with XLA), spread over ``devices`` (default:
        all) with ``threads_per_device`` threads each (default 3 on GPUs, else 1).
        ``lane_batch``: segments refilled per device call (at most). ``profile``: time each
        device stage on its own (:meth:`_stage`; slower). ``timeline``: a
        :class:`~jaxrna.stages.Events` recorder (``bench/timeline.py``'s ``Timeline``) told when each
        block runs. ``host_scan``: the bulk scan in C on the host's cores
        (:mod:`jaxrna.targets.host_scan`, the same flag words; None = where the scan is the XLA
        one on CPUs and a C compiler works)."""
        self.params = params
        self.energy = energy
        self.max_lanes = max_lanes
        self.lane_columns = lane_columns
        self.devices = list(devices) if devices else jax.devices()
        if kernel == "auto":
            kernel = "pallas" if self.devices[0].platform == "gpu" else "xla"
        if kernel == "pallas" and not pallas_builds(PALLAS_KERNEL, interpret):
            kernel = "xla"      # a JAX whose Pallas does not build: the pure-JAX scan
        self.kernel = kernel
        self.interpret = interpret
        self.query_block = query_block or (16 if kernel == "pallas" else 1)
        self.threads_per_device = threads_per_device or THREADS_PER_DEVICE.get(self.devices[0].platform, 1)
        self.lane_batch = lane_batch or LANE_BATCH[kernel]
        if host_scan is None:
            host_scan = (kernel == "xla" and self.devices[0].platform == "cpu"
                         and host_scan_module.library() is not None)
        self.host_scan = bool(host_scan)
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
        #: start compiling a chunk's programs at once, in the background, before its first
        #: block (:mod:`jaxrna.targets.prefetch`; where cores are spare)
        self.prefetch = True

    def expect_chunks(self, chunk_nt: int, longest: int = 0) -> int:
        """More chunks follow the first, each closed once it holds ``chunk_nt`` nucleotides
        (with the record that reaches it): from now on chunks take at least the class of the
        largest of them (:func:`~jaxrna.targets.sizes.full_chunk_class`, records of up to
        ``max(longest, RECORD_NT)`` nt), so the run compiles one chunk class's programs.
        Returns that class.

        >>> Engine(ScanParams(no_energy=True)).expect_chunks(65_536) >> 16
        2
        """
        from jaxrna.targets.sizes import full_chunk_class

        self._class_floor = max(self._class_floor, full_chunk_class(chunk_nt, longest))
        return self._class_floor

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
        run = ChunkRun(self, queries, chunk, live)
        if self.prefetch:  # every program of the chunk, side by side (issue 26)
            from jaxrna.targets.prefetch import prefetch_chunk

            try:
                prefetch_chunk(self, run)
            except Exception as exc:  # noqa: BLE001 - the blocks compile what they need
                log.debug("targets: programs not prefetched: %s", exc)
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
        """``job(block, device)`` for every block, results in order
        (:func:`jaxrna.pipeline.schedule_on_threads`): the blocks go to the devices in turn,
        each device's blocks on its own ``threads_per_device`` threads (a block waits on its
        device between launches: its read-backs overlap the other threads' blocks), at most
        :data:`LOOKAHEAD` blocks per thread ahead of the consumer. One device with one
        thread: each block here, in turn."""
        threads = self.threads_per_device
        if len(self.devices) * threads == 1:
            yield from (res for _, res in schedule(range(n_blocks), job, lambda bi, res: res,
                                                   self.devices, depth=0))
            return

        def timed(bi, device):
            self.timeline.mark("block start", bi, device=str(device))
            res = job(bi, device)
            self.timeline.mark("block end", bi)
            return res

        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, SWITCH_INTERVAL))
        try:
            for _, res in schedule_on_threads(range(n_blocks), timed, lambda bi, res: res,
                                              self.devices, depth=LOOKAHEAD * threads,
                                              threads=threads):
                yield res
        finally:  # (an error, or the consumer stopped): blocks not started are dropped
            sys.setswitchinterval(interval)

    def _block(self, run: ChunkRun, device, ks: list[int]) -> "Traced | SpilledRows":
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
                jax.block_until_ready(words)
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

    def _tables(self, run: ChunkRun, qs: list[Query], rows: int):
        """The block's tables (profile (rows, 5, H), gap_open, gap_extend, seed (rows, H)) at
        its height (the run's height of its tallest miRNA), on the device; rows past
        ``len(qs)`` repeat the last miRNA (a full block: one compiled shape). Built once per
        block of miRNAs and device."""
        height = max(run.heights[q.height] for q in qs)
        tabs = [q.tables_at(height) for q in qs]
        tabs += [tabs[-1]] * (rows - len(tabs))
        return height, [jax.device_put(np.stack([t[x] for t in tabs])) for x in range(4)]

    def _words(self, run: ChunkRun, dev: OnDevice, qs: list[Query]):
        """(query_block, L/32, B) packed candidate-column flags of the bulk scan and the tiles
        per miRNA (:func:`~jaxrna.targets.extract.scan_block`), on the device; rows past
        ``len(qs)`` repeat the last miRNA."""
        chunk = run.chunk
        _, tables = self._tables(run, qs, self.query_block)
        sizes = [np.int32(x) for x in (self.params.score_threshold, chunk.rows // WORD, chunk.width,
                                       chunk.span, chunk.n_lanes, chunk.total)]  # traced values
        if self.host_scan:      # the same words from the host's cores; the tile counts in JAX
            live = [np.asarray(t)[:len(qs)] for t in tables]
            words = host_scan_module.scan_words_host(*live, np.asarray(dev.lanes), *sizes[:2],
                                                      dtype=run.dtype)
            if words is not None:
                words = np.concatenate([words] + [words[-1:]] * (self.query_block - len(qs)))
                return words, extract.segment_counts(words, *sizes[2:])
        return extract.scan_block(*tables, dev.lanes, *sizes,
                                  pallas=self.kernel == "pallas", dtype=run.dtype,
                                  interpret=self.interpret)

    def _extract(self, run: ChunkRun, dev: OnDevice, qs: list[Query], scanned) -> np.ndarray | None:
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
        static = self.refill_static(run, height)
        n_words, capacity = static["n_words"], static["capacity"]
        assert max_steps <= n_words * MOVES_PER_WORD
        threshold = self.params.score_threshold
        pallas = self.kernel == "pallas"
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
                                            **static)

        launched = [(first, launch(first, 0)) for first in range(0, round_up(used, batch), batch)]
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

    def refill_static(self, run: ChunkRun, height: int) -> dict:
        """The static arguments of :func:`~jaxrna.targets.extract.refill_and_trace` for blocks
        of ``height`` rows (:mod:`jaxrna.targets.prefetch` prepares the same program): launches
        of ``lane_batch`` tiles, candidates fetched ``capacity`` at a time, move words for the
        longest traceback any miRNA of this height can have with the run's lead (lead >= 2 W)."""
        n_words = round_up(-(-(height + run.lead // 2 + 2) // MOVES_PER_WORD), extract.ROUND_WORDS)
        return {"batch": self.lane_batch, "lead": run.lead, "pallas": self.kernel == "pallas",
                "dtype": run.dtype, "interpret": self.interpret, "capacity": 4 * self.lane_batch,
                "n_words": n_words}

    def _host_extract(self, run: ChunkRun, q: Query, words: np.ndarray) -> Traced:
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
                width = max(64, pow2(len(part)))
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
