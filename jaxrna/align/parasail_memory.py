"""parasail's results in this process's memory, for :class:`jaxrna.align.host.HostEngine`: the
heap setting that keeps freed tables' pages (:func:`keep_freed_memory`), one numpy view over
many score tables without copying them (:func:`view_tables`, :func:`one_view`, from
:func:`table_address`), and the addresses of parasail's C functions that the compiled table
loop calls (:func:`parasail_functions`).

>>> import numpy as np
>>> F, base = one_view([np.arange(3, dtype=np.int32), np.arange(2, dtype=np.int32)])
>>> [int(F[b]) for b in base]
[0, 0]
"""

from __future__ import annotations

import numpy as np

_KEPT: list[bool] = []
#: glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD, M_MMAP_THRESHOLD.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def keep_freed_memory() -> bool:
    """Let this process (and the processes it forks) reuse the memory of freed tables
    (:class:`jaxrna.align.host_runner.HostRunner` asks it for a run).

    glibc serves an allocation above its mmap threshold (128 kB at first) with fresh pages
    from the kernel and returns them on ``free``, and trims the heap's free top: every
    parasail table of a few hundred nt then cost a page fault per 4 kB. Here tables up to
    32 MB come from the heap, and up to 1 GB of freed heap is kept for the next ones: 90,000
    local pairs of 200-400 nt with alignments on a 16-core GPU host took 0.42 million page
    faults instead of 2.6 million, and 2.0 s of system time instead of 7.3. Once per process;
    True where the setting took (glibc), False elsewhere (nothing changes there).
    """
    if _KEPT:
        return _KEPT[0]
    ok = False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        ok = bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and \
            bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))
    except (OSError, AttributeError):
        ok = False
    _KEPT.append(ok)
    return ok


def parasail_functions(kind: str = "sw"):
    """Addresses of parasail's C functions the compiled table loop calls (its table function
    ``parasail_{kind}_table_scan_32``, the result's score, ends and table, and its free), or
    None where the bindings do not expose them."""
    if kind in _FUNCTIONS:
        return _FUNCTIONS[kind]
    found = None
    try:
        import ctypes

        from parasail import bindings_v2

        lib = bindings_v2._lib
        names = (f"parasail_{kind}_table_scan_32", "parasail_result_get_score",
                 "parasail_result_get_end_query", "parasail_result_get_end_ref",
                 "parasail_result_get_score_table", "parasail_result_free")
        found = np.array([ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
                          for name in names], np.int64)
    except (ImportError, AttributeError, TypeError):
        found = None
    _FUNCTIONS[kind] = found
    return found


_FUNCTIONS: dict = {}


class _Raw:
    """``__array_interface__`` of ``count`` int32 at ``address`` (memory owned elsewhere)."""

    def __init__(self, address: int, count: int) -> None:
        self.__array_interface__ = {"data": (address, True), "shape": (count,),
                                    "typestr": "<i4", "version": 3}


def table_address():
    """A function giving the address of a parasail result's score table without making a
    numpy array of it (parasail's ``score_table`` builds one through a memoryview per call),
    or None where parasail's bindings do not expose what it needs."""
    if _ADDRESS:
        return _ADDRESS[0]
    where = None
    try:
        import ctypes

        from parasail import bindings_v2

        get = bindings_v2._lib.parasail_result_get_score_table
        vp = ctypes.c_void_p

        def where(pointer):
            return ctypes.cast(get(pointer), vp).value
    except (ImportError, AttributeError):
        where = None
    _ADDRESS.append(where)
    return where


_ADDRESS: list = []


def view_tables(addr: list[int], sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """As :func:`one_view`, from the tables' addresses and cell counts (int32, contiguous:
    parasail's tables)."""
    if not addr:
        return np.zeros(0, np.int32), np.zeros(0, np.int64)
    a = np.array(addr, np.int64)
    n = np.array(sizes, np.int64)
    if (a % 4).any():
        raise AssertionError("parasail score table not 4-byte aligned")
    lo = int(a.min())
    hi = int((a + 4 * n).max())
    return np.asarray(_Raw(lo, (hi - lo) // 4)), (a - lo) // 4


def one_view(tables: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One int32 array over every table's memory, and each table's first index in it: a view
    spanning the lowest to the highest table (no copy; only the tables' cells are ever read,
    and their owners outlive the view). A copy where the tables are not 4-byte aligned."""
    if not tables:
        return np.zeros(0, np.int32), np.zeros(0, np.int64)
    addr = np.array([t.ctypes.data for t in tables], np.int64)
    sizes = np.array([t.size for t in tables], np.int64)
    if all(t.dtype == np.int32 and t.flags.c_contiguous for t in tables) and \
            not (addr % 4).any():
        lo = int(addr.min())
        hi = int((addr + 4 * sizes).max())
        return np.asarray(_Raw(lo, (hi - lo) // 4)), (addr - lo) // 4
    base = np.zeros(len(tables), np.int64)
    np.cumsum(sizes[:-1], out=base[1:])
    return np.concatenate([t.reshape(-1) for t in tables]).astype(np.int32), base
