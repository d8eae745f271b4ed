"""Opening input files, with every fault reported as one located :class:`InputError`.

:class:`InputSource` is the binary stream of an input (gzip decompressed where the file starts
with gzip's magic bytes; ``-`` is standard input) and :class:`TextSource` its UTF-8 text (with
universal newlines, as :func:`open` gives). Whatever goes wrong while reading becomes an
:class:`~jaxrna.io.errors.InputError` naming the file and the line it happened at, never a
traceback:

- a file that is missing, a directory, unreadable (permissions, I/O errors);
- gzip data that is corrupt (``\\x1f\\x8b`` then garbage) or truncated;
- bytes that are not UTF-8 text (located at the line of the first bad byte);
- a character device or a block device (``/dev/zero`` would never end) or a socket given as
  a file; a FIFO (named pipe, or ``<(zcat x.fa.gz)``) is read as a stream, like ``-``;
- a regular file that changes while it is read (its size or modification time at the end
  differ from those at the start: a file still being written, or rewritten in place).

>>> import os, tempfile
>>> p = os.path.join(tempfile.mkdtemp(), "x.fa")
>>> _ = open(p, "wb").write(b">a\\r\\nACGU\\n")
>>> with TextSource(p) as fh:
...     fh.readline(), fh.read()
('>a\\n', 'ACGU\\n')
"""

from __future__ import annotations

import codecs
import errno
import gzip
import io
import os
import stat
import sys
import zlib

from jaxrna.io.errors import InputError

#: Bytes read from the file per call.
READ_BYTES = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"


def _devnull_rdev() -> int | None:
    try:
        return os.stat(os.devnull).st_rdev
    except OSError:  # pragma: no cover - no /dev/null
        return None


def _kind_refused(st: os.stat_result, fd: int, stdin: bool) -> str | None:
    """Why a file of this type cannot be read as FASTA input (None: it can)."""
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        return "is a directory, not a FASTA file"
    if stat.S_ISBLK(mode):
        return "is a block device, not a FASTA file"
    if stat.S_ISCHR(mode):
        if st.st_rdev == _devnull_rdev():
            return None  # /dev/null: empty
        try:
            if os.isatty(fd):
                return None  # typed at a terminal
        except OSError:  # pragma: no cover
            pass
        return ("is a character device, not a FASTA file"
                + ("" if stdin else " (give '-' to read standard input)"))
    if stat.S_ISSOCK(mode) and not stdin:
        return "is a socket, not a FASTA file"
    return None


