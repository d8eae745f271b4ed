"""Prepare every program ``jaxrna fold --model turner`` can use, before a run needs it.

A run of the energy model compiles two programs per length class it uses, its fill and its
traceback (:func:`jaxrna.batching.energy_length_class`, with the class's fixed row count, see
:func:`jaxrna.energy.batch_plan.batch_rows_for`, and on a GPU the long classes' batch of one
row for a record alone in its class, :func:`~jaxrna.energy.batch_plan.standard_rows`;
``--score-only`` runs the fill alone); the
parameter set, temperature and dangle model are runtime values of the same programs.
:func:`warm` runs a minimal synthetic batch (one short sequence, the other rows empty) of every
class up to ``max_length`` through the code path the CLI uses, so the programs are compiled (or
loaded) and kept in the cache directory (``JAXRNA_CACHE_DIR``): a later ``fold --model turner``
on any data within ``max_length`` with any of those options compiles nothing. With
``partition``, also the partition engine's program of every class up to ``max_length`` that the
device's memory admits (:func:`partition_plan`; compiled, not run), for ``fold --model turner
--partition`` with jaxrna's engine (``--backend cpu`` or ``gpu``), and where a run over such
records can meet more classes than it uses (:data:`jaxrna.energy.partition_jax.CLASS_BUDGET`),
the largest class the device admits too (a long run keeps it for records still to come), with
its MFE program (fill and traceback in one, as that engine runs it). Each class has one form of
its programs, the one a run compiles (:func:`jaxrna.energy.api.static_for`).

>>> warm("cpu", max_length=100)        # doctest: +SKIP
2
"""

from __future__ import annotations


def classes(max_length: int) -> list[int]:
    """The length classes a run over sequences of up to ``max_length`` nt may use.

    >>> classes(300), classes(10_000)[-2:]
    ([128, 256, 512], [6144, 10240])
    """
    from jaxrna.batching import ENERGY_LENGTH_CLASSES, energy_length_class

    top = energy_length_class(max(max_length, 1))
    out = [c for c in ENERGY_LENGTH_CLASSES if c <= top]
    return out if out and out[-1] == top else out + [top]


def partition_plan(max_length: int, backend: str | None = None) -> tuple[object, list]:
    """``(device, [(length class, rows)])``: the partition engine's programs
    (:mod:`jaxrna.energy.partition_jax`) a run over records of up to ``max_length`` nt can use
    on the first device of ``backend``: the classes up to ``max_length``'s, less those whose
    records this device refuses for memory, and the largest class it admits where a run may
    keep it (more classes than :data:`~jaxrna.energy.partition_jax.CLASS_BUDGET`, the budget
    a run's classes take, can be met; a run's classes are classes of the ladder up to the
    largest met, or that one).

    >>> partition_plan(200, "cpu")[1]
    [(128, 8), (256, 2)]
    """
    from jaxrna.energy import partition_jax as pj

    device, platform = pj.device_of(backend)
    budget, most = pj.budgets(device, platform)
    admitted = [c for c in classes(max_length) if pj.estimate_bytes(c) <= most]
    top = pj.top_class(most)
    if len(admitted) >= pj.CLASS_BUDGET and top not in admitted:
        admitted.append(top)
    return device, [(padded, pj.rows_for(padded, platform, budget)) for padded in admitted]


def mfe_plan(lengths, backend: str, batch_budget: int) -> list[tuple[int, int]]:
    """``(length class, rows)`` of every MFE program a run may use for these classes on
    ``backend``: each class's fixed rows and, on a GPU from
    :data:`~jaxrna.energy.batch_plan.ALONE_MIN_LENGTH` nt, the batch of one row that a record
    alone in its class runs in (:func:`jaxrna.energy.batch_plan.standard_rows`).

    >>> mfe_plan([512, 2048], "gpu", 15 << 30)
    [(512, 512), (2048, 64), (2048, 1)]
    >>> mfe_plan([512, 2048], "cpu", 1 << 30)
    [(512, 8), (2048, 1)]
    """
    from jaxrna.energy.batch_plan import standard_rows

    return [(length, rows) for length in lengths
            for rows in standard_rows(length, backend, batch_budget)]


def warm(backend: str = "cpu", max_length: int = 10_000, batch_budget: int | None = None,
         partition: bool = False, **options) -> int:
    """Compile (or load from the cache) the energy model's program of every length class up to
    ``max_length`` nt on ``backend`` ("cpu", "gpu" or "auto"); returns how many programs were
    prepared. ``batch_budget``: as :func:`jaxrna.energy.api.fold_energy_records` (the default
    is the CLI's). ``partition``: the partition engine's programs too. ``options`` are
    accepted and ignored: parameter set, temperature, dangles, MEA and ``score_only`` do not
    change the programs."""
    import jax

    from jaxrna.energy.api import EnergyModel, fold_batch, prefetch_programs, prepare_program
    from jaxrna.energy.batch_plan import gpu_budget
    from jaxrna.runtime import enable_compilation_cache, resolve_backend

    enable_compilation_cache()
    backend = resolve_backend(backend)
    device = jax.devices(backend)[0]
    if batch_budget is None:
        batch_budget = gpu_budget(device) if backend != "cpu" else 1 << 30
    params = EnergyModel().load()
    plan = mfe_plan(classes(max_length), backend, batch_budget)
    pf_plan, combined = [], []
    if partition:
        from jaxrna.energy import partition_jax

        pf_device, pf_plan = partition_plan(max_length, backend)
        # the partition engine's MFE: fill and traceback in one program, in its classes
        combined = mfe_plan([c for c, _ in pf_plan], backend, batch_budget)
    prefetch_programs(plan, params, device)  # side by side on hosts of many cores
    prefetch_programs(combined, params, device, combined=True)
    if partition:
        partition_jax.prefetch_programs(pf_plan, pf_device)
    count = 0
    with jax.default_device(device):
        for length, rows in plan:
            count += prepare_program(length, rows, params, device)
            fold_batch(["GGGGAAACCCC"], params, 2, [()], True, length, rows)
        for length, rows in combined:
            count += prepare_program(length, rows, params, device, combined=True)
    if partition:
        partition_jax.prepare_programs(pf_plan, pf_device)
    return count + len(pf_plan)
