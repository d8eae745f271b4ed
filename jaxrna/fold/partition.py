"""The base-pair partition function of the Nussinov model, and pair probabilities by ``jax.grad``.

A structure ``S`` (non-crossing pairs, each base at most once, pair ``(i, j)`` allowed when
its weight is positive and ``j - i > min_loop``) weighs ``exp(W(S) / T)``, ``W`` its total
pair weight in the user's units. ``log_partition`` is ``ln`` of the sum over every structure,
the empty one included; the probability that ``(i, j)`` is paired is
``T * d log_partition / d w_ij`` (:func:`pair_probabilities`).

Recurrence. :mod:`jaxrna.fold.fill` maximises over an *ambiguous* split (a structure is
reached along several paths, harmless for a maximum, wrong for a sum). Here every structure
has exactly one derivation. On half-open intervals, ``Z[i, j]`` sums over the structures of
bases ``i .. j-1``::

    Z[i, i] = 1
    Z[i, j] = Z[i, j-1]  (+)  (+)_{i <= k <= j-2}  Z[i, k] (x) P[k, j]       (j-1 unpaired, or
    P[k, j] = w(k, j-1) (x) Z[k+1, j-1]                                        paired with k)

evaluated in a :class:`~jaxrna.semiring.Semiring`: in :data:`~jaxrna.semiring.MAX_PLUS` with
integer weights it is the Nussinov optimum, in :func:`~jaxrna.semiring.log_semiring` ``(T)``
it is ``ln Z``. :func:`inside_spans` is that one recurrence, a sweep over spans ``d = j - i``
(a skewed table, every read of the split sum one contiguous slice, as in :mod:`.fill`).

Gradients. Plain reverse-mode autodiff through the sweep keeps every step's tables
(O(n^3) memory). :func:`log_partition_from_scores` is a ``jax.custom_vjp`` whose backward
pass is the explicit outside recursion (:mod:`jaxrna.fold.outside`, or the tiled
:mod:`jaxrna.fold.partition_blocked`), O(n^2) memory. Everything is a pure function of one
encoded sequence; batch padded sequences with ``jax.vmap`` (padding code 4 never pairs, so a
padded sequence has the same partition function).

Paths (``method``). ``"exact"``: the log-space sweep, ~n^3/6 exponentials per pass.
``"blocked"``: Li et al.'s tiles with the bulk of every split sum a float64 matrix product
(several times faster from a few hundred nt; exact to rounding while each tile spans less
than :data:`GUARD_LIMIT_F64` nats, which it reports). ``"auto"``: exact below
:data:`BLOCKED_FROM` nt, else blocked, recomputing exactly when the guard trips (very low
temperatures). The string API (:func:`partition`, :func:`log_partition`,
:func:`pair_probabilities`) computes in float64.

Programs. The string API pads a sequence to its class (:data:`CLASSES`: 80 and 128 nt on the
exact path, 512, 1,024, 2,048, 4,096, 6,144 and 10,240 nt on the tiled one) and passes its own
length as a runtime value: the sweep stops at its span, the tiled loops at its tile diagonals
and tiles (a CPU does them 4 at a time, :data:`SOLVE_CHUNK`), so padding costs memory, little
work. The weights, temperature and ``min_loop`` are runtime values too: any mix of lengths up
to 10,240 nt and any numeric options compile at most 8 programs (``jaxrna warmup fold --model
nussinov --partition`` prepares them), plus one exact recompute per class where the guard trips.

>>> round(log_partition("GGGAAAUCC", "unit", min_loop=3), 6)
4.718959
>>> P = pair_probabilities("GGGAAAUCC", "unit", min_loop=3)
>>> round(float(P[0, 8]), 6), P.shape
(0.467285, (9, 9))
>>> import numpy as np
>>> from jaxrna.alphabet import encode
>>> from jaxrna.semiring import MAX_PLUS
>>> from jaxrna.weights import parse_weights
>>> s = pair_score_matrix(encode("GGGAAAUCC"), parse_weights("unit").matrix(), 3, np.int32)
>>> int(inside_spans(s, MAX_PLUS, min_loop=3)[9, 0])      # the Nussinov optimum
3
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from functools import partial
from typing import Iterable, Iterator

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.fold.inside import (inside_from_skew, range_blocks, runtime_length,  # noqa: F401
                                semiring_zero, skew_pair_weights, skew_size, sweep_blocks)
from jaxrna.fold.outside import outside_probabilities
from jaxrna.fold.partition_blocked import blocked_bytes, blocked_inside, blocked_outside
from jaxrna.semiring import NEG_FLOAT, NEG_INT, Semiring, log_semiring
from jaxrna.weights import WeightSet, parse_weights

log = logging.getLogger("jaxrna")

METHODS = ("auto", "exact", "blocked")
#: ``method="auto"`` uses the tiled path from this length on (above the exact classes, 80 and
#: 128 nt of :data:`CLASSES`).
BLOCKED_FROM = 129
#: The tiled path's bulk products are exact in float64 while the largest log-range of a
#: table tile stays below this (see :mod:`jaxrna.fold.partition_blocked`); beyond it,
#: ``method="auto"`` recomputes with the exact path.
GUARD_LIMIT_F64 = 600.0
GUARD_LIMIT_F32 = 60.0


def pair_score_matrix(codes, weight_matrix, min_loop: int = 3, dtype=None) -> jax.Array:
    """The ``(n, n)`` pair scores of one encoded sequence: ``weight_matrix[c_i, c_j]`` for an
    allowed pair ``i < j`` (weight > 0, ``j - i > min_loop``), the semiring zero elsewhere.

    ``weight_matrix``: 5x5 by nucleotide code (e.g. ``WeightSet.matrix()`` for integer units,
    divided by ``scale`` for the user's units). ``dtype`` defaults to the weights' dtype.
    """
    codes = jnp.asarray(codes, jnp.int32)
    w = jnp.asarray(weight_matrix)
    if dtype is not None:
        w = w.astype(dtype)
    n = codes.shape[0]
    s = w[codes[:, None], codes[None, :]]
    i = jnp.arange(n)
    ok = (s > 0) & (i[None, :] - i[:, None] > min_loop)
    return jnp.where(ok, s, jnp.asarray(semiring_zero(s.dtype), s.dtype))


@partial(jax.jit, static_argnames=("semiring", "blocks"))
def inside_spans(scores: jax.Array, semiring: Semiring, min_loop: int = 3,
                 blocks: int | None = None) -> jax.Array:
    """The one recurrence, in any semiring: ``rows[d, i] = Z[i, i + d]`` for the ``(n, n)``
    pair ``scores`` (user units for the log semiring, integer units for max-plus; entries
    equal to the semiring zero, or with ``j - i <= min_loop``, are not pairs).

    ``rows[n, 0]`` is the result: the optimal score in :data:`MAX_PLUS`, ``ln Z`` in
    ``log_semiring(T)``. Differentiable by plain autodiff (O(n^3) memory; see
    :func:`log_partition_from_scores` for the O(n^2) gradient). ``blocks``: span blocks
    (default :func:`sweep_blocks`).
    """
    n = scores.shape[0]
    blocks = blocks or sweep_blocks(n)
    size = skew_size(n, blocks)
    lws = skew_pair_weights(scores, semiring, min_loop, size)
    return inside_from_skew(lws, n, semiring, blocks)


# -------------------------------------------------------------------------------------
# ln Z with an O(n^2)-memory gradient


def exact_blocks(n: int, length=None) -> int:
    """Span blocks of the exact path for tables of side ``n``: :data:`EXACT_BLOCKS` for a
    class program (``length`` given), else :func:`sweep_blocks`."""
    return EXACT_BLOCKS.get(n, sweep_blocks(n)) if length is not None else sweep_blocks(n)


def _exact_forward(lw: jax.Array, length=None):
    n = lw.shape[0]
    blocks = exact_blocks(n, length)
    sr = log_semiring(1.0)
    lws = skew_pair_weights(lw, sr, 0, skew_size(n, blocks))     # lw is already masked
    rows = inside_from_skew(lws, n, sr, blocks, length)
    return rows[n if length is None else runtime_length(length), 0], (rows, lws)


def _forward(lw, method, tile, groups=None, length=None, chunk=None):
    """``(ln Z, guard, residuals)`` for the masked log weights ``lw`` (``guard`` is 0 on the
    exact path). ``groups``: block-diagonal groups of the tiled path (None: its default).
    ``length``: the sequence's own length, a runtime value (the rest of ``lw`` padding that
    never pairs; None: all of it); ``chunk``: the tiled path's tiles per step."""
    if method == "exact":
        lnz, res = _exact_forward(lw, length)
        return lnz, jnp.zeros((), lw.dtype), res
    lnz, guard, res = blocked_inside(lw, tile, groups, length, chunk)
    return lnz, guard, res


