"""Result buffers of a bulk alignment run: a :class:`Chunk` holds the results of a stretch of
consecutive pairs (scores, ends, starts, kept or refused) as arrays the runners fill in any
order; :class:`Ragged` collects the per-pair edit operations arriving batch by batch and
assembles them in pair order; :func:`to_aligned` turns a finished chunk into the
:class:`~jaxrna.align.text.AlignedBatch` the formatters take. :func:`record_path` computes the
pairs the batch paths do not take through :func:`jaxrna.align.api.align_records` and merges
its results into a chunk in place.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jaxrna.align.jobs import Job
from jaxrna.align.text import AlignedBatch, ramp


@dataclass
class Chunk:
    """Results of pairs ``start .. start + len(qi) - 1``: scores, 1-based ends, 0-based
    starts (-1: unknown), and (with alignments) their ops concatenated; ``keep`` is False for
    pairs refused (reported through ``on_error``)."""

    start: int
    qi: np.ndarray
    ti: np.ndarray
    score: np.ndarray
    ei: np.ndarray
    ej: np.ndarray
    si: np.ndarray
    sj: np.ndarray
    keep: np.ndarray
    ops: np.ndarray | None = None
    op_offsets: np.ndarray | None = None
    #: The chunk's text, where the runner formatted it (formatted as the file's first chunk
    #: or not: ``text_first``), else None.
    text: str | None = None
    text_first: bool = False

    @classmethod
    def empty(cls, start: int, qi: np.ndarray, ti: np.ndarray) -> "Chunk":
        z = lambda: np.zeros(len(qi), np.int64)  # noqa: E731
        return cls(start, qi, ti, z(), z(), z(), z(), z(), np.ones(len(qi), bool))


def gather(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``flat[starts[k] : starts[k] + lengths[k]]`` for every k, concatenated.

    >>> gather(np.arange(10), np.array([7, 2]), np.array([2, 3])).tolist()
    [7, 8, 2, 3, 4]
    >>> gather(np.arange(10), np.array([2, 4, 4]), np.array([2, 0, 3])).tolist()
    [2, 3, 4, 5, 6]

    Stretches that follow each other in ``flat`` are one slice; long stretches are sliced and
    concatenated; only many short ones take an index array per element (90,000 alignments of
    ~300 ops: index arrays of 27 million entries took ~0.6 s on a GPU host).
    """
    starts = np.asarray(starts, np.int64)
    lengths = np.asarray(lengths, np.int64)
    if not len(starts):
        return flat[:0].copy()
    ends = starts + lengths
    if np.array_equal(starts[1:], ends[:-1]):            # already in order, contiguous
        return flat[starts[0]:ends[-1]].copy()
    if lengths.sum() >= GATHER_SLICES_FROM * len(lengths):
        return np.concatenate([flat[a:b] for a, b in zip(starts.tolist(), ends.tolist())])
    return flat[np.repeat(starts, lengths) + ramp(lengths)]


#: :func:`gather` slices stretches averaging at least this many elements.
GATHER_SLICES_FROM = 32


class Ragged:
    """Per-pair op arrays arriving in any order, assembled in pair order at the end."""

    def __init__(self, n: int) -> None:
        self.parts: list[np.ndarray] = []
        self.where = np.zeros(n, np.int64)
        self.lengths = np.zeros(n, np.int64)
        self.base = 0

    def put(self, positions: np.ndarray, ops: np.ndarray, offsets: np.ndarray) -> None:
        self.parts.append(ops)
        self.where[positions] = self.base + offsets[:-1]
        self.lengths[positions] = np.diff(offsets)
        self.base += len(ops)

    def assemble(self) -> tuple[np.ndarray, np.ndarray]:
        flat = np.concatenate(self.parts) if self.parts else np.zeros(0, np.uint8)
        offsets = np.zeros(len(self.lengths) + 1, np.int64)
        np.cumsum(self.lengths, out=offsets[1:])
        return gather(flat, self.where, self.lengths).astype(np.uint8), offsets


def to_aligned(job: Job, c: Chunk) -> AlignedBatch:
    """The kept pairs of a chunk as an :class:`AlignedBatch` (ids, aligned stretches)."""
    keep = np.flatnonzero(c.keep)
    qi, ti = c.qi[keep], c.ti[keep]
    qids, tids = job.queries.ids, job.targets.ids
    b = AlignedBatch(job.scoring, job.mode, [qids[k] for k in qi.tolist()],
                     [tids[k] for k in ti.tolist()], c.score[keep], c.si[keep], c.ei[keep],
                     c.sj[keep], c.ej[keep])
    if c.ops is not None:
        lengths = np.diff(c.op_offsets)[keep]
        b.ops = gather(c.ops, c.op_offsets[:-1][keep], lengths)
        b.op_offsets = np.zeros(len(keep) + 1, np.int64)
        np.cumsum(lengths, out=b.op_offsets[1:])
        for side, letters, off, s, e in (("query", job.queries.letters, job.qoff, b.query_start,
                                          b.query_end),
                                         ("target", job.targets.letters, job.toff,
                                          b.target_start, b.target_end)):
            idx = qi if side == "query" else ti
            seglen = np.maximum(e - s, 0)
            setattr(b, f"{side}_seg", gather(letters, off[idx] + s, seglen))
            so = np.zeros(len(keep) + 1, np.int64)
            np.cumsum(seglen, out=so[1:])
            setattr(b, f"{side}_seg_offsets", so)
    return b


def record_path(job: Job, positions: np.ndarray, qi: np.ndarray, ti: np.ndarray, *,
                backend: str, max_bytes, on_error, c: Chunk, ragged: Ragged | None,
                use_pallas=None) -> None:
    """Pairs ``(qi, ti)`` (at ``positions`` of chunk ``c``) through
    :func:`jaxrna.align.api.align_records`, their results written into ``c`` (and their ops
    into ``ragged``); pairs it refuses are reported to ``on_error`` and not kept."""
    from jaxrna.align.api import align_records

    pairs = [(job.queries.record(a), job.targets.record(b)) for a, b in zip(qi.tolist(),
                                                                            ti.tolist())]
    index = {id(p): k for k, p in enumerate(pairs)}
    refused = []

    def failed(pair, exc):
        refused.append(index[id(pair)])
        on_error(pair, exc)

    results = align_records(iter(pairs), job.scoring, job.mode, job.score_only,
                            backend=backend, max_bytes=max_bytes, on_error=failed,
                            use_pallas=use_pallas)
    done = [k for k in range(len(pairs)) if k not in set(refused)]
    table = np.zeros(256, np.uint8)
    table[[ord("M"), ord("I"), ord("D")]] = [0, 1, 2]
    ops_parts, lengths = [], []
    for k, r in zip(done, results):
        p = positions[k]
        c.score[p] = r.score_units
        c.ei[p], c.ej[p] = r.query_end, r.target_end
        c.si[p] = -1 if r.query_start is None else r.query_start
        c.sj[p] = -1 if r.target_start is None else r.target_start
        if ragged is not None:
            ops_parts.append(table[np.frombuffer(r.ops.encode(), np.uint8)])
            lengths.append(len(r.ops))
    c.keep[positions[refused]] = False
    if ragged is not None:
        offsets = np.zeros(len(done) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        flat = np.concatenate(ops_parts) if ops_parts else np.zeros(0, np.uint8)
        ragged.put(positions[np.array(done, np.int64)], flat, offsets)
        if refused:
            ragged.put(positions[np.array(refused, np.int64)], np.zeros(0, np.uint8),
                       np.zeros(len(refused) + 1, np.int64))
