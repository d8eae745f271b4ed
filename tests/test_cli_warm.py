"""A warm run compiles nothing: a second ``jaxrna`` process sharing the compile cache loads every
program (stage counts from ``JAXRNA_PROFILE``, :mod:`jaxrna.stages`), with the same output."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TEST_DATA


def run_profiled(args, cache, tmp_path, name):
    profile = tmp_path / f"{name}.json"
    out = tmp_path / f"{name}.out"
    env = dict(os.environ, JAXRNA_CACHE_DIR=str(cache), JAXRNA_PROFILE=str(profile),
               PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "jaxrna"] + args + ["-o", str(out)], env=env,
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    return json.loads(profile.read_text()), out.read_bytes()


@pytest.mark.parametrize("args", [
    ["targets", os.path.join(TEST_DATA, "miranda", "bantam_stRNA.fasta"),
     os.path.join(TEST_DATA, "miranda", "hid_UTR.fasta"), "--no-energy", "--backend", "cpu"],
], ids=["targets"])
@pytest.mark.slow
def test_second_run_compiles_nothing(args, tmp_path):
    cache = tmp_path / "cache"
    cold, out_cold = run_profiled(args, cache, tmp_path, "cold")
    warm, out_warm = run_profiled(args, cache, tmp_path, "warm")
    assert cold["counts"]["compiled"] > 0          # the first run did compile (and store)
    # every program loaded: from JAX's cache (``programs``) or jaxrna's store of executables
    assert warm["counts"].get("programs", 0) + warm["counts"].get("executables_loaded", 0) > 0
    assert warm["counts"]["compiled"] == 0, warm["counts"]
    assert out_warm == out_cold
    for key in ("stages", "in_process_s"):
        assert key in warm
