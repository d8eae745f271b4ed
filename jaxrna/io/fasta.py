"""FASTA input through Biopython SeqIO, streamed, with validation that names file, line and record.

Records come out in file order as :class:`Record` objects holding the normalised sequence
(upper case; for nucleic acids T read as U). Plain and gzip files are accepted, and ``-`` reads
standard input. Every problem raises :class:`~jaxrna.io.errors.InputError` with a message that
locates it: missing or unreadable file, text that is not FASTA, a header with no id, an empty
record, a character that is not a residue letter, a duplicate record id.

>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "x.fa")
>>> _ = open(p, "w").write(">a first\\nacgt\\nNN\\n>b\\nGGUC\\n")
>>> [(r.id, r.sequence) for r in read_fasta(p)]
[('a', 'ACGUNN'), ('b', 'GGUC')]
"""

from __future__ import annotations

import collections
import io
import os
import re
from dataclasses import dataclass
from typing import IO, Iterator

from jaxrna.io.errors import InputError

#: IUPAC nucleotide codes (plus X, which miRanda also reads as an ambiguity code).
NUCLEOTIDE_LETTERS = frozenset("ACGTURYSWKMBDHVNX")
ALPHABETS = {"rna": NUCLEOTIDE_LETTERS, "letters": None}
#: The first character of a line that is not allowed (fast path of the validation).
_BAD = {
    "rna": re.compile("[^" + "".join(sorted(NUCLEOTIDE_LETTERS)) +
                      "".join(sorted(NUCLEOTIDE_LETTERS)).lower() + " \t\r\n]"),
    "letters": re.compile("[^A-Za-z \t\r\n]"),
}


#: Characters read of a line before the first header (anything longer is not FASTA).
FIRST_LINE_LIMIT = 1 << 16


@dataclass(frozen=True)
class Record:
    """One validated sequence record.

    ``id`` is the header up to the first whitespace, ``description`` the whole header,
    ``sequence`` the normalised residues, ``line`` the 1-based line of the header (None for
    sequences given on the command line) and ``source`` the file it came from.
    """

    id: str
    sequence: str
    description: str = ""
    line: int | None = None
    source: str | None = None

    def __len__(self) -> int:
        return len(self.sequence)


def normalise(sequence: str, alphabet: str = "rna") -> str:
    """Upper-case ``sequence`` and, for nucleic acids, read T as U.

    >>> normalise("acgTn")
    'ACGUN'
    """
    s = sequence.upper()
    return s.replace("T", "U") if alphabet == "rna" else s


def _check_residues(text: str, alphabet: str, *, path: str | None, line: int | None,
                    record: str | None, offset: int) -> None:
    if _BAD[alphabet].search(text) is None:
        return
    allowed = ALPHABETS[alphabet]
    for col, ch in enumerate(text, start=1):
        if ch in " \t\r\n":
            continue
        ok = ch.isascii() and ch.isalpha() and (allowed is None or ch.upper() in allowed)
        if not ok:
            what = "is not a letter" if not (ch.isascii() and ch.isalpha()) else \
                "is not an IUPAC nucleotide code"
            pos = offset + len(text[:col - 1].replace(" ", "").replace("\t", ""))
            raise InputError(f"character {ch!r} at column {col} (sequence position {pos + 1}) {what}",
                             path=path, line=line, record=record)


def sequence_record(sequence: str, id: str = "seq", alphabet: str = "rna") -> Record:
    """Validate a sequence given on the command line and wrap it as a :class:`Record`.

    >>> sequence_record("gggaaauccc").sequence
    'GGGAAAUCCC'
    """
    if not sequence:
        raise InputError("empty sequence", path="--sequence", record=id)
    _check_residues(sequence, alphabet, path="--sequence", line=None, record=id, offset=0)
    return Record(id=id, sequence=normalise(sequence.replace(" ", ""), alphabet),
                  description=id, line=None, source="--sequence")


