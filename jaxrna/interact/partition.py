"""The partition function of BPMax's base-pair counting model (BPPart-style) and pair
probabilities by ``jax.grad``.

A valid joint structure of two strands (the four rules of :mod:`jaxrna.interact.brute`:
pairs of positive weight, intramolecular span >= 4, no crossing, antiparallel intermolecular
pairs, no zigzag; the empty structure included) weighs ``exp(W / T)``, ``W`` its total pair
weight in the user's units. ``Z`` sums over all of them. The BPMax recurrence derives a
structure many times, so it cannot be summed; this module evaluates the unambiguous grammar
of :mod:`jaxrna.interact.partition_reference` (its docstring defines every table) in any
:class:`~jaxrna.semiring.Semiring`: in :data:`~jaxrna.semiring.MAX_PLUS` it gives BPMax's
score, in :func:`~jaxrna.semiring.log_semiring` ``(T)`` it gives ``ln Z``. The probability
that s1[x] pairs with s2[y] is ``T * d ln Z / d inter[x, y]`` (reverse-mode autodiff is the
outside pass); the same holds for the intramolecular score matrices.

:func:`joint_partition` is the core: one pair given its per-pair scores and masks
(:func:`joint_scores`), pure, jit-able with the semiring static, vmap-able over batches padded
with the non-pairing code (a base that cannot pair changes no sum; :func:`batch_partition`,
:func:`batch_probabilities`). Layout: every box table is ``(N, N, M, M)`` over
``[i1, j1, i2, j2]`` on s1 and the reversed strand 2; a ``lax.scan`` over the s1 span
``j1 - i1`` fills all boxes of one span at once, and inside it a ``lax.scan`` over the t span
adds the t arcs closing them; the double split ``D`` of one s1 span runs over its at most
``N^2 / 4`` (box, split) pairs laid out flat, each a semiring product of ``M x M`` upper
triangular matrices. Time O(N^3 M^3), memory O(N^2 M^2) plus what reverse mode keeps (``D`` is
rematerialised in the backward pass, one s1 span at a time). One compile per padded shape
and semiring serves every temperature.

>>> lz, P = inter_pair_probabilities("ACGU", "ACGU", weights="bpmax")
>>> round(lz, 3), P.shape, round(float(P[1, 2]), 3)   # s1 C pairs with s2 G
(8.732, (4, 4), 0.944)
>>> log_partition("UCGCUGCU", "GUCGGA", weights="bpmax", semiring=MAX_PLUS)   # BPMax
14.5
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.alphabet import PAD, encode
from jaxrna.semiring import MAX_PLUS, Semiring, log_semiring
from jaxrna.weights import WeightSet, parse_weights

__all__ = ["MIN_SPAN", "JointScores", "joint_scores", "joint_partition", "joint_probabilities",
           "batch_partition", "batch_probabilities", "log_partition", "pair_probabilities",
           "inter_pair_probabilities"]

#: An intramolecular pair (i, j) needs j - i >= MIN_SPAN (3 unpaired bases in the hairpin).
MIN_SPAN = 4


class JointScores(NamedTuple):
    """Per-pair values of one pair of strands, both read 5'->3': ``intra1`` ``(N, N)`` for the
    s1 pair (i, j), ``intra2`` ``(M, M)`` for the s2 pair (c, d) (only ``i < j``, ``c < d``
    are read), ``inter`` ``(N, M)`` for s1[x] with s2[y]. Scores in the user's units, or
    boolean masks of the allowed pairs."""

    intra1: jax.Array
    intra2: jax.Array
    inter: jax.Array


def _float_dtype():
    return jnp.float64 if jax.config.jax_enable_x64 else jnp.float32


def joint_scores(codes1, codes2, weights: WeightSet, dtype=None) -> tuple[JointScores,
                                                                           JointScores]:
    """``(scores, allowed)`` of two code arrays (:func:`jaxrna.alphabet.encode`; ``PAD``
    never pairs): scores in the user's units, allowed = positive weight (and span >= 4 for
    intramolecular pairs)."""
    dtype = dtype or _float_dtype()
    mat = jnp.asarray(weights.matrix(), dtype) / weights.scale
    c1, c2 = jnp.asarray(codes1, jnp.int32), jnp.asarray(codes2, jnp.int32)
    scores = JointScores(mat[c1[:, None], c1[None, :]], mat[c2[:, None], c2[None, :]],
                         mat[c1[:, None], c2[None, :]])

    def span_ok(n):
        i = np.arange(n)
        return jnp.asarray(i[None, :] - i[:, None] >= MIN_SPAN)

    allowed = JointScores((scores.intra1 > 0) & span_ok(c1.size),
                          (scores.intra2 > 0) & span_ok(c2.size), scores.inter > 0)
    return scores, allowed


def _q_table(e: jax.Array, sr: Semiring, zero) -> jax.Array:
    """Half-open single-strand table ``Q[i, j]`` (``(n+1, n+1)``; zero for ``i > j``) from
    the pair values ``e`` (``(n, n)``, zero where not allowed)."""
    n = e.shape[0]
    rows = jnp.arange(n + 1)
    Q = jnp.where(rows[:, None] == rows[None, :], sr.one(e.dtype), zero)
    Q = jnp.broadcast_to(Q, (n + 1, n + 1)).astype(e.dtype)

    def col(j, Q):
        prev = jax.lax.dynamic_index_in_dim(Q, j - 1, axis=1, keepdims=False)
        ej = jax.lax.dynamic_index_in_dim(e, j - 1, axis=1, keepdims=False)
        # j-1 paired with k: Q(i, k) e(k, j-1) Q(k+1, j-1)
        terms = Q[:, :n] + (ej + prev[1:])[None, :]
        new = sr.plus(prev, sr.sum(terms, axis=1))
        new = jnp.where(rows < j, new, jax.lax.dynamic_index_in_dim(Q, j, 1, False))
        return jax.lax.dynamic_update_index_in_dim(Q, new, j, axis=1)

    return jax.lax.fori_loop(1, n + 1, col, Q)


def _segment_sum(sr: Semiring, x: jax.Array, seg: jax.Array, count: int) -> jax.Array:
    """Semiring sum of the rows of ``x`` that share a segment id (``count`` segments)."""
    top = jax.ops.segment_max(x, seg, count, indices_are_sorted=True)
    if sr.is_max:
        return top
    top = jax.lax.stop_gradient(jnp.maximum(top, sr.zero(x.dtype)))   # empty: -inf
    total = jax.ops.segment_sum(jnp.exp(x - top[seg]), seg, count, indices_are_sorted=True)
    full = total > 0
    return jnp.where(full, top + jnp.log(jnp.where(full, total, 1)), sr.zero(x.dtype))


def _double_split(Tl: jax.Array, Rr: jax.Array, sr: Semiring, zero) -> jax.Array:
    """``D[f, i2, j2] = sum_{b2} Tl[f, i2, b2] Rr[f, b2 + 1, j2]`` (a semiring product of
    upper-triangular matrices, shifted by one)."""
    shifted = jnp.concatenate([Rr[..., 1:, :], jnp.full_like(Rr[..., :1, :], zero)], axis=-2)
    return sr.sum(Tl[..., :, :, None] + shifted[..., None, :, :], axis=-2)


def joint_partition(scores: JointScores, allowed: JointScores,
                    semiring: Semiring = MAX_PLUS) -> jax.Array:
    """``ln Z`` (log semiring) or the best total weight (max-plus) over the valid joint
    structures, given per-pair ``scores`` (floats, user units) and ``allowed`` masks
    (:func:`joint_scores`). Pure; jit it with ``semiring`` static; vmap it over a batch."""
    sr = semiring
    dtype = scores.inter.dtype
    zero = sr.zero(dtype)
    n, m = scores.inter.shape
    val = lambda s, a: jnp.where(a, sr.weight(s), zero)  # noqa: E731
    e1 = val(scores.intra1, allowed.intra1)
    e2 = val(scores.intra2, allowed.intra2)[::-1, ::-1].T       # t = reversed s2
    ei = val(scores.inter, allowed.inter)[:, ::-1]
    Q1, Q2 = _q_table(e1, sr, zero), _q_table(e2, sr, zero)
    if n == 0 or m == 0:
        return Q1[0, n] + Q2[0, m]
    q2 = Q2[:m, :m]                                             # Q2(i2, a2), a2 >= i2
    tri = jnp.asarray(np.triu(np.ones((m, m), bool)))
    r1, r2 = jnp.arange(n), jnp.arange(m)
    cl1 = lambda i: jnp.clip(i, 0, n - 1)  # noqa: E731
    # the double split D of one s1 span d1 runs over the (i1, k) with i1 + d1 < n, k < d1:
    # at most n^2 / 4 of them, laid out flat as f = i1 * d1 + k
    n_flat = max(1, n * n // 4)
    flat = jnp.arange(n_flat)
    dsplit = jax.checkpoint(partial(_double_split, sr=sr, zero=zero))

    def inner_scan(base):
        """The t arcs closing a box (``TC``) for the boxes of one s1 span: scan the t span,
        building ``XP``, ``XPR`` and ``X2nA`` of these boxes."""
        init = (jnp.full((n, m, m), zero, dtype),) * 4

        def step(carry, d2):
            XP, XPR, X2nA, TC = carry
            j2 = r2 + d2
            ok = j2 < m
            jc = jnp.minimum(j2, m - 1)
            tc = e2[r2, jc][None] + X2nA[:, jnp.minimum(r2 + 1, m - 1), jnp.clip(j2 - 1, 0, m - 1)]
            tc = jnp.where(ok & (d2 >= MIN_SPAN), tc, zero)
            xp = jnp.where(ok, sr.plus(base[:, r2, jc], tc), zero)
            XP = XP.at[:, r2, j2].set(xp, mode="drop")
            TC = TC.at[:, r2, j2].set(tc, mode="drop")
            qr = Q2[r2[None, :] + 1, (jc + 1)[:, None]]               # Q2(b2+1, j2+1)
            xpr = jnp.where(ok, sr.sum(XP + qr[None], axis=-1), zero)
            XPR = XPR.at[:, r2, j2].set(xpr, mode="drop")
            x2 = sr.sum(q2.T[None] + XPR[:, :, jc], axis=1)           # Q2(i2, a2) XPR(a2, j2)
            X2nA = X2nA.at[:, r2, j2].set(jnp.where(ok, x2, zero), mode="drop")
            return (XP, XPR, X2nA, TC), None

        (XP, _, _, TC), _ = jax.lax.scan(step, init, r2)
        return XP, TC

    def outer(tables, d1):
        T, X, XL1, XF, X1F = tables
        j1 = r1 + d1
        ok = (j1 < n)[:, None, None]
        jc = cl1(j1)
        tp = jnp.where(jnp.eye(m, dtype=bool)[None] & (d1 == 0), ei[:, None, :], zero)  # TP
        ta = e1[r1, jc][:, None, None] + X1F[cl1(r1 + 1), cl1(j1 - 1)]        # TA: s1 arc
        ta = jnp.where(ok & (d1 >= MIN_SPAN), ta, zero)
        # D: the first block T(i1, i1+k), then a gap and the rest XF(i1+k+1, j1)
        span = jnp.maximum(d1, 1)
        fi, fk = flat // span, flat % span
        fok = (d1 >= 1) & (fi + d1 < n)
        fi = cl1(fi)
        Tl = T[fi, cl1(fi + fk)]
        Rr = XF[cl1(fi + fk + 1), cl1(fi + d1)]
        prod = jnp.where(fok[:, None, None], dsplit(Tl, Rr), zero)
        d = _segment_sum(sr, prod, jnp.where(fok, fi, n - 1), n)
        xp, tc = inner_scan(sr.plus(tp, jnp.where(ok & (d1 >= 1), d, zero)))
        put = lambda tab, v: tab.at[r1, j1].set(jnp.where(tri, v, zero), mode="drop")  # noqa
        T = put(T, sr.plus(sr.plus(tp, ta), tc))
        X = put(X, sr.plus(xp, ta))
        ks = r1[None, :]                                         # a1 or b1 = i1 + k
        kok = (ks <= d1)[..., None, None]
        left = Q1[r1[:, None], jnp.minimum(r1[:, None] + ks, n)][..., None, None]  # Q1(i1, a1)
        xl1 = sr.sum(jnp.where(kok, left + X[cl1(r1[:, None] + ks), jc[:, None]], zero), axis=1)
        XL1 = put(XL1, xl1)
        xf = sr.sum(q2[None, :, :, None] + xl1[:, None, :, :], axis=2)  # Q2(i2, a2) XL1(a2, j2)
        XF = put(XF, xf)
        right = Q1[jnp.minimum(r1[:, None] + ks + 1, n), jc[:, None] + 1][..., None, None]
        x1f = XL1[r1[:, None], cl1(r1[:, None] + ks)] + right    # XL1(i1, b1) Q1(b1+1, j1+1)
        X1F = put(X1F, sr.sum(jnp.where(kok, x1f, zero), axis=1))
        return (T, X, XL1, XF, X1F), None

    empty = jnp.full((n, n, m, m), zero, dtype)
    (_, _, _, XF, _), _ = jax.lax.scan(outer, (empty,) * 5, r1)
    blocks = XF[0, :, 0, :] + Q1[1:, n][:, None] + Q2[1:, m][None, :]
    return sr.plus(Q1[0, n] + Q2[0, m], sr.sum(blocks))


def joint_probabilities(scores: JointScores, allowed: JointScores,
                        temperature=1.0) -> tuple[jax.Array, JointScores]:
    """``(ln Z, P)`` at ``temperature`` (a number or a traced scalar: one compile serves every
    temperature): ``P`` holds the pair probabilities ``T * d ln Z / d scores``, laid out like
    ``scores`` (intramolecular ones at ``[i, j]``, ``i < j``). Computed as ``ln Z`` at T = 1
    of ``scores / T``, whose gradient is ``P`` itself."""
    sr = log_semiring(1.0)
    scaled = JointScores(*(x / temperature for x in scores))
    return jax.value_and_grad(lambda s: joint_partition(s, allowed, sr))(scaled)


@partial(jax.jit, static_argnames=("semiring",))
def batch_partition(scores: JointScores, allowed: JointScores, temperature=1.0,
                    semiring: Semiring | None = None) -> jax.Array:
    """:func:`joint_partition` over a padded batch (leading axis on every array): ``ln Z`` at
    ``temperature`` (``semiring=None``) or the score in a given semiring."""
    if semiring is None:
        fn = lambda s, a, t: joint_partition(JointScores(*(x / t for x in s)), a,  # noqa
                                             log_semiring(1.0))
    else:
        fn = lambda s, a, t: joint_partition(s, a, semiring)  # noqa: E731
    return jax.vmap(fn, in_axes=(0, 0, None))(scores, allowed, temperature)


@jax.jit
def batch_probabilities(scores: JointScores, allowed: JointScores, temperature=1.0):
    """:func:`joint_probabilities` over a padded batch: ``(ln Z (B,), P)``."""
    return jax.vmap(joint_probabilities, in_axes=(0, 0, None))(scores, allowed, temperature)


def _padded(n: int) -> int:
    return max(4, -(-n // 4) * 4)


def _prepare(s1: str, s2: str, weights: WeightSet | str):
    if isinstance(weights, str):
        weights = parse_weights(weights)
    n, m = len(s1), len(s2)
    if n == 0 or m == 0:
        raise ValueError("both strands must be non-empty")
    c1 = np.full(_padded(n), PAD, np.int8)
    c2 = np.full(_padded(m), PAD, np.int8)
    c1[:n], c2[:m] = encode(s1), encode(s2)
    scores, allowed = joint_scores(c1, c2, weights)
    batch = lambda j: JointScores(*(x[None] for x in j))  # noqa: E731
    return batch(scores), batch(allowed), n, m


def log_partition(s1: str, s2: str, weights: WeightSet | str = "bpmax",
                  temperature: float = 1.0, semiring: Semiring | None = None) -> float:
    """``ln Z`` of two strands (both 5'->3') at ``temperature``, or, with
    ``semiring=MAX_PLUS``, the BPMax score (user units). Strands are padded to a multiple of
    4 with non-pairing bases (which changes nothing) so that similar lengths share a compile.
    Float64 when ``jax_enable_x64`` is on, else float32."""
    scores, allowed, _, _ = _prepare(s1, s2, weights)
    return float(batch_partition(scores, allowed, float(temperature), semiring=semiring)[0])


def pair_probabilities(s1: str, s2: str, weights: WeightSet | str = "bpmax",
                       temperature: float = 1.0) -> tuple[float, JointScores]:
    """``(ln Z, P)`` with every pair probability as numpy arrays (:class:`JointScores`:
    ``intra1[i, j]``, ``intra2[c, d]`` (i < j, c < d; s2 5'->3') and ``inter[x, y]``)."""
    scores, allowed, n, m = _prepare(s1, s2, weights)
    lz, P = batch_probabilities(scores, allowed, float(temperature))
    P = JointScores(np.asarray(P.intra1[0])[:n, :n], np.asarray(P.intra2[0])[:m, :m],
                    np.asarray(P.inter[0])[:n, :m])
    return float(lz[0]), P


def inter_pair_probabilities(s1: str, s2: str, weights: WeightSet | str = "bpmax",
                             temperature: float = 1.0) -> tuple[float, np.ndarray]:
    """``(ln Z, P)``: ``P[x, y]`` (``N x M``, s2 in its original 5'->3' coordinates) is the
    probability that s1[x] pairs with s2[y]."""
    lz, P = pair_probabilities(s1, s2, weights, temperature)
    return lz, P.inter
