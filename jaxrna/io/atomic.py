"""Atomic output: write to a temporary file beside the target, then rename over it."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import IO, Iterator


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike | None, mode: str = "w") -> Iterator[IO]:
    """Yield a handle for ``path`` that appears only when the block finishes without error.

    ``None`` or ``"-"`` means standard output (written directly). On an exception the
    temporary file is removed and any existing file at ``path`` is left untouched.

    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "out.txt")
    >>> with atomic_output(p) as fh:
    ...     _ = fh.write("hello\\n")
    >>> open(p).read()
    'hello\\n'
    """
    if path is None or str(path) == "-":
        stream = sys.stdout.buffer if "b" in mode else sys.stdout
        yield stream
        stream.flush()
        return
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".jaxrna-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
