"""What ``RNAfold -p`` reports from base-pair probabilities, as ViennaRNA 2.8 computes it.

Pure NumPy/Python functions of a probability matrix, so any engine's probabilities can feed
them: ``probs`` is an n x n array whose upper triangle ``probs[i, j]`` (0-based, i < j) is the
probability that i pairs with j (the lower triangle and diagonal are ignored), as
:func:`jaxrna.energy.partition_reference.partition` returns it. Energies are kcal/mol.

- :func:`centroid`: the pairs with ``p > 0.5`` and the structure's expected base-pair
  distance to the ensemble, ``sum over i < j of (1 - p) if p > 0.5 else p``
  (``fc.centroid()``).
- :func:`ensemble_diversity`: the mean base-pair distance between two structures of the
  ensemble, ``2 * sum over i < j of p (1 - p)`` (``fc.mean_bp_distance()``).
- :func:`mfe_frequency`: ``exp((G - E) / kT)`` for a structure of energy ``E`` (the minimum
  free energy, with the minimum free energy's parameters) and the ensemble energy ``G``
  (``fc.pr_structure(mfe_structure)``; RNAfold's "frequency of mfe structure in ensemble").
  With dangles 1 or 3 ViennaRNA evaluates the structure with dangles 2 (its partition
  function's model), so ``E`` is then the dangles-2 energy of the dangles-1/3 optimum.
- :func:`mea`: ViennaRNA's maximum expected accuracy structure (``fc.MEA(gamma)``): it
  maximises ``sum over pairs of 2 gamma p_ij + sum over unpaired i of pu_i`` over
  non-crossing pairs with no minimum loop size, where only pairs with ``p >= 1e-4 / (1 +
  gamma)`` are considered, their probabilities rounded to single precision (ViennaRNA's pair
  list stores floats), ``pu_i = 1 - sum of those p`` touching i, and only pairs with ``2
  gamma p_ij > pu_i + pu_j`` enter. Ties are broken by ViennaRNA's backtracking: a base at the
  interval's 3' end left unpaired while that is optimal (within ``DBL_EPSILON`` relative), then
  the partners of that end in decreasing order of their 5' base (a pair is remembered only
  where it was strictly better than leaving that interval's end unpaired); an interval of at
  most 3 bases left of a chosen pair is not searched (no pair of a partition function is
  that short). ViennaRNA returns
  the value as a C float; this is the double.

- :func:`pair_symbols`: RNAfold -p's one-line summary of the probabilities (the string after
  the sequence on its ensemble line, ``fc.db_from_probs()``): per base, from its probabilities
  of being unpaired (p0), paired downstream (p5, with a partner after it) and upstream (p3):
  ``.`` if p0 > 0.667, ``(`` if p5 > 0.667, ``)`` if p3 > 0.667; else, where p5 + p3 > p0,
  ``{`` or ``}`` if p5 or p3 is more than 0.667 of p5 + p3, else ``|``; else ``,`` where
  p0 > p5 + p3 and ``:`` otherwise.

>>> probs = np.zeros((6, 6)); probs[0, 5] = 0.8; probs[1, 4] = 0.3
>>> structure, distance = centroid(probs)
>>> structure, round(distance, 6)
('(....)', 0.5)
>>> round(ensemble_diversity(probs), 6)
0.74
>>> structure, value = mea(probs, 1.0)
>>> structure, round(value, 6)
('(....)', 5.0)
"""

from __future__ import annotations

import math
import sys

import numpy as np

from jaxrna.energy.boltzmann import kt


