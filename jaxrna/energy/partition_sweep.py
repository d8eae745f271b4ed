"""The diagonal sweep of the partition functions, and its derivative: the outside pass.

A sweep fills tables stored by diagonal, ``T[ROW_PAD + d, k, i] = table_k(i, i + d)``, for
d = 4 .. L-1, each diagonal's rows a function ``rows_fn(d, R, diff, fixed, height, width)``
of the *shorter* diagonals only, for the cells i < ``height``. ``rows_fn`` reads the tables
through ``R`` (a :class:`Reader`): rectangular windows, ``R.T(start, size)`` of ``T`` and
``R.V(start, size)`` of ``V``, nothing else (above 256 nt the diagonals run
in the MFE fill's bands, :func:`jaxrna.energy.fill.sweep_bands`: a band's height is the cell
count of its first diagonal, ``width`` its end, a bound on the multiloop split's extent;
``V`` is a copy of one table, channel ``copy``, by end position, for the multiloop split:
``V[L - 1 - d', j] = table(j - d', j)``, so that the branches ending at j = i + d and
starting at i + a + 1, a = 0 .. width - 1, are the rectangular window ``V[L - d : L - d +
width, d : d + height]``, indexed ``[a, i]`` as ``T``'s rows of diagonals ``0 .. width - 1``
are). Because a diagonal reads only shorter ones, the final tables hold every diagonal's
inputs as they were when it was computed. The derivative (a ``jax.custom_vjp``) uses that:
the diagonals in reverse order, each diagonal's cotangent, complete once every longer
diagonal (the only readers) is done, pulled back through ``jax.vjp`` of ``rows_fn`` on the
final tables *with respect to the windows it read*, each window's cotangent added into the
tables' cotangents in place (a diagonal costs its windows, not the whole tables). That is
the outside recursion of the partition function, derived from the inside one: memory O(L^2)
(the tables and their cotangents) instead of reverse mode's O(L^3) residuals.

``diff``: a pytree of float arrays (the cotangents come back for them); ``fixed``: a pytree
of arrays treated as constants (integer codes, masks; float leaves get zero cotangents).

Opt-in storage (:func:`sweep`'s ``reduction``, ``short``, ``out``, ``banded``; the expected
partition function with dangles 2 uses them all, the plain partition function none, its
program unchanged): a :class:`Reduction` (a soft minimum over chunks, computed and pulled
back one chunk at a time), channels read only by the next few diagonals (their cotangents
kept for those alone), output channels (the cotangent coming in is theirs), and band tables
(:func:`layouts`: a table per band holding the columns its diagonals compute).

>>> import jax.numpy as jnp
>>> def rows_fn(d, R, diff, fixed, height, width):   # x * (1 + the previous diagonal)
...     prev = R.T((ROW_PAD + d - 1, 0, 0), (1, 1, height))[0]
...     return diff["x"] * (1 + jnp.where(prev >= INF / 2, 0.0, prev))
>>> f = lambda x: sweep(rows_fn, 6, 1, 0, {"x": x}, {}, 0.0)[0][ROW_PAD + 5, 0, 0]
>>> float(f(2.0)), float(jax.grad(f)(2.0))
(6.0, 5.0)
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.energy.fill import sweep_bands
from jaxrna.energy.params import INF
from jaxrna.energy.terms import COL_PAD, ROW_PAD


class Layout(NamedTuple):
    """Where a band's diagonals are stored: table ``name``, its rows the tables' rows from
    ``off`` on (row ``ROW_PAD + d - off`` holds diagonal d), its ``shape``."""

    name: str
    off: int
    shape: tuple


def layouts(length: int, channels: int, banded: bool = False) -> list[Layout]:
    """Each band's :class:`Layout`: one table ``T`` on the padded square, or (``banded``)
    a table per band ``B0, B1, ...`` holding its diagonals, the ``ROW_PAD`` before them (a
    halo, copied from the band before) and the columns its diagonals compute, ``length -
    d0 + COL_PAD`` (with four bands 0.65 of the square at 3,072 nt).

    >>> [(x.name, x.off, x.shape) for x in layouts(384, 2, True)]
    [('B0', 4, (230, 2, 420)), ('B1', 194, (230, 2, 230))]
    """
    if not banded:
        return [Layout("T", 0, (ROW_PAD + length, channels, length + COL_PAD))
                for _ in bands(length)]
    return [Layout(f"B{b}", d0, (ROW_PAD + d1 - d0, channels, length - d0 + COL_PAD))
            for b, (d0, d1) in enumerate(bands(length))]


class Reader:
    """What a diagonal's ``rows_fn`` reads the tables through: ``T(start, size)``,
    ``V(start, size)`` and ``read(name, start, size)`` (a table of ``diff`` that the sweep
    reads by windows, such as a row of the pair bonus) are ``jax.lax.dynamic_slice`` windows
    (starts may be traced, sizes static). The outside pass differentiates ``rows_fn`` with
    respect to the windows it read (their values replayed in the order they were read) and
    adds their cotangents into the tables' cotangents in place: a diagonal costs its windows,
    not a pass over whole tables. With band tables (``layout``, :func:`layouts`), ``T``
    reads the current band's table (rows of the ``ROW_PAD`` diagonals before the band
    included) and ``far`` any band's.

    >>> R = Reader({"T": jnp.arange(12.0).reshape(1, 3, 4), "V": jnp.zeros((2, 2))})
    >>> R.T((0, 1, 1), (1, 1, 2)).ravel().tolist(), R.shape, len(R.windows)
    ([5.0, 6.0], (1, 3, 4), 1)
    """

    def __init__(self, tables, replay=None, layout=None, band=0):
        self._tables = tables
        self._replay = replay
        self._layout, self._band = layout, band
        self.windows = []                 # (table name, start, size), in reading order
        self.values = []
        own = tables["T"] if layout is None else tables[layout[band].name]
        self.dtype, self.shape = own.dtype, own.shape

    def read(self, name, start, size):
        """The window ``tables[name][start : start + size]`` (every axis)."""
        start, size = tuple(start), tuple(int(x) for x in size)
        k = len(self.windows)
        self.windows.append((name, start, size))
        value = (jax.lax.dynamic_slice(self._tables[name], start, size)
                 if self._replay is None else self._replay[k])
        self.values.append(value)
        return value

    def T(self, start, size):
        """The window ``T[start : start + size]`` (rows of diagonals from the current band's
        first minus ``ROW_PAD`` on)."""
        if self._layout is None:
            return self.read("T", start, size)
        own = self._layout[self._band]
        return self.read(own.name, (start[0] - own.off, *start[1:]), size)

    def far(self, start, size, anchor):
        """``(window, column start)``: the window of ``T`` at rows ``start[0] ..``, its
        columns from ``start[2]`` moved left as far as the table needs (the start used is
        returned). With band tables, it is read from the band holding row ``anchor`` (traced;
        the window must lie in that band's rows, its halo included)."""
        if self._layout is None:
            c0 = jnp.clip(start[2], 0, self.shape[2] - size[2])
            return self.read("T", (start[0], start[1], c0), size), c0
        out = c_out = None
        for b in range(self._band + 1):
            lay = self._layout[b]
            r0 = jnp.clip(start[0] - lay.off, 0, lay.shape[0] - size[0])
            c0 = jnp.clip(start[2], 0, lay.shape[2] - size[2])
            w = self.read(lay.name, (r0, start[1], c0), size)
            here = anchor >= ROW_PAD + lay.off
            out = w if out is None else jnp.where(here, w, out)
            c_out = c0 if c_out is None else jnp.where(here, c0, c_out)
        return out, c_out

    def V(self, start, size):
        """The window ``V[start : start + size]``."""
        return self.read("V", start, size)


class Reduction(NamedTuple):
    """A soft minimum over chunks that a diagonal's rows need (the dangles-2 segment split
    over its split point): ``chunk(k, d, R, diff, fixed, height, width)`` is chunk k's soft
    minimum (any shape; it reads the tables through ``R`` as ``rows_fn`` does), ``count(d,
    width)`` how many chunks diagonal d needs (may be traced), ``max_count(width)`` a static
    bound (chunks past ``count`` must be all ``INF``: JAX's reverse mode runs that many),
    ``beta(diff)`` the soft minimum's ``1 / kT``. The sweep computes ``acc = softmin_k
    chunk(k)`` (``-ln sum exp(-beta x) / beta``, exact and associative) in a rolled loop and
    passes it to ``rows_fn(..., reduced=acc)``; the outside pass pulls each chunk back in a
    second loop (``d acc / d chunk_k = exp(-beta (chunk_k - acc))``), so that neither keeps
    more than one chunk's temporaries (the whole split of one diagonal was O(width x height x
    384) floats, and its reverse-mode residuals as much)."""

    chunk: Callable
    count: Callable
    max_count: Callable
    beta: Callable


def _softmin2(a, b, beta):
    return -jnp.logaddexp(-beta * a, -beta * b) / beta


def _reduce(reduction, d, tables, rest, fixed, height, width, dynamic, layout=None, band=0):
    """``softmin_k chunk(k)`` over diagonal d's chunks: ``count(d)`` of them (a while loop)
    where ``dynamic``, else ``max_count`` (a static loop, which JAX's reverse mode runs)."""
    beta = reduction.beta(rest)

    def chunk(k):
        R = Reader(tables, layout=layout, band=band)
        return reduction.chunk(k, d, R, rest, fixed, height, width)

    count = (reduction.count(d, width) if dynamic
             else int(reduction.max_count(width)))
    return jax.lax.fori_loop(1, count, lambda k, acc: _softmin2(acc, chunk(k), beta),
                             chunk(0))


def _add_window(table, start, value):
    """``table[start : start + value.shape] += value``, in place in a loop carry."""
    return jax.lax.dynamic_update_slice(
        table, jax.lax.dynamic_slice(table, start, value.shape) + value.astype(table.dtype), start)


def _write(T, V, rows, d, length, copy, off=0):
    T = jax.lax.dynamic_update_slice(T, rows[None], (ROW_PAD + d - off if off else ROW_PAD + d,
                                                     0, 0))
    V = jax.lax.dynamic_update_slice(V, rows[copy][None, :], (length - 1 - d, d))
    return T, V


#: Padded lengths up to this sweep in one band (each band is its own loop body, forward and
#: outside: at short lengths compiling a second costs more than the cells it saves).
ONE_BAND_MAX = 256


def bands(length: int) -> list[tuple[int, int]]:
    """The sweep's bands of diagonals: one up to :data:`ONE_BAND_MAX`, then the MFE fill's
    (none below 5 positions).

    >>> bands(128), bands(384)
    ([(4, 128)], [(4, 194), (194, 384)])
    """
    if length <= 4:
        return []
    return [(4, length)] if length <= ONE_BAND_MAX else sweep_bands(length)


def _split(diff, windowed):
    """``diff`` without the tables read by windows, and those tables."""
    return ({k: v for k, v in diff.items() if k not in windowed},
            {k: diff[k] for k in windowed})


def _forward(rows_fn, length, channels, copy, diff, fixed, init, windowed, reduction, dynamic,
             banded):
    """``({name: table}, V)``, the tables of :func:`layouts`."""
    dtype = jnp.result_type(*jax.tree.leaves(diff))
    lays = layouts(length, channels, banded)
    T = jnp.full(lays[0].shape if lays else (ROW_PAD + length, channels, length + COL_PAD),
                 init, dtype)
    V = jnp.full((2 * length + 1, 2 * length + 1), init, dtype)
    rest, extra = _split(diff, windowed)
    stored = {} if lays else {"T": T}
    for b, (d0, d1) in enumerate(bands(length)):
        lay = lays[b]
        if banded and b > 0:    # the halo: the previous band's last ROW_PAD diagonals
            prev = lays[b - 1]
            T = jnp.full(lay.shape, init, dtype).at[:ROW_PAD].set(jax.lax.slice(
                stored[prev.name], (d0 - prev.off, 0, 0),
                (d0 - prev.off + ROW_PAD, channels, lay.shape[2])))

        def body(d, carry, b=b, lay=lay, height=length - d0, width=d1):
            T, V = carry
            tables = {**stored, lay.name: T, "V": V, **extra}
            R = Reader(tables, layout=lays if banded else None, band=b)
            if reduction is None:
                rows = rows_fn(d, R, rest, fixed, height, width)
            else:
                acc = _reduce(reduction, d, tables, rest, fixed, height, width, dynamic,
                              lays if banded else None, b)
                rows = rows_fn(d, R, rest, fixed, height, width, reduced=acc)
            rows = rows.astype(dtype)
            # the rows (which read V) before V's write: XLA writes V in place instead of
            # copying it on every diagonal (the written row does not depend on the read)
            rows, V = jax.lax.optimization_barrier((rows, V))
            return _write(T, V, rows, d, length, copy, lay.off)

        T, V = jax.lax.fori_loop(d0, d1, body, (T, V))
        stored[lay.name] = T
    return stored, V


def forward(rows_fn, length, channels, copy, diff, fixed, init=INF, windowed=(),
            reduction=None, short=None, out=None, banded=False):
    """:func:`sweep`'s outputs ``(T, V)`` (``init`` where not computed) with JAX's own
    derivative (its reverse mode); the arguments are :func:`sweep`'s (``short`` changes only
    the outside pass: here it is accepted and unused).
    ``windowed``: the keys of ``diff`` (a dict) that ``rows_fn`` reads through its reader
    (``R.read(key, ...)``) instead of from ``diff``, which does not hold them.
    ``reduction``: a :class:`Reduction` whose result ``rows_fn`` takes as ``reduced=`` (here
    every diagonal runs its static number of chunks, which reverse mode can differentiate)."""
    _check_storage(short, out, banded)
    stored, V = _forward(rows_fn, length, channels, copy, diff, fixed, init, windowed,
                         reduction, False, banded)
    return _out(stored, out, length, channels, init, banded), V


def _check_storage(short, out, banded):
    if (short is not None or banded) and out is None:
        raise ValueError("short channels and band tables need the output channels (out)")


def _out(stored, out, length, channels, init, banded):
    """``T``'s channels ``out`` on the padded square (from the band tables if ``banded``)."""
    if not banded:
        T = stored["T"]
        return T if out is None else T[:, out[0]:out[1]]
    lo, hi = out
    T = None
    for lay, (d0, d1) in zip(layouts(length, channels, True), bands(length)):
        part = stored[lay.name][ROW_PAD:, lo:hi]
        if T is None:
            T = jnp.full((ROW_PAD + length, hi - lo, length + COL_PAD), init, part.dtype)
        T = jax.lax.dynamic_update_slice(T, part, (ROW_PAD + d0, 0, 0))
    return T


def sweep(rows_fn, length, channels, copy, diff, fixed, init=INF, windowed=(), reduction=None,
          short=None, out=None, banded=False):
    """:func:`forward` whose derivative is the outside pass (see the module): ``(T, V)``,
    ``T``'s channels ``out`` (all by default). Opt-in storage: ``short``: ``(c0, reach)``,
    the channels from ``c0`` on are read only from the ``reach`` diagonals before the
    reader's (the outside pass keeps their cotangents for ``reach + 1`` diagonals, not the
    whole square); ``out``: ``(lo, hi)``, the channels of ``T`` returned (its cotangent that
    size; needed with ``short`` and ``banded``, and ``hi <= c0``); ``banded``: the tables
    and their cotangents stored by band (:func:`layouts`)."""
    _check_storage(short, out, banded)
    return _sweep(rows_fn, length, channels, copy, diff, fixed, init, windowed, reduction,
                  short, out, banded)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1, 2, 3, 6, 7, 8, 9, 10, 11))