def _backward(lw, res, lnz, method, tile, groups=None, length=None, chunk=None):
    """The ``(n, n)`` pair probabilities (= d ln Z / d lw)."""
    n = lw.shape[0]
    if method == "exact":
        rows, lws = res
        return outside_probabilities(rows, lws, n, exact_blocks(n, length), length)
    return blocked_outside(lw, res, lnz, tile, groups, length, chunk)


# Compiled once per shape, method and tile; shared by the custom_vjp and the one-shot API.
_forward_jit = jax.jit(_forward, static_argnames=("method", "tile"))
_backward_jit = jax.jit(_backward, static_argnames=("method", "tile"))


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _lnz(lw, method, tile):
    return _forward_jit(lw, method, tile)[0]


def _lnz_fwd(lw, method, tile):
    lnz, _, res = _forward_jit(lw, method, tile)
    return lnz, (lw, res, lnz)


def _lnz_bwd(method, tile, saved, g):
    lw, res, lnz = saved
    return (g * _backward_jit(lw, res, lnz, method, tile),)


_lnz.defvjp(_lnz_fwd, _lnz_bwd)


def check_method(method: str, n: int) -> str:
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    if method == "auto":
        return "blocked" if n >= BLOCKED_FROM else "exact"
    return method


def default_tile(n: int) -> int:
    """The tile side of the blocked path for length ``n``: about sqrt(n), a power of two
    between 16 and 64 (balances the in-tile sweeps, ~n^2 t exponentials, against the bulk's
    ~n^3 / t; measured on a CPU: 16 up to 512 nt, 32 for 1,000 nt, 64 for 4,000; in the 512-nt
    class, 256 nt take 46 ms with 16, 58 ms with 32)."""
    if n <= 512:
        return 16
    t = 16
    while t < 64 and t * t < n:
        t *= 2
    return t


