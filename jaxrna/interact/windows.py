"""The windowed (banded) layout: planning a fill, its memory, and reading windows back.

A *problem* is one pair of strands in internal orientation: an outer strand (the matrices'
grid) and an inner strand (the matrices), each with a window length ``L`` (span ``W = L - 1``;
a strand without a window has ``L`` = its length). :func:`plan` picks the padded geometry
(:class:`~jaxrna.interact.recurrence.Geometry`): only the band of each matrix is allocated
(``ne`` tiles per tile row), and only outer cells within the outer window.

Windows are reported for every full window start ``(o, q)`` (``o`` on the outer strand, ``q``
on the inner): ``F(o, o + W_o, q, q + W_i)``. A window cut short by the strand's end is a
sub-box of a full one, so its score is never larger; the best full window is the spec's best
window.

>>> p = plan(23, 20000, None, 128)           # strand 1 whole: filled to its padded 24
>>> (p.geo.w_outer, p.geo.w_inner, p.geo.tile, p.geo.ne, p.n_windows)
(23, 127, 32, 5, (1, 19873))
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from jaxrna.interact.geometry import Geometry


def round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def choose_tile(w_inner: int, backend: str = "cpu") -> int:
    """Tile size for a band of ``w_inner + 1`` diagonals: small bands waste less with small
    tiles; measured best for a band of 128: 32 on CPU (XLA), 16 on an H200 (Pallas)."""
    if w_inner < 16:
        return 8
    if w_inner < 48 or backend == "gpu":
        return 16
    return 32


#: Padded inner lengths (issue 26): a strand of ``m`` nt is padded to the first class of at
#: least ``m + 1`` (end-exclusive columns reach ``m``); past the ladder, multiples of
#: :data:`INNER_STEP`. Up to 10,000 nt that is 10 classes (8 up to 4,095 nt).
INNER_LADDER = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
INNER_STEP = 4096
#: Inner classes up to this size keep the whole band whatever the window: a window there is a
#: traced bound on the span (cells beyond it are never filled), not a shape.
FULL_BAND = 256
#: Padded outer lengths beside an inner class of 32 (one class: the work is tiny), and beside
#: the other inner classes of at most :data:`FULL_BAND`; then powers of two.
OUTER_TINY = (32, 64, 128, 256)
OUTER_SMALL = (16, 32, 64, 128, 256)
#: Padded outer lengths beside a long inner strand (the grid's matrices are large: padding
#: costs), then powers of two.
OUTER_LARGE = (8, 16, 24, 32, 64, 128, 256)


def _ladder(n: int, ladder: tuple[int, ...], step: int | None = None) -> int:
    for v in ladder:
        if v >= n:
            return v
    if step:
        return round_up(n, step)
    v = ladder[-1]
    while v < n:
        v *= 2
    return v


def padded_inner(m: int, tile: int = 16) -> int:
    """The inner class of an ``m``-nt strand: at least ``m + 1``, on :data:`INNER_LADDER`.

    >>> [padded_inner(m) for m in (1, 31, 63, 64, 300, 1023, 5000, 20000)]
    [32, 32, 64, 128, 512, 1024, 8192, 20480]
    """
    return round_up(_ladder(m + 1, INNER_LADDER, INNER_STEP), tile)


def padded_outer(n: int, n_inner: int = 0) -> int:
    """The outer class of an ``n``-nt strand beside an inner class of ``n_inner``.

    >>> padded_outer(5, 32), padded_outer(5, 64), padded_outer(23, 20480), padded_outer(100, 20480)
    (32, 16, 24, 128)
    """
    ladder = OUTER_TINY if n_inner <= 32 else OUTER_SMALL if n_inner <= FULL_BAND else OUTER_LARGE
    return _ladder(max(n, 1), ladder)


def window_class(length: int) -> int:
    """Band class of a window of ``length`` nt (a power of two, at least 16): the band the
    table allocates for a windowed strand of a large class; the window itself is traced."""
    v = 16
    while v < length:
        v *= 2
    return v


@dataclass(frozen=True)
class Plan:
    """One problem: true lengths, window lengths and the padded geometry."""

    n_outer: int
    n_inner: int
    l_outer: int
    l_inner: int
    geo: Geometry

    @property
    def w_outer(self) -> int:
        return self.l_outer - 1

    @property
    def w_inner(self) -> int:
        return self.l_inner - 1

    @property
    def n_windows(self) -> tuple[int, int]:
        return self.n_outer - self.l_outer + 1, self.n_inner - self.l_inner + 1

    def bytes_needed(self) -> int:
        return self.geo.table_bytes() + self.geo.work_bytes()


#: Outer-diagonal groups of a large fill on GPU and on CPU (:func:`plan`). Each group is one
#: more copy of the diagonal's body in the program (on GPU: the split kernel and the inner
#: sweep); a group's batch is the matrices of its first diagonal, so fewer groups compute more
#: padding in the inner sweep (the split kernel skips it).
OUTER_BLOCKS = {"gpu": 1, "cpu": 4}
#: Inner-diagonal groups of the GPU's reduce sweep: each is one more loop in the program; the
#: sweep reads ``(e1 - e0)(e1 - 1)`` rows per group ``[e0, e1)``.
INNER_BLOCKS = {"gpu": 4, "cpu": 8}


def plan(n_outer: int, n_inner: int, l_outer: int | None = None, l_inner: int | None = None,
         tile: int | None = None, backend: str = "cpu", outer_blocks: int | None = None,
         inner_blocks: int | None = None, fused: bool | None = None) -> Plan:
    """Geometry for strands of ``n_outer`` and ``n_inner`` nt with windows ``l_outer``/``l_inner``
    (None = the whole strand), to run on ``backend`` (``"cpu"`` or ``"gpu"``: the H1/H2 sweep
    and the tile size follow it).

    The geometry is a *class* (issue 26): padded lengths on the ladders above
    (:func:`padded_outer`, :func:`padded_inner`) and bands that depend on the window only
    through :func:`window_class`, and only in large classes (inner > :data:`FULL_BAND`, outer
    > 64). True lengths and windows are runtime values of the program (``info`` and the batch's
    spans, :mod:`jaxrna.interact.program`), so pairs of many lengths and any windows share a
    class's one program (and a run meeting more than 8 classes serves them by at most 8 larger
    ones: :mod:`jaxrna.interact.classes`). Windowed long strands stay linear in their length: the band of a
    window of ``L`` nt costs at most ``window_class(L) < 2 L`` (for ``L >= 16``) diagonals. ``outer_blocks`` (None =
    automatic) cuts the outer diagonals into groups with their own batch size: less work on
    large problems, more to compile (:data:`OUTER_BLOCKS`); ``inner_blocks`` (None =
    :data:`INNER_BLOCKS`) likewise for the inner sweep. ``fused`` (None = on GPU): all splits of
    an outer diagonal in one Pallas kernel."""
    lo = n_outer if l_outer is None else min(l_outer, n_outer)
    li = n_inner if l_inner is None else min(l_inner, n_inner)
    np_i = padded_inner(n_inner)
    np_o = padded_outer(n_outer, np_i)
    # the band a class allocates: whole in small classes (a window there is only a traced bound
    # on the span), else the window's class (memory linear in the strand, not quadratic)
    w_o = np_o - 1 if l_outer is None or np_o <= 64 else \
        min(window_class(l_outer), np_o) - 1
    w_i = np_i - 1 if l_inner is None or np_i <= FULL_BAND else min(window_class(l_inner), np_i) - 1
    if tile is None:
        tile = choose_tile(w_i, backend)
    np_i = round_up(np_i, tile)
    kind = "gpu" if backend == "gpu" else "cpu"
    if outer_blocks is None:
        outer_blocks = 1 if np_o * np_i * (w_i + 1) < 1 << 20 else OUTER_BLOCKS[kind]
    if inner_blocks is None:
        inner_blocks = INNER_BLOCKS[kind]
    geo = Geometry(n_outer=np_o, n_inner=np_i, w_outer=w_o, w_inner=w_i, tile=tile,
                   outer_blocks=outer_blocks, inner_blocks=inner_blocks,
                   sweep="reduce" if backend == "gpu" else "loop",
                   fused=backend == "gpu" if fused is None else fused)
    return Plan(n_outer=n_outer, n_inner=n_inner, l_outer=lo, l_inner=li, geo=geo)


# ---- reading the table ---------------------------------------------------------------------

def cell_index(geo: Geometry, i1, j1, i2, j2):
    """Index tuple into the table for cells ``F(i1, j1, i2, j2)`` (NumPy or JAX ints, broadcast).

    The caller keeps ``j1 - i1 <= w_outer`` and ``0 <= j2 - i2 <= w_inner``.
    """
    t = geo.tile
    jp = j2 + 1
    return (geo.offset(j1 - i1) + i1, jp // t - i2 // t, i2 // t, i2 % t, jp % t)


def _window_scores(table, geo, w_outer, w_inner, count_outer, count_inner):
    import jax.numpy as jnp

    o = jnp.arange(count_outer)[:, None]
    q = jnp.arange(count_inner)[None, :]
    return table[cell_index(geo, o, o + w_outer, q, q + w_inner)]


@lru_cache(maxsize=1)
def _window_scores_jitted():
    import jax

    return jax.jit(_window_scores, static_argnames=("geo", "w_outer", "w_inner", "count_outer",
                                                    "count_inner"))


def window_scores_device(table, geo, w_outer, w_inner, count_outer, count_inner):
    """:func:`window_scores` on the device (jitted; JAX is imported on first use)."""
    return _window_scores_jitted()(table, geo, w_outer, w_inner, count_outer, count_inner)


def window_scores(table, geo: Geometry, w_outer: int, w_inner: int, count_outer: int,
                  count_inner: int) -> np.ndarray:
    """``F(o, o + w_outer, q, q + w_inner)`` for ``o < count_outer``, ``q < count_inner``, from
    a table on the host (NumPy) or on the device."""
    if isinstance(table, np.ndarray):
        o = np.arange(count_outer)[:, None]
        q = np.arange(count_inner)[None, :]
        return table[cell_index(geo, o, o + w_outer, q, q + w_inner)]
    return np.asarray(window_scores_device(table, geo, w_outer, w_inner, count_outer,
                                            count_inner))


def single_score(s_table: np.ndarray, start: int, span: int) -> int:
    """``S(start, start + span)`` from a diagonal-major S table."""
    return int(s_table[span, start])


@dataclass
class Box:
    """Host copy of the cells one window's traceback reads, in local coordinates.

    Outer positions ``0 .. P-1`` are ``o0 ..`` on the outer strand, inner ``0 .. Q-1`` are
    ``q0 ..`` on the inner strand. ``F``, ``s_outer`` and ``s_inner`` read them.
    """

    tiles: np.ndarray           # (cells, ne, tile rows, T, T)
    cells: np.ndarray           # cells[i1, j1] -> row of ``tiles`` (-1 outside the window)
    geo: Geometry
    o0: int
    q0: int
    row0: int                   # first tile row copied
    codes_outer: np.ndarray     # local codes, length P
    codes_inner: np.ndarray     # local codes, length Q
    s_outer: np.ndarray         # dense P x P, S(i, j) for i <= j, 0 below
    s_inner: np.ndarray         # dense Q x Q

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.codes_outer), len(self.codes_inner)

    def F(self, i1: int, j1: int, i2, j2):
        """F at local coordinates; ``i2``/``j2`` may be NumPy arrays (broadcast)."""
        i2 = np.asarray(i2) + self.q0
        j2 = np.asarray(j2) + self.q0
        cell = self.cells[i1, j1]
        if cell < 0:
            raise IndexError(f"outer cell {(i1, j1)} is outside the window")
        _, f, tile_row, r, c = cell_index(self.geo, 0, 0, i2, j2)
        return self.tiles[cell, f, tile_row - self.row0, r, c]


def dense_single(s_diag: np.ndarray, length: int, start: int = 0) -> np.ndarray:
    """Dense ``length x length`` S table of positions ``start ..`` from a diagonal-major one
    (``s_diag[d, i] = S(i, i + d)``), zeros below the diagonal and past the band.

    >>> dense_single(np.array([[0, 0, 0], [0, 0, 0], [5, 6, 0]]), 3).tolist()
    [[0, 0, 5], [0, 0, 0], [0, 0, 0]]
    """
    span = min(length, s_diag.shape[0])
    out = np.zeros((length, length), dtype=np.int64)
    d, k = np.divmod(np.arange(span * length), length)          # every (d, i) of the band
    keep = k < length - d
    d, k = d[keep], k[keep]
    out[k, k + d] = np.asarray(s_diag)[d, start + k]
    return out


def extract_box(table, s_outer: np.ndarray, s_inner: np.ndarray, geo: Geometry,
                codes_outer: np.ndarray, codes_inner: np.ndarray, o0: int, p: int, q0: int,
                q: int) -> Box:
    """Copy to the host what the traceback of the box ``[o0, o0+p) x [q0, q0+q)`` reads."""
    t = geo.tile
    cells = np.full((p, p), -1, dtype=np.int64)
    pairs = [(a, b) for a in range(p) for b in range(a, min(p, a + geo.w_outer + 1))]
    rows = np.array([geo.offset(b - a) + o0 + a for a, b in pairs], dtype=np.int64)
    for k, (a, b) in enumerate(pairs):
        cells[a, b] = k
    row0 = q0 // t
    row1 = (q0 + q - 1) // t + 1
    if isinstance(table, np.ndarray):
        tiles = table[rows][:, :, row0:row1]
    else:
        import jax.numpy as jnp

        tiles = np.asarray(table[jnp.asarray(rows)][:, :, row0:row1])
    return Box(tiles=tiles, cells=cells, geo=geo, o0=o0, q0=q0, row0=row0,
               codes_outer=np.asarray(codes_outer[o0:o0 + p]),
               codes_inner=np.asarray(codes_inner[q0:q0 + q]),
               s_outer=dense_single(np.asarray(s_outer), p, o0),
               s_inner=dense_single(np.asarray(s_inner), q, q0))


__all__ = ["Plan", "plan", "window_scores", "extract_box", "Box", "cell_index", "dense_single"]
