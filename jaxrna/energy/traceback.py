"""Traceback of the filled tables to one optimal structure, on the device.

A ``lax.while_loop`` over a stack of cells to explain: ``F(k)`` (exterior loop over k bases),
``C(i, j)``, ``M(i, j)`` and ``M2(i, j)``. Each step lists the cell's candidates with the same
code the fill used (:mod:`jaxrna.energy.terms`, through a one-cell view), takes the first
whose energy equals the cell's value and pushes what it decomposes into. The result is a
partner array (-1 for unpaired bases) and a flag that every step found its candidate.

"First" is ViennaRNA 2.8's backtracking order, so where several structures share the
minimum energy the structure is RNAfold's (tests/test_energy_ties.py):

- ``F(k)``: base k-1 unpaired; else the last branch starting furthest right (with dangles 1,
  one starting at base 0 before all others), and for one start the forms of
  :data:`~jaxrna.energy.terms.EXTERIOR_SHIFTS` in order;
- ``C(i, j)``: the hairpin; the interior loops by (u1, u2), the unpaired bases 5' and 3' of the
  inner pair (:func:`pair_rank`); the multiloops in
  :data:`~jaxrna.energy.terms.CLOSING_SHIFTS` order;
- ``M(i, j)``: an unpaired base at j, at i, one branch (:data:`~jaxrna.energy.terms.STEM_SHIFTS`
  order), then ``M2(i, j)``; ``M2(i, j)``: the leftmost split.

Each is a static rank over the same candidate vector as before (one select and one reduction
more per step): the program keeps its size and the fill is untouched.

>>> from jaxrna.energy.params import load_params
>>> from jaxrna.energy.terms import device_params
>>> from jaxrna.energy.fill import prepare, fill_one
>>> p = load_params(); dp = device_params(p, 64)
>>> inp = prepare("GGGGAAACCCC", p, 64)
>>> t = fill_one(inp["s"], inp["allowed"], inp["special"], inp["n"], dp, 2, 11)
>>> partner, ok = traceback_one(t, inp["s"], inp["allowed"], inp["special"], inp["n"], dp, 2)
>>> [int(x) for x in partner[:11]], bool(ok)
([10, 9, 8, 7, -1, -1, -1, 3, 2, 1, 0], True)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.energy import terms
from jaxrna.energy.fill import INDEX, PointsView, along, c_reader, read_cells
from jaxrna.energy.params import MAXLOOP
from jaxrna.energy.terms import COL_PAD, KIND_C, KIND_M, KIND_M2, NONE, ROW_PAD

TASK_F, TASK_C, TASK_M, TASK_M2 = 0, 1, 2, 3


class CellView(PointsView):
    """One cell (i, i + d) as scalars: the same interface as the fill's diagonal view."""

    def __init__(self, T, s, allowed, special, i, d, dp, n):
        super().__init__(s, allowed, special, dp, i, i + d, n)
        self.T = T

    def _at(self, name, dd, di):
        T = self.T
        rows = jnp.clip(ROW_PAD + self.d + dd, 0, T.shape[0] - 1)
        cols = jnp.clip(self.i + di, 0, T.shape[2] - 1)
        return read_cells(T, rows, INDEX[name], cols)

    def tab(self, name, dd, di):
        return self._at(name, dd, di)

    def group_values(self, name, dds, dis, cost):
        return self._at(name, jnp.asarray(dds), jnp.asarray(dis)) + cost


def flatten(cands, v):
    """Energies of every candidate (a vector) and the static child description of each:
    ``(kind, dd, di)`` arrays."""
    energies, kinds, dds, dis = [], [], [], []
    for c in cands:
        if c.cost is not None:
            e = v.group_values(c.table, c.dd, c.di, c.cost) + c.outer
            energies.append(e)
            kinds += [c.kind] * len(c.dd)
            dds += list(np.asarray(c.dd))
            dis += list(np.asarray(c.di))
        else:
            energies.append(jnp.reshape(c.energy, (1,)))
            kinds.append(c.kind)
            dds.append(c.dd)
            dis.append(c.di)
    return (jnp.concatenate(energies), np.array(kinds, np.int32), np.array(dds, np.int32),
            np.array(dis, np.int32))


_TASK_OF_KIND = {NONE: -1, KIND_C: TASK_C, KIND_M: TASK_M, KIND_M2: TASK_M2}


def _first(hit):
    """Index of the first True (and whether there is one)."""
    idx = jnp.argmax(hit)
    return idx, hit[idx]


