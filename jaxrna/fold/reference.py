"""The slow, plain statement of Nussinov folding, used by the tests as an oracle.

Pure Python, O(n^3): no JAX, no tricks. ``weight(a, b)`` is the integer pair weight of two
nucleotide letters (0 when they cannot pair); a pair (i, j) needs ``j - i > min_loop``.

>>> from jaxrna.weights import parse_weights
>>> reference_table("GGGAAAUCC", parse_weights("unit"), 3)[0][8]
3
"""

from __future__ import annotations

from jaxrna.weights import WeightSet

_PAIRS = {("G", "C"): "gc", ("C", "G"): "gc", ("A", "U"): "au", ("U", "A"): "au",
          ("G", "U"): "gu", ("U", "G"): "gu"}


def pair_weight(a: str, b: str, weights: WeightSet) -> int:
    kind = _PAIRS.get((a, b))
    return getattr(weights, kind) if kind else 0


def reference_table(seq: str, weights: WeightSet, min_loop: int) -> list[list[int]]:
    """N[i][j] for 0 <= i <= j < n (entries below the diagonal are 0)."""
    seq = seq.upper().replace("T", "U")
    n = len(seq)
    N = [[0] * n for _ in range(n)]
    for d in range(1, n):
        for i in range(n - d):
            j = i + d
            best = 0
            w = pair_weight(seq[i], seq[j], weights)
            if w > 0 and d > min_loop:
                best = w + (N[i + 1][j - 1] if i + 1 <= j - 1 else 0)
            for k in range(i, j):
                best = max(best, N[i][k] + N[k + 1][j])
            N[i][j] = best
    return N


def reference_score(seq: str, weights: WeightSet, min_loop: int) -> int:
    """The optimal total pair weight (in the weight set's integer units)."""
    if len(seq) < 2:
        return 0
    return reference_table(seq, weights, min_loop)[0][len(seq) - 1]