def _sweep(rows_fn, length, channels, copy, diff, fixed, init, windowed, reduction, short, out,
           banded):
    stored, V = _forward(rows_fn, length, channels, copy, diff, fixed, init, windowed,
                         reduction, True, banded)
    return _out(stored, out, length, channels, init, banded), V


def _sweep_fwd(rows_fn, length, channels, copy, diff, fixed, init, windowed, reduction, short,
               out, banded):
    stored, V = _forward(rows_fn, length, channels, copy, diff, fixed, init, windowed,
                         reduction, True, banded)
    return ((_out(stored, out, length, channels, init, banded), V),
            (stored, V, diff, fixed))


def _channel(name, start, size, channels):
    """The channel of a window of ``T`` that reads one channel of several (a static start),
    else None."""
    if name == "T" and size[1] == 1 < channels and isinstance(start[1], (int, np.integer)):
        return int(start[1])
    return None


def _bars(stored, Tbar, lays, length, channels, c_long, out, banded, short):
    """The tables' cotangents (``c_long`` channels) from the output's, ``Tbar``."""
    if out is None and short is None:
        return {"T": Tbar}
    lo, hi = out
    if hi > c_long:
        raise ValueError(f"the output channels {out} reach the short ones ({short})")
    if not banded:
        T = stored["T"]
        return {"T": jax.lax.dynamic_update_slice(
            jnp.zeros((T.shape[0], c_long, T.shape[2]), T.dtype), Tbar.astype(T.dtype),
            (0, lo, 0))}
    bars = {}
    for lay, (d0, d1) in zip(lays, bands(length)):
        part = jax.lax.slice(Tbar, (ROW_PAD + d0, 0, 0),
                             (ROW_PAD + d1, hi - lo, lay.shape[2]))
        bars[lay.name] = jax.lax.dynamic_update_slice(
            jnp.zeros((lay.shape[0], c_long, lay.shape[2]), Tbar.dtype), part, (ROW_PAD, lo, 0))
    return bars


