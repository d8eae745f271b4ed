"""Progress bars on stderr: shown on a terminal, hidden with ``--quiet`` or when not a tty."""

from __future__ import annotations

import sys
from typing import Iterable, TypeVar

T = TypeVar("T")


def progress_enabled(quiet: bool = False) -> bool:
    return not quiet and sys.stderr.isatty()


def progress(total: int | None, desc: str, unit: str = "seq", quiet: bool = False):
    """A tqdm bar (or a no-op stand-in) with ``update(n)`` and ``close()``.

    >>> bar = progress(10, "fold", quiet=True)
    >>> bar.update(3); bar.close()
    """
    if not progress_enabled(quiet):
        return _Silent()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)


def track(items: Iterable[T], total: int | None, desc: str, quiet: bool = False) -> Iterable[T]:
    bar = progress(total, desc, quiet=quiet)
    try:
        for item in items:
            yield item
            bar.update(1)
    finally:
        bar.close()


class _Silent:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass
