"""A targets run's device programs started side by side at its start (issue 26).

Once a chunk's class, the refill lead, the value type and the miRNA heights are known (a
:class:`~jaxrna.targets.lanes.ChunkRun`), every program the chunk's scan will call is fixed
(:mod:`jaxrna.targets.engine`): per device, the lane packing, the tiling, and per block
height the bulk scan and the refill with its traceback; with the ``device`` energy engine,
its batch program. :func:`chunk_programs` lists them with the exact argument shapes, dtypes
and static values the engine's calls have (so their program keys are the calls' keys:
:func:`jaxrna.programs.program_key`), and :func:`prefetch_chunk` hands them to
:func:`jaxrna.compile_workers.prefetch`: on hosts with cores to spare they are traced and
compiled in background threads (the device energy engine's program, which traces for seconds,
in a worker process), and each call of the scan finds its program ready or under way instead
of compiling it in turn.

Not prepared: free gaps (whole targets per lane, host extraction) and ``profile`` runs (each
stage its own program). A tiling or refill program is prepared even where no block turns out
to hold a candidate (it is then compiled for nothing; a run with hits needs them all).

>>> from jaxrna.targets.engine import Engine, prepare_query
>>> from jaxrna.targets.lanes import Chunk, ChunkRun
>>> from jaxrna.targets.select import TargetText
>>> from jaxrna.targets.scoring import ScanParams
>>> p = ScanParams(no_energy=True)
>>> engine = Engine(p, host_scan=False)     # (on CPUs the scan may be C: no scan_block then)
>>> qs = [prepare_query("m", "", "GUGAGAUCAUUUUGAAAGCUG", p)]
>>> run = ChunkRun(engine, qs, Chunk(TargetText.from_sequences(["ACGU" * 50]), qs[0].overlap), [True])
>>> [name for name, *_ in chunk_programs(engine, run, engine.devices[0])]   # doctest: +NORMALIZE_WHITESPACE
['targets.engine._pack_lanes', 'targets.extract.scan_block', 'targets.extract.segment_tiles',
 'targets.extract.refill_and_trace']
"""

from __future__ import annotations

import numpy as np

from jaxrna.targets.scan import WORD

#: Where a worker finds each program's ``jax.jit`` function (:mod:`jaxrna.compile_workers`).
SOURCES = {
    "targets.engine._pack_lanes": "jaxrna.targets.lanes:pack_lanes.jitted",
    "targets.extract.scan_block": "jaxrna.targets.extract:scan_block.jitted",
    "targets.extract.segment_counts": "jaxrna.targets.extract:segment_counts.jitted",
    "targets.extract.segment_tiles": "jaxrna.targets.extract:segment_tiles.jitted",
    "targets.extract.refill_and_trace": "jaxrna.targets.extract:refill_and_trace.jitted",
    "targets.energy.fold_batch": "jaxrna.targets.energy:fold_batch_jitted",
}


#: The order programs are handed to the compile threads: the longest to compile first (their
#: lowering takes turns, :func:`jaxrna.programs.prefetch`), since a block needs them all.
#: H200, a cold 2,000 x 30,000 run (S18d): the refill 2.7-3.1 s of XLA compilation, the scan
#: 0.8, the tiling 0.7-1.1, the lane packing less.
COMPILE_ORDER = {"targets.extract.refill_and_trace": 0, "targets.extract.scan_block": 1,
                 "targets.extract.segment_tiles": 2, "targets.extract.segment_counts": 3,
                 "targets.engine._pack_lanes": 4}


def _spec(shape, dtype):
    import jax

    return jax.ShapeDtypeStruct(tuple(int(x) for x in shape), np.dtype(dtype))


def _scalar():
    return _spec((), np.int32)