def pair_rank(kinds: np.ndarray, dds: np.ndarray, dis: np.ndarray) -> np.ndarray:
    """The order in which ViennaRNA's backtracking tries the candidates of ``C(i, j)``
    (:func:`flatten`'s static description of :func:`jaxrna.energy.terms.pair_candidates`): the
    hairpin, then every interior loop by its unpaired bases 5' of the inner pair (u1), then 3'
    of it (u2) (ViennaRNA's inner pair p ascending, q descending), then the multiloops in
    :data:`~jaxrna.energy.terms.CLOSING_SHIFTS` order. A rank per candidate (lower first).

    >>> # a multiloop, the bulges 3' (u1, u2) = (0, 1) and 5' (1, 0) of the inner pair, a hairpin
    >>> pair_rank(np.array([KIND_M2, KIND_C, KIND_C, NONE]), np.array([-2, -3, -3, 0]),
    ...           np.array([1, 1, 2, 0])).tolist()
    [3, 1, 2, 0]
    """
    u1 = dis - 1
    u2 = -dds - 2 - u1
    interior = 1 + u1 * (MAXLOOP + 1) + u2
    multi = 1 + (MAXLOOP + 1) ** 2 + np.arange(len(kinds))
    rank = np.where(kinds == NONE, 0, np.where(kinds == KIND_C, interior, multi))
    return np.argsort(np.argsort(rank, kind="stable"), kind="stable").astype(np.int32)  # 0..n-1


def _first_by(hit, rank: np.ndarray):
    """Index of the True of lowest static ``rank`` (and whether there is one)."""
    idx = jnp.argmin(jnp.where(hit, jnp.asarray(rank), len(rank)))
    return idx, hit[idx]


