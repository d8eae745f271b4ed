"""The job of a bulk alignment run: two record batches (:class:`jaxrna.io.bulk.SeqBatch`),
their letters encoded as the scheme's codes with array operations (:func:`encode`; no Python
object per record), and how they pair (every query against every target, query-major, or the
i-th with the i-th). :class:`Job` answers the questions the runners and the driver ask of it:
the pairs of a stretch of output positions, the cells, and :meth:`Job.check`, the error the
first failing pair would raise (a letter outside the alphabet, or a score range too wide), so
a run fails before it computes anything. Used by :mod:`jaxrna.align.engine`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jaxrna.align.scoring import LIMIT, Scoring
from jaxrna.io.bulk import SeqBatch
from jaxrna.io.errors import InputError
from jaxrna.stages import stage


#: Pairs per chunk (a unit of formatting and writing; bounds the memory of results), with
#: alignments and scoring only (:mod:`jaxrna.align.engine`).
CHUNK_ALIGN = 1 << 14
CHUNK_SCORES = 1 << 20


def encode(batch: SeqBatch, scoring: Scoring) -> tuple[np.ndarray, np.ndarray]:
    """The records' letters as codes of ``scoring`` (int16, concatenated as ``batch.letters``)
    and, per record, the 0-based position of its first letter outside the alphabet (-1: none)."""
    table = scoring.table()
    codes = table.astype(np.int8)[batch.letters] if scoring.size < 127 else \
        table[batch.letters]
    first_bad = np.full(len(batch), -1, np.int64)
    if not len(codes) or codes.min() >= 0:
        return codes, first_bad
    bad = np.flatnonzero(codes < 0)
    if bad.size:
        rec = np.searchsorted(batch.offsets, bad, side="right") - 1
        recs, first = np.unique(rec, return_index=True)
        first_bad[recs] = bad[first] - batch.offsets[recs]
    return codes, first_bad


def letter_error(batch: SeqBatch, k: int, pos: int, scoring: Scoring) -> InputError:
    """The error :meth:`Scoring.encode` raises for record ``k``, located as before."""
    letter = chr(int(batch.letters[batch.offsets[k] + pos]))
    return InputError(f"letter {letter!r} at position {pos + 1} is not in the alphabet of "
                      f"{scoring.name} ({scoring.alphabet})", path=batch.source,
                      line=int(batch.lines[k]) or None, record=batch.ids[k])


@dataclass
class Job:
    """What to align: two record batches, encoded, and how to pair them."""

    queries: SeqBatch
    targets: SeqBatch
    scoring: Scoring
    local: bool
    zip: bool
    score_only: bool

    def __post_init__(self) -> None:
        with stage("encode"):
            self.qcodes, self.qbad = encode(self.queries, self.scoring)
            self.tcodes, self.tbad = encode(self.targets, self.scoring)
        self.qoff, self.toff = self.queries.offsets, self.targets.offsets
        self.qlen, self.tlen = np.diff(self.qoff), np.diff(self.toff)
        self._texts = None

    @property
    def mode(self) -> str:
        return "local" if self.local else "global"

    @property
    def n_pairs(self) -> int:
        if self.zip:
            return len(self.queries)
        return len(self.queries) * len(self.targets)

    def pairs(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """Query and target indices of pairs ``start .. stop - 1`` (in output order)."""
        p = np.arange(start, stop, dtype=np.int64)
        if self.zip:
            return p, p
        nt = len(self.targets)
        return p // nt, p % nt

    def cells(self) -> int:
        if self.zip:
            return int(np.dot(self.qlen.astype(np.float64), self.tlen))
        return int(self.qlen.sum()) * int(self.tlen.sum())

    def check(self) -> None:
        """Raise the error the first failing pair (in order) would raise: its query's letter,
        its target's letter, or a score range its longest path could leave."""
        amax = self.scoring.max_abs()

        def too_long(total):
            return (total + 2) * amax >= LIMIT

        def range_error(k, l):
            from jaxrna.align.scoring import check_range

            try:
                check_range(self.scoring, int(self.qlen[k] + self.tlen[l]))
            except ValueError as exc:
                return InputError(str(exc), record=f"{self.queries.ids[k]} x {self.targets.ids[l]}")
            raise AssertionError("unreachable")

        qbad, tbad = self.qbad >= 0, self.tbad >= 0
        if self.zip:
            fail = qbad | tbad | too_long(self.qlen + self.tlen)
            if not fail.any():
                return
            k = int(np.argmax(fail))
            if qbad[k]:
                raise letter_error(self.queries, k, int(self.qbad[k]), self.scoring)
            if tbad[k]:
                raise letter_error(self.targets, k, int(self.tbad[k]), self.scoring)
            raise range_error(k, k)
        if not len(self.targets):
            return
        row_fail = qbad | tbad.any() | too_long(self.qlen + self.tlen.max())
        if not row_fail.any():
            return
        k = int(np.argmax(row_fail))
        if qbad[k]:
            raise letter_error(self.queries, k, int(self.qbad[k]), self.scoring)
        col = tbad | too_long(self.qlen[k] + self.tlen)
        l = int(np.argmax(col))
        if tbad[l]:
            raise letter_error(self.targets, l, int(self.tbad[l]), self.scoring)
        raise range_error(k, l)

    def code_texts(self) -> tuple[list[str], list[str]]:
        """Every record's codes as :func:`jaxrna.align.host.code_text` letters."""
        from jaxrna.align.host import code_text

        if self._texts is None:
            texts = []
            for codes, off in ((self.qcodes, self.qoff), (self.tcodes, self.toff)):
                text = code_text(codes)
                b = off.tolist()
                texts.append([text[b[k]:b[k + 1]] for k in range(len(b) - 1)])
            self._texts = tuple(texts)
        return self._texts
