"""Minimum free energy folding of many sequences: strings or records in, results out in order.

Sequences are grouped by length class (:func:`jaxrna.batching.energy_length_class`: powers of
two from 128 to 4,096, then 6,144 and 10,240) into batches of a fixed row count per class
(:func:`batch_rows_for`; a last batch is topped up with empty rows); each batch runs the one
program of its class, the fill and the traceback of :mod:`jaxrna.energy.fill` and
:mod:`jaxrna.energy.traceback` ``vmap``-ped over a batch, on the CPU or a GPU. Everything else
is a runtime value: the lengths inside a class (the fill stops at the batch's longest), the
parameter set and temperature (the tables are arguments), the dangle model, and whether
structures are wanted (``--score-only`` runs the same program and skips the traceback). So a
run compiles at most one program per class it meets: **at most 8 for any mix of lengths up to
10,240 nt and any options** (one more per 4,096 nt beyond), and a later run with other data and
options compiles nothing new.

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
from jaxrna.kernels.fallback import compile_or_fallback, pallas_builds, usable

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


def _one(s, allowed, special, n, dp, dangles, stop, with_pairs, interior: str = "jax",
         bands: int | None = None):
    from jaxrna.energy.fill import fill
    from jaxrna.energy.traceback import traceback

    tables = fill(s, allowed, special, n, dp, dangles, stop, interior=interior, bands=bands)
    energy = tables["F"][n]
    partner, ok = traceback(tables, s, allowed, special, n, dp, dangles, enabled=with_pairs)
    return energy, partner, ok


def _batch(s, allowed, special, n, dp, dangles, stop, with_pairs, interior: str = "jax",
           bands: int | None = None):
    """:func:`_one` ``vmap``-ped over a batch (one program per shape, see :func:`_program`);
    ``with_pairs`` (a traced bool) runs the traceback or skips it (its partner rows are then
    meaningless)."""
    import jax

    fn = functools.partial(_one, interior=interior, bands=bands)
    return jax.vmap(fn, in_axes=(0, 0, 0, 0, None, None, None, None))(
        s, allowed, special, n, dp, dangles, stop, with_pairs)


@functools.lru_cache(maxsize=1)
def _program():
    """The batch program, kept by :mod:`jaxrna.programs` (a warm run loads it from disk instead
    of tracing the energy model again; on CPUs too, where tracing it is most of a small run).
    Its static arguments are ``interior`` and ``bands`` (fixed by the platform and the class:
    :func:`static_for`)."""
    from jaxrna.programs import stored_jit

    return stored_jit(PROGRAM, static_argnames=("interior", "bands"),
                      cpu_store=True)(_batch)


def batch_jitted():
    """The batch program's ``jax.jit`` function (what a compile worker lowers:
    :mod:`jaxrna.compile_workers`)."""
    return _program().jitted()


@functools.lru_cache(maxsize=64)
def _device_params(params: EnergyParams, length: int):
    from jaxrna.energy.terms import device_params

    return device_params(params, length)


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
            platform: str | None = None) -> tuple:
    """Start :func:`fold_batch`'s device work (asynchronous) on JAX's default device, whose
    ``platform`` picks the fill's interior-loop kernel; :func:`_collect` waits for it."""
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
    args = _program_args(stack, params, length, dangles, with_pairs)
    static = static_for(platform or default_device().platform, length, args, default_device())
    interior = static["interior"]
    run = functools.partial(_program().bind, *args, bands=static["bands"])
    if interior in ("pallas", "interpret"):     # a kernel that does not build: the loop
        out = compile_or_fallback(INTERIOR_KERNEL, lambda: run(interior=interior),
                                  lambda: run(interior="loop"))()
    else:
        out = run(interior=interior)()
    return sequences, count, out, with_pairs


#: The fill's Pallas kernels (:mod:`jaxrna.kernels.shifted_min`), as
#: :mod:`jaxrna.kernels.fallback` names them; their pure-JAX path is ``interior="loop"``.
INTERIOR_KERNEL = "energy.shifted_min"


