import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_DATA = os.path.join(ROOT, "test-data")
sys.path.insert(0, ROOT)
# Keep test runs from writing a compilation cache into the user's home.
os.environ.setdefault("JAXRNA_CACHE_DIR", "off")
# `jaxrna interact` on a CPU runs small pairs on its host engine (C, no JAX): the interact tests
# written for the device engine (JAX) keep testing it; tests/test_interact_host_engine.py runs
# both engines (engine="host" / "device" or this variable set per test) and compares them.
os.environ.setdefault("JAXRNA_INTERACT_ENGINE", "device")
# Likewise `jaxrna fold` (Nussinov) runs every job on its compiled host fill on a CPU-only
# machine: the fold tests keep the split they were written for (jobs below 4e8 split operations
# on the host engine, larger ones on JAX); tests/test_fold_host_engine.py covers the choice.
os.environ.setdefault("JAXRNA_FOLD_HOST_WORK", "4e8")


def _has_gpu() -> bool:
    import jax

    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:  # no GPU backend
        return False


#: Docstring examples that compile large programs: marked ``slow`` (8-35 s each on 2 loaded
#: cores, 2026-11-25; the other examples take under 8 s).
SLOW_DOCTESTS = frozenset({"jaxrna.energy.api", "jaxrna.interact.partition", "jaxrna.energy.fill",
                           "jaxrna.core", "jaxrna.fold.gpu", "jaxrna.fold.partition_blocked",
                           "jaxrna.fold.outside", "jaxrna.targets",
                           # 12-17 s each on 2 loaded cores, 2026-11-26
                           "jaxrna.energy.api.fold_batch", "jaxrna.energy.traceback",
                           "jaxrna.energy.partition_jax", "jaxrna.energy.partition_expected_d2",
                           "jaxrna.energy.design", "jaxrna.energy.partition.batch_log_partition",
                           "jaxrna.energy.partition.log_partition"})


#: Most pytest-xdist workers ``-n auto`` (pyproject's addopts) starts: each holds a JAX runtime
#: and compiles its own programs (up to a few GB), and the whole-process tests start more.
MAX_TEST_WORKERS = 4


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker per core this process may use, at most
    :data:`MAX_TEST_WORKERS` (pytest-xdist)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_TEST_WORKERS, cores or 1))


def pytest_collection_modifyitems(items):
    for item in items:
        if type(item).__name__ == "DoctestItem" and item.name in SLOW_DOCTESTS:
            item.add_marker(pytest.mark.slow)


def pytest_runtest_setup(item):
    """``@pytest.mark.gpu`` tests skip without a GPU. JAX starts its backends here, for such a
    test only (other tests may still set ``XLA_FLAGS`` before JAX starts)."""
    if item.get_closest_marker("gpu") is not None and not _has_gpu():
        pytest.skip("needs a GPU")


@pytest.fixture
def test_data():
    return TEST_DATA


def _memory_maps() -> int:
    try:
        with open("/proc/self/maps") as fh:
            return sum(1 for _ in fh)
    except OSError:  # not Linux
        return 0


def _max_memory_maps() -> int:
    try:
        with open("/proc/sys/vm/max_map_count") as fh:
            return int(fh.read())
    except (OSError, ValueError):
        return 0


@pytest.fixture(autouse=True, scope="module")
def _no_state_across_modules():
    """After each test module: drop the programs jaxrna kept in this process and turn off a
    compilation cache that an in-process CLI run turned on (its directory goes with the test's
    temporary directory), so that no module runs on another's leftovers.

    And when the process holds many memory mappings, drop every compiled program (JAX's caches
    too). Each XLA:CPU executable keeps ~18 mappings, and a whole run compiles thousands of
    programs: past the kernel's ``vm.max_map_count`` (65,530 by default) XLA's compiler dies with
    a segmentation fault (it did, twice, three quarters into a full run)."""
    yield
    programs = sys.modules.get("jaxrna.programs")
    if programs is not None:
        programs.forget()
        programs.use_disk(None)
    jax = sys.modules.get("jax")
    if jax is None:
        return
    if jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", None)
        try:
            from jax._src import compilation_cache
            compilation_cache.reset_cache()
        except Exception:  # a JAX without it: the cache stays as it is
            pass
    limit = _max_memory_maps()
    if limit and _memory_maps() > limit // 3:
        import gc

        jax.clear_caches()
        gc.collect()
