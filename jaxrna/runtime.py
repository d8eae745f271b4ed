"""Process-wide JAX set-up for CLI runs: the persistent compilation cache and backend choice.

The cache lives in ``$JAXRNA_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/jaxrna/jax`` (default
``~/.cache/jaxrna/jax``); ``JAXRNA_CACHE_DIR=off`` disables it.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("jaxrna")


def cache_dir() -> str | None:
    """The persistent compilation cache directory, or None when disabled."""
    env = os.environ.get("JAXRNA_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "none", "0") else env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxrna", "jax")


def enable_compilation_cache() -> str | None:
    """Turn on JAX's persistent compilation cache (every compiled program is kept)."""
    path = cache_dir()
    if path is None:
        return None
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        log.warning("compilation cache disabled: cannot create %s (%s)", path, exc)
        return None
    import jax

    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return path


def has_gpu() -> bool:
    """True when JAX sees a GPU."""
    import jax

    try:
        return len(jax.devices("gpu")) > 0
    except RuntimeError:
        return False


def resolve_backend(choice: str) -> str:
    """Map ``auto|cpu|gpu`` to the backend to use; ``gpu`` without a GPU is an error."""
    from jaxrna.io.errors import JaxrnaError

    if choice == "auto":
        return "gpu" if has_gpu() else "cpu"
    if choice == "gpu" and not has_gpu():
        raise JaxrnaError("--backend gpu was asked for but JAX sees no GPU "
                          "(install jax[cuda13] or use --backend cpu)")
    return choice


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