def masked_log_weights(scores: jax.Array, temperature: float, min_loop: int) -> jax.Array:
    """``scores / T`` where ``(i, j)`` is an allowed pair (score above the zero), the float
    zero elsewhere."""
    n = scores.shape[0]
    i = jnp.arange(n)
    ok = (scores > NEG_FLOAT / 2) & (i[None, :] - i[:, None] > min_loop)
    return jnp.where(ok, scores / temperature, jnp.asarray(NEG_FLOAT, scores.dtype))


@jax.jit
def _prepare(codes, weight_matrix, min_loop, temperature):
    return masked_log_weights(pair_score_matrix(codes, weight_matrix, min_loop), temperature,
                              min_loop)


def log_partition_from_scores(scores: jax.Array, temperature: float = 1.0, min_loop: int = 0,
                              method: str = "exact", tile: int | None = None) -> jax.Array:
    """``ln Z`` of one sequence from its ``(n, n)`` float pair scores (user units; see
    :func:`pair_score_matrix`), differentiable with an O(n^2)-memory gradient:
    ``temperature * jax.grad(...)`` is the pair-probability matrix.

    ``method``: ``"exact"`` (log-space sweep over spans), ``"blocked"`` (tiles whose bulk is
    a real matrix product, :mod:`jaxrna.fold.partition_blocked`) or ``"auto"``. Pure: jit it,
    vmap it over padded batches.
    """
    n = scores.shape[0]
    method = check_method(method, n)
    tile = tile or default_tile(n)
    lw = masked_log_weights(scores, temperature, min_loop)
    return _lnz(lw, method, tile)


