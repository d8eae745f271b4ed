"""The MFE engine's device programs (:mod:`jaxrna.energy.api` runs them): the fill of a batch
(:func:`_fill_rows`, :data:`FILL_PROGRAM`), the traceback of its tables (:func:`_trace_rows`,
:data:`TRACE_PROGRAM`), and the two in one (:func:`_batch`, :data:`PROGRAM`, the partition
engine's MFE), kept in jaxrna's program store (:mod:`jaxrna.programs`); which form of the
fill's interior loop a class compiles (:func:`static_for`); their argument shapes per class,
and preparing them ahead of a run (:func:`prefetch_programs`, :func:`prepare_program`) or
asking whether they are stored (:func:`programs_stored`).

Two programs rather than one: a cold run compiles them side by side, each in about half the
time of the two in one (H100, a 512-nt class of 512 rows: lowered and compiled in 5.9 s
against 10.3 s, BENCHMARKS.md "Twenty-first session").

>>> [name for name, *_ in _program_specs(128, 8, load_params(), combined=False)]
['energy.fill_batch', 'energy.traceback_batch']
>>> _trace_specs(128, 8)[0].shape[0], static_for("cpu", 128)
(8, {'interior': 'gather', 'bands': 2})
"""

from __future__ import annotations

import functools
from typing import Iterable, Sequence

import numpy as np

from jaxrna.energy.batch_plan import device_batches, gpu_budget
from jaxrna.energy.params import EnergyParams, load_params
from jaxrna.kernels.fallback import pallas_builds, usable

#: The batch programs' names in the program store: fill and traceback in one
#: (:func:`batch_program`, the partition engine's MFE), and the two halves, which MFE runs compile
#: side by side (:func:`fill_program`, :func:`trace_program`; ``--score-only`` runs the
#: fill alone).
PROGRAM = "energy.fold_batch"
FILL_PROGRAM = "energy.fill_batch"
TRACE_PROGRAM = "energy.traceback_batch"


def _batch(s, allowed, special, n, dp, dangles, stop, with_pairs, interior: str = "jax",
           bands: int | None = None):
    """:func:`_fill_rows` then :func:`_trace_rows` in one program (one per shape, see
    :func:`batch_program`): each row's energy, partner array and whether its traceback
    succeeded; ``with_pairs`` (a traced bool) runs the traceback or skips it (its partner rows
    are then meaningless)."""
    energy, T, F = _fill_rows(s, allowed, special, n, dp, dangles, stop, interior, bands)
    partner, ok = _traced(T, F, s, allowed, special, n, dp, dangles, with_pairs)
    return energy, partner, ok


def _fill_rows(s, allowed, special, n, dp, dangles, stop, interior: str = "jax",
               bands: int | None = None):
    """The fill of a batch (:func:`jaxrna.energy.fill.fill` ``vmap``-ped): each row's minimum
    free energy and its tables ``T`` and ``F``, which :func:`_trace_rows` reads."""
    from jaxrna.batching import map_rows
    from jaxrna.energy.fill import fill

    def one(s, allowed, special, n):
        tables = fill(s, allowed, special, n, dp, dangles, stop, interior=interior, bands=bands)
        return tables["F"][n], tables["T"], tables["F"]

    return map_rows(one)(s, allowed, special, n)     # one row (long classes): no vmap


def _trace_rows(T, F, s, allowed, special, n, dp, dangles):
    """The traceback of a batch filled by :func:`_fill_rows` (``T``, ``F`` its tables): each
    row's partner array and whether its traceback succeeded."""
    return _traced(T, F, s, allowed, special, n, dp, dangles, True)


def _traced(T, F, s, allowed, special, n, dp, dangles, enabled):
    """:func:`_trace_rows` with ``enabled`` (shared by the batch, as
    :func:`jaxrna.energy.traceback.traceback`'s; the programs' signatures stay their own: a
    stored program's arguments are its signature's)."""
    from jaxrna.batching import map_rows
    from jaxrna.energy.traceback import traceback

    def one(T, F, s, allowed, special, n):
        return traceback({"T": T, "F": F}, s, allowed, special, n, dp, dangles, enabled=enabled)

    return map_rows(one)(T, F, s, allowed, special, n)


