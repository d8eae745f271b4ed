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
from jaxrna.kernels.fallback import compile_or_fallback, pallas_builds, usable

#: The batch programs' names in the program store: fill and traceback in one
#: (:func:`_program`, the partition engine's MFE), and the two halves, which MFE runs compile
#: side by side (:func:`_fill_program`, :func:`_trace_program`; ``--score-only`` runs the
#: fill alone).
PROGRAM = "energy.fold_batch"
FILL_PROGRAM = "energy.fill_batch"
TRACE_PROGRAM = "energy.traceback_batch"


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


def _fill_rows(s, allowed, special, n, dp, dangles, stop, interior: str = "jax",
               bands: int | None = None):
    """The fill of a batch (:func:`jaxrna.energy.fill.fill` ``vmap``-ped): each row's minimum
    free energy and its tables ``T`` and ``F``, which :func:`_trace_rows` reads."""
    import jax

    from jaxrna.energy.fill import fill

    def one(s, allowed, special, n):
        tables = fill(s, allowed, special, n, dp, dangles, stop, interior=interior, bands=bands)
        return tables["F"][n], tables["T"], tables["F"]

    return jax.vmap(one)(s, allowed, special, n)


def _trace_rows(T, F, s, allowed, special, n, dp, dangles):
    """The traceback of a batch filled by :func:`_fill_rows` (``T``, ``F`` its tables): each
    row's partner array and whether its traceback succeeded."""
    import jax

    from jaxrna.energy.traceback import traceback

    def one(T, F, s, allowed, special, n):
        return traceback({"T": T, "F": F}, s, allowed, special, n, dp, dangles)

    return jax.vmap(one)(T, F, s, allowed, special, n)


@functools.lru_cache(maxsize=1)
def _program():
    """The batch program of fill and traceback in one (:data:`PROGRAM`: the partition
    engine's MFE, whose programs share the run's budget with the partition programs), kept by
    :mod:`jaxrna.programs` (a warm run loads it from disk instead of tracing the energy model
    again; on CPUs too, where tracing it is most of a small run). Its static arguments are
    ``interior`` and ``bands`` (fixed by the platform and the class: :func:`static_for`)."""
    from jaxrna.programs import stored_jit

    return stored_jit(PROGRAM, static_argnames=("interior", "bands"),
                      cpu_store=True)(_batch)


@functools.lru_cache(maxsize=1)
def _fill_program():
    """The fill program of a class (:data:`FILL_PROGRAM`; static arguments as
    :func:`_program`'s)."""
    from jaxrna.programs import stored_jit

    return stored_jit(FILL_PROGRAM, static_argnames=("interior", "bands"),
                      cpu_store=True)(_fill_rows)


@functools.lru_cache(maxsize=1)
def _trace_program():
    """The traceback program of a class (:data:`TRACE_PROGRAM`)."""
    from jaxrna.programs import stored_jit

    return stored_jit(TRACE_PROGRAM, cpu_store=True)(_trace_rows)


def batch_jitted():
    """The batch program's ``jax.jit`` function (what a compile worker lowers:
    :mod:`jaxrna.compile_workers`)."""
    return _program().jitted()


def fill_jitted():
    """The fill program's ``jax.jit`` function (for compile workers)."""
    return _fill_program().jitted()


def trace_jitted():
    """The traceback program's ``jax.jit`` function (for compile workers)."""
    return _trace_program().jitted()


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
    args = _program_args(stack, params, length, dangles, with_pairs)
    if not combined:
        args = args[:-1]                   # the fill's arguments: all but ``with_pairs``
    name = PROGRAM if combined else FILL_PROGRAM
    static = static_for(platform or default_device().platform, length, args, default_device(),
                        program=name)
    interior = static["interior"]
    program = _program() if combined else _fill_program()
    run = functools.partial(program.bind, *args, bands=static["bands"])
    if interior in ("pallas", "interpret"):     # a kernel that does not build: the loop
        out = compile_or_fallback(INTERIOR_KERNEL, lambda: run(interior=interior),
                                  lambda: run(interior="loop"))()
    else:
        out = run(interior=interior)()
    if not combined:
        energy, T, F = out
        partner = ok = None
        if with_pairs:
            partner, ok = _trace_program()(T, F, *args[:6])
        out = energy, partner, ok
    return sequences, count, out, with_pairs


