"""The sizes of a target scan's device arrays, rounded so that few programs are compiled.

miRNA heights are rounded up to :data:`ROW_STEP` rows and mapped to at most
:data:`MAX_HEIGHTS` per run (:func:`height_classes`); a chunk of targets is sized by its
*class*, its nucleotides padded to a power of two from :data:`MIN_CHUNK_CLASS`
(:func:`bucket`), with :data:`LANE_COLUMNS`-column lanes. See :mod:`jaxrna.targets.engine`.

>>> round_up(21, ROW_STEP), bucket(70_000, MIN_CHUNK_CLASS), lanes_bucket(9)
(24, 131072, 64)
"""

from __future__ import annotations

ROW_STEP = 8          # miRNA heights are padded to multiples of this (few compiled shapes)
OVERLAP_STEP = 32     # lane overlaps are rounded up to multiples of this
SEGMENT_MIN = 128     # segment lengths are powers of two from this
MAX_LANES = 32768
MIN_LANE = 512
#: Chunks are sized in classes: their nucleotides padded to a power of two from this (the
#: device arrays' shapes follow from the class, the chunk's own sizes are traced values)
MIN_CHUNK_CLASS = 1 << 16
#: Columns per lane of a full class: a class of C nucleotides gets C / LANE_COLUMNS lanes
#: (at most ``max_lanes``), so its lanes are 512-1024 columns long, as MIN_LANE asks
LANE_COLUMNS = 1024
#: Target records up to this long are the ones a run's chunk class is sized for (a chunk closes
#: with the record that reaches the chunk size, so a full chunk holds up to this much more)
RECORD_NT = 10_240
#: miRNA heights (lengths rounded up to ROW_STEP) are mapped to at most this many per run
#: (the most common one and the tallest; the miRNAs between are padded to the tallest)
MAX_HEIGHTS = 2


def height_classes(heights: list[int], limit: int = MAX_HEIGHTS) -> dict[int, int]:
    """Map each height to the height it is scanned with: itself where the run has at most
    ``limit`` distinct heights, else one of ``limit`` kept heights (the tallest, then the most
    common ones) at least as tall (padding rows above a miRNA are inert: the same answer).

    >>> height_classes([24, 24, 32]), height_classes([24, 24, 32, 40, 24])
    ({24: 24, 32: 32}, {24: 24, 32: 40, 40: 40})
    """
    distinct = sorted(set(heights))
    if len(distinct) <= limit:
        return {h: h for h in distinct}
    counts = {h: heights.count(h) for h in distinct}
    kept = {distinct[-1]} | set(sorted(distinct[:-1], key=lambda h: (-counts[h], h))[:limit - 1])
    return {h: min(k for k in kept if k >= h) for h in distinct}


def full_chunk_class(chunk_nt: int, longest: int = 0) -> int:
    """The class of the largest chunk of a run that closes its chunks once they hold
    ``chunk_nt`` nucleotides (with the record that reaches it), for records of up to
    ``max(longest, RECORD_NT)`` nt: a run whose first chunk is full takes it from the start
    (:meth:`jaxrna.targets.engine.Engine.expect_chunks`), so its later chunks, full or not,
    fit in the same class.

    >>> [full_chunk_class(n) >> 16 for n in (65_536, 100_000, 64_000_000)]
    [2, 2, 1024]
    >>> full_chunk_class(64_000_000, longest=5_000_000) >> 16
    2048
    """
    room = max(int(longest), RECORD_NT)
    return bucket(int(chunk_nt) + room - 1, MIN_CHUNK_CLASS)


def round_up(x: int, step: int) -> int:
    """``x`` rounded up to a multiple of ``step``."""
    return -(-x // step) * step


def bucket(x: int, minimum: int, factor: int = 2) -> int:
    """The smallest ``minimum * factor**k`` that is at least ``x`` (few compiled shapes)."""
    b = max(int(minimum), 1)
    while b < x:
        b *= factor
    return b


def pow2(x: int) -> int:
    """The smallest power of two that is at least ``x``."""
    p = 1
    while p < x:
        p *= 2
    return p


def pow2_floor(x: int) -> int:
    """The largest power of two that is at most ``x`` (1 for ``x`` <= 1)."""
    return 1 << (max(int(x), 1).bit_length() - 1)


def lanes_bucket(x: int) -> int:
    """Lane counts are powers of 8 up to MAX_LANES (few compiled shapes)."""
    p = 1
    while p < x and p < MAX_LANES:
        p *= 8
    return min(p, MAX_LANES)
