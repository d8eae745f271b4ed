"""The partition function of one sequence in the energy model, in JAX: ``log_partition``.

ViennaRNA's partition function (``RNAfold -p``) as a pure, jit-, vmap- and
grad-able JAX function of one padded sequence. It is the minimum free energy recurrence of
:mod:`jaxrna.energy.terms` with ``min`` replaced by the *soft minimum* ``-kT log sum
exp(-E / kT)``: the tables hold ensemble free energies (dcal/mol, float64) instead of
minima, so the table reads and energy pieces are the MFE fill's own
(:func:`jaxrna.energy.terms.pair_terms`, :func:`~jaxrna.energy.terms.pair_candidates`,
:func:`~jaxrna.energy.terms.exterior_terms`, the diagonal views of
:mod:`jaxrna.energy.fill`), fed with ViennaRNA's unrounded partition-function parameters
(:mod:`jaxrna.energy.partition_params`). Log space (free energies) never overflows, at any
length.

Tables (stored by diagonal as the MFE fill stores them, ``T[ROW_PAD + d, k, i] = table_k(i,
i + d)``), with the multiloop decomposed without ambiguity (a sum must count each structure
once, where a minimum may count it twice):

- ``C(i, j)``: (i, j) pairs: hairpin, interior loops (the MFE fill's candidates and groups
  ``CI, C1n, C23, CA``), or a multiloop ``close0 + M2(i+1, j-1)``.
- ``M1(i, j)``: one branch starting at i, then unpaired bases to j:
  ``softmin(M1(i, j-1) + ml_base, C(i, j) + stem0(i, j))``.
- ``MA(i, j)``: exactly one branch in [i, j]: ``softmin(MA(i+1, j) + ml_base, M1(i, j))``.
- ``M2(i, j)``: at least two branches: ``softmin_k M(i, k) + M1(k+1, j)``.
- ``M(i, j)``: at least one branch: ``softmin(MA(i, j), M2(i, j))``.
- ``F(k)``: the exterior loop of the first k bases, ``softmin(F(k-1), softmin_i F(i) + C(i,
  k-1) + ext(i, k-1))``; ``log Z = -F(n) * 10 / kT``.

The diagonals run in ``lax.fori_loop``s of static trip counts over the padded length ``L``
(one band up to 256, the MFE fill's bands beyond: :mod:`jaxrna.energy.partition_sweep`);
cells past the runtime length ``n`` cannot pair (``allowed`` is false there) and stay
impossible, so one program serves every length of a class. ``M2`` reads ``M`` by rows and a
copy of ``M1`` by end position (two rectangular windows per diagonal). dtype: the parameters'
(float64 under :func:`x64`, which :func:`ensemble_energies` and :func:`pair_probabilities`
turn on; in float32 the same program gives ViennaRNA's values to ~2e-5 kcal/mol and pair
probabilities to 1e-6 (100 nt) .. 5e-6 (300 nt)). Dangles 0 and 2 (ViennaRNA's partition
function treats 1 and 3 as 2: so does :func:`pf_dangles`).

Base-pair probabilities are the gradient of ``log Z`` with respect to ``pair_bonus`` (an
additive log-weight per pair, zero by default), exact. The sweep's derivative is a custom
VJP, the outside pass (:mod:`jaxrna.energy.partition_sweep`): diagonals in reverse order,
each diagonal's cotangent pulled back through its own recurrence evaluated on the final
tables, so memory stays O(L^2) (JAX's reverse mode through the loop would keep O(L^3)
residuals: 300 nt, 0.61 against 1.3 GB peak) at about three times the forward's time. The
same pass gives the gradients with respect to every energy parameter (``dp``), ``kT``
included, and the special hairpin energies.

The expected partition function of a probabilistic sequence (``n x 4`` nucleotide
probabilities, as jax-rnafold defines it) is :mod:`jaxrna.energy.partition_expected`
(dangles 0, and dangles 2 through :mod:`jaxrna.energy.partition_expected_d2`).

>>> round(ensemble_energy("GGGGAAACCCC"), 4)
-4.8734
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.energy import partition_sweep, terms
from jaxrna.energy.fill import DiagView, PointsView, skew
from jaxrna.energy.inputs import prepare
from jaxrna.energy.params import INF, MAXLOOP, load_params
from jaxrna.energy.partition_params import float_params, pf_device_params, special_row
from jaxrna.energy.tap_rows import tap_rows
from jaxrna.energy.terms import COL_PAD, ROW_PAD

#: The tables of ``T``'s second axis (the MFE fill's names where the meaning is the same).
TABLES = ("C", "M2", "CI", "C1n", "C23", "CA", "M", "M1", "MA")
INDEX = {name: k for k, name in enumerate(TABLES)}
BIG = INF / 2


def x64():
    """A context in which JAX computes in float64 (``jax.enable_x64(True)``; older JAX:
    ``jax.experimental.enable_x64()``)."""
    if hasattr(jax, "enable_x64"):
        return jax.enable_x64(True)
    from jax.experimental import enable_x64

    return enable_x64()


def pf_dangles(dangles: int) -> int:
    """ViennaRNA's partition function knows dangles 0 and 2; 1 and 3 are computed as 2."""
    if dangles not in (0, 1, 2, 3):
        raise ValueError(f"dangles must be 0, 1, 2 or 3, not {dangles!r}")
    return 0 if dangles == 0 else 2


