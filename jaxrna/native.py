"""Small C helpers compiled once with the system's C compiler and loaded through ctypes.

Two host-side engines are C: the traceback walk of ``jaxrna align``'s host engine
(:mod:`jaxrna.align.hostwalk`) and the BPMax fill of ``jaxrna interact``'s host engine
(:mod:`jaxrna.interact.host_fill`). Each is one C source held in its module; :func:`library`
compiles it (``$CC``, else ``cc``; the caller's flags) into the compile cache as
``<cache>/host/<name>-<hash of the source and flags>.so`` -- a private directory checked like the
rest of the cache (:func:`jaxrna.cachetrust.cache_trust`: nothing is loaded from a directory or
file others can write) -- and loads it; without a (trusted) cache it is built into a temporary
directory for this process. Loading a built library costs a millisecond; building one, about a
tenth of a second. A library built for this machine's instruction set (``-march=native``) is
named by this machine's CPU as well (:func:`cpu_fingerprint`), so a cache shared by other
machines never hands one a library built for another's instructions; a compiler that refuses
``-march=native`` builds without it. Where no compiler works, :func:`library` returns None and the caller takes
its pure Python/JAX path (same results).

>>> lib = library("doctest_add", "void add(int a, int b, long *out) { *out = a + b; }",
...               signatures={"add": "i32 i32 ptr"})
>>> import ctypes
>>> out = ctypes.c_long()
>>> lib is None or (lib.add(2, 3, ctypes.byref(out)), out.value)[1] == 5
True
"""

from __future__ import annotations

import logging
import os
import threading

log = logging.getLogger("jaxrna")

_LIBS: dict[str, object] = {}        # name -> library or None, once per process
_LOCK = threading.Lock()


def _build(source: str, flags: list[str], directory: str, path: str) -> None:
    """Compile ``source`` into the shared library ``path`` (through a temporary file in
    ``directory``, renamed into place: another process never sees half a library)."""
    import subprocess
    import tempfile

    cc = os.environ.get("CC") or "cc"
    fd, src = tempfile.mkstemp(suffix=".c", dir=directory)
    tmp = src[:-2] + ".so"
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(source)
        subprocess.run([cc, *flags, "-shared", "-fPIC", "-o", tmp, src], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        for f in (src, tmp):
            try:
                os.unlink(f)
            except OSError:
                pass


NATIVE = "-march=native"


def cpu_fingerprint() -> str:
    """This machine's architecture and CPU features (``/proc/cpuinfo``'s first ``flags`` or
    ``Features`` line, where there is one): what a ``-march=native`` library depends on."""
    import platform

    text = ""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.split(":")[0].strip() in ("flags", "Features", "model name", "CPU part"):
                    text += line
                    if line.startswith(("flags", "Features")):
                        break
    except OSError:
        pass
    return f"{platform.machine()}|{platform.processor()}|{text}"


def compiler_available() -> bool:
    """Whether a C compiler is on the path (``$CC``, else ``cc``): cheap, builds nothing."""
    import shutil

    return shutil.which(os.environ.get("CC") or "cc") is not None


def file_name(name: str, source: str, flags) -> str:
    """The library's file name in the cache's ``host`` directory (source, flags and, for
    ``-march=native``, this CPU: :func:`cpu_fingerprint`)."""
    import hashlib

    parts = [source, *flags] + ([cpu_fingerprint()] if NATIVE in flags else [])
    return f"{name}-{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:16]}.so"


def cached(name: str, source: str, flags) -> bool:
    """Whether the cache holds the library already (built by an earlier run or warm-up)."""
    from jaxrna.runtime import cache_dir

    cache = cache_dir()
    return cache is not None and os.path.exists(
        os.path.join(cache, "host", file_name(name, source, list(flags))))


def _open(name: str, source: str, flags: list[str], build: bool = True):
    import ctypes
    import tempfile

    from jaxrna.cachetrust import cache_trust, entry_trust, makedirs_private
    from jaxrna.runtime import cache_dir

    fname = file_name(name, source, flags)
    cache = cache_dir()
    if cache is not None:
        directory = os.path.join(cache, "host")
        try:
            makedirs_private(directory)
            trusted = cache_trust(directory) is None
        except OSError:
            trusted = False
        if trusted:
            path = os.path.join(directory, fname)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                st = None
            if st is None:
                if not build:
                    return None
                _build(source, flags, directory, path)
                st = os.lstat(path)
            if entry_trust(path, st) is None:
                return ctypes.CDLL(path)
    if not build:
        return None
    with tempfile.TemporaryDirectory() as d:   # no (trusted) cache: built for this process
        path = os.path.join(d, fname)
        _build(source, flags, d, path)
        return ctypes.CDLL(path)


#: Argument type names of :func:`library`'s ``signatures``.
_CTYPES = {"i64": "c_int64", "i32": "c_int32", "ptr": "c_void_p"}


def _declare(lib, signatures: dict[str, str]):
    """Declare each function's arguments (``"i64 ptr ..."``) and no return value."""
    import ctypes

    for fname, args in signatures.items():
        fn = getattr(lib, fname)
        fn.restype = None
        fn.argtypes = [getattr(ctypes, _CTYPES[a]) for a in args.split()]
    return lib


def library(name: str, source: str, flags: tuple[str, ...] = ("-O2",), build: bool = True,
            signatures: dict[str, str] | None = None):
    """The compiled ``source`` as a ``ctypes.CDLL``, or None where it cannot be built (no C
    compiler, or a failing one); built or loaded on the first call for ``name``, once per
    process, its functions declared from ``signatures`` (name -> argument types, each
    ``i64``, ``i32`` or ``ptr``; no return value). ``build=False``: only a library the cache
    already holds (None, and nothing remembered, when it holds none: a caller with a cheap
    other path for small work need not pay the build)."""
    with _LOCK:
        if name not in _LIBS:
            lib = None
            tries = [list(flags)] + ([[f for f in flags if f != NATIVE]] if NATIVE in flags else [])
            for attempt in tries:
                try:
                    lib = _open(name, source, attempt, build)
                    break
                except Exception as exc:  # noqa: BLE001 - any failure: the caller's other path
                    log.debug("compiled %s unavailable with %s (%s)", name, attempt, exc)
            if lib is None and not build:
                return None
            _LIBS[name] = lib if lib is None else _declare(lib, signatures or {})
        return _LIBS[name]


__all__ = ["library", "compiler_available", "cpu_fingerprint", "cached", "file_name"]
