"""The research API: pure JAX functions on encoded arrays, to jit, vmap and differentiate.

Everything here takes and returns arrays (no strings, no records, no host loops), so it composes
with ``jax.jit`` and ``jax.vmap`` over padded batches. Strings go in through the encode helpers;
results come back through the decode helpers. The command line and :func:`jaxrna.fold` /
:func:`jaxrna.align` / :func:`jaxrna.interact` are built on the same recurrences.

Conventions

* Nucleotides are int codes A=0, C=1, G=2, U/T=3, 4 = N/other (never pairs). Batches are padded
  with 4 (:func:`encode_batch`). Appending code-4 positions leaves folding and interaction
  optima unchanged (the extra bases stay unpaired), so those scores need no lengths; alignment
  and traceback functions take the true lengths ``m``, ``n`` as arrays (one per pair).
* Pair weights are a 5x5 int32 matrix in integer units (:func:`pair_weights` gives it and the
  ``scale`` that converts back: bpmax's GU 1.5 is 3 units of 1/2).
* Alignment scores are int32 in the scheme's units (:func:`align_params`).

Folding:

>>> import jax, jax.numpy as jnp
>>> w, scale = pair_weights("unit")
>>> codes, lengths = encode_batch(["GGGAAAUCC", "GCAAAAGC"], 12)
>>> jax.vmap(lambda c: fold_score(c, w))(codes).tolist()
[3, 2]
>>> score, partner = fold_structure(codes[0], w, lengths[0])
>>> dot_bracket(partner, int(lengths[0]))
'(((...)))'

Alignment (global, match 2, mismatch -3, gap open 5, extend 2):

>>> p, scoring = align_params(match=2, mismatch=-3, gap_open=5, gap_extend=2)
>>> q, m = encode_batch(["ACGUACGU"], 10, alphabet=scoring)
>>> t, n = encode_batch(["ACGACGU"], 10, alphabet=scoring)
>>> int(align_score(q[0], t[0], m[0], n[0], p, mode="global"))
9
>>> out = align_traceback(q[0], t[0], m[0], n[0], p, mode="global")
>>> ops_string(out["ops"], out["length"])
'MMMIMMMM'

BPMax (strands 5'->3'; strand 2 is reversed inside):

>>> w, scale = pair_weights("bpmax")
>>> float(bpmax_score(encode("UCGCUGCU"), encode("GUCGGA"), w)) / scale
14.5
"""

from __future__ import annotations

from functools import partial
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.alphabet import PAD, decode
from jaxrna.alphabet import encode as _encode_rna
from jaxrna.weights import WeightSet, parse_weights

__all__ = [
    "encode", "decode", "encode_batch", "pair_weights", "dot_bracket",
    "fold_table", "fold_score", "fold_structure",
    "align_params", "align_score", "align_traceback", "ops_string",
    "miranda_rows", "miranda_score_matrix",
    "bpmax_score",
]


# ---- encoding ---------------------------------------------------------------------------------

def encode(sequence: str) -> jax.Array:
    """RNA/DNA letters as int32 codes (A=0, C=1, G=2, U/T=3, other 4).

    >>> encode("ACGUTN").tolist()
    [0, 1, 2, 3, 3, 4]
    """
    return jnp.asarray(_encode_rna(sequence), jnp.int32)


def encode_batch(sequences: Sequence[str], length: int | None = None, *,
                 alphabet=None) -> tuple[jax.Array, jax.Array]:
    """Encode a batch, padded to ``length`` (default: the longest): ``(codes (B, L), lengths (B,))``.

    ``alphabet``: None for nucleotides (padding 4); an alignment
    :class:`~jaxrna.align.scoring.Scoring` encodes with its alphabet (padding 0; alignment
    functions mask by the lengths).

    >>> codes, lengths = encode_batch(["ACG", "U"])
    >>> codes.tolist(), lengths.tolist()
    ([[0, 1, 2], [3, 4, 4]], [3, 1])
    """
    size = max((len(s) for s in sequences), default=0) if length is None else length
    lengths = np.array([len(s) for s in sequences], np.int32)
    if (lengths > size).any():
        raise ValueError(f"a sequence of length {lengths.max()} does not fit in {size}")
    if alphabet is None:
        out = np.full((len(sequences), size), PAD, np.int32)
        for row, seq in enumerate(sequences):
            out[row, :len(seq)] = _encode_rna(seq)
    else:
        out = np.zeros((len(sequences), size), np.int32)
        for row, seq in enumerate(sequences):
            out[row, :len(seq)] = alphabet.encode(seq)
    return jnp.asarray(out), jnp.asarray(lengths)