def _sweep_bwd(rows_fn, length, channels, copy, init, windowed, reduction, short, out, banded,
               res, cts):
    stored, V, diff, fixed = res
    lays = layouts(length, channels, banded)
    offs = {lay.name: lay.off for lay in lays}
    layout = lays if banded else None
    rest, extra = _split(diff, windowed)
    tables = {**stored, "V": V, **extra}
    Tbar, Vbar = cts
    c_long, reach = short if short is not None else (channels, 0)
    dtype = Vbar.dtype
    bars = {**_bars(stored, Tbar, lays, length, channels, c_long, out, banded, short),
            "V": Vbar, **jax.tree.map(jnp.zeros_like, extra)}
    width = length + COL_PAD
    if short is not None:   # the short channels' cotangents, diagonals d - reach .. d
        bars["S"] = jnp.zeros((reach + 1, channels - c_long, width), dtype)

    def rows(d, R, rest, height, width, acc):
        if reduction is None:
            return rows_fn(d, R, rest, fixed, height, width)
        return rows_fn(d, R, rest, fixed, height, width, reduced=acc)

    # Windows of one channel of T (the multiloop split's rows of M) gather their cotangents
    # in a 2-D table of that channel, added to a diagonal's cotangent when its turn comes:
    # XLA (GPU) updates such a table in place, where the same window added into the 3-D
    # cotangent of T was a copy of that whole cotangent on every diagonal (H100: 41% of a
    # 2,048-nt record's device time; with the 2-D tables one 4,096-nt record took 2.87 s
    # against 5.65 s, BENCHMARKS.md "Sixteenth session").
    side = set()
    nb = len(bands(length))
    for d0, d1 in bands(length)[-1:]:   # every band reads the same windows' channels
        probe = Reader(tables, layout=layout, band=nb - 1)   # (a trace for the windows'
        acc = (None if reduction is None else                # shapes only: dead code)
               reduction.chunk(0, d1 - 1, Reader(tables, layout=layout, band=nb - 1), rest,
                               fixed, length - d0, d1))
        rows(d1 - 1, probe, rest, length - d0, d1, acc)
        side = {c for (name, start, size) in probe.windows
                if (c := _channel(name, start, size, channels)) is not None and c < c_long}
    for c in sorted(side):
        bars[f"T@{c}"] = jnp.zeros((ROW_PAD + length, width), dtype)

    def add(bars, windows, wbars, d):
        bars = dict(bars)
        for (name, start, size), wbar in zip(windows, wbars):
            c = _channel(name, start, size, channels)
            if c is not None and c in side:
                bars[f"T@{c}"] = _add_window(bars[f"T@{c}"], (start[0], start[2]),
                                             wbar[:, 0, :])
            elif name in offs and short is not None:
                bars = _add_short(bars, name, offs[name], start, size, wbar, c_long, reach, d)
            else:
                bars[name] = _add_window(bars[name], start, wbar)
        return bars

    # Opt-in sweeps (short channels, a reduction, band tables) carry each diagonal's row
    # cotangent, read at the end of the previous diagonal: read at the start of its own,
    # XLA (CPU, 384 nt) fused that read into consumers ordered after the windows' adds and
    # so copied the whole cotangent twice a diagonal
    carried = short is not None or reduction is not None or banded

    def row_cot(bars, d, height, lay):
        row = ROW_PAD + d - lay.off if lay.off else ROW_PAD + d
        rowbar = jax.lax.dynamic_slice(bars[lay.name], (row, 0, 0), (1, c_long, height))[0]
        if short is not None:
            rowbar = jnp.concatenate([rowbar, bars["S"][reach, :, :height]])
        vrow = jax.lax.dynamic_slice(bars["V"], (length - 1 - d, d), (1, height))[0]
        rowbar = rowbar.at[copy].add(vrow)
        for c in sorted(side):
            rowbar = rowbar.at[c].add(
                jax.lax.dynamic_slice(bars[f"T@{c}"], (ROW_PAD + d, 0), (1, height))[0])
        return rowbar

    carry = (bars, jax.tree.map(jnp.zeros_like, rest))
    for b in reversed(range(nb)):
        (d0, d1), lay = bands(length)[b], lays[b]

        def body(k, carry, b=b, lay=lay, d0=d0, d1=d1, height=length - d0):
            bars, dbar = carry[:2]
            d = d1 - 1 - k
            rowbar = carry[2] if carried else row_cot(bars, d, height, lay)
            acc = (None if reduction is None else
                   _reduce(reduction, d, tables, rest, fixed, height, d1, True, layout, b))
            seen = Reader(tables, layout=layout, band=b)   # the windows this diagonal reads
            rows(d, seen, rest, height, d1, acc)   # (its rows unused: dead code)

            def rows_of(values, rest, acc):
                R = Reader(tables, replay=values, layout=layout, band=b)
                return rows(d, R, rest, height, d1, acc).astype(dtype)

            _, pull = jax.vjp(rows_of, seen.values, rest, acc)
            wbars, db, accbar = pull(rowbar)
            bars = add(bars, seen.windows, wbars, d)
            dbar = jax.tree.map(jnp.add, dbar, db)
            if reduction is not None:
                bars, dbar = _pull_chunks(reduction, d, tables, rest, fixed, height, d1,
                                          acc, accbar, functools.partial(add, d=d),
                                          (bars, dbar), layout, b)
            if short is not None:          # diagonal d done: the window moves to d - 1
                bars = {**bars, "S": jnp.concatenate([jnp.zeros_like(bars["S"][:1]),
                                                      bars["S"][:-1]])}
            if carried:                    # diagonal d - 1's cotangent is complete
                return bars, dbar, row_cot(bars, d - 1, height, lay)
            return bars, dbar

        if carried:
            carry = (*carry[:2], row_cot(carry[0], d1 - 1, length - d0, lay))
        carry = jax.lax.fori_loop(0, d1 - d0, body, carry)[:2]
        if banded and b > 0:   # the halo's cotangents to the band before; this band is done
            bars, prev = dict(carry[0]), lays[b - 1]
            bars[prev.name] = _add_window(bars[prev.name], (d0 - prev.off, 0, 0),
                                          bars.pop(lay.name)[:ROW_PAD])
            carry = (bars, carry[1])
    bars, dbar = carry
    dbar = {**dbar, **{k: bars[k] for k in windowed}}

    def zero(x):
        if jnp.issubdtype(jnp.result_type(x), jnp.inexact):
            return jnp.zeros_like(x)
        return np.zeros(np.shape(x), jax.dtypes.float0)

    return dbar, jax.tree.map(zero, fixed)


