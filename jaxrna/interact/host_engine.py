"""``jaxrna interact``'s host engine: each pair's tables in compiled C on every core, no JAX.

On a CPU the device engine's programs (:mod:`jaxrna.interact.program`) cost seconds of
compilation per geometry class and fill padded cells; a small pair's tables take milliseconds
in C (:mod:`jaxrna.interact.host_fill`). This engine fills each pair's tables at its true
size on a thread per core (ctypes releases the GIL), takes the best window by the device
engine's tie rule (:func:`jaxrna.interact.program.best_window`) and traces the structure back
with the same traceback (:mod:`jaxrna.interact.traceback`), so both engines give the same
bytes (``tests/test_interact_host_engine.py``).

Which pairs it takes (:func:`wanted`): ``engine="host"``, or ``engine="auto"`` on the CPU
backend, every pair within :data:`MAX_BYTES` of tables and :data:`MAX_WORK` max-plus steps
(:func:`jaxrna.interact.host_fill.work`), where a C compiler is found; the rest, and every
pair without a compiler, go to the device engine. ``$JAXRNA_INTERACT_ENGINE=host|device``
overrides ``auto``. On a GPU host a job is small enough for the host when its steps take the
host's cores less than :data:`SMALL_JOB_S` (:func:`job_seconds`; ``jaxrna interact --backend
auto`` then keeps JAX on the CPU).

>>> from jaxrna.io.fasta import Record
>>> from jaxrna.interact.api import make_problem
>>> from jaxrna.weights import parse_weights
>>> prob = make_problem(Record("a", "UCGCUGCU"), Record("b", "GUCGGA"))
>>> if library() is None:
...     print("14.5 .[([.[)[&](]]])")     # no C compiler here: what the engine gives
... else:
...     r = run_host([prob], parse_weights("bpmax"))[0]
...     print(r.score, r.dotbracket)
14.5 .[([.[)[&](]]])
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np

from jaxrna.alphabet import encode
from jaxrna.interact.host_fill import HostBox, library, table_bytes, tables, work
from jaxrna.interact.program import best_window
from jaxrna.interact.results import result_of
from jaxrna.pipeline import cores, submitted_in_order
from jaxrna.stages import count, counts, stage
from jaxrna.weights import WeightSet

#: Largest tables of one pair the host engine fills (bytes): two strands of 128 nt whole,
#: longer ones windowed; larger pairs go to the device engine (its memory checks and
#: out-of-memory split apply there). Fewer pairs are filled at once where several such tables
#: would not fit in half the host's memory (:func:`run_host`).
MAX_BYTES = 1 << 30
#: Most max-plus steps of one pair on the host engine (:func:`~jaxrna.interact.host_fill.work`),
#: about 10 minutes of one core of the development VM. Below it the host engine was always the
#: faster on a CPU: a pair of 60 x 100 nt (7e9 steps) took 4.8 s against 51 s for the JAX
#: engine warm (this VM, 2 cores, 2026-11-26), 40 x 80 nt 0.8 s against 30 s.
MAX_WORK = 1e12
#: Host steps per second and core (the development VM, one core of 2, ``-O3 -march=native``:
#: 1.5-3e9 on pairs of 30 x 45 to 60 x 100 nt).
STEPS_PER_S = 1.5e9
#: A job whose host steps take all cores less than this many seconds runs on the host engine
#: under ``--backend auto`` even where a GPU is present (a GPU process spends more than this
#: starting and loading its programs).
SMALL_JOB_S = 0.5
#: ``$JAXRNA_INTERACT_ENGINE``: ``host`` or ``device`` forces the engine of ``auto``.
ENV = "JAXRNA_INTERACT_ENGINE"


def pair_bytes(prob) -> int:
    """Bytes of one problem's tables on the host engine."""
    p = prob.plan
    return table_bytes(p.n_outer, p.n_inner, p.l_outer - 1, p.l_inner - 1)


def _steps(n1: int, n2: int, l1: int, l2: int) -> float | None:
    """Max-plus steps of strands of ``n1`` and ``n2`` nt with windows of ``l1`` and ``l2``,
    or None where the pair is not the host engine's: an empty strand, tables over
    :data:`MAX_BYTES`, steps over :data:`MAX_WORK`."""
    if n1 < 1 or n2 < 1 or table_bytes(n1, n2, l1 - 1, l2 - 1) > MAX_BYTES:
        return None
    steps = work(n1, n2, l1 - 1, l2 - 1)
    return steps if steps <= MAX_WORK else None


def fits(prob) -> bool:
    """Whether one problem is the host engine's (:func:`_steps`)."""
    p = prob.plan
    return _steps(p.n_outer, p.n_inner, p.l_outer, p.l_inner) is not None


