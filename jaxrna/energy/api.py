"""Minimum free energy folding of many sequences: strings or records in, results out in order.

Sequences are grouped by length class (:func:`jaxrna.batching.energy_length_class`: powers of
two from 128 to 4,096, then 6,144 and 10,240) into batches of a fixed row count per class
(:func:`batch_rows_for`; a last batch is topped up with empty rows); each batch runs the two
programs of its class, the fill of :mod:`jaxrna.energy.fill` and the traceback of
:mod:`jaxrna.energy.traceback`, each ``vmap``-ped over a batch, on the CPU or a GPU. Two
programs, not one: a cold run compiles them side by side, and each compiles in about half the
time of the two in one (H100, a 512-nt class: 5.9 s lowered and compiled against 10.3 s;
``--score-only`` runs the fill alone). Everything else is a runtime value: the lengths inside a
class (the fill stops at the batch's longest), the parameter set and temperature (the tables
are arguments), the dangle model. A run uses at most :data:`CLASS_BUDGET` (4) classes
(:func:`run_classes`: a run meeting more folds some records in a larger class of the ladder),
so it compiles **at most 8 programs for any mix of lengths and any options**, and a later run
with other data and options compiles nothing new. The partition engine's MFE runs fill and
traceback as one program (:data:`PROGRAM`, ``combined``), one per class, beside its
partition program.

>>> r = fold_energy("GGGGAAACCCCAUCGAAAGAUU")
>>> r.structure, r.energy, r.score_text
('((((...))))(((....))).', -650, ' -6.50')
>>> [x.energy for x in fold_energy(["GGGGAAACCCCAUCGAAAGAUU", "GGGGAAACCCC"], dangles=0)]
[-450, -450]
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np

from jaxrna.batching import energy_length_class
from jaxrna.energy.batch_plan import BYTES_PER_CELL, device_batches, gpu_budget
from jaxrna.energy.params import BUNDLED, EnergyParams, load_params
from jaxrna.io.errors import ResourceError
from jaxrna.io.fasta import Record
from jaxrna.kernels.fallback import compile_or_fallback
# the programs live in :mod:`jaxrna.energy.mfe_programs`; importable from here as before
from jaxrna.energy.mfe_programs import (FILL_PROGRAM, INTERIOR_KERNEL, PROGRAM,  # noqa: F401
                                        TRACE_PROGRAM, batch_program, fill_program,
                                        interior_for, prefetch_programs, prepare_program,
                                        program_args, programs_stored, static_for,
                                        trace_program)


@dataclass(frozen=True)
class EnergyModel:
    """What to fold with: a parameter set (``turner2004``, ``turner1999`` or a ``.par``
    path), the temperature in Celsius and the dangle model (0, 1 or 2, as RNAfold's -d)."""

    params: str = "turner2004"
    temperature: float = 37.0
    dangles: int = 2

    def __post_init__(self):
        if self.dangles not in (0, 1, 2):
            raise ValueError(f"dangles must be 0, 1 or 2, not {self.dangles!r}")

    def load(self) -> EnergyParams:
        return load_params(self.params, self.temperature)

    @property
    def params_name(self) -> str:
        return self.params if self.params.lower() in BUNDLED else self.load().name


@dataclass(frozen=True)
class EnergyFoldResult:
    """One folded sequence: ``energy`` in dcal/mol (an integer), pairs 0-based ``(i, j)``."""

    id: str
    sequence: str
    energy: int
    model: EnergyModel
    pairs: tuple[tuple[int, int], ...] | None = None
    description: str = field(default="", compare=False)
    score_label = "energy"

    @property
    def length(self) -> int:
        return len(self.sequence)

    @property
    def score(self) -> float:
        """The minimum free energy in kcal/mol."""
        return self.energy / 100

    @property
    def score_text(self) -> str:
        """The energy as RNAfold prints it: ``%6.2f`` kcal/mol (``' -4.80'``)."""
        return f"{self.energy / 100:6.2f}"

    @property
    def structure(self) -> str | None:
        if self.pairs is None:
            return None
        out = ["."] * self.length
        for i, j in self.pairs:
            out[i], out[j] = "(", ")"
        return "".join(out)

    def json_fields(self) -> dict:
        obj = {"id": self.id, "length": self.length, "sequence": self.sequence,
               "energy": round(self.energy / 100, 2), "model": "turner",
               "params": self.model.params_name, "temperature": self.model.temperature,
               "dangles": self.model.dangles}
        if self.pairs is not None:
            obj["structure"] = self.structure
            obj["pairs"] = [[i + 1, j + 1] for i, j in self.pairs]
        return obj


@functools.lru_cache(maxsize=4096)
def estimate_bytes(length: int) -> int:
    """Memory needed to fold one sequence of ``length`` nt (padded to its class)."""
    n = energy_length_class(length)
    return BYTES_PER_CELL * (n + 64) * (n + 64)


def memory_limit(max_bytes: int | None = None) -> int | None:
    """``max_bytes``, or else the default limit: 80% of the machine's memory (None where the
    machine does not say). A run asks once and passes it to :func:`check_memory`."""
    if max_bytes is not None:
        return max_bytes
    from jaxrna.runtime import memory_bytes

    return int(0.8 * memory_bytes()) or None


def check_memory(length: int, max_bytes: int | None = None) -> None:
    from jaxrna.runtime import human_bytes

    limit = memory_limit(max_bytes)
    need = estimate_bytes(length)
    if limit and need > limit:
        raise ResourceError(
            f"{length} nt need about {human_bytes(need)} to fold with the energy model, more "
            f"than the {human_bytes(limit)} allowed; use a machine with more memory or raise "
            "--max-memory")


def fold_batch(sequences: Sequence[str], params: EnergyParams, dangles: int = 2,
               unpaired: Sequence[Iterable[int]] | None = None, with_pairs: bool = True,
               length: int | None = None, batch: int | None = None
               ) -> list[tuple[int, np.ndarray | None]]:
    """Fold sequences of one padded ``length`` (default: the class of the longest) as one
    device batch of ``batch`` rows (default: as many as sequences; empty rows pad it, so a
    few batch sizes serve every call); ``(energy, partner array or None)`` per sequence
    (partner -1: unpaired). ``unpaired``: per sequence, 0-based positions that must not pair.

    >>> [e for e, _ in fold_batch(["GGGGAAACCCC", "A"], load_params(), batch=8)]
    [-450, 0]
    """
    return _collect(_launch(sequences, params, dangles, unpaired, with_pairs, length, batch))


def _launch(sequences, params, dangles, unpaired, with_pairs, length, batch,
            platform: str | None = None, combined: bool = False) -> tuple:
    """Start :func:`fold_batch`'s device work (asynchronous) on JAX's default device, whose
    ``platform`` picks the fill's interior-loop kernel; :func:`_collect` waits for it.
    ``combined``: fill and traceback in one program (:data:`PROGRAM`), else the fill program
    and, with ``with_pairs``, the traceback program after it."""
    from jaxrna.energy.fill import prepare_batch
    from jaxrna.programs import default_device

    if not sequences:
        return sequences, 0, None, with_pairs
    count = len(sequences)
    if batch is not None and batch > count:
        sequences = list(sequences) + [""] * (batch - count)
        unpaired = list(unpaired or [()] * count) + [()] * (batch - count)
    length = length or energy_length_class(max(len(s) for s in sequences))
    stack = prepare_batch(sequences, params, length, unpaired)
    args = program_args(stack, params, length, dangles, with_pairs)
    if not combined:
        args = args[:-1]                   # the fill's arguments: all but ``with_pairs``
    static = static_for(platform or default_device().platform, length)
    interior = static["interior"]
    program = batch_program() if combined else fill_program()
    run = functools.partial(program.bind, *args, bands=static["bands"])
    if interior in ("pallas", "interpret"):     # a kernel that does not build: pure JAX
        from jaxrna.energy.fill_plan import PURE_JAX

        out = compile_or_fallback(INTERIOR_KERNEL, lambda: run(interior=interior),
                                  lambda: run(interior=PURE_JAX))()
    else:
        out = run(interior=interior)()
    if not combined:
        energy, T, F = out
        partner = ok = None
        if with_pairs:
            partner, ok = trace_program()(T, F, *args[:6])
        out = energy, partner, ok
    return sequences, count, out, with_pairs


def _collect(launched: tuple, as_pairs: bool = False) -> list[tuple[int, object]]:
    """Wait for a :func:`_launch` and return ``(energy, partner array or None)`` per sequence,
    or with ``as_pairs`` ``(energy, pairs tuple or None)`` (:func:`_batch_pairs`)."""
    sequences, count, outputs, with_pairs = launched
    if outputs is None:
        return []
    energy, partner, ok = outputs
    energy = np.asarray(energy)[:count].tolist()
    if not with_pairs:
        return [(e, None) for e in energy]
    partner, ok = np.asarray(partner), np.asarray(ok)
    if not ok.all():
        bad = [sequences[k] for k in np.flatnonzero(~ok)][:1]
        raise AssertionError(f"energy traceback failed (a bug) for {bad}")
    if as_pairs:
        lengths = [len(s) for s in sequences[:count]]
        return list(zip(energy, _batch_pairs(partner[:count], np.asarray(lengths, np.int64))))
    return [(e, partner[k, :len(s)]) for k, (e, s) in enumerate(zip(energy, sequences[:count]))]


def _batch_pairs(partner: np.ndarray, lengths: np.ndarray | None = None
                 ) -> list[tuple[tuple[int, int], ...]]:
    """The pairs ``(i, j)``, ``i < j < lengths[row]``, of each row of a partner matrix (-1:
    unpaired), for the whole batch at once.

    >>> _batch_pairs(np.array([[2, -1, 0, -1], [-1, -1, -1, -1], [3, 2, 1, 0]]))
    [((0, 2),), (), ((0, 3), (1, 2))]
    """
    position = np.arange(partner.shape[1])[None, :]
    inside = partner > position
    if lengths is not None:
        inside &= partner < lengths[:, None]
    rows, cols = np.nonzero(inside)
    pairs = list(zip(cols.tolist(), partner[rows, cols].tolist()))
    bounds = np.searchsorted(rows, np.arange(partner.shape[0] + 1)).tolist()
    return [tuple(pairs[bounds[k]:bounds[k + 1]]) for k in range(partner.shape[0])]


def fold_energy_records(records: Iterable[Record], model: EnergyModel | None = None,
                        with_pairs: bool = True, chunk: int | None = None,
                        max_bytes: int | None = None, batch_budget: int | None = None,
                        on_done=None, backend: str = "cpu",
                        on_error=None, unpaired: dict | None = None,
                        length_class=None, combined: bool = False, alone: bool = True
                        ) -> Iterator[EnergyFoldResult]:
    """Fold a stream of records with the energy model, yielding results in input order.

    As :func:`jaxrna.fold.api.fold_records`: ``chunk`` records are read at a time (default
    4,096 on a CPU, 65,536 on a GPU) and grouped by padded length into device batches of at
    most ``batch_budget`` bytes (1 GiB on a CPU; on a GPU :func:`gpu_budget`, where large
    batches are what makes it fast), spread over every device of ``backend``
    (:func:`jaxrna.runtime.devices`, :func:`jaxrna.pipeline.schedule`), the next batch
    prepared while one runs; ``on_done(k)`` reports progress; a record too large for the memory
    limit raises :class:`ResourceError` or, with ``on_error(record, error)``, is skipped.
    ``unpaired``: ``{record id: 0-based positions that must not pair}``. ``length_class``: the
    padded length a record of ``n`` nt is folded at (default :func:`energy_length_class`; a
    class of the ladder at least that large: :mod:`jaxrna.energy.partition_jax` passes its
    run's few classes, and ``combined``: fill and traceback in one program per class); the
    same results. Else each class runs two programs, its fill and its traceback (one with
    ``with_pairs`` false), and a run uses at most :data:`CLASS_BUDGET` classes
    (:func:`run_classes`). ``alone``: where the records fit in one chunk, a class that holds
    only one of them runs it in a batch of one row on a GPU (its second standard program,
    :func:`jaxrna.energy.batch_plan.alone_rows`); a caller that calls once per chunk of a
    longer run passes False.
    """
    import jax

    from jaxrna.energy.mfe_programs import first_program
    from jaxrna.pipeline import ready_first, schedule
    from jaxrna.programs import readiness
    from jaxrna.runtime import devices

    model = model or EnergyModel()
    params = model.load()
    gpu = backend != "cpu"
    used = devices(backend)             # every device of the backend, or --devices N
    chunk = chunk or (65536 if gpu else 4096)
    batch_budget = batch_budget or (gpu_budget(used[0]) if gpu else 1 << 30)
    buffer: list[Record] = []
    max_bytes = memory_limit(max_bytes)   # the machine's memory, asked once per run
    classes = None
    first = first_program(params, used[0], combined, with_pairs)   # ready_first's question
    if length_class is None and with_pairs and not combined:
        classes = run_classes(max_bytes, backend, batch_budget)

    def run(batch, device):
        """Dispatch one batch on ``device`` (the program of its class, for that device)."""
        padded, rows, members = batch
        seqs = [buffer[k].sequence for k in members]
        ups = [tuple((unpaired or {}).get(buffer[k].id, ())) for k in members]
        with jax.default_device(device):
            return _launch(seqs, params, model.dangles, ups, with_pairs, padded, rows,
                           device.platform, combined)

    def collect(batch, launched):
        out = _collect(launched, as_pairs=True)
        if on_done:
            on_done(len(batch[2]))
        return out

    flushed = [0]

    def flush(final: bool) -> Iterator[EnergyFoldResult]:
        lengths = [len(r) for r in buffer]
        results: dict[int, tuple] = {}
        # a run in one chunk: a class holding one record runs it in a batch of one row
        plan = device_batches(lengths, backend, batch_budget,
                              classes.length_class(lengths, final) if classes else length_class,
                              alone=alone and final and not flushed[0])
        flushed[0] += 1
        for device in used:
            prefetch_programs([(padded, rows) for padded, rows, _ in plan], params, device,
                              combined=combined, with_pairs=with_pairs)
        # a cold run: the batches of classes whose programs are ready first, while the others
        # compile (the first device's programs; the results are yielded in input order)
        ready, pending = readiness(lambda batch: first(batch[:2]))
        order = ready_first(plan, ready, pending, key=lambda batch: batch[:2])
        # one batch ahead per device: the next is prepared while one runs
        for (_, _, members), out in schedule(order, run, collect, used, depth=1):
            results.update(zip(members, out))
        for k, rec in enumerate(buffer):
            energy, pairs = results[k]
            yield EnergyFoldResult(id=rec.id, sequence=rec.sequence, energy=energy, model=model,
                                   pairs=pairs,
                                   description=rec.description)

    for rec in records:
        try:
            check_memory(len(rec), max_bytes)
        except ResourceError as exc:
            if on_error is None:
                raise
            on_error(rec, exc)
            continue
        if len(buffer) >= chunk:            # a full chunk, and a record follows it
            yield from flush(False)
            buffer = []
        buffer.append(rec)
    if buffer:
        yield from flush(True)


#: Classes one MFE run uses at most (two programs each, :func:`_launch`): 8 programs in all.
CLASS_BUDGET = 4


def run_classes(max_bytes: int | None, backend: str, batch_budget: int):
    """The :class:`jaxrna.energy.run_classes.RunClasses` of an MFE run whose records may take
    ``max_bytes`` each (None: any length): :data:`CLASS_BUDGET` classes, a class's cost its
    batches' rows (empty ones included) times the cube of the class.

    >>> run = run_classes(None, "cpu", 1 << 30)
    >>> sorted({run.length_class([100, 300, 700, 1500, 3000], True)(n)
    ...         for n in (100, 300, 700, 1500, 3000)})
    [512, 1024, 2048, 4096]
    """
    from jaxrna.energy.batch_plan import batch_rows_for
    from jaxrna.energy.run_classes import RunClasses, batch_work, top_class

    top = (top_class(max_bytes, estimate_bytes) or energy_length_class(1)) if max_bytes \
        else energy_length_class(1 << 20)
    return RunClasses(top, CLASS_BUDGET,
                      batch_work(lambda padded: batch_rows_for(padded, backend, batch_budget)))


def fold_energy(sequences: str | Sequence[str], params: str = "turner2004",
                temperature: float = 37.0, dangles: int = 2, with_pairs: bool = True,
                backend: str = "auto", unpaired=None) -> EnergyFoldResult | list[EnergyFoldResult]:
    """Minimum free energy structure(s) of one sequence (returns one result) or a list.

    ``params``: ``turner2004`` (ViennaRNA's default), ``turner1999`` or a ViennaRNA ``.par``
    file; ``temperature`` in Celsius; ``dangles`` 0, 1 or 2 (RNAfold's ``-d``). Energies are
    exactly ViennaRNA's (``RNA.fold_compound(seq, md).mfe()``), in integer dcal/mol.
    ``unpaired``: 0-based positions that must not pair (for a list of sequences, one
    collection of positions per sequence), like ViennaRNA's ``hc_add_up``.
    """
    from jaxrna.runtime import resolve_backend

    single = isinstance(sequences, str)
    seqs = [sequences] if single else list(sequences)
    recs = [Record(id="seq" if single else f"seq{k + 1}", sequence=s) for k, s in enumerate(seqs)]
    model = EnergyModel(params, float(temperature), dangles)
    ups = None
    if unpaired is not None:
        ups = {recs[0].id: list(unpaired)} if single else \
            {r.id: list(u) for r, u in zip(recs, unpaired)}
    out = list(fold_energy_records(recs, model, with_pairs=with_pairs,
                                   backend=resolve_backend(backend), unpaired=ups))
    return out[0] if single else out
