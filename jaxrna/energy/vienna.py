"""ViennaRNA's minimum free energy folding as jaxrna's engine on machines without a GPU.

``jaxrna fold --model turner --backend auto`` on a CPU folds with ViennaRNA
(``RNA.fold_compound(seq, md).mfe()``, the library jaxrna's energies are tested against) on
every core, without importing JAX: no program to compile, so the first run is as fast as the
later ones. The results are :class:`~jaxrna.energy.api.EnergyFoldResult` objects built exactly
as :func:`~jaxrna.energy.api.fold_energy_records` builds them (the same energy in integer
dcal/mol, the pairs 0-based in order of their 5' base, no pairs with ``with_pairs=False``),
refusals by ``--max-memory`` included (the same estimate, :func:`~jaxrna.energy.api.check_memory`).

The model details are jaxrna's :class:`~jaxrna.energy.api.EnergyModel`: the parameter set
(``turner2004`` and ``turner1999`` as ViennaRNA's ``params_load_RNA_Turner2004/1999``; a
``.par`` file read on top of Turner 2004, as jaxrna reads it), the temperature and the dangle
model; ViennaRNA's other defaults (lonely pairs allowed, GU pairs, special hairpins, no span
limit) are the ones jaxrna's engine implements. ViennaRNA keeps one global parameter set: the
set is loaded once per worker process (processes of this module's pool); in the calling
process it is loaded around each task's folds and the caller's set restored after them
(:func:`global_set`), so code that folds with ViennaRNA in the same process between tasks never
finds another set there.

Energies are always those of jaxrna's engine (both are ViennaRNA's), and so are structures:
where several structures share the minimum energy, jaxrna's traceback
(:mod:`jaxrna.energy.traceback`) tries each cell's decompositions in ViennaRNA's backtracking
order and picks the same one (see :data:`TIES`), so the output is byte-identical.

>>> from jaxrna.energy.api import EnergyModel
>>> from jaxrna.io.fasta import Record
>>> [(r.structure, r.energy) for r in fold_records([Record("a", "GGGGAAACCCCAUCGAAAGAUU")],
...                                                 EnergyModel(), processes=1)]
[('((((...))))(((....))).', -650)]
"""

from __future__ import annotations

import collections
import contextlib
import os
import sys
from typing import Iterable, Iterator

from jaxrna.energy.api import EnergyFoldResult, EnergyModel, check_memory, memory_limit
from jaxrna.io.errors import ResourceError
from jaxrna.io.fasta import Record

#: What the tests measured about structures (tests/test_energy_ties.py): where several
#: structures share the minimum free energy, jaxrna's traceback picks ViennaRNA 2.8's (the
#: hairpin, then interior loops by inner pair, then multiloops; in a multiloop part an unpaired
#: base at its 3' end, then at its 5' end, then one branch, then the leftmost split; in the
#: exterior loop the last base unpaired, else the last branch starting furthest right, with
#: dangles 1 one starting at the first base before all).
#: Documented, not used.
TIES = "co-optimal structures are ViennaRNA's with either engine; energies are too"

#: Environment variable choosing the engine of ``fold --model turner`` (shared with
#: ``targets --energy-engine``): ``vienna`` always ViennaRNA; ``jax`` (or ``device``/``cpu``,
#: targets' names for jaxrna's own engines) always jaxrna's JAX engine; ``auto`` or unset:
#: ViennaRNA for ``--backend auto`` without a GPU, jaxrna's engine otherwise.
ENGINE_ENV = "JAXRNA_ENERGY_ENGINE"

#: A task of the pool: at most this many records or letters (order is kept; small tasks keep
#: every core busy to the end of a small job).
TASK_RECORDS = 64
TASK_LETTERS = 4000
#: Below this many letters in all a job is folded in this process (no pool to start).
INPROCESS_LETTERS = 2000

#: The bundled parameter sets and ViennaRNA's loaders of them.
LOADERS = {"turner2004": "params_load_RNA_Turner2004",
           "turner1999": "params_load_RNA_Turner1999"}


def available() -> bool:
    """Whether the ViennaRNA package can be imported."""
    try:
        import RNA  # noqa: F401
    except ImportError:
        return False
    return True


def engine_choice() -> str:
    """``auto``, ``vienna`` or ``jax`` from :data:`ENGINE_ENV` (unknown values: ``auto``)."""
    value = (os.environ.get(ENGINE_ENV) or "auto").strip().lower()
    if value == "vienna":
        return "vienna"
    if value in ("jax", "device", "cpu"):
        return "jax"
    return "auto"