def length_class(n: int) -> int:
    """The padded length for ``n`` nt: 32, 48, 64, 96, 128, 192, ... (powers of two and
    their halfway points).

    >>> [length_class(n) for n in (1, 33, 64, 65, 120, 300)]
    [32, 48, 64, 96, 128, 384]
    """
    size = 32
    while size < n:
        size = size * 3 // 2 if size & (size - 1) == 0 else size * 4 // 3
    return size


def softmin(rows, beta):
    """``-log sum exp(-beta * x) / beta`` over the leading axis of a stacked array or list."""
    x = jnp.stack(rows) if isinstance(rows, (list, tuple)) else rows
    return -jax.nn.logsumexp(-beta * x, axis=0) / beta


def _clip(x):
    return jnp.where(x >= BIG, INF, x)


class PFView(DiagView):
    """The MFE fill's diagonal view over the partition tables: reads by :data:`INDEX`, the
    interior-loop groups reduced by a soft minimum."""

    beta = None

    def row(self, name, dd, di):
        r = dd - self.lo
        return jax.lax.slice(self.block, (r, INDEX[name], di),
                             (r + 1, INDEX[name] + 1, di + self.height)).reshape(self.height)

    def group_mins(self, cands):
        """Every group's member rows read by one gather from the block (a small program:
        ~490 static slices compile several times slower; its derivative without atomic
        additions, :mod:`jaxrna.energy.tap_rows`), each group softmin-reduced. The gather
        puts the taps last, the axis reduced: read taps-first, XLA transposed the
        (rows x cells x taps) array before reducing it, forward and back (S19j, H200: 64 x
        256 nt 0.215 -> 0.188 s, 256 x 128 nt 0.158 -> 0.143 s, the same bits)."""
        r, k, c, sizes = [], [], [], []
        for cand in cands:
            r.append(np.asarray(cand.dd, np.int32) - self.lo)
            k.append(np.full(len(cand.dd), INDEX[cand.table], np.int32))
            c.append(np.asarray(cand.di, np.int32))
            sizes.append(len(cand.dd))
        rows = tap_rows(self.block, np.concatenate(r), np.concatenate(k), np.concatenate(c),
                        self.height, taps_last=True)
        out, start = [], 0
        for cand, size in zip(cands, sizes):
            x = rows[:, start:start + size] + cand.cost[None, :size]
            out.append(-jax.nn.logsumexp(-self.beta * x, axis=1) / self.beta)
            start += size
        return out


def _reduce(cands, v, beta):
    grouped = [c for c in cands if c.cost is not None]
    rows = [m + c.outer for c, m in zip(grouped, v.group_mins(grouped))]
    rows += [c.energy for c in cands if c.cost is None]
    return softmin(rows, beta)


def multiloop_split(R, d, channel, length, height, width, beta):
    """``M2(i, i + d) = softmin_a M(i, i + a) + M1(i + a + 1, i + d)``, a <= d - 2, for the
    cells i < ``height`` of diagonal d: ``M`` is channel ``channel`` of the tables ``T``, ``M1``
    the sweep's copy ``V`` by end position (:mod:`jaxrna.energy.partition_sweep`), both read
    through ``R`` as ``[a, i]`` windows."""
    left = R.T((ROW_PAD, channel, 0), (width, 1, height))[:, 0, :]
    right = R.V((length - d, d), (width, height))
    a = jnp.arange(width)[:, None]
    return _clip(softmin(jnp.where(a <= d - 2, left + right, INF), beta))