@functools.lru_cache(maxsize=1)
def batch_program():
    """The batch program of fill and traceback in one (:data:`PROGRAM`: the partition
    engine's MFE, whose programs share the run's budget with the partition programs), kept by
    :mod:`jaxrna.programs` (a warm run loads it from disk instead of tracing the energy model
    again; on CPUs too, where tracing it is most of a small run). Its static arguments are
    ``interior`` and ``bands`` (fixed by the platform and the class: :func:`static_for`)."""
    from jaxrna.programs import stored_jit

    return stored_jit(PROGRAM, static_argnames=("interior", "bands"),
                      cpu_store=True)(_batch)


@functools.lru_cache(maxsize=1)
def fill_program():
    """The fill program of a class (:data:`FILL_PROGRAM`; static arguments as
    :func:`batch_program`'s)."""
    from jaxrna.programs import stored_jit

    return stored_jit(FILL_PROGRAM, static_argnames=("interior", "bands"),
                      cpu_store=True)(_fill_rows)


@functools.lru_cache(maxsize=1)
def trace_program():
    """The traceback program of a class (:data:`TRACE_PROGRAM`)."""
    from jaxrna.programs import stored_jit

    return stored_jit(TRACE_PROGRAM, cpu_store=True)(_trace_rows)


def batch_jitted():
    """The batch program's ``jax.jit`` function (what a compile worker lowers:
    :mod:`jaxrna.compile_workers`)."""
    return batch_program().jitted()


def fill_jitted():
    """The fill program's ``jax.jit`` function (for compile workers)."""
    return fill_program().jitted()


def trace_jitted():
    """The traceback program's ``jax.jit`` function (for compile workers)."""
    return trace_program().jitted()


@functools.lru_cache(maxsize=64)
def _device_params(params: EnergyParams, length: int):
    from jaxrna.energy.terms import device_params

    return device_params(params, length)


#: The fill's Pallas kernels (:mod:`jaxrna.kernels.shifted_min`), as
#: :mod:`jaxrna.kernels.fallback` names them; their pure-JAX path is ``interior="gather"``
#: (:data:`jaxrna.energy.fill_plan.PURE_JAX`).
INTERIOR_KERNEL = "energy.shifted_min"


def static_for(platform: str, length: int) -> dict:
    """The batch program's static arguments for a class of padded ``length`` on ``platform``:
    the interior loop (:func:`interior_for`) and the sweep's bands
    (:func:`jaxrna.energy.fill.bands_for`). One form per class: the gather that a GPU's
    classes above :data:`~jaxrna.energy.fill.KERNEL_MAX_LENGTH` run compiles in a fifth of
    the time of the unrolled slices and runs as fast, so a warm-up no longer stores the slices
    beside it (H100, one row, twenty-second session: 2,048 nt compiled in 2.97 s against
    11.77, ran 0.222-0.236 s against 0.239-0.279; 4,096 nt 2.55 / 14.48 s, 0.409-0.412 /
    0.402-0.423 s; the same tables).

    >>> static_for("cpu", 128)
    {'interior': 'gather', 'bands': 2}
    """
    from jaxrna.energy.fill import bands_for

    return {"interior": interior_for(platform, length), "bands": bands_for(platform, length)}


def interior_for(platform: str, length: int, probe: bool = False) -> str:
    """:func:`jaxrna.energy.fill.interior_mode`, but the pure-JAX gather where the Pallas kernels
    failed to build in this process -- or, with ``probe`` (for callers that do not compile
    their program through :func:`~jaxrna.kernels.fallback.compile_or_fallback`), where
    :func:`~jaxrna.kernels.fallback.pallas_builds` finds that Pallas does not build here.

    >>> interior_for("cpu", 128)
    'gather'
    """
    from jaxrna.energy.fill import interior_mode
    from jaxrna.energy.fill_plan import PURE_JAX

    interior = interior_mode(platform, length)
    if interior in ("pallas", "interpret"):
        ok = pallas_builds(INTERIOR_KERNEL, interior == "interpret") if probe \
            else usable(INTERIOR_KERNEL)
        if not ok:
            return PURE_JAX
    return interior


def program_args(stack: dict, params: EnergyParams, length: int, dangles: int,
                 with_pairs: bool) -> tuple:
    """The batch program's arguments for the inputs ``stack`` of
    :func:`jaxrna.energy.fill.prepare_batch` (the loops stop at its longest sequence)."""
    return (stack["s"], stack["allowed"], stack["special"], stack["n"],
            _device_params(params, length), np.int32(dangles), np.int32(stack["n"].max()),
            np.bool_(with_pairs))


