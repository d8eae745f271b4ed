"""Length buckets and batch plans, so many sequences compile a handful of shapes.

Padded lengths come from a fixed ladder (multiples of 64 growing by about 1.5x), and batch
sizes are powers of two: a file of 1,000 sequences of mixed lengths compiles a few programs.

>>> bucket_length(50), bucket_length(65), bucket_length(500), bucket_length(3000), bucket_length(5000)
(64, 128, 512, 3072, 5120)
>>> [len(b) for b in plan_batches([10, 500, 20, 700], max_batch=2)]
[2, 1, 1]

On a GPU, where a batch's time is set by its chain of dependent steps rather than by its
work, a coarser ladder (powers of two from 128) and full batches keep a job to a few programs:

>>> [bucket_length_coarse(n) for n in (50, 129, 500, 5000)]
[128, 256, 512, 5120]
>>> batch_rows(3, 64), batch_rows(3, 64, fill=True), batch_rows(1000, 64), batch_rows(0, 64)
(4, 64, 64, 1)

Programs whose loops run to a runtime length (issue 26) take still fewer, fixed classes:
eight up to 10,240 nt (:func:`length_class`).

>>> [length_class(n) for n in (20, 300, 2000, 5000, 10_000, 12_000)]
[256, 512, 2048, 6144, 10240, 12288]
>>> length_class_ladder(10_000)
[256, 512, 1024, 2048, 4096, 6144, 8192, 10240]
"""

from __future__ import annotations

from typing import Sequence