def _rows(d, R, dp, special, s, allowed, n, dangles, length, height, width):
    """The rows of every table on diagonal ``d``, cells i < ``height``: ``(len(TABLES),
    height)`` (``width``: the multiloop split's extent, > d - 2). Reads only diagonals below
    d (windows of ``T``, and of ``V``, the copy of ``M1`` by end position, through the reader
    ``R``: :class:`jaxrna.energy.partition_sweep.Reader`), so the final tables give each
    diagonal's inputs as they were when it was computed (what the outside pass of
    :mod:`jaxrna.energy.partition_sweep` relies on)."""
    beta = 10.0 / dp["kT"]
    lo = -2 - MAXLOOP
    block = R.T((ROW_PAD + d + lo, 0, 0), (-lo, R.shape[1], R.shape[2]))   # diagonals d-32..d-1
    v = PFView(s, allowed, special, dp, d, height, n, lo=lo, block=block)
    v.beta = beta
    tm = terms.pair_terms(v, dp, dangles)
    # the closing multiloop: only the inside (i+1, j-1) (the other shifts are dangles 1's)
    cands = [c for c in terms.pair_candidates(v, tm, dp, MAXLOOP)
             if c.table != "M2" or (c.dd, c.di) == terms.CLOSING_SHIFTS[0]]
    bonus_row = R.read("bonus", (d, 0), (1, height))[0]                 # the pair bonus
    c_row = jnp.where(tm["ok"] > 0, _clip(_reduce(cands, v, beta)) - bonus_row / beta, INF)
    m2_row = multiloop_split(R, d, INDEX["M"], length, height, width, beta)
    mb = dp["ml_base"]
    m1_row = _clip(softmin([v.row("M1", -1, 0) + mb, c_row + tm["stem0"]], beta))
    ma_row = _clip(softmin([v.row("MA", -1, 1) + mb, m1_row], beta))
    m_row = _clip(softmin([ma_row, m2_row], beta))
    rows = {"C": c_row, "M2": m2_row, "M": m_row, "M1": m1_row, "MA": ma_row}
    for name in terms.GROUP_NAMES:
        rows[name] = jnp.where(c_row < BIG, c_row + tm[f"adj_{name}"], INF)
    return jnp.stack([rows[name] for name in TABLES]).astype(R.dtype)


def _rows_fn(length):
    """:func:`_rows` in the form :mod:`jaxrna.energy.partition_sweep` takes."""
    def rows_fn(d, R, diff, fixed, height, width):
        return _rows(d, R, diff["dp"], diff["special"], fixed["s"],
                     fixed["allowed"], fixed["n"], fixed["dangles"], length, height, width)
    return rows_fn


def tables(s, allowed, special, n, dp, dangles, pair_bonus=None, outside: bool = True) -> dict:
    """The partition tables of one padded sequence (inputs as :func:`prepare_pf` gives them;
    ``dp`` from :func:`pf_device_params`). Returns ``{"T": tables, "F": exterior}``, ensemble
    free energies in dcal/mol; ``F[n]`` is the ensemble free energy. ``outside`` (static):
    differentiate the sweep by the outside pass (O(L^2) memory); False: by JAX's reverse mode
    through the loop (O(L^3); the same numbers, for tests)."""
    length = special.shape[-1] - COL_PAD
    dp = jax.tree.map(jnp.asarray, dp)
    s, allowed, special = jnp.asarray(s), jnp.asarray(allowed), jnp.asarray(special)
    n, dangles = jnp.asarray(n, jnp.int32), jnp.asarray(dangles, jnp.int32)
    dtype = jnp.result_type(dp["stack"])
    beta = 10.0 / dp["kT"]
    bonus = jnp.zeros((length, length), dtype) if pair_bonus is None else pair_bonus
    bonus = skew(bonus.astype(dtype))                                   # [d, i]
    special = special.astype(dtype)
    run = partition_sweep.sweep if outside else partition_sweep.forward
    T, V = run(_rows_fn(length), length, len(TABLES), INDEX["M1"],
               {"dp": dp, "bonus": bonus, "special": special},
               {"s": s, "allowed": allowed, "n": n, "dangles": dangles}, INF, ("bonus",))
    # exterior loop: E[j, i] = C(i, j) + the exterior branch (i, j)
    j = jnp.arange(length)[:, None]
    i = jnp.arange(length)[None, :]
    pv = PointsView(s, allowed, special, dp, i, j, n)
    E = _clip(exterior_c(T, length) + terms.exterior_terms(pv, dp, dangles)[0])

    def step(k, f):
        best = softmin([f[k], softmin(f[:length] + E[k], beta)], beta)
        return f.at[k + 1].set(best)

    F = jax.lax.fori_loop(0, length, step, jnp.zeros(length + 1, dtype))
    return {"T": T, "F": F}


