"""Fast streaming FASTA input for target scans, read as miRanda reads it.

Target files are large (a human 3'UTR set is ~100 MB), so records are parsed with whole-string
operations (split, join, set inclusion) rather than per character: about 1.5 s per 100 MB. Sequences keep their letters
(upper-cased; T and U as written, since miRanda prints the input letters); miRanda's alphabet is
accepted (IUPAC nucleotide codes and X, any case; blanks inside lines are skipped) and anything
else raises :class:`~jaxrna.io.errors.InputError` naming the file, line and record. Duplicate ids
are allowed, as in miRanda. Plain or gzip files; ``-`` reads standard input.

>>> import tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "t.fa")
>>> _ = open(p, "w").write(">u1 a 3'UTR\\nacgt\\nNNUU\\n>u2\\nGGU\\n")
>>> [(r.id, r.description, r.sequence) for r in read_records(p)]
[('u1', "u1 a 3'UTR", 'ACGTNNUU'), ('u2', 'u2', 'GGU')]
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from typing import Iterator

import numpy as np

from jaxrna.io.errors import InputError
from jaxrna.io.fasta import Record, open_text
from jaxrna.io.source import read_whole

#: miRanda's accepted sequence letters (IUPAC nucleotide codes and X), either case.
LETTERS = "ACGTURYSWKMBDHVNXacgturyswkmbdhvnx"
_ALLOWED = frozenset(LETTERS + " \t\r\n\v\f")
_ALLOWED_BYTES = "".join(sorted(_ALLOWED)).encode("ascii")


def _locate(path, lines, first_line, rid):
    """Raise the error for the first bad character among a record's sequence lines."""
    for k, line in enumerate(lines):
        for col, ch in enumerate(line.rstrip("\r\n"), start=1):
            if ch not in _ALLOWED:
                what = "is not a letter" if not (ch.isascii() and ch.isalpha()) else \
                    "is not an IUPAC nucleotide code"
                raise InputError(f"character {ch!r} at column {col} {what}", path=path,
                                 line=first_line + 1 + k, record=rid)
    raise AssertionError("unreachable")


#: Characters read per block.
BLOCK = 1 << 22


def read_records(path: str | os.PathLike) -> Iterator[Record]:
    """Stream the records of a FASTA file (see the module notes).

    Records are cut out of large blocks of text at each line starting with ``>``; a record's
    sequence is its lines joined with all blanks removed."""
    path = os.fspath(path)
    handle = open_text(path)
    count = 0
    lineno = 0          # lines before ``buf``
    buf = ""
    started = False     # the first header has been seen

    def parse(text: str, line: int) -> Record:
        end = text.find("\n")
        header, body = (text, "") if end < 0 else (text[:end], text[end + 1:])
        title = header[1:].strip()
        rid = title.split(None, 1)[0] if title else ""
        if not rid:
            raise InputError("header line has no record id", path=path, line=line)
        seq = body.replace("\n", "")
        if not seq.isalpha():  # other blanks (or characters to report): the general path
            seq = "".join(seq.split())
        if not seq:
            raise InputError("empty record (no sequence)", path=path, line=line, record=rid)
        if not (seq.isascii() and not seq.encode("ascii").translate(None, _ALLOWED_BYTES)):
            _locate(path, body.splitlines(keepends=True), line, rid)
        return Record(id=rid, sequence=seq.upper(), description=title, line=line, source=path)

    try:
        while True:
            block = handle.read(BLOCK)
            eof = not block
            buf += block
            pos = 0
            if not started:
                first = 0 if buf.startswith(">") else buf.find("\n>") + 1 or -1
                if first < 0 and not eof:
                    _check_blank(buf, lineno, path)  # at once: binary data has few line breaks
                    first = buf.rfind("\n") + 1  # whole lines before any header so far
                    head, buf = buf[:first], buf[first:]
                    lineno += head.count("\n")
                    continue
                head = buf[:first] if first >= 0 else buf
                _check_blank(head, lineno, path)
                if first < 0:  # no header at all
                    break
                lineno += head.count("\n")
                pos, started = first, True
            while True:
                nxt = buf.find("\n>", pos)
                if nxt < 0:
                    break
                rec = buf[pos:nxt + 1]
                yield parse(rec, lineno + 1)
                count += 1
                lineno += rec.count("\n")
                pos = nxt + 1
            buf = buf[pos:]
            if eof:
                if buf:
                    yield parse(buf, lineno + 1)
                    count += 1
                break
    except UnicodeDecodeError:
        raise InputError("not FASTA: the file is not text (binary data or not UTF-8)",
                         path=path, line=lineno + 1) from None
    except (OSError, EOFError) as exc:  # e.g. a truncated gzip stream
        raise InputError(f"cannot read file: {exc}", path=path, line=lineno) from None
    finally:
        if path != "-":
            handle.close()
    if count == 0:
        raise InputError("not FASTA: no records found", path=path)


def _check_blank(text: str, lineno: int, path: str) -> None:
    """Text before the first header must be blank lines."""
    if text.strip():
        k = next(n for n, line in enumerate(text.splitlines()) if line.strip())
        raise InputError("not FASTA: expected a header line starting with '>'", path=path,
                         line=lineno + k + 1)


#: Plain files up to this size may be read whole by :func:`read_bulk`.
BULK_LIMIT = 1 << 28