def _upper(probs) -> np.ndarray:
    probs = np.asarray(probs, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[0] != probs.shape[1]:
        raise ValueError(f"pair probabilities must be an n x n matrix, not {probs.shape}")
    return np.triu(probs, 1)


def pair_symbols(probs) -> str:
    """RNAfold -p's symbol string of a probability matrix (see the module's notes).

    >>> p = np.zeros((8, 8)); p[0, 7] = 0.9; p[1, 6] = 0.5; p[2, 5] = 0.3; p[2, 6] = 0.3
    >>> pair_symbols(p)
    '(:{...))'
    """
    upper = _upper(probs)
    p5 = upper.sum(axis=1)              # i pairs with a later base
    p3 = upper.sum(axis=0)              # i pairs with an earlier base
    p0 = 1.0 - p5 - p3
    both = p5 + p3
    share = np.divide(p5, both, out=np.zeros_like(both), where=both > 0)
    rest = np.divide(p3, both, out=np.zeros_like(both), where=both > 0)
    symbols = np.select(
        [p0 > 0.667, p5 > 0.667, p3 > 0.667,
         (both > p0) & (share > 0.667), (both > p0) & (rest > 0.667), both > p0, p0 > both],
        list(".()" "{}|,"), ":")
    return "".join(symbols.tolist())


def _rows(probs) -> list[list[float]]:
    """The upper triangle as Python floats (rows of lists)."""
    return _upper(probs).tolist()


def dot_bracket(pairs, n: int) -> str:
    """Dot-bracket of 0-based pairs ``(i, j)`` on ``n`` bases."""
    out = ["."] * n
    for i, j in pairs:
        out[i], out[j] = "(", ")"
    return "".join(out)


def unpaired_probabilities(probs) -> np.ndarray:
    """``1 - sum_j p_ij`` for every base."""
    up = _upper(probs)
    return 1.0 - up.sum(axis=0) - up.sum(axis=1)


def centroid(probs) -> tuple[str, float]:
    """The centroid structure (pairs with ``p > 0.5``) and its expected distance to the
    ensemble (summed with NumPy: within 1e-12 of ViennaRNA's sequential sum)."""
    up = _upper(probs)
    n = up.shape[0]
    inside = np.triu(np.ones((n, n), bool), 1)
    chosen = (up > 0.5) & inside
    distance = float(np.where(chosen, 1.0 - up, np.where(inside, up, 0.0)).sum())
    rows, cols = np.nonzero(chosen)
    return dot_bracket(list(zip(rows.tolist(), cols.tolist())), n), distance


def ensemble_diversity(probs) -> float:
    """The mean base-pair distance of the ensemble, ``2 * sum p_ij (1 - p_ij)`` (summed with
    NumPy: within 1e-12 of ViennaRNA's sequential sum; a 200-nt matrix in 0.1 ms, not the
    1.5 ms of a Python loop).

    >>> p = np.zeros((4, 4)); p[0, 3], p[1, 2] = 0.9, 0.5
    >>> round(ensemble_diversity(p), 12)
    0.68
    """
    up = _upper(probs)
    return 2.0 * float(np.sum(up * (1.0 - up)))


def mfe_frequency(energy: float, ensemble_energy: float, temperature: float = 37.0) -> float:
    """The equilibrium probability ``exp((G - E) / kT)`` of a structure of free energy
    ``energy`` given the ensemble free energy ``ensemble_energy`` (both kcal/mol)."""
    return math.exp((ensemble_energy - energy) / kt(temperature))


def mea(probs, gamma: float = 1.0) -> tuple[str, float]:
    """ViennaRNA's maximum expected accuracy structure and its value (see the module notes).

    ``gamma`` weighs pairs against unpaired bases (RNAfold ``--MEA gamma``, default 1).
    """
    up = _rows(probs)
    n = len(up)
    cutoff = 1e-4 / (1.0 + gamma)
    # 1-based below, as ViennaRNA's arrays (index 0 unused / the empty prefix)
    plist = [(i + 1, j + 1, float(np.float32(up[i][j])))
             for i in range(n) for j in range(i + 1, n) if up[i][j] >= cutoff]
    pu = [1.0] * (n + 1)
    for i, j, p in plist:
        pu[i] -= p
        pu[j] -= p
    kept = {(i, j): p for i, j, p in plist if p * 2 * gamma > pu[i] + pu[j]}
    # fill: M[i][j] = max(M[i][j-1] + pu[j], A(k, j) + M[i][k-1] for remembered pairs (k, j),
    #                     M[i+1][j-1] + 2 gamma p_ij); rows i = n..1 in two arrays
    row, prev = [0.0] * (n + 1), [0.0] * (n + 1)
    remembered = [[] for _ in range(n + 1)]     # per j: (k, A), k decreasing
    for i in range(n, 0, -1):
        row[i] = pu[i]
        for j in range(i + 1, n + 1):
            best = row[j - 1] + pu[j]
            for k, a in remembered[j]:
                best = max(best, a + row[k - 1])
            p = kept.get((i, j))
            if p is not None:
                ea = prev[j - 1] + 2 * gamma * p
                if best < ea:
                    best = ea
                    remembered[j].append((i, ea))
            row[j] = best
        row, prev = prev, row
    value = max(0.0, prev[n]) if n else 0.0
    structure = ["."] * n
    if n:
        _mea_backtrack(prev, pu, remembered, structure, n)
    return "".join(structure), value


def _mea_backtrack(M, pu, remembered, structure, n):
    """ViennaRNA's MEA backtracking, recursion kept as a stack of generators (so deep
    structures need no deep Python recursion); ``M`` is shared and recomputed in place for
    the inside of each pair, as ViennaRNA does."""
    eps = sys.float_info.epsilon

    def frame(i, j, pair):
        if pair:
            structure[i - 1], structure[j - 1] = "(", ")"
            i, j = i + 1, j - 1
            M[i - 1] = 0.0
            M[i] = pu[i]
            for k in range(i + 1, j + 1):
                best = M[k - 1] + pu[k]
                for a, ea in remembered[k]:
                    if a < i:
                        break
                    best = max(best, ea + M[a - 1])
                M[k] = best
        prec = eps * M[j]
        while j > i and M[j] <= M[j - 1] + pu[j] + prec:
            structure[j - 1] = "."
            j -= 1
        for a, ea in remembered[j]:
            if a < i:
                break
            if M[j] <= ea + M[a - 1] + prec:
                if a > i + 3:
                    yield i, a - 1, False
                yield a, j, True

    stack = [frame(1, n, False)]
    while stack:
        try:
            stack.append(frame(*next(stack[-1])))
        except StopIteration:
            stack.pop()
