"""docs/api.md is generated from the docstrings; it must be current."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_api_reference_is_current():
    proc = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_api.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