def partition_and_probabilities(lw: jax.Array, method: str = "exact", tile: int = 32):
    """``(ln Z, P, guard)`` in one forward and one outside pass from masked log weights
    ``lw`` (:func:`masked_log_weights`). ``guard``: the blocked path's largest in-tile
    log-range (0 for the exact path); results are exact while it stays below
    :data:`GUARD_LIMIT_F64` (float64)."""
    lnz, guard, res = _forward_jit(lw, method, tile)
    return lnz, _backward_jit(lw, res, lnz, method, tile), guard


def _solve_program(codes, weight_matrix, temperature, min_loop, length, *, method: str,
                   tile: int, groups: int | None, chunk: int | None = None):
    """``(ln Z, P, guard)`` of one sequence padded to its class (:func:`padded_length`) from
    its codes: the pair weights, the forward and the outside pass as one program (what
    :func:`partition` runs). The weights, temperature, ``min_loop`` and the sequence's own
    ``length`` are traced (arguments: one program serves every value); the loops over spans
    and tile diagonals stop where ``length`` needs."""
    lw = masked_log_weights(pair_score_matrix(codes, weight_matrix, min_loop), temperature,
                            min_loop)
    lnz, guard, res = _forward(lw, method, tile, groups, length, chunk)
    return lnz, _backward(lw, res, lnz, method, tile, groups, length, chunk), guard


solve_jit = jax.jit(_solve_program, static_argnames=("method", "tile", "groups", "chunk"))
#: Block-diagonal groups of the tiled path per platform (each one loop body with static bulk
#: widths): one compiles fastest and a GPU runs it as fast (its steps are latency-bound); on a
#: CPU three do less work on the bulk (2,000 nt, CPU seconds: compile 7.5 and run 5.8, against
#: 19.5 and 5.0 with eight).
SOLVE_GROUPS = {"gpu": 1, "cpu": 3}
#: Tiles of one block diagonal per step of the tiled path, per platform: a CPU loops over
#: chunks of this many, as many as the runtime length needs (a short sequence in a long class
#: costs little more than in its own); a GPU does every tile of the class in one step (None:
#: fewer, wider steps; its steps are latency-bound).
SOLVE_CHUNK = {"gpu": None, "cpu": 4}


def solve_static(method: str, tile: int, platform: str) -> dict:
    """The static arguments of :func:`solve_jit` for ``method`` and ``tile`` on ``platform``."""
    blocked = method == "blocked"
    return dict(method=method, tile=tile if blocked else None,     # the exact path has no tiles
                groups=SOLVE_GROUPS.get(platform) if blocked else None,
                chunk=SOLVE_CHUNK.get(platform) if blocked else None)


def _solve_call(codes: np.ndarray, wm: np.ndarray, temperature: np.ndarray, min_loop: int,
                length: int, method: str, tile: int):
    """Run :func:`_solve_program` on JAX's default device, through the stored executables
    (:mod:`jaxrna.programs`)."""
    from jaxrna import programs

    device = programs.default_device()
    static = solve_static(method, tile, device.platform)
    args = (codes, wm, temperature, np.asarray(min_loop, np.int32),
            np.asarray(length, np.int32))
    run = programs.program("fold.partition", solve_jit, args, static, device)
    from jaxrna import stages

    with stages.stage("device"):            # a GPU runs this program's loops from the host
        return run(*jax.device_put(args, device))


# -------------------------------------------------------------------------------------
# strings or codes in, numbers out


@contextlib.contextmanager
def float64():
    """Compute in float64 inside this block (JAX's x64 switch, restored on exit)."""
    ctx = getattr(jax, "enable_x64", None)
    if ctx is None:                                        # older JAX
        from jax.experimental import enable_x64 as ctx     # type: ignore
        with ctx():
            yield
        return
    with ctx(True):
        yield


def _weights(weights) -> WeightSet:
    return parse_weights(weights) if isinstance(weights, str) else weights