#: letter -> its upper case, anything else -> 0
_UPPER_OR_0 = np.zeros(256, dtype=np.uint8)
_UPPER_OR_0[np.frombuffer(LETTERS.encode("ascii"), np.uint8)] = np.frombuffer(LETTERS.upper().encode("ascii"), np.uint8)
_UPPER_OR_0_BYTES = _UPPER_OR_0.tobytes()


def read_bulk(path: str | os.PathLike):
    """The whole file at once, with array operations: ``(ids, descriptions, letters, lengths)``
    (letters upper-cased, every record's concatenated, as a uint8 array), or None when the file
    is not a plain file of at most :data:`BULK_LIMIT` bytes in the plainest FASTA (a header on
    the first line, no blank or carriage-return lines, letters only in the sequences, no empty
    record or id). :func:`read_records` reads the others, and reports what is wrong."""
    data = read_whole(path, BULK_LIMIT)  # None for '-', FIFOs, devices, gzip, large files
    if data is None or not data.startswith(b">"):
        return None
    arr = np.frombuffer(data, np.uint8)
    newlines = np.flatnonzero(arr == 10)
    after = newlines[newlines + 1 < len(arr)] + 1
    heads = np.concatenate([[0], after[arr[after] == ord(">")]])  # each header line's first byte
    k = np.searchsorted(newlines, heads)
    if len(heads) and k[-1] >= len(newlines):
        return None  # the last header line has no end (no sequence)
    ends = newlines[k]                                   # each header line's newline
    stops = np.append(heads[1:] - 1, len(data))          # each record's last byte + 1
    # a record's letters: its body bytes less its newlines (0 or less: an empty record)
    lengths = (stops - ends - 1) - (np.searchsorted(newlines, stops) - np.searchsorted(newlines, ends + 1))
    if not (lengths > 0).all():
        return None
    ids, descriptions = [], []
    try:
        for a, b in zip(heads.tolist(), ends.tolist()):
            title = data[a + 1:b].decode("utf-8").strip()
            rid = title.split(None, 1)[0] if title else ""
            if not rid:
                return None
            ids.append(rid)
            descriptions.append(title)
    except UnicodeDecodeError:
        return None
    view = memoryview(data)
    bodies = [view[b + 1:e] for b, e in zip(ends.tolist(), stops.tolist())]
    # the letters upper-cased, newlines dropped; blanks, carriage returns or other characters
    # become 0: the general reader then reads the file (and reports what is wrong)
    letters = b"".join(bodies).translate(_UPPER_OR_0_BYTES, b"\n")
    if b"\x00" in letters:
        return None
    return ids, descriptions, np.frombuffer(letters, np.uint8), lengths.astype(np.int64)


_AHEAD: dict[tuple, concurrent.futures.Future] = {}


def _file_key(path: str | os.PathLike) -> tuple | None:
    """What identifies a plain file's contents for :func:`read_ahead` (None: not a plain file)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not os.path.isfile(path):
        return None
    return (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def read_ahead(path: str | os.PathLike) -> None:
    """Start :func:`read_bulk` of ``path`` in a thread, for :func:`read_bulk_once` to take
    later (the CLI reads the target file while JAX imports and starts its GPU client; the read
    is mostly I/O and NumPy, outside the interpreter lock). Nothing for a stream or a missing
    file; an error is raised where the result is taken, as the read itself would raise it."""
    key = _file_key(path)
    if key is None or key in _AHEAD:
        return
    forget_read_ahead()                   # one at a time: a run's file, not every run's
    future: concurrent.futures.Future = concurrent.futures.Future()

    def run() -> None:
        try:
            future.set_result(read_bulk(path))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever takes the result
            future.set_exception(exc)

    _AHEAD[key] = future
    threading.Thread(target=run, daemon=True, name="jaxrna-read-ahead").start()


def forget_read_ahead() -> None:
    """Drop what :func:`read_ahead` read and nobody took (a run that ended before reading its
    targets); a read still going on finishes into nothing."""
    _AHEAD.clear()


def read_bulk_once(path: str | os.PathLike):
    """:func:`read_bulk` of ``path``, taken from a :func:`read_ahead` of the same unchanged file
    when one was started (and forgotten then), else read now.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "t.fa")
    >>> _ = open(p, "w").write(">u1\\nACGU\\n>u2\\nGG\\n")
    >>> read_ahead(p)
    >>> ids, descriptions, letters, lengths = read_bulk_once(p)
    >>> ids, letters.tobytes(), lengths.tolist()
    (['u1', 'u2'], b'ACGUGG', [4, 2])
    """
    key = _file_key(path)
    future = _AHEAD.pop(key, None) if key is not None else None
    forget_read_ahead()                   # any other is of a file changed since: not wanted
    return future.result() if future is not None else read_bulk(path)


def count_records(path: str) -> int:
    """Number of FASTA records (lines starting with '>') in a plain or gzip file."""
    count, last = 0, "\n"
    with open_text(path) as fh:
        while True:
            block = fh.read(1 << 24)
            if not block:
                break
            count += block.count("\n>") + (1 if last == "\n" and block[:1] == ">" else 0)
            last = block[-1:]
    return count


__all__ = ["read_records", "read_bulk", "read_ahead", "read_bulk_once", "forget_read_ahead",
           "count_records", "LETTERS", "Record"]