class LineTracker:
    """A text stream wrapper that numbers lines and validates them as SeqIO reads them."""

    def __init__(self, stream: IO[str], path: str, alphabet: str) -> None:
        self._stream = stream
        self.path = path
        self.alphabet = alphabet
        self.lineno = 0
        self.headers: collections.deque[tuple[int, str]] = collections.deque()
        self._record: str | None = None
        self._residues = 0
        self._seen_header = False

    def _next(self) -> str:
        while True:
            try:
                if self._seen_header:
                    line = self._stream.readline()
                else:  # bounded: a binary file may have no line break for gigabytes
                    line = self._stream.readline(FIRST_LINE_LIMIT)
                    if line.startswith(">") and not line.endswith("\n"):
                        line += self._stream.readline()  # a long header
            except UnicodeDecodeError:
                raise InputError("not FASTA: the file is not text (binary data or not UTF-8)",
                                 path=self.path, line=self.lineno + 1) from None
            except (OSError, EOFError) as exc:
                raise InputError(f"cannot read file: {exc}", path=self.path,
                                 line=self.lineno + 1) from None
            if not line:
                return line
            self.lineno += 1
            if line.startswith(">"):
                self._seen_header = True
                title = line[1:].strip()
                self._record = title.split(None, 1)[0] if title else ""
                if not title:
                    raise InputError("header line has no record id", path=self.path, line=self.lineno)
                self._residues = 0
                self.headers.append((self.lineno, self._record))
                return line
            if not self._seen_header:
                if not line.strip():
                    continue  # blank lines before the first header are harmless
                raise InputError("not FASTA: expected a header line starting with '>'",
                                 path=self.path, line=self.lineno)
            _check_residues(line.rstrip("\r\n"), self.alphabet, path=self.path, line=self.lineno,
                            record=self._record, offset=self._residues)
            self._residues += len(line.strip().replace(" ", "").replace("\t", ""))
            return line

    def readline(self) -> str:
        return self._next()

    def read(self, size: int = -1) -> str:  # SeqIO probes text mode with read(0)
        if size == 0:
            return ""
        raise io.UnsupportedOperation("read")

    def __iter__(self) -> "LineTracker":
        return self

    def __next__(self) -> str:
        line = self._next()
        if not line:
            raise StopIteration
        return line


def open_text(path: str) -> IO[str]:
    """The text of a plain or gzip file (``-``: standard input); every fault (missing,
    unreadable, corrupt or truncated gzip, not UTF-8, a device, a file changing while read)
    raises a located :class:`InputError` (:mod:`jaxrna.io.source`)."""
    from jaxrna.io.source import TextSource

    return TextSource(path)  # type: ignore[return-value]


def read_fasta(path: str | os.PathLike, alphabet: str = "rna", *,
               unique_ids: bool = True) -> Iterator[Record]:
    """Stream validated records from a FASTA file (plain or gzip; ``-`` for stdin).

    ``alphabet`` is ``"rna"`` (IUPAC nucleotide codes; T read as U) or ``"letters"`` (any
    ASCII letter, e.g. proteins for alignment). Raises :class:`InputError` on the first
    problem; records before it have already been yielded.
    """
    from Bio import SeqIO  # imported here so that jaxrna's core imports without Biopython

    path = os.fspath(path)
    handle = open_text(path)
    tracker = LineTracker(handle, path, alphabet)
    seen: dict[str, int] = {}
    count = 0
    try:
        for rec in SeqIO.parse(tracker, "fasta"):
            line, rid = tracker.headers.popleft()
            seq = str(rec.seq)
            if not seq:
                raise InputError("empty record (no sequence)", path=path, line=line, record=rid)
            if unique_ids:
                if rid in seen:
                    raise InputError(f"duplicate record id (first seen on line {seen[rid]})",
                                     path=path, line=line, record=rid)
                seen[rid] = line
            count += 1
            yield Record(id=rid, sequence=normalise(seq, alphabet), description=rec.description,
                         line=line, source=path)
    except UnicodeDecodeError:
        raise InputError("not FASTA: the file is not text (binary data or not UTF-8)",
                         path=path, line=tracker.lineno + 1) from None
    except (OSError, EOFError) as exc:  # e.g. a truncated gzip stream
        raise InputError(f"cannot read file: {exc}", path=path, line=tracker.lineno) from None
    except ValueError as exc:  # anything else SeqIO rejects
        raise InputError(f"not FASTA: {str(exc).splitlines()[0]}", path=path,
                         line=tracker.lineno) from None
    finally:
        if path != "-":
            handle.close()
    if count == 0:
        raise InputError("not FASTA: no records found", path=path)