def _codes(seq_or_codes) -> np.ndarray:
    from jaxrna.alphabet import encode

    if isinstance(seq_or_codes, str):
        return encode(seq_or_codes.upper().replace("T", "U")).astype(np.int32)
    codes = np.asarray(seq_or_codes)
    if codes.ndim != 1 or not np.issubdtype(codes.dtype, np.integer):
        raise ValueError("expected a sequence string or a 1-D array of nucleotide codes")
    if codes.size and (codes.min() < 0 or codes.max() > 4):
        raise ValueError("nucleotide codes must lie in 0..4 (A, C, G, U, other)")
    return codes.astype(np.int32)


#: The padded lengths (classes) of the partition programs: ``method="auto"`` runs the exact
#: path on the first two (up to 128 nt), the tiled one on the others, so any mix of lengths up
#: to 10,240 nt compiles at most 8 programs (plus, where the tiled path's guard trips, the
#: exact recompute at that class: see :func:`partition`). Beyond the last class, multiples of
#: 4,096 nt (one more program each). The tiled path runs to the sequence's own tile count and
#: tiles (the exact one to its own span), so a class costs memory more than work: measured on
#: a CPU, 150 nt in the 512-nt class take 20 ms, 300 nt 57 ms (the former programs padded to
#: 160 and 384 nt: 51 and 91 ms).
CLASSES = (80, 128, 512, 1024, 2048, 4096, 6144, 10240)
#: Span blocks of the exact classes' programs (each block one loop body whose slices are as
#: wide as its longest span and as tall as its shortest one's cells): more blocks waste less
#: work on a sequence shorter than its class but compile longer. Measured on a CPU: 80 nt in
#: the 80-nt class 2.6 ms with 3 blocks, 2.9 ms with 2 (the former one-block program: 4.5
#: ms); in the 128-nt class, 100 nt 5.9 ms with 8 blocks, 6.2 ms with 4.
EXACT_BLOCKS = {80: 3, 128: 8}


