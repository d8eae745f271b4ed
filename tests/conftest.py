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
