"""Serialized executables on disk, the store of :mod:`jaxrna.programs`: written atomically
(never writable by group or others), loaded onto a device -- any device of the kind the
executable was compiled for (:func:`deserialize_onto`) -- only when no one else could have
written the file (:func:`jaxrna.cachetrust.entry_trust`), and pruned to the :data:`MAX_FILES`
most recently used.

>>> import os, tempfile, jax, jax.numpy as jnp
>>> path = os.path.join(tempfile.mkdtemp(), "doc.bin")
>>> save(path, jax.jit(lambda x: x + 1).lower(jnp.ones(2)).compile())
>>> load(path, jax.devices()[0])(jnp.zeros(2)).tolist()
[1.0, 1.0]
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import threading
from typing import Callable

log = logging.getLogger("jaxrna")

#: The layout of a stored file: ``(FORMAT, payload, in_tree, out_tree)``, pickled.
FORMAT = 1


def deserialize_onto(payload: bytes, in_tree, out_tree, device):
    """A serialized executable loaded to run on ``device``, whichever device of the same kind
    it was compiled for: the pickled device becomes ``device`` and the executable is given a
    device assignment of ``device`` (as JAX's own compilation cache reloads a GPU executable
    on another device). Uses JAX internals; :func:`load` falls back to JAX's public
    ``deserialize_and_load`` (the compiling device only) where they are missing."""
    import io

    import jax
    import numpy as np
    from jax._src import compiler
    from jax.experimental import serialize_executable as se

    options = compiler.get_compile_options(num_replicas=1, num_partitions=1,
                                           device_assignment=np.array([[device.id]]))

    class Onto(se._JaxPjrtUnpickler):
        def persistent_load(self, pid):
            if pid[0] == "device":
                return device
            if pid[0] == "exec":
                return self.backend.deserialize_executable(pid[1], self.execution_devices,
                                                           options)
            return super().persistent_load(pid)

    unloaded, args_info_flat, no_kwargs = Onto(io.BytesIO(payload), device.client,
                                               [device]).load()
    return jax.stages.Compiled(unloaded.load(), [], in_tree.unflatten(args_info_flat),
                               out_tree, no_kwargs=no_kwargs)


def load(path: str, device) -> Callable | None:
    from jax.experimental.serialize_executable import deserialize_and_load

    try:
        # a pickle runs code when loaded: only a file no one else can have written is read
        # (cachetrust.entry_trust: a regular file, not a symbolic link, owned by this user or
        # root, writable by its owner alone), checked on the opened file itself
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                     | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            from jaxrna import cachetrust

            untrusted = cachetrust.entry_trust(path, os.fstat(fh.fileno()))
            if untrusted is not None:
                _warn_untrusted(path, untrusted)
                return None
            fmt, payload, in_tree, out_tree = pickle.load(fh)
        if fmt != FORMAT:
            return None
        try:
            loaded = deserialize_onto(payload, in_tree, out_tree, device)
        except Exception as exc:  # noqa: BLE001 - JAX's internals moved: the public loader
            log.debug("loading %s onto %s: %s; trying JAX's loader", path, device, exc)
            loaded = deserialize_and_load(payload, in_tree, out_tree, backend=device.platform,
                                          execution_devices=[device])
        try:
            os.utime(path)                     # recently used: kept by _prune
        except OSError:
            pass
        return loaded
    except FileNotFoundError:
        return None
    except OSError as exc:
        import errno

        if exc.errno == errno.ELOOP:            # a symbolic link (O_NOFOLLOW)
            _warn_untrusted(path, f"{path} is a symbolic link")
        else:
            log.debug("ignoring cached executable %s: %s", path, exc)
        return None
    except Exception as exc:  # a damaged or incompatible file: compile afresh
        log.debug("ignoring cached executable %s: %s", path, exc)
        return None


_warned_untrusted = False


def _warn_untrusted(path: str, reason: str) -> None:
    """One warning per process that an executable of the store was not loaded."""
    global _warned_untrusted
    if _warned_untrusted:
        log.debug("not loading cached executable %s: %s", path, reason)
        return
    _warned_untrusted = True
    log.warning("warning: not loading the cached executable %s (%s); compiling it in this "
                "process instead (cache entries must be owned by you or root and writable by "
                "no one else)", path, reason)


def no_jax_cache_entry():
    """A context in which this thread's compilations leave no entry in JAX's own persistent
    cache (its threshold of compile seconds made infinite; JAX's config states are
    thread-local): :func:`jaxrna.programs.program` compiles what the store keeps in it. The
    store is what later runs load, and JAX's entry would be a second serialization of the
    executable, under the interpreter's lock, on the cold run's path (0.65 s for `interact`'s
    GPU program, H200, call S25b). A JAX without that state: nothing changes."""
    try:
        from jax._src import config

        return config.persistent_cache_min_compile_time_secs(float("inf"))
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - another JAX layout
        return contextlib.nullcontext()


#: The store keeps at most this many executables (the least recently used go first).
MAX_FILES = 512


def save(path: str, compiled) -> None:
    from jax.experimental.serialize_executable import serialize

    try:
        from jaxrna.io import cleanup
    except ImportError:  # pragma: no cover
        cleanup = None
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        payload, in_tree, out_tree = serialize(compiled)
        from jaxrna.cachetrust import makedirs_private

        makedirs_private(os.path.dirname(path))     # mode 0700, as the cache's
        if cleanup is not None:
            cleanup.register(tmp)              # a killed run leaves no temporary file
        # never writable by group or others, whatever the umask (cachetrust.entry_trust)
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), "wb") as fh:
            os.fchmod(fh.fileno(), os.fstat(fh.fileno()).st_mode & 0o755)
            pickle.dump((FORMAT, payload, in_tree, out_tree), fh, protocol=4)
        os.replace(tmp, path)
        prune(os.path.dirname(path))
    except Exception as exc:  # read-only cache, a backend that cannot serialize, ...
        log.debug("could not store executable %s: %s", path, exc)
        try:
            os.unlink(tmp)
        except OSError:
            pass
    finally:
        if cleanup is not None:
            cleanup.unregister(tmp)


def prune(directory: str) -> None:
    """Remove the least recently used executables beyond :data:`MAX_FILES`."""
    try:
        entries = [e for e in os.scandir(directory) if e.name.endswith(".bin")]
        if len(entries) <= MAX_FILES:
            return
        entries.sort(key=lambda e: e.stat().st_mtime)
        for e in entries[:len(entries) - MAX_FILES]:
            os.unlink(e.path)
    except OSError:
        pass


def checked_first_call(name: str, loaded: Callable, recompile: Callable) -> Callable:
    """``loaded`` (an executable reloaded on a CPU), whose first call is watched: if it fails
    (XLA:CPU has failed to run some reloaded programs, "Function ... not found"), the program
    is compiled afresh and the call made again."""
    import jax

    state: dict = {"run": loaded, "checked": False}
    lock = threading.Lock()

    def call(*args, **kwargs):
        if state["checked"]:
            return state["run"](*args, **kwargs)
        with lock:
            try:
                out = jax.block_until_ready(state["run"](*args, **kwargs))
            except Exception as exc:  # noqa: BLE001 - any failure of a reloaded program
                log.debug("reloaded program %s failed (%s); compiling it afresh", name, exc)
                state["run"] = recompile()
                out = state["run"](*args, **kwargs)
            state["checked"] = True
            return out

    return call
