"""Host-side inputs of the energy fill (:mod:`jaxrna.energy.fill`): sequences normalised and
encoded into padded code rows (``SEQ_LEFT`` positions of padding on the left, so reads of
``i - 1`` need no test), the positions allowed to pair (constraints from ``unpaired``), and
the special hairpins of the parameter set (tri-, tetra- and hexaloops) found by packing each
window of letters into one integer and looking it up in the sorted keys. All NumPy,
vectorised over a batch: the host side of a large batch costs little next to its folding.

>>> from jaxrna.energy.params import load_params
>>> inp = prepare_batch(["GGGGAAACCCC", "GCAUGC"], load_params(), 16)
>>> inp["s"].shape, inp["n"].tolist(), int(inp["allowed"][1].sum())
((2, 88), [11, 6], 6)
"""

from __future__ import annotations

import functools
from typing import Iterable, Sequence

import numpy as np

from jaxrna.energy.encoding import encode_bytes, normalize
from jaxrna.energy.params import INF
from jaxrna.energy.terms import COL_PAD

#: Codes are padded with this many positions on the left (reads of i - 1).
SEQ_LEFT = 8


def seq_pad(length: int) -> int:
    """Padded length of the code arrays for tables of ``length`` positions."""
    return SEQ_LEFT + 2 * length + COL_PAD + 8


def prepare(sequence: str, params, length: int, unpaired: Iterable[int] = ()) -> dict:
    """Host-side inputs for :func:`fill` of one sequence padded to ``length``: codes, the
    positions allowed to pair, and the special hairpin energies (NumPy arrays)."""
    batch = prepare_batch([sequence], params, length, [unpaired])
    return {key: value[0] for key, value in batch.items()}


@functools.lru_cache(maxsize=64)
def _special_keys(params, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The special hairpins of ``size`` as sorted packed keys (see :func:`_pack`) and energies."""
    table = params.special_hairpins(size)
    keys = np.array([_pack(k.encode("latin-1", "replace")) for k in table], np.uint64)
    values = np.array(list(table.values()), np.int32)
    order = np.argsort(keys)
    return keys[order], values[order]


def _pack(text: bytes) -> int:
    """Up to 8 letters as one little-endian integer."""
    return int.from_bytes(text.ljust(8, b"\0")[:8], "little")


def special_hairpin_hits(letters: np.ndarray, lengths: np.ndarray, params, size: int
                         ) -> tuple[np.ndarray, np.ndarray] | None:
    """Where the special hairpins of ``size`` (3, 4 or 6 unpaired) of ``params`` are, in a
    batch of letter rows (uint8 ``(B, L)``, uppercase, 0 past each row's ``lengths``): ``(hit,
    energy)``, both ``(B, L - size - 1)``, for the loop closed by (i, i + size + 1); None when
    the set has none of that size or the rows are too short."""
    keys, values = _special_keys(params, size)
    width = size + 2
    starts = letters.shape[1] - width + 1
    if not len(keys) or starts <= 0:
        return None
    packed = np.zeros((letters.shape[0], starts), np.uint64)
    for k in range(width):
        packed |= letters[:, k:k + starts].astype(np.uint64) << np.uint64(8 * k)
    pos = np.minimum(np.searchsorted(keys, packed), len(keys) - 1)
    hit = (keys[pos] == packed) & (np.arange(starts)[None, :] + width <= np.asarray(lengths)[:, None])
    return hit, values[pos]


def prepare_batch(sequences: Sequence[str], params, length: int,
                  unpaired: Sequence[Iterable[int]] | None = None) -> dict:
    """:func:`prepare` of many sequences at once, stacked (vectorised with NumPy: the host
    side of a large batch costs little next to its folding)."""
    count = len(sequences)
    texts = [normalize(x) for x in sequences]
    n = np.array([len(t) for t in texts], np.int32)
    if count and n.max() > length:
        raise ValueError(f"sequence of length {int(n.max())} does not fit in {length}")
    inside = np.arange(length)[None, :] < n[:, None]
    letters = np.zeros((count, length), np.uint8)
    letters[inside] = np.frombuffer("".join(texts).encode("latin-1", "replace"), np.uint8)
    total = seq_pad(length)
    s = np.zeros((count, total), np.int32)
    s[:, SEQ_LEFT:SEQ_LEFT + length] = encode_bytes(letters)
    allowed = np.zeros((count, total), bool)
    allowed[:, SEQ_LEFT:SEQ_LEFT + length] = inside
    for row, positions in enumerate(unpaired or ()):
        for k in positions:
            if not 0 <= k < n[row]:
                raise ValueError(f"unpaired position {k} outside the sequence (0..{n[row] - 1})")
            allowed[row, SEQ_LEFT + k] = False
    special = np.full((count, 3, length + COL_PAD), INF, np.int32)
    for idx, size in enumerate((3, 4, 6)):
        found = special_hairpin_hits(letters, n, params, size)
        if found is not None:
            hit, energy = found
            special[:, idx, :hit.shape[1]] = np.where(hit, energy, INF)
    return {"s": s, "allowed": allowed, "special": special, "n": n}