def pair_weights(weights: str | WeightSet = "unit") -> tuple[jax.Array, int]:
    """A named or explicit weight set (``unit``, ``bpmax``, ``integer``, ``GC=3,AU=2,GU=1``) as a
    5x5 int32 matrix in integer units, and the units per user unit.

    >>> w, scale = pair_weights("bpmax")
    >>> int(w[2, 3]), scale
    (3, 2)
    """
    ws = parse_weights(weights) if isinstance(weights, str) else weights
    return jnp.asarray(ws.matrix(), jnp.int32), ws.scale


def dot_bracket(partner, length: int) -> str:
    """A partner array (``partner[i]`` = the base paired with i, or -1) as dot-bracket text.

    >>> dot_bracket(jnp.array([4, -1, -1, -1, 0]), 5)
    '(...)'
    """
    p = np.asarray(partner)[:length]
    return "".join("." if q < 0 else "(" if q > i else ")" for i, q in enumerate(p))


# ---- folding ----------------------------------------------------------------------------------

@partial(jax.jit, static_argnames=("min_loop",))
def fold_table(codes: jax.Array, weights: jax.Array, min_loop: int = 3) -> jax.Array:
    """The Nussinov table of one sequence in diagonal-major form: ``table[1 + d, i] = N(i, i + d)``
    (row 0 holds the empty diagonal; width ``len(codes)`` plus padding). See
    :mod:`jaxrna.fold.fill`."""
    from jaxrna.fold.fill import nussinov_fill

    return nussinov_fill(codes, weights, min_loop=min_loop)


def fold_score(codes: jax.Array, weights: jax.Array, min_loop: int = 3) -> jax.Array:
    """The optimal total pair weight (int32 units) of one sequence; padding needs no length."""
    n = codes.shape[0]
    if n <= 1:
        return jnp.int32(0)
    return fold_table(codes, weights, min_loop)[n, 0]


def _dense_getter(table: jax.Array, n: int):
    def get(i, j):
        d = jnp.clip(j - i, -1, n - 1)
        v = table[1 + d, jnp.clip(i, 0, table.shape[1] - 1)]
        return jnp.where(j < i, 0, v)
    return get


@partial(jax.jit, static_argnames=("min_loop",))
def fold_structure(codes: jax.Array, weights: jax.Array, length, min_loop: int = 3
                   ) -> tuple[jax.Array, jax.Array]:
    """One optimal structure of ``codes[:length]``: ``(score, partner)`` with ``partner[i]`` the
    base paired with ``i`` or -1. The same structure as :func:`jaxrna.fold` (i unpaired, then
    j unpaired, then the pair, then the leftmost split). Traceable: vmap it over a batch."""
    from jaxrna.fold.gpu import structure_search

    n = codes.shape[0]
    table = fold_table(codes, weights, min_loop)
    get = _dense_getter(table, n)
    length = jnp.asarray(length, jnp.int32)
    partner, _ = structure_search(get, codes, weights, length, min_loop, search=min(n, 256) or 1)
    score = jnp.where(length > 1, get(jnp.int32(0), length - 1), 0)
    return score, partner


# ---- alignment --------------------------------------------------------------------------------

