"""Traceback on the device, for one sequence or a padded batch: only the partners come back.

The walk is :func:`jaxrna.fold.traceback.traceback` (the host reference) made branch-free:
each step pops one interval ``(i, j)`` and takes the first of "i unpaired", "j unpaired",
"the pair (i, j)" that explains ``N(i, j)``, else looks for the leftmost split ``k``, ``search``
candidates a step (a long interval's search continues over the next steps). Every sequence of
a batch takes one step at a time (``jax.vmap``), ``unroll`` steps per trip of a loop whose
condition is "some sequence is not done", so an accelerator reads a flag back once every
``unroll`` steps, not once per interval. Same preferences as the host, hence the same
structure; ``ok`` is False if a table is inconsistent (never, for a filled table).

Tables are read through ``get(i, j) = N(i, j)`` (0 for ``j < i``), broadcasting over index
arrays: :func:`tile_cell` for the tiled tables of :mod:`jaxrna.fold.blocked`,
:func:`jaxrna.fold.packed.cell` for the packed ones of :mod:`jaxrna.fold.gpu`.

>>> import jax.numpy as jnp, numpy as np
>>> from jaxrna.alphabet import encode
>>> from jaxrna.fold.blocked import blocked_fill
>>> from jaxrna.weights import parse_weights
>>> w = parse_weights("unit").matrix()
>>> codes = np.stack([encode("GGGAAAUCCNNNNNNN"), encode("GCGCAAAGCGCNNNNN")])
>>> tiles = jnp.stack([blocked_fill(c, w, 3, tile=8) for c in codes])
>>> partner, ok = traceback_tiles(tiles, jnp.asarray(codes), jnp.array([9, 11]), w, 3)
>>> partner_pairs(np.asarray(partner[0]), 9), partner_pairs(np.asarray(partner[1]), 11)
([(0, 8), (1, 7), (2, 6)], [(0, 10), (1, 9), (2, 8), (3, 7)])
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

#: Split candidates tested per step.
SEARCH = 64
#: Steps per trip of the outer loop.
UNROLL = 32


def tile_cell(tiles: jax.Array, b, i, j):
    """``N(i, j)`` of sequence ``b`` from a batch of tiled tables ``(B, nb, nb, T, T)``
    (``tiles[b, I, e]`` is tile ``(I, I + e)``); 0 for ``j < i``. One gather."""
    _, nb, _, t, _ = tiles.shape
    i = jnp.asarray(i, jnp.int32)
    j = jnp.asarray(j, jnp.int32)
    ii = jnp.clip(i, 0, nb * t - 1)
    jj = jnp.clip(j, 0, nb * t - 1)
    it, jt = ii // t, jj // t
    v = tiles[b, it, jnp.clip(jt - it, 0, nb - 1), ii % t, jj % t]
    return jnp.where((i <= j) & (i >= 0) & (j < nb * t), v, 0)


def _init(size: int, length):
    n = jnp.asarray(length, jnp.int32)
    stack = jnp.zeros((size + 2, 2), jnp.int32).at[0].set(jnp.stack([jnp.int32(0), n - 1]))
    z = jnp.int32(0)
    return dict(stack=stack, sp=(n > 1).astype(jnp.int32),
                partner=jnp.full((size,), -1, jnp.int32), ok=jnp.bool_(True),
                srch=jnp.bool_(False), si=z, sj=z, sv=z, sk=z)


def _step(get, codes, weights, min_loop: int, search: int, st):
    """One step of one sequence's walk (traceable, vmappable)."""
    size = codes.shape[0]
    stack, sp, partner, ok = st["stack"], st["sp"], st["partner"], st["ok"]
    srch = st["srch"]
    can_pop = (~srch) & (sp > 0) & ok
    top = stack[jnp.maximum(sp - 1, 0)]
    i = jnp.where(can_pop, top[0], 0)
    j = jnp.where(can_pop, top[1], -1)
    sp = sp - can_pop.astype(jnp.int32)
    ij = jnp.stack([i, i + 1, i, i + 1])
    jj = jnp.stack([j, j, j - 1, j - 1])
    v, va, vb, vin = get(ij, jj)
    live = can_pop & (j > i) & (v != 0)
    a_ok = va == v
    b_ok = vb == v
    wgt = weights[codes[jnp.clip(i, 0, size - 1)], codes[jnp.clip(j, 0, size - 1)]]
    p_ok = (wgt > 0) & (j - i > min_loop) & (vin + wgt == v)
    case_a = live & a_ok
    case_b = live & ~a_ok & b_ok
    case_p = live & ~a_ok & ~b_ok & p_ok
    case_s = live & ~a_ok & ~b_ok & ~p_ok
    child = jnp.where(case_a, jnp.stack([i + 1, j]),
                      jnp.where(case_b, jnp.stack([i, j - 1]), jnp.stack([i + 1, j - 1])))
    push1 = case_a | case_b | case_p
    stack = stack.at[sp].set(jnp.where(push1, child, stack[sp]))
    sp = sp + push1.astype(jnp.int32)
    partner = partner.at[jnp.where(case_p, i, size)].set(j, mode="drop")
    partner = partner.at[jnp.where(case_p, j, size)].set(i, mode="drop")
    # the leftmost split: a fresh interval, or the continued search of an earlier one
    busy = srch | case_s
    ci = jnp.where(srch, st["si"], i)
    cj = jnp.where(srch, st["sj"], j)
    cv = jnp.where(srch, st["sv"], v)
    ck = jnp.where(srch, st["sk"], i + 1)
    ks = ck + jnp.arange(search, dtype=jnp.int32)
    hit = busy & (ks <= cj - 2) & (get(ci, ks) + get(ks + 1, cj) == cv)
    found = jnp.any(hit)
    k = ck + jnp.argmax(hit).astype(jnp.int32)
    stack = stack.at[sp].set(jnp.where(found, jnp.stack([k + 1, cj]), stack[sp]))
    stack = stack.at[sp + 1].set(jnp.where(found, jnp.stack([ci, k]), stack[sp + 1]))
    sp = sp + 2 * found.astype(jnp.int32)
    exhausted = busy & ~found & (ck + search > cj - 2)
    return dict(stack=stack, sp=sp, partner=partner, ok=ok & ~exhausted,
                srch=busy & ~found & ~exhausted, si=ci, sj=cj, sv=cv, sk=ck + search)


