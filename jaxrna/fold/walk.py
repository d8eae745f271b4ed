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

from jaxrna.kernels.fold_walk_pallas import walk_call

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
# the walk as one GPU kernel (:mod:`jaxrna.kernels.fold_walk_pallas`)

@partial(jax.jit, static_argnames=("search", "interpret"))
def traceback_packed_kernel(tab: jax.Array, codes: jax.Array, weights: jax.Array, length,
                            min_loop, search: int = 128, interpret: bool = False):
    """:func:`jaxrna.fold.gpu.traceback_device` as one Pallas kernel (one program walks the
    whole structure): ``(partner (size,), ok)``. ``min_loop`` is traced (an argument)."""
    t = tab.shape[-1]
    nb = int(round((np.sqrt(8 * tab.shape[0] + 1) - 1) / 2))
    partner, ok = walk_call(tab, codes[None], weights, jnp.reshape(length, (1,)), min_loop,
                             layout="packed", nb=nb, t=t, search=search, interpret=interpret)
    return partner[0], ok[0]


@partial(jax.jit, static_argnames=("search", "interpret"))
def traceback_tiles_kernel(tiles: jax.Array, codes: jax.Array, lengths: jax.Array,
                           weights: jax.Array, min_loop, search: int = 64,
                           interpret: bool = False):
    """:func:`traceback_tiles` as one Pallas kernel, one program per sequence (``min_loop``
    traced)."""
    _, nb, _, t, _ = tiles.shape
    return walk_call(tiles, codes, weights, lengths, min_loop, layout="tiles", nb=nb, t=t,
                      search=search, interpret=interpret)
