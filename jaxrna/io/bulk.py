"""FASTA read in bulk: many records as a few arrays, not a Python object per record.

:func:`iter_batches` reads a file (plain or gzip, ``-`` for standard input) in large blocks cut
at record boundaries and turns each block into a :class:`SeqBatch`: the normalised letters of
every record concatenated in one ``uint8`` array, record offsets, ids, descriptions and header
line numbers. The plain case (a header on the first line, sequence lines of letters) is parsed
with whole-block operations; a block with anything else in it (carriage returns, blanks,
comments, a bad character, text before the first header) is read record by record by the
validating reader of :mod:`jaxrna.io.fasta`, so records and every located error message are
exactly those of :func:`~jaxrna.io.fasta.read_fasta`.

>>> import os, tempfile
>>> p = os.path.join(tempfile.mkdtemp(), "x.fa")
>>> _ = open(p, "w").write(">a first\\nacgt\\nNN\\n>b\\nGGUC\\n")
>>> b = read_batch(p)
>>> b.ids, b.sequence(0), b.lengths.tolist(), b.lines.tolist(), b.descriptions[0]
(['a', 'b'], 'ACGUNN', [6, 4], [1, 4], 'a first')
>>> padded_codes(b, [1, 0], 8).tolist()
[[2, 2, 3, 1, 4, 4, 4, 4], [0, 1, 2, 3, 4, 4, 4, 4]]
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np

from jaxrna.io.errors import InputError
from jaxrna.io.fasta import NUCLEOTIDE_LETTERS, Record, LineTracker
from jaxrna.io.source import InputSource, TextSource

#: Bytes read per block (a block ends at a record boundary, so a longer record makes it longer).
BLOCK_BYTES = 1 << 26


def _normaliser(alphabet: str) -> bytes:
    """A ``bytes.translate`` table: allowed letter -> normalised letter, anything else -> 0."""
    table = bytearray(256)
    if alphabet == "rna":
        letters = "".join(sorted(NUCLEOTIDE_LETTERS))
        for ch in letters + letters.lower():
            up = ch.upper()
            table[ord(ch)] = ord("U" if up == "T" else up)
    elif alphabet == "letters":
        for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
            table[ord(ch)] = table[ord(ch.lower())] = ord(ch)
    else:
        raise ValueError(f"unknown alphabet {alphabet!r}")
    return bytes(table)


_NORMALISE = {name: _normaliser(name) for name in ("rna", "letters")}


@dataclass
class SeqBatch:
    """Records as arrays: record ``k`` is ``letters[offsets[k]:offsets[k + 1]]`` (normalised
    ASCII letters), with ``ids[k]``, ``descriptions[k]`` (the header after ``>``), ``lines[k]``
    (1-based line of its header; 0 for sequences given on the command line) and ``source``."""

    source: str
    ids: list[str]
    descriptions: list[str]
    lines: np.ndarray
    letters: np.ndarray
    offsets: np.ndarray
    _text: str | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def text(self) -> str:
        """All letters as one string (sliced by :meth:`sequence`)."""
        if self._text is None:
            self._text = self.letters.tobytes().decode("ascii")
        return self._text

    def sequence(self, k: int) -> str:
        return self.text[int(self.offsets[k]):int(self.offsets[k + 1])]

    def record(self, k: int) -> Record:
        return Record(id=self.ids[k], sequence=self.sequence(k), description=self.descriptions[k],
                      line=int(self.lines[k]) or None, source=self.source)

    def records(self) -> list[Record]:
        return [self.record(k) for k in range(len(self))]

    @staticmethod
    def concat(batches: Sequence["SeqBatch"]) -> "SeqBatch":
        """One batch of every record of ``batches`` (in order)."""
        if len(batches) == 1:
            return batches[0]
        if not batches:
            return SeqBatch("", [], [], np.zeros(0, np.int64), np.zeros(0, np.uint8),
                            np.zeros(1, np.int64))
        ids = [i for b in batches for i in b.ids]
        descriptions = [d for b in batches for d in b.descriptions]
        shifts = np.cumsum([0] + [b.offsets[-1] for b in batches[:-1]])
        offsets = np.concatenate([[0]] + [b.offsets[1:] + s for b, s in zip(batches, shifts)])
        return SeqBatch(batches[0].source, ids, descriptions,
                        np.concatenate([b.lines for b in batches]),
                        np.concatenate([b.letters for b in batches]), offsets.astype(np.int64))

    @staticmethod
    def from_records(records: Iterable[Record], source: str = "") -> "SeqBatch":
        """A batch of already validated :class:`~jaxrna.io.fasta.Record` objects."""
        records = list(records)
        text = "".join(r.sequence for r in records)
        offsets = np.zeros(len(records) + 1, np.int64)
        np.cumsum([len(r.sequence) for r in records], out=offsets[1:])
        return SeqBatch(source or (records[0].source or "" if records else ""),
                        [r.id for r in records], [r.description for r in records],
                        np.array([r.line or 0 for r in records], np.int64),
                        np.frombuffer(text.encode("ascii"), np.uint8).copy(), offsets, text)


def padded_codes(batch: SeqBatch, indices: Sequence[int] | np.ndarray, length: int,
                 table: np.ndarray | None = None, pad: int = 4, rows: int | None = None,
                 dtype=np.int8) -> np.ndarray:
    """The records ``indices`` of ``batch`` encoded by ``table`` (a 256-entry lookup; default
    :mod:`jaxrna.alphabet`'s nucleotide codes) into a ``(rows, length)`` array padded with
    ``pad`` (``rows`` defaults to ``len(indices)``; extra rows are all padding)."""
    if table is None:
        from jaxrna.alphabet import CODE_OF_BYTE as table
    idx = np.asarray(indices, np.int64)
    rows = len(idx) if rows is None else rows
    out = np.full((rows, length), pad, dtype=dtype)
    if not len(idx):
        return out
    starts = batch.offsets[idx]
    lens = batch.offsets[idx + 1] - starts
    if lens.max(initial=0) > length:
        raise ValueError(f"a sequence of length {int(lens.max())} does not fit in {length}")
    total = int(lens.sum())
    row = np.repeat(np.arange(len(idx)), lens)
    first = np.repeat(np.cumsum(lens) - lens, lens)
    col = np.arange(total) - first
    out[row, col] = np.asarray(table)[batch.letters[np.repeat(starts, lens) + col]]
    return out


# ------------------------------------------------------------------------------------------
# reading


class _Source(InputSource):
    """A binary stream of the file (gzip decompressed), with located read errors: the shared
    opener :class:`jaxrna.io.source.InputSource` (corrupt or truncated gzip, devices refused,
    FIFOs read as streams, a file that changes while it is read), ``read(size, line)``."""


class _Blocks:
    """Blocks of whole records (the first may start with text before any header), each with
    the number of lines before it; ``pending`` holds what was read past the last block."""

    def __init__(self, source: _Source, block_bytes: int) -> None:
        self.source = source
        self.block_bytes = block_bytes
        self.pending = b""

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        lines = 0
        while True:
            chunk = self.source.read(self.block_bytes, lines + self.pending.count(b"\n") + 1)
            if not chunk:
                if self.pending:
                    block, self.pending = self.pending, b""
                    yield block, lines
                return
            buf = self.pending + chunk
            cut = buf.rfind(b"\n>")
            if cut < 0:
                self.pending = buf         # no record boundary yet (a long record): read on
                continue
            block, self.pending = buf[:cut + 1], buf[cut + 1:]
            yield block, lines
            lines += block.count(b"\n")


class _Reader:
    def __init__(self, path: str, alphabet: str, unique_ids: bool) -> None:
        self.path = path
        self.alphabet = alphabet
        self.table = _NORMALISE[alphabet]
        self.unique_ids = unique_ids
        self.seen: dict[str, int] = {}
        self.count = 0
        self.started = False               # a header has been seen

    def fast(self, data: bytes, before: int) -> SeqBatch | None:
        """The plain case with array operations, or None when the block needs the slow path."""
        if not data.startswith(b">"):
            return None
        arr = np.frombuffer(data, np.uint8)
        newlines = np.flatnonzero(arr == 10)
        after = newlines[newlines + 1 < len(arr)] + 1
        heads = np.concatenate([[0], after[arr[after] == 62]])
        k = np.searchsorted(newlines, heads)
        if k[-1] >= len(newlines):
            return None                    # a header line without an end: no sequence
        ends = newlines[k]
        stops = np.append(heads[1:] - 1, len(data))
        sizes = (stops - ends - 1) - (np.searchsorted(newlines, stops)
                                      - np.searchsorted(newlines, ends + 1))
        if not (sizes > 0).all():
            return None
        view = memoryview(data)
        titles_raw = b"\n".join([view[a + 1:b] for a, b in zip(heads.tolist(), ends.tolist())])
        if b"\r" in titles_raw:
            return None
        try:
            titles = titles_raw.decode("utf-8").split("\n")
        except UnicodeDecodeError:
            return None
        descriptions = [t.rstrip() for t in titles]
        try:
            ids = [t.split(None, 1)[0] for t in descriptions]
        except IndexError:
            return None                    # a header without an id
        letters = b"".join([view[b + 1:e] for b, e in zip(ends.tolist(), stops.tolist())]) \
            .translate(self.table, b"\n")
        if b"\x00" in letters:
            return None
        offsets = np.zeros(len(ids) + 1, np.int64)
        np.cumsum(sizes, out=offsets[1:])
        lines = k.astype(np.int64) + before + 1
        self.check_unique(ids, lines)
        return SeqBatch(self.path, ids, descriptions, lines,
                        np.frombuffer(letters, np.uint8), offsets)

    def check_unique(self, ids: list[str], lines: np.ndarray) -> None:
        if not self.unique_ids:
            return
        seen = self.seen
        new = dict(zip(ids, lines.tolist()))
        if len(new) == len(ids) and seen.keys().isdisjoint(new):
            seen.update(new)
            return
        for k, rid in enumerate(ids):      # a duplicate (rare): find the first, in order
            if rid in seen:
                raise InputError(f"duplicate record id (first seen on line {seen[rid]})",
                                 path=self.path, line=int(lines[k]), record=rid)
            seen[rid] = int(lines[k])

    def slow(self, data: bytes, before: int, source: "_Source",
             block_bytes: int) -> Iterator[SeqBatch]:
        """From ``data`` (the block, then what was read past it) to the end of the file,
        record by record through the validating reader (exactly its records and errors), in
        batches."""
        from Bio import SeqIO

        stream = TextSource(self.path, source=_Chain(data, source, before), lines_before=before)
        tracker = LineTracker(stream, self.path, self.alphabet)
        tracker.lineno = before
        tracker._seen_header = self.started
        records: list[Record] = []
        size = 0
        try:
            for rec in SeqIO.parse(tracker, "fasta"):
                line, rid = tracker.headers.popleft()
                seq = str(rec.seq)
                if not seq:
                    raise InputError("empty record (no sequence)", path=self.path, line=line,
                                     record=rid)
                if self.unique_ids:
                    if rid in self.seen:
                        raise InputError(f"duplicate record id (first seen on line "
                                         f"{self.seen[rid]})", path=self.path, line=line,
                                         record=rid)
                    self.seen[rid] = line
                records.append(Record(id=rid, sequence=_normalise(seq, self.table),
                                      description=rec.description, line=line, source=self.path))
                size += len(seq)
                if size >= block_bytes:
                    yield SeqBatch.from_records(records, self.path)
                    records, size = [], 0
        except UnicodeDecodeError:
            raise InputError("not FASTA: the file is not text (binary data or not UTF-8)",
                             path=self.path, line=tracker.lineno + 1) from None
        except ValueError as exc:  # anything else SeqIO rejects
            if isinstance(exc, InputError):
                raise
            raise InputError(f"not FASTA: {str(exc).splitlines()[0]}", path=self.path,
                             line=tracker.lineno) from None
        if records:
            yield SeqBatch.from_records(records, self.path)


class _Chain(io.RawIOBase):
    """``data``, then the rest of ``source``, as one raw binary stream."""

    def __init__(self, data: bytes, source: "_Source", before: int) -> None:
        self._data = memoryview(data)
        self._source = source
        self._lines = before + data.count(b"\n")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if not self._data:
            chunk = self._source.read(len(buffer), self._lines + 1)
            self._lines += chunk.count(b"\n")
            self._data = memoryview(chunk)
        n = min(len(buffer), len(self._data))
        buffer[:n] = self._data[:n]
        self._data = self._data[n:]
        return n


def _normalise(sequence: str, table: bytes) -> str:
    return sequence.encode("ascii").translate(table).decode("ascii")


def iter_batches(path: str | os.PathLike, alphabet: str = "rna", *, unique_ids: bool = True,
                 block_bytes: int = BLOCK_BYTES) -> Iterator[SeqBatch]:
    """The records of a FASTA file as :class:`SeqBatch` blocks, in file order.

    ``alphabet``: ``"rna"`` (IUPAC nucleotide codes and X; upper-cased, T read as U) or
    ``"letters"`` (any ASCII letter, upper-cased). Records, ids, descriptions and errors are
    those of :func:`jaxrna.io.fasta.read_fasta` (an :class:`InputError` locating the first
    problem; the blocks before it have been yielded).
    """
    path = os.fspath(path)
    reader = _Reader(path, alphabet, unique_ids)
    source = _Source(path)
    try:
        blocks = _Blocks(source, block_bytes)
        for data, before in blocks:
            batch = reader.fast(data, before)
            if batch is None:              # the rest of the file goes the validating way
                for batch in reader.slow(data + blocks.pending, before, source, block_bytes):
                    reader.count += len(batch)
                    yield batch
                break
            reader.started = True
            reader.count += len(batch)
            yield batch
    finally:
        source.close()
    if reader.count == 0:
        raise InputError("not FASTA: no records found", path=path)


def read_batch(path: str | os.PathLike, alphabet: str = "rna", *,
               unique_ids: bool = True) -> SeqBatch:
    """Every record of a FASTA file as one :class:`SeqBatch` (see :func:`iter_batches`)."""
    return SeqBatch.concat(list(iter_batches(path, alphabet, unique_ids=unique_ids)))


__all__ = ["SeqBatch", "iter_batches", "read_batch", "padded_codes", "BLOCK_BYTES"]