def align_params(scoring=None, **kwargs):
    """Device scores for the alignment functions: ``(params, scoring)``. Pass a
    :class:`~jaxrna.align.scoring.Scoring` or :func:`~jaxrna.align.scoring.make_scoring`'s keywords
    (``match``, ``mismatch``, ``matrix``, ``gap_open``, ``gap_extend`` as positive penalties).
    Scores are in ``scoring``'s integer units (``scoring.to_float`` converts back)."""
    from jaxrna.align.recurrence import params_of
    from jaxrna.align.scoring import make_scoring

    if scoring is None:
        scoring = make_scoring(**kwargs)
    return params_of(scoring), scoring


@partial(jax.jit, static_argnames=("mode",))
def align_score(q: jax.Array, t: jax.Array, m, n, params, mode: str = "global") -> jax.Array:
    """The optimal score (int32 units) of ``q[:m]`` against ``t[:n]``; ``mode`` global or local
    (local: 0 when nothing scores above 0). vmap over pairs of padded arrays."""
    from jaxrna.kernels.wavefront import pair_sweep

    return pair_sweep(q, t, m, n, params, local=_local(mode), equality=False)[0]


def _local(mode: str) -> bool:
    if mode not in ("global", "local"):
        raise ValueError(f"mode must be 'global' or 'local', not {mode!r}")
    return mode == "local"


@partial(jax.jit, static_argnames=("mode",))
def align_traceback(q: jax.Array, t: jax.Array, m, n, params, mode: str = "global") -> dict:
    """One optimal alignment, traced on the device (the same one :func:`jaxrna.align` reports).

    Returns a dict of arrays: ``score``; ``ops`` (``len(q) + len(t)``,) uint8 edit operations in
    alignment order, 0 = M (aligned pair), 1 = I (query residue against a gap), 2 = D (target
    residue against a gap), 255 after the end; ``length`` (number of ops); ``query_start``,
    ``query_end``, ``target_start``, ``target_end`` (1-based, inclusive; 0 for an empty local
    alignment). Memory ``O(len(q) * len(t))`` bytes of direction bits."""
    from jaxrna.align.recurrence import START_BIT, STATE_H, STATE_M, STATE_X
    from jaxrna.kernels.wavefront import pair_sweep

    local = _local(mode)
    score, ei, ej, est, dirs = pair_sweep(q, t, m, n, params, local=local, equality=False,
                                          with_dirs=True)
    size = q.shape[0] + t.shape[0]

    def step(k, c):
        i, j, st, done, rev, count = c
        active = (~done) & (i > 0) & (j > 0)
        bits = dirs[jnp.clip(i + j - 2, 0, dirs.shape[0] - 1), jnp.clip(i - 1, 0, dirs.shape[1] - 1)]
        bits = bits.astype(jnp.int32)
        s = jnp.where(st == STATE_H, bits & 3, st)
        is_m, is_x = s == STATE_M, s == STATE_X
        is_y = ~is_m & ~is_x
        rev = rev.at[jnp.where(active, count, size)].set(s.astype(jnp.uint8), mode="drop")
        ni = i - (is_m | is_x)
        nj = j - (is_m | is_y)
        nst = jnp.where(is_m, STATE_H, jnp.where(is_x, (bits >> 2) & 3, (bits >> 4) & 3))
        ndone = done | (local & is_m & ((bits & START_BIT) != 0))
        return (jnp.where(active, ni, i), jnp.where(active, nj, j), jnp.where(active, nst, st),
                jnp.where(active, ndone, done), rev, count + active.astype(jnp.int32))

    empty = local & (score <= 0)
    init = (jnp.where(empty, 0, ei).astype(jnp.int32), jnp.where(empty, 0, ej).astype(jnp.int32),
            jnp.asarray(est, jnp.int32), empty, jnp.full((size,), 255, jnp.uint8), jnp.int32(0))
    i, j, _, _, rev, count = jax.lax.fori_loop(0, size, step, init)
    gi = jnp.where(local, 0, i)                       # global: the border gaps come first
    gj = jnp.where(local, 0, j)
    total = count + gi + gj
    p = jnp.arange(size, dtype=jnp.int32)
    src = total - 1 - p                               # reversed: walked ops, then D's, then I's
    walked = rev[jnp.clip(src, 0, size - 1)]
    ops = jnp.where(src < count, walked, jnp.where(src < count + gj, jnp.uint8(2), jnp.uint8(1)))
    ops = jnp.where(p < total, ops, jnp.uint8(255))
    qs = jnp.where(empty, 0, jnp.where(local, i + 1, 1))
    ts = jnp.where(empty, 0, jnp.where(local, j + 1, 1))
    return {"score": score, "ops": ops, "length": total,
            "query_start": qs, "query_end": jnp.where(empty, 0, ei),
            "target_start": ts, "target_end": jnp.where(empty, 0, ej)}