def exterior_c(T, length: int):
    """``C(i, j)`` at ``[j, i]`` for every i, j < ``length`` (INF where j < i), read by one
    gather whose cells are all distinct, so that its derivative, a scatter-add, needs no
    atomic additions on a GPU (run-to-run equal results): where j < i it reads channel 1 at
    diagonal i - j instead of clipping onto one cell as :func:`jaxrna.energy.fill.c_reader`.

    >>> T = jnp.zeros((ROW_PAD + 2, 9, 2 + COL_PAD)).at[ROW_PAD + 1, 0, 0].set(5.0)
    >>> exterior_c(T, 2).tolist()          # C(0, 1) = 5; (1, 0) is no cell
    [[0.0, 10000000.0], [5.0, 0.0]]
    """
    j = jax.lax.broadcasted_iota(jnp.int32, (length, length), 0)     # built in the program,
    i = jax.lax.broadcasted_iota(jnp.int32, (length, length), 1)     # not stored in it
    ok = j >= i
    rows = ROW_PAD + jnp.abs(j - i)
    channel = jnp.where(ok, 0, 1)
    return jnp.where(ok, T.at[rows, channel, i].get(unique_indices=True), INF)


def log_partition(s, allowed, special, n, dp, dangles, pair_bonus=None, outside: bool = True):
    """``log Z`` of one padded sequence: the partition function of ViennaRNA's energy model
    (``s``, ``allowed``, ``special``, ``n`` from :func:`prepare_pf`; ``dp`` from
    :func:`pf_device_params`, every leaf a traced, differentiable value, ``kT`` among them;
    ``dangles`` 0 or 2, may be traced; ``pair_bonus``: ``(L, L)`` log-weights added to each
    pair (i, j), so that ``jax.grad`` with respect to it gives the pair probabilities).
    Pure JAX: ``jax.jit``, ``jax.vmap`` (over the sequence inputs) and ``jax.grad`` apply.

    >>> import jax
    >>> with jax.enable_x64(True):
    ...     inp = prepare_pf("GGGGAAACCCC", 32)
    ...     dp = pf_device_params(float_params(), 32, 37.0)
    ...     lz = log_partition(inp["s"], inp["allowed"], inp["special"], inp["n"], dp, 2)
    >>> round(float(-lz * 616.3207755 / 1000), 4)
    -4.8734
    """
    F = tables(s, allowed, special, n, dp, dangles, pair_bonus, outside)["F"]
    return -F[n] * 10.0 / dp["kT"]


def prepare_pf(sequence: str, length: int, params="turner2004", temperature: float = 37.0,
               unpaired=()) -> dict:
    """Host-side inputs of :func:`log_partition` for one sequence padded to ``length``: the
    MFE fill's codes and pairing mask (:func:`jaxrna.energy.inputs.prepare`) and the special
    hairpins with the partition function's (unrounded) energies."""
    inp = prepare(sequence, load_params(params, temperature), length, unpaired)
    inp["special"] = special_row(sequence, float_params(params, temperature), length)
    return inp


def _lz_and_bpp(s, allowed, special, n, dp, dangles):
    length = special.shape[-1] - COL_PAD
    bonus = jnp.zeros((length, length), jnp.result_type(dp["stack"]))
    return jax.value_and_grad(
        lambda b: log_partition(s, allowed, special, n, dp, dangles, b))(bonus)


#: ``log Z`` of a batch (sequence inputs stacked; parameters and dangles shared): one program
#: per padded length and batch size, whatever the lengths, parameters, temperature, dangles.
batch_log_partition = jax.jit(jax.vmap(log_partition, in_axes=(0, 0, 0, 0, None, None)))

#: The name of the pair-probability batch program in jaxrna's program store.
PROGRAM = "energy.partition"


def _batch_lz_and_bpp(s, allowed, special, n, dp, dangles):
    from jaxrna.batching import map_rows

    # one row (one long sequence): the sequence's program, no vmap of its loops
    return map_rows(_lz_and_bpp, in_axes=(0, 0, 0, 0, None, None))(s, allowed, special, n,
                                                                   dp, dangles)