#: The fill's Pallas kernels (:mod:`jaxrna.kernels.shifted_min`), as
#: :mod:`jaxrna.kernels.fallback` names them; their pure-JAX path is ``interior="loop"``.
INTERIOR_KERNEL = "energy.shifted_min"


def static_for(platform: str, length: int, args: tuple | None = None, device=None,
               fast: bool = False, program: str = FILL_PROGRAM) -> dict:
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
    ``program``: the program ``args`` are for (:data:`FILL_PROGRAM` or :data:`PROGRAM`).

    >>> static_for("cpu", 128)
    {'interior': 'loop', 'bands': 2}
    """
    from jaxrna.energy.fill import KERNEL_MAX_LENGTH, bands_for
    from jaxrna.programs import stored

    static = {"interior": interior_for(platform, length), "bands": bands_for(platform, length)}
    if platform == "gpu" and length > KERNEL_MAX_LENGTH and static["interior"] == "loop" \
            and not _interior_forced():
        slices = dict(static, interior="jax")
        if fast or (args is not None and stored(program, args, slices, device, True)):
            return slices
    return static


def _interior_forced() -> bool:
    """Whether ``JAXRNA_ENERGY_INTERIOR`` or ``JAXRNA_ENERGY_INTERIOR_LONG`` chooses the
    interior loop (:func:`jaxrna.energy.fill_plan.forced_interior`)."""
    from jaxrna.energy.fill_plan import forced_interior

    return any(forced_interior().values())



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


#: Classes of a plan whose fill and traceback programs are both prepared in threads of the run's
#: process (:func:`prefetch_programs`; the others go to compile workers where the host has them).
#: All of them in threads made no difference (404 x 1-2,600 nt cold on an H100: 21.53 s against
#: 21.05 and 22.11, call S21b).
THREAD_CLASSES = 1


def _program_specs(length: int, rows: int, params: EnergyParams, combined: bool,
                   with_pairs: bool = True) -> list[tuple[str, str, tuple, bool]]:
    """``(name, source for compile workers, argument shapes, whether its static arguments are
    the fill's)`` of the programs a batch of a class runs: :data:`PROGRAM`, or
    :data:`FILL_PROGRAM` and, with ``with_pairs``, :data:`TRACE_PROGRAM`."""
    if combined:
        return [(PROGRAM, "jaxrna.energy.api:batch_jitted", _specs(length, rows, params), True)]
    fill = _specs(length, rows, params)[:-1]
    out = [(FILL_PROGRAM, "jaxrna.energy.api:fill_jitted", fill, True)]
    if with_pairs:
        out.append((TRACE_PROGRAM, "jaxrna.energy.api:trace_jitted",
                    _trace_specs(length, rows) + fill[:6], False))
    return out


def _trace_specs(length: int, rows: int) -> tuple:
    """The shapes of the tables ``T`` and ``F`` the fill program of a class returns
    (:func:`jaxrna.energy.fill.fill`'s layout)."""
    import jax
    import jax.numpy as jnp

    from jaxrna.energy.fill import TABLES
    from jaxrna.energy.terms import COL_PAD, ROW_PAD

    return (jax.ShapeDtypeStruct((rows, ROW_PAD + length, len(TABLES), length + COL_PAD),
                                 jnp.int32),
            jax.ShapeDtypeStruct((rows, length + 1), jnp.int32))


def prefetch_programs(classes: Iterable[tuple[int, int]], params: EnergyParams, device,
                      fast: bool = False, combined: bool = False, with_pairs: bool = True
                      ) -> int:
    """Start preparing the programs of every ``(length class, rows)`` of a job's plan in the
    background (:func:`jaxrna.compile_workers.prefetch`), so that they compile side by side
    rather than one after another; the batches then find them ready or under way. Returns how
    many were asked for. ``fast``: the form that runs fastest where there are two
    (:func:`static_for`; ``jaxrna warmup``); ``combined``, ``with_pairs``: which programs
    (:func:`_launch`).

    >>> prefetch_programs([], load_params(), None)
    0
    """
    from jaxrna import compile_workers

    count = 0
    # in the plan's order: the first class's programs go to threads of this process (their
    # lowering takes turns, their compilations run side by side), the others to worker
    # processes where the host has them, whose tracing does not share this process's GIL with
    # the run (handing the longest class first, to a thread, made 404 x 1-2,600 nt cold slower
    # on an H100: 28.07-31.67 s against 24.83-27.48, S20a and S20f)
    for k, (length, rows) in enumerate(dict.fromkeys(classes)):
        for name, source, specs, filled in _program_specs(length, rows, params, combined,
                                                          with_pairs):
            static = static_for(device.platform, length, specs, device, fast, name) \
                if filled else {}
            compile_workers.prefetch(name, source, specs, static, device, cpu_store=True,
                                     processes=k >= THREAD_CLASSES)
            count += 1
    return count


def programs_stored(lengths: Sequence[int], device, length_class=None, combined: bool = False
                    ) -> bool:
    """Whether every batch program :func:`fold_energy_records` runs for records of
    ``lengths`` nt on ``device`` (its plan, ``length_class`` as there; ``combined`` as
    :func:`_launch`) is in this process or in the store already: a run of them compiles
    nothing (either form of a GPU's interior loop, :func:`static_for`)."""
    from jaxrna import programs

    gpu = device.platform != "cpu"
    plan = device_batches(list(lengths), "gpu" if gpu else "cpu",
                          gpu_budget(device) if gpu else 1 << 30, length_class)
    params = load_params()
    for padded, rows in dict.fromkeys((p, r) for p, r, _ in plan):
        for name, _, specs, filled in _program_specs(padded, rows, params, combined):
            static = static_for(device.platform, padded, specs, device, program=name) \
                if filled else {}
            if not programs.available(name, specs, static, device, True):
                return False
    return True


def prepare_program(length: int, rows: int, params: EnergyParams, device, fast: bool = False,
                    combined: bool = False) -> int:
    """Compile (or load) the programs of a class of ``rows`` rows on ``device`` now, waiting
    for a prefetch of them under way; ``fast``: as :func:`prefetch_programs`. Returns how
    many (they are compiled for JAX's default device; ``device`` says which forms)."""
    from jaxrna import programs

    specs = _program_specs(length, rows, params, combined)
    for name, source, spec, filled in specs:
        static = static_for(device.platform, length, spec, device, fast, name) if filled else {}
        jitted = {PROGRAM: batch_jitted, FILL_PROGRAM: fill_jitted,
                  TRACE_PROGRAM: trace_jitted}[name]()
        programs.program(name, jitted, spec, static, cpu_store=True)
    return len(specs)


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
                        length_class=None, combined: bool = False
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
    (:func:`run_classes`).
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
    max_bytes = memory_limit(max_bytes)   # the machine's memory, asked once per run
    classes = None
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

    def flush(final: bool) -> Iterator[EnergyFoldResult]:
        lengths = [len(r) for r in buffer]
        results: dict[int, tuple] = {}
        plan = device_batches(lengths, backend, batch_budget,
                              classes.length_class(lengths, final) if classes else length_class)
        for device in used:
            prefetch_programs([(padded, rows) for padded, rows, _ in plan], params, device,
                              combined=combined, with_pairs=with_pairs)
        # one batch ahead per device: the next is prepared while one runs
        for (_, _, members), out in schedule(plan, run, collect, used, depth=1):
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
    from jaxrna.energy.run_classes import RunClasses

    top, k = energy_length_class(1 << 20), 1
    if max_bytes:
        top = None
        while estimate_bytes(k) <= max_bytes:
            top = energy_length_class(k)
            k = top + 1
        top = top or energy_length_class(1)

    def work(padded: int, records: int) -> float:
        rows = batch_rows_for(padded, backend, batch_budget)
        return float(-(-records // rows) * rows) * float(padded) ** 3

    return RunClasses(top, CLASS_BUDGET, work)


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