def static_for(platform: str, length: int, args: tuple | None = None, device=None,
               fast: bool = False) -> dict:
    """The batch program's static arguments for a class of padded ``length`` on ``platform``:
    the interior loop (:func:`interior_for`) and the sweep's bands
    (:func:`jaxrna.energy.fill.bands_for`).

    A GPU's classes above :data:`~jaxrna.energy.fill.KERNEL_MAX_LENGTH` have two forms of the
    interior loop with the same tables: the rolled loop compiles in half the time, the
    unrolled slices (``"jax"``) run about three times faster (H100, call S17c, one row:
    2,000 nt 0.30 s against 1.02-1.07 s, 4,000 nt 0.63-0.68 s against 2.0-2.2 s; 22-24 s to
    compile against about 11). A run takes the slices where their program for these
    ``args`` is in ``device``'s store already (``jaxrna warmup`` prepares them: ``fast``),
    else the loop: a first run compiles the quicker program, and no run compiles both.

    >>> static_for("cpu", 128)
    {'interior': 'loop', 'bands': 2}
    """
    from jaxrna.energy.fill import KERNEL_MAX_LENGTH, bands_for
    from jaxrna.programs import stored

    static = {"interior": interior_for(platform, length), "bands": bands_for(platform, length)}
    if platform == "gpu" and length > KERNEL_MAX_LENGTH and static["interior"] == "loop" \
            and not _interior_forced():
        slices = dict(static, interior="jax")
        if fast or (args is not None and stored(PROGRAM, args, slices, device, True)):
            return slices
    return static


def _interior_forced() -> bool:
    """Whether ``JAXRNA_ENERGY_INTERIOR`` or ``JAXRNA_ENERGY_INTERIOR_LONG`` chooses the
    interior loop (:func:`jaxrna.energy.fill_plan.forced_interior`)."""
    from jaxrna.energy.fill_plan import forced_interior

    return any(forced_interior().values())


#: The batch program's name in the program store (:func:`_program`).
PROGRAM = "energy.fold_batch"


def interior_for(platform: str, length: int, probe: bool = False) -> str:
    """:func:`jaxrna.energy.fill.interior_mode`, but the rolled loop where the Pallas kernels
    failed to build in this process -- or, with ``probe`` (for callers that do not compile
    their program through :func:`~jaxrna.kernels.fallback.compile_or_fallback`), where
    :func:`~jaxrna.kernels.fallback.pallas_builds` finds that Pallas does not build here.

    >>> interior_for("cpu", 128)
    'loop'
    """
    from jaxrna.energy.fill import interior_mode

    interior = interior_mode(platform, length)
    if interior in ("pallas", "interpret"):
        ok = pallas_builds(INTERIOR_KERNEL, interior == "interpret") if probe \
            else usable(INTERIOR_KERNEL)
        if not ok:
            return "loop"
    return interior


def _program_args(stack: dict, params: EnergyParams, length: int, dangles: int,
                  with_pairs: bool) -> tuple:
    """The batch program's arguments for the inputs ``stack`` of
    :func:`jaxrna.energy.fill.prepare_batch` (the loops stop at its longest sequence)."""
    return (stack["s"], stack["allowed"], stack["special"], stack["n"],
            _device_params(params, length), np.int32(dangles), np.int32(stack["n"].max()),
            np.bool_(with_pairs))


def prefetch_programs(classes: Iterable[tuple[int, int]], params: EnergyParams, device,
                      fast: bool = False) -> int:
    """Start preparing the batch program of every ``(length class, rows)`` of a job's plan in
    the background (:func:`jaxrna.compile_workers.prefetch`, on hosts with enough cores), so that its
    few programs compile side by side rather than one after another; the batches then find
    them ready or under way. Returns how many were asked for. ``fast``: the form that runs
    fastest where there are two (:func:`static_for`; ``jaxrna warmup``).

    >>> prefetch_programs([], load_params(), None)
    0
    """
    from jaxrna import compile_workers

    count = 0
    # in the plan's order: the first goes to a thread of this process, the others to worker
    # processes, whose tracing does not share this process's GIL with the run (handing the
    # longest class first, to the thread, made 404 x 1-2,600 nt cold slower on an H100:
    # 28.07-31.67 s against 24.83-27.48, S20a and S20f)
    for length, rows in dict.fromkeys(classes):
        specs = _specs(length, rows, params)
        compile_workers.prefetch(PROGRAM, "jaxrna.energy.api:batch_jitted", specs,
                                 static_for(device.platform, length, specs, device, fast),
                                 device, cpu_store=True)
        count += 1
    return count


