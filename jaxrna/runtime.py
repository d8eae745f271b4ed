"""Process-wide JAX set-up for CLI runs: the persistent compilation cache and backend choice.

The cache lives in ``$JAXRNA_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/jaxrna/jax`` (default
``~/.cache/jaxrna/jax``); ``JAXRNA_CACHE_DIR=off`` disables it.

The cache is a trust boundary: it holds machine code and pickles that runs load and execute.
Directories jaxrna creates for it are private (mode 0700) and its entries are never writable by
group or others; a cache that someone other than its owner could write, or that someone other
than the current user or root owns, is not used (:func:`cache_trust`, one warning on stderr,
programs compiled in the process instead).
"""

from __future__ import annotations

import logging
import os

from jaxrna.cachetrust import (EXECUTABLES, cache_trust, entry_trust,  # noqa: F401
                               makedirs_private)

log = logging.getLogger("jaxrna")


def cache_dir() -> str | None:
    """The persistent compilation cache directory, or None when disabled."""
    env = os.environ.get("JAXRNA_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "none", "0") else env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxrna", "jax")


def enable_compilation_cache() -> str | None:
    """Turn on JAX's persistent compilation cache (every compiled program is kept) and the
    store of executables of :mod:`jaxrna.programs` beside it, if the cache can be trusted.

    The directory is created private (mode 0700, :func:`prepare_private_cache`) when missing.
    A cache that fails :func:`cache_trust` is not used at all in this process: one warning on
    stderr says which path and why, nothing is read from it or written to it, and programs are
    compiled in the process instead (same outputs). Returns the cache directory in use, or None.
    """
    path = cache_dir()
    if path is None:
        return None
    reason = _verdict(path)
    if reason == _UNUSABLE:
        return None
    from jaxrna import programs, stages

    stages.listen_to_jax()          # programs counted (JAXRNA_PROFILE) with or without a cache
    if reason is not None:
        programs.use_disk(None)
        return None
    import jax

    _harden_cache()
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    programs.use_disk(path)         # and jaxrna's store of executables (GPU programs)
    return path


#: The verdict of :func:`cache_trust` on each cache directory this process enabled
#: (None: trusted), so the check and its warning happen once per process.
_verdicts: dict[str, str | None] = {}
_UNUSABLE = "cannot be created"


def _verdict(path: str) -> str | None:
    """Why cache ``path`` is not used (None: trusted): created private when missing, checked
    once per process (:func:`cache_trust`, one warning). Imports no JAX."""
    reason = _verdicts.get(path)
    if reason is None:
        try:
            makedirs_private(path)
        except OSError as exc:
            log.warning("compilation cache disabled: cannot create %s (%s)", path, exc)
            return _UNUSABLE
        if path not in _verdicts:
            reason = _verdicts[path] = cache_trust(path)
            if reason is not None:
                log.warning("warning: compile cache %s is not trusted (%s); nothing is loaded "
                            "from it or stored in it, programs are compiled in this process (a "
                            "cache must be owned by you or root and writable by no one else: "
                            "chmod go-w, or set JAXRNA_CACHE_DIR to a private directory)",
                            path, reason)
    return reason


def trusted_store() -> str | None:
    """The directory of jaxrna's store of executables (:mod:`jaxrna.programs`) that
    :func:`enable_compilation_cache` will use, judged without importing JAX: None where there
    is no cache or it is not trusted (the same check and warning, once per process)."""
    path = cache_dir()
    if path is None or _verdict(path) is not None:
        return None
    return os.path.join(path, EXECUTABLES)


def prepare_private_cache(path: str | None = None) -> str:
    """Create the compile cache ``path`` (default :func:`cache_dir`) and its ``executables``
    subdirectory, each missing directory with mode 0700, and return the path; raise
    :class:`~jaxrna.io.errors.JaxrnaError` when the cache is off or fails :func:`cache_trust`
    (an existing directory's modes are never changed). ``jaxrna warmup`` starts here.

    >>> import tempfile, os, stat
    >>> d = prepare_private_cache(os.path.join(tempfile.mkdtemp(), "a", "cache"))
    >>> [oct(stat.S_IMODE(os.stat(p).st_mode)) for p in (d, os.path.dirname(d))]
    ['0o700', '0o700']
    """
    from jaxrna.io.errors import JaxrnaError

    path = cache_dir() if path is None else path
    if path is None:
        raise JaxrnaError("the compile cache is off (JAXRNA_CACHE_DIR=off)")
    try:
        makedirs_private(path)
        makedirs_private(os.path.join(path, EXECUTABLES))
    except OSError as exc:
        raise JaxrnaError(f"cannot create the compile cache {path}: {exc}") from None
    reason = cache_trust(path)
    if reason is not None:
        raise JaxrnaError(f"the compile cache {path} is not safe to use: {reason} (a cache "
                          "must be owned by you or root and writable by no one else)")
    return path


