"""The plain statement of the Nussinov partition function and pair probabilities (McCaskill's
formulation), in NumPy float64: the oracle of the tests for lengths beyond enumeration.

Independent of :mod:`jaxrna.fold.partition` in its decomposition (by the *first* base,
``Q(i, j) = Q(i+1, j) + sum_k B(i, k) Q(k+1, j)``, closed intervals) and in how it gets
probabilities (McCaskill's recursion over the closest enclosing pair, not an outside pass
or a gradient)::

    P(i, j) = Q(0, i-1) B(i, j) Q(j+1, n-1) / Q(0, n-1)
              + sum_{p < i, q > j} P(p, q) Q(p+1, i-1) B(i, j) Q(j+1, q-1) / Q(p+1, q-1)

with ``B(i, j) = exp(w_ij / T) Q(i+1, j-1)`` for an allowed pair and ``Q(i, i-1) = 1``.
Linear space: fine while ``ln Z`` stays below ~700 (a few hundred nt at T = 1).

>>> from jaxrna.weights import parse_weights
>>> lnz, P = reference_partition("GGGAAAUCC", parse_weights("unit"), 3)
>>> round(lnz, 6), round(float(P[0, 8]), 6)
(4.718959, 0.467285)
"""

from __future__ import annotations

import math

import numpy as np

from jaxrna.fold.reference import pair_weight
from jaxrna.weights import WeightSet


def boltzmann_pairs(seq: str, weights: WeightSet, min_loop: int, temperature: float = 1.0) -> np.ndarray:
    """``E[i, j] = exp(w_ij / T)`` for an allowed pair ``i < j``, else 0 (``w`` in user units)."""
    seq = seq.upper().replace("T", "U")
    n = len(seq)
    E = np.zeros((n, n))
    for i in range(n):
        for j in range(i + min_loop + 1, n):
            w = pair_weight(seq[i], seq[j], weights)
            if w > 0:
                E[i, j] = math.exp(w / weights.scale / temperature)
    return E


def reference_partition(seq: str, weights: WeightSet, min_loop: int,
                        temperature: float = 1.0) -> tuple[float, np.ndarray]:
    """``(ln Z, P)``: ``P[i, j]`` (``i < j``) the probability that ``i`` pairs with ``j``."""
    n = len(seq)
    E = boltzmann_pairs(seq, weights, min_loop, temperature)
    # Q[i, j + 1] = Q(i, j); Q(i, i - 1) = 1 sits at Q[i, i].
    Q = np.zeros((n + 2, n + 2))
    for i in range(n + 1):
        Q[i, i] = 1.0
    for i in range(n - 1, -1, -1):
        for j in range(i, n):
            total = Q[i + 1, j + 1]
            for k in range(i + 1, j + 1):
                if E[i, k]:
                    total += E[i, k] * Q[i + 1, k] * Q[k + 1, j + 1]
            Q[i, j + 1] = total
    z = Q[0, n]
    q = lambda i, j: Q[i, j + 1]  # noqa: E731  Q(i, j) on closed intervals
    P = np.zeros((n, n))
    R = np.zeros((n, n))          # P(p, q) / Q(p+1, q-1)
    for span in range(n - 1, 0, -1):
        for i in range(0, n - span):
            j = i + span
            if not E[i, j]:
                continue
            b = E[i, j] * q(i + 1, j - 1)
            p = q(0, i - 1) * b * q(j + 1, n - 1) / z
            if i > 0 and j < n - 1:
                left = np.array([q(pp + 1, i - 1) for pp in range(i)])
                right = np.array([q(j + 1, qq - 1) for qq in range(j + 1, n)])
                p += b * float(left @ R[:i, j + 1:] @ right)
            P[i, j] = p
            R[i, j] = p / q(i + 1, j - 1)
    return math.log(z), P
