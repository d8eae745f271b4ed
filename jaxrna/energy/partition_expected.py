"""The expected partition function of a probabilistic sequence, dangles 0 (and 2), in JAX.

For a sequence given as ``n x 4`` nucleotide probabilities ``q`` (rows A, C, G, U; positions
independent), the expected partition function is ``sum_S P(S) Z(S)`` with ``P(S) = prod_i
q[i, S_i]``, as jax-rnafold defines it: differentiable with respect to ``q`` for design.
``expected_log_partition`` returns its logarithm, exactly, in the energy model of
:mod:`jaxrna.energy.partition` with dangles 0 (ViennaRNA's ``-d0``) as below, or with
dangles 2 (``dangles=2``; 1 and 3 computed as 2, as ViennaRNA's partition function does) by
:mod:`jaxrna.energy.partition_expected_d2`, whose branch terms read the bases next to every
branch (two terms of one loop share them: its multiloop tables are conditioned on them).

Every loop's energy depends only on the bases of the loop (its pairs' and its unpaired
bases), so the expectation is a recurrence over tables conditioned on each pair's type:

- ``C(i, j, t)``: the expected weight inside (i, j) given pair type t at (i, j) (the six
  channels ``C``), and ``Cw(i, j, t) = C - kT ln q_i(a_t) q_j(b_t)`` (the pair's own
  probabilities included: the stored channels);
- hairpins: the mismatch averaged over the two loop bases next to the pair, special hairpins
  as ``sum_s P(s) (w_s - w_generic(s))`` over the table's loops;
- interior loops: the 1x1, 1x2, 2x1, 2x2 tables and the stack / 1-bulge averaged over their
  unpaired bases for every pair of types (``6 x 6`` per cell); the grouped loops factor as in
  the MFE fill, with the inner pair's types summed into one group table (``CI``, ``C23``,
  ``CA``), except 1xn loops, whose single unpaired base is read by both mismatches: four
  channels, one per identity of that base (``L`` for u1 = 1, ``R`` for u2 = 1);
- multiloops and the exterior loop (dangles 0): as in :mod:`jaxrna.energy.partition`, with
  each branch's types summed (a branch's energy depends on its own pair only).

Free energies (dcal/mol) with soft minima, as in :mod:`jaxrna.energy.partition`; float64
under :func:`jaxrna.energy.partition.x64`. A one-hot ``q`` gives that module's ``log Z``.

>>> import numpy as np
>>> from jaxrna.energy.partition import x64
>>> with x64():
...     round(float(expected_ensemble_energy(one_hot("GGGGAAACCCC"))), 4)
-4.6516
>>> round(expected_ensemble_energy(np.full((12, 4), 0.25), dangles=2), 4)
-1.4564
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.energy import partition_sweep
from jaxrna.energy.encoding import RTYPE
from jaxrna.energy.fill import skew
from jaxrna.energy.params import INF, MAXLOOP
from jaxrna.energy.partition import length_class, pf_dangles, softmin, x64
from jaxrna.energy.partition_params import float_params, pf_device_params, special_energies
from jaxrna.energy.terms import COL_PAD, GROUPS, ROW_PAD, SPECIALS

#: Pair types 1..6 as (5' base, 3' base) codes (A=1, C=2, G=3, U=4).
TYPE_BASES = ((2, 3), (3, 2), (3, 4), (4, 3), (1, 4), (4, 1))
TYPES = np.arange(1, 7)
RT = np.asarray(RTYPE)[TYPES]
#: The channels of the pair and interior-loop tables (every dangle model's first ones).
PAIR_CHANNELS = (tuple(f"C{t}" for t in TYPES) + ("CI", "C23", "CA")
                 + tuple(f"L{x}" for x in range(4)) + tuple(f"R{x}" for x in range(4)))
CHANNELS = PAIR_CHANNELS + ("M2", "M1", "MA", "M")
INDEX = {name: k for k, name in enumerate(CHANNELS)}
LEFT = 8
BIG = INF / 2
TINY = 1e-300


def one_hot(sequence: str) -> np.ndarray:
    """``n x 4`` probabilities of a sequence (ACGU; T as U)."""
    rows = np.zeros((len(sequence), 4))
    for k, c in enumerate(sequence.upper().replace("T", "U")):
        rows[k, "ACGU".index(c)] = 1.0
    return rows


def _energy(w, beta):
    """``-ln(w) / beta`` (INF where w is 0)."""
    return jnp.minimum(-jnp.log(jnp.maximum(w, TINY)) / beta, INF)


def _clip(x):
    return jnp.where(x >= BIG, INF, x)


def _split_1n():
    u1s, u2s = GROUPS["C1n"]
    left = np.nonzero(u1s == 1)[0]
    right = np.nonzero(u2s == 1)[0]
    return left, right


def special_tables(p) -> dict:
    """The special hairpins of ``p`` (from :func:`jaxrna.energy.partition_params.float_params`)
    as arrays: ``{size: (codes (S, size + 2) int32, energies (S,) float64)}`` (loops whose
    closing bases cannot pair are left out: they never apply)."""
    from jaxrna.energy.encoding import PAIR

    out = {}
    for size in (3, 4, 6):
        codes, energies = [], []
        for loop, e in special_energies(p, size).items():
            c = ["ACGU".find(x) + 1 for x in loop]
            if min(c) >= 1 and 1 <= int(PAIR[c[0], c[-1]]) <= 6:
                codes.append(c)
                energies.append(e)
        out[size] = (np.asarray(codes, np.int32).reshape(-1, size + 2),
                     np.asarray(energies, np.float64))
    return out


def _specials_hairpin(qp, spec, dp, beta, length):
    """``corr[size][t, i]``: the special hairpins' correction to the expected hairpin weight
    of (i, i + size + 1) with pair type t: the sum over the table's loops s of type t of
    P(s's inner bases) * (w_s - w_generic(s))."""
    from jaxrna.energy.encoding import PAIR

    out = {}
    hp = dp["hp_len"]
    for size in (3, 4, 6):
        codes, energies = spec[size]
        corr = jnp.zeros((6, length), qp.dtype)
        if codes.shape[0]:
            t = jnp.asarray(PAIR)[codes[:, 0], codes[:, -1]]                     # (S,)
            prob = jnp.ones((codes.shape[0], length), qp.dtype)
            for m in range(1, size + 1):
                prob = prob * qp[LEFT + m:LEFT + m + length][:, codes[:, m] - 1].T
            if size == 3:
                generic = hp[3] + jnp.where(t > 2, dp["terminal_au"], 0.0)
            else:
                generic = hp[size] + dp["mismatch_hairpin"][t, codes[:, 1], codes[:, -2]]
            delta = jnp.exp(-beta * energies) - jnp.exp(-beta * generic)         # (S,)
            onehot = (t[:, None] == jnp.asarray(TYPES)[None, :]).astype(qp.dtype)  # (S, 6)
            corr = jnp.einsum("st,si->ti", onehot, prob * delta[:, None])
        out[size] = corr
    return out


def _mismatch_weight(table, types, qa, qb, beta):
    """``[len(types), L]``: sum_{x,y} qa[i, x] qb[i, y] exp(-beta table[t, x, y])."""
    w = jnp.exp(-beta * table[types][:, 1:5, 1:5])               # (T, 4, 4)
    return jnp.einsum("txy,ix,iy->ti", w, qa, qb)


def pair_rows(d, T, diff, fixed, height, lr, multi):
    """The pair channels on diagonal d: ``(c, new)``, ``c`` the six types' inside weights
    (``C(i, j, t)``: the pair's own probabilities left out) and ``new`` the rows of the
    channels ``C1..C6, CI, C23, CA, L0..L3, R0..R3`` (:data:`PAIR_CHANNELS`). ``multi(row,
    block, lo, qi, qj, au)``: the multiloop candidate ``(6, height)`` of the dangle model
    (``row(name, dd, di)`` reads a channel of a shorter diagonal, ``block`` holds the
    diagonals ``d + lo .. d - 1``, ``qi(off)``/``qj(off)`` the probabilities of the bases
    ``i + off``/``j + off``). Reads shorter diagonals only."""
    qp, dp, corr, allowed = diff["q"], diff["dp"], diff["corr"], fixed["allowed"]
    beta = 10.0 / dp["kT"]
    costs = dp["costs"]
    L = height
    corr = {size: c[:, :L] for size, c in corr.items()}
    lo = -2 - MAXLOOP
    block = jax.lax.dynamic_slice(T, (ROW_PAD + d + lo, 0, 0), (-lo, T.shape[1], T.shape[2]))

    def row(name, dd, di):
        return jax.lax.slice(block, (dd - lo, INDEX[name], di),
                             (dd - lo + 1, INDEX[name] + 1, di + L)).reshape(L)

    def rows_c(dd, di):          # Cw of the six types: (6, L)
        return jax.lax.slice(block, (dd - lo, 0, di), (dd - lo + 1, 6, di + L))[0]

    def qi(off):
        return qp[LEFT + off:LEFT + off + L]

    def qj(off):
        return jax.lax.dynamic_slice(qp, (LEFT + d + off, 0), (L, 4))

    au = jnp.where(jnp.asarray(TYPES) > 2, dp["terminal_au"], 0.0)        # (6,)
    u = d - 1
    hp = dp["hp_len"][u]
    # hairpins (6, L)
    mm = _mismatch_weight(dp["mismatch_hairpin"], TYPES, qi(1), qj(-1), beta)
    w_hp = jnp.where(u == 3, jnp.exp(-beta * (hp + au))[:, None] + corr[3],
                     jnp.exp(-beta * hp) * mm
                     + jnp.where(u == 4, corr[4], jnp.where(u == 6, corr[6], 0.0)))
    cands = [_energy(w_hp, beta)]
    # stacks, 1-bulges, 1x1, 1x2, 2x1, 2x2: (t, t2) weights averaged over the unpaired bases
    t_idx, rt2 = TYPES[:, None], RT[None, :]
    for (u1, u2) in SPECIALS:
        dd, di = -2 - u1 - u2, 1 + u1
        inner = rows_c(dd, di)                                              # (6, L)
        if (u1, u2) == (0, 0):
            e = jnp.broadcast_to(dp["stack"][t_idx, rt2][:, :, None], (6, 6, L))
        elif u1 + u2 == 1:
            e = jnp.broadcast_to((dp["bulge1"] + dp["stack"][t_idx, rt2])[:, :, None], (6, 6, L))
        else:
            if (u1, u2) == (1, 1):
                tab, qs = dp["int11"][t_idx, rt2][..., 1:5, 1:5], (qi(1), qj(-1))
            elif (u1, u2) == (1, 2):
                tab, qs = dp["int21"][t_idx, rt2][..., 1:5, 1:5, 1:5], (qi(1), qj(-2), qj(-1))
            elif (u1, u2) == (2, 1):
                tab = jnp.swapaxes(dp["int21"][rt2.T, t_idx.T], 0, 1)[..., 1:5, 1:5, 1:5]
                qs = (qj(-1), qi(1), qi(2))
            else:
                tab = dp["int22"][t_idx, rt2][..., 1:5, 1:5, 1:5, 1:5]
                qs = (qi(1), qi(2), qj(-2), qj(-1))
            w = jnp.exp(-beta * tab)
            letters = "wxyz"[:len(qs)]
            spec = "ab" + letters + "," + ",".join(f"i{c}" for c in letters) + "->abi"
            e = _energy(jnp.einsum(spec, w, *qs), beta)
        cands.append(softmin(jnp.swapaxes(e + inner[None, :, :], 0, 1), beta))  # over t2
    # grouped interior loops
    for key, table in (("CI", "mismatch_interior"), ("C23", "mismatch_interior_23")):
        outer = _energy(_mismatch_weight(dp[table], TYPES, qi(1), qj(-1), beta), beta)
        cands.append(outer + _group(block, lo, key, GROUPS[key], costs[key], L, beta)[None])
    cands.append(au[:, None] + _group(block, lo, "CA", GROUPS["CA"], costs["CA"], L, beta)[None])
    left, right = lr
    u1s, u2s = GROUPS["C1n"]
    w1n = jnp.exp(-beta * dp["mismatch_interior_1n"][TYPES][:, 1:5, 1:5])   # (6, 4, 4)
    outer_l = jnp.einsum("txy,iy->txi", w1n, qj(-1)) * qi(1).T[None]       # (6, x, L)
    outer_r = jnp.einsum("txy,ix->tyi", w1n, qi(1)) * qj(-1).T[None]       # (6, y, L)
    gl = jnp.stack([_group(block, lo, f"L{x}", (u1s[left], u2s[left]), costs["C1n"][left], L, beta)
                    for x in range(4)])                                    # (4, L)
    gr = jnp.stack([_group(block, lo, f"R{x}", (u1s[right], u2s[right]), costs["C1n"][right], L,
                           beta) for x in range(4)])
    cands.append(softmin(jnp.swapaxes(_energy(outer_l, beta) + gl[None], 0, 1), beta))
    cands.append(softmin(jnp.swapaxes(_energy(outer_r, beta) + gr[None], 0, 1), beta))
    cands.append(multi(row, block, lo, qi, qj, au))
    ok = (allowed[LEFT:LEFT + L] & jax.lax.dynamic_slice(allowed, (LEFT + d,), (L,)) & (d >= 4))
    bonus = jax.lax.dynamic_slice_in_dim(diff["bonus"], d, 1)[0, :L]
    c = jnp.where(ok[None], _clip(_clip(softmin(jnp.stack(cands), beta)) - bonus / beta), INF)
    # the pair's own probabilities
    a = np.array([x - 1 for x, _ in TYPE_BASES])
    b = np.array([y - 1 for _, y in TYPE_BASES])
    wpair = qi(0)[:, a].T * qj(0)[:, b].T                                  # (6, L)
    cw = jnp.where(c < BIG, _clip(c + _energy(wpair, beta)), INF)
    # group tables of (i, j) as an inner pair: its types summed with their inner-side terms
    new = {f"C{t}": cw[t - 1] for t in TYPES}
    qo, qin = qj(1), qi(-1)             # the loop's bases next to (i, j): j + 1 and i - 1
    for key, table in (("CI", "mismatch_interior"), ("C23", "mismatch_interior_23")):
        inner = _energy(_mismatch_weight(dp[table], RT, qo, qin, beta), beta)
        new[key] = _clip(softmin(cw + inner, beta))
    new["CA"] = _clip(softmin(cw + au[:, None], beta))
    w1r = jnp.exp(-beta * dp["mismatch_interior_1n"][RT][:, 1:5, 1:5])     # (6, 4, 4) [rt2, z, x]
    inner_l = _energy(jnp.einsum("tzx,iz->txi", w1r, qo), beta)            # x at i - 1
    inner_r = _energy(jnp.einsum("tyz,iz->tyi", w1r, qin), beta)           # y at j + 1
    for x in range(4):
        new[f"L{x}"] = _clip(softmin(cw + inner_l[:, x], beta))
        new[f"R{x}"] = _clip(softmin(cw + inner_r[:, x], beta))
    return c, new


def _rows(d, T, V, diff, fixed, height, width, *, length, lr):
    """Every channel's row on diagonal d, dangles 0 (reads shorter diagonals only: the form
    of :mod:`jaxrna.energy.partition_sweep`)."""
    dp = diff["dp"]
    beta = 10.0 / dp["kT"]
    L = height

    def multi(row, block, lo, qi, qj, au):
        # ml_closing + the closing branch (type reversed) + M2 inside
        return (dp["ml_closing"] + dp["ml_intern"] + au)[:, None] + row("M2", -2, 1)[None]

    c, new = pair_rows(d, T, diff, fixed, height, lr, multi)
    cw = jnp.stack([new[f"C{t}"] for t in TYPES])
    au = jnp.where(jnp.asarray(TYPES) > 2, dp["terminal_au"], 0.0)
    # multiloop tables
    mb = dp["ml_base"]
    stem = _clip(softmin(cw + (dp["ml_intern"] + au)[:, None], beta))
    lft = T[ROW_PAD:ROW_PAD + width, INDEX["M"], :L].T
    rgt = jax.lax.dynamic_slice(V, (d, length - d), (L, width))
    ai = jnp.arange(width)[None, :]
    new["M2"] = _clip(softmin(jnp.where(ai <= d - 2, lft + rgt, INF).T, beta))

    def row(name, dd, di):
        return jax.lax.dynamic_slice(T, (ROW_PAD + d + dd, INDEX[name], di), (1, 1, L)).reshape(L)

    new["M1"] = _clip(softmin(jnp.stack([row("M1", -1, 0) + mb, stem]), beta))
    new["MA"] = _clip(softmin(jnp.stack([row("MA", -1, 1) + mb, new["M1"]]), beta))
    new["M"] = _clip(softmin(jnp.stack([new["MA"], new["M2"]]), beta))
    return jnp.stack([new[name] for name in CHANNELS]).astype(T.dtype)


def _group(block, lo, name, members, cost, L, beta):
    """softmin over a group's members (u1, u2) of table ``name`` at the inner pair + cost."""
    u1s, u2s = np.asarray(members[0]), np.asarray(members[1])
    keep = u1s + u2s <= MAXLOOP
    u1s, u2s, cost = u1s[keep], u2s[keep], cost[np.nonzero(keep)[0]]
    r = (-2 - u1s - u2s) - lo
    cols = (1 + u1s)[:, None] + np.arange(L)[None, :]
    rows = block[r[:, None], INDEX[name], cols]
    return softmin(rows + jnp.asarray(cost)[:, None], beta)


def static_dangles(dangles) -> int:
    """The dangle model the expected partition function computes for ``dangles`` (a Python
    or NumPy int: the models' tables differ, so it cannot be traced): 0, or 2 for 1, 2 and 3
    (as ViennaRNA's partition function, :func:`jaxrna.energy.partition.pf_dangles`).

    >>> [static_dangles(d) for d in (0, 1, 2, 3)]
    [0, 2, 2, 2]
    """
    if isinstance(dangles, getattr(jax.core, "Tracer", ())):
        raise TypeError("dangles of the expected partition function must be a Python int "
                        "(static), not a traced value")
    return pf_dangles(int(dangles))


def expected_log_partition(q, allowed, dp, spec, length, pair_bonus=None, outside: bool = True,
                           dangles: int = 0, n=None):
    """``ln sum_S P(S) Z(S)`` of one padded probabilistic sequence: ``q``
    ``(LEFT + 2 L + COL_PAD + 8, 4)`` probabilities (rows from ``LEFT``; zeros outside),
    ``allowed`` the positions that may pair (bool, same rows), ``dp`` from
    :func:`jaxrna.energy.partition_params.pf_device_params`, ``spec`` from
    :func:`special_tables` (every leaf traced but the codes). ``outside`` (static): the
    derivative by the outside pass (O(L^2) memory) or, False, by reverse mode. ``dangles``
    (static, :func:`static_dangles`): 0, or 2 (1 and 3 computed as 2, as ViennaRNA's partition
    function does) by :mod:`jaxrna.energy.partition_expected_d2`, which needs ``n``, the
    number of positions (may be traced; default: the count of ``allowed``). Use
    :func:`expected_log_z` for a plain call."""
    if static_dangles(dangles) == 2:
        from jaxrna.energy.partition_expected_d2 import expected_log_partition_d2

        n = jnp.sum(jnp.asarray(allowed)) if n is None else n
        return expected_log_partition_d2(q, allowed, dp, spec, length, n, pair_bonus, outside)
    dp = jax.tree.map(jnp.asarray, dp)
    beta = 10.0 / dp["kT"]
    corr = _specials_hairpin(q, spec, dp, beta, length)
    bonus = jnp.zeros((length, length), q.dtype) if pair_bonus is None else pair_bonus
    bonus = skew(bonus.astype(q.dtype))                                      # [d, i]
    dtype = q.dtype
    rows_fn = functools.partial(_rows, length=length, lr=_split_1n())
    run = partition_sweep.sweep if outside else partition_sweep.forward
    diff = {"q": q, "dp": dp, "corr": corr, "bonus": bonus}
    T, _ = run(rows_fn, length, len(CHANNELS), INDEX["M1"], diff, {"allowed": jnp.asarray(allowed)})
    # exterior loop (dangles 0): branch (i, j) = its types summed with terminal AU
    au = jnp.where(jnp.asarray(TYPES) > 2, dp["terminal_au"], 0.0)
    j = jnp.arange(length)[:, None]
    i = jnp.arange(length)[None, :]
    rows = jnp.clip(ROW_PAD + j - i, 0, ROW_PAD + length - 1)
    cw = T[rows[..., None], jnp.arange(6)[None, None, :], i[..., None]]     # (j, i, 6)
    E = jnp.where(j >= i, _clip(softmin(jnp.moveaxis(cw + au, -1, 0), beta)), INF)

    def step(k, f):
        best = softmin(jnp.stack([f[k], softmin(f[:length] + E[k], beta)]), beta)
        return f.at[k + 1].set(best)

    F = jax.lax.fori_loop(0, length, step, jnp.zeros(length + 1, dtype))
    return -F[length] * beta


def prepare_expected(n: int, length: int, params="turner2004", temperature: float = 37.0):
    """Host inputs for ``n`` positions padded to ``length``: the pairing mask, the
    parameters (:func:`pf_device_params`) and the special hairpins (:func:`special_tables`)."""
    if n > length:
        raise ValueError(f"sequence of length {n} does not fit in {length}")
    allowed = np.zeros(LEFT + 2 * length + COL_PAD + 8, bool)
    allowed[LEFT:LEFT + n] = True
    p = float_params(params, temperature)
    return allowed, pf_device_params(p, length, temperature), special_tables(p)


@functools.partial(jax.jit, static_argnames=("length", "dangles"))
def _run(q, allowed, dp, spec, bonus, n, length, dangles):
    qp = jnp.zeros((allowed.shape[0], 4), q.dtype).at[LEFT:LEFT + length].set(q)
    return expected_log_partition(qp, allowed, dp, spec, length, bonus, dangles=dangles, n=n)


def expected_log_z(q, params="turner2004", temperature: float = 37.0, length: int | None = None,
                   pair_bonus=None, dangles: int = 0):
    """``ln E[Z]`` of ``q`` (``n x 4`` probabilities, rows A, C, G, U), a JAX
    scalar, differentiable in ``q`` (call under :func:`jaxrna.energy.partition.x64` for
    float64). One program per padded length and dangle model; parameters, temperature and
    the length within the class are arguments. ``dangles``: 0 or 2 (a Python int; 1 and 3
    are computed as 2, as ViennaRNA's partition function and :func:`pf_dangles` do).
    ``pair_bonus``: ``(length, length)`` log-weights added to the pairs (i, j) (gradients
    with respect to it are the expected ensemble's pair probabilities).

    >>> import numpy as np
    >>> q = np.full((12, 4), 0.25)
    >>> with x64():
    ...     round(float(expected_log_z(q)), 6)
    1.679628
    """
    n = int(np.shape(q)[0])
    length = length or length_class(n)
    allowed, dp, spec = prepare_expected(n, length, params, temperature)
    q = jnp.asarray(q)
    q = jnp.concatenate([q, jnp.zeros((length - n, 4), q.dtype)])     # one program per class
    bonus = jnp.zeros((length, length), q.dtype) if pair_bonus is None else pair_bonus
    return _run(q, allowed, dp, spec, bonus, np.int32(n), length, static_dangles(dangles))


def expected_ensemble_energy(q, params="turner2004", temperature: float = 37.0,
                             dangles: int = 0) -> float:
    """``-kT ln E[Z]`` in kcal/mol (float64)."""
    from jaxrna.energy.partition_params import kt

    with x64():
        return float(-expected_log_z(jnp.asarray(q, jnp.float64), params, temperature,
                                     dangles=dangles) * kt(temperature) / 1000.0)