def cpu_count() -> int:
    """Cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


#: One core's seconds for the MFE of a record of n nt is about ``MFE_SECONDS * n **
#: MFE_POWER``: the power fitted on this project's 2-core VM (100-3,200 nt, 2026-11-27:
#: 4.9 ms, 0.48 s and 12.0 s at 100, 800 and 3,200 nt), the factor on an H200 host's 16 cores
#: busy at once (1,000 x 50-500 nt in 7.34 s, call S18d; one core alone is faster: a 4,000-nt
#: record takes 24 s, where this says 38).
MFE_SECONDS = 2.0e-7
MFE_POWER = 2.3


def mfe_record_seconds(length: int) -> float:
    """About how long one core takes for the MFE of one record of ``length`` nt."""
    return MFE_SECONDS * float(length) ** MFE_POWER


def mfe_estimate_seconds(lengths: Iterable[int], cores: int) -> float:
    """About how long :func:`fold_records` takes for records of ``lengths`` nt on ``cores``
    processes: their total over the cores, or the longest record's alone.

    >>> round(mfe_estimate_seconds([275] * 1000, 16), 1), round(mfe_estimate_seconds([4000], 16), 1)
    (5.1, 38.5)
    """
    return pool_seconds([mfe_record_seconds(n) for n in lengths], cores)


def pool_seconds(times: list[float], cores: int) -> float:
    """How long records of one-core ``times`` take on ``cores`` processes: their total over
    the cores, or the longest alone (one core computes it).

    >>> pool_seconds([1.0, 1.0, 3.0], 2)
    3.0
    """
    return max(sum(times) / max(1, cores), max(times, default=0.0))


# --------------------------------------------------------------------------- the model

def load_set(RNA, params: str) -> None:
    """Make ``params`` ViennaRNA's global parameter set (as tests/energy_oracle.py does)."""
    key = params.lower()
    if key in LOADERS:
        getattr(RNA, LOADERS[key])()
        return
    RNA.params_load_RNA_Turner2004()
    if not RNA.params_load(params):
        from jaxrna.io.errors import InputError

        raise InputError(f"{params}: ViennaRNA cannot read this parameter file")


def model_details(RNA, model: EnergyModel):
    """ViennaRNA's model details (``RNA.md``) for ``model``: its temperature and dangles, and
    the defaults jaxrna's engine implements."""
    md = RNA.md()
    md.temperature = float(model.temperature)
    md.dangles = int(model.dangles)
    md.noLP = 0
    md.noGU = 0
    md.special_hp = 1
    md.circ = 0
    md.gquad = 0
    md.max_bp_span = -1
    return md


_STATE: dict = {}   # this process: ViennaRNA, model details, the set (None: loaded globally)


def set_name(params: str) -> str:
    """A parameter set as :func:`load_set` takes it (a file by its absolute path)."""
    return params if params.lower() in LOADERS else os.path.abspath(params)


@contextlib.contextmanager
def global_set(params: str | None):
    """ViennaRNA's global parameter set is ``params`` inside the block and the caller's again
    after it (None: nothing changes). A parameter object made under a set and substituted into
    a fold compound (``params_subst``) does not fold as the set loaded globally does (a
    ``.par`` file's MFE differs), so in the caller's process each task folds with the set
    loaded."""
    if params is None:
        yield
        return
    import tempfile

    import RNA

    with tempfile.TemporaryDirectory() as tmp:
        saved = os.path.join(tmp, "saved.par")
        RNA.params_save(saved)
        try:
            load_set(RNA, params)
            yield
        finally:
            RNA.params_load(saved)


def _setup(model: EnergyModel, own_set: bool) -> None:
    """Prepare this process to fold with ``model``: ``own_set`` (a worker of our pool) loads
    the set globally once; otherwise each task loads it around its work (:func:`global_set`)."""
    import RNA

    params = set_name(model.params)
    key = (params, model.temperature, model.dangles, own_set)
    if _STATE.get("key") == key:
        return
    if own_set:
        load_set(RNA, params)
    _STATE.update(key=key, RNA=RNA, md=model_details(RNA, model),
                  params=None if own_set else params)


def _worker_init(model: EnergyModel) -> None:
    from jaxrna.io.cleanup import ignore_interrupts

    ignore_interrupts()
    _setup(model, own_set=True)


