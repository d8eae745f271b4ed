"""Traceback through direction bits (see :mod:`jaxrna.kernels.gotoh_defs`), on the host.

The batched paths walk on the device instead (:func:`jaxrna.kernels.gotoh.walk`: only the ops
come back); this walk is their reference (the tests compare them) and serves the checkpointed
traceback of long pairs, block by block.

:func:`walk` follows many paths at once (numpy, one pair per row) through a rectangle of the
table and stops each where it starts (local), reaches the table's border, or leaves the
rectangle over its top or left edge: so it serves whole tables of a batch of pairs and, one
block at a time, the checkpointed traceback of a long pair. Once a single path is left it
continues in plain Python, which is much faster per step than numpy on one element.

Ops are codes 0 = M (aligned pair), 1 = I (query residue, gap in the target),
2 = D (target residue, gap in the query); as text ``MID``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jaxrna.kernels.gotoh_defs import START_BIT, STATE_H, STATE_M, STATE_X, STATE_Y

NO_OP = 255
OP_LETTERS = np.frombuffer(b"MID", dtype=np.uint8)


@dataclass
class Walk:
    """Where each path stands: current cell (1-based table coordinates, the cell not yet
    emitted), state, whether it has finished, and the ops emitted so far: blocks of shape
    (pairs, steps) in emission order (last op first), ``NO_OP`` where a path did not move."""

    i: np.ndarray
    j: np.ndarray
    state: np.ndarray
    done: np.ndarray
    ops: list[np.ndarray]

    @classmethod
    def start(cls, i, j, state, done=None) -> "Walk":
        i = np.asarray(i, np.int64).copy()
        j = np.asarray(j, np.int64).copy()
        state = np.broadcast_to(np.asarray(state, np.int64), i.shape).copy()
        done = np.zeros(i.shape, bool) if done is None else np.asarray(done, bool).copy()
        return cls(i, j, state, done, [])


class SkewedBits:
    """Direction bits of a batch of skewed tables ``dirs[b, s, k]`` (as :func:`sweep` gives
    them) for rectangles whose first cell is table cell (row0 + 1, col0 + 1)."""

    def __init__(self, dirs: np.ndarray, row0: int = 0, col0: int = 0) -> None:
        self.dirs, self.row0, self.col0 = dirs, row0, col0

    def __call__(self, rows, i, j):
        k = i - self.row0 - 1
        return self.dirs[rows, (j - self.col0 - 1) + k, k]

    def flat(self, b: int):
        """(bytes of pair b's table, function (i, j) -> offset) for the scalar walk."""
        table = np.ascontiguousarray(self.dirs[b])
        width, r0, c0 = table.shape[1], self.row0 + 1, self.col0 + 1
        return table.tobytes(), lambda i, j: ((j - c0) + (i - r0)) * width + (i - r0)


class DenseBits:
    """Direction bits of one row-major table ``dirs[i, j]`` (as :func:`tile_wavefront` gives
    them) of a rectangle whose first cell is table cell (row0 + 1, col0 + 1)."""

    def __init__(self, dirs: np.ndarray, row0: int = 0, col0: int = 0) -> None:
        self.dirs, self.row0, self.col0 = dirs, row0, col0

    def __call__(self, rows, i, j):
        return self.dirs[i - self.row0 - 1, j - self.col0 - 1]

    def flat(self, b: int):
        table = np.ascontiguousarray(self.dirs)
        width, r0, c0 = table.shape[1], self.row0 + 1, self.col0 + 1
        return table.tobytes(), lambda i, j: (i - r0) * width + (j - c0)


def walk(w: Walk, bits_at, *, local: bool, top: np.ndarray | int = 0,
         left: np.ndarray | int = 0) -> Walk:
    """Advance every unfinished path while it stays below row ``top`` and right of column
    ``left`` (exclusive; 0 = the table's border).

    ``bits_at`` (:class:`SkewedBits` or :class:`DenseBits`) gives the direction bits of
    cells (i, j) for pairs ``rows``. A local path finishes after the M step that starts it.
    """
    top = np.broadcast_to(np.asarray(top, np.int64), w.i.shape)
    left = np.broadcast_to(np.asarray(left, np.int64), w.i.shape)
    while True:
        rows = np.flatnonzero(~w.done & (w.i > top) & (w.j > left))
        if rows.size == 0:
            return w
        if rows.size == 1:
            _walk_one(w, int(rows[0]), bits_at, local, int(top[rows[0]]), int(left[rows[0]]))
            return w
        i, j, st = w.i[rows], w.j[rows], w.state[rows]
        bits = np.asarray(bits_at(rows, i, j)).astype(np.int64)
        st = np.where(st == STATE_H, bits & 3, st)
        op = np.full((w.i.shape[0], 1), NO_OP, np.uint8)
        op[rows, 0] = st
        w.ops.append(op)
        is_m, is_x, is_y = st == STATE_M, st == STATE_X, st == STATE_Y
        w.i[rows] = i - (is_m | is_x)
        w.j[rows] = j - (is_m | is_y)
        w.state[rows] = np.where(is_m, STATE_H, np.where(is_x, (bits >> 2) & 3, (bits >> 4) & 3))
        if local:
            w.done[rows] = is_m & ((bits & START_BIT) != 0)


def _walk_one(w: Walk, b: int, bits_at, local: bool, top: int, left: int) -> None:
    """:func:`walk`'s loop for the one path ``b`` left, in plain Python."""
    data, offset = bits_at.flat(b)
    i, j, st, done = int(w.i[b]), int(w.j[b]), int(w.state[b]), False
    out = bytearray()
    while not done and i > top and j > left:
        bits = data[offset(i, j)]
        if st == STATE_H:
            st = bits & 3
        out.append(st)
        if st == STATE_M:
            i, j = i - 1, j - 1
            done = local and bool(bits & START_BIT)
            st = STATE_H
        elif st == STATE_X:
            i, st = i - 1, (bits >> 2) & 3
        else:
            j, st = j - 1, (bits >> 4) & 3
    block = np.full((w.i.shape[0], len(out)), NO_OP, np.uint8)
    block[b] = np.frombuffer(bytes(out), np.uint8)
    w.ops.append(block)
    w.i[b], w.j[b], w.state[b], w.done[b] = i, j, st, done


def finish(w: Walk, *, local: bool) -> list[str]:
    """Ops per pair in alignment order; a global path still on the border gets its end gap."""
    if w.ops:
        stacked = np.concatenate(w.ops, axis=1)[:, ::-1]  # first op first
    else:
        stacked = np.zeros((w.i.shape[0], 0), np.uint8)
    out = []
    for b in range(stacked.shape[0]):
        codes = stacked[b][stacked[b] != NO_OP]
        text = OP_LETTERS[codes].tobytes().decode()
        if not local:
            text = "I" * int(w.i[b]) + "D" * int(w.j[b]) + text
        out.append(text)
    if not local:
        w.i[:] = 0
        w.j[:] = 0
    return out
