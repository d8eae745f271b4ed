"""Traceback of one optimal Nussinov structure from a filled table (host side, NumPy).

Preference at each interval (i, j), so structures are deterministic: i unpaired, then j
unpaired, then the pair (i, j), then the leftmost split k.

>>> import numpy as np
>>> from jaxrna.alphabet import encode
>>> from jaxrna.weights import parse_weights
>>> from jaxrna.fold.reference import reference_table
>>> w = parse_weights("unit")
>>> table = np.array(reference_table("GGGAAAUCC", w, 3))
>>> traceback(table, encode("GGGAAAUCC"), w.matrix(), 3)
[(0, 8), (1, 7), (2, 6)]
"""

from __future__ import annotations

import numpy as np


def traceback(table: np.ndarray, codes: np.ndarray, weights: np.ndarray,
              min_loop: int) -> list[tuple[int, int]]:
    """Pairs ``(i, j)`` (0-based, ``i < j``, sorted) of one structure scoring ``table[0, n-1]``.

    ``table`` is the dense ``n x n`` table with zeros on and below the diagonal.
    """
    n = len(codes)
    codes = np.asarray(codes, dtype=np.int64)
    pairs: list[tuple[int, int]] = []
    stack = [(0, n - 1)] if n > 1 else []
    while stack:
        i, j = stack.pop()
        if j <= i:
            continue
        v = table[i, j]
        if v == 0:
            continue
        if table[i + 1, j] == v:
            stack.append((i + 1, j))
            continue
        if table[i, j - 1] == v:
            stack.append((i, j - 1))
            continue
        w = weights[codes[i], codes[j]]
        inner = table[i + 1, j - 1] if i + 1 <= j - 1 else 0
        if w > 0 and j - i > min_loop and inner + w == v:
            pairs.append((i, j))
            stack.append((i + 1, j - 1))
            continue
        splits = table[i, i + 1:j - 1] + table[i + 2:j, j]
        hits = np.flatnonzero(splits == v)
        if len(hits) == 0:
            raise AssertionError(f"table inconsistent at ({i}, {j}); value {v}")
        k = i + 1 + int(hits[0])
        stack.append((k + 1, j))
        stack.append((i, k))
    return sorted(pairs)


def pairs_to_dotbracket(pairs: list[tuple[int, int]], n: int) -> str:
    """Dot-bracket string of non-crossing pairs.

    >>> pairs_to_dotbracket([(0, 8), (1, 7)], 9)
    '((.....))'
    """
    s = ["."] * n
    for i, j in pairs:
        s[i], s[j] = "(", ")"
    return "".join(s)


def structure_weight(pairs: list[tuple[int, int]], codes: np.ndarray, weights: np.ndarray) -> int:
    """Total integer weight of ``pairs``."""
    return int(sum(weights[codes[i], codes[j]] for i, j in pairs))


def check_structure(pairs: list[tuple[int, int]], codes: np.ndarray, weights: np.ndarray,
                    min_loop: int) -> None:
    """Raise ``ValueError`` unless ``pairs`` is a valid secondary structure for the model."""
    used: set[int] = set()
    for i, j in pairs:
        if not (0 <= i < j < len(codes)):
            raise ValueError(f"pair {(i, j)} out of range")
        if j - i <= min_loop:
            raise ValueError(f"pair {(i, j)} closes fewer than {min_loop} unpaired bases")
        if weights[codes[i], codes[j]] <= 0:
            raise ValueError(f"pair {(i, j)} is not an allowed base pair")
        if i in used or j in used:
            raise ValueError(f"base in two pairs at {(i, j)}")
        used.update((i, j))
    for a, b in pairs:
        for c, d in pairs:
            if a < c < b < d:
                raise ValueError(f"pairs {(a, b)} and {(c, d)} cross")
