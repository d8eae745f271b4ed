"""The few length classes one run of a streaming engine uses, chunk by chunk (issue 26).

An engine that batches records by the energy model's length classes
(:func:`jaxrna.batching.energy_length_class`) compiles one program per class it meets (or a
few: the MFE engine's fill and traceback, :func:`jaxrna.energy.api.run_classes`). To bound
a run's programs whatever its mix of lengths, :class:`RunClasses` maps the classes of each chunk
of records onto at most ``budget`` classes for the whole run: a record is computed in the
smallest of the run's classes that holds it (a ladder class at least its own: the lengths stay
runtime values, so the results are the same, at the cost of padding).

The run reads its records a chunk at a time, so the classes are chosen chunk by chunk: a class
once used is kept (its program is compiled), and :func:`choose` picks the classes a chunk adds:

- a chunk whose classes fit in the budget keeps them all (exactly the classes of a run without
  a budget: no slowdown on ordinary inputs);
- else the set of added classes of least padded work for this chunk (``cost``), by an
  exhaustive search over the classes met and ``top`` (at most 2^9 subsets);
- while more records may follow (``final`` false), the run's classes must either leave one
  free or include ``top`` (the largest class a record admitted by the run can have), so a
  later record always has a class that holds it.

Why not :func:`jaxrna.class_budget.merge_to_budget`: it merges the classes of one known
collection; here classes already used by earlier chunks cannot be merged away (their programs
are compiled) and a class must be kept for records not yet read. On a single chunk the search
finds a set of no more work than the greedy joins (``tests/test_partition_classes.py``).

>>> run = RunClasses(top=2048, budget=2)
>>> run.serve([100, 200, 500], final=False)          # one class left free, or top kept
{128: 512, 256: 512, 512: 512}
>>> run.serve([900, 90], final=True), run.classes      # the last chunk: the free one
({1024: 1024, 128: 512}, [512, 1024])
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Callable, Iterable, Mapping

from jaxrna.batching import energy_length_class


def padded_work(padded: int, records: int) -> float:
    """The default cost of ``records`` records computed in class ``padded``: cubic in the
    padded length (work that runs over the whole padded class)."""
    return float(records) * float(padded) ** 3


def batch_work(rows_of: Callable[[int], int]) -> Callable[[int, int], float]:
    """A ``cost`` for :func:`choose`: ``records`` records of class ``padded`` computed in whole
    batches of ``rows_of(padded)`` rows (empty ones included), each as much work as the cube
    of the class (a fill that runs over the whole padded class).

    >>> batch_work(lambda padded: 8)(128, 5) == 8 * 128.0 ** 3
    True
    """
    def work(padded: int, records: int) -> float:
        rows = rows_of(padded)
        return float(-(-records // rows) * rows) * float(padded) ** 3

    return work


def top_class(limit: int, estimate: Callable[[int], int]) -> int | None:
    """The largest length class whose records fit in ``limit`` bytes by ``estimate`` (the bytes
    a record of that padded length needs; None: not even the first class fits).

    >>> top_class(1000, lambda padded: padded), top_class(10, lambda padded: padded)
    (512, None)
    """
    top, k = None, 1
    while True:
        padded = energy_length_class(k)
        if estimate(padded) > limit:
            return top
        top, k = padded, padded + 1


def serving(counts: Iterable[int], classes: Iterable[int]) -> dict[int, int]:
    """Each class of ``counts`` mapped to the smallest of ``classes`` that holds it (a class
    none holds is left out).

    >>> serving([128, 256, 1024], [256, 2048])
    {128: 256, 256: 256, 1024: 2048}
    """
    run = sorted(classes)
    out = {}
    for c in counts:
        holding = [s for s in run if s >= c]
        if holding:
            out[c] = holding[0]
    return out


def choose(counts: Mapping[int, int], opened: Iterable[int], budget: int, top: int,
           final: bool, cost: Callable[[int, int], float] = padded_work) -> tuple[int, ...]:
    """The classes a chunk adds to a run's ``opened`` ones (see the module docstring):
    ``counts[c]`` records of class ``c`` (each at most ``top``), at most ``budget`` classes in
    all; ``cost(class, records)``: the work of ``records`` records computed in ``class``.

    >>> choose({128: 5, 256: 1}, [], 4, 1024, final=False)
    (128, 256)
    >>> choose({128: 5, 256: 1, 512: 1, 1024: 1}, [], 4, 1024, final=False)
    (128, 256, 512, 1024)
    >>> choose({128: 5, 256: 1, 512: 1, 1024: 1}, [], 4, 2048, final=True)
    (128, 256, 512, 1024)
    >>> choose({128: 5, 256: 1, 512: 1, 1024: 1}, [], 4, 2048, final=False)
    (256, 512, 1024)
    """
    opened = sorted(set(opened))
    if budget < 1:
        raise ValueError(f"a run's class budget must be at least 1, not {budget}")
    met = sorted(c for c, k in counts.items() if k)
    if not met:
        return ()
    if met[-1] > top:
        raise ValueError(f"class {met[-1]} is above the run's largest class {top}")
    free = budget - len(opened)

    def admissible(added: tuple[int, ...]) -> bool:
        run = set(opened) | set(added)
        if len(added) > free or max(run, default=0) < met[-1]:
            return False
        return final or len(run) < budget or top in run

    plain = tuple(c for c in met if c not in opened)
    if admissible(plain):
        return plain
    candidates = sorted((set(met) | {top}) - set(opened))
    best = None
    for k in range(0, max(free, 0) + 1):
        for added in itertools.combinations(candidates, k):
            if not admissible(added):
                continue
            load: Counter = Counter()
            for c, s in serving(met, set(opened) | set(added)).items():
                load[s] += counts[c]
            key = (sum(cost(s, n) for s, n in sorted(load.items())), k, added)
            if best is None or key < best:
                best = key
    if best is None:            # only where an earlier chunk broke the rule (a caller's bug)
        raise ValueError(f"no class of the run {opened} (budget {budget}) holds class {met[-1]}")
    return best[2]


class RunClasses:
    """The classes of one run, chosen chunk by chunk (:func:`choose`): at most ``budget``
    classes of records of up to ``top``'s class; ``cost`` as :func:`choose`'s."""

    def __init__(self, top: int, budget: int, cost: Callable[[int, int], float] = padded_work):
        self.top, self.budget, self.cost = top, budget, cost
        self.classes: list[int] = []

    def serve(self, lengths: Iterable[int], final: bool) -> dict[int, int]:
        """``{class: the run's class that computes it}`` for the non-empty records of
        ``lengths`` (a chunk; ``final``: no record follows it)."""
        counts = Counter(energy_length_class(n) for n in lengths if n)
        added = choose(counts, self.classes, self.budget, self.top, final, self.cost)
        self.classes = sorted(set(self.classes) | set(added))
        return serving(counts, self.classes)

    def length_class(self, lengths: Iterable[int], final: bool) -> Callable[[int], int]:
        """:meth:`serve` as a function: the padded length a record of ``n`` nt of this chunk
        is computed at (an empty record: the run's smallest class).

        >>> run = RunClasses(top=2048, budget=2)
        >>> at = run.length_class([100, 0, 500], final=True)
        >>> at(100), at(0), at(500)
        (128, 128, 512)
        """
        lengths = list(lengths)
        serve = self.serve(lengths, final)
        low = self.classes[0] if self.classes else energy_length_class(0)

        def at(n: int) -> int:
            return serve[energy_length_class(n)] if n else low

        return at


__all__ = ["RunClasses", "batch_work", "choose", "serving", "padded_work", "top_class"]