def _harden_cache() -> None:
    """Make the shared cache directory safe for many processes at once (Galaxy runs many jobs
    side by side) and for runs that are killed.

    JAX writes an entry in place (``Path.write_bytes``): another process can read it half
    written, a run killed mid-write leaves it truncated, and a corrupt entry stays for good
    (``put`` keeps an existing file). Entries are written to a temporary file and renamed over
    the old one instead, so readers see whole files only and a freshly compiled program
    replaces a corrupt entry. JAX already ignores an entry it cannot read (and recompiles); its
    multi-line warnings about that, or about a cache it cannot write, are silenced.
    """
    import warnings

    warnings.filterwarnings("ignore", message=r"Error (reading|writing) persistent compilation "
                                              r"cache entry", category=UserWarning)
    try:
        from jax._src import compilation_cache, lru_cache
    except ImportError:  # pragma: no cover - another JAX layout: JAX's own writes
        return
    base = getattr(compilation_cache, "LRUCache", None)
    if base is None or getattr(base, "jaxrna_atomic", False):
        return
    suffix = getattr(lru_cache, "_CACHE_SUFFIX", "-cache")

    class AtomicFileCache(base):  # type: ignore[misc, valid-type]
        jaxrna_atomic = True

        def put(self, key: str, value: bytes) -> None:
            directory = str(getattr(self, "path", ""))
            if not key or getattr(self, "eviction_enabled", False) or "://" in directory \
                    or not os.path.isdir(directory):
                return super().put(key, value)
            import tempfile

            from jaxrna.io import cleanup
            from jaxrna.io.atomic import current_umask

            fd, tmp = tempfile.mkstemp(prefix=f".{key[:48]}-", suffix=".tmp", dir=directory)
            cleanup.register(tmp)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(value)
                # as JAX's own entries (mkstemp's are 0600), never writable by group or others
                os.chmod(tmp, 0o644 & ~current_umask())
                os.replace(tmp, os.path.join(directory, f"{key}{suffix}"))
            except BaseException:
                cleanup.remove(tmp)
                raise
            finally:
                cleanup.unregister(tmp)

    compilation_cache.LRUCache = AtomicFileCache


def has_gpu() -> bool:
    """True when JAX sees a GPU."""
    import jax

    try:
        return len(jax.devices("gpu")) > 0
    except RuntimeError:
        return False


_announce_for: str | None = None


def announce_device(command: str | None) -> None:
    """Have the next backend choice (:func:`choose_backend`, :func:`resolve_backend`) print
    which device ``command`` runs on, one line on stderr (``-v``); None: print nothing."""
    global _announce_for, _jax_only_for
    _announce_for = command
    _jax_only_for = None


def _announce(backend: str, how: str) -> None:
    global _announce_for
    if _announce_for is None:
        return
    import sys

    command, _announce_for = _announce_for, None
    print(device_line(command, backend, how), file=sys.stderr, flush=True)


def announce_host(how: str, engine: str = "NumPy", where: str = "in this process") -> None:
    """For ``-v`` (:func:`announce_device`): the run computes with ``engine`` (NumPy,
    parasail, ViennaRNA) ``where`` (in this process, on a pool of processes), JAX not even
    imported (or started for a check only: :func:`jax_started_for`)."""
    global _announce_for, _jax_only_for
    if _announce_for is None:
        return
    import sys

    command, _announce_for = _announce_for, None
    jax = "without JAX" if _jax_only_for is None else f"JAX started for {_jax_only_for} only"
    _jax_only_for = None
    print(f"jaxrna: {command} runs on cpu ({how}): {engine} {where}, {jax}",
          file=sys.stderr, flush=True)


_jax_only_for: str | None = None


def jax_started_for(what: str) -> None:
    """Say in :func:`announce_host`'s line that JAX was started for ``what`` (a look at the
    store, say), not for computing."""
    global _jax_only_for
    _jax_only_for = what