def _add_short(bars, name, off, start, size, wbar, c_long, reach, d):
    """Adds a window's cotangent of table ``name`` (rows from ``off``) read by diagonal d:
    its channels below ``c_long`` into ``bars[name]``, the others into the rows of
    ``bars["S"]`` (diagonals ``d - reach .. d``). The window's channel start must be static."""
    if not isinstance(start[1], (int, np.integer)):
        raise TypeError("with short channels, a window's channel start must be static")
    c1, c2 = int(start[1]), int(start[1]) + size[1]
    bars = dict(bars)
    if c1 < c_long:
        bars[name] = _add_window(bars[name], start, wbar[:, :min(c2, c_long) - c1])
    if c2 > c_long:
        slot = start[0] - (ROW_PAD + d - off - reach)
        part = wbar[:, max(c1, c_long) - c1:]
        bars["S"] = _add_window(bars["S"], (slot, max(c1, c_long) - c_long, start[2]), part)
    return bars


def _pull_chunks(reduction, d, tables, rest, fixed, height, width, acc, accbar, add, carry,
                 layout=None, band=0):
    """The outside pass through diagonal d's reduction: chunk k's share of ``acc``'s
    cotangent, ``accbar * exp(-beta (chunk_k - acc))``, pulled back through chunk k (its
    windows' cotangents added into the tables'), one chunk at a time. Differentiating
    ``-exp(-beta (chunk_k - acc)) / beta`` (``beta`` held for the factor only) gives both
    the chunk's weight and the derivative through ``beta`` (``diff``'s ``kT``)."""
    acc = jax.lax.stop_gradient(acc)
    scale = jax.lax.stop_gradient(reduction.beta(rest))

    def body(k, carry):
        bars, dbar = carry
        seen = Reader(tables, layout=layout, band=band)
        reduction.chunk(k, d, seen, rest, fixed, height, width)   # (dead code: the windows)

        def share(values, rest):
            R = Reader(tables, replay=values, layout=layout, band=band)
            v = reduction.chunk(k, d, R, rest, fixed, height, width)
            return -jnp.exp(-reduction.beta(rest) * (v - acc)) / scale

        _, pull = jax.vjp(share, seen.values, rest)
        wbars, db = pull(accbar)
        return add(bars, seen.windows, wbars), jax.tree.map(jnp.add, dbar, db)

    return jax.lax.fori_loop(0, reduction.count(d, width), body, carry)


_sweep.defvjp(_sweep_fwd, _sweep_bwd)