def traceback(tables: dict, s: jax.Array, allowed: jax.Array, special: jax.Array, n: jax.Array,
              dp: dict, dangles, debug: bool = False, enabled=True):
    """Partner array (int32, -1 unpaired) of one optimal structure of one sequence, and a
    flag that the traceback succeeded. Arguments as for :func:`jaxrna.energy.fill.fill`
    (``tables`` its result; ``debug``: return the final loop state instead, to inspect a
    failure). ``enabled`` (may be traced): False skips the loop (no step runs; the result is
    then meaningless), so energies-only runs share the program that traces back."""
    length = special.shape[1] - COL_PAD
    cap = 2 * length + 16
    T = tables["T"]
    get_c = c_reader(T, length)
    F = tables["F"]
    pos = jnp.arange(length, dtype=jnp.int32)
    ext_shifts = terms.EXTERIOR_SHIFTS
    a_offs = jnp.asarray([a for a, _ in ext_shifts], jnp.int32)
    forms = jnp.arange(len(ext_shifts), dtype=jnp.int32)

    def step_f(k):
        # returns up to two tasks (kind, a, b), kind -1 for none
        j = k - 1
        same = F[k] == F[jnp.maximum(k - 1, 0)]
        v = PointsView(s, allowed, special, dp, pos, j, n)
        e = jnp.stack([F[:length] + get_c(pos + a, j + b) + x
                       for x, (a, b) in zip(terms.exterior_terms(v, dp, dangles), ext_shifts)])
        hit = (e == F[k]) & (pos[None, :] <= j)
        # ViennaRNA's order: the branch starting furthest right first (with dangles 1 one
        # starting at base 0 before all), then the forms in EXTERIOR_SHIFTS order (no dangle,
        # 5' dangle, 3' dangle, both)
        start = pos[None, :] + a_offs[:, None]
        start = jnp.where((start == 0) & (dangles == 1), length, start)
        idx = jnp.argmax(jnp.where(hit, start * 4 + (3 - forms[:, None]), -1).reshape(-1))
        found = hit.reshape(-1)[idx]
        which, i = idx // length, idx % length
        a_off = jnp.asarray([a for a, _ in ext_shifts], jnp.int32)[which]
        b_off = jnp.asarray([b for _, b in ext_shifts], jnp.int32)[which]
        t1 = jnp.where(same, jnp.array([TASK_F, k - 1, 0]), jnp.array([TASK_F, i, 0]))
        t2 = jnp.where(same, jnp.array([-1, 0, 0]), jnp.stack([TASK_C, i + a_off, j + b_off]))
        ok = same | found
        return t1, t2, ok, jnp.array([-1, -1])

    def cell(i, j):
        v = CellView(T, s, allowed, special, i, j - i, dp, n)
        return v, terms.pair_terms(v, dp, dangles)

    def step_c(i, j, v, tm):
        e, kinds, dds, dis = flatten(terms.pair_candidates(v, tm, dp), v)
        idx, found = _first_by(e == v.tab("C", 0, 0), pair_rank(kinds, dds, dis))
        kind = jnp.asarray([_TASK_OF_KIND[k] for k in kinds.tolist()], jnp.int32)[idx]
        ci = i + jnp.asarray(dis)[idx]
        cd = (j - i) + jnp.asarray(dds)[idx]
        t1 = jnp.stack([kind, ci, ci + cd])
        return t1, jnp.array([-1, 0, 0]), found, jnp.stack([i, j])

    def step_m(i, j, v, tm):
        # ViennaRNA's order: an unpaired base at j, then at i, then one branch, then a split
        cands = terms.multi_candidates(v, tm, dp)
        cands += [terms.Cand(KIND_M2, "M2", 0, 0, energy=v.tab("M2", 0, 0))]
        e, kinds, dds, dis = flatten(cands, v)
        idx, found = _first(e == v.tab("M", 0, 0))
        kind = jnp.asarray([_TASK_OF_KIND[k] for k in kinds.tolist()], jnp.int32)[idx]
        ci = i + jnp.asarray(dis)[idx]
        cd = (j - i) + jnp.asarray(dds)[idx]
        return jnp.stack([kind, ci, ci + cd]), jnp.array([-1, 0, 0]), found, jnp.array([-1, -1])

    def step_m2(i, j):
        d = j - i
        m = pos
        mi = INDEX["M"]
        left = T[jnp.clip(ROW_PAD + m, 0, T.shape[0] - 1), mi, jnp.clip(i, 0, T.shape[2] - 1)]
        right = T[jnp.clip(ROW_PAD + d - m - 1, 0, T.shape[0] - 1), mi,
                  jnp.clip(i + m + 1, 0, T.shape[2] - 1)]
        hit = ((left + right) == T[ROW_PAD + d, INDEX["M2"], i]) & (m >= 1) & (m <= d - 2)
        k, found = _first(hit)
        return (jnp.stack([TASK_M, i, i + k]), jnp.stack([TASK_M, i + k + 1, j]), found,
                jnp.array([-1, -1]))

    def body(state):
        stack, sp, partner, ok, steps = state
        task = stack[sp - 1]
        sp = sp - 1
        kind, a, b = task[0], task[1], task[2]
        # the cell's energy pieces once, for the C and M steps. Every kind of step is computed
        # and the task's kind selects one: the batch program traces back under vmap, where a
        # switch would run every branch too (and select each of their inputs: a larger program)
        v, tm = cell(a, b)
        steps_of_kind = (step_f(a), step_c(a, b, v, tm), step_m(a, b, v, tm), step_m2(a, b))
        which = jnp.clip(kind, 0, len(steps_of_kind) - 1)
        t1, t2, found, pair = (jax.lax.select_n(which, *outs) for outs in zip(*steps_of_kind))
        partner = jnp.where(pair[0] >= 0,
                            partner.at[pair[0]].set(pair[1]).at[pair[1]].set(pair[0]), partner)
        # F(0) is the end of the exterior loop: nothing to push
        done_f = (kind == TASK_F) & (a == 0)
        push1 = (t1[0] >= 0) & ~done_f
        stack = jnp.where(push1, stack.at[sp].set(t1), stack)
        sp = sp + push1.astype(jnp.int32)
        push2 = (t2[0] >= 0) & ~done_f
        stack = jnp.where(push2, stack.at[sp].set(t2), stack)
        sp = sp + push2.astype(jnp.int32)
        ok = ok & (found | done_f)
        return stack, sp, partner, ok, steps + 1

    def cond(state):
        _, sp, _, ok, steps = state
        return (sp > 0) & ok & (steps < 4 * length + 16) & enabled

    stack = jnp.zeros((cap, 3), jnp.int32).at[0].set(jnp.stack([TASK_F, n, 0]).astype(jnp.int32))
    partner = jnp.full((length,), -1, jnp.int32)
    # every carry varies with the row from the start (fill.along: one batching of the body)
    state = tuple(along(x, n) for x in (stack, jnp.int32(1), partner, jnp.bool_(True),
                                        jnp.int32(0)))
    stack, sp, partner, ok, steps = jax.lax.while_loop(cond, body, state)
    if debug:
        return stack, sp, partner, ok, steps
    return partner, ok & (sp == 0)


traceback_one = jax.jit(traceback, static_argnames=("debug",))
