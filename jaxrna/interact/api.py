"""High-level RNA-RNA interaction: pairs of strands in, :class:`InteractResult` objects out.

Strand 1 and strand 2 are both given 5'->3'. By default the shorter strand is the outer grid
of matrices (the seed's choice; F is symmetric in the strands). Scores are exact: weights are
integers in units of ``1/scale`` (:mod:`jaxrna.weights`).

Pairs of one padded geometry run as one device program per batch
(:mod:`jaxrna.interact.program`: fill, every window's score, the best window and the cells its
traceback reads); the table stays on the device, and the structure is traced back on the host
from those cells (:mod:`jaxrna.interact.traceback`; about 10 ms for 23 x 128 nt). On the CPU
backend, pairs up to 1 GiB of tables run instead on the host engine
(:mod:`jaxrna.interact.host_engine`: the same tables in compiled C at each pair's true size,
nothing to compile per class), with the same results (:func:`interact_pairs`' ``engine``).

>>> r = interact("UCGCUGCU", "GUCGGA", weights="bpmax")
>>> r.score, r.s1_score, r.s2_score
(14.5, 3, 1)
>>> r.dotbracket
'.[([.[)[&](]]])'
>>> w = interact("CCACAGGUAGCCUGCC", "GUCGUGGUCCGCAACACUCG", weights="bpmax", window1=8, window2=8)
>>> w.score, w.window1, w.window2
(17.5, (8, 15), (0, 7))
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterable, Iterator, Sequence

import numpy as np

from jaxrna.alphabet import encode, encode_batch
from jaxrna.interact import host_engine
from jaxrna.interact.classes import PROGRAM_BUDGET, ClassKey, key_of, run_geometries
from jaxrna.interact.program import BoxLayout, compiled
from jaxrna.interact.results import InteractResult, result_of
from jaxrna.interact.windows import Box, Plan, dense_single, plan
from jaxrna.io.errors import ResourceError
from jaxrna.io.fasta import Record
from jaxrna.oom import split_on_oom
from jaxrna.pipeline import schedule
from jaxrna.runtime import device_memory_bytes, human_bytes, memory_bytes
from jaxrna.stages import stage
from jaxrna.weights import WeightSet, parse_weights


# ---- planning --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Problem:
    """One pair in internal orientation: ``outer_is_1`` says whether strand 1 is the grid;
    ``key``: its geometry class (:func:`jaxrna.interact.classes.key_of`; ``plan.geo`` is the
    class's geometry, or the larger one that serves it in a run: :func:`plan_run`)."""

    rec1: Record
    rec2: Record
    outer_is_1: bool
    plan: Plan
    key: ClassKey | None = None

    @property
    def outer(self) -> str:
        return self.rec1.sequence if self.outer_is_1 else self.rec2.sequence[::-1]

    @property
    def inner(self) -> str:
        return self.rec2.sequence[::-1] if self.outer_is_1 else self.rec1.sequence


def make_problem(rec1: Record, rec2: Record, window1: int | None = None,
                 window2: int | None = None, outer: str = "auto", tile: int | None = None,
                 backend: str = "cpu") -> Problem:
    """Orient and plan one pair. ``outer``: ``"auto"`` (the shorter strand; strand 1 on a
    tie), ``"1"`` or ``"2"``."""
    n1, n2 = len(rec1), len(rec2)
    if outer not in ("auto", "1", "2"):
        raise ValueError(f"outer must be auto, 1 or 2, not {outer!r}")
    outer_is_1 = n1 <= n2 if outer == "auto" else outer == "1"
    if outer_is_1:
        p = plan(n1, n2, window1, window2, tile=tile, backend=backend)
        key = key_of(n1, n2, window1, window2)
    else:
        p = plan(n2, n1, window2, window1, tile=tile, backend=backend)
        key = key_of(n2, n1, window2, window1)
    return Problem(rec1=rec1, rec2=rec2, outer_is_1=outer_is_1, plan=p, key=key)


def device_memory(backend: str) -> int:
    """Memory JAX may use on ``backend`` (bytes; 0 if unknown)."""
    return device_memory_bytes("gpu") if backend == "gpu" else memory_bytes()


def memory_limit(max_bytes: int | None = None, backend: str = "cpu") -> int:
    """Bytes one pair's fill may use: ``max_bytes``, else 80% of the backend's memory (0 =
    unknown: no limit)."""
    return max_bytes if max_bytes is not None else int(0.8 * device_memory(backend))


def check_memory(problem: Problem, max_bytes: int | None = None, backend: str = "cpu",
                 need: int | None = None) -> None:
    """Refuse up front a pair whose table would not fit, with an estimate and advice
    (``need``: the bytes of the engine that runs it; default the device engine's)."""
    limit = memory_limit(max_bytes, backend)
    need = problem.plan.bytes_needed() if need is None else need
    if limit and need > limit:
        p = problem.plan
        raise ResourceError(
            f"pair '{problem.rec1.id}' x '{problem.rec2.id}' ({len(problem.rec1)} x "
            f"{len(problem.rec2)} nt, windows {p.l_outer} x {p.l_inner} on the outer x inner "
            f"strand) needs about {human_bytes(need)}, more than the {human_bytes(limit)} "
            f"allowed; use --window1/--window2 (memory grows with the square of each window), "
            f"a machine with more memory, or raise --max-memory")


def plan_run(problems: Sequence[Problem], budget: int = PROGRAM_BUDGET, limit: int = 0,
             backend: str = "cpu", tile: int | None = None) -> list[Problem]:
    """The run's problems, each in the geometry that serves its class: its own when the run
    meets at most ``budget`` geometries, else one of at most ``budget`` merged ones
    (:func:`jaxrna.interact.classes.run_geometries`; none needs more than ``limit`` bytes).
    True lengths and windows are unchanged (runtime values of the program), so results are.

    >>> from jaxrna.io.fasta import Record
    >>> probs = [make_problem(Record("a", "A" * n), Record("b", "A" * m))
    ...          for n in (5, 20, 30) for m in (40, 100, 200, 400)]
    >>> len({p.plan.geo for p in probs}), len({p.plan.geo for p in plan_run(probs, 3)})
    (9, 3)
    """
    if len({p.plan.geo for p in problems}) <= budget:      # within the budget: as planned
        return list(problems)
    serve = run_geometries([p.key for p in problems], budget, limit, backend, tile)
    return [p if serve[p.key] == p.plan.geo else replace(p, plan=replace(p.plan, geo=serve[p.key]))
            for p in problems]


# ---- computing -------------------------------------------------------------------------------

def _fill_batch(codes_u, codes_v, weights, geo):
    import jax

    from jaxrna.interact.recurrence import bpmax_fill

    return jax.vmap(lambda a, b: bpmax_fill(a, b, weights, geo))(codes_u, codes_v)


@lru_cache(maxsize=1)
def _fill_batch_jitted():
    import jax

    return jax.jit(_fill_batch, static_argnames=("geo",))


def fill_batch(codes_u, codes_v, weights, geo):
    """:func:`~jaxrna.interact.recurrence.bpmax_fill` over a batch of same-geometry problems
    (the tables themselves, jitted with ``geo`` static; :func:`run_problems` runs
    :mod:`jaxrna.interact.program`)."""
    return _fill_batch_jitted()(codes_u, codes_v, weights, geo)


def _finish(prob: Problem, host: dict, b: int, weights: WeightSet, with_pairs: bool,
            keep_windows: bool) -> InteractResult:
    """The result of batch row ``b`` of a program's outputs (host copies)."""
    p, geo = prob.plan, prob.plan.geo
    score, o0, q0, s_o, s_i, row0 = (int(x) for x in host["summary"][b])
    windows = None
    if keep_windows:
        count_o, count_i = p.n_windows
        windows = host["windows"][b][:count_o, :count_i]
    box = None
    if with_pairs:
        with stage("traceback"):
            lay = BoxLayout.of(geo)
            at_o, at_q = (o0, q0) if lay.whole else (0, 0)     # whole S tables, or the box's
            box = Box(tiles=host["tiles"][b], cells=lay.cell_map(geo, o0), geo=geo, o0=o0,
                      q0=q0, row0=row0, codes_outer=encode(prob.outer[o0:o0 + p.l_outer]),
                      codes_inner=encode(prob.inner[q0:q0 + p.l_inner]),
                      s_outer=dense_single(host["s_outer"][b], p.l_outer, at_o),
                      s_inner=dense_single(host["s_inner"][b], p.l_inner, at_q))
    return result_of(prob, weights, score, o0, q0, s_o, s_i, windows, box)


#: Window grids up to this many starts are read back even without ``keep_windows``.
WINDOWS_ALWAYS = 1 << 16


#: Most batch rows of a class on a CPU and on a GPU (:func:`class_rows`).
MAX_ROWS = {"loop": 4, "reduce": 16}


def class_rows(geo, batch_budget: int) -> int:
    """The fixed row count of a geometry class's batches: as many pairs as ``batch_budget``
    bytes of tables and temporaries hold, at most :data:`MAX_ROWS`, rounded down to a power
    of two. It depends on the class alone, never on how many pairs a run has (a last batch is
    topped up with empty pairs), so a class compiles one program. Few rows on a CPU (work
    grows with rows, empty ones too), more on a GPU (whose time is set by the fill's chain of
    steps more than by its width).

    >>> from jaxrna.interact.windows import plan
    >>> class_rows(plan(30, 45).geo, 1 << 30), class_rows(plan(23, 20000, None, 128).geo, 1 << 30)
    (4, 1)
    """
    per = max(1, geo.table_bytes() + geo.work_bytes())
    cap = max(1, min(MAX_ROWS.get(geo.sweep, 16), batch_budget // per))
    return 1 << (cap.bit_length() - 1)


def problem_batches(problems: Sequence[Problem], batch_budget: int) -> list[tuple[object, int, list[int]]]:
    """``(geometry, rows, members)`` of each batch: problems of one geometry class, sorted by
    their windows and lengths so a batch's spans (the diagonals its fill runs) stay tight,
    ``rows`` = :func:`class_rows` (members fewer than rows are topped up with empty pairs)."""
    groups: dict = {}
    for k, prob in enumerate(problems):
        groups.setdefault(prob.plan.geo, []).append(k)
    out = []
    for geo, members in groups.items():
        rows = class_rows(geo, batch_budget)
        members = sorted(members, key=lambda k: (problems[k].plan.l_outer, problems[k].plan.l_inner,
                                                 problems[k].plan.n_inner, k))
        for s in range(0, len(members), rows):
            out.append((geo, rows, members[s:s + rows]))
    return out


def _inputs(problems: Sequence[Problem], batch, wm: np.ndarray, keep_windows: bool):
    """The program's arguments for one batch and its ``windows`` switch."""
    geo, rows, chunk = batch
    with stage("encode"):
        probs = [problems[k] for k in chunk]
        pad = rows - len(chunk)
        cu = encode_batch([q.outer for q in probs] + [""] * pad, geo.n_outer)[0]
        cv = encode_batch([q.inner for q in probs] + [""] * pad, geo.n_inner)[0]
        info = np.array([(q.plan.n_outer, q.plan.n_inner, q.plan.l_outer, q.plan.l_inner,
                          int(q.outer_is_1)) for q in probs], np.int32)
        info = np.concatenate([info, np.repeat(info[:1], pad, axis=0)])
        spans = np.array([info[:, 2].max(), info[:, 3].max()], np.int32)
    # every window's scores come back when asked for, or when they are few (one program for both)
    windows = keep_windows or geo.n_outer * geo.n_inner <= WINDOWS_ALWAYS
    return (cu, cv, wm, info, spans), windows


def _prefetch(problems, batches, wm, with_pairs: bool, keep_windows: bool, devices) -> None:
    """Start compiling each class's program on each device at once (a run's plan is known
    before its first batch: :func:`jaxrna.interact.program.prefetch`)."""
    from jaxrna.interact.program import prefetch

    first: dict = {}
    for batch in batches:
        first.setdefault((batch[0], batch[1]), batch)
    if len(first) < 2:
        return                  # one program: compiled when its first batch needs it
    for batch in first.values():
        args, windows = _inputs(problems, batch, wm, keep_windows)
        for device in devices:
            prefetch(args, batch[0], with_pairs, windows, device)


def prepare(problems: Sequence[Problem], batch, wm: np.ndarray, with_pairs: bool,
            keep_windows: bool, device):
    """``(program, arguments)`` of one batch: the compiled program (loaded or compiled now)."""
    args, windows = _inputs(problems, batch, wm, keep_windows)
    return compiled(*args, batch[0], with_pairs, windows, device), args


def _launch(problems: Sequence[Problem], batch, wm: np.ndarray, with_pairs: bool,
            keep_windows: bool, device):
    """Dispatch one batch's program (returns the device outputs without waiting)."""
    import jax

    run, args = prepare(problems, batch, wm, with_pairs, keep_windows, device)
    with stage("device"):
        return run(*jax.device_put(args, device))


def run_problems(problems: Sequence[Problem], weights: WeightSet, with_pairs: bool = True,
                 keep_windows: bool = False, batch_budget: int = 1 << 30,
                 devices: Sequence | None = None) -> list[InteractResult]:
    """Compute every problem (same weights), batching those that share a geometry class: one
    program per class (its rows fixed, :func:`class_rows`), the batches spread over
    ``devices`` (default: JAX's default device; :func:`jaxrna.pipeline.schedule`), the next
    batch dispatched while the last one is read and traced back; results in input order.

    Programs of a run: one per geometry (:func:`jaxrna.interact.windows.plan`) and traceback
    switch, at most 8 whatever the mix of lengths to 10,240 nt, windows and weights
    (:func:`interact_pairs` plans the run: a run meeting more classes serves them by at most 8
    merged ones, :func:`plan_run`; only pairs near the memory limit in different dimensions
    could need more, which no mix tested does). A run meeting at most 8 keeps its classes:
    pairs of at most 32 x 63 nt take at most 3 (shorter strand <= 16 or <= 32, longer <= 31
    or <= 63). Windows, weights and true lengths are runtime values."""
    wm = np.asarray(weights.matrix(), np.int32)
    from jaxrna.programs import default_device

    devices = list(devices) if devices else [default_device()]
    out: list[InteractResult | None] = [None] * len(problems)
    batches = problem_batches(problems, batch_budget)
    _prefetch(problems, batches, wm, with_pairs, keep_windows, devices)
    # one batch ahead (per device) only while two batches' tables fit in the budget
    depth = 1 if all(b[1] * (b[0].table_bytes() + b[0].work_bytes()) * 2 <= batch_budget
                     for b in batches) else 0

    def collect(batch, outputs):
        import jax

        with stage("device"):
            return jax.device_get(outputs)

    launched = schedule(batches, lambda b, device: _launch(problems, b, wm, with_pairs,
                                                           keep_windows, device),
                        collect, devices, depth)
    for (geo, rows, chunk), host in launched:
        for b, k in enumerate(chunk):
            out[k] = _finish(problems[k], host, b, weights, with_pairs, keep_windows)
    return out  # type: ignore[return-value]


def interact_pairs(pairs: Iterable[tuple[Record, Record]], weights: WeightSet | str = "bpmax",
                   window1: int | None = None, window2: int | None = None, outer: str = "auto",
                   with_pairs: bool = True, keep_windows: bool = False, chunk: int = 256,
                   max_bytes: int | None = None, batch_budget: int = 1 << 30,
                   backend: str = "cpu", tile: int | None = None, on_done=None,
                   on_error=None, budget: int = PROGRAM_BUDGET,
                   engine: str = "auto") -> Iterator[InteractResult]:
    """Interact a stream of ``(strand 1, strand 2)`` record pairs, yielding results in order.

    ``window1``/``window2``: window lengths (None = whole strand). ``backend``: a JAX platform
    name. A pair that would not fit in memory raises :class:`ResourceError`, or, when
    ``on_error(pair, error)`` is given, is reported to it and skipped. ``on_done(k)`` is called
    as ``k`` more pairs finish. The run is planned before its first pair is computed (every
    pair's class is read first): it compiles at most ``budget`` programs (:func:`plan_run`).
    ``engine``: ``"auto"`` (on the CPU backend, pairs that fit the host engine run there:
    :mod:`jaxrna.interact.host_engine`; the same results), ``"host"`` or ``"device"``.
    """
    if isinstance(weights, str):
        weights = parse_weights(weights)
    for name, w in (("window1", window1), ("window2", window2)):
        if w is not None and w < 1:
            raise ValueError(f"{name} must be at least 1, got {w}")
    buffer: list[Problem] = []
    used: list = []             # every device of the backend, or --devices N (JAX on first use)

    def flush() -> Iterator[InteractResult]:
        results: list = [None] * len(buffer)
        device = [k for k, prob in enumerate(buffer) if k not in on_host]
        if device:
            import jax

            from jaxrna.runtime import devices

            used[:] = used or devices(backend)
            with jax.default_device(used[0]):
                done = split_on_oom(  # out of device memory: halves, down to one pair
                    lambda probs: run_problems(probs, weights, with_pairs, keep_windows,
                                               batch_budget, used),
                    [buffer[k] for k in device], lambda prob: f"pair {prob.rec1.id} x {prob.rec2.id}",
                    on_error and (lambda prob, exc: on_error((prob.rec1, prob.rec2), exc)))
            for k, r in zip(device, done):
                results[k] = r
            if on_done:
                on_done(len(device))
        host = sorted(on_host)
        if host:
            for k, r in zip(host, host_engine.run_host([buffer[k] for k in host], weights, with_pairs,
                                           keep_windows, on_done=on_done)):
                results[k] = r
        yield from (r for r in results if r is not None)

    # the run's plan first: its classes, merged onto at most ``budget`` programs (issue 26)
    planned: list = []          # a Problem, or the pair and why it does not fit
    # pairs the host engine takes need no program (issue 26: on a CPU, a few small pairs were
    # seconds of compiling); the others are planned onto at most ``budget`` programs
    host_pair: list[bool] = []
    for rec1, rec2 in pairs:
        prob = make_problem(rec1, rec2, window1, window2, outer, tile, backend)
        on_host_engine = host_engine.wanted(prob, engine, backend)
        try:
            check_memory(prob, max_bytes, backend,
                         host_engine.pair_bytes(prob) if on_host_engine else None)
        except ResourceError as exc:
            planned.append(((rec1, rec2), exc))
            host_pair.append(False)
            continue
        planned.append(prob)
        host_pair.append(on_host_engine)
    fit = plan_run([p for p, h in zip(planned, host_pair) if isinstance(p, Problem) and not h],
                   budget, memory_limit(max_bytes, backend), backend, tile)
    fit.reverse()
    on_host: set[int] = set()
    for item, h in zip(planned, host_pair):
        if not isinstance(item, Problem):
            if on_error is None:
                raise item[1]
            on_error(*item)
            continue
        if h:
            on_host.add(len(buffer))
            buffer.append(item)
        else:
            buffer.append(fit.pop())
        if len(buffer) >= chunk:
            yield from flush()
            buffer, on_host = [], set()
    if buffer:
        yield from flush()


def interact(seq1: str, seq2: str, weights: WeightSet | str = "bpmax", window1: int | None = None,
             window2: int | None = None, outer: str = "auto", with_pairs: bool = True,
             keep_windows: bool = False, backend: str = "auto") -> InteractResult:
    """BPMax of one pair of strands (both 5'->3'); see :func:`interact_pairs`."""
    from jaxrna.runtime import resolve_backend

    def rec(seq: str, rid: str) -> Record:
        return Record(id=rid, sequence=seq.upper().replace("T", "U"))

    results = list(interact_pairs([(rec(seq1, "seq1"), rec(seq2, "seq2"))], weights, window1,
                                  window2, outer, with_pairs, keep_windows,
                                  backend=resolve_backend(backend)))
    return results[0]
