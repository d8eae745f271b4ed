"""The batches of ``jaxrna align --posterior`` (:func:`jaxrna.align.partition.posterior_records`):
each pair's padded class (:func:`batch_class`, few shapes whatever the lengths), a run's class
pairs merged to at most :data:`PROGRAM_BUDGET` (:func:`within_budget`), a fixed row count per
class (:func:`class_rows`): the programs a run compiles are known from its lengths, and other
lengths, scores, gaps and temperatures compile nothing new.
"""

from __future__ import annotations

from typing import Callable


#: Substitution matrices are passed padded to this side (letters' codes index them): one
#: argument shape for every scheme (NUC.4.4, match/mismatch, protein matrices).
MATRIX_SIDE = 32
#: On a CPU a batch holds at most this many padded cells (rows x h x w): an empty row costs
#: what a full one does, and a CPU gains nothing from wide batches.
CPU_BATCH_CELLS = 1 << 18


#: A run's posterior programs (per mode): the class pairs it meets are merged down to this many.
PROGRAM_BUDGET = 8


def within_budget(groups: dict, limit: int, itemsize: int,
                  bytes_of: Callable[[int, int, int], int] | None = None) -> dict:
    """``groups`` (class pair -> pair indices) merged onto at most :data:`PROGRAM_BUDGET`
    class pairs (:func:`jaxrna.class_budget.merge_to_budget`: the joins that add the fewest
    padded cells; a pair in a larger class gets the same result). A join whose pairs need more
    than ``limit`` bytes each (``bytes_of(h, w, itemsize)``:
    :func:`jaxrna.align.partition.posterior_bytes`) is not made (the run then keeps more
    programs); ``limit`` 0: no limit.

    >>> g = {(64, 64 * k): [k] for k in (1, 2, 4, 8, 16, 32, 64, 128, 256)}
    >>> sorted(within_budget(g, 0, 4))[-2:], len(within_budget(g, 0, 4))
    ([(64, 8192), (64, 16384)], 8)
    """
    from jaxrna.class_budget import merge_to_budget

    if len(groups) <= PROGRAM_BUDGET:
        return groups
    order = sorted(groups)

    def cost(c) -> float:
        if limit and bytes_of(c[0], c[1], itemsize) > limit:
            return float(1 << 62)            # never chosen while another join remains
        return float(c[0] * c[1])

    serve = merge_to_budget({c: len(groups[c]) for c in order}, PROGRAM_BUDGET,
                            join=lambda a, b: (max(a[0], b[0]), max(a[1], b[1])), cost=cost)
    merged: dict = {}
    for c in order:
        target = serve[c]
        if limit and bytes_of(target[0], target[1], itemsize) > limit:
            target = c                       # too large once joined: its own class
        merged.setdefault(target, []).extend(groups[c])
    for members in merged.values():
        members.sort()                       # input order within a class
    return merged


def batch_class(n: int) -> int:
    """The padded length of a sequence of ``n`` in a posterior batch: powers of two from 64 to
    4,096, then multiples of 1,024 (:func:`jaxrna.batching.bucket_length_coarse`): few shapes,
    so few programs, whatever the mix of lengths.

    >>> [batch_class(n) for n in (1, 64, 65, 300, 5000)]
    [64, 64, 128, 512, 5120]
    """
    from jaxrna.batching import bucket_length_coarse

    return bucket_length_coarse(n, base=64)


def class_rows(h: int, w: int, cap: int, platform: str) -> int:
    """The fixed row count of the ``h`` x ``w`` class: a power of two, at most ``cap`` (memory,
    :data:`MAX_BATCH`) and on a CPU at most :data:`CPU_BATCH_CELLS` cells. Every batch of the
    class has these rows (the last one topped up with empty rows): one program per class.

    >>> class_rows(64, 64, 256, "cpu"), class_rows(64, 64, 256, "gpu"), class_rows(1024, 2048, 3, "gpu")
    (64, 256, 2)
    """
    if platform == "cpu":
        cap = min(cap, max(1, CPU_BATCH_CELLS // (h * w)))
    return 1 << (max(1, cap).bit_length() - 1)
