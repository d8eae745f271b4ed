"""The minimum free energy tables of one sequence, filled diagonal by diagonal in JAX.

Pure JAX on one padded sequence (batch it with ``jax.vmap``); the recurrence itself is
:mod:`jaxrna.energy.terms`. Layout: the seven tables ``C, M2, CI, C1n, C23, CA, M`` are one
array stored by diagonal, ``T[ROW_PAD + d, k, i] = table_k(i, i + d)``, with ``ROW_PAD`` rows
of ``INF`` above diagonal 0 and ``COL_PAD`` columns of ``INF`` on the right, so every read of a
cell's candidates is a static shift of a row: the interior-loop window (u1 + u2 <= 30) is a
few hundred shifted row slices reduced by ``min``, read by one gather of row slices per group
of members (``interior="gather"``, the default where no kernel serves) or as static slices of
one block of rows fetched per diagonal (``"jax"``). The energy pieces that depend only on the
sequence (:func:`jaxrna.energy.terms.pair_terms`: pair types, hairpins, loop mismatches, ...) are
computed for every cell before the sweep, as one vectorised pass (``precompute``; for very
long sequences they are computed per diagonal instead, to save memory), so a diagonal is a
handful of fused loops.

The diagonals run in a few *bands*, each its own ``lax.fori_loop`` with static shapes: a band
computes only the cells that exist on its diagonals (``i < L - d``) and only the interior
loops that fit in them (an inner pair needs ``l - k >= 4``). The multiloop split ``M2(i, j) =
min_k M(i, k) + M(k+1, j)`` reads ``M`` by rows and by a second copy ``MC[L - 1 - d, d + i] =
M(i, i + d)`` (columns read upward), so each diagonal is one elementwise ``min`` over the
leading axis of two rectangular slices, as in :mod:`jaxrna.fold.fill`, as wide as the sub-band
of diagonals holding ``d`` needs (a ``lax.switch``). All loops stop at the longest sequence of
the batch (``stop``).

On a GPU the two reductions that are most of the work, the interior-loop window and the
multiloop split, run as Pallas kernels (:mod:`jaxrna.kernels.shifted_min`, ``interior=
"pallas"``; ``MC`` is then not kept): the same integers, 1.9x the batch rate on an H200.

Energies are int32 dcal/mol; ``INF`` (10,000,000) marks impossible cells, and any value above
``INF / 2`` is stored as ``INF`` so sums of impossible terms never look finite.

The host-side inputs (padded codes, pairing constraints, special hairpins) are prepared by
:mod:`jaxrna.energy.inputs` (:func:`prepare`, :func:`prepare_batch`, importable from here).

>>> from jaxrna.energy.params import load_params
>>> from jaxrna.energy.terms import device_params
>>> inp = prepare("GGGGAAACCCC", load_params(), 64)
>>> tables = fill_one(inp["s"], inp["allowed"], inp["special"], inp["n"],
...                   device_params(load_params(), 64), 2, 11)
>>> int(tables["F"][11])
-450
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.energy import terms
# the host-side inputs live in :mod:`jaxrna.energy.inputs`; importable from here as before
from jaxrna.energy.inputs import (SEQ_LEFT, prepare, prepare_batch, seq_pad,  # noqa: F401
                                  special_hairpin_hits)
from jaxrna.energy.fill_plan import (GPU_ONE_BAND_MAX, GPU_TWO_BANDS_MAX,  # noqa: F401
                                     INTERIOR_MODES, KERNEL_MAX_LENGTH, band_bounds,
                                     bands_for, interior_mode, split_bands_for,
                                     sweep_bands)
from jaxrna.energy.params import INF, MAXLOOP
from jaxrna.energy.terms import COL_PAD, ROW_PAD

#: Values at or above this are impossible (stored as INF).
BIG = INF // 2
GROUP_TABLES = terms.GROUP_NAMES
#: The tables of ``T``'s second axis, in order.
TABLES = ("C", "M2") + GROUP_TABLES + ("M",)
INDEX = {name: k for k, name in enumerate(TABLES)}
#: Padded lengths up to this compute every cell's energy pieces before the sweep.
PRECOMPUTE_MAX = 0


def along(x, ref):
    """``x`` (an array built from constants) marked as varying like ``ref`` (a traced scalar:
    under ``jax.vmap``, one value per row), the same values. A loop's carries that start
    unbatched but become batched make JAX batch the loop body again until they settle, and
    nested loops multiply that: with every carry batched from the start, tracing the batch
    program takes about a third of the time (issue 26: tracing was most of a cold GPU run).

    >>> along(jnp.zeros(2, jnp.int32), jnp.int32(5)).tolist()
    [0, 0]
    """
    return jnp.where(ref == ref, x, x)


# --------------------------------------------------------------------------- views

_SPECIAL_INDEX = {"tri": 0, "tetra": 1, "hexa": 2}


class PointsView:
    """Cells (i, j) given as broadcastable index arrays (or scalars): sequence reads are
    gathers. Used for the whole table at once, a column of the exterior loop, one cell."""

    def __init__(self, s, allowed, special, dp, i, j, n):
        self._s, self._allowed, self._special, self.dp = s, allowed, special, dp
        self.i, self.j, self.n = i, j, n
        self.d = j - i

    # reads clamped to the arrays (``mode="clip"``: the codes are padded on both sides, so a
    # cell's reads lie inside; no negative indices wrapped, a few operations less a read)
    def s(self, base, off):
        return jnp.take(self._s, SEQ_LEFT + (self.i if base == "i" else self.j) + off, mode="clip")

    def allowed(self, base):
        return jnp.take(self._allowed, SEQ_LEFT + (self.i if base == "i" else self.j), mode="clip")

    def hp_len(self):
        return jnp.take(self.dp["hp_len"], self.d - 1, mode="clip")

    def special(self, name):
        return jnp.take(self._special[_SPECIAL_INDEX[name]], self.i, mode="clip")


class DiagView:
    """The cells (i, i + d), i < ``height``, of diagonal ``d`` (traced): sequence reads are
    slices. Also the reader of the tables for the sweep (``tab``, ``group_min``): the rows of
    diagonals d + ``lo`` .. d + ``hi`` are fetched as one block (one dynamic slice of the
    tables ``T``, or the caller's ``block``), every read is a static slice of it."""

    def __init__(self, s, allowed, special, dp, d, height, n, T=None, lo=0, hi=0,
                 interior: str = "jax", block=None):
        self._s, self._allowed, self._special, self.dp = s, allowed, special, dp
        self.d, self.height, self.n = d, height, n
        self.T, self.interior = T, interior
        self.i = jnp.arange(height, dtype=jnp.int32)
        self.j = self.i + d
        self.lo = lo
        self.block = block if block is not None or T is None else jax.lax.dynamic_slice(
            T, (ROW_PAD + d + lo, 0, 0), (hi - lo + 1, T.shape[1], T.shape[2]))
        self.current = {}

    def s(self, base, off):
        if base == "i":
            return self._s[SEQ_LEFT + off:SEQ_LEFT + off + self.height]
        return jax.lax.dynamic_slice(self._s, (SEQ_LEFT + self.d + off,), (self.height,))

    def allowed(self, base):
        if base == "i":
            return self._allowed[SEQ_LEFT:SEQ_LEFT + self.height]
        return jax.lax.dynamic_slice(self._allowed, (SEQ_LEFT + self.d,), (self.height,))

    def hp_len(self):
        return self.dp["hp_len"][self.d - 1]

    def special(self, name):
        return self._special[_SPECIAL_INDEX[name], :self.height]

    # table reads of the sweep: rows of earlier diagonals at static shifts
    def row(self, name, dd, di):
        """``table(i + di, i + d + dd + di)`` for the view's cells."""
        r = dd - self.lo
        return jax.lax.slice(self.block, (r, INDEX[name], di),
                             (r + 1, INDEX[name] + 1, di + self.height)).reshape(self.height)

    def tab(self, name, dd, di):
        if dd == 0 and name in self.current:
            if di != 0:
                raise ValueError("a cell reads its own diagonal only at its own position")
            return self.current[name]
        return self.row(name, dd, di)

    def group_min(self, name, dds, dis, cost):
        costs = [jax.lax.slice(cost, (m,), (m + 1,)) for m in range(len(dds))]
        return tree_min([jax.lax.add(self.row(name, int(dd), int(di)),
                                     jax.lax.broadcast_in_dim(c, (self.height,), (0,)))
                         for c, dd, di in zip(costs, dds, dis)])

    def group_min_loop(self, name, dds, dis, cost):
        """:meth:`group_min` as a rolled loop (``interior="loop"``): a ``lax.fori_loop`` over
        the members, :data:`LOOP_UNROLL` a trip, each a dynamic slice of the tables at a shift
        read from a constant tap table (one loop body, however many members: a small program).
        Groups of fewer than :data:`LOOP_UNROLL` members are read as static slices."""
        count = len(dds)
        if count < LOOP_UNROLL:
            return self.group_min(name, dds, dis, cost)
        pad = -count % LOOP_UNROLL
        taps = np.stack([np.concatenate([np.asarray(dds, np.int32), np.full(pad, dds[0], np.int32)]),
                         np.concatenate([np.asarray(dis, np.int32), np.full(pad, dis[0], np.int32)])],
                        axis=1)
        cost = cost[:count]
        if pad:
            cost = jnp.concatenate([cost, jnp.full((pad,), INF, jnp.int32)])
        taps = jnp.asarray(taps)
        T, k, h, base = self.T, INDEX[name], self.height, ROW_PAD + self.d

        def trip(step, acc):
            rows = jax.lax.dynamic_slice_in_dim(taps, step * LOOP_UNROLL, LOOP_UNROLL)
            costs = jax.lax.dynamic_slice_in_dim(cost, step * LOOP_UNROLL, LOOP_UNROLL)
            for u in range(LOOP_UNROLL):
                x = jax.lax.dynamic_slice(T, (base + rows[u, 0], k, rows[u, 1]), (1, 1, h))
                acc = jax.lax.min(acc, x.reshape(h) + costs[u])
            return acc

        return jax.lax.fori_loop(0, (count + pad) // LOOP_UNROLL, trip,
                                 along(jnp.full((h,), 2 * INF, jnp.int32), self.n))

    def group_min_gather(self, name, dds, dis, cost):
        """:meth:`group_min` as one gather of the members' rows from the tables (members
        first, ``(members, height)``) reduced by ``min`` over the members (``interior=
        "gather"``): a handful of operations however many members."""
        rows = ROW_PAD + self.d + jnp.asarray(np.asarray(dds, np.int32))
        x = gather_rows(self.T, rows, INDEX[name], jnp.asarray(np.asarray(dis, np.int32)),
                        self.height)
        return jnp.min(x + cost[:len(dds), None], axis=0)

    def group_mins(self, cands) -> list:
        """``group_min`` of each group candidate: one slice per member in JAX, or all groups
        in one call of the Pallas kernel :func:`jaxrna.kernels.shifted_min.shifted_min`
        (``interior`` "pallas", or "interpret" for its CPU form; the same integers)."""
        if self.interior == "jax":
            return [self.group_min(c.table, c.dd, c.di, c.cost) for c in cands]
        if self.interior == "loop":
            return [self.group_min_loop(c.table, c.dd, c.di, c.cost) for c in cands]
        if self.interior == "gather":
            return [self.group_min_gather(c.table, c.dd, c.di, c.cost) for c in cands]
        from jaxrna.kernels.shifted_min import shifted_min

        taps, costs, offset = [], [], 0
        for c in cands:
            taps.append((INDEX[c.table], tuple((int(dd), int(di), offset + m)
                                               for m, (dd, di) in enumerate(zip(c.dd, c.di)))))
            costs.append(c.cost[:len(c.dd)])
            offset += len(c.dd)
        out = shifted_min(self.T, self.d, jnp.concatenate(costs), tuple(taps), row_base=ROW_PAD,
                          height=self.height, interpret=self.interior == "interpret")
        return [out[g] for g in range(len(cands))]


def gather_rows(T, rows, k, cols, height: int) -> jax.Array:
    """``(len(rows), height)``: ``T[rows[m], k, cols[m] : cols[m] + height]`` (``T`` the
    tables ``(rows, channels, columns)``, every read inside them), one gather of row slices
    (a row's cells contiguous: under ``vmap`` XLA reads them as slices, not cell by cell).

    >>> T = jnp.arange(24).reshape(2, 3, 4)
    >>> gather_rows(T, jnp.array([1, 0]), 2, jnp.array([0, 1]), 2).tolist()
    [[20, 21], [9, 10]]
    """
    idx = jnp.stack([rows, jnp.full(rows.shape, k, rows.dtype), cols], axis=1)
    dims = jax.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0, 1),
                                          start_index_map=(0, 1, 2))
    return jax.lax.gather(T, idx, dims, (1, 1, height),
                          mode=jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def tree_min(rows):
    """Elementwise minimum of a list of arrays, as a balanced tree (one fused loop)."""
    rows = list(rows)
    while len(rows) > 1:
        rows = [jax.lax.min(rows[k], rows[k + 1]) if k + 1 < len(rows) else rows[k]
                for k in range(0, len(rows), 2)]
    return rows[0]


def reduce_min(cands, v, extra=()) -> jax.Array:
    """The minimum of a cell list's candidates (groups reduced before adding their outer)."""
    rows = list(extra)
    grouped = [c for c in cands if c.cost is not None]
    if grouped:
        mins = v.group_mins(grouped) if hasattr(v, "group_mins") else \
            [v.group_min(c.table, c.dd, c.di, c.cost) for c in grouped]
        rows += [m + c.outer for c, m in zip(grouped, mins)]
    rows += [c.energy for c in cands if c.cost is None]
    return tree_min(rows)


def _clip(x):
    return jnp.where(x >= BIG, INF, x).astype(jnp.int32)


# --------------------------------------------------------------------------- the sweep

class SquareView:
    """Every cell (i, j), i, j < L, at once: sequence reads are shifted copies of the codes
    broadcast along a row or a column (no gathers)."""

    def __init__(self, s, allowed, special, dp, length, n):
        self._s, self._allowed, self._special, self.dp = s, allowed, special, dp
        self.length, self.n = length, n
        self.i = jnp.arange(length, dtype=jnp.int32)[:, None]
        self.j = jnp.arange(length, dtype=jnp.int32)[None, :]
        self.d = self.j - self.i

    def _along(self, x, base, off):
        row = x[SEQ_LEFT + off:SEQ_LEFT + off + self.length]
        return row[:, None] if base == "i" else row[None, :]

    def s(self, base, off):
        return self._along(self._s, base, off)

    def allowed(self, base):
        return self._along(self._allowed, base, 0)

    def hp_len(self):
        table = self.dp["hp_len"]
        return table[jnp.clip(self.d - 1, 0, table.shape[0] - 1)]

    def special(self, name):
        return self._special[_SPECIAL_INDEX[name], :self.length][:, None]


def skew(x: jax.Array) -> jax.Array:
    """``x[..., i, j]`` (square) as ``out[..., d, i] = x[..., i, i + d]`` (``j - i = d``;
    values for ``i + d >= L`` are unspecified): a pad and reshapes, no gather.

    >>> skew(jnp.arange(9).reshape(3, 3)).tolist()[0], skew(jnp.arange(9).reshape(3, 3)).tolist()[1][:2]
    ([0, 4, 8], [1, 5])
    """
    L = x.shape[-1]
    lead = x.shape[:-2]
    pad = [(0, 0)] * len(lead)
    # rows padded to 2L: (i, i + d) is flat element i * 2L + i + d = i * (2L + 1) + d
    flat = jnp.pad(x, pad + [(0, 0), (0, L)]).reshape(lead + (2 * L * L,))
    flat = jnp.pad(flat, pad + [(0, L)])
    return jnp.swapaxes(flat.reshape(lead + (L, 2 * L + 1))[..., :L], -1, -2)


def all_pair_terms(s, allowed, special, n, dp, dangles: int, length: int) -> jax.Array:
    """:func:`jaxrna.energy.terms.pair_terms` of every cell: ``[K, L, L]`` (piece, d, i)."""
    v = SquareView(s, allowed, special, dp, length, n)
    return skew(_stack_terms(terms.pair_terms(v, dp, dangles), (length, length)))


def split_min(T, MC, d, height, length, bands, interior: str = "jax"):
    """``M2(i, i + d) = min_k M(i, k) + M(k+1, i + d)`` for the diagonal's cells: two
    rectangular slices (``M`` by rows, ``MC`` read upward) reduced over the leading axis. The
    slices are as wide as the band of diagonals holding ``d`` needs (a ``lax.switch`` over
    the bands, so little is computed past the d - 2 split points)."""
    m = INDEX["M"]
    if _kernels(interior):      # the Pallas kernel reads M by rows only (no MC)
        from jaxrna.kernels.shifted_min import split_min as split_kernel

        return _clip(split_kernel(T, d, m, row_base=ROW_PAD, height=height,
                                  interpret=interior == "interpret"))

    def band(d0, d1):
        w, h = d1, min(length - d0, height)

        def branch(T, MC):
            left = T[ROW_PAD:ROW_PAD + w, m, :h]
            right = jax.lax.dynamic_slice(MC, (length - d, d), (w, h))
            row = jnp.min(left + right, axis=0)
            if h < height:
                return jnp.concatenate([row, jnp.full((height - h,), INF, jnp.int32)])
            return row
        return branch

    if len(bands) == 1:
        return _clip(band(*bands[0])(T, MC))
    starts = jnp.asarray([d0 for d0, _ in bands[1:]], jnp.int32)
    which = jnp.sum(d >= starts)
    return _clip(jax.lax.switch(which, [band(d0, d1) for d0, d1 in bands], T, MC))


def _diagonal(d, carry, *, s, allowed, special, n, dp, precompute, dangles, height, max_loop,
              split_bands, length, interior):
    """Step ``d`` of the sweep: ``C`` and ``M2`` of diagonal d, and ``M`` and the group tables
    of diagonal d - 1. Everything it computes reads only the tables as they were (``M2(i, j)``
    splits into parts of at most d - 5 diagonals, ``M`` of d - 1 reads ``C`` and ``M2`` of
    d - 1), so the step is one store: the rows of d - 1 and d, each computed once. (Rows
    read from a row computed in the same step would have its whole candidate reduction
    fused into them by XLA, several times the work.) ``M`` of the last diagonal is never
    needed (a multiloop part lies strictly inside its closing pair). The energy pieces of
    diagonal d are carried to step d + 1, where they are those of its d - 1 (computed once
    per diagonal, not twice)."""
    T, MC, carried = carry
    names = terms.PAIR_TERMS
    # C and M2 of diagonal d (reading diagonals d - 2 - max_loop .. d - 2)
    v = DiagView(s, allowed, special, dp, d, height, n, T, lo=-2 - max(max_loop, 4), hi=-2,
                 interior=interior)
    tm = _terms(v, precompute, d, height, dp, dangles, names)
    c_row = jnp.where(tm["ok"] > 0,
                      _clip(reduce_min(terms.pair_candidates(v, tm, dp, max_loop), v)), INF)
    m2_row = split_min(T, MC, d, height, length, split_bands, interior)
    # M and the group tables of diagonal d - 1
    e = d - 1
    w = DiagView(s, allowed, special, dp, e, height, n, T, lo=-2, hi=0)
    tw = dict(zip(names, carried)) if precompute is None else \
        _terms(w, precompute, e, height, dp, dangles, names)
    prev_c = w.row("C", 0, 0)
    w.current = {"C": prev_c, "M2": w.row("M2", 0, 0)}
    m_row = _clip(reduce_min(terms.multi_candidates(w, tw, dp), w,
                             extra=(w.current["M2"],)))
    prev = {"C": prev_c, "M2": w.current["M2"], "M": m_row}
    for name in GROUP_TABLES:
        prev[name] = jnp.where(prev_c < INF, _clip(prev_c + tw[f"adj_{name}"]), INF)
    inf = jnp.full((height,), INF, jnp.int32)
    cur = {"C": c_row, "M2": m2_row}
    new = jnp.stack([jnp.stack([prev[name] for name in TABLES]),
                     jnp.stack([cur.get(name, inf) for name in TABLES])])
    T, MC = _store(T, MC, new, m_row, e, length, keep_columns=not _kernels(interior))
    return T, MC, _stack_terms(tm, (height,))


def _stack_terms(tm: dict, shape: tuple[int, ...]) -> jax.Array:
    """The pieces of :func:`jaxrna.energy.terms.pair_terms` (a diagonal's, or every cell's) as
    one int32 array ``(len(PAIR_TERMS), *shape)``, in that order."""
    return jnp.stack([jnp.broadcast_to(tm[name], shape).astype(jnp.int32)
                      for name in terms.PAIR_TERMS])


def _terms(v, precompute, d, height, dp, dangles, names):
    if precompute is None:
        return terms.pair_terms(v, dp, dangles)
    rows = jax.lax.dynamic_slice(precompute, (0, d, 0), (precompute.shape[0], 1, height))[:, 0]
    return dict(zip(names, rows))


def _kernels(interior: str) -> bool:
    """Whether ``interior`` runs the Pallas kernels (the split too, which then needs no
    ``MC``)."""
    return interior in ("pallas", "interpret")


def _store(T, MC, new, m_row, e, length, keep_columns: bool = True):
    """Store the rows of diagonals e and e + 1 (and ``M`` of e in ``MC`` where
    ``keep_columns``: the kernels' split reads ``T`` only). The stores sit in
    a loop of one (not statically known) trip, so XLA cannot fuse the rows' computation
    (which reads the tables) into them: that fusion would force copies of whole tables on
    every diagonal."""
    def body(_, carry):
        T, MC, new, m_row = carry
        T = jax.lax.dynamic_update_slice(T, new, (ROW_PAD + e, 0, 0))
        if keep_columns:
            MC = jax.lax.dynamic_update_slice(MC, m_row[None], (length - 1 - e, e))
        return T, MC, new, m_row

    once = (e >= 0).astype(jnp.int32)
    T, MC, _, _ = jax.lax.fori_loop(0, once, body, (T, MC, new, m_row))
    return T, MC


def read_cells(T, rows, k, cols):
    """``T[rows, k, cols]`` for index arrays already inside ``T`` (clipped by the caller): one
    gather from the flattened tables, its index computed elementwise (no index arrays stacked,
    no negative indices wrapped: a few operations a read where the traceback reads many).

    >>> read_cells(jnp.arange(24).reshape(2, 3, 4), jnp.array([1, 0]), 2, jnp.array([3, 0])).tolist()
    [23, 8]
    """
    _, channels, width = T.shape
    return jnp.take(T.reshape(-1), (rows * channels + k) * width + cols, mode="clip")


def c_reader(T, length):
    """``get(a, b)``: C(a, b) for index arrays (INF outside the table)."""
    def get(a, b):
        rows = jnp.clip(ROW_PAD + b - a, 0, ROW_PAD + length - 1)
        cols = jnp.clip(a, 0, length + COL_PAD - 1)
        return jnp.where(b - a >= 0, read_cells(T, rows, 0, cols), INF)
    return get


def exterior_branches(T, s, allowed, special, n, dp, dangles: int, length: int) -> jax.Array:
    """``E[j, i]``: the best last exterior branch of the prefix [i, j] (C + branch energy),
    for every i, j < ``length``."""
    get_c = c_reader(T, length)
    j = jnp.arange(length, dtype=jnp.int32)[:, None]
    i = jnp.arange(length, dtype=jnp.int32)[None, :]
    v = PointsView(s, allowed, special, dp, i, j, n)
    best = None
    for e, (a, b) in zip(terms.exterior_terms(v, dp, dangles), terms.EXTERIOR_SHIFTS):
        x = get_c(i + a, j + b) + e
        best = x if best is None else jnp.minimum(best, x)
    return _clip(best)


def exterior(T, s, allowed, special, n, dp, dangles: int, length: int, stop) -> jax.Array:
    """``F[k]`` for k = 0..length: the exterior loop over the first k bases."""
    E = exterior_branches(T, s, allowed, special, n, dp, dangles, length)

    def body(j, f):
        best = jnp.minimum(f[j], jnp.min(f[:length] + E[j]))
        return f.at[j + 1].set(_clip(best))

    f = along(jnp.zeros(length + 1, jnp.int32), n)
    return jax.lax.fori_loop(0, jnp.minimum(stop, length), body, f)


def check_band(length: int, d0: int, d1: int, max_loop: int) -> None:
    """Every table read of the band of diagonals [d0, d1) stays inside the padded table: rows
    down to diagonal d0 - 2 - max_loop (interior loops; specials and multiloops read at most
    6 back), columns up to the band's last cell + 2 + max_loop."""
    low = min(d0 - 2 - max(max_loop, 4), d0 - 6)
    if low < -ROW_PAD or (1 + max(max_loop, 2)) + (length - d0) > length + COL_PAD:
        raise AssertionError(f"band {d0}..{d1} of {length} reads outside the table")


def fill(s: jax.Array, allowed: jax.Array, special: jax.Array, n: jax.Array, dp: dict,
         dangles, stop, precompute: bool | None = None, interior: str = "jax",
         bands: int | None = None) -> dict:
    """All tables of one sequence (see :func:`prepare` for the inputs; ``dp`` from
    :func:`jaxrna.energy.terms.device_params` for the same padded length). ``stop`` (compute
    diagonals and prefixes up to ``stop``, at least the sequence length; under ``vmap`` the
    batch's longest) and ``dangles`` (0, 1 or 2) are traced scalars shared by a batch.
    ``interior`` (static): how the interior loops' window is reduced, "gather" (one gather
    per group of members), "jax" (static slices), "loop" (a rolled loop of slices), "pallas"
    (the GPU kernel :mod:`jaxrna.kernels.shifted_min`) or "interpret" (that kernel in Pallas'
    interpret mode, for tests): the same tables; see :func:`interior_mode`.
    ``bands`` (static): the sweep's band count (:func:`sweep_bands`; default the CPU's).
    Returns ``{"T": tables, "F": exterior loop}``; ``F[n]`` is the minimum free energy."""
    length = special.shape[1] - COL_PAD
    if precompute is None:
        precompute = length <= PRECOMPUTE_MAX
    pre = all_pair_terms(s, allowed, special, n, dp, dangles, length) if precompute else None
    bands = sweep_bands(length, bands)
    width = max(max(b - a for a, b in split_bands_for(length, d0, d1)) for d0, d1 in bands)
    T = along(jnp.full((ROW_PAD + length, len(TABLES), length + COL_PAD), INF, jnp.int32), n)
    # MC[L - 1 - d, d + i]: rows up to L + band width, columns up to d + row length < 2L
    MC = along(jnp.full((length + width + 1, 2 * length) if not _kernels(interior) else (1, 1),
                        INF, jnp.int32), n)
    carried = None
    for d0, d1 in bands:
        max_loop = min(MAXLOOP, d1 - 1 - 6)
        check_band(length, d0, d1, max_loop)
        body = partial(_diagonal, s=s, allowed=allowed, special=special, n=n, dp=dp, precompute=pre,
                       dangles=dangles, height=length - d0, max_loop=max_loop,
                       split_bands=split_bands_for(length, d0, d1), length=length,
                       interior=interior)
        # the pieces of diagonal d0 - 1: the previous band's (as wide or wider); before the
        # first band, none are read (diagonal 3 holds no pair: its rows stay INF)
        carried = along(jnp.zeros((len(terms.PAIR_TERMS), length - d0), jnp.int32), n) \
            if carried is None else carried[:, :length - d0]
        T, MC, carried = jax.lax.fori_loop(d0, jnp.clip(stop, d0, d1), body, (T, MC, carried))
    F = exterior(T, s, allowed, special, n, dp, dangles, length, stop)
    return {"T": T, "F": F}


@partial(jax.jit, static_argnames=("precompute", "interior"))
def fill_one(s, allowed, special, n, dp, dangles, stop, precompute=None, interior="jax") -> dict:
    """:func:`fill`, compiled for one sequence."""
    return fill(s, allowed, special, n, dp, dangles, stop, precompute, interior)


#: Interior-loop members per trip of the rolled loop (``interior="loop"``).
LOOP_UNROLL = 16