def chunk_programs(engine, run, device) -> list[tuple[str, tuple, dict]]:
    """``(name, argument specs, static arguments)`` of every scan program ``run`` (a chunk of
    lanes, not free gaps) calls on ``device``, in the order a block first needs them: as
    :meth:`ChunkRun._put <jaxrna.targets.lanes.ChunkRun._put>`,
    :meth:`Engine._words <jaxrna.targets.engine.Engine._words>` and
    :meth:`Engine._extract <jaxrna.targets.engine.Engine._extract>` call them."""
    from jaxrna.alphabet import CODE_OF_BYTE
    from jaxrna.targets import extract

    chunk = run.chunk
    if chunk.lane_of_target or engine.profile:
        return []
    heights = run.block_heights(blocks_on(engine, run, device))
    if not heights:             # no block of a miRNA that can score runs there
        return []
    rows_out, lanes_out = run.lane_shape()
    letters, starts = run.letters()
    out = [("targets.engine._pack_lanes",
            (_spec(letters.shape, letters.dtype), _spec(starts.shape, starts.dtype),
             _spec(CODE_OF_BYTE.shape, CODE_OF_BYTE.dtype), _spec((6,), np.int32)),
            {"lanes_out": lanes_out, "rows_out": rows_out, "stream_len": run.stream_len()})]
    rows = engine.query_block
    pallas = engine.kernel == "pallas"

    def tables(height):   # Engine._tables: profile, gap_open, gap_extend, seed
        return (_spec((rows, 5, height), np.int32), _spec((rows, height), np.int32),
                _spec((rows, height), np.int32), _spec((rows, height), np.bool_))

    lanes = _spec((rows_out, lanes_out), np.int8)
    words = (rows, rows_out // WORD, lanes_out)
    if engine.host_scan:        # the scan in C (jaxrna.targets.host_scan); its tile counts
        out.append(("targets.extract.segment_counts", (_spec(words, np.int32),) + (_scalar(),) * 4,
                    {}))
    else:
        for height in heights:
            out.append(("targets.extract.scan_block", (*tables(height), lanes) + (_scalar(),) * 6,
                        {"pallas": pallas, "dtype": run.dtype, "interpret": engine.interpret}))
    batch = engine.lane_batch
    out.append(("targets.extract.segment_tiles",
                (_spec(words, np.int32),) + (_scalar(),) * 4 + (_spec((rows,), np.int32), _scalar()),
                {"batch": batch}))
    n_out = extract.tiles_size(words, batch)
    stream = _spec((run.stream_len(),), np.int8)
    tiles = _spec((n_out,), np.int32)
    for height in heights:
        args = ((stream, 0, tiles, tiles, _scalar(), _spec((batch // extract.LANE_BLOCK,), np.int32))
                + tables(height)
                + (_spec(starts.shape, starts.dtype), _spec((rows,), np.int32), _spec((rows,), np.int32))
                + (_scalar(),) * 3)
        out.append(("targets.extract.refill_and_trace", args, engine.refill_static(run, height)))
    return out


def blocks_on(engine, run, device) -> list[list[int]]:
    """The blocks of miRNA indices that ``device`` scans: the scheduler
    (:func:`jaxrna.pipeline.schedule`) hands block ``k`` to device ``k mod n`` (the devices
    take turns; each block's own program set follows from its miRNAs' heights)."""
    n = len(engine.devices)
    d = engine.devices.index(device)
    return [ks for k, ks in enumerate(engine.blocks(len(run.queries))) if k % n == d]


def energy_program(energy, device, probe: bool = True) -> tuple[str, tuple, dict] | None:
    """``(name, argument specs, static arguments)`` of the ``device`` energy engine's batch
    program on ``device`` (:meth:`DeviceEngine.call <jaxrna.targets.energy.DeviceEngine.call>`),
    None for the other engines. ``probe``: as for
    :func:`jaxrna.targets.energy.device_program`."""
    import jax

    from jaxrna.targets.energy import DEVICE_LENGTH, device_program

    if getattr(energy, "name", None) != "device":
        return None
    size = energy.batch_rows(device.platform, device)
    length = DEVICE_LENGTH
    program, dp = device_program(length, device.platform, probe)
    dp_specs = jax.tree_util.tree_map(lambda a: _spec(np.shape(a), np.asarray(a).dtype), dp)
    args = (_spec((size, length), np.int8), _spec((size,), np.int32), _spec((size,), np.int32),
            _spec((size, 3, length), np.int16), dp_specs, _scalar())
    return "targets.energy.fold_batch", args, dict(program.keywords)


def energy_program_here(device) -> tuple[str, tuple, dict]:
    """``(source, argument specs, static arguments)`` of the ``device`` energy engine's batch
    program on ``device``, worked out in a compile worker started at the run's start
    (:func:`jaxrna.compile_workers.submit_early`): the program :func:`energy_program` gives
    the run's engine there."""
    from jaxrna.targets.energy import DeviceEngine

    # no Pallas probe here (a tiny program of its own, on the early worker's path): the
    # run probes; a kernel that does not build fails this worker, and the run compiles
    name, args, static = energy_program(DeviceEngine([device]), device, probe=False)
    return SOURCES[name], args, static


def prefetch_chunk(engine, run) -> int:
    """Start preparing every program of ``run`` on every device of ``engine`` (and the energy
    engine's, once per engine) in the background (:func:`jaxrna.compile_workers.prefetch`;
    nothing where that finds no cores to spare). Returns how many were asked for."""
    from jaxrna import compile_workers

    count = 0
    for device in engine.devices:
        for name, args, static in sorted(chunk_programs(engine, run, device),
                                         key=lambda p: COMPILE_ORDER.get(p[0], len(COMPILE_ORDER))):
            # in threads here: they trace in about a second together, and a cold GPU run
            # waited 2.5 s longer with them in worker processes (H100, 2,000 x 30,000)
            compile_workers.prefetch(name, SOURCES[name], args, static, device, cpu_store=True,
                                     processes=False)
            count += 1
    energy = engine.energy
    if getattr(energy, "name", None) != "device" or getattr(engine, "_energy_prefetched", False):
        return count
    engine._energy_prefetched = True
    import jax

    from jaxrna.pipeline import default_workers

    devices = energy.devices or jax.devices()[:1]
    # with host worker processes every device folds (targets.output.DeviceEnergies), else the
    # first one (after the scan's programs: choosing the interior loop may build a kernel)
    for device in devices if default_workers() > 0 else devices[:1]:
        name, args, static = energy_program(energy, device)
        compile_workers.prefetch(name, SOURCES[name], args, static, device)
        count += 1
    return count