def ops_string(ops, length) -> str:
    """Edit operations (``align_traceback``'s ``ops``) as ``M``/``I``/``D`` text.

    >>> ops_string(jnp.array([0, 1, 2, 255], jnp.uint8), 3)
    'MID'
    """
    return "".join("MID"[int(o)] for o in np.asarray(ops)[:int(length)])


# ---- miRanda ----------------------------------------------------------------------------------

def miranda_rows(mirna: str, params=None) -> dict:
    """miRanda's position-specific row tables of one miRNA (host side; see
    :mod:`jaxrna.targets.scoring`): ``profile`` (5, N, 1), ``gap_open``, ``gap_extend`` and
    ``seed`` (N, 1), for :func:`miranda_score_matrix`. ``params``: a
    :class:`~jaxrna.targets.scoring.ScanParams` (miRanda's defaults when None)."""
    from jaxrna.targets.scoring import ScanParams, row_tables

    tables = row_tables(mirna, params or ScanParams())
    return {"profile": jnp.asarray(tables.profile.T[:, :, None], jnp.int32),
            "gap_open": jnp.asarray(tables.open[:, None], jnp.int32),
            "gap_extend": jnp.asarray(tables.extend[:, None], jnp.int32),
            "seed": jnp.asarray(tables.seed[:, None])}


@jax.jit
def miranda_score_matrix(rows: dict, target: jax.Array) -> jax.Array:
    """miRanda's local alignment matrix of one miRNA against one target: ``(len(target), N)``
    int32 best scores, ``[j, r]`` = the best of states a, b, c at target position ``j``
    (0-based) and row ``r`` (the reversed miRNA: row ``N - 1`` is the miRNA's first base).
    Candidate hits are the cells at least the score threshold (see
    :mod:`jaxrna.targets.hits`). vmap over targets of one padded length."""
    from jaxrna.targets.scan import fill_segments

    lanes = jnp.asarray(target, jnp.int8)[:, None]
    best, _ = fill_segments(rows["profile"], rows["gap_open"], rows["gap_extend"], rows["seed"],
                            lanes, dtype=jnp.int32)
    return best[:, :, 0].astype(jnp.int32)


# ---- BPMax ------------------------------------------------------------------------------------

@jax.jit
def bpmax_score(strand1: jax.Array, strand2: jax.Array, weights: jax.Array) -> jax.Array:
    """The BPMax optimum (int32 units) of strand 1 against strand 2, both 5'->3' codes (padding
    with 4 at either end is allowed). See ../shared/specs/bpmax.md and
    :mod:`jaxrna.interact.recurrence`; :func:`jaxrna.interact` adds windows and a traceback."""
    from jaxrna.interact.recurrence import bpmax_fill
    from jaxrna.interact.windows import window_scores_device, plan

    n1, n2 = strand1.shape[0], strand2.shape[0]
    p = plan(n1, n2, backend="gpu" if jax.default_backend() == "gpu" else "cpu")
    geo = p.geo
    u = jnp.full((geo.n_outer,), PAD, jnp.int32).at[:n1].set(strand1.astype(jnp.int32))
    v = jnp.full((geo.n_inner,), PAD, jnp.int32).at[:n2].set(strand2[::-1].astype(jnp.int32))
    table, _, _ = bpmax_fill(u, v, jnp.asarray(weights, jnp.int32), geo)
    return window_scores_device(table, geo, p.w_outer, p.w_inner, 1, 1)[0, 0]

