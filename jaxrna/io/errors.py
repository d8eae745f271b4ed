"""Errors that reach the user as one clear line and exit status 2, never a traceback."""

from __future__ import annotations


class JaxrnaError(Exception):
    """Base of the errors the CLI reports as ``jaxrna: error: ...`` with exit status 2."""

    exit_status = 2


class InputError(JaxrnaError):
    """Bad user input, located as precisely as known: file, line, record id.

    >>> str(InputError("empty record", path="x.fa", line=3, record="r1"))
    "x.fa:3: record 'r1': empty record"
    """

    def __init__(self, message: str, path: str | None = None, line: int | None = None,
                 record: str | None = None) -> None:
        self.message = message
        self.path = path
        self.line = line
        self.record = record
        super().__init__(self.format())

    def format(self) -> str:
        where = ""
        if self.path is not None:
            where = str(self.path) + (f":{self.line}" if self.line is not None else "") + ": "
        rec = f"record '{self.record}': " if self.record is not None else ""
        return f"{where}{rec}{self.message}"


class ResourceError(JaxrnaError):
    """A job refused up front because it would not fit in memory (with an estimate)."""


class OutputError(JaxrnaError):
    """An output that cannot be written (missing directory, no permission, disk full, quota),
    named with what went wrong.

    >>> str(OutputError("no space left on device", path="out.tsv"))
    'out.tsv: no space left on device'
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        self.message = message
        self.path = path
        super().__init__(f"{path}: {message}" if path is not None else message)
