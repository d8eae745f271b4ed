"""The Nussinov traceback walk as one Pallas kernel: one program walks one sequence's whole
structure (no launch or read-back per step), on a packed table (:mod:`jaxrna.fold.packed`) or
a batch of tiled ones (:mod:`jaxrna.fold.blocked`). :func:`walk_call` launches it;
:func:`jaxrna.fold.walk.traceback_packed_kernel` and
:func:`jaxrna.fold.walk.traceback_tiles_kernel` are its entry points, and
:func:`jaxrna.fold.walk.walk_batch` its pure-JAX path (the same preferences, so the same
structure). Runs in Pallas' interpret mode on a CPU (``interpret=True``; the tests).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from jaxrna.kernels.tropical_pallas import barrier, compiler_params


def _tile_coords(i, j, nb: int, t: int):
    """Where cell (i, j) of an ``nb * t`` table lies: whether it exists (i <= j, both inside),
    its clipped indices and their tile rows and columns."""
    n = nb * t
    valid = (i <= j) & (i >= 0) & (j < n)
    ii = jnp.clip(i, 0, n - 1)
    jj = jnp.clip(j, 0, n - 1)
    return valid, ii, jj, ii // t, jj // t


def _packed_get(tab_ref, nb: int, t: int):
    """``get(i, j)`` on a packed table ref (:mod:`jaxrna.fold.packed`), scalars or vectors."""

    def get(i, j):
        valid, ii, jj, it, jt = _tile_coords(i, j, nb, t)
        e = jnp.maximum(jt - it, 0)
        slot = e * nb - (e * (e - 1)) // 2 + it
        return jnp.where(valid, tab_ref[slot, ii % t, jj % t], 0)

    return get


def _tiles_get(tiles_ref, nb: int, t: int):
    """``get(i, j)`` on one sequence's tiles ref ``(nb, nb, T, T)``."""

    def get(i, j):
        valid, ii, jj, it, jt = _tile_coords(i, j, nb, t)
        e = jnp.clip(jt - it, 0, nb - 1)
        return jnp.where(valid, tiles_ref[it, e, ii % t, jj % t], 0)

    return get


def _walk_kernel(len_ref, codes_ref, wtab_ref, table_ref, partner_in_ref, partner_ref,
                 stack_ref, ok_ref, *, layout: str, nb: int, t: int, size: int,
                 search: int, interpret: bool):
    """The walk of :func:`jaxrna.fold.walk.walk_batch` (its step) for one sequence, every step
    inside this one program.

    The stack lives in ``stack_ref`` (pairs flattened), partners go to ``partner_ref``
    (aliased to ``partner_in_ref``, initialised to -1; index ``size`` is a scratch slot for
    the writes a step does not need), ``ok_ref[0]`` is 1 unless the table was inconsistent;
    ``len_ref`` holds the length and ``min_loop`` (traced: one kernel for every value).
    State is kept in int32 scalars (flags 0/1); writes above the top of the stack are
    harmless, so every step writes unconditionally. On a GPU a block barrier follows the
    writes (the next step reads them)."""
    del partner_in_ref

    get = (_packed_get if layout == "packed" else _tiles_get)(table_ref, nb, t)
    n = len_ref[0]
    min_loop = len_ref[1]
    one = jnp.int32(1)
    zero = jnp.int32(0)
    big = jnp.int32(1 << 30)
    stack_ref[0] = zero
    stack_ref[1] = n - 1
    barrier(interpret)
    lanes = jax.lax.broadcasted_iota(jnp.int32, (search,), 0)

    def cond(st):
        sp, ok, srch = st[0], st[1], st[2]
        return ((sp > 0) | (srch > 0)) & (ok > 0)

    def body(st):
        sp, ok, srch, si, sj, sv, sk = st
        can_pop = (srch == 0) & (sp > 0)
        top = jnp.maximum(sp - 1, 0)
        ti = stack_ref[2 * top]
        tj = stack_ref[2 * top + 1]
        i = jnp.where(can_pop, ti, zero)
        j = jnp.where(can_pop, tj, -one)
        sp = sp - can_pop.astype(jnp.int32)
        v = get(i, j)
        va = get(i + 1, j)
        vb = get(i, j - 1)
        vin = get(i + 1, j - 1)
        live = can_pop & (j > i) & (v != 0)
        a_ok = va == v
        b_ok = vb == v
        ci_code = codes_ref[jnp.clip(i, 0, size - 1)]
        cj_code = codes_ref[jnp.clip(j, 0, size - 1)]
        wgt = wtab_ref[ci_code * 5 + cj_code]
        p_ok = (wgt > 0) & (j - i > min_loop) & (vin + wgt == v)
        case_a = live & a_ok
        case_b = live & ~a_ok & b_ok
        case_p = live & ~a_ok & ~b_ok & p_ok
        case_s = live & ~a_ok & ~b_ok & ~p_ok
        push1 = case_a | case_b | case_p
        stack_ref[2 * sp] = jnp.where(case_b, i, i + 1)
        stack_ref[2 * sp + 1] = jnp.where(case_a, j, j - 1)
        sp = sp + push1.astype(jnp.int32)
        partner_ref[jnp.where(case_p, i, size)] = j
        partner_ref[jnp.where(case_p, j, size)] = i
        busy = (srch > 0) | case_s
        ci = jnp.where(srch > 0, si, i)
        cj = jnp.where(srch > 0, sj, j)
        cv = jnp.where(srch > 0, sv, v)
        ck = jnp.where(srch > 0, sk, i + 1)
        ks = ck + lanes
        hit = busy & (ks <= cj - 2) & (get(ci, ks) + get(ks + 1, cj) == cv)
        k = jnp.min(jnp.where(hit, ks, big))
        found = k < big
        stack_ref[2 * sp] = k + 1
        stack_ref[2 * sp + 1] = cj
        stack_ref[2 * sp + 2] = ci
        stack_ref[2 * sp + 3] = k
        sp = sp + 2 * found.astype(jnp.int32)
        exhausted = busy & ~found & (ck + search > cj - 2)
        ok = jnp.where(exhausted, zero, ok)
        srch = (busy & ~found & ~exhausted).astype(jnp.int32)
        barrier(interpret)
        return sp, ok, srch, ci, cj, cv, ck + search

    start = (jnp.where(n > 1, one, zero), one, zero, zero, zero, zero, zero)
    final = jax.lax.while_loop(cond, body, start)
    ok_ref[0] = final[1]


