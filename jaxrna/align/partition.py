"""The forward partition function of pairwise alignment, and match posteriors by ``jax.grad``.

The model is jaxrna's three-state Gotoh alignment (:mod:`jaxrna.align.reference`) summed
instead of maximised: an alignment weighs ``exp(score / T)``, its score in the user's units
(substitution scores, a gap run of length L scoring ``-(open + (L - 1) * extend)``; an X run
directly followed by a Y run is two runs). ``mode="global"``: ``Z`` sums every alignment of
the whole sequences. ``mode="local"``: ``Z = 1`` (the empty alignment) plus every alignment
of a query substring with a target substring that starts and ends with an aligned pair, so
``T ln Z`` tends to the Smith-Waterman score ``max(0, best)`` as ``T -> 0``. Minimised
presets (edit distance) weigh ``exp(-cost / T)``. With end gaps scored apart (global; free end
gaps, or end gap penalties of their own) the ensemble is the same set of global alignments,
each counted once; a run before the first or after the last residue of the other sequence
weighs by the end gap scores (1 when free). The sweep gets that as the max-plus paths do: end
gap scores on the border and for the X gaps of the last column and the Y gaps of the last
row, where every run is a trailing one (:mod:`jaxrna.kernels.gotoh`).

The match posterior ``P[i, j]`` (query i aligned to target j) is ``T * d ln Z / d S[i, j]``,
``S`` the per-cell substitution scores: reverse-mode autodiff through the forward sweep is
the backward (outside) pass.

:func:`forward` is the core: :func:`jaxrna.align.recurrence.cell`, the same update the
max-plus paths and the Pallas kernel use, evaluated in any :class:`~jaxrna.semiring.Semiring`
along antidiagonals (``lax.scan``; the shorter sequence on the lanes) of one pair given its
dense substitution scores and true lengths: pure, jit-able, vmap-able over padded batches.
In the log semiring the values of each antidiagonal are stored relative to a running offset
(the previous antidiagonal's largest ``H``), so float32 keeps its relative precision along
paths of any length; the scan body is rematerialised in the backward pass, so the memory of
:func:`posteriors` is about :func:`posterior_bytes` (O(n m) floats, the carry of each
antidiagonal).

>>> lz, P = match_posteriors("GATTACA", "GATCA", match=1, mismatch=-1, gap_open=2,
...                          gap_extend=1)
>>> round(lz, 3), P.shape, round(float(P[0, 0]), 3)
(2.848, (7, 5), 0.972)
>>> round(log_partition("GATTACA", "GATCA", match=1, mismatch=-1, gap_open=2, gap_extend=1,
...                     temperature=0.01) * 0.01, 3)   # T -> 0: the Needleman-Wunsch score 2
2.0
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.align.posterior_classes import MATRIX_SIDE, batch_class, class_rows, within_budget
from jaxrna.align.recurrence import cell
from jaxrna.align.scoring import Scoring, check_end_gaps, make_scoring
from jaxrna.batching import bucket_length
from jaxrna.semiring import MAX_PLUS, Semiring, log_semiring

__all__ = ["forward", "posteriors", "batch_log_partition", "batch_posteriors",
           "substitution_scores", "gap_scores", "end_gap_scores", "posterior_bytes",
           "log_partition",
           "match_posteriors"]

MODES = ("global", "local")


# --------------------------------------------------------------------------------------
# the core: one pair, encoded


def skew(S: jax.Array) -> jax.Array:
    """``(h + w - 1, h)`` antidiagonals of ``S`` (``h`` x ``w``): ``out[s, k] = S[k, s - k]``
    where ``0 <= s - k < w`` (0 elsewhere), by padding and reshaping only.

    >>> skew(jnp.arange(6).reshape(2, 3)).tolist()
    [[0, 0], [1, 3], [2, 4], [0, 5]]
    """
    h, w = S.shape
    flat = jnp.pad(S, ((0, 0), (0, h))).reshape(-1)[:h * (w + h - 1)]
    return flat.reshape(h, w + h - 1).T


def forward(S: jax.Array, go, ge, m=None, n=None, *, local: bool,
            semiring: Semiring = MAX_PLUS, eo=None, ee=None) -> jax.Array:
    """``ln Z`` (log semiring) or the best score (max-plus) of the pair whose substitution
    scores are ``S[:m, :n]``.

    ``S``: ``(h, w)`` scores of every query position against every target position (padded;
    integers for exact max-plus, floats in the user's units for the log semiring, which
    divides them by its temperature); ``go``, ``ge``: the gap open and extend *scores*
    (``<= 0``, same units); ``m``, ``n``: the true lengths (default ``h``, ``w``; traced
    values are fine, so the function vmaps over padded batches). Global: ``H(m, n)``;
    local: ``1 (+) (+)_cells M`` (the empty alignment included, ``max(0, best)`` in
    max-plus). ``eo``, ``ee``: the end gaps' open and extend scores (global; default: as
    inner gaps).

    >>> S = jnp.array([[1.0, -1.0], [-1.0, 1.0]])
    >>> int(forward(S.astype(jnp.int32), -2, -1, local=False))     # the best score
    2
    >>> round(float(forward(S, -2.0, -1.0, local=False, semiring=log_semiring(1.0))), 4)
    2.0293

    A padded batch (the second pair is 1 x 1, ``ln Z = ln(e + 2 e^-4)``: M, XY, YX):

    >>> Sb = jnp.stack([S, jnp.array([[1.0, 0.0], [0.0, 0.0]])])
    >>> f = jax.vmap(lambda s, m, n: forward(s, -2.0, -1.0, m, n, local=False,
    ...                                      semiring=log_semiring(1.0)))
    >>> np.round(np.asarray(f(Sb, jnp.array([2, 1]), jnp.array([2, 1])), float), 4).tolist()
    [2.0293, 1.0134]

    Free end gaps: "A" against "ACC" scores 1 (the A with the first C's gaps free):

    >>> S1 = jnp.array([[1, -1, -1]])
    >>> int(forward(S1, -2, -1, local=False)), int(forward(S1, -2, -1, local=False, eo=0, ee=0))
    (-2, 1)
    """
    h, w = S.shape
    m = h if m is None else m
    n = w if n is None else n
    if h > w:                  # the model is symmetric: put the shorter sequence on the lanes
        return forward(S.T, go, ge, n, m, local=local, semiring=semiring, eo=eo, ee=ee)
    sr = semiring
    if not sr.is_max and not jnp.issubdtype(S.dtype, jnp.floating):
        S = S.astype(jnp.result_type(float))
    dt = S.dtype
    S = sr.weight(S)
    go = sr.weight(jnp.asarray(go, dt))
    ge = sr.weight(jnp.asarray(ge, dt))
    ends = eo is not None and not local
    if ends:
        eo = sr.weight(jnp.asarray(eo, dt))
        ee = sr.weight(jnp.asarray(ee, dt))
    else:
        eo, ee = go, ge
    zero, one = sr.zero(dt), sr.one(dt)
    m = jnp.asarray(m, jnp.int32)
    n = jnp.asarray(n, jnp.int32)

    def gap(length):              # log weight of one gap run of ``length`` >= 1 columns
        return go + (length - 1).astype(dt) * ge

    def end_gap(length):          # the same for an end gap
        return eo + (length - 1).astype(dt) * ee

    edge = jnp.where(m + n == 0, one, end_gap(jnp.maximum(m, n)))  # a global pair, m or n 0
    if h == 0:
        return one if local else edge
    rescale = not sr.is_max
    lanes = jnp.arange(h, dtype=jnp.int32)
    lane_x = end_gap(lanes + 1)                          # X(i, 0) of row i = lane + 1
    lane_h = jnp.where(lanes == 0, one, end_gap(lanes))  # H(i - 1, 0)
    if ends:                                             # the last row's Y: end gaps
        y_gaps = (jnp.where(lanes == m - 1, eo, go), jnp.where(lanes == m - 1, ee, ge))
    full = jnp.full((h,), zero, dt)

    def shift(first, v):
        return jnp.concatenate([jnp.broadcast_to(first, (1,)).astype(dt), v[:-1]])

    def step(carry, xs):
        # values of step s - 1 relative to the offset c1, of step s - 2 relative to c1 - d1
        pm, px, py, ph, p2h, d1, c1, tail = carry
        s, sub = xs
        j = s - lanes + 1                                # lane k computes cell (k + 1, j)
        first = j == 1
        if local:                                        # minus infinity on the border
            top_y = top_h = left_x = left_h = zero
        else:
            top_y = end_gap(s + 1) - c1                  # Y(0, s + 1)
            top_h = jnp.where(s == 0, one, end_gap(s)) - c1  # H(0, s)
            left_x, left_h = lane_x - c1, lane_h - c1
        dg = jnp.where(first, left_h, shift(top_h, p2h - d1))
        gaps = {}
        if ends:                                         # the last column's X: end gaps
            gaps = {"x_gaps": (jnp.where(j == n, eo, go), jnp.where(j == n, ee, ge)),
                    "y_gaps": y_gaps}
        mm, xx, yy, hh, _ = cell(
            dg, shift(zero, pm), shift(zero, px), shift(top_y, py),
            jnp.where(first, zero, pm), jnp.where(first, left_x, px), jnp.where(first, zero, py),
            sub, go, ge, local=local, semiring=sr, start=-c1 if rescale else None, **gaps)
        valid = (lanes < m) & (j >= 1) & (j <= n)
        delta = d1
        if rescale:
            top = jnp.max(jnp.where(valid, hh, zero))
            delta = jax.lax.stop_gradient(jnp.where(top > zero / 2, top, 0).astype(dt))
            mm, xx, yy, hh = (v - delta for v in (mm, xx, yy, hh))
        c = c1 + delta
        if local:                                        # every M cell may end the alignment
            tail = sr.plus(tail - delta, jnp.where(valid, mm, zero))
        else:                                            # H(i, n) of every row, absolute
            tail = jnp.where(j == n, hh + c, tail)
        return (mm, xx, yy, hh, ph, delta, c, tail), None

    scalar = jnp.zeros((), dt)
    init = (full, full, full, full, full, scalar, scalar, full)
    xs = (jnp.arange(h + w - 1, dtype=jnp.int32), skew(S))
    body = jax.checkpoint(step, prevent_cse=False) if rescale else step
    carry, _ = jax.lax.scan(body, init, xs)
    c, tail = carry[6], carry[7]
    if local:
        return sr.plus(one, c + sr.sum(tail))
    return jnp.where((m == 0) | (n == 0), edge, tail[jnp.clip(m - 1, 0, h - 1)])


def posteriors(S: jax.Array, go, ge, m=None, n=None, *, local: bool,
               temperature=1.0, eo=None, ee=None) -> tuple[jax.Array, jax.Array]:
    """``(ln Z, P)``: ``P[i, j] = T * d ln Z / d S[i, j]``, the probability that query ``i``
    is aligned to target ``j`` (0 outside ``[:m, :n]``). Arguments as :func:`forward`;
    ``temperature`` may be traced (scores are divided by it and summed at ``T = 1``, so
    another temperature does not recompile).

    >>> lz, P = posteriors(jnp.array([[1.0, -1.0], [-1.0, 1.0]]), -2.0, -1.0, local=False)
    >>> np.round(np.asarray(P, float), 3).tolist()
    [[0.984, 0.001], [0.001, 0.984]]
    """
    inv = 1.0 / jnp.asarray(temperature, S.dtype)
    ends = {} if eo is None else {"eo": eo * inv, "ee": ee * inv}
    log_z, grad = jax.value_and_grad(
        lambda s: forward(s * inv, go * inv, ge * inv, m, n, local=local,
                          semiring=_UNIT, **ends))(S)
    return log_z, grad / inv


_UNIT = log_semiring(1.0)


@functools.partial(jax.jit, static_argnames=("local", "semiring"))
def batch_log_partition(S, go, ge, m, n, eo=None, ee=None, *, local: bool,
                        semiring: Semiring) -> jax.Array:
    """:func:`forward` of a padded batch: ``S`` ``(B, h, w)``, ``m``, ``n`` ``(B,)``."""
    fn = functools.partial(forward, local=local, semiring=semiring, eo=eo, ee=ee)
    return jax.vmap(fn, in_axes=(0, None, None, 0, 0))(S, go, ge, m, n)


@functools.partial(jax.jit, static_argnames=("local",))
def batch_posteriors(S, go, ge, m, n, temperature=1.0, eo=None, ee=None, *, local: bool):
    """:func:`posteriors` of a padded batch: ``(ln Z (B,), P (B, h, w))``."""
    def fn(s, mb, nb):
        return posteriors(s, go, ge, mb, nb, local=local, temperature=temperature, eo=eo,
                          ee=ee)

    return jax.vmap(fn)(S, m, n)


def _posteriors_of_codes(q, t, matrix, m, n, go, ge, temperature, eo, ee, *, local: bool):
    """:func:`batch_posteriors` of padded code rows ``q (B, h)``, ``t (B, w)`` scored by
    ``matrix`` (a traced array, as are the penalties and the temperature): one program per
    padded shape and mode, whatever the scheme."""
    S = jax.vmap(lambda a, b: matrix[a[:, None], b[None, :]])(q, t)
    return batch_posteriors(S, go, ge, m, n, temperature, eo, ee, local=local)


@functools.lru_cache(maxsize=1)
def _stored_posteriors():
    """:func:`_posteriors_of_codes` as a program of :mod:`jaxrna.programs`: a warm run loads
    it instead of tracing it (on a CPU too), and one compilation serves every GPU."""
    from jaxrna.programs import stored_jit

    return stored_jit("align.posteriors", static_argnames=("local",),
                      cpu_store=True)(_posteriors_of_codes)


@functools.partial(jax.jit, static_argnames=("local",))
def _batch_log_z(S, go, ge, m, n, temperature, eo=None, ee=None, *, local: bool):
    inv = 1.0 / jnp.asarray(temperature, S.dtype)
    ends = {} if eo is None else {"eo": eo * inv, "ee": ee * inv}
    fn = functools.partial(forward, local=local, semiring=_UNIT, **ends)
    return jax.vmap(fn, in_axes=(0, None, None, 0, 0))(S * inv, go * inv, ge * inv, m, n)


def substitution_scores(q, t, scoring: Scoring, dtype=None) -> jax.Array:
    """``(len(q), len(t))`` scores of query codes ``q`` against target codes ``t``: floats
    in the user's units, or the scheme's integer units when ``dtype`` is an integer type."""
    dtype = jnp.dtype(dtype or _float_dtype())
    if jnp.issubdtype(dtype, jnp.integer):
        mat = jnp.asarray(scoring.matrix, dtype)
    else:
        mat = jnp.asarray(scoring.matrix, dtype) / scoring.scale
    return mat[jnp.asarray(q)[:, None], jnp.asarray(t)[None, :]]


def gap_scores(scoring: Scoring, dtype=None) -> tuple[float, float] | tuple[int, int]:
    """The open and extend *scores* (``<= 0``) in the user's units (integer units when
    ``dtype`` is an integer type)."""
    if dtype is not None and jnp.issubdtype(jnp.dtype(dtype), jnp.integer):
        return scoring.open_score, scoring.extend_score
    return scoring.open_score / scoring.scale, scoring.extend_score / scoring.scale


def end_gap_scores(scoring: Scoring, dtype=None):
    """The end gaps' open and extend scores as :func:`gap_scores` gives the others, or
    ``(None, None)`` when end gaps cost what inner gaps cost."""
    if not scoring.separate_end_gaps:
        return None, None
    if dtype is not None and jnp.issubdtype(jnp.dtype(dtype), jnp.integer):
        return scoring.end_open_score, scoring.end_extend_score
    return scoring.end_open_score / scoring.scale, scoring.end_extend_score / scoring.scale


def posterior_bytes(h: int, w: int, itemsize: int = 4) -> int:
    """Peak memory estimate of :func:`posteriors` for one ``h`` x ``w`` (padded) pair: the
    saved carry of every antidiagonal (six rows of the shorter length), the antidiagonals of
    ``S`` and their cotangents, ``S`` and the gradient, and a fixed allowance. Measured peaks
    on CPU (float32, bench/bench_align_partition.py, compilation included): 0.13-0.16 GB at
    1,000 x 1,000 (estimate 0.19), 0.26-0.35 GB at 2,000 (0.40), 0.6-0.74 GB at 4,000 (1.2).

    >>> round(posterior_bytes(2048, 2048) / 2**20)
    400
    """
    short, steps = min(h, w), h + w - 1
    return itemsize * (7 * steps * short + 3 * h * w) + (128 << 20)


# --------------------------------------------------------------------------------------
# strings or codes in, numbers out


def _float_dtype():
    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32


def _padded(n: int) -> int:
    """Padded length: a multiple of 16 up to 256, then the project's bucket ladder."""
    return max(16, -(-n // 16) * 16) if n <= 256 else bucket_length(n)


def _codes(seq, scoring: Scoring) -> np.ndarray:
    if isinstance(seq, str):
        return scoring.encode(seq)
    codes = np.asarray(seq)
    if codes.ndim != 1 or not np.issubdtype(codes.dtype, np.integer):
        raise ValueError("expected a string or a 1-D array of integer codes")
    if codes.size and (codes.min() < 0 or codes.max() >= scoring.size):
        raise ValueError(f"codes must lie in 0..{scoring.size - 1} ({scoring.name})")
    return codes.astype(np.int32)


def _setup(query, target, scoring, mode, options):
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if scoring is None:
        scoring = make_scoring(**{k: v for k, v in options.items() if v is not None})
    elif any(v is not None for v in options.values()):
        raise ValueError("give either scoring or score options, not both")
    if scoring.minimise and mode != "global":
        raise ValueError("the edit preset is a global cost; use mode='global'")
    check_end_gaps(scoring, mode)
    return scoring, _codes(query, scoring), _codes(target, scoring)


def _padded_pair(q: np.ndarray, t: np.ndarray, scoring: Scoring, dtype):
    h, w = _padded(q.size), _padded(t.size)
    qp = np.zeros(h, np.int32)
    tp = np.zeros(w, np.int32)
    qp[:q.size], tp[:t.size] = q, t
    return substitution_scores(qp, tp, scoring, dtype)


def _one_pair(query, target, scoring, mode, temperature, dtype, options):
    """One pair's padded substitution scores, gap scores, true lengths and end gap scores."""
    scoring, q, t = _setup(query, target, scoring, mode, options)
    log_semiring(temperature)                           # checks it
    go, ge = gap_scores(scoring)
    return _padded_pair(q, t, scoring, dtype), go, ge, q.size, t.size, end_gap_scores(scoring)


def log_partition(query, target, scoring: Scoring | None = None, *, mode: str = "global",
                  temperature: float = 1.0, dtype=None, match=None, mismatch=None,
                  matrix: str | None = None, gap_open=None, gap_extend=None,
                  preset: str | None = None, end_gaps: str | None = None, end_open=None,
                  end_extend=None) -> float:
    """``ln Z`` of one pair: strings, or arrays of the scheme's codes
    (:meth:`~jaxrna.align.scoring.Scoring.encode`). Scores as
    :func:`jaxrna.align.api.align` (``scoring`` or the score options; default NUC.4.4, gap
    10 / 0.5; ``end_gaps="free"`` or ``end_open``/``end_extend``, global). ``dtype``:
    float64 when ``jax_enable_x64`` is on, else float32."""
    S, go, ge, m, n, (eo, ee) = _one_pair(
        query, target, scoring, mode, temperature, dtype,
        dict(match=match, mismatch=mismatch, matrix=matrix, gap_open=gap_open,
             gap_extend=gap_extend, preset=preset, end_gaps=end_gaps, end_open=end_open,
             end_extend=end_extend))
    out = _batch_log_z(S[None], go, ge, jnp.array([m]), jnp.array([n]), float(temperature),
                       eo, ee, local=mode == "local")
    return float(out[0])


def match_posteriors(query, target, scoring: Scoring | None = None, *, mode: str = "global",
                     temperature: float = 1.0, dtype=None, match=None, mismatch=None,
                     matrix: str | None = None, gap_open=None, gap_extend=None,
                     preset: str | None = None, end_gaps: str | None = None, end_open=None,
                     end_extend=None) -> tuple[float, np.ndarray]:
    """``(ln Z, P)`` of one pair, ``P`` the ``(len(query), len(target))`` probabilities that
    query ``i`` is aligned to target ``j`` (0-based). Arguments as :func:`log_partition`."""
    S, go, ge, m, n, (eo, ee) = _one_pair(
        query, target, scoring, mode, temperature, dtype,
        dict(match=match, mismatch=mismatch, matrix=matrix, gap_open=gap_open,
             gap_extend=gap_extend, preset=preset, end_gaps=end_gaps, end_open=end_open,
             end_extend=end_extend))
    log_z, P = batch_posteriors(S[None], go, ge, jnp.array([m]), jnp.array([n]),
                                float(temperature), eo, ee, local=mode == "local")
    return float(log_z[0]), np.asarray(P[0, :m, :n])


# --------------------------------------------------------------------------------------
# records (the CLI)


@dataclass(frozen=True)
class Posterior:
    """One pair's ``ln Z`` and ``(len(query), len(target))`` match probabilities."""

    query_id: str
    target_id: str
    mode: str
    temperature: float
    log_partition: float
    probabilities: np.ndarray = field(repr=False, compare=False)
    scoring: Scoring | None = field(repr=False, compare=False, default=None)


#: Pairs per batch are capped so one batch needs at most this much memory.
BATCH_BYTES = 1 << 30
#: And at most this many pairs (small pairs: bounded host copies of P).
MAX_BATCH = 256


def posterior_records(pairs: Sequence, scoring: Scoring, mode: str = "global",
                      temperature: float = 1.0, *, backend: str = "cpu",
                      max_bytes: int | None = None, on_done=None) -> Iterator[Posterior]:
    """Match posteriors of (query, target) :class:`~jaxrna.io.fasta.Record` pairs, in input
    order. Every pair is encoded and its memory estimated up front, before anything is
    computed (so this call, not the iteration, raises): a bad letter or a pair needing more
    than ``max_bytes`` (default 80% of the device's memory) raises
    :class:`~jaxrna.io.errors.InputError`. Pairs of one padded shape run as vmapped batches;
    ``on_done(k)``: ``k`` more pairs done."""
    from jaxrna.align.api import memory_limit
    from jaxrna.io.errors import InputError
    from jaxrna.runtime import human_bytes

    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if scoring.minimise and mode != "global":
        raise ValueError("the edit preset is a global cost; use --mode global")
    check_end_gaps(scoring, mode)
    if not temperature > 0:
        raise ValueError(f"the temperature must be > 0, not {temperature}")
    pairs = list(pairs)
    limit = memory_limit(backend, max_bytes)
    itemsize = jnp.dtype(_float_dtype()).itemsize
    cache: dict[int, np.ndarray] = {}
    groups: dict[tuple[int, int], list[int]] = {}
    encoded = []
    for idx, (qr, tr) in enumerate(pairs):
        codes = []
        for rec in (qr, tr):
            if id(rec) not in cache:
                try:
                    cache[id(rec)] = scoring.encode(rec.sequence)
                except ValueError as exc:
                    raise InputError(str(exc), path=rec.source, line=rec.line,
                                     record=rec.id) from None
            codes.append(cache[id(rec)])
        h, w = batch_class(codes[0].size), batch_class(codes[1].size)
        need = posterior_bytes(h, w, itemsize)
        if limit and need > limit:
            raise InputError(
                f"pair {qr.id} x {tr.id} ({codes[0].size} x {codes[1].size}) needs about "
                f"{human_bytes(need)} for match posteriors, more than the "
                f"{human_bytes(limit)} allowed; use shorter sequences, a machine with more "
                f"memory, or raise --max-memory")
        encoded.append(codes)
        groups.setdefault((h, w), []).append(idx)
    groups = within_budget(groups, limit, itemsize, posterior_bytes)
    return _posterior_batches(pairs, encoded, groups, scoring, mode, float(temperature),
                              backend, limit, itemsize, on_done)


def _posterior_batches(pairs, encoded, groups, scoring: Scoring, mode: str,
                       temperature: float, backend: str, limit: int, itemsize: int,
                       on_done) -> Iterator[Posterior]:
    go, ge = gap_scores(scoring)
    eo, ee = end_gap_scores(scoring)
    local = mode == "local"
    dtype = _float_dtype()
    scores = np.asarray(scoring.matrix, np.float64) / scoring.scale    # in the user's units
    side = max(MATRIX_SIDE, *scores.shape)       # one shape for every scheme's matrix
    matrix = np.zeros((side, side), dtype)
    matrix[:scores.shape[0], :scores.shape[1]] = scores
    # penalties and temperature as arrays of the computing type: traced values of one
    # signature whatever the scheme (a Python int, float or NumPy scalar would not be)
    # (end gaps that cost what inner gaps cost are passed as such: one program either way)
    numbers = tuple(np.asarray(x, dtype) for x in
                    (go, ge, temperature, go if eo is None else eo, ge if ee is None else ee))
    from jaxrna.pipeline import schedule_on_threads
    from jaxrna.runtime import devices

    done: dict[int, Posterior] = {}
    next_out = 0
    used = devices(backend)
    platform = used[0].platform
    batches = []                        # (padded shape, rows, members): the class's rows
    for (h, w), members in groups.items():
        per = posterior_bytes(h, w, itemsize)
        cap = max(1, min(MAX_BATCH, min(BATCH_BYTES, limit or BATCH_BYTES) // per))
        rows = class_rows(h, w, cap, platform)
        batches += [((h, w), rows, members[s:s + rows]) for s in range(0, len(members), rows)]

    def run(batch, device):
        """On ``device``'s own thread (the program's call returns only when the device is
        done): the batch's ``ln Z`` and match probabilities, read back."""
        (h, w), rows, part = batch
        q = np.zeros((rows, h), np.int32)
        t = np.zeros((rows, w), np.int32)
        m = np.zeros(rows, np.int32)
        n = np.zeros(rows, np.int32)
        for r, idx in enumerate(part):
            qc, tc = encoded[idx]
            q[r, :qc.size], t[r, :tc.size], m[r], n[r] = qc, tc, qc.size, tc.size
        with jax.default_device(device):
            inputs = jax.device_put((q, t, matrix, m, n) + numbers, device)
            log_z, P = _stored_posteriors()(*inputs, local=local)
        return np.asarray(log_z), np.asarray(P), m, n

    # every device of the backend (or the first --devices N), each on a thread of its own,
    # batches in turn, results in input order
    for (_, _, part), (log_z, P, m, n) in schedule_on_threads(batches, run,
                                                              lambda b, out: out, used, depth=1):
        for r, idx in enumerate(part):
            qr, tr = pairs[idx]
            done[idx] = Posterior(qr.id, tr.id, mode, temperature, float(log_z[r]),
                                  P[r, :m[r], :n[r]].copy(), scoring)
        if on_done:
            on_done(len(part))
        while next_out in done:                  # stream in input order
            yield done.pop(next_out)
            next_out += 1
