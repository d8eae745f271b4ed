"""Out of device memory: recognising XLA's ``RESOURCE_EXHAUSTED`` errors, retrying batched work
in smaller pieces, and saying which record did not fit and how much memory it asked for.

XLA reports an allocation that fails on a device (or, rarely, on the host) as a runtime error
whose text starts with ``RESOURCE_EXHAUSTED`` ("Out of memory while trying to allocate N
bytes"); the class is ``jax.errors.JaxRuntimeError`` (``XlaRuntimeError`` in older jaxlibs),
so the test is on the text. :func:`split_on_oom` runs a batch and, when it does not fit, runs
each half on its own (recursively), down to single items; an item that does not fit alone
becomes a :class:`DeviceMemoryError` naming it and the memory it needed.

>>> def run(batch):
...     if len(batch) > 2:
...         raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
...                            "4294967296 bytes.")
...     return [x * 10 for x in batch]
>>> split_on_oom(run, [1, 2, 3, 4, 5], describe=str)
[10, 20, 30, 40, 50]
>>> describe_out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to "
...                                     "allocate 4294967296 bytes."))
'out of device memory (an allocation of 4.0 GiB did not fit); use a device with more memory, --backend cpu, or shorter sequences'
"""

from __future__ import annotations

import logging
import re
from typing import Callable, Sequence, TypeVar

from jaxrna.io.errors import ResourceError

T = TypeVar("T")
R = TypeVar("R")

log = logging.getLogger("jaxrna")

_SIZE = re.compile(r"allocat\w*\s+(?:of\s+)?([\d.]+)\s*([KMGT]i?B|bytes|B)\b", re.IGNORECASE)
_UNITS = {"B": 1, "BYTES": 1, "KB": 1000, "KIB": 1024, "MB": 1000**2, "MIB": 1024**2,
          "GB": 1000**3, "GIB": 1024**3, "TB": 1000**4, "TIB": 1024**4}
ADVICE = "use a device with more memory, --backend cpu, or shorter sequences"


class DeviceMemoryError(ResourceError):
    """One item (a record, a pair) that does not fit in device memory even alone."""

    def __init__(self, message: str, needed: int | None = None) -> None:
        super().__init__(message)
        self.needed = needed


def is_out_of_memory(exc: BaseException) -> bool:
    """True for XLA's out-of-memory errors (``RESOURCE_EXHAUSTED``), whatever their class."""
    if isinstance(exc, DeviceMemoryError):
        return True
    if not isinstance(exc, RuntimeError) or isinstance(exc, RecursionError):
        return False
    text = str(exc)
    return "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower() and \
        type(exc).__name__ in ("XlaRuntimeError", "JaxRuntimeError")


def needed_bytes(exc: BaseException) -> int | None:
    """The allocation the error reports, in bytes (None when it does not say)."""
    m = _SIZE.search(str(exc))
    if not m:
        return None
    try:
        return int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    except (KeyError, ValueError):
        return None


def _amount(needed: int | None, estimate: int | None = None) -> str:
    from jaxrna.runtime import human_bytes

    parts = []
    if needed is not None:
        parts.append(f"an allocation of {human_bytes(needed)} did not fit")
    if estimate:
        parts.append(f"about {human_bytes(estimate)} needed in all")
    return f" ({', '.join(parts)})" if parts else ""


def describe_out_of_memory(exc: BaseException, what: str | None = None) -> str | None:
    """One line for an out-of-memory error (None if ``exc`` is not one); ``what`` names the
    record or pair being computed."""
    if isinstance(exc, DeviceMemoryError):
        return str(exc)
    if not is_out_of_memory(exc):
        return None
    where = f"{what}: " if what else ""
    return f"{where}out of device memory{_amount(needed_bytes(exc))}; {ADVICE}"


def split_on_oom(run: Callable[[Sequence[T]], Sequence[R]], items: Sequence[T],
                 describe: Callable[[T], str], on_error: Callable[[T, Exception], None] | None = None,
                 estimate: Callable[[T], int] | None = None,
                 failed: BaseException | None = None) -> list[R | None]:
    """``run(items)``, or, when it runs out of device memory, ``run`` of each half, and so on
    down to single items. An item that does not fit alone raises :class:`DeviceMemoryError`
    (``describe(item)`` names it), or, with ``on_error(item, error)``, is reported there and
    gives None in the results. ``run`` returns one result per item, in order;
    ``estimate(item)``, the bytes an item needs, goes into the message. ``failed``: the
    error ``run(items)`` already raised (work launched ahead): straight to the halves."""
    items = list(items)
    try:
        if failed is not None:
            raise failed
        return list(run(items))
    except Exception as exc:  # noqa: BLE001 - only out-of-memory errors are handled
        if not is_out_of_memory(exc) or isinstance(exc, DeviceMemoryError):
            raise
        if len(items) > 1:
            half = (len(items) + 1) // 2
            log.info("out of device memory for a batch of %d; retrying in batches of %d and %d",
                     len(items), half, len(items) - half)
            return (split_on_oom(run, items[:half], describe, on_error, estimate)
                + split_on_oom(run, items[half:], describe, on_error, estimate))
        need = needed_bytes(exc)
        total = estimate(items[0]) if estimate is not None else None
        text = f"out of device memory{_amount(need, total)}; {ADVICE}"
        if on_error is None:
            raise DeviceMemoryError(f"{describe(items[0])}: {text}", need) from None
        on_error(items[0], DeviceMemoryError(text, need))
        return [None]


__all__ = ["DeviceMemoryError", "is_out_of_memory", "needed_bytes", "describe_out_of_memory",
           "split_on_oom"]
