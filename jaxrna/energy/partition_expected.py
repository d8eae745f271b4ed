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

from jaxrna.energy import partition_expected_d2, partition_sweep
from jaxrna.energy.fill import skew
from jaxrna.energy.params import INF
from jaxrna.energy.partition import length_class, multiloop_split, pf_dangles, softmin, x64
from jaxrna.energy.partition_expected_pairs import (  # noqa: F401 (one_hot, TYPES: the API)
    LEFT, PAIR_CHANNELS, RT, TYPE_BASES, TYPES, clip, specials_hairpin, split_1n, one_hot,
    pair_rows, special_tables)
from jaxrna.energy.partition_params import float_params, pf_device_params
from jaxrna.energy.terms import COL_PAD, ROW_PAD

#: The channels of the dangles-0 tables: the pair tables, then the multiloop's.
CHANNELS = PAIR_CHANNELS + ("M2", "M1", "MA", "M")
INDEX = {name: k for k, name in enumerate(CHANNELS)}


def _rows(d, R, diff, fixed, height, width, *, length, lr):
    """Every channel's row on diagonal d, dangles 0 (reads windows of shorter diagonals
    through ``R``: the form of :mod:`jaxrna.energy.partition_sweep`)."""
    dp = diff["dp"]
    beta = 10.0 / dp["kT"]
    L = height

    def multi(row, block, lo, qi, qj, au):
        # ml_closing + the closing branch (type reversed) + M2 inside
        m2 = jax.lax.slice(block, (-2 - lo, INDEX["M2"], 1), (-1 - lo, INDEX["M2"] + 1, 1 + L))
        return (dp["ml_closing"] + dp["ml_intern"] + au)[:, None] + m2[0]

    c, new = pair_rows(d, R, diff, fixed, height, lr, multi)
    cw = jnp.stack([new[f"C{t}"] for t in TYPES])
    au = jnp.where(jnp.asarray(TYPES) > 2, dp["terminal_au"], 0.0)
    # multiloop tables
    mb = dp["ml_base"]
    stem = clip(softmin(cw + (dp["ml_intern"] + au)[:, None], beta))
    new["M2"] = multiloop_split(R, d, INDEX["M"], length, L, width, beta)

    def row(name, dd, di):
        return R.T((ROW_PAD + d + dd, INDEX[name], di), (1, 1, L)).reshape(L)

    new["M1"] = clip(softmin(jnp.stack([row("M1", -1, 0) + mb, stem]), beta))
    new["MA"] = clip(softmin(jnp.stack([row("MA", -1, 1) + mb, new["M1"]]), beta))
    new["M"] = clip(softmin(jnp.stack([new["MA"], new["M2"]]), beta))
    return jnp.stack([new[name] for name in CHANNELS]).astype(R.dtype)


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
        n = jnp.sum(jnp.asarray(allowed)) if n is None else n
        return partition_expected_d2.expected_log_partition_d2(q, allowed, dp, spec, length, n, pair_bonus, outside)
    dp = jax.tree.map(jnp.asarray, dp)
    beta = 10.0 / dp["kT"]
    corr = specials_hairpin(q, spec, dp, beta, length)
    bonus = jnp.zeros((length, length), q.dtype) if pair_bonus is None else pair_bonus
    bonus = skew(bonus.astype(q.dtype))                                      # [d, i]
    dtype = q.dtype
    rows_fn = functools.partial(_rows, length=length, lr=split_1n())
    run = partition_sweep.sweep if outside else partition_sweep.forward
    diff = {"q": q, "dp": dp, "corr": corr, "bonus": bonus}
    T, _ = run(rows_fn, length, len(CHANNELS), INDEX["M1"], diff, {"allowed": jnp.asarray(allowed)},
               INF, ("bonus",))
    # exterior loop (dangles 0): branch (i, j) = its types summed with terminal AU
    au = jnp.where(jnp.asarray(TYPES) > 2, dp["terminal_au"], 0.0)
    j = jnp.arange(length)[:, None]
    i = jnp.arange(length)[None, :]
    rows = jnp.clip(ROW_PAD + j - i, 0, ROW_PAD + length - 1)
    cw = T[rows[..., None], jnp.arange(6)[None, None, :], i[..., None]]     # (j, i, 6)
    E = jnp.where(j >= i, clip(softmin(jnp.moveaxis(cw + au, -1, 0), beta)), INF)

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