def device_line(command: str, backend: str, how: str) -> str:
    """The line a ``-v`` run prints once its backend is chosen: the backend, how it was chosen
    and the devices the run computes on (:func:`devices`: every device of the backend, or the
    first ``--devices N``).

    >>> device_line("fold", "cpu", "--backend cpu")
    'jaxrna: fold runs on cpu (--backend cpu): cpu:0 (cpu)'
    """
    names = ", ".join(f"{d} ({d.device_kind})" for d in devices(backend))
    return f"jaxrna: {command} runs on {backend} ({how}): {names}"


#: ``--devices N``: runs use the first N devices of their backend (None: all of them).
_device_limit: int | None = None


def limit_devices(count: int | None) -> None:
    """Use the first ``count`` devices of the chosen backend from now on (``--devices N``;
    None: every device JAX exposes). ``CUDA_VISIBLE_DEVICES`` limits what JAX exposes."""
    global _device_limit
    if count is not None and count < 1:
        raise ValueError(f"the device count must be at least 1, not {count}")
    _device_limit = count


def devices(backend: str | None = None) -> list:
    """The devices a run on ``backend`` (a JAX platform name; None: JAX's default backend)
    computes on, in JAX's order: all of them, or the first ``--devices N``
    (:func:`limit_devices`).

    >>> [str(d) for d in devices("cpu")][:1]
    ['cpu:0']
    """
    import jax

    found = list(jax.devices(backend) if backend else jax.devices())
    return found if _device_limit is None else found[:_device_limit]


def resolve_backend(choice: str) -> str:
    """Map ``auto|cpu|gpu`` to the backend to use; ``gpu`` without a GPU is an error."""
    from jaxrna.io.errors import JaxrnaError

    if choice == "auto":
        backend = "gpu" if has_gpu() else "cpu"
    elif choice == "gpu" and not has_gpu():
        raise JaxrnaError("--backend gpu was asked for but JAX sees no GPU "
                          "(install jax[cuda13] or use --backend cpu)")
    else:
        backend = choice
    _announce(backend, f"--backend {choice}")
    return backend


def gpu_possible() -> bool:
    """Whether JAX could find a GPU here, judged without importing JAX: ``JAX_PLATFORMS`` does
    not exclude it and a CUDA or ROCm plugin (``jax_plugins.xla_cuda*``) is installed."""
    import importlib.util
    import pkgutil

    platforms = os.environ.get("JAX_PLATFORMS", "").lower()
    if platforms and not any(p in platforms for p in ("cuda", "gpu", "rocm")):
        return False
    try:
        spec = importlib.util.find_spec("jax_plugins")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return False
    names = [m.name for m in pkgutil.iter_modules(spec.submodule_search_locations)]
    return any("cuda" in n or "rocm" in n for n in names)


def _cpu_only() -> None:
    """Keep JAX to its CPU backend if it has not started any (no CUDA start-up)."""
    import jax

    try:
        from jax._src import xla_bridge

        if xla_bridge.backends_are_initialized():
            return
    except (ImportError, AttributeError):  # pragma: no cover - another JAX layout
        return
    jax.config.update("jax_platforms", "cpu")


#: JAX's GPU allocator for ``fold``'s jobs of a few large batches: device memory taken from the
#: driver for each buffer and given back after it. JAX's caching allocator spent ~1 s on the
#: first batch of every warm run on an H100; with this one `fold --model turner` 1,000 x 50-500
#: nt took 2.05-2.42 s warm instead of 3.71-3.77 s, `fold` 1,000 x 50-500 nt 1.39-1.58 instead
#: of 1.75-1.99 s. The other subcommands keep the caching allocator (grown on demand,
#: :func:`gpu_memory_on_demand`): `targets` took 10.12 s warm with this one against 8.57 s,
#: `align` 3.87 against 3.62 s, `interact` 2.79-3.24 against 2.84-3.04 s.
LARGE_BATCH_ALLOCATOR = "platform"


