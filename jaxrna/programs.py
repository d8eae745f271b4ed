"""Compiled programs kept on disk as serialized executables, so a warm run neither traces,
lowers nor compiles.

JAX's persistent compilation cache is keyed by the lowered program, so even a cache hit pays
for tracing and lowering the Python code (a quarter of a second for the tiled fold of a
100-nt sequence, seconds for the BPMax fill). Here a program is keyed by what determines it --
a name, the argument shapes and dtypes, the static arguments, the device, the JAX and jaxlib
versions, ``XLA_FLAGS``, the x64 switch and a hash of jaxrna's sources -- and kept as
:func:`jax.experimental.serialize_executable.serialize` bytes under ``<cache>/executables``.
On disk the key names the device's kind, not the device (:func:`store_key`): one executable
serves every GPU of a host, compiled once and loaded onto each of the others, so a job on
N GPUs compiles its programs once, not N times (a device that asks for a program another
device's compilation is preparing waits for it and loads it).
A file that cannot be read or loaded is ignored and rewritten; the store keeps the
:data:`jaxrna.executable_files.MAX_FILES` most recently used. A file someone else could have
written (its owner, its mode: :func:`jaxrna.cachetrust.entry_trust`) is never unpickled (one
warning per process). The files themselves: :mod:`jaxrna.executable_files`.
Every subcommand gets its device programs here. The CLI writes new executables in background
threads (:mod:`jaxrna.store_writes`); prefetched programs lower in turns (:mod:`jaxrna.turns`).

:func:`use_disk` turns the disk store on (the CLI does, with the compilation cache directory
of :mod:`jaxrna.runtime`); otherwise programs are only kept for this process. The store is
used for GPU programs, and for CPU programs that ask for it (``cpu_store``: the energy model's,
whose tracing is most of a small CPU run): XLA:CPU executables reloaded in a fresh process
failed now and then here ("Function ... not found" when run), so a reloaded CPU program's first
call is watched and the program compiled afresh if it fails; the other CPU programs rely on
JAX's own compilation cache (which still traces and lowers, but compiles nothing on a warm run).

>>> import jax, jax.numpy as jnp
>>> f = jax.jit(lambda x, k: x * k, static_argnames="k")
>>> run = program("doc.scale", f, (jnp.ones(3),), {"k": 2})
>>> run(jnp.ones(3)).tolist()
[2.0, 2.0, 2.0]
>>> program("doc.scale", f, (jnp.zeros(3),), {"k": 2}) is run      # same shapes: same program
True
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any, Callable, Sequence

from jaxrna import store_writes
from jaxrna.cachetrust import EXECUTABLES
from jaxrna.executable_files import checked_first_call
from jaxrna.executable_files import load as _load
from jaxrna.executable_files import no_jax_cache_entry
from jaxrna.executable_files import save as _save
from jaxrna.program_keys import (leaf_key, program_key, shared, source_hash,  # noqa: F401
                                 store_key)
from jaxrna.turns import Turns
from jaxrna.xla_options import compiler_options

log = logging.getLogger("jaxrna")

_lock = threading.Lock()
_memo: dict[str, Callable] = {}
_fast_maps: list[dict] = []     # each stored_jit function's programs by call signature
_disk: str | None = None


def use_disk(path: str | None) -> None:
    """Keep serialized executables under ``path/executables`` (None: this process only)."""
    global _disk
    _disk = None if path is None else os.path.join(path, EXECUTABLES)


def holds_executables(path: str) -> bool:
    """Whether the store of compile cache ``path`` (as :func:`use_disk` lays it out) holds any
    executable, judged without importing JAX."""
    try:
        with os.scandir(os.path.join(path, EXECUTABLES)) as entries:
            return any(e.name.endswith(".bin") for e in entries)
    except OSError:
        return False


def disk_dir() -> str | None:
    return _disk


def use_store_dir(directory: str | None) -> None:
    """Keep serialized executables in ``directory`` itself (a compile worker is given the
    job's :func:`disk_dir`: :mod:`jaxrna.compile_workers`)."""
    global _disk
    _disk = directory


def program(name: str, jitted, args: tuple, static: dict | None = None,
            device=None, kwargs: dict | None = None, cpu_store: bool = False) -> Callable:
    """The compiled ``jitted(*args, **kwargs, **static)`` for these argument shapes, as a
    callable taking ``*args, **kwargs`` (arrays of the same shapes and dtypes) only.

    Looked up in this process, then on disk (:func:`use_disk`), else traced, compiled and
    stored; threads asking for a program another thread is preparing wait for it (one
    compilation per program). ``device`` defaults to JAX's default device. Time spent is booked to the
    ``compile`` stage of :mod:`jaxrna.stages`; loads are counted as ``executables_loaded``.
    ``cpu_store``: keep this program on disk for CPUs too (programs checked to reload there;
    a loaded CPU program that fails on its first call is compiled afresh instead).
    """
    from jaxrna import stages

    static = dict(static or {})
    if device is None:
        device = default_device()
    kwargs = dict(kwargs or {})
    both = (args, kwargs) if kwargs else args
    key = program_key(name, both, static, device)
    skey = store_key(name, both, static, device, cpu_store)
    with _lock:
        hit = _memo.get(key)
        inflight = key in _inflight
        owner = _claim(skey, key)
        mine = None
        if hit is None and not inflight and not _in_pool():
            # under way from now: another thread asking for it waits for this one
            import concurrent.futures

            mine = _inflight[key] = concurrent.futures.Future()
    if hit is not None:
        return hit
    if inflight and not _in_pool():
        with stages.stage("compile"):
            got = _wait(key)
            if not callable(got):
                # a compile worker's report: a thread may be loading what it stored now
                # (load_in_background), waited for rather than loaded twice
                got = _wait(key)
        if callable(got):
            return got
        # a compile worker's report (jaxrna.compile_workers): the executable is in the store
        # now, loaded below -- or the worker failed, and the program is compiled here
        with _lock:
            hit = _memo.get(key)
        if hit is not None:
            return hit
    if owner != key:
        # the same program for another device of this kind is being compiled (or was): wait
        # for it to be stored, then load it for this device instead of compiling it again
        with _lock:
            busy = owner in _inflight
        if busy:
            _pass_turn()        # lowers nothing while it waits: later programs go first
            with stages.stage("compile"):
                try:
                    _wait(owner)
                except Exception:  # noqa: BLE001 - it failed there: compiled here below
                    pass
    try:
        compiled = _load_or_compile(name, jitted, args, kwargs, static, device, skey,
                                    cpu_store)
    except BaseException as exc:
        if mine is not None:
            with _lock:
                if _inflight.get(key) is mine:
                    del _inflight[key]
            mine.set_exception(exc)
        raise
    with _lock:
        _memo[key] = compiled
        if mine is not None and _inflight.get(key) is mine:
            del _inflight[key]
    if mine is not None:
        mine.set_result(compiled)
    return compiled


def _load_or_compile(name: str, jitted, args: tuple, kwargs: dict, static: dict, device,
                     key: str, cpu_store: bool) -> Callable:
    """:func:`program`'s work: the program from the store (``key``: its :func:`store_key`),
    else traced, compiled, stored."""
    import jax

    from jaxrna import stages

    with stages.stage("compile"):
        path = store_path(key, device, cpu_store)
        if path:
            store_writes.finish(path)       # written in the background (store_writes)
            if os.path.exists(path):
                _pass_turn()                # loaded, not lowered (a failed load: lowered at once)
        compiled = _load(path, device) if path else None
        loaded = compiled is not None

        def compile_and_store():
            with jax.default_device(device):
                options = compiler_options(name, device.platform) or None
                with _lowering_turn():
                    lowered = jitted.lower(*args, **kwargs, **static)
                with no_jax_cache_entry() if path else contextlib.nullcontext():
                    fresh = lowered.compile(compiler_options=options)
            stages.count("executables_compiled")
            if path:
                store_writes.store(path, fresh, _save)     # in the background: store_writes
            return fresh

        if loaded:
            stages.count("executables_loaded")
            if device.platform == "cpu":
                compiled = checked_first_call(name, compiled, compile_and_store)
        else:
            compiled = compile_and_store()
        if log.isEnabledFor(logging.DEBUG):
            shapes = [leaf_key(x) for x in jax.tree_util.tree_leaves((args, kwargs))]
            log.debug("program %s %s %s: %s", name, shapes, static,
                      "loaded" if loaded else "compiled")
    return compiled


_lowering = Turns()
_ticket = threading.local()     # a prefetch job's turn (_queued)


def _lowering_turn():
    """In :func:`prefetch`'s threads, tracing and lowering (Python, under the GIL) one program
    at a time, in the order asked for (targets asks for its longest first), while their
    compilations run side by side: interleaved, every program of a plan finished lowering at
    about the same late moment. Elsewhere (a program needed now) nothing waits."""
    ticket = getattr(_ticket, "value", None)
    return contextlib.nullcontext() if ticket is None else _lowering.turn(ticket)


def _pass_turn() -> None:
    """A :func:`prefetch` job that will lower nothing (loaded, or waiting for another device's
    program) gives its turn up at once."""
    ticket = getattr(_ticket, "value", None)
    if ticket is not None:
        _lowering.done(ticket)


def stored_jit(name: str, static_argnames: Sequence[str] = (), cpu_store: bool = False
               ) -> Callable:
    """A decorator like ``jax.jit(fun, static_argnames=...)`` whose compiled programs come from
    :func:`program` (so a warm GPU run loads them instead of tracing them). Calls with the same
    argument shapes, static values and device reuse the program; a call from inside another
    trace (tracer arguments) goes through plain ``jax.jit``. The function's parameters that
    are not static must come before the static ones (keyword-only ones are passed by name).
    ``cpu_store``: see :func:`program`. ``f.bind(*args, **kwargs)`` compiles (or loads) the
    program of a call now and returns the call as a function of no arguments.

    >>> import jax.numpy as jnp
    >>> @stored_jit("doc.shift", static_argnames=("k",))
    ... def shift(x, k):
    ...     return x + k
    >>> shift(jnp.arange(3), k=2).tolist(), shift(jnp.arange(3), 5).tolist()
    ([2, 3, 4], [5, 6, 7])
    >>> run = shift.bind(jnp.arange(3), k=1)     # compiled now, run later
    >>> run().tolist()
    [1, 2, 3]
    """
    import functools
    import inspect

    def wrap(fun: Callable) -> Callable:
        sig = inspect.signature(fun)
        params = list(sig.parameters)
        static_set = frozenset(static_argnames)
        dynamic_names = [p for p in params if p not in static_set]
        keyword_only = {p for p, v in sig.parameters.items() if v.kind is v.KEYWORD_ONLY}
        positional = [p for p in dynamic_names if p not in keyword_only]
        by_keyword = [p for p in dynamic_names if p in keyword_only]
        if any(params.index(d) > params.index(s) for d in dynamic_names for s in static_set):
            raise TypeError(f"{name}: static parameters must come after the others")
        holder: list = []
        fast: dict = {}
        _fast_maps.append(fast)

        def jitted():
            if not holder:
                import jax

                holder.append(jax.jit(fun, static_argnames=tuple(static_argnames)))
            return holder[0]

        def prepare(args, kwargs):
            """``(compiled, dynamic, named)`` for a call, or None inside another trace."""
            import jax

            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = bound.arguments
            dynamic = tuple(arguments[p] for p in positional)
            named = {p: arguments[p] for p in by_keyword}
            static = {p: arguments[p] for p in params if p in static_set}
            leaves = jax.tree_util.tree_leaves((dynamic, named))
            if any(isinstance(x, jax.core.Tracer) for x in leaves):
                return None
            device = _device_of(leaves)
            key = (tuple(leaf_key(x) for x in leaves),
                   jax.tree_util.tree_structure((dynamic, named)), tuple(static.items()), device)
            compiled = fast.get(key)
            if compiled is None:
                compiled = fast[key] = program(name, jitted(), dynamic, static, device, named,
                                               cpu_store=cpu_store)
            return compiled, dynamic, named

        @functools.wraps(fun)
        def call(*args, **kwargs):
            ready = prepare(args, kwargs)
            if ready is None:
                return jitted()(*args, **kwargs)
            compiled, dynamic, named = ready
            return compiled(*dynamic, **named)

        def bind(*args, **kwargs):
            """The call ``fun(*args, **kwargs)`` as a function of no arguments, its program
            compiled (or loaded) now: a lowering or compile error is raised here, before
            anything runs (:func:`jaxrna.kernels.fallback.compile_or_fallback` wraps this)."""
            ready = prepare(args, kwargs)
            if ready is None:
                return functools.partial(jitted(), *args, **kwargs)
            compiled, dynamic, named = ready
            return functools.partial(compiled, *dynamic, **named)

        call.jitted = jitted          # the plain jax.jit function (tests, lowering)
        call.bind = bind
        return call

    return wrap


def _device_of(leaves: list):
    """The device of the first committed array among ``leaves`` (a program runs where its
    inputs are), else JAX's default device."""
    for x in leaves:
        if getattr(x, "_committed", False):
            devices = x.devices()
            if len(devices) == 1:
                return next(iter(devices))
    return default_device()


def default_device():
    """JAX's default device: ``jax.default_device``'s (a device or a platform name), else the
    first device."""
    import jax

    device = jax.config.jax_default_device or jax.devices()[0]
    return jax.devices(device)[0] if isinstance(device, str) else device


_inflight: dict[str, object] = {}
_pool = None
#: Programs are prepared in the background (:func:`prefetch`) on machines with this many
#: cores or more (XLA compiles one program mostly on one core; a job needs a few).
PREFETCH_FROM_CORES = 4
#: Most threads :func:`prefetch` prepares programs in (half the cores, up to this): every
#: program of a plan compiles at once (their lowering takes turns, :func:`_lowering_turn`).
PREFETCH_THREADS = 8


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def prefetch(name: str, jitted, args: tuple, static: dict | None = None, device=None, *,
             cpu_store: bool = False, always: bool = False) -> None:
    """Start preparing :func:`program` for these arguments in a background thread (a no-op
    on machines with few cores unless ``always``, or when it is ready or under way), so the
    several programs of a cold run compile at once. ``args`` may be
    :class:`jax.ShapeDtypeStruct`s. (:func:`jaxrna.compile_workers.prefetch` also uses worker
    processes.)"""
    global _pool
    if not always and cores() < PREFETCH_FROM_CORES:
        return
    import concurrent.futures

    import jax

    static = dict(static or {})
    if device is None:
        device = default_device()
    key = program_key(name, args, static, device)
    skey = store_key(name, args, static, device, cpu_store)
    with _lock:
        if key in _memo or key in _inflight:
            return
        _claim(skey, key)
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max(1, min(PREFETCH_THREADS, cores() // 2)), thread_name_prefix="jaxrna-compile")
        # the caller's x64 switch (thread-local under jax.enable_x64) holds in the thread:
        # it is part of the program's key and of its tracing
        future = _pool.submit(_queued, _lowering.ticket(), bool(jax.config.jax_enable_x64),
                              name, jitted, args, static, device, cpu_store=cpu_store)
        _inflight[key] = future
        _local_futures[:] = [f for f in _local_futures if not f.done()] + [future]


_local_futures: list = []       # prefetches under way in this process's threads


def load_in_background(name: str, jitted: Callable[[], Any], args: tuple, static: dict | None,
                       device, *, cpu_store: bool = False, x64: bool = False) -> None:
    """Load program ``name`` (stored by a compile worker: :mod:`jaxrna.compile_workers`) in a
    background thread of this process, so that the run finds it in this process rather than
    loading it on its own thread when it asks (0.1-0.2 s a program on a GPU host). ``jitted``
    returns the ``jax.jit`` function (called in that thread); ``x64`` as the caller's. Nothing
    when the program is here already."""
    global _pool
    import concurrent.futures

    static = dict(static or {})
    key = program_key(name, args, static, device)

    def load():
        return _with_x64(x64, program, name, jitted(), args, static, device, cpu_store=cpu_store)

    with _lock:
        if key in _memo:
            return
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max(1, min(PREFETCH_THREADS, cores() // 2)), thread_name_prefix="jaxrna-compile")
        # under way from now: a thread asking for it waits for this load, not loads it again
        _inflight[key] = _pool.submit(load)


def _queued(ticket: int, x64: bool, *args, **kwargs):
    """A :func:`prefetch` job: :func:`program` lowering its program in turn ``ticket``."""
    _ticket.value = ticket
    try:
        return _with_x64(x64, program, *args, **kwargs)
    finally:
        _ticket.value = None
        _lowering.done(ticket)


def _with_x64(x64: bool, fn: Callable, *args, **kwargs):
    """``fn(*args, **kwargs)`` with JAX's x64 switch set to ``x64`` in this thread."""
    import jax

    if bool(jax.config.jax_enable_x64) == x64:
        return fn(*args, **kwargs)
    if hasattr(jax, "enable_x64"):
        context = jax.enable_x64(x64)
    else:  # pragma: no cover - older JAX
        from jax.experimental import disable_x64, enable_x64

        context = enable_x64() if x64 else disable_x64()
    with context:
        return fn(*args, **kwargs)


def local_busy() -> bool:
    """Whether a :func:`prefetch` thread of this process is still preparing a program."""
    with _lock:
        return any(not f.done() for f in _local_futures)


def store_path(key: str, device, cpu_store: bool = False) -> str | None:
    """Where the store keeps the executable of :func:`store_key` ``key`` for ``device`` (None:
    not kept on disk)."""
    if _disk is None or (device.platform == "cpu" and not cpu_store):
        return None
    return os.path.join(_disk, f"{key}.bin")


def stored(name: str, args: tuple, static: dict, device, cpu_store: bool = False,
           wait: bool = True) -> bool:
    """Whether program ``name`` for ``args`` (arrays or their shapes) and ``static`` on
    ``device`` has an executable in the store (False without one on disk). A file this process
    is writing is waited for; with ``wait`` false it counts as not there yet."""
    path = store_path(store_key(name, args, static, device, cpu_store), device, cpu_store)
    if path is None:
        return False
    if wait:
        store_writes.finish(path)
    elif path in store_writes.pending():
        return False
    return os.path.exists(path)


def available(name: str, args: tuple, static: dict, device, cpu_store: bool = False,
              wait: bool = True) -> bool:
    """Whether program ``name`` would compile nothing: it is in this process (:func:`ready`)
    or its executable is in the store (:func:`stored`; ``wait`` as there)."""
    return ready(name, args, static, device) or stored(name, args, static, device, cpu_store,
                                                      wait)


def expect(key: str, future, skey: str | None = None) -> bool:
    """Let :func:`program` wait for ``future`` (elsewhere, program ``key``, stored as ``skey``,
    is being stored) rather than compile it; False (and nothing registered) when the program
    is here or already under way."""
    with _lock:
        if key in _memo or key in _inflight:
            return False
        _inflight[key] = future
        if skey is not None:
            _claim(skey, key)
        return True


_owners: dict[str, str] = {}    # store key -> key of the first device's program of it


def _claim(skey: str, key: str) -> str:
    """The key of the program that prepares stored executable ``skey`` for this process:
    the first asked for (``key`` if none was; called under ``_lock``). Other devices' programs
    of it wait for that one and load what it stored. Without a store, every device's program
    is its own."""
    if _disk is None:
        return key
    return _owners.setdefault(skey, key)


def claimed_elsewhere(skey: str, key: str) -> bool:
    """Whether stored executable ``skey`` is being (or was) prepared for another device than
    program ``key``'s (:func:`_claim`): ``key`` then loads it rather than compile it."""
    with _lock:
        owner = _owners.get(skey) if _disk is not None else None
    return owner is not None and owner != key


def _wait(key: str):
    with _lock:
        future = _inflight.get(key)
    if future is None:
        return None
    return future.result()


def ready(name: str, args: tuple, static: dict | None, device) -> bool:
    """Whether :func:`program` would return at once (the program is in this process)."""
    key = program_key(name, args, dict(static or {}), device)
    with _lock:
        return key in _memo


def in_flight(name: str, args: tuple, static: dict | None, device):
    """The future of program ``name`` being prepared in the background for these arguments
    (:func:`prefetch`, a compile worker's :func:`expect`, or another thread's :func:`program`
    call), while it is under way; else None."""
    key = program_key(name, args, dict(static or {}), device)
    with _lock:
        future = _inflight.get(key)
    return None if future is None or future.done() else future


def readiness(describe: Callable[[Any], tuple | None]) -> tuple[Callable, Callable]:
    """``ready(item)`` and ``pending(item)`` for :func:`jaxrna.pipeline.ready_first`, of the
    program ``describe(item)`` names -- ``(name, argument shapes, static arguments, device,
    cpu_store)``, or None for an item with no program to wait for: whether it is in this
    process or stored (a file being written counts as not yet), and its future while it is
    under way in the background (:func:`~jaxrna.pipeline.ready_first` keeps a ready one ready).

    >>> import jax
    >>> ready, pending = readiness(lambda item: ("doc.none", (), {}, jax.devices()[0], False))
    >>> ready("x"), pending("x")
    (False, [])
    """
    def ready(item) -> bool:
        spec = describe(item)
        return spec is None or available(*spec, wait=False)

    def pending(item) -> list:
        spec = describe(item)
        future = None if spec is None else in_flight(*spec[:4])
        return [] if future is None else [future]

    return ready, pending


def _in_pool() -> bool:
    return threading.current_thread().name.startswith("jaxrna-compile")


def forget() -> None:
    """Drop the programs kept in this process, those of every :func:`stored_jit` function
    included (tests)."""
    with _lock:
        _memo.clear()
        _inflight.clear()
        _owners.clear()
        for fast in _fast_maps:
            fast.clear()


def memo_size() -> int:
    """Programs kept in this process."""
    with _lock:
        return len(_memo)