def _pairs(structure: str) -> tuple[tuple[int, int], ...]:
    """0-based pairs of a dot-bracket, in order of their 5' base (as jaxrna's engine)."""
    stack, pairs = [], []
    for k, ch in enumerate(structure):
        if ch == "(":
            stack.append(k)
        elif ch == ")":
            pairs.append((stack.pop(), k))
    pairs.sort()
    return tuple(pairs)


def _fold(sequences: list[str], unpaired: list, with_pairs: bool) -> list[tuple]:
    """``(energy in dcal/mol, pairs or None)`` per sequence, in this process."""
    RNA, md = _STATE["RNA"], _STATE["md"]
    out = []
    for seq, up in zip(sequences, unpaired):
        if not seq:
            out.append((0, () if with_pairs else None))
            continue
        fc = RNA.fold_compound(seq, md)
        for k in up:
            fc.hc_add_up(int(k) + 1)
        structure, mfe = fc.mfe()
        # mfe() returns the integer dcal/mol divided by 100 as a C float: round back
        out.append((int(round(mfe * 100)), _pairs(structure) if with_pairs else None))
    return out


# --------------------------------------------------------------------------- the records

def _tasks(records: Iterator[Record], check, on_error, task_records: int, task_letters: int):
    """Tasks of records (lists of at most ``task_records`` records or ``task_letters``
    letters), the records ``check(length)`` refuses reported in order between them: yields
    ``("task", records)`` and ``("refused", record, error)``."""
    task, letters = [], 0
    for rec in records:
        try:
            check(len(rec))
        except ResourceError as exc:
            if on_error is None:
                raise
            if task:
                yield "task", task
                task, letters = [], 0
            yield "refused", rec, exc
            continue
        task.append(rec)
        letters += len(rec)
        if len(task) >= task_records or letters >= task_letters:
            yield "task", task
            task, letters = [], 0
    if task:
        yield "task", task


def task_args(task: list[Record], unpaired: dict | None, option):
    """A task's arguments for a compute function: its sequences, each record's unpaired
    positions (``unpaired``: by record id), then ``option`` (the pairs switch, MEA's gamma)."""
    ups = [tuple((unpaired or {}).get(r.id, ())) for r in task]
    return [r.sequence for r in task], ups, option


def _results(task: list[Record], folded: list[tuple], model: EnergyModel):
    for rec, (energy, pairs) in zip(task, folded):
        yield EnergyFoldResult(id=rec.id, sequence=rec.sequence, energy=energy, model=model,
                               pairs=pairs, description=rec.description)


def start_method() -> str:
    """fork where this process runs no JAX (its threads do not survive a fork), else spawn."""
    import multiprocessing

    if "jax" not in sys.modules and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


def fold_records(records: Iterable[Record], model: EnergyModel | None = None,
                 with_pairs: bool = True, max_bytes: int | None = None, on_done=None,
                 on_error=None, unpaired: dict | None = None,
                 processes: int | None = None) -> Iterator[EnergyFoldResult]:
    """:func:`jaxrna.energy.api.fold_energy_records` with ViennaRNA: a stream of records
    folded on ``processes`` worker processes (default: every core this process may use; a
    small job, under :data:`INPROCESS_LETTERS` letters, or one process: in this process),
    results yielded in input order as they come (at most a few tasks per process in flight,
    so memory stays bounded on any input). ``max_bytes``, ``on_done``, ``on_error`` and
    ``unpaired`` as there: a record over the memory limit raises
    :class:`~jaxrna.io.errors.ResourceError` or, with ``on_error(record, error)``, is skipped.
    """
    model = model or EnergyModel()
    max_bytes = memory_limit(max_bytes)   # the machine's memory, as the JAX engine asks it

    def here(task):
        with global_set(_STATE["params"]):
            return _fold(*task_args(task, unpaired, with_pairs))

    return run_tasks(records, lambda n: check_memory(n, max_bytes),
                     (TASK_RECORDS, TASK_LETTERS, INPROCESS_LETTERS),
                     here, lambda task: (_fold, task_args(task, unpaired, with_pairs)),
                     lambda task, folded: _results(task, folded, model),
                     lambda: _setup(model, own_set=False), _worker_init, (model,),
                     processes if processes is not None else cpu_count(), on_done, on_error)


#: A job known in full is cut into at least this many tasks per process (:func:`run_tasks`).
TASKS_PER_WORKER = 4