def programs_stored(lengths: Sequence[int], device, length_class=None) -> bool:
    """Whether every batch program :func:`fold_energy_records` runs for records of
    ``lengths`` nt on ``device`` (its plan, ``length_class`` as there) is in this process or in
    the store already: a run of them compiles nothing (either form of a GPU's interior loop,
    :func:`static_for`)."""
    from jaxrna import programs

    gpu = device.platform != "cpu"
    plan = device_batches(list(lengths), "gpu" if gpu else "cpu",
                          gpu_budget(device) if gpu else 1 << 30, length_class)
    params = load_params()
    for padded, rows in dict.fromkeys((p, r) for p, r, _ in plan):
        specs = _specs(padded, rows, params)
        static = static_for(device.platform, padded, specs, device)
        if not programs.available(PROGRAM, specs, static, device, True):
            return False
    return True


def prepare_program(length: int, rows: int, params: EnergyParams, device, fast: bool = False
                    ) -> None:
    """Compile (or load) the batch program of a class of ``rows`` rows on ``device`` now,
    waiting for a prefetch of it under way; ``fast``: as :func:`prefetch_programs`."""
    args = _empty_args(length, rows, params)
    _program().bind(*args, **static_for(device.platform, length, args, device, fast))


def _specs(length: int, rows: int, params: EnergyParams) -> tuple:
    """The batch program's argument shapes (:class:`jax.ShapeDtypeStruct`) for a class of
    ``rows`` rows."""
    import jax

    return jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype),
                                  _empty_args(length, rows, params))


def _empty_args(length: int, rows: int, params: EnergyParams) -> tuple:
    """The batch program's arguments for a batch of ``rows`` empty rows of a class: their
    shapes are those of every batch of the class."""
    from jaxrna.energy.fill import prepare_batch

    return _program_args(prepare_batch([""] * rows, params, length), params, length, 2, True)


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
                        length_class=None) -> Iterator[EnergyFoldResult]:
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
    run's few classes); the same results.
    """
    import jax

    from jaxrna.pipeline import schedule
    from jaxrna.runtime import devices

    model = model or EnergyModel()
    params = model.load()
    gpu = backend != "cpu"
    used = devices(backend)             # every device of the backend, or --devices N
    chunk = chunk or (65536 if gpu else 4096)
    batch_budget = batch_budget or (gpu_budget(used[0]) if gpu else 1 << 30)
    buffer: list[Record] = []

    def run(batch, device):
        """Dispatch one batch on ``device`` (the program of its class, for that device)."""
        padded, rows, members = batch
        seqs = [buffer[k].sequence for k in members]
        ups = [tuple((unpaired or {}).get(buffer[k].id, ())) for k in members]
        with jax.default_device(device):
            return _launch(seqs, params, model.dangles, ups, with_pairs, padded, rows,
                           device.platform)

    def collect(batch, launched):
        out = _collect(launched, as_pairs=True)
        if on_done:
            on_done(len(batch[2]))
        return out

    def flush() -> Iterator[EnergyFoldResult]:
        lengths = [len(r) for r in buffer]
        results: dict[int, tuple] = {}
        plan = device_batches(lengths, backend, batch_budget, length_class)
        for device in used:
            prefetch_programs([(padded, rows) for padded, rows, _ in plan], params, device)
        # one batch ahead per device: the next is prepared while one runs
        for (_, _, members), out in schedule(plan, run, collect, used, depth=1):
            results.update(zip(members, out))
        for k, rec in enumerate(buffer):
            energy, pairs = results[k]
            yield EnergyFoldResult(id=rec.id, sequence=rec.sequence, energy=energy, model=model,
                                   pairs=pairs,
                                   description=rec.description)

    max_bytes = memory_limit(max_bytes)   # the machine's memory, asked once per run
    for rec in records:
        try:
            check_memory(len(rec), max_bytes)
        except ResourceError as exc:
            if on_error is None:
                raise
            on_error(rec, exc)
            continue
        buffer.append(rec)
        if len(buffer) >= chunk:
            yield from flush()
            buffer = []
    if buffer:
        yield from flush()


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
