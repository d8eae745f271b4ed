"""A job's programs traced and compiled side by side in worker processes.

Tracing and lowering a program is Python work that holds the GIL, so the background threads of
:func:`jaxrna.programs.prefetch` trace one program after another: the six energy-model
programs of a cold GPU job (404 sequences of 1-2,600 nt) spent most of their 35 s of
compilation tracing in series. Here a prefetched program whose executable can be kept in
jaxrna's store (:mod:`jaxrna.programs`) is traced, compiled and stored by a spawned worker
process; the job's process then loads the stored executable (a fraction of a second) instead
of tracing it. Each worker traces with its own interpreter, so the programs of a plan are
traced and compiled at once, on as many cores.

A program is named for a worker by ``source``, ``"module:function"``: the function returns the
``jax.jit`` function the program is lowered from (module-level, so a fresh interpreter finds
it; ``"module:name.jitted"`` for a :func:`~jaxrna.programs.stored_jit` function ``name``); arguments are :class:`jax.ShapeDtypeStruct` trees and static values, which pickle. The
worker checks that it computes the job's key for the program (same device, JAX, flags and
sources) before compiling, and reports the counters of :mod:`jaxrna.stages` it added (programs
compiled, cache hits, executables stored), which the job adds to its own, so the compile
counts of a run are the same whether its programs were compiled here or in workers.

:func:`workers` says how many processes a host gets: none below
:data:`~jaxrna.programs.PREFETCH_FROM_CORES` cores, else half the cores up to six;
``JAXRNA_COMPILE_PROCESSES=N`` sets it (0: never). A worker that fails (a kernel that does not
build, an interpreter that cannot start) stores nothing; the job then compiles the program
itself, with its own fall-backs, and the output is the same.

>>> workers() >= 0
True
>>> run({"source": "jaxrna.compile_workers:_example", "name": "doc.x", "args": (), "static": {},
...      "key": "not the key", "platform": "cpu", "device_id": 0, "platforms": "cpu",
...      "x64": False, "disk": None, "jax_cache": None, "cpu_store": False})["error"]
'the worker computes another key for doc.x'
"""

from __future__ import annotations

import atexit
import concurrent.futures
import importlib
import logging
import multiprocessing
import os
import threading
import time

log = logging.getLogger("jaxrna")

_lock = threading.Lock()
_pool: concurrent.futures.ProcessPoolExecutor | None = None
#: Most worker processes a host gets (each holds an interpreter with JAX and a device client,
#: and autotunes its program's kernels on the device, beside the job's own work there).
MAX_WORKERS = 6