def task_sizes(count: int, letters: int, workers: int, task_records: int, task_letters: int
               ) -> tuple[int, int]:
    """``(records, letters)`` per task for a whole job of ``count`` records and ``letters``
    letters on ``workers`` processes: at most the given sizes, and small enough for
    :data:`TASKS_PER_WORKER` tasks per process where the job has the records.

    >>> task_sizes(300, 90000, 16, 64, 4000), task_sizes(100000, 10 ** 7, 16, 64, 4000)
    ((4, 1406), (64, 4000))
    """
    tasks = TASKS_PER_WORKER * workers
    return (max(1, min(task_records, count // tasks)), max(1, min(task_letters, letters // tasks)))


def run_tasks(records: Iterable[Record], check, limits: tuple[int, int, int], here, remote,
              results, setup_here, worker_init, init_args: tuple, workers: int, on_done,
              on_error) -> Iterator:
    """Records computed by ViennaRNA task by task, in input order: the driver of this
    module's MFE engine and of :mod:`jaxrna.energy.partition_vienna`.

    Records go in tasks (:func:`_tasks`; ``check(length)`` raises
    :class:`~jaxrna.io.errors.ResourceError` for a record refused, reported to ``on_error``
    in its place); ``limits`` = (records per task, letters per task, letters below which the
    job runs in this process). In this process: ``setup_here()`` then ``here(task)``; else
    ``workers`` processes started with ``worker_init(*init_args)``, each task's
    ``remote(task)`` = ``(module-level function, arguments)`` run there, at most four tasks
    per process in flight. ``results(task, computed)`` yields the task's results;
    ``on_done(k)`` counts the records done.

    A job that ends within :data:`TASKS_PER_WORKER` full tasks per process (read ahead) is cut
    into smaller tasks, at least that many per process, so that the processes finish together
    (13 records a task made 300 records of 200-400 nt two rounds on 16 processes, the second
    keeping 7 busy). S19e (H100 host, 16 cores, three runs alternating): 300 x 200-400 nt
    3.35-3.60 -> 2.88-3.33 s (ViennaRNA's API alone, 8 records a task: 2.51-3.02 s); 1,000 x
    50-500 nt 7.25-9.10 -> 6.96-8.56 s (6.23-8.27 s); ``--partition`` 300 x 150-250 nt
    3.29-3.45 -> 3.09-3.17 s (3.29 s). Outputs identical."""
    import itertools

    task_records, task_letters, inprocess_letters = limits
    records = iter(records)
    # read ahead: the whole job if it is small enough to be worth cutting finer
    ahead, letters, bound = [], 0, max(inprocess_letters, TASKS_PER_WORKER * workers * task_letters)
    for rec in records:
        ahead.append(rec)
        letters += len(rec)
        if letters >= bound:
            break
    else:
        if workers > 1 and ahead:
            task_records, task_letters = task_sizes(len(ahead), letters, workers, task_records,
                                                    task_letters)
    items = _tasks(itertools.chain(ahead, records), check, on_error, task_records, task_letters)
    if workers <= 1 or letters < inprocess_letters:
        yield from _in_process(items, here, results, setup_here, on_done, on_error)
    else:
        yield from _in_pool(items, remote, results, worker_init, init_args, workers, on_done,
                            on_error)


def _in_process(items, here, results, setup_here, on_done, on_error):
    setup_here()
    for item in items:
        if item[0] == "refused":
            on_error(item[1], item[2])
            continue
        task = item[1]
        computed = here(task)
        if on_done:
            on_done(len(task))
        yield from results(task, computed)


def _in_pool(items, remote, results, worker_init, init_args, workers: int, on_done, on_error):
    import multiprocessing

    ctx = multiprocessing.get_context(start_method())
    pool = ctx.Pool(workers, initializer=worker_init, initargs=init_args)
    pending: collections.deque = collections.deque()   # (kind, payload, async result)
    limit = 4 * workers
    try:
        def drain(block: bool):
            while pending and (block or len(pending) >= limit or pending[0][2] is None
                               or pending[0][2].ready()):
                kind, payload, result = pending.popleft()
                if kind == "refused":
                    on_error(*payload)
                    continue
                computed = result.get()
                if on_done:
                    on_done(len(payload))
                yield from results(payload, computed)

        for item in items:
            if item[0] == "refused":
                pending.append(("refused", (item[1], item[2]), None))
            else:
                task = item[1]
                pending.append(("task", task, pool.apply_async(*remote(task))))
            if len(pending) >= limit:
                yield from drain(False)
        yield from drain(True)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