def padded_length(n: int) -> int:
    """The class a sequence of ``n`` nt is padded to (code 4, never pairs): the smallest of
    :data:`CLASSES` that holds it, beyond them the next multiple of 4,096. The programs run to
    the sequence's own length inside its class (padding costs memory, little work).

    >>> [padded_length(n) for n in (1, 80, 81, 129, 2048, 2049, 10240, 10241)]
    [80, 80, 128, 512, 2048, 4096, 10240, 12288]
    """
    for c in CLASSES:
        if n <= c:
            return c
    return -(-n // 4096) * 4096


def class_ladder(max_length: int) -> list[int]:
    """Every class of :func:`padded_length` a sequence of at most ``max_length`` nt can take.

    >>> class_ladder(3000)
    [80, 128, 512, 1024, 2048, 4096]
    """
    top = padded_length(max(max_length, 1))
    return [c for c in CLASSES if c <= top] + list(range(12288, top + 1, 4096))


def class_method(padded: int) -> str:
    """The path ``method="auto"`` takes in the class ``padded``: exact below
    :data:`BLOCKED_FROM` nt, tiled from it (every length of a class takes the same path)."""
    return check_method("auto", padded)


@dataclass(frozen=True)
class PartitionResult:
    """One sequence's ensemble: ``probabilities[i, j]`` (0-based, ``i < j``, upper triangle)
    is the probability that ``i`` pairs with ``j``."""

    id: str
    sequence: str
    log_partition: float
    probabilities: np.ndarray = field(repr=False)
    temperature: float = 1.0
    min_loop: int = 3
    weights: WeightSet | None = None
    method: str = "exact"

    @property
    def length(self) -> int:
        return len(self.sequence)

    def triples(self, threshold: float = 1e-6) -> list[tuple[int, int, float]]:
        """``(i, j, p)``, 1-based, ``i < j``, every ``p >= threshold``, sorted by ``i, j``."""
        return probability_triples(self.probabilities, threshold)


def probability_triples(P: np.ndarray, threshold: float = 1e-6) -> list[tuple[int, int, float]]:
    """``(i, j, p)`` for ``P[i-1, j-1] >= threshold`` with ``i < j`` (1-based), row-major.

    >>> probability_triples(np.array([[0, 0.5, 1e-7], [0, 0, 0.25], [0, 0, 0]]))
    [(1, 2, 0.5), (2, 3, 0.25)]
    """
    P = np.triu(np.asarray(P), 1)
    rows, cols = np.nonzero(P >= threshold)
    return [(int(i) + 1, int(j) + 1, float(P[i, j])) for i, j in zip(rows, cols)]


def _solve(codes: np.ndarray, weights: WeightSet, min_loop: int, temperature: float,
           method: str, tile: int | None, dtype) -> tuple[float, np.ndarray, str]:
    n = codes.shape[0]
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, not {temperature}")
    if min_loop < 0:
        raise ValueError("min_loop must be >= 0")
    chosen = check_method(method, n)
    if n < 2:
        return 0.0, np.zeros((n, n)), chosen
    from jaxrna import stages

    padded = padded_length(n)
    full = np.full(padded, 4, np.int32)
    full[:n] = codes
    dtype = jnp.dtype(dtype) if dtype is not None else jnp.float64
    wm = (np.asarray(weights.matrix(), np.float64) / weights.scale).astype(dtype)
    temp = np.asarray(temperature, dtype)
    limit = GUARD_LIMIT_F64 if dtype == jnp.float64 else GUARD_LIMIT_F32
    t = tile or default_tile(padded)
    out = _solve_call(full, wm, temp, min_loop, n, chosen, t)
    with stages.stage("device"):
        lnz, P, guard = jax.device_get(out)
    suspect = not (float(guard) <= limit and np.isfinite(float(lnz)))   # NaN counts as over
    if chosen == "blocked" and suspect:
        if method == "blocked":
            log.warning("blocked partition function: a tile spans %s nats (> %.0f); "
                        "results may lose accuracy, use method='exact'", float(guard), limit)
        else:
            chosen = "exact"
            out = _solve_call(full, wm, temp, min_loop, n, "exact", t)
            with stages.stage("device"):
                lnz, P, _ = jax.device_get(out)
    P = np.asarray(P, np.float64)[:n, :n]
    return float(lnz), np.triu(P, 1), chosen


def _run(seq_or_codes, weights, min_loop, temperature, method, tile, dtype):
    codes = _codes(seq_or_codes)
    ws = _weights(weights)
    if dtype is None or jnp.dtype(dtype) == jnp.float64:
        with float64():
            return _solve(codes, ws, min_loop, temperature, method, tile, jnp.float64)
    return _solve(codes, ws, min_loop, temperature, method, tile, dtype)


def log_partition(seq_or_codes, weights: WeightSet | str = "unit", min_loop: int = 3,
                  temperature: float = 1.0, method: str = "auto", tile: int | None = None,
                  dtype=None) -> float:
    """``ln Z`` of one sequence (a string, or an array of codes from
    :func:`jaxrna.alphabet.encode`). ``weights``: ``"unit"``, ``"bpmax"``, ``"integer"``,
    ``"GC=3,AU=2,GU=1"`` or a :class:`~jaxrna.weights.WeightSet` (user units: a bpmax GU pair
    weighs 1.5). Computed in float64 unless ``dtype`` says otherwise."""
    return _run(seq_or_codes, weights, min_loop, temperature, method, tile, dtype)[0]


def pair_probabilities(seq_or_codes, weights: WeightSet | str = "unit", min_loop: int = 3,
                       temperature: float = 1.0, method: str = "auto", tile: int | None = None,
                       dtype=None) -> np.ndarray:
    """The ``(n, n)`` base-pair probabilities (upper triangle, 0-based); arguments as
    :func:`log_partition`. Sparse triples: :func:`probability_triples`."""
    return _run(seq_or_codes, weights, min_loop, temperature, method, tile, dtype)[1]


def partition(sequence: str, weights: WeightSet | str = "unit", min_loop: int = 3,
              temperature: float = 1.0, method: str = "auto", id: str = "seq",
              tile: int | None = None) -> PartitionResult:
    """``ln Z`` and the pair probabilities of one sequence in one pass (float64), by the program
    of its class (:func:`padded_length`). With ``method="auto"``, a tiled result whose guard
    trips (a tile spans more than :data:`GUARD_LIMIT_F64` nats: temperatures far below 1) is
    recomputed by the exact path at the same class, a program of its own (so at most one more
    program per tiled class, only where that happens)."""
    ws = _weights(weights)
    lnz, P, chosen = _run(sequence, ws, min_loop, temperature, method, tile, None)
    return PartitionResult(id=id, sequence=sequence, log_partition=lnz, probabilities=P,
                           temperature=float(temperature), min_loop=min_loop, weights=ws,
                           method=chosen)


# -------------------------------------------------------------------------------------
# memory, records


def estimate_bytes(length: int, method: str = "auto") -> int:
    """Peak memory of :func:`partition` for one sequence of ``length`` nt (float64)."""
    n = padded_length(length)
    chosen = check_method(method, n)
    if chosen == "exact":
        side = skew_size(n, sweep_blocks(n))
        return 8 * 12 * side * side + (64 << 20)
    return blocked_bytes(n, default_tile(n)) + (64 << 20)


def memory_limit(backend: str = "cpu", max_bytes: int | None = None) -> int:
    """``max_bytes``, else 80% of the GPU's memory (``backend="gpu"``) or of this machine's."""
    from jaxrna.runtime import device_memory_bytes, memory_bytes

    if max_bytes is not None:
        return max_bytes
    limit = device_memory_bytes("gpu") if backend == "gpu" else 0
    return int(0.8 * (limit or memory_bytes()))


def check_memory(length: int, record_id: str, max_bytes: int | None = None,
                 method: str = "auto", backend: str = "cpu") -> None:
    """Refuse up front a sequence whose tables would not fit (``ResourceError``)."""
    from jaxrna.io.errors import ResourceError
    from jaxrna.runtime import human_bytes

    limit = memory_limit(backend, max_bytes)
    need = estimate_bytes(length, method)
    if limit and need > limit:
        raise ResourceError(
            f"{length} nt need about {human_bytes(need)} for the partition function, more "
            f"than the {human_bytes(limit)} allowed; use a machine (or GPU) with more memory, "
            f"split the sequence into domains, or raise --max-memory")


def partition_records(records: Iterable, weights: WeightSet | str = "unit", min_loop: int = 3,
                      temperature: float = 1.0, method: str = "auto",
                      max_bytes: int | None = None, backend: str = "cpu", on_done=None,
                      on_error=None) -> Iterator[PartitionResult]:
    """:func:`partition` for a stream of :class:`~jaxrna.io.Record`, in input order, on every
    device of ``backend`` (or the first ``--devices N``): records go to the devices in turn
    (:func:`jaxrna.pipeline.schedule_on_threads`), each device computing its records one at a
    time on a thread of its own. A record too large for memory raises ``ResourceError``, or is
    passed to ``on_error(record, error)`` and skipped."""
    from jaxrna.io.errors import ResourceError
    from jaxrna.pipeline import schedule_on_threads
    from jaxrna.runtime import devices

    ws = _weights(weights)

    def checked():
        for rec in records:
            try:
                check_memory(len(rec), rec.id, max_bytes, method, backend)
            except ResourceError as exc:
                if on_error is None:
                    raise
                on_error(rec, exc)
                continue
            yield rec

    def one(rec, device):
        with jax.default_device(device):
            return partition(rec.sequence, ws, min_loop, temperature, method, id=rec.id)

    used = devices(backend)
    # one device: here, record by record; several: a thread per device, one record on each
    # device at a time (the device runs while its thread waits), results in input order
    runs = schedule_on_threads(checked(), one, lambda rec, result: result, used,
                               depth=0 if len(used) == 1 else 1)
    for _, result in runs:
        if on_done:
            on_done(1)
        yield result


__all__ = ["inside_spans", "pair_score_matrix", "masked_log_weights", "log_partition_from_scores",
           "partition_and_probabilities", "log_partition", "pair_probabilities", "partition",
           "PartitionResult", "probability_triples", "partition_records", "estimate_bytes",
           "float64"]
