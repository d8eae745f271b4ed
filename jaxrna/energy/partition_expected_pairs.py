"""The pair and interior-loop tables of the expected partition function (every dangle model's).

For a probabilistic sequence (``n x 4`` probabilities ``q``, rows A, C, G, U; positions
independent) the pair tables are conditioned on each pair's type (six channels ``C1..C6``,
the pair's own probabilities included) and the interior-loop group tables ``CI, C23, CA``
and the 1xn channels ``L0..L3``, ``R0..R3`` (one per identity of the 1xn loop's single
unpaired base): :func:`pair_rows` computes them for one diagonal, given the dangle model's
multiloop candidate. Used by :mod:`jaxrna.energy.partition_expected` (dangles 0) and
:mod:`jaxrna.energy.partition_expected_d2` (dangles 2); the recursions are described there.

>>> one_hot("ACGU").argmax(axis=1).tolist()
[0, 1, 2, 3]
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.energy.encoding import RTYPE
from jaxrna.energy.params import INF, MAXLOOP
from jaxrna.energy.partition import softmin
from jaxrna.energy.partition_params import special_energies
from jaxrna.energy.terms import GROUPS, ROW_PAD, SPECIALS

#: Pair types 1..6 as (5' base, 3' base) codes (A=1, C=2, G=3, U=4).
TYPE_BASES = ((2, 3), (3, 2), (3, 4), (4, 3), (1, 4), (4, 1))
TYPES = np.arange(1, 7)
RT = np.asarray(RTYPE)[TYPES]
#: The channels of the pair and interior-loop tables (every dangle model's first ones).
PAIR_CHANNELS = (tuple(f"C{t}" for t in TYPES) + ("CI", "C23", "CA")
                 + tuple(f"L{x}" for x in range(4)) + tuple(f"R{x}" for x in range(4)))
INDEX = {name: k for k, name in enumerate(PAIR_CHANNELS)}
LEFT = 8
BIG = INF / 2
TINY = 1e-300


def one_hot(sequence: str) -> np.ndarray:
    """``n x 4`` probabilities of a sequence (ACGU; T as U)."""
    rows = np.zeros((len(sequence), 4))
    for k, c in enumerate(sequence.upper().replace("T", "U")):
        rows[k, "ACGU".index(c)] = 1.0
    return rows


def energy(w, beta):
    """``-ln(w) / beta`` (INF where w is 0)."""
    return jnp.minimum(-jnp.log(jnp.maximum(w, TINY)) / beta, INF)


def clip(x):
    """``INF`` where ``x`` is at least ``INF / 2`` (impossible), else ``x``."""
    return jnp.where(x >= BIG, INF, x)


def split_1n():
    """The members of the 1xn group with one unpaired base on the left (u1 = 1) and on the
    right (u2 = 1): index arrays into ``GROUPS["C1n"]``."""
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


def specials_hairpin(qp, spec, dp, beta, length):
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


def pair_rows(d, R, diff, fixed, height, lr, multi, block_channels=None):
    """The pair channels on diagonal d: ``(c, new)``, ``c`` the six types' inside weights
    (``C(i, j, t)``: the pair's own probabilities left out) and ``new`` the rows of the
    channels ``C1..C6, CI, C23, CA, L0..L3, R0..R3`` (:data:`PAIR_CHANNELS`). ``multi(row,
    block, lo, qi, qj, au)``: the multiloop candidate ``(6, height)`` of the dangle model
    (``row(name, dd, di)`` reads a channel of a shorter diagonal, ``block`` holds the
    diagonals ``d + lo .. d - 1``, ``qi(off)``/``qj(off)`` the probabilities of the bases
    ``i + off``/``j + off``). Reads shorter diagonals only: a block of their first
    ``block_channels`` channels (default all)."""
    qp, dp, corr, allowed = diff["q"], diff["dp"], diff["corr"], fixed["allowed"]
    beta = 10.0 / dp["kT"]
    costs = dp["costs"]
    L = height
    corr = {size: c[:, :L] for size, c in corr.items()}
    lo = -2 - MAXLOOP
    block = R.T((ROW_PAD + d + lo, 0, 0), (-lo, block_channels or R.shape[1], R.shape[2]))

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
    cands = [energy(w_hp, beta)]
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
            e = energy(jnp.einsum(spec, w, *qs), beta)
        cands.append(softmin(jnp.swapaxes(e + inner[None, :, :], 0, 1), beta))  # over t2
    # grouped interior loops
    for key, table in (("CI", "mismatch_interior"), ("C23", "mismatch_interior_23")):
        outer = energy(_mismatch_weight(dp[table], TYPES, qi(1), qj(-1), beta), beta)
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
    cands.append(softmin(jnp.swapaxes(energy(outer_l, beta) + gl[None], 0, 1), beta))
    cands.append(softmin(jnp.swapaxes(energy(outer_r, beta) + gr[None], 0, 1), beta))
    cands.append(multi(row, block, lo, qi, qj, au))
    ok = (allowed[LEFT:LEFT + L] & jax.lax.dynamic_slice(allowed, (LEFT + d,), (L,)) & (d >= 4))
    bonus = R.read("bonus", (d, 0), (1, L))[0]                 # the pair bonus, by windows
    c = jnp.where(ok[None], clip(clip(softmin(jnp.stack(cands), beta)) - bonus / beta), INF)
    # the pair's own probabilities
    a = np.array([x - 1 for x, _ in TYPE_BASES])
    b = np.array([y - 1 for _, y in TYPE_BASES])
    wpair = qi(0)[:, a].T * qj(0)[:, b].T                                  # (6, L)
    cw = jnp.where(c < BIG, clip(c + energy(wpair, beta)), INF)
    # group tables of (i, j) as an inner pair: its types summed with their inner-side terms
    new = {f"C{t}": cw[t - 1] for t in TYPES}
    qo, qin = qj(1), qi(-1)             # the loop's bases next to (i, j): j + 1 and i - 1
    for key, table in (("CI", "mismatch_interior"), ("C23", "mismatch_interior_23")):
        inner = energy(_mismatch_weight(dp[table], RT, qo, qin, beta), beta)
        new[key] = clip(softmin(cw + inner, beta))
    new["CA"] = clip(softmin(cw + au[:, None], beta))
    w1r = jnp.exp(-beta * dp["mismatch_interior_1n"][RT][:, 1:5, 1:5])     # (6, 4, 4) [rt2, z, x]
    inner_l = energy(jnp.einsum("tzx,iz->txi", w1r, qo), beta)            # x at i - 1
    inner_r = energy(jnp.einsum("tyz,iz->tyi", w1r, qin), beta)           # y at j + 1
    for x in range(4):
        new[f"L{x}"] = clip(softmin(cw + inner_l[:, x], beta))
        new[f"R{x}"] = clip(softmin(cw + inner_r[:, x], beta))
    return c, new


def _group(block, lo, name, members, cost, L, beta):
    """softmin over a group's members (u1, u2) of table ``name`` at the inner pair + cost."""
    u1s, u2s = np.asarray(members[0]), np.asarray(members[1])
    keep = u1s + u2s <= MAXLOOP
    u1s, u2s, cost = u1s[keep], u2s[keep], cost[np.nonzero(keep)[0]]
    r = (-2 - u1s - u2s) - lo
    cols = (1 + u1s)[:, None] + np.arange(L)[None, :]
    rows = block[r[:, None], INDEX[name], cols]
    return softmin(rows + jnp.asarray(cost)[:, None], beta)