#: On a GPU, the longest class whose traceback is lowered before its fill. Longer classes'
#: fills compile as long as their tracebacks or longer (2,048 nt x 64 rows: 2.03 s alone, the
#: traceback ready at 4.8 s and the fill at 7.0 s of a cold 404 x 1-2,600 nt run with the
#: traceback first, H100, S22e/S22f) and are needed first: there the fill goes first.
TRACE_FIRST_MAX = 1024

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
        return [(PROGRAM, "jaxrna.energy.mfe_programs:batch_jitted",
                 _specs(length, rows, params), True)]
    fill = _specs(length, rows, params)[:-1]
    out = [(FILL_PROGRAM, "jaxrna.energy.mfe_programs:fill_jitted", fill, True)]
    if with_pairs:
        out.append((TRACE_PROGRAM, "jaxrna.energy.mfe_programs:trace_jitted",
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
                      combined: bool = False, with_pairs: bool = True) -> int:
    """Start preparing the programs of every ``(length class, rows)`` of a job's plan in the
    background (:func:`jaxrna.compile_workers.prefetch`), so that they compile side by side
    rather than one after another; the batches then find them ready or under way. Returns how
    many were asked for. ``combined``, ``with_pairs``: which programs
    (:func:`jaxrna.energy.api._launch`).

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
        asked = _program_specs(length, rows, params, combined, with_pairs)
        if device.platform == "gpu" and length <= TRACE_FIRST_MAX:
            # a GPU compiles the traceback longest (512 nt: 2.5-3.1 s against the fill's 1.5):
            # lowered first, it is ready sooner and the fill's run overlaps its compilation
            # (H100, S22d, 1,000 x 50-500 nt cold: 5.30-6.06 s against 6.06-6.33 fill first)
            asked.sort(key=lambda spec: spec[0] != TRACE_PROGRAM)
        for name, source, specs, filled in asked:
            static = static_for(device.platform, length) if filled else {}
            compile_workers.prefetch(name, source, specs, static, device, cpu_store=True,
                                     processes=k >= THREAD_CLASSES)
            count += 1
    return count


def first_program(params: EnergyParams, device, combined: bool = False,
                  with_pairs: bool = True):
    """``describe((length class, rows))`` for :func:`jaxrna.programs.readiness`: the program a
    batch of the class starts with on ``device`` (the fill, or fill and traceback in one;
    ``combined``, ``with_pairs`` as :func:`prefetch_programs`). Only the first counts: the
    device computes the fill while the traceback's compilation ends (on a GPU a class up to
    1,024 nt compiles its traceback longer than its fill).

    >>> from jaxrna.programs import default_device
    >>> first_program(load_params(), default_device())((128, 8))[0]
    'energy.fill_batch'
    """
    @functools.lru_cache(maxsize=None)
    def describe(cls: tuple[int, int]) -> tuple:
        length, rows = cls
        name, _, specs, filled = _program_specs(length, rows, params, combined, with_pairs)[0]
        return (name, specs, static_for(device.platform, length) if filled else {}, device, True)

    return describe


def programs_stored(lengths: Sequence[int], device, length_class=None, combined: bool = False
                    ) -> bool:
    """Whether every batch program :func:`jaxrna.energy.api.fold_energy_records` runs for
    records of ``lengths`` nt on ``device`` (its plan, ``length_class`` as there; ``combined``
    as :func:`jaxrna.energy.api._launch`) is in this process or in the store already: a run of
    them compiles nothing."""
    from jaxrna import programs

    gpu = device.platform != "cpu"
    plan = device_batches(list(lengths), "gpu" if gpu else "cpu",
                          gpu_budget(device) if gpu else 1 << 30, length_class, alone=True)
    params = load_params()
    for padded, rows in dict.fromkeys((p, r) for p, r, _ in plan):
        for name, _, specs, filled in _program_specs(padded, rows, params, combined):
            static = static_for(device.platform, padded) if filled else {}
            if not programs.available(name, specs, static, device, True):
                return False
    return True


def prepare_program(length: int, rows: int, params: EnergyParams, device,
                    combined: bool = False) -> int:
    """Compile (or load) the programs of a class of ``rows`` rows on ``device`` now, waiting
    for a prefetch of them under way. Returns how many (they are compiled for JAX's default
    device; ``device``'s platform says which forms)."""
    from jaxrna import compile_workers, programs

    specs = _program_specs(length, rows, params, combined)
    for name, source, spec, filled in specs:
        static = static_for(device.platform, length) if filled else {}
        programs.program(name, compile_workers.resolve(source), spec, static, cpu_store=True)
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

    return program_args(prepare_batch([""] * rows, params, length), params, length, 2, True)
