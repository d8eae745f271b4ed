"""Sequences as the energy model sees them: nucleotide codes, pair types, special hairpins.

The energy tables are indexed like ViennaRNA's (see :mod:`jaxrna.energy.params`), so this module
has its own codes, not :mod:`jaxrna.alphabet`'s: N=0 (and every letter other than A, C, G, U,
T), A=1, C=2, G=3, U=4 (T=4). Pair types: CG=1, GC=2, GU=3, UG=4, AU=5, UA=6; 0 = no pair.
Lowercase is read as uppercase. Special hairpins (tri-, tetra-, hexaloops) are matched on the
uppercased letters themselves, as ViennaRNA matches them (so a loop written with T does not
match a table entry written with U).

>>> encode("ACGUTNx").tolist()
[1, 2, 3, 4, 4, 0, 0]
>>> int(PAIR[3, 2]), int(PAIR[4, 3]), int(PAIR[1, 1]), int(RTYPE[3])
(2, 4, 0, 4)
"""

from __future__ import annotations

import numpy as np

N, A, C, G, U = 0, 1, 2, 3, 4
_CODES = np.zeros(256, dtype=np.int8)
for _ch, _code in (("A", A), ("C", C), ("G", G), ("U", U), ("T", U)):
    _CODES[ord(_ch)] = _code
    _CODES[ord(_ch.lower())] = _code

#: PAIR[x, y]: the pair type of nucleotide codes x (5') and y (3'), 0 if they cannot pair.
PAIR = np.zeros((5, 5), dtype=np.int32)
for (_x, _y), _t in {(C, G): 1, (G, C): 2, (G, U): 3, (U, G): 4, (A, U): 5, (U, A): 6}.items():
    PAIR[_x, _y] = _t
#: RTYPE[t]: the type of the same pair read from the other end.
RTYPE = np.array([0, 2, 1, 4, 3, 6, 5, 7], dtype=np.int32)


def normalize(sequence: str) -> str:
    """Uppercase letters, as ViennaRNA stores a sequence (T stays T)."""
    return sequence.upper()


def encode(sequence: str) -> np.ndarray:
    """Nucleotide codes (int8): A=1, C=2, G=3, U/T=4, anything else 0."""
    return _CODES[np.frombuffer(sequence.encode("latin-1", errors="replace"), dtype=np.uint8)]


def encode_bytes(letters: np.ndarray) -> np.ndarray:
    """Nucleotide codes of an array of letters (uint8 ASCII; 0 bytes give 0)."""
    return _CODES[letters]


def pair_type(codes, i: int, j: int) -> int:
    """Pair type of positions i < j (0-based) of an encoded sequence."""
    return int(PAIR[codes[i], codes[j]])


def special_hairpin_energies(sequence: str, params, length: int | None = None) -> dict[int, np.ndarray]:
    """For hairpin sizes 3, 4 and 6: an int32 array ``e[i]`` = the special-loop energy of the
    hairpin closed by (i, i + size + 1) (0-based), or ``INF`` when that loop is not special.

    ``length`` pads the arrays (with ``INF``) for batched tables.

    >>> from jaxrna.energy.params import load_params
    >>> e = special_hairpin_energies("GGGGAAACCC", load_params())
    >>> [int(x) for x in e[4][:3]]
    [10000000, 10000000, 10000000]
    >>> int(special_hairpin_energies("CUACGG", load_params())[4][0])
    280
    """
    from jaxrna.energy.params import INF

    s = normalize(sequence)
    n = len(s)
    size_out = max(n, length or 0)
    out = {}
    for size in (3, 4, 6):
        table = params.special_hairpins(size)
        e = np.full(size_out, INF, dtype=np.int32)
        width = size + 2
        if table:
            for i in range(0, n - width + 1):
                v = table.get(s[i:i + width])
                if v is not None:
                    e[i] = v
        out[size] = e
    return out