def choose_backend(requested: str, work_estimate: float | None = None,
                   gpu_from: float = 0.0) -> str:
    """``cpu`` or ``gpu`` for ``--backend auto|cpu|gpu``, decided before JAX starts a backend.

    ``auto`` takes the CPU when no GPU can be present (:func:`gpu_possible`) or when the job's
    ``work_estimate`` is below ``gpu_from`` (the caller's units: work a CPU finishes before a
    GPU would have started), else the GPU if JAX sees one. Whenever the answer is ``cpu`` and
    JAX has not started its backends yet, JAX is kept to the CPU, so CUDA is never
    initialised (JAX starts every backend at the first ``jax.devices()``); when it may be
    ``gpu``, the GPU allocator is set to grow on demand rather than reserve most of the card
    up front (:func:`gpu_memory_on_demand`; a subcommand may have chosen an allocator before).
    ``gpu`` without a GPU is an error, as in :func:`resolve_backend`.
    """
    if requested not in ("auto", "cpu", "gpu"):
        raise ValueError(f"backend must be auto, cpu or gpu, not {requested!r}")
    small = work_estimate is not None and work_estimate < gpu_from
    if requested == "cpu" or (requested == "auto" and (small or not gpu_possible())):
        _cpu_only()
        _announce("cpu", f"--backend {requested}" + (
            ", a small job" if requested == "auto" and small and gpu_possible() else ""))
        return "cpu"
    gpu_memory_on_demand()
    return resolve_backend(requested)


def gpu_memory_on_demand(allocator: str | None = None, _env: dict | None = None) -> None:
    """Let JAX's GPU allocator grow on demand instead of reserving 75% of the card when it
    starts (on an H200 that reservation costs ~2.5 s of every run), or use ``allocator``,
    unless the user chose (``XLA_PYTHON_CLIENT_PREALLOCATE`` / ``_MEM_FRACTION`` /
    ``_ALLOCATOR``). Read when JAX creates its GPU client, so only effective before that.

    >>> env = {}
    >>> gpu_memory_on_demand("platform", env), env
    (None, {'XLA_PYTHON_CLIENT_PREALLOCATE': 'false', 'XLA_PYTHON_CLIENT_ALLOCATOR': 'platform'})
    >>> env = {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"}
    >>> gpu_memory_on_demand("platform", env), env
    (None, {'XLA_PYTHON_CLIENT_MEM_FRACTION': '.5'})
    """
    env = os.environ if _env is None else _env
    if any(k in env for k in ("XLA_PYTHON_CLIENT_PREALLOCATE",
                              "XLA_PYTHON_CLIENT_MEM_FRACTION",
                              "XLA_PYTHON_CLIENT_ALLOCATOR")):
        return
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if allocator:
        env["XLA_PYTHON_CLIENT_ALLOCATOR"] = allocator


def device_memory_bytes(device=None) -> int:
    """Bytes JAX may allocate on ``device`` (a JAX device; a backend name such as ``"gpu"``
    for that backend's first device; default JAX's first device), 0 when it does not say
    (CPUs and some plugins report no memory statistics). The one place the package asks.

    >>> class Device:
    ...     def memory_stats(self):
    ...         return {"bytes_limit": 1 << 30}
    >>> device_memory_bytes(Device())
    1073741824
    """
    try:
        if device is None or isinstance(device, str):
            import jax

            device = jax.devices(device)[0] if device else jax.devices()[0]
        stats = device.memory_stats() or {}
    except Exception:  # noqa: BLE001 - no such backend, or a device that cannot say
        return 0
    limit = int(stats.get("bytes_limit", 0) or 0)
    if not limit and getattr(device, "platform", "") == "gpu":
        # JAX's platform allocator keeps no statistics: the share of the card that JAX's
        # caching allocator would have, so that plans (and programs) do not depend on it
        share = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION") or 0.75)
        limit = int(cuda_total_memory(device.id) * share)
    return limit


def cuda_total_memory(ordinal: int) -> int:
    """Bytes of memory of CUDA device ``ordinal`` as the driver reports it (its
    ``cuDeviceTotalMem``), 0 where there is no CUDA driver or it cannot say
    (``tests/test_gpu_allocator.py`` drives it with a stand-in driver)."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    dev, size = ctypes.c_int(), ctypes.c_size_t()
    try:
        if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(dev), int(ordinal)):
            return 0
        if cuda.cuDeviceTotalMem_v2(ctypes.byref(size), dev):
            return 0
    except AttributeError:      # a driver without these entry points
        return 0
    return int(size.value)


def memory_bytes() -> int:
    """Physical memory of this machine in bytes (0 if unknown)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def human_bytes(n: int) -> str:
    """``1536`` -> ``'1.5 KiB'``.

    >>> human_bytes(3 * 2**30)
    '3.0 GiB'
    """
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
