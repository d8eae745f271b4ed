"""jaxrna's own engine of ``jaxrna fold --model turner --partition`` (JAX, CPU or GPU).

Per record, what RNAfold -p prints, from jaxrna's own pieces: the minimum free energy and its
structure from the MFE engine (:func:`jaxrna.energy.api.fold_energy_records`), the ensemble
free energy and the base-pair probabilities from :mod:`jaxrna.energy.partition` (log space,
float64; the probabilities are the outside pass), and what RNAfold derives from them --
centroid, MFE frequency, ensemble diversity, MEA structure, the pair-probability symbols --
from :mod:`jaxrna.energy.ensemble_measures`, the structures' energies from
:func:`jaxrna.energy.evaluate.energy_of_structure`. As ViennaRNA, the partition function of
dangles 1 is that of dangles 2, and the MFE frequency then uses the MFE structure's dangles-2
energy.

Records are batched by the energy model's length classes
(:func:`jaxrna.batching.energy_length_class`: 8 classes up to 10,240 nt), each class with a
fixed row count (:func:`rows_for`; a last batch topped up with empty rows); a run computes them
in at most :data:`CLASS_BUDGET` (4) classes (:class:`jaxrna.energy.run_classes.RunClasses`: a
run meeting more computes some records in a larger class of the ladder, chosen chunk by chunk
for the least padded work -- the partition fill runs over the whole padded class, so the cost is
cubic in it -- and, while more records may follow, keeping a class free or the largest class the
device admits), the MFE (:func:`jaxrna.energy.api.fold_energy_records`) in the same classes. One
partition program per class used (:data:`jaxrna.energy.partition.PROGRAM`, kept in jaxrna's
program store, :mod:`jaxrna.programs`), whatever the lengths, parameter set, temperature,
dangles and unpaired positions (all runtime values; the MEA structure is computed on the host),
beside the MFE engine's one program per class (fill and traceback in one: ``combined``): **at
most 4 + 4 = 8 programs for any mix of lengths up to 10,240 nt and any options** (beyond, too),
fewer where the device's memory refuses the long classes; a run meeting at most 4 classes (3
while more than :data:`CHUNK` records remain to be read) uses exactly its own. A chunk's
programs are asked for at its start (:func:`prefetch_programs`: side by side, in worker
processes on hosts of many cores), and :func:`prepare_programs` compiles a plan's without
running them (``jaxrna warmup fold --model turner --partition``:
:func:`jaxrna.energy.warmup.partition_plan`). Memory grows as the square of the class (about
:data:`BYTES_PER_CELL` per cell and row, the outside pass included); a record whose class does
not fit in the device's memory is refused up front with the estimate.

The same results as :mod:`jaxrna.energy.partition_vienna` within floating tolerances (ensemble
energies to 1e-4 kcal/mol, probabilities to 1e-6; ``tests/test_fold_turner_partition_jax.py``).

>>> from jaxrna.io.fasta import Record
>>> r = next(partition_records([Record("a", "GGGGAAACCCC")], EnergyModel()))
>>> r.structure, r.centroid, round(r.ensemble_energy, 4), round(r.mfe_frequency, 4)
('((((...))))', '((((...))))', -4.8734, 0.5456)
"""

from __future__ import annotations

from typing import Iterable, Iterator

import numpy as np

from jaxrna.batching import energy_length_class
from jaxrna.energy.api import EnergyModel, fold_energy_records
from jaxrna.energy.ensemble import PF_DANGLES, EnergyPartitionResult
from jaxrna.io.errors import ResourceError
from jaxrna.io.fasta import Record

#: Bytes per cell of the padded table and per batch row (inside tables, the column copy, the
#: outside pass's cotangents, the probabilities): the batch program's temporaries by XLA's
#: memory analysis were 307 / 235 / 230 B a cell on an H100 in the 256 / 2,048 / 4,096 classes
#: (fifteenth session, call S15a; 532 B on a CPU in the 128 class, where a record's tables are
#: a few MB). The estimate of the earlier program (7,000 B) refused a 4,000-nt record on
#: an 80 GB card.
BYTES_PER_CELL = 400
#: A CPU's batch budget: a CPU computes a batch's empty rows as it computes full ones (a GPU
#: computes them side by side), so its batches stay small: 8 rows of 128 nt, 2 of 256, 1 beyond.
CPU_BATCH_BYTES = 64 << 20
#: Most rows of a batch on a CPU and on a GPU.
MAX_ROWS = {"cpu": 8, "gpu": 64}
#: Records read and computed at a time.
CHUNK = 4096
#: Length classes one run computes in (the partition programs and the MFE programs alike).
CLASS_BUDGET = 4
#: Most cells (rows times the class's square) of a GPU batch: an H100 is busy with one row of
#: 2,048 nt (one 2,000-nt record 1.02 s alone, its batch of 8 rows 6.0 s), while rows of 256 nt
#: gain up to 64 a batch (6.1 / 5.0 / 4.5 ms a record in 16 / 32 / 64 rows; call S15a). A
#: batch's empty rows cost device time, so a long record alone is not padded to many rows.
GPU_BATCH_CELLS = 1 << 22
#: Threads that run batches on each device: on a GPU, a batch's inputs are prepared while the
#: last one computes (on a CPU, XLA's own threads take the cores).
THREADS_PER_DEVICE = {"cpu": 1, "gpu": 2}