def bucket_ladder(limit: int, base: int = 64) -> list[int]:
    out, v = [base], base
    while v < limit:
        nxt = v * 2 if v < 2 * base else (v * 3 // 2 if (v & (v - 1)) == 0 else v * 4 // 3)
        v = -(-nxt // base) * base
        out.append(v)
    return out


def bucket_length(n: int, base: int = 64, coarse_above: int = 4096) -> int:
    """The padded length used for a sequence of length ``n``.

    Up to ``coarse_above`` the ladder; beyond it, the next multiple of ``coarse_above // 4``,
    so a single long sequence is not padded by up to 50%.
    """
    if n > coarse_above:
        step = coarse_above // 4
        return -(-n // step) * step
    for v in bucket_ladder(max(n, 1), base):
        if v >= n:
            return v
    raise AssertionError("unreachable")


def bucket_length_coarse(n: int, base: int = 128, coarse_above: int = 4096) -> int:
    """Padded length on the coarse ladder: powers of two from ``base`` up to
    ``coarse_above``, then multiples of ``coarse_above // 4`` (as :func:`bucket_length`)."""
    if n > coarse_above:
        return bucket_length(n, base, coarse_above)
    v = base
    while v < n:
        v *= 2
    return v


#: Padded lengths of the Turner energy model's programs (:func:`energy_length_class`): powers
#: of two from 128 to 4,096, then 6,144 and 10,240, so any mix of lengths up to 10,240 nt
#: compiles at most 8 programs (one per class, with a fixed row count).
ENERGY_LENGTH_CLASSES = (128, 256, 512, 1024, 2048, 4096, 6144, 10240)


def energy_length_class(n: int) -> int:
    """The padded length of the energy model's program for a sequence of ``n`` nt: the
    smallest of :data:`ENERGY_LENGTH_CLASSES` that holds it; beyond the last, the next
    multiple of 4,096 (one more program per 4,096 nt).

    >>> [energy_length_class(n) for n in (0, 50, 129, 500, 4097, 10000, 10241)]
    [128, 128, 256, 512, 6144, 10240, 12288]
    """
    return _class_on(n, ENERGY_LENGTH_CLASSES)


#: The classes of :func:`length_class` up to 10,240 nt.
LENGTH_CLASSES = (256, 512, 1024, 2048, 4096, 6144, 8192, 10240)


def length_class(n: int) -> int:
    """The padded length (class) of a sequence of ``n`` nt for programs that run to the
    runtime length inside their class: :data:`LENGTH_CLASSES` (powers of two from 256 to
    4,096, then steps of 2,048 to 10,240: eight classes), beyond them multiples of 4,096."""
    return _class_on(n, LENGTH_CLASSES)


def _class_on(n: int, classes: tuple[int, ...], step: int = 4096) -> int:
    """The smallest of ``classes`` that holds ``n``; beyond the last, the next multiple of
    ``step`` (one more class per ``step`` nt)."""
    for v in classes:
        if n <= v:
            return v
    return -(-n // step) * step


def length_class_ladder(limit: int) -> list[int]:
    """Every class of :func:`length_class` a sequence of at most ``limit`` nt can take."""
    top = length_class(max(limit, 1))
    return [v for v in LENGTH_CLASSES if v <= top] + list(range(12288, top + 1, 4096))


def batch_rows(count: int, cap: int, fill: bool = False) -> int:
    """Rows of a batch holding ``count`` items: a power of two, at most the largest power of
    two <= ``cap`` (at least 1); ``fill`` takes that maximum whatever the count (one batch
    shape per padded length)."""
    top = 1
    while top * 2 <= max(cap, 1):
        top *= 2
    if fill:
        return top
    return min(top, batch_size_bucket(max(count, 1)))


def batch_size_bucket(count: int) -> int:
    """Round a batch size up to a power of two (fewer compiled shapes)."""
    b = 1
    while b < count:
        b *= 2
    return b


def plan_batches(lengths: Sequence[int], max_batch: int | None = None,
                 bytes_per_item=None, budget: int | None = None,
                 base: int = 64) -> list[list[int]]:
    """Group indices of ``lengths`` by bucket into batches (each batch one padded length).

    ``max_batch`` caps the batch size; ``bytes_per_item(padded_length)`` with ``budget`` caps
    it by memory. Batches are returned in order of their first member.
    """
    groups: dict[int, list[int]] = {}
    for idx, n in enumerate(lengths):
        groups.setdefault(bucket_length(n, base), []).append(idx)
    batches = []
    for padded, members in groups.items():
        cap = max_batch or len(members)
        if bytes_per_item is not None and budget is not None:
            cap = max(1, min(cap, budget // max(1, bytes_per_item(padded))))
        for s in range(0, len(members), cap):
            batches.append(members[s:s + cap])
    batches.sort(key=lambda b: b[0])
    return batches


def map_rows(fn, in_axes=0):
    """``jax.vmap(fn, in_axes)`` over the rows of a batch (each ``in_axes`` entry 0 or None),
    except that a batch of one row runs ``fn`` on that row and adds the row axis to its
    outputs: the same values, from a program whose tracing and compilation skip ``vmap``'s
    batching of ``fn``'s loops (interact's program of one 23 x 20,000 nt pair: compiled in
    2.9-3.1 s instead of 3.6-3.9 on an H200, and ran no slower; BENCHMARKS.md, twenty-fifth
    session). Long sequences are where batches have one row.

    >>> import jax.numpy as jnp
    >>> f = map_rows(lambda x, k: x * k, in_axes=(0, None))
    >>> f(jnp.arange(6).reshape(2, 3), 2).tolist(), f(jnp.arange(3).reshape(1, 3), 2).tolist()
    ([[0, 2, 4], [6, 8, 10]], [[0, 2, 4]])
    """

    def mapped(*args):
        import jax

        axes = tuple(in_axes) if isinstance(in_axes, (tuple, list)) else (in_axes,) * len(args)
        if len(axes) != len(args) or any(a not in (0, None) for a in axes):
            raise ValueError(f"map_rows takes in_axes of 0 or None per argument, not {in_axes!r}")
        sizes = {leaf.shape[0] for arg, axis in zip(args, axes) if axis == 0
                 for leaf in jax.tree_util.tree_leaves(arg)}
        if sizes != {1}:
            return jax.vmap(fn, in_axes=axes)(*args)
        rows = [jax.tree_util.tree_map(lambda x: x[0], arg) if axis == 0 else arg
                for arg, axis in zip(args, axes)]
        return jax.tree_util.tree_map(lambda x: x[None], fn(*rows))

    return mapped