def workers() -> int:
    """Worker processes for compiling: ``JAXRNA_COMPILE_PROCESSES`` if set, else none on hosts
    with fewer than :data:`jaxrna.programs.PREFETCH_FROM_CORES` cores, else half the cores
    (at most :data:`MAX_WORKERS`)."""
    from jaxrna.programs import PREFETCH_FROM_CORES, cores

    env = os.environ.get("JAXRNA_COMPILE_PROCESSES", "").strip()
    if env:
        try:
            return max(0, min(MAX_WORKERS, int(env)))
        except ValueError:
            log.warning("warning: JAXRNA_COMPILE_PROCESSES=%r is not a number; compiling "
                        "in this process", env)
            return 0
    n = cores()
    return 0 if n < PREFETCH_FROM_CORES else max(1, min(MAX_WORKERS, n // 2))


def prefetch(name: str, source: str, args: tuple, static: dict | None = None, device=None, *,
             cpu_store: bool = False, processes: bool = True) -> None:
    """Start preparing program ``name`` (:func:`jaxrna.programs.program` of the ``jax.jit``
    function ``source`` returns, for these argument shapes) in the background: in a worker
    process when the store keeps it (``cpu_store``: on CPUs too), it is not stored yet and a
    program is already being traced in a thread here; else in a thread here
    (:func:`jaxrna.programs.prefetch`). ``processes=False``: in a thread here in any case, for
    programs that trace in a fraction of a second, whose wait a worker's start (an interpreter,
    JAX and a device client: 2-3 s on a GPU host) only lengthens."""
    from jaxrna import programs

    static = dict(static or {})
    if device is None:
        device = programs.default_device()
    key = programs.program_key(name, args, static, device)
    skey = programs.store_key(name, args, static, device, cpu_store)
    path = programs.store_path(skey, device, cpu_store)
    early = _early.get((name, device.platform, device.id))
    if early is not None and path is not None:
        # a worker started at the run's start prepares it (submit_early): wait for that one,
        # then load what it stored (another key there: compiled here, the same output)
        programs.expect(key, early, skey)
        return
    # another device's program of the same executable is under way: a thread here waits for
    # it and loads it for this device (programs.program), nothing is compiled again
    remote = (processes and path is not None and workers() > 0 and not os.path.exists(path)
              and not programs.claimed_elsewhere(skey, key))
    if remote and programs.local_busy():
        if programs.ready(name, args, static, device):
            return
        spec = spec_for(name, source, args, static, {}, device, key, programs.disk_dir(),
                        cpu_store)
        future = concurrent.futures.Future()
        if programs.expect(key, future, skey):
            _start(spec, future)
            # once stored, loaded here in the background (not on the run's thread when asked)
            x64 = _x64()
            future.add_done_callback(lambda f: None if not _stored_ok(f, path) else
                                     programs.load_in_background(
                                         name, lambda: resolve(source), args, static, device,
                                         cpu_store=cpu_store, x64=x64))
        return
    programs.prefetch(name, resolve(source), args, static, device, cpu_store=cpu_store,
                      always=remote)


def _x64() -> bool:
    import jax

    return bool(jax.config.jax_enable_x64)


def _stored_ok(future: concurrent.futures.Future, path: str) -> bool:
    """Whether a worker's report says its program was stored, and the file is there."""
    try:
        report = future.result()
    except Exception:  # noqa: BLE001 - the run compiles it when it asks
        return False
    return isinstance(report, dict) and not report.get("error") and os.path.exists(path)


def resolve_call(source: str):
    """The function ``"module:function"`` (or ``"module:name.attribute"``) names, not called."""
    module, _, path = source.partition(":")
    target = importlib.import_module(module)
    for attr in path.split("."):
        target = getattr(target, attr)
    return target


def resolve(source: str):
    """The ``jax.jit`` function of ``"module:function"`` (``function`` called), or of
    ``"module:name.jitted"`` for a :func:`jaxrna.programs.stored_jit` function ``name``."""
    return resolve_call(source)()


def spec_for(name: str, source: str, args: tuple, static: dict, kwargs: dict, device, key: str,
             disk: str | None, cpu_store: bool) -> dict:
    """What a worker needs to compile ``name`` as the job would: the program, its argument
    shapes and static values, the device (platform and id), the job's JAX configuration
    (platforms, x64, compilation cache) and its store directory."""
    import jax

    return {"name": name, "source": source, "args": args, "static": dict(static),
            "kwargs": dict(kwargs), "key": key, "platform": device.platform,
            "device_id": device.id, "platforms": jax.config.jax_platforms or "",
            "x64": bool(jax.config.jax_enable_x64),
            "jax_cache": jax.config.jax_compilation_cache_dir or None,
            "disk": disk, "cpu_store": cpu_store}


def submit(spec: dict) -> concurrent.futures.Future:
    """Compile ``spec`` (:func:`spec_for`) in a worker process; the future's result is
    :func:`run`'s report, whose counters are added to this process's when it is done."""
    future = concurrent.futures.Future()
    _start(spec, future)
    return future


def _start(spec: dict, future: concurrent.futures.Future) -> None:
    """Run ``spec`` in the pool, its report (counters merged here) passed on to ``future``."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ProcessPoolExecutor(
                max(1, workers()), mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_setup)
        inner = _pool.submit(run, spec)

    def done(f: concurrent.futures.Future) -> None:
        _merge(f)
        try:
            future.set_result(f.result())
        except Exception as exc:  # noqa: BLE001 - a worker that died: the job compiles it
            future.set_result({"key": spec["key"], "error": f"worker: {exc}", "counts": {}})

    inner.add_done_callback(done)


def _worker_setup() -> None:
    """In a worker, before JAX starts: device memory taken from and given back to the driver
    for each allocation (``XLA_PYTHON_CLIENT_ALLOCATOR=platform``: a worker's compiler
    autotunes kernels on the job's GPU, and JAX's caching allocator would keep what that took
    for the life of the worker, out of the job's reach), and the worker killed when the job's
    process ends, however it ends (Linux; a worker must not outlive the job, holding its
    output pipes open)."""
    os.environ["XLA_PYTHON_CLIENT_ALLOCATOR"] = "platform"
    os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    os.environ.pop("XLA_PYTHON_CLIENT_MEM_FRACTION", None)
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)      # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - not Linux: the job's exit stops its workers
        pass
    if os.getppid() == 1:                            # the job ended before this line
        os._exit(0)


def _merge(future: concurrent.futures.Future) -> None:
    from jaxrna import stages

    try:
        report = future.result()
    except Exception as exc:  # noqa: BLE001 - a worker that died: the job compiles it
        log.debug("compile worker failed: %s", exc)
        return
    for name, k in report.get("counts", {}).items():
        if k:
            stages.count(name, k)
    if report.get("error"):
        log.debug("compile worker: %s", report["error"])


_early: dict[tuple, concurrent.futures.Future] = {}


def submit_early(name: str, derive: str, store: str, platform: str = "gpu",
                 device_id: int = 0, cpu_store: bool = False
                 ) -> concurrent.futures.Future | None:
    """Start a worker on program ``name`` now, before this process has imported JAX or knows
    the program's arguments: ``derive`` (``"module:function"``) returns ``(source, args,
    static)`` (as :func:`prefetch` takes them) for a device in the worker, which computes the
    program's key itself, compiles it and keeps it in ``store`` (the directory of
    :func:`jaxrna.programs.use_store_dir`, already judged trusted). When the run later asks for the program on that device (:func:`prefetch`), it
    waits for this worker and loads what it stored; a worker that computed another key or
    failed leaves the run to compile it (the same output). None where the host gets no
    workers. ``platform``/``device_id``: the device (JAX's default backend otherwise as the
    run's environment has it); ``cpu_store`` as for :func:`prefetch` (tests on CPUs)."""
    if workers() == 0:
        return None
    spec = {"name": name, "derive": derive, "disk": store, "platform": platform,
            "device_id": device_id, "platforms": os.environ.get("JAX_PLATFORMS", ""),
            "x64": os.environ.get("JAX_ENABLE_X64", "").lower() in ("1", "true", "yes"),
            "jax_cache": None, "cpu_store": cpu_store, "key": None, "args": (), "static": {}}
    future = concurrent.futures.Future()
    _early[(name, platform, device_id)] = future
    _start(spec, future)
    return future


def _example():
    """A program source for the doctest above."""
    import jax

    return jax.jit(lambda: 0)


def run(spec: dict) -> dict:
    """In a worker: set up JAX as the job has it, then trace, compile and store the program of
    ``spec`` (:func:`jaxrna.programs.program`). Returns ``{"key", "seconds", "counts"}``, with
    ``"error"`` when nothing was stored (another key, a failure)."""
    start = time.perf_counter()
    import jax

    from jaxrna import programs, stages

    if spec["platforms"] and not _backends_started():
        jax.config.update("jax_platforms", spec["platforms"])
    jax.config.update("jax_enable_x64", spec["x64"])
    if spec["jax_cache"] and jax.config.jax_compilation_cache_dir != spec["jax_cache"]:
        jax.config.update("jax_compilation_cache_dir", spec["jax_cache"])
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    stages.listen_to_jax()
    before = stages.counts()
    name = spec["name"]
    report: dict = {"key": spec["key"], "counts": {}}
    try:
        device = jax.devices(spec["platform"])[spec["device_id"]]
        if spec.get("derive"):          # submit_early: the program worked out here
            source, args, static = resolve_call(spec["derive"])(device)
            spec = dict(spec, source=source, args=args, static=static)
        jitted = resolve(spec["source"])
        kwargs = spec.get("kwargs") or {}
        key = programs.program_key(name, (spec["args"], kwargs) if kwargs else spec["args"],
                                   spec["static"], device)
        if spec["key"] is None:
            report["key"] = key
        elif key != spec["key"]:
            report["error"] = f"the worker computes another key for {name}"
            return report
        programs.use_store_dir(spec["disk"])
        programs.program(name, jitted, spec["args"], spec["static"], device, kwargs,
                         cpu_store=spec["cpu_store"])
    except Exception as exc:  # noqa: BLE001 - reported; the job compiles the program itself
        report["error"] = f"{name}: {type(exc).__name__}: {exc}"
    finally:
        after = stages.counts()
        report["counts"] = {k: after.get(k, 0) - before.get(k, 0)
                            for k in ("programs", "cache_hits", "cache_misses",
                                      "executables_compiled")}
        report["seconds"] = round(time.perf_counter() - start, 3)
    return report


def _backends_started() -> bool:
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except (ImportError, AttributeError):  # pragma: no cover - another JAX layout
        return False


@atexit.register
def shutdown() -> None:
    """Stop the workers (at exit): a program still compiling is not waited for."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
        _early.clear()
    if pool is None:
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        try:
            process.kill()
        except Exception:  # noqa: BLE001 - already gone
            pass
    pool.shutdown(wait=False, cancel_futures=True)