@functools.lru_cache(maxsize=1)
def _program():
    """The batch program, kept by :mod:`jaxrna.programs` (compiled once per process and
    program key, stored in and loaded from the cache directory, on CPUs too: tracing it is a
    second of a small run). It has no static argument: the padded length and the row count
    are shapes, everything else a traced value."""
    from jaxrna.programs import stored_jit

    return stored_jit(PROGRAM, cpu_store=True)(_batch_lz_and_bpp)


def batch_jitted():
    """The batch program's ``jax.jit`` function (what a compile worker lowers:
    :mod:`jaxrna.compile_workers`; under ``jax_enable_x64``, as the engine runs it)."""
    return _program().jitted()


def batch_pair_probabilities(s, allowed, special, n, dp, dangles):
    """``(log Z, d log Z / d pair_bonus)`` of a batch (inputs as :func:`batch_inputs` gives
    them): the pair probabilities ``[B, L, L]``. One program (:data:`PROGRAM`) per padded
    length and batch size, whatever the lengths, parameters, temperature, dangles and
    unpaired positions."""
    return _program()(s, allowed, special, n, dp, dangles)


def prepare_pf_batch(sequences, length: int, params="turner2004", temperature: float = 37.0,
                     unpaired=None) -> dict:
    """:func:`prepare_pf` of many sequences, stacked (inputs of the batch functions)."""
    rows = [prepare_pf(x, length, params, temperature, () if unpaired is None else unpaired[k])
            for k, x in enumerate(sequences)]
    return {key: np.stack([r[key] for r in rows]) for key in rows[0]}


def batch_inputs(sequences, params=None, dangles: int = 2, temperature: float = 37.0,
                 unpaired=None, length=None):
    """``(arguments of the batch functions, kT)`` for ``sequences`` padded to ``length``
    (default: the class of the longest). The arguments' shapes and dtypes depend on the row
    count and ``length`` only (under ``jax_enable_x64``)."""
    source = "turner2004" if params is None else params
    length = length or length_class(max(len(x) for x in sequences))
    inp = prepare_pf_batch(sequences, length, source, temperature, unpaired)
    dp = pf_device_params(float_params(source, temperature), length, temperature)
    return (inp["s"], inp["allowed"], inp["special"], inp["n"].astype(np.int32), dp,
            np.int32(pf_dangles(dangles))), float(dp["kT"])


def ensemble_energies(sequences, params=None, dangles: int = 2, temperature: float = 37.0,
                      unpaired=None, length: int | None = None) -> np.ndarray:
    """Ensemble free energies (kcal/mol, float64) of ``sequences`` as one batch padded to
    ``length`` (default: the class of the longest), under ``jax.enable_x64``."""
    with x64():
        args, kT = batch_inputs(sequences, params, dangles, temperature, unpaired, length)
        return -np.asarray(batch_log_partition(*args)) * kT / 1000.0


def ensemble_energy(sequence: str, params=None, dangles: int = 2, temperature: float = 37.0,
                    unpaired=()) -> float:
    """The ensemble free energy ``-kT ln Z`` of ``sequence`` in kcal/mol, as ViennaRNA's
    ``fc.pf()`` gives it (``params``: a bundled set name or a ``.par`` path, default
    turner2004; ``unpaired``: 0-based positions kept unpaired). Computed in float64.

    >>> round(ensemble_energy("GGGGAAACCCC", dangles=0), 4)
    -4.6516
    """
    return float(ensemble_energies([sequence], params, dangles, temperature, [unpaired])[0])


def pair_probabilities(sequences, params=None, dangles: int = 2, temperature: float = 37.0,
                       unpaired=None, length: int | None = None):
    """``(ensemble energies in kcal/mol, [P])`` of a batch: ``P[i, j]`` (0-based, i < j,
    ``n x n`` per sequence) the probability that i pairs with j, the gradient of ``log Z``
    with respect to a per-pair log-weight bonus (exact; memory grows as the cube of the
    length: fine to a few hundred nt).

    >>> g, (p,) = pair_probabilities(["GGGGAAACCCC"])
    >>> round(float(p[0, 10]), 4)
    0.5643
    """
    with x64():
        args, kT = batch_inputs(sequences, params, dangles, temperature, unpaired, length)
        lz, grad = batch_pair_probabilities(*args)
        grad = np.asarray(grad)
        return (-np.asarray(lz) * kT / 1000.0,
                [np.triu(grad[k, :len(x), :len(x)], 1) for k, x in enumerate(sequences)])
