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