def estimate_bytes(length: int) -> int:
    """Device memory one record of ``length`` nt needs here (its class's tables)."""
    padded = energy_length_class(length)
    return BYTES_PER_CELL * padded * padded


def top_class(limit: int) -> int | None:
    """The largest length class whose records fit in ``limit`` bytes (:func:`estimate_bytes`;
    None: not even the first).

    >>> top_class(8 << 30), top_class(60 << 30), top_class(1 << 20)
    (4096, 12288, None)
    """
    from jaxrna.energy import run_classes

    return run_classes.top_class(limit, estimate_bytes)


def rows_for(padded: int, platform: str, budget: int) -> int:
    """The fixed row count of a class: the largest power of two whose rows fit ``budget``
    bytes, at most :data:`MAX_ROWS` for the platform and, on a GPU, at most
    :data:`GPU_BATCH_CELLS` cells in all.

    >>> rows_for(128, "cpu", CPU_BATCH_BYTES), rows_for(256, "cpu", CPU_BATCH_BYTES)
    (8, 2)
    >>> [rows_for(c, "gpu", 20 << 30) for c in (128, 256, 512, 1024, 2048, 4096)]
    [64, 64, 16, 4, 1, 1]
    """
    fit = max(1, budget // (BYTES_PER_CELL * padded * padded))
    if platform == "gpu":
        fit = min(fit, max(1, GPU_BATCH_CELLS // (padded * padded)))
    rows = max(1, min(MAX_ROWS.get(platform, 8), fit))
    return 1 << (rows.bit_length() - 1)


def device_of(backend: str | None):
    """``(device, "cpu" or "gpu")``: the first device of ``backend`` (None: JAX's default)."""
    import jax

    device = jax.devices(backend)[0] if backend else jax.devices()[0]
    return device, ("gpu" if device.platform in ("gpu", "cuda", "rocm") else "cpu")


def budgets(device, platform: str) -> tuple[int, int]:
    """``(batch budget, most one record may take)`` in bytes."""
    from jaxrna.runtime import device_memory_bytes, memory_bytes

    if platform == "gpu":
        total = device_memory_bytes(device) or (16 << 30)
        return max(2 << 30, total // 4), int(total * 0.8)
    total = memory_bytes()
    return CPU_BATCH_BYTES, int(total * 0.5)


def partition_records(records: Iterable[Record], model: EnergyModel | None = None,
                      mea_gamma: float | None = None, max_bytes: int | None = None,
                      on_done=None, on_error=None, unpaired: dict | None = None,
                      processes: int | None = None, backend: str | None = None
                      ) -> Iterator[EnergyPartitionResult]:
    """:func:`jaxrna.energy.ensemble.partition_energy_records` on every device of ``backend``
    (None: JAX's default backend; or the first ``--devices N``): the batches go to the devices
    in turn, each on a thread of its own (:func:`jaxrna.pipeline.schedule_on_threads`), the
    first device's memory sizes them;
    ``processes`` is not used (the work is the devices')."""
    import jax

    model = model or EnergyModel()
    device, platform = device_of(backend)
    with jax.default_device(device):
        yield from _records(records, model, mea_gamma, max_bytes, on_done, on_error, unpaired,
                            device, platform)


def plan(lengths: Iterable[int], platform: str, budget: int,
         serve: dict[int, int] | None = None) -> list[tuple[int, int]]:
    """The ``(length class, rows)`` of the partition programs records of these ``lengths``
    run (empty records run none), in order of first use; ``serve``: the run's class of each
    class (:class:`jaxrna.energy.run_classes.RunClasses`; None: each its own).

    >>> plan([100, 0, 150, 90], "cpu", CPU_BATCH_BYTES)
    [(128, 8), (256, 2)]
    >>> plan([100, 0, 150, 90], "cpu", CPU_BATCH_BYTES, {128: 256, 256: 256})
    [(256, 2)]
    """
    serve = serve or {}
    classes = dict.fromkeys(serve.get(c, c) for c in
                            (energy_length_class(n) for n in lengths if n))
    return [(padded, rows_for(padded, platform, budget)) for padded in classes]


def programs_stored(lengths: Iterable[int], device, max_bytes: int | None = None) -> bool:
    """Whether every program a run over records of ``lengths`` nt computes on ``device`` is in
    this process or the store already (a run of them compiles nothing): its partition
    programs, and the MFE's (:func:`jaxrna.energy.api.programs_stored`), planned as
    :func:`partition_records` plans one chunk of them."""
    from jaxrna import programs
    from jaxrna.energy import partition
    from jaxrna.energy.api import programs_stored as mfe_stored

    lengths = list(lengths)
    platform = "gpu" if device.platform in ("gpu", "cuda", "rocm") else "cpu"
    budget, most = budgets(device, platform)
    limit = min(most, max_bytes) if max_bytes else most
    serve = run_classes(limit, platform, budget).serve(lengths, True)
    with partition.x64():
        for padded, rows in plan(lengths, platform, budget, serve):
            if not programs.available(partition.PROGRAM, specs(padded, rows), {}, device, True):
                return False
    return mfe_stored([n for n in lengths if n], device,
                      lambda n: serve[energy_length_class(n)], combined=True)


def specs(padded: int, rows: int):
    """The batch program's argument shapes (:class:`jax.ShapeDtypeStruct`) for a class: those
    of a batch of empty rows, which every batch of the class shares (call under
    ``jax_enable_x64``, as the engine runs)."""
    import jax

    from jaxrna.energy import partition

    args = partition.batch_inputs([""] * rows, length=padded)[0]
    return jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype), args)


def prefetch_programs(classes: Iterable[tuple[int, int]], device) -> int:
    """Start preparing the partition program of every ``(length class, rows)`` of a plan in
    the background (:func:`jaxrna.compile_workers.prefetch`: on hosts with enough cores,
    else nothing), keyed as the batches will ask for them. Returns how many were asked for.

    >>> prefetch_programs([], None)
    0
    """
    from jaxrna import compile_workers
    from jaxrna.energy import partition

    count = 0
    with partition.x64():
        for padded, rows in dict.fromkeys(classes):
            compile_workers.prefetch(partition.PROGRAM, "jaxrna.energy.partition:batch_jitted",
                                     specs(padded, rows), {}, device, cpu_store=True)
            count += 1
    return count


def prepare_programs(classes: Iterable[tuple[int, int]], device) -> int:
    """Compile (or load from the cache) the partition program of every ``(length class,
    rows)`` now, without running it; returns how many."""
    from jaxrna import programs
    from jaxrna.energy import partition

    classes = list(dict.fromkeys(classes))
    prefetch_programs(classes, device)            # side by side where there are cores
    with partition.x64():
        for padded, rows in classes:
            programs.program(partition.PROGRAM, partition.batch_jitted(), specs(padded, rows),
                             {}, device, cpu_store=True)
    return len(classes)


def _records(records, model, mea_gamma, max_bytes, on_done, on_error, unpaired, device,
             platform) -> Iterator[EnergyPartitionResult]:
    budget, most = budgets(device, platform)
    limit = min(most, max_bytes) if max_bytes else most
    classes = run_classes(limit, platform, budget)
    chunk: list[Record] = []
    first = True                       # no chunk ran yet (a run in one chunk: its MFE's
    for rec in records:                # classes of one record take one row)
        if len(chunk) >= CHUNK:         # a full chunk, and a record follows it
            yield from _run(chunk, model, mea_gamma, unpaired, device, platform, budget,
                            on_done, classes, False)
            chunk, first = [], False
        need = estimate_bytes(len(rec.sequence))
        if need > limit:
            from jaxrna.runtime import human_bytes

            exc = ResourceError(
                f"{rec.id}: {len(rec.sequence)} nt need about {human_bytes(need)} for the "
                f"energy model's partition function on {platform}, more than the "
                f"{human_bytes(limit)} available; use --backend auto (ViennaRNA's engine) or "
                "shorter sequences")
            if on_error is None:
                raise exc
            yield from _run(chunk, model, mea_gamma, unpaired, device, platform, budget,
                            on_done, classes, False)
            chunk, first = [], first and not chunk
            on_error(rec, exc)
            continue
        chunk.append(rec)
    yield from _run(chunk, model, mea_gamma, unpaired, device, platform, budget, on_done,
                    classes, True, alone=first)


def run_classes(limit: int, platform: str, budget: int):
    """The :class:`jaxrna.energy.run_classes.RunClasses` of a run whose records may take
    ``limit`` bytes each: :data:`CLASS_BUDGET` classes, the largest :func:`top_class`, a
    class's cost its batches' padded work (rows, empty ones included, times the cube of the
    class: the fill runs over the whole padded class)."""
    from jaxrna.energy.run_classes import RunClasses, batch_work

    return RunClasses(top_class(limit) or energy_length_class(1), CLASS_BUDGET,
                      batch_work(lambda padded: rows_for(padded, platform, budget)))


def _run(chunk: list[Record], model: EnergyModel, gamma, unpaired, device, platform: str,
         budget: int, on_done, classes, final: bool, alone: bool = False
         ) -> Iterator[EnergyPartitionResult]:
    if not chunk:
        return
    import concurrent.futures

    import jax

    from jaxrna.energy import partition
    from jaxrna.pipeline import default_workers, schedule_on_threads, worker_pool
    from jaxrna.runtime import devices
    from jaxrna.stages import stage

    lengths = [len(rec.sequence) for rec in chunk]
    serve = classes.serve(lengths, final)

    def padded_of(n: int) -> int:
        return serve[energy_length_class(n)]

    # the chunk's partition programs compile (where there are cores) while the MFE runs
    prefetch_programs(plan(lengths, platform, budget, serve), device)
    live = [k for k, n in enumerate(lengths) if n]      # empty records need no MFE
    with stage("mfe"):
        mfe = dict(zip(live, fold_energy_records([chunk[k] for k in live], model,
                                                 with_pairs=True, backend=platform,
                                                 unpaired=unpaired, length_class=padded_of,
                                                 combined=True, alone=alone)))
    ups = [tuple((unpaired or {}).get(rec.id, ())) for rec in chunk]
    groups: dict[int, list[int]] = {}
    for k in live:
        groups.setdefault(padded_of(lengths[k]), []).append(k)
    batches = []                        # (class, members): fixed rows, the last one topped up
    for padded, members in groups.items():
        rows = rows_for(padded, platform, budget)
        batches += [(padded, members[s:s + rows], rows) for s in range(0, len(members), rows)]

    def run(batch, dev):
        """On ``dev``'s own thread (the program's call returns only when the device is done):
        the batch's ensemble energies and pair probabilities."""
        padded, part, rows = batch
        pad = rows - len(part)
        seqs = [chunk[k].sequence for k in part] + [""] * pad
        with stage("device"), jax.default_device(dev):
            return partition.pair_probabilities(seqs, model.params, model.dangles,
                                                model.temperature,
                                                [ups[k] for k in part] + [()] * pad,
                                                length=padded)

    # what each record's results need of its dense probabilities (the measures, the
    # structures' energies, the MEA structure) in worker processes on hosts with cores to
    # spare, while the device computes the next batches
    workers = default_workers() if len(live) >= 64 else 0
    pool = worker_pool(workers) if workers else None
    pending: dict[int, concurrent.futures.Future] = {}     # record -> its parts

    def collect(batch, done):
        energies, probs = done
        with stage("measures"):         # the dense matrices are not kept
            for row, k in enumerate(batch[1]):
                job = (chunk[k].sequence, mfe[k].pairs or (), float(energies[row]),
                       probs[row], model, gamma)
                if pool:
                    pending[k] = pool.submit(record_parts, job)
                else:
                    pending[k] = concurrent.futures.Future()
                    pending[k].set_result(record_parts(job))

    done_upto = 0

    def finished(final: bool) -> Iterator[EnergyPartitionResult]:
        """The records whose results are ready, in input order (``final``: all, waiting)."""
        nonlocal done_upto
        while done_upto < len(chunk):
            k = done_upto
            if lengths[k]:
                got = pending.get(k)
                if got is None or not (final or got.done()):
                    return
                with stage("measures"):
                    parts, energies = pending.pop(k).result()
                yield _result(chunk[k], mfe[k], parts, energies, model, gamma)
            else:
                yield _empty(chunk[k], model, gamma)
            done_upto += 1
            if on_done:
                on_done(1)

    # every device of the backend, each on threads of its own (the program's call waits for
    # the device: from one thread the devices would take turns, and the host's measures and
    # writing would wait for the device); on a GPU two threads a device, so one batch's
    # inputs are prepared while the last one computes; results in input order, handed on as
    # soon as they are ready
    threads = THREADS_PER_DEVICE.get(platform, 1)
    for _ in schedule_on_threads(batches, run, collect, devices(platform), depth=threads,
                                 threads=threads):
        yield from finished(False)
    yield from finished(True)


def record_parts(job: tuple) -> tuple[dict, tuple]:
    """``(measures, structures' energies)`` of one record (:func:`_measures`,
    :func:`structure_energies`) from ``(sequence, MFE pairs, ensemble energy, dense
    probabilities, model, MEA gamma)``: a worker process's job."""
    seq, pairs, ensemble_energy, P, model, gamma = job
    parts = _measures(len(seq), pairs, ensemble_energy, P)
    return parts, structure_energies(seq, parts, model, gamma)


def _measures(n: int, pairs, ensemble_energy: float, P: np.ndarray) -> dict:
    """What the results of a record of ``n`` nt (MFE ``pairs``) need of its dense
    probability matrix ``P``."""
    from jaxrna.energy import ensemble_measures as measures

    i, j, p = EnergyPartitionResult.sparse(P)
    centroid, distance = measures.centroid(P)
    return {"structure": measures.dot_bracket(pairs, n),
            "ensemble_energy": ensemble_energy, "pair_i": i, "pair_j": j, "pair_p": p,
            "symbols": measures.pair_symbols(P), "centroid": centroid,
            "centroid_distance": float(distance),
            "diversity": float(measures.ensemble_diversity(P))}


def structure_energies(seq: str, parts: dict, model: EnergyModel, gamma) -> tuple:
    """``(MFE structure's energy for the MFE frequency, centroid energy, (MEA structure, MEA,
    its energy))`` in kcal/mol of one record of measures ``parts`` (:func:`_measures`; pure
    Python, run by :func:`record_parts`). The MFE
    structure's energy is that of the partition function's dangles (2 for dangles 1); MEA from
    the kept probabilities (``p >= 1e-6``: MEA reads only ``p >= 1e-4 / (1 + gamma)``)."""
    from jaxrna.energy import ensemble_measures as measures
    from jaxrna.energy.evaluate import energy_of_structure

    structure, centroid = parts["structure"], parts["centroid"]
    pair_i, pair_j, pair_p = parts["pair_i"], parts["pair_j"], parts["pair_p"]

    def kcal(s: str, dangles: int = model.dangles) -> float:
        return energy_of_structure(seq, s, model.params, dangles, model.temperature) / 100

    pf_dangles = PF_DANGLES[model.dangles]
    min_en = kcal(structure, pf_dangles) if pf_dangles != model.dangles else None
    mea = (None, None, None)
    if gamma is not None:
        P = np.zeros((len(seq), len(seq)))
        P[pair_i - 1, pair_j - 1] = pair_p
        mea_structure, mea_value = measures.mea(P, gamma)
        mea = (mea_structure, float(mea_value), kcal(mea_structure))
    return min_en, kcal(centroid), mea


def _result(rec: Record, folded, parts: dict, energies: tuple, model: EnergyModel,
            gamma) -> EnergyPartitionResult:
    from jaxrna.energy import ensemble_measures as measures

    min_en, centroid_energy, mea = energies
    if min_en is None:
        min_en = folded.energy / 100
    ensemble_energy = parts["ensemble_energy"]
    return EnergyPartitionResult(
        id=rec.id, sequence=rec.sequence, model=model, energy=int(folded.energy),
        structure=parts["structure"], ensemble_energy=ensemble_energy,
        ensemble_symbols=parts["symbols"], pair_i=parts["pair_i"], pair_j=parts["pair_j"],
        pair_p=parts["pair_p"], centroid=parts["centroid"],
        centroid_distance=parts["centroid_distance"], centroid_energy=centroid_energy,
        mfe_frequency=float(measures.mfe_frequency(min_en, ensemble_energy,
                                                   model.temperature)),
        ensemble_diversity=parts["diversity"], mea_structure=mea[0], mea=mea[1],
        mea_energy=mea[2], mea_gamma=gamma, description=rec.description)


def _empty(rec: Record, model: EnergyModel, gamma) -> EnergyPartitionResult:
    none = np.zeros(0, np.int32)
    mea = ("", 0.0, 0.0) if gamma is not None else (None, None, None)
    return EnergyPartitionResult(
        id=rec.id, sequence=rec.sequence, model=model, energy=0, structure="",
        ensemble_energy=0.0, ensemble_symbols="", pair_i=none, pair_j=none,
        pair_p=np.zeros(0), centroid="", centroid_distance=0.0, centroid_energy=0.0,
        mfe_frequency=1.0, ensemble_diversity=0.0, mea_structure=mea[0], mea=mea[1],
        mea_energy=mea[2], mea_gamma=gamma, description=rec.description)