def _os_message(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "is a directory, not a FASTA file"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if exc.errno == errno.ENOTDIR:
        return "no such file (a part of the path is not a directory)"
    return exc.strerror or str(exc)


def is_stream(path: str | os.PathLike) -> bool:
    """True when ``path`` can be read only once: ``-`` (standard input), a FIFO, a terminal or
    anything else that is not a regular file (a missing file is not a stream)."""
    path = os.fspath(path)
    if path == "-":
        return True
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


class InputSource:
    """The bytes of an input file (gzip decompressed), with located errors.

    ``read(size, line)`` returns up to ``size`` bytes (``b""`` at the end); ``line`` is the
    line the read starts on, for the messages. Raises :class:`InputError` for every fault of
    the module notes. ``decompress=False`` gives the file's bytes as they are.
    """

    def __init__(self, path: str | os.PathLike, decompress: bool = True) -> None:
        self.path = path = os.fspath(path)
        self.stdin = path == "-"
        self._owned = None
        self._stat = None
        self._deferred: BaseException | None = None
        self.gzip = False
        if self.stdin:
            buffered = sys.stdin.buffer
            fd = self._fileno(buffered)
        else:
            try:
                raw = open(path, "rb", buffering=0)
            except OSError as exc:
                raise InputError(_os_message(exc), path=path) from None
            self._owned = raw
            fd = raw.fileno()
        if fd is not None:
            try:
                st = os.fstat(fd)
            except OSError as exc:  # pragma: no cover - a descriptor that cannot be examined
                self.close()
                raise InputError(_os_message(exc), path=path) from None
            why = _kind_refused(st, fd, self.stdin)
            if why:
                self.close()
                raise InputError(why, path=path)
            if stat.S_ISREG(st.st_mode) and not self.stdin:
                self._stat = st
        if not self.stdin:
            buffered = io.BufferedReader(self._owned, 1 << 20)
            self._owned = buffered
        try:
            head = buffered.peek(2)[:2] if hasattr(buffered, "peek") else b""
        except OSError as exc:
            self.close()
            raise InputError(f"cannot read: {_os_message(exc)}", path=path, line=1) from None
        self._buffered = buffered
        self.stream = buffered
        if decompress and head == GZIP_MAGIC:
            self.gzip = True
            self.stream = gzip.GzipFile(fileobj=buffered, mode="rb")

    @staticmethod
    def _fileno(stream) -> int | None:
        try:
            return stream.fileno()
        except (AttributeError, OSError, ValueError):
            return None

    def read(self, size: int = READ_BYTES, line: int | None = None) -> bytes:
        """``size`` bytes (fewer at the end of the input, ``b""`` after it; all with -1)."""
        if self._deferred is not None:  # the gzip stream broke after the data last returned
            exc, self._deferred = self._deferred, None
            self._fail(exc, line)
        try:
            if self.gzip and size > 0:
                data = self._read_gzip(size)
            else:
                data = self.stream.read(size) if size >= 0 else self.stream.read()
        except (OSError, EOFError, zlib.error) as exc:
            self._fail(exc, line)
        if size < 0 or (not data and size):
            self._check_unchanged(line)
        return data

    def _read_gzip(self, size: int) -> bytes:
        """Decompressed pieces up to ``size``; an error after some data is raised by the next
        read, so that it is located at the line where the good data ends."""
        parts, have = [], 0
        while have < size:
            try:
                piece = self.stream.read1(size - have)
            except (OSError, EOFError, zlib.error) as exc:
                if not parts:
                    raise
                self._deferred = exc
                break
            if not piece:
                break
            parts.append(piece)
            have += len(piece)
        return b"".join(parts)

    def _fail(self, exc: BaseException, line: int | None):
        if isinstance(exc, EOFError):
            raise InputError("truncated gzip file: the compressed data ends before its "
                             "end-of-stream marker", path=self.path, line=line) from None
        if isinstance(exc, zlib.error):
            raise InputError(f"corrupt gzip data ({exc})", path=self.path, line=line) from None
        if isinstance(exc, gzip.BadGzipFile):
            raise InputError(f"not a valid gzip file ({exc})", path=self.path, line=line) from None
        if isinstance(exc, OSError):
            raise InputError(f"cannot read: {_os_message(exc)}", path=self.path,
                             line=line) from None
        raise exc

    def _check_unchanged(self, line: int | None) -> None:
        """At the end of a regular file: it must still be the file it was when opened."""
        if self._stat is None:
            return
        before, self._stat = self._stat, None
        try:
            now = os.fstat(self._buffered.fileno())
        except (OSError, ValueError):  # pragma: no cover
            return
        if (now.st_size, now.st_mtime_ns) != (before.st_size, before.st_mtime_ns):
            sizes = (f"{before.st_size:,} bytes when opened, {now.st_size:,} now"
                     if now.st_size != before.st_size else "modified while open")
            raise InputError(f"the file changed while it was read ({sizes}); was it still "
                             "being written?", path=self.path, line=line)

    def close(self) -> None:
        if self.gzip and not self.stdin:
            try:
                self.stream.close()
            except Exception:  # noqa: BLE001 - closing after an error
                pass
        if self._owned is not None:
            try:
                self._owned.close()
            except Exception:  # noqa: BLE001
                pass
            self._owned = None

    def __enter__(self) -> "InputSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TextSource:
    """The UTF-8 text of an input (``read``, ``readline``, iteration over lines, ``close``;
    ``\\r\\n`` and ``\\r`` read as ``\\n``), every fault an :class:`InputError` at FILE:LINE."""

    def __init__(self, path: str | os.PathLike | None = None, *, source=None,
                 lines_before: int = 0) -> None:
        """The text of ``path``, or of ``source`` (an :class:`InputSource`, or any binary
        stream: ``read(size)``) whose first line is line ``lines_before + 1`` of ``path``."""
        self.source = InputSource(path) if source is None else source
        self.path = os.fspath(path) if path is not None else self.source.path
        if isinstance(self.source, InputSource):
            self._read = self.source.read
        else:
            self._read = lambda size, line: self.source.read(size)
        self._utf8 = codecs.getincrementaldecoder("utf-8")()
        self._decoder = io.IncrementalNewlineDecoder(self._utf8, translate=True)
        self._buf = ""
        self._pos = 0
        self._lines = lines_before      # line breaks before the bytes decoded so far
        self._eof = False
        self.closed = False

    def _decode_next(self, want: int = READ_BYTES) -> str | None:
        """The text of the next block of the input ('' if it ends inside a character), or
        None at the end."""
        if self._eof:
            return None
        data = self._read(max(want, READ_BYTES), self._lines + 1)
        final = not data
        pending = len(self._utf8.getstate()[0])
        try:
            text = self._decoder.decode(data, final=final)
        except UnicodeDecodeError as exc:
            at = max(0, exc.start - pending)
            line = self._lines + data[:at].count(b"\n") + 1
            raise InputError(f"not text: byte 0x{exc.object[exc.start]:02x} is not UTF-8 "
                             "(a binary file?)", path=self.path, line=line) from None
        self._lines += data.count(b"\n")
        if final:
            self._eof = True
            return text or None
        return text

    def readline(self, size: int = -1) -> str:
        """The next line (with its ``\\n``; '' at the end), or its first ``size`` characters."""
        parts = []
        have = 0
        while True:
            end = self._buf.find("\n", self._pos)
            stop = end + 1 if end >= 0 else len(self._buf)
            done = end >= 0
            if 0 <= size <= have + stop - self._pos:
                stop, done = self._pos + size - have, True
            if not parts and done:
                line = self._buf[self._pos:stop]
                self._pos = stop
                return line
            if stop > self._pos:
                parts.append(self._buf[self._pos:stop])
                have += stop - self._pos
                self._pos = stop
            if done:
                return "".join(parts)
            text = self._decode_next()
            if text is None:
                return "".join(parts)
            self._buf, self._pos = text, 0

    def read(self, size: int = -1) -> str:
        parts = []
        have = 0
        while size < 0 or have < size:
            avail = len(self._buf) - self._pos
            if avail:
                take = avail if size < 0 else min(avail, size - have)
                parts.append(self._buf[self._pos:self._pos + take])
                self._pos += take
                have += take
                continue
            text = self._decode_next(size - have if size > 0 else READ_BYTES)
            if text is None:
                break
            self._buf, self._pos = text, 0
        return "".join(parts)

    def __iter__(self) -> "TextSource":
        return self

    def __next__(self) -> str:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.source.close()

    def __enter__(self) -> "TextSource":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_whole(path: str | os.PathLike, limit: int) -> bytes | None:
    """The bytes of a plain (not gzip) regular file of at most ``limit`` bytes, read at once,
    or None for anything else (which the streaming readers then read and check). Raises
    :class:`InputError` when the file changes while it is read."""
    path = os.fspath(path)
    if path == "-":
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode) or before.st_size > limit:
            return None
        with open(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
        now = os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    if data.startswith(GZIP_MAGIC) or len(data) > limit:
        return None
    if len(data) != before.st_size or (now.st_size, now.st_mtime_ns) != \
            (before.st_size, before.st_mtime_ns):
        raise InputError(f"the file changed while it was read ({before.st_size:,} bytes when "
                         f"opened, {now.st_size:,} now); was it still being written?",
                         path=path, line=data.count(b"\n") + 1)
    return data


def copy_to(path: str | os.PathLike, out) -> int:
    """Copy the bytes of input ``path`` (as they are, not decompressed) to the binary file
    ``out``; the input is checked as by :class:`InputSource`. Returns the bytes copied."""
    total = 0
    lines = 0
    with InputSource(path, decompress=False) as src:
        while True:
            data = src.read(READ_BYTES, lines + 1)
            if not data:
                return total
            out.write(data)
            total += len(data)
            lines += data.count(b"\n")


__all__ = ["InputSource", "TextSource", "is_stream", "read_whole", "copy_to"]
