"""The one device program of an interaction batch: fill, windows, best window and its box.

:func:`interact_program` runs, for a batch of pairs of one :class:`Geometry`, the fill
(:func:`~jaxrna.interact.recurrence.bpmax_fill`), reads every full window's score, picks the
best window with the CLI's tie rule and, with ``box=True``, gathers what the traceback of that
window reads (the tiles of its outer cells on the tile rows it spans, and the two strands' S
tables on it). Only these come back to the host: the table (gigabytes at 20,000 nt) never
leaves the device, and a run compiles one program per geometry (its batch rows are fixed by
the geometry: :func:`jaxrna.interact.api.class_rows`), at most 8 per run
(:mod:`jaxrna.interact.classes`; with ``jaxrna.programs``, a warm run loads them instead of
tracing them).

Per pair the program takes ``info = (n_outer, n_inner, l_outer, l_inner, outer_is_1)``: true
lengths and window lengths in internal orientation, so pairs of different lengths share the
program of their padded geometry. The best window is the maximum over every full window
start ``(o, q)``; among equal maxima, with strand 1 outside, the largest ``o`` then the largest
``q``, else the largest ``q`` then the largest ``o`` -- on the strands read 5'->3' that is the
highest strand-1 start, then the lowest strand-2 start (see :func:`best_window`).

>>> import numpy as np
>>> scores = np.array([[1, 5, 5], [5, 2, 0]])
>>> best_window(scores, outer_is_1=True), best_window(scores, outer_is_1=False)
((1, 0), (0, 2))
"""

from __future__ import annotations

import dataclasses

from dataclasses import dataclass
from functools import lru_cache, partial

import numpy as np

#: Fields of a pair's ``info`` row.
INFO = ("n_outer", "n_inner", "l_outer", "l_inner", "outer_is_1")
#: Fields of a pair's ``summary`` row (what every run reads back).
SUMMARY = ("score", "o0", "q0", "s_outer", "s_inner", "row0")
_LOW = -(1 << 30)


def best_window(scores: np.ndarray, outer_is_1: bool) -> tuple[int, int]:
    """``(o, q)`` of the best window of a ``count_outer x count_inner`` score array by the
    tie rule of the module docstring (the host reference of the device's choice)."""
    hit = scores == scores.max()
    if outer_is_1:
        o = int(np.flatnonzero(hit.any(axis=1))[-1])
        return o, int(np.flatnonzero(hit[o])[-1])
    q = int(np.flatnonzero(hit.any(axis=0))[-1])
    return int(np.flatnonzero(hit[:, q])[-1]), q


