import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_DATA = os.path.join(ROOT, "test-data")
sys.path.insert(0, ROOT)
# Keep test runs from writing a compilation cache into the user's home.
os.environ.setdefault("JAXRNA_CACHE_DIR", "off")


@pytest.fixture
def test_data():
    return TEST_DATA


@pytest.fixture(autouse=True, scope="module")
def _no_state_across_modules():
    """After each test module: drop the programs jaxrna kept in this process and turn off a
    compilation cache that an in-process CLI run turned on (its directory goes with the test's
    temporary directory), so that no module runs on another's leftovers. A full run had XLA
    crash while compiling in a process holding every earlier module's programs."""
    yield
    programs = sys.modules.get("jaxrna.programs")
    if programs is not None:
        programs.forget()
        programs.use_disk(None)
    jax = sys.modules.get("jax")
    if jax is not None and jax.config.jax_compilation_cache_dir:
        jax.config.update("jax_compilation_cache_dir", None)
        try:
            from jax._src import compilation_cache
            compilation_cache.reset_cache()
        except Exception:  # a JAX without it: the cache stays as it is
            pass
