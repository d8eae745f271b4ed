"""Nucleotide encoding shared by every algorithm.

Codes: A=0, C=1, G=2, U=3 (T is read as U), and 4 for N and every other IUPAC code, which never
pairs. ``PAD`` (also 4) fills padded positions of batched arrays.

>>> encode("ACGUTN").tolist()
[0, 1, 2, 3, 3, 4]
>>> decode(encode("gaucx"))
'GAUCN'
"""

from __future__ import annotations

import numpy as np

A, C, G, U, OTHER = 0, 1, 2, 3, 4
PAD = OTHER
LETTERS = "ACGUN"

CODE_OF_BYTE = np.full(256, OTHER, dtype=np.int8)
for _letter, _code in (("A", A), ("C", C), ("G", G), ("U", U), ("T", U)):
    CODE_OF_BYTE[ord(_letter)] = _code
    CODE_OF_BYTE[ord(_letter.lower())] = _code


def encode(sequence: str) -> np.ndarray:
    """Encode a nucleotide string as int8 codes (A=0, C=1, G=2, U/T=3, anything else 4)."""
    return CODE_OF_BYTE[np.frombuffer(sequence.encode("ascii"), dtype=np.uint8)]


def decode(codes: np.ndarray) -> str:
    """Inverse of :func:`encode` (ambiguity codes come back as N)."""
    return "".join(LETTERS[int(c)] for c in np.asarray(codes))


def encode_batch(sequences: list[str], length: int) -> tuple[np.ndarray, np.ndarray]:
    """Encode sequences into one ``(len(sequences), length)`` int8 array padded with ``PAD``.

    Returns the codes and the true lengths.

    >>> codes, lengths = encode_batch(["ACG", "U"], 4)
    >>> codes.tolist(), lengths.tolist()
    ([[0, 1, 2, 4], [3, 4, 4, 4]], [3, 1])
    """
    out = np.full((len(sequences), length), PAD, dtype=np.int8)
    lengths = np.zeros(len(sequences), dtype=np.int32)
    for row, seq in enumerate(sequences):
        if len(seq) > length:
            raise ValueError(f"sequence of length {len(seq)} does not fit in {length}")
        out[row, :len(seq)] = encode(seq)
        lengths[row] = len(seq)
    return out, lengths
