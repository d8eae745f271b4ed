"""The static shape of one BPMax fill (:class:`Geometry`), apart from the fill itself so that
planning a run imports neither the fill nor its kernels (a warm CLI run loads its compiled
program and never traces them). :mod:`jaxrna.interact.recurrence` documents the layout.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Geometry:
    """Static shape of one fill: padded lengths, bands, tile size and loop blocking (a class of
    problems: :func:`jaxrna.interact.windows.plan`; true lengths and windows are runtime values).

    ``n_outer``: padded outer length; ``n_inner``: padded inner length, a multiple of
    ``tile`` and at least the true length + 1 (end-exclusive columns reach ``M``);
    ``w_outer``/``w_inner``: the largest span ``j - i`` the table can hold on each strand (a
    window's span is at most this; the fill stops at the batch's own spans). ``sweep``: how
    H1/H2 are reduced (see :func:`~jaxrna.interact.recurrence.inner_sweep`; ``"loop"`` for CPU, ``"reduce"`` for GPU).
    ``kernel``: the max-plus backend (:func:`~jaxrna.kernels.tropical.maxplus_update`; None
    picks the Pallas kernel on GPU and pure JAX elsewhere). ``fused``: all splits of an outer
    diagonal in one Pallas kernel (:mod:`jaxrna.kernels.bpmax_splits`; GPU, or interpret mode
    with ``kernel="interpret"``) instead of one max-plus product per split and tile offset.
    """

    n_outer: int
    n_inner: int
    w_outer: int
    w_inner: int
    tile: int = 32
    outer_blocks: int = 4
    inner_blocks: int = 8
    sweep: str = "loop"
    kernel: str | None = None
    fused: bool = False

    def __post_init__(self):
        if self.n_inner % self.tile:
            raise ValueError(f"inner length {self.n_inner} is not a multiple of the tile {self.tile}")
        if not (0 <= self.w_outer < self.n_outer and 0 <= self.w_inner < self.n_inner):
            raise ValueError("windows must satisfy 0 <= w < padded length")
        if self.sweep not in ("loop", "reduce"):
            raise ValueError(f"sweep must be 'loop' or 'reduce', not {self.sweep!r}")

    @property
    def nb(self) -> int:
        """Tile rows of an inner matrix."""
        return self.n_inner // self.tile

    @property
    def ne(self) -> int:
        """Tiles kept per tile row (offsets ``f = 0 .. ne - 1``)."""
        return min((self.w_inner + self.tile) // self.tile, self.nb - 1) + 1

    @property
    def rows(self) -> int:
        """Stored tile rows: ``nb`` plus NEG rows so ``I + f`` never leaves the array."""
        return self.nb + self.ne - 1

    @property
    def wb(self) -> int:
        """Inner diagonals kept (``e = 0 .. w_inner``)."""
        return self.w_inner + 1

    @property
    def n_cells(self) -> int:
        """Outer cells ``(i1, j1)`` with ``j1 - i1 <= w_outer``."""
        return self.offset(self.w_outer + 1)

    def offset(self, d):
        """Index of the first cell of outer diagonal ``d`` (works on traced ints too)."""
        return d * self.n_outer - (d * (d - 1)) // 2

    def table_shape(self) -> tuple[int, ...]:
        t = self.tile
        return (self.n_cells + self.n_outer, self.ne, self.rows, t, t)

    def table_bytes(self) -> int:
        n = 4
        for s in self.table_shape():
            n *= s
        return n

    def work_bytes(self) -> int:
        """Bytes of the per-diagonal temporaries (accumulators, operands, sweep copies): sized so
        that estimate + table matched the peak resident memory of a CPU run (8.1 GB at 23 x
        20,000 nt, window 128)."""
        t = self.tile
        matrix = self.ne * self.rows * t * t * 4
        band = (2 * self.wb + self.tile) * (self.n_inner + self.wb) * 4
        return self.n_outer * (6 * matrix + 4 * band)


__all__ = ["Geometry"]
