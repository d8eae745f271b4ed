"""Atomic output: write to a temporary file beside the target, then rename over it.

Outputs are checked before any work (:func:`check_output`: the directory exists and a file can
be created in it). A failure while writing (disk full, quota, a read-only file system) raises
:class:`~jaxrna.io.errors.OutputError` naming the output; the temporary file is removed on
every failure, and when the run is stopped by a signal (:mod:`jaxrna.io.cleanup`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from typing import IO, Iterator

from jaxrna.io import cleanup
from jaxrna.io.errors import OutputError

#: errno values that say an output could not be written (not a bug, not an input fault).
WRITE_ERRNOS = frozenset(getattr(errno, name) for name in
                         ("ENOSPC", "EDQUOT", "EFBIG", "EROFS", "EIO", "EACCES", "EPERM")
                         if hasattr(errno, name))
TEMP_PREFIX, TEMP_SUFFIX = ".jaxrna-", ".tmp"


def _message(exc: OSError) -> str:
    return (exc.strerror or str(exc)).rstrip(".")


#: Outputs here are written directly: ``/dev/stdout`` is a link to whatever standard output
#: is (a renamed file would replace the link itself), ``/dev/null`` a device.
DIRECT_PREFIXES = ("/dev/", "/proc/")


def _special(path: str) -> bool:
    """True for a path written directly, never replaced by a renamed file: ``/dev/stdout``,
    ``/dev/fd/N``, ``/dev/null``, a FIFO, anything that is neither a regular file nor a
    directory."""
    if os.path.abspath(path).startswith(DIRECT_PREFIXES):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


#: The kernel's own file systems: their files are the kernel's interfaces (``/proc/version``,
#: ``/sys/...``), never a place for output; no temporary file can be created there.
KERNEL_FILE_SYSTEMS = ("/proc", "/sys")


def _kernel_fs(path: str) -> str | None:
    """``"/proc"`` or ``"/sys"`` when ``path`` (or, where it does not exist, its nearest existing
    directory) is on that file system, after links: ``/proc/version``, ``/proc/self/foo``,
    ``/sys/kernel/foo``. ``/dev/stdout`` and ``/proc/self/fd/N`` are links to what they name
    (a terminal, a pipe, a file), so they are not."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
        parent = os.path.dirname(os.path.abspath(path))
        while st is None:
            try:
                st = os.stat(parent)
            except OSError:
                if parent == os.path.dirname(parent):
                    return None
                parent = os.path.dirname(parent)
    for root in KERNEL_FILE_SYSTEMS:
        try:
            dev = os.stat(root).st_dev
            mounted = dev != os.stat(os.path.dirname(root)).st_dev  # a mount point
        except OSError:  # no such directory (not Linux)
            continue
        if mounted and dev == st.st_dev:
            return root
    return None


def _check_special(path: str, option: str) -> None:
    """A path written directly (``/dev/stdout``, ``/dev/null``, a FIFO): it must exist and open
    for appending (what :func:`atomic_output` does with it). A FIFO is not opened here: that
    would wait for its reader."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise OutputError(f"cannot write {option}: it does not exist, and no file is created "
                          f"in {os.path.dirname(os.path.abspath(path))}", path=path) from None
    except OSError as exc:
        raise OutputError(f"cannot write {option}: {_message(exc)}", path=path) from None
    if not os.access(path, os.W_OK):
        raise OutputError(f"cannot write {option}: permission denied", path=path)
    if stat.S_ISFIFO(mode):
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise OutputError(f"cannot write {option}: {_message(exc)}", path=path) from None
    os.close(fd)


def check_output(path: str | os.PathLike | None, option: str = "-o") -> None:
    """Refuse up front an output that cannot be written: its directory is missing or not a
    directory, a file cannot be created there, or the path is a directory (``None``/``-``:
    standard output, nothing to check).

    >>> check_output("/nonexistent-dir/out.txt")
    Traceback (most recent call last):
    ...
    jaxrna.io.errors.OutputError: /nonexistent-dir/out.txt: cannot write -o: the directory /nonexistent-dir does not exist

    The kernel's file systems (``/proc``, ``/sys``) are refused too; ``/dev/stdout``,
    ``/dev/null``, ``/proc/self/fd/N`` are written directly.
    """
    if path is None or str(path) == "-":
        return
    path = os.fspath(path)
    if os.path.isdir(path):
        raise OutputError(f"cannot write {option}: it is a directory", path=path)
    kernel = _kernel_fs(path)
    if kernel:
        raise OutputError(f"cannot write {option}: {kernel} is the kernel's own file system, "
                          "where no output file can be created", path=path)
    if _special(path):
        _check_special(path, option)
        return
    directory = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(directory):
        what = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise OutputError(f"cannot write {option}: the directory {directory} {what}", path=path)
    try:
        fd, probe = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=directory)
    except OSError as exc:
        raise OutputError(f"cannot write {option}: cannot create a file in {directory} "
                          f"({_message(exc)})", path=path) from None
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(probe)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike | None, mode: str = "w") -> Iterator[IO]:
    """Yield a handle for ``path`` that appears only when the block finishes without error.

    ``None`` or ``"-"`` means standard output (written directly). On an exception the
    temporary file is removed and any existing file at ``path`` is left untouched; a write
    that fails for lack of space, quota or permission raises :class:`OutputError`.

    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> with atomic_output(p) as fh:
    ...     _ = fh.write("hello\\n")
    >>> open(p).read()
    'hello\\n'
    """
    if path is None or str(path) == "-":
        stream = sys.stdout.buffer if "b" in mode else sys.stdout
        try:
            yield stream
            stream.flush()
        except OSError as exc:
            if isinstance(exc, BrokenPipeError) or exc.errno not in WRITE_ERRNOS or exc.filename:
                raise
            cleanup.quiet_stdout()  # what is still buffered would fail again at exit
            raise OutputError(f"cannot write: {_message(exc)}", path="standard output") from None
        return
    path = os.fspath(path)
    kernel = _kernel_fs(path)
    if kernel:  # never written, even where it opens (as root, /proc/sys/...)
        raise OutputError(f"cannot write: {kernel} is the kernel's own file system", path=path)
    if _special(path):  # /dev/stdout, a FIFO: written as it goes
        try:  # appending: /dev/stdout may be a file the shell opened (and truncated) already
            with open(path, mode.replace("w", "a")) as handle:
                yield handle
        except OSError as exc:
            # the path itself refused (EINVAL for a kernel file, ENXIO for a socket) or a write
            # failed for lack of space or permission
            if exc.filename == path or (not exc.filename and exc.errno in WRITE_ERRNOS):
                raise OutputError(f"cannot write: {_message(exc)}", path=path) from None
            raise
        return
    target = os.path.realpath(path)  # a symbolic link stays, the file it names is replaced
    directory = os.path.dirname(target)
    try:
        fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, suffix=TEMP_SUFFIX, dir=directory)
    except OSError as exc:
        raise OutputError(f"cannot create a file in {directory} ({_message(exc)})",
                          path=path) from None
    cleanup.register(tmp)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
        # no fsync: the rename is what makes the output all-or-nothing for every reader and
        # for a killed run; forcing GBs of output to disk first cost seconds (3.7 GB: 3.9 s)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, target)
    except BaseException as exc:
        cleanup.remove(tmp)
        if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS and \
                (not exc.filename or exc.filename in (tmp, path, target)):
            raise OutputError(f"cannot write: {_message(exc)}", path=path) from None
        raise
    finally:
        cleanup.unregister(tmp)


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
