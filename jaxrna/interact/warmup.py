"""Prepare every program ``jaxrna interact`` can use, before a job (issue 26's warm-up).

A run compiles one program per geometry class it meets (:func:`jaxrna.interact.windows.plan`:
padded lengths on fixed ladders, bands that depend on a window only in large classes), at most
8 (a run meeting more merges classes: :mod:`jaxrna.interact.classes`), for its traceback /
all-windows switch; true lengths, windows and weights are runtime values. So the programs of
every input up to ``max_length`` nt are known in advance: :func:`run_classes` plans one
synthetic pair per class (class by class, through the CLI's own planning code) and adds every
join of classes a run may merge them into; :func:`warm` compiles each geometry's program, or
loads it from the cache, without running it. Classes whose tables would not fit in the
backend's memory are skipped (the CLI refuses such pairs, and merges into none), and on a CPU
the classes whose every pair the host engine takes (:mod:`jaxrna.interact.host_engine`; with
``JAXRNA_INTERACT_ENGINE=device``, none).

Options that select other programs: ``window1``/``window2`` (only for strands longer than
:data:`~jaxrna.interact.windows.FULL_BAND` nt, and only through
:func:`~jaxrna.interact.windows.window_class`), ``with_pairs`` (False = ``--score-only``),
``keep_windows`` (``--all-windows``), ``outer`` (``"auto"``: the shorter strand is the grid),
``max_bytes`` (``--max-memory``).

>>> warm(max_length=20) >= 1       # doctest: +SKIP
True
"""

from __future__ import annotations

from dataclasses import replace

from jaxrna.interact.windows import INNER_LADDER, INNER_STEP, OUTER_LARGE, OUTER_SMALL, \
    OUTER_TINY, padded_inner


def _lengths(max_length: int) -> tuple[list[int], list[int]]:
    """Candidate strand lengths that reach every inner and outer class up to ``max_length``."""
    inner = {max_length}
    top = padded_inner(max_length)
    rungs = list(INNER_LADDER)
    while rungs[-1] < top:
        rungs.append(max(rungs[-1] + INNER_STEP, -(-(rungs[-1] + 1) // INNER_STEP) * INNER_STEP))
    inner.update(r - 1 for r in rungs if r - 1 <= max_length)
    outer = {max_length}
    steps = set(OUTER_TINY) | set(OUTER_SMALL) | set(OUTER_LARGE)
    v = max(steps)
    while v < max_length:
        v *= 2
        steps.add(v)
    for r in steps:
        outer.update(x for x in (r, r + 1) if x <= max_length)
    return sorted(x for x in inner if x >= 1), sorted(x for x in outer if x >= 1)


def run_classes(backend: str = "cpu", max_length: int = 10_000, window1: int | None = None,
                window2: int | None = None, outer: str = "auto", max_bytes: int | None = None,
                tile: int | None = None, host_engine=None) -> dict:
    """Every geometry a run of pairs up to ``max_length`` nt with these options can compile,
    each with a pair of it: ``{geometry: problem}``. The classes of single pairs (one synthetic
    pair per class, through the CLI's own planning code) and every join of them a run may merge
    them into (:func:`jaxrna.interact.classes.closure`), less those whose tables would not fit
    (the CLI refuses such pairs, and never merges into such a class) and, with ``host_engine``
    (a predicate: the pair runs on the host engine), those whose every pair it takes."""
    from jaxrna.interact.api import check_memory, make_problem, memory_limit
    from jaxrna.interact.classes import closure, geometry, join
    from jaxrna.io.errors import ResourceError
    from jaxrna.io.fasta import Record

    inner, outer_lengths = _lengths(max_length)
    base: dict = {}
    for m in inner:
        for n in outer_lengths:
            if outer == "auto" and n > m:
                continue
            for w1, w2 in ((window1, window2), (window2, window1)) if outer == "auto" else \
                    ((window1, window2),):
                prob = make_problem(Record("a", "A" * n), Record("b", "A" * m), w1, w2,
                                    "1" if outer == "auto" else outer, tile=tile,
                                    backend=backend)
                if prob.key in base:
                    continue
                try:
                    check_memory(prob, max_bytes, backend)
                except ResourceError:
                    continue
                base[prob.key] = prob
    out: dict = {}
    for key in sorted(closure(base, memory_limit(max_bytes, backend), backend, tile)):
        geo = geometry(key, backend, tile)
        if geo in out:
            continue
        members = [p for k, p in sorted(base.items()) if join(k, key) == key]
        if host_engine and all(host_engine(p) for p in members):
            continue                      # every pair of the class runs on the host engine
        # a pair the class holds (any: lengths and windows are runtime values)
        out[geo] = replace(members[0], plan=replace(members[0].plan, geo=geo))
    return out


def warm(backend: str = "cpu", max_length: int = 10_000, window1: int | None = None,
         window2: int | None = None, with_pairs: bool = True, keep_windows: bool = False,
         outer: str = "auto", max_bytes: int | None = None, batch_budget: int = 1 << 30,
         **_ignored) -> int:
    """Compile (or load) every ``interact`` program for pairs of strands up to ``max_length``
    nt with these options on ``backend`` (:func:`run_classes`); returns how many programs were
    prepared. Numeric options (weights, window lengths within a class) need no separate
    warm-up."""
    import jax
    import numpy as np

    from jaxrna import programs
    from jaxrna.interact.api import prepare, problem_batches
    from jaxrna.runtime import enable_compilation_cache
    from jaxrna.weights import parse_weights

    from jaxrna.interact import host_engine

    enable_compilation_cache()
    # on a CPU the host engine takes every pair it fits (jaxrna.interact.host_engine): only the
    # classes of larger pairs need the device engine's programs
    on_host = (lambda p: host_engine.wanted(p, "auto", backend)) if backend == "cpu" else None
    seen = run_classes(backend, max_length, window1, window2, outer, max_bytes,
                       host_engine=on_host)
    wm = np.asarray(parse_weights("bpmax").matrix(), np.int32)
    with jax.default_device(jax.devices(backend)[0]):
        device = programs.default_device()
        problems = list(seen.values())
        for batch in problem_batches(problems, batch_budget):
            prepare(problems, (batch[0], batch[1], batch[2][:1]), wm, with_pairs, keep_windows,
                    device)
    return len(seen)


__all__ = ["run_classes", "warm"]
