"""Start-up of ``jaxrna fold`` as whole processes: a warm second run (same JAXRNA_CACHE_DIR)
compiles nothing, and a tiny job runs without importing JAX at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

SEQS = ">a\nGGGAAAUCCCGCGCAAAGCGCAUAUGGCAUGCAUGCGGGAAAUCC\n" \
       ">d\nGGGAAAUCCCGCGCAAAGCGCAUAUGGCAUGCAUGCGGGAAAUCCAUGCG\n" \
       ">b first\n" + "ACGUUGCAGGCAUCGAUCGAUGCUAGCUAGCUAGCAUCGAUCGAUGCAUGCA" * 2 + "\n" \
       ">c\nGCGCAAAGCGCAUAUGGCAUGCAUGCGGGAAAUCCAUGCGAUCGAUCGAUCGA\n"


def run(args, cache, profile, extra_env=None, stdin=None):
    env = dict(os.environ, PYTHONPATH=ROOT, JAXRNA_CACHE_DIR=str(cache),
               JAXRNA_PROFILE=str(profile), **(extra_env or {}))
    proc = subprocess.run([sys.executable, "-m", "jaxrna", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600, input=stdin)
    assert proc.returncode == 0, proc.stderr
    with open(profile) as fh:
        return proc.stdout, json.load(fh)


@pytest.mark.slow
def test_warm_run_compiles_nothing(tmp_path):
    fa = tmp_path / "x.fa"
    fa.write_text(SEQS)
    cache = tmp_path / "cache"
    jax_engine = {"JAXRNA_FOLD_HOST_WORK": "0"}          # not the NumPy engine: JAX's CPU
    args = ["fold", "--model", "nussinov", str(fa), "-f", "ct", "--backend", "cpu"]
    cold, prof_cold = run(args, cache, tmp_path / "p1.json", jax_engine)
    warm, prof_warm = run(args, cache, tmp_path / "p2.json", jax_engine)
    assert prof_cold["counts"]["compiled"] >= 1            # the test can fail: work was done
    # one program per length class (every record is in the class of 256 nt)
    assert prof_cold["counts"].get("executables_compiled", 0) == 1
    assert prof_warm["counts"]["compiled"] == 0, prof_warm
    # on the CPU the programs come from JAX's compilation cache (jaxrna.programs keeps its own
    # store of executables for GPU programs only)
    assert prof_warm["counts"].get("cache_hits", 0) == prof_warm["counts"].get("programs", 0) >= 1
    assert warm == cold
    host, prof_host = run(args, tmp_path / "cache2", tmp_path / "p3.json")   # NumPy engine
    assert host == cold
    assert "compile" not in prof_host["stages"]
    # the ensemble path too
    args = ["fold", "--model", "nussinov", "--sequence", "GGGAAAUCCCGCGCAAAGCGCAUAUGGC", "--partition", "-f", "json"]
    cold, prof_cold = run(args, cache, tmp_path / "p4.json")
    warm, prof_warm = run(args, cache, tmp_path / "p5.json")
    assert prof_cold["counts"]["compiled"] >= 1
    assert prof_warm["counts"]["compiled"] == 0
    assert warm == cold and json.loads(warm)[0]["length"] == 28


def test_tiny_job_does_not_import_jax(tmp_path):
    code = ("import sys; from jaxrna.cli import main; "
            "status = main(['fold', '--model', 'nussinov', '--sequence', 'GGGAAAUCCC', '-q']); "
            "print('jax' in sys.modules, status)")
    env = dict(os.environ, PYTHONPATH=ROOT, JAXRNA_CACHE_DIR=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [">seq", "GGGAAAUCCC", "(((...))). (3)", "False 0"]