def walk_call(table, codes, weights, lengths, min_loop, *, layout: str, nb: int, t: int,
               search: int, interpret: bool):
    """``(partner (B, size), ok (B,))`` by :func:`_walk_kernel`, one program per row:
    ``layout`` "packed" (``table`` a packed table, :mod:`jaxrna.fold.packed`) or "tiles"
    (``table`` a batch of tiled tables ``(B, nb, nb, T, T)``)."""

    B, size = codes.shape
    codes = codes.astype(jnp.int32)
    wtab = jnp.asarray(weights, jnp.int32).reshape(-1)
    lengths = jnp.asarray(lengths, jnp.int32).reshape(B, 1)
    lengths = jnp.concatenate(                         # [length, min_loop] per row
        [lengths, jnp.broadcast_to(jnp.asarray(min_loop, jnp.int32), (B, 1))], axis=1)
    partner0 = jnp.full((B, size + 1), -1, jnp.int32)
    if layout == "packed":
        table_spec = pl.no_block_spec                  # the whole table, read by index
    else:
        table_spec = pl.BlockSpec((None,) + table.shape[1:], lambda b: (b, 0, 0, 0, 0))
    row = lambda width: pl.BlockSpec((None, width), lambda b: (b, 0))  # noqa: E731
    partner, _, ok = pl.pallas_call(
        partial(_walk_kernel, layout=layout, nb=nb, t=t, size=size, search=search,
                interpret=interpret),
        out_shape=(jax.ShapeDtypeStruct((B, size + 1), jnp.int32),
                   jax.ShapeDtypeStruct((B, 2 * size + 8), jnp.int32),
                   jax.ShapeDtypeStruct((B, 1), jnp.int32)),
        grid=(B,),
        in_specs=[row(2), row(size), pl.BlockSpec((25,), lambda b: (0,)), table_spec,
                  row(size + 1)],
        out_specs=(row(size + 1), row(2 * size + 8), row(1)),
        input_output_aliases={4: 0},
        interpret=interpret,
        compiler_params=None if interpret else compiler_params(1, 1),
        name="nussinov_traceback",
    )(lengths, codes, wtab, table, partner0)
    return partner[:, :size], ok[:, 0] > 0