@dataclass(frozen=True)
class BoxLayout:
    """Static shape of the traceback box of a geometry: ``P x Q`` positions (the padded window
    lengths), its outer cells ``(a, b)`` (``a <= b < P``, ``b - a <= w_outer``) in order, and
    ``R`` tile rows. ``whole``: the box's class is the whole table (a class whose bands keep
    every span), which is then returned as it is rather than copied; the box starts at the
    best window's ``(o0, q0)`` in it."""

    p: int
    q: int
    r: int
    cells: tuple[tuple[int, int], ...]
    whole: bool

    @staticmethod
    @lru_cache(maxsize=64)
    def of(geo) -> BoxLayout:
        p, q = geo.w_outer + 1, geo.w_inner + 1
        r = min((q - 1) // geo.tile + 2, geo.rows)
        cells = tuple((a, b) for a in range(p) for b in range(a, min(p, a + geo.w_outer + 1)))
        whole = p == geo.n_outer and r == geo.rows
        return BoxLayout(p=p, q=q, r=r, cells=cells, whole=whole)

    def cell_rows(self, geo, o0: int = 0) -> np.ndarray:
        """Table rows of the box's cells for a box at outer start ``o0``."""
        return np.array([geo.offset(b - a) + a + o0 for a, b in self.cells], dtype=np.int64)

    def cell_map(self, geo, o0: int = 0) -> np.ndarray:
        """``map[a, b]`` -> row of the returned tiles for the box at outer start ``o0`` (-1
        outside the window or the table; read-only)."""
        return _cell_map(self, geo, o0 if self.whole else 0)


@lru_cache(maxsize=256)
def _cell_map(lay: BoxLayout, geo, o0: int) -> np.ndarray:
    out = np.full((lay.p, lay.p), -1, dtype=np.int64)
    a, b = np.array(lay.cells, dtype=np.int64).reshape(-1, 2).T
    if lay.whole:               # the whole table: cells of the box shifted by o0
        keep = b + o0 < geo.n_outer
        out[a[keep], b[keep]] = lay.cell_rows(geo, o0)[keep]
    else:
        out[a, b] = np.arange(len(lay.cells))
    out.setflags(write=False)
    return out


def _read_one(table, s_outer, s_inner, info, *, geo, box: bool, windows: bool):
    """Windows, best window and (``box``) the traceback box of one filled pair."""
    import jax
    import jax.numpy as jnp

    from jaxrna.interact.windows import cell_index

    n_o, n_i, l_o, l_i, outer_is_1 = (info[k] for k in range(5))
    wo, wi = l_o - 1, l_i - 1
    count_o, count_i = geo.n_outer, geo.n_inner        # window starts: any window, any length
    o = jnp.arange(count_o, dtype=jnp.int32)[:, None]
    q = jnp.arange(count_i, dtype=jnp.int32)[None, :]
    scores = table[cell_index(geo, o, o + wo, q, q + wi)]
    valid = (o < n_o - wo) & (q < n_i - wi)
    masked = jnp.where(valid, scores, _LOW)
    hit = masked == masked.max()
    ar_o, ar_q = jnp.arange(count_o, dtype=jnp.int32), jnp.arange(count_i, dtype=jnp.int32)
    o_a = jnp.max(jnp.where(hit.any(axis=1), ar_o, -1))               # strand 1 outside
    q_a = jnp.max(jnp.where(hit[jnp.maximum(o_a, 0)], ar_q, -1))
    q_b = jnp.max(jnp.where(hit.any(axis=0), ar_q, -1))               # strand 2 outside
    o_b = jnp.max(jnp.where(hit[:, jnp.maximum(q_b, 0)], ar_o, -1))
    o0 = jnp.maximum(jnp.where(outer_is_1 == 1, o_a, o_b), 0)
    q0 = jnp.maximum(jnp.where(outer_is_1 == 1, q_a, q_b), 0)
    s_o = s_outer[jnp.clip(wo, 0, s_outer.shape[0] - 1), o0]
    s_i = s_inner[jnp.clip(wi, 0, s_inner.shape[0] - 1), q0]
    out = {}
    lay = BoxLayout.of(geo)
    row0 = jnp.int32(0)
    if box:
        t = geo.tile
        row0 = jnp.clip(q0 // t, 0, geo.rows - lay.r).astype(jnp.int32)
        if lay.whole:           # the host reads the box at (o0, q0) of the whole tables
            out["tiles"] = table
            out["s_outer"], out["s_inner"] = s_outer, s_inner
        else:
            rows = jnp.asarray(lay.cell_rows(geo), jnp.int32) + o0
            out["tiles"] = jax.vmap(lambda r: jax.lax.dynamic_slice(
                table, (r, 0, row0, 0, 0), (1, geo.ne, lay.r, t, t))[0])(rows)
            # padded so a window shorter than the box's class is never clamped out of place
            pad_o = jnp.pad(s_outer, ((0, 0), (0, lay.p)))
            pad_i = jnp.pad(s_inner, ((0, 0), (0, lay.q)))
            out["s_outer"] = jax.lax.dynamic_slice(pad_o, (0, o0), (s_outer.shape[0], lay.p))
            out["s_inner"] = jax.lax.dynamic_slice(pad_i, (0, q0), (s_inner.shape[0], lay.q))
    if windows:
        out["windows"] = scores
    out["summary"] = jnp.stack([masked.max(), o0, q0, s_o, s_i, row0]).astype(jnp.int32)
    return out


def interact_program(codes_u, codes_v, weights, info, spans, *, geo, box: bool, windows: bool):
    """The batch's program (jit it with ``geo``, ``box`` and ``windows`` static).

    ``codes_u (B, n_outer)``, ``codes_v (B, n_inner)``: padded codes (internal orientation);
    ``weights``: 5x5 int32; ``info (B, 5)`` int32 (:data:`INFO`); ``spans (2,)`` int32: the
    largest ``l_outer`` and ``l_inner`` of the batch (the diagonals the fill runs). Returns a
    dict of batched arrays: ``summary (B, 6)`` (:data:`SUMMARY`), with ``windows`` the
    full-window scores ``(B, n_outer, n_inner)`` by window start (rows and columns past a
    pair's window counts are padding), with ``box`` the ``tiles``, ``s_outer`` and ``s_inner``
    of the best window (:class:`BoxLayout`; with a whole-table layout, the whole S tables).
    """
    import jax.numpy as jnp

    from jaxrna.batching import map_rows
    from jaxrna.interact.recurrence import bpmax_fill

    weights = jnp.asarray(weights, jnp.int32)
    spans = jnp.asarray(spans, jnp.int32)
    fill = partial(bpmax_fill, weights=weights, geo=geo, spans=spans)
    read = partial(_read_one, geo=geo, box=box, windows=windows)

    def one(a, b, i):
        return read(*fill(a, b), i)

    # a batch of one row (long strands) runs the pair's program: vmap's batching of the
    # fill's loops was half of this program's tracing (23 x 20,000 nt, --window2 128)
    return map_rows(one)(codes_u, codes_v, info.astype(jnp.int32))


_jitted = None


def batch_jitted():
    """The batch program's ``jax.jit`` function (what a compile worker lowers:
    :mod:`jaxrna.compile_workers`)."""
    global _jitted
    if _jitted is None:
        import jax

        _jitted = jax.jit(interact_program, static_argnames=("geo", "box", "windows"))
    return _jitted


def prefetch(args: tuple, geo, box: bool, windows: bool, device) -> None:
    """Start compiling (or loading) the program of a batch like ``args`` in the background
    (:func:`jaxrna.compile_workers.prefetch`: on hosts with cores to spare, in worker processes), so a
    run's few programs compile side by side at its start."""
    import jax

    from jaxrna import compile_workers

    specs = tuple(jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in args)
    compile_workers.prefetch("interact.batch", "jaxrna.interact.program:batch_jitted", specs,
                             {"geo": geo, "box": box, "windows": windows}, device,
                             cpu_store=True)


def compiled(codes_u, codes_v, weights, info, spans, geo, box: bool, windows: bool, device):
    """The compiled program for these shapes (``jaxrna.programs``: from this process, the disk
    store -- on CPUs too: tracing the fill is most of a small warm run --, or traced and
    compiled)."""
    from jaxrna import programs

    jitted = batch_jitted()

    def build(g):
        return lambda: programs.program("interact.batch", jitted,
                                        (codes_u, codes_v, weights, info, spans),
                                        {"geo": g, "box": box, "windows": windows}, device,
                                        cpu_store=True)

    if not uses_pallas(geo, device):
        return build(geo)()
    from jaxrna.kernels.fallback import compile_or_fallback

    # a Pallas kernel that does not build (a later JAX): the same fill in pure JAX
    return compile_or_fallback("interact.bpmax", build(geo),
                               build(dataclasses.replace(geo, kernel="xla", fused=False)))


def uses_pallas(geo, device) -> bool:
    """Whether the fill of ``geo`` runs a Pallas kernel on ``device``: the fused splits, or the
    max-plus kernel (``kernel`` resolved as :func:`jaxrna.kernels.tropical.maxplus_update`
    resolves it: "pallas"/"interpret", or "auto" on a GPU).

    >>> from jaxrna.interact.geometry import Geometry
    >>> uses_pallas(Geometry(64, 64, 63, 63, kernel="xla"), None)
    False
    """
    from jaxrna.kernels.tropical import resolve_backend

    backend = resolve_backend(geo.kernel)   # None: $JAXRNA_TROPICAL_BACKEND, else "auto"
    if geo.fused or backend in ("pallas", "interpret"):
        return True
    return backend == "auto" and device is not None and device.platform == "gpu"


__all__ = ["INFO", "SUMMARY", "BoxLayout", "best_window", "compiled", "interact_program",
           "uses_pallas"]