def _done(st):
    return ((st["sp"] == 0) & ~st["srch"]) | ~st["ok"]


def walk_batch(get_batch, codes: jax.Array, lengths: jax.Array, weights: jax.Array,
               min_loop: int, search: int = SEARCH, unroll: int = UNROLL):
    """The walk of a padded batch: ``get_batch(b, i, j)`` reads sequence ``b``'s table.
    Returns ``(partner (B, size) int32, ok (B,) bool)``. Traceable."""
    B, size = codes.shape
    codes = codes.astype(jnp.int32)
    weights = jnp.asarray(weights, jnp.int32)
    state = jax.vmap(lambda n: _init(size, n))(jnp.asarray(lengths, jnp.int32))
    step = jax.vmap(lambda b, c, st: _step(partial(get_batch, b), c, weights, min_loop, search,
                                           st))
    ids = jnp.arange(B)

    def trip(st):
        return jax.lax.fori_loop(0, unroll, lambda _, s: step(ids, codes, s), st)

    state = jax.lax.while_loop(lambda st: ~jnp.all(_done(st)), trip, state)
    return state["partner"], state["ok"]


@partial(jax.jit, static_argnames=("search", "unroll"))
def traceback_tiles(tiles: jax.Array, codes: jax.Array, lengths: jax.Array, weights: jax.Array,
                    min_loop, search: int = SEARCH, unroll: int = UNROLL):
    """Structures of a batch from its tiled tables ``(B, nb, nb, T, T)``
    (:func:`jaxrna.fold.blocked.blocked_fill`, vmapped): ``(partner, ok)``, ``partner[b, i]``
    the base paired with ``i`` or -1."""
    return walk_batch(partial(tile_cell, tiles), codes, lengths, weights,
                      min_loop, search, unroll)