def engine_choice(engine: str = "auto") -> str:
    """``auto``, ``host`` or ``device``: ``engine``, unless ``$JAXRNA_INTERACT_ENGINE`` forces
    one for ``auto``."""
    if engine not in ("auto", "host", "device"):
        raise ValueError(f"engine must be auto, host or device, not {engine!r}")
    forced = os.environ.get(ENV, "").strip().lower()
    if engine == "auto" and forced in ("host", "device"):
        return forced
    return engine


def wanted(prob, engine: str, backend: str) -> bool:
    """Whether ``prob`` runs on the host engine (module docstring)."""
    engine = engine_choice(engine)
    if engine == "device" or (engine == "auto" and backend != "cpu"):
        return False
    return fits(prob) and library() is not None


def job_seconds(lengths, window1: int | None, window2: int | None,
                n_cores: int | None = None) -> float:
    """Estimated seconds of the host engine on ``lengths`` (``(n1, n2)`` of each pair) on
    ``n_cores`` cores (default: this process's), inf when a pair does not fit it
    (:data:`MAX_WORK`, :data:`MAX_BYTES`): what ``jaxrna interact --backend auto`` compares
    with :data:`SMALL_JOB_S` before JAX starts a backend.

    >>> job_seconds([(30, 45)] * 40, None, None, 16) < SMALL_JOB_S
    True
    >>> job_seconds([(3000, 3000)], None, None, 16)
    inf
    """
    total = 0.0
    for n1, n2 in lengths:
        steps = _steps(n1, n2, n1 if window1 is None else min(window1, n1),
                       n2 if window2 is None else min(window2, n2))
        if steps is None:
            return float("inf")
        total += steps
    return total / (STEPS_PER_S * (n_cores or cores()))


def _fill(prob, wm: np.ndarray, lib, pool=None, threads: int = 1):
    """Tables, window scores and best window of one problem (on a worker thread, or here
    with its outer spans split over ``threads`` calls on ``pool``)."""
    p = prob.plan
    u, t = encode(prob.outer), encode(prob.inner)
    wo, wi = p.l_outer - 1, p.l_inner - 1
    tab = tables(u, t, wm, wo, wi, lib, pool, threads)
    count_o, count_i = p.n_windows
    scores = tab.F[:count_o, wo, :count_i, wi]
    o0, q0 = best_window(scores, prob.outer_is_1)
    return tab, u, t, scores, o0, q0


def run_host(problems: Sequence, weights: WeightSet, with_pairs: bool = True,
             keep_windows: bool = False, workers: int | None = None, on_done=None) -> list:
    """Every problem on the host engine, results in input order (the C fills on ``workers``
    threads, default every core; tracebacks on this thread as the fills arrive, at most two
    per worker in flight). A run of fewer pairs than workers fills its pairs one after the
    other, each over every worker (the boxes of each outer span split between them)."""
    lib = library()
    if lib is None:
        raise RuntimeError("the interact host engine needs a C compiler")
    wm = np.asarray(weights.matrix(), np.int32)
    workers = max(1, min(workers or cores(), len(problems) or 1))
    largest = max((pair_bytes(p) for p in problems), default=0)
    if largest:                      # at most 2 tables a worker in flight, in half the memory
        from jaxrna.runtime import memory_bytes

        workers = max(1, min(workers, int(memory_bytes() or 1 << 34) // (4 * largest)))
    count("host engine pairs", len(problems))
    if counts().get("host engine threads", 0) < workers:
        count("host engine threads", workers - counts().get("host engine threads", 0))
    out = []
    if len(problems) < workers and workers > 1:          # few pairs: each on every core
        with ThreadPoolExecutor(workers) as pool:
            for prob in problems:
                with stage("device"):
                    tab, u, t, scores, o0, q0 = _fill(prob, wm, lib, pool, workers)
                out.append(_result(prob, weights, tab, u, t, scores, o0, q0, with_pairs,
                                   keep_windows))
                if on_done:
                    on_done(1)
        return out
    with ThreadPoolExecutor(workers) as pool:
        for prob, fut in submitted_in_order(pool, lambda prob: _fill(prob, wm, lib), problems,
                                            2 * workers):
            with stage("device"):           # the fill: the host engine's device time
                tab, u, t, scores, o0, q0 = fut.result()
            out.append(_result(prob, weights, tab, u, t, scores, o0, q0, with_pairs,
                               keep_windows))
            if on_done:
                on_done(1)
    return out


def _result(prob, weights, tab, u, t, scores, o0, q0, with_pairs: bool, keep_windows: bool):
    p = prob.plan
    box = HostBox(tab, u, t, o0, q0, p.l_outer, p.l_inner) if with_pairs else None
    s_o = int(tab.S1[o0, o0 + p.l_outer - 1])
    s_i = int(tab.S2[q0, q0 + p.l_inner - 1])
    return result_of(prob, weights, int(scores.max()), o0, q0, s_o, s_i,
                     scores if keep_windows else None, box)


__all__ = ["run_host", "wanted", "fits", "pair_bytes", "job_seconds", "engine_choice", "MAX_BYTES",
           "MAX_WORK", "STEPS_PER_S", "SMALL_JOB_S"]