def partner_pairs(partner: np.ndarray, length: int) -> list[tuple[int, int]]:
    """Sorted pairs ``(i, j)`` from a partner array (host side)."""
    p = np.asarray(partner[:length])
    idx = np.flatnonzero(p > np.arange(length))
    return list(zip(idx.tolist(), p[idx].tolist()))


# ------------------------------------------------------------------------------------------
# the walk as one GPU kernel: one program per sequence, no launch or read-back per step


def _packed_get(tab_ref, nb: int, t: int):
    """``get(i, j)`` on a packed table ref (:mod:`jaxrna.fold.packed`), scalars or vectors."""

    def get(i, j):
        n = nb * t
        valid = (i <= j) & (i >= 0) & (j < n)
        ii = jnp.clip(i, 0, n - 1)
        jj = jnp.clip(j, 0, n - 1)
        it, jt = ii // t, jj // t
        e = jnp.maximum(jt - it, 0)
        slot = e * nb - (e * (e - 1)) // 2 + it
        return jnp.where(valid, tab_ref[slot, ii % t, jj % t], 0)

    return get


def _tiles_get(tiles_ref, nb: int, t: int):
    """``get(i, j)`` on one sequence's tiles ref ``(nb, nb, T, T)``."""

    def get(i, j):
        n = nb * t
        valid = (i <= j) & (i >= 0) & (j < n)
        ii = jnp.clip(i, 0, n - 1)
        jj = jnp.clip(j, 0, n - 1)
        it, jt = ii // t, jj // t
        e = jnp.clip(jt - it, 0, nb - 1)
        return jnp.where(valid, tiles_ref[it, e, ii % t, jj % t], 0)

    return get


def _walk_kernel(len_ref, codes_ref, wtab_ref, table_ref, partner_in_ref, partner_ref,
                 stack_ref, ok_ref, *, layout: str, nb: int, t: int, size: int,
                 search: int, interpret: bool):
    """The walk of :func:`_step` for one sequence, every step inside this one program.

    The stack lives in ``stack_ref`` (pairs flattened), partners go to ``partner_ref``
    (aliased to ``partner_in_ref``, initialised to -1; index ``size`` is a scratch slot for
    the writes a step does not need), ``ok_ref[0]`` is 1 unless the table was inconsistent;
    ``len_ref`` holds the length and ``min_loop`` (traced: one kernel for every value).
    State is kept in int32 scalars (flags 0/1); writes above the top of the stack are
    harmless, so every step writes unconditionally. On a GPU a block barrier follows the
    writes (the next step reads them)."""
    del partner_in_ref
    from jaxrna.kernels.tropical_pallas import barrier

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


def _walk_call(table, codes, weights, lengths, min_loop, *, layout: str, nb: int, t: int,
               search: int, interpret: bool):
    """``(partner (B, size), ok (B,))`` by :func:`_walk_kernel`, one program per row."""
    from jaxrna.kernels.tropical_pallas import compiler_params

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


@partial(jax.jit, static_argnames=("search", "interpret"))
def traceback_packed_kernel(tab: jax.Array, codes: jax.Array, weights: jax.Array, length,
                            min_loop, search: int = 128, interpret: bool = False):
    """:func:`jaxrna.fold.gpu.traceback_device` as one Pallas kernel (one program walks the
    whole structure): ``(partner (size,), ok)``. ``min_loop`` is traced (an argument)."""
    t = tab.shape[-1]
    nb = int(round((np.sqrt(8 * tab.shape[0] + 1) - 1) / 2))
    partner, ok = _walk_call(tab, codes[None], weights, jnp.reshape(length, (1,)), min_loop,
                             layout="packed", nb=nb, t=t, search=search, interpret=interpret)
    return partner[0], ok[0]


@partial(jax.jit, static_argnames=("search", "interpret"))
def traceback_tiles_kernel(tiles: jax.Array, codes: jax.Array, lengths: jax.Array,
                           weights: jax.Array, min_loop, search: int = 64,
                           interpret: bool = False):
    """:func:`traceback_tiles` as one Pallas kernel, one program per sequence (``min_loop``
    traced)."""
    _, nb, _, t, _ = tiles.shape
    return _walk_call(tiles, codes, weights, lengths, min_loop, layout="tiles", nb=nb, t=t,
                      search=search, interpret=interpret)
