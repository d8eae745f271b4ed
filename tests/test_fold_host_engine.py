"""`jaxrna fold`'s compiled host fill (:mod:`jaxrna.fold.host`, C): its tables against the
reference and the NumPy fill, the CLI's bytes on the C, NumPy and JAX engines, and which engine
a run picks (:func:`jaxrna.fold.plan.choose_engine`)."""

import os
import random
import subprocess
import sys

import numpy as np
import pytest

from jaxrna.alphabet import encode
from jaxrna.cli import main
from jaxrna.fold import host, plan
from jaxrna.fold.reference import reference_table
from jaxrna.fold.traceback import traceback
from jaxrna.weights import parse_weights

from conftest import ROOT, TEST_DATA


def test_the_library_builds_here():
    assert host.library() is not None        # CI and this VM have a C compiler


def test_a_small_job_does_not_build_the_library(monkeypatch, tmp_path):
    """Below HOST_WORK_LIMIT with no library built yet, fold_host takes NumPy (no ~0.3 s
    build for one short sequence); above it, the library is built."""
    from jaxrna import native

    monkeypatch.setenv("JAXRNA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(native, "_LIBS", {})
    w = parse_weights("unit").matrix()
    assert host.fold_host(["GGGAAAUCC"], w, 3) == [(3, ((0, 8), (1, 7), (2, 6)))]
    assert "nussinov" not in native._LIBS and host.library(build=False) is None
    # one small chunk of a large job (its whole work given) builds it; a small job's does not
    big = host.HOST_WORK_LIMIT
    assert host.fold_host(["GGGAAAUCC"], w, 3, job_work=big - 1) == [(3, ((0, 8), (1, 7), (2, 6)))]
    assert "nussinov" not in native._LIBS
    assert host.fold_host(["GGGAAAUCC"], w, 3, job_work=big) == [(3, ((0, 8), (1, 7), (2, 6)))]
    assert native._LIBS.get("nussinov") is not None
    monkeypatch.setattr(native, "_LIBS", {})
    monkeypatch.setattr(host, "HOST_WORK_LIMIT", 0)
    assert host.fold_host(["GGGAAAUCC"], w, 3) == [(3, ((0, 8), (1, 7), (2, 6)))]
    assert native._LIBS.get("nussinov") is not None


def test_compiled_fill_equals_reference_and_numpy():
    rng = random.Random(11)
    lib = host.library()
    for trial in range(150):
        n = rng.randint(0, 45)
        s = "".join(rng.choice("ACGUACGUN") for _ in range(n))
        w = parse_weights(rng.choice(["unit", "integer", "bpmax", "GC=2,AU=0.5,GU=1.5"]))
        ml = rng.randint(0, 4)
        rows, table = host.fill_c(encode(s), w.matrix(), ml, lib, dense=True)
        assert np.array_equal(host.fill_c(encode(s), w.matrix(), ml, lib), rows)
        assert np.array_equal(host.fill_host(encode(s)[None], w.matrix(), ml)[0], rows)
        if n > 1:
            ref = np.triu(np.array(reference_table(s, w, ml)), 1)
            assert np.array_equal(table, ref), (s, ml)
            assert np.array_equal(host.dense_from_rows(rows, n), ref)
            assert int(rows[n, 0]) == ref[0, n - 1]


def test_fold_host_structures_are_the_reference_tracebacks():
    rng = random.Random(12)
    w = parse_weights("integer")
    seqs = ["".join(rng.choice("ACGU") for _ in range(rng.randint(0, 300))) for _ in range(40)]
    got = host._fold_c(seqs, w.matrix(), 3, True, host.library())
    assert host.fold_host(seqs, w.matrix(), 3) == got       # NumPy or C: this job is small
    numpy_way = []
    for s in seqs:
        if len(s) <= 1:
            numpy_way.append((0, ()))
            continue
        ref = np.triu(np.array(reference_table(s, w, 3)), 1) if len(s) <= 60 else \
            host.dense_from_rows(host.fill_host(encode(s)[None], w.matrix(), 3)[0], len(s))
        numpy_way.append((int(ref[0, len(s) - 1]), tuple(traceback(ref, encode(s), w.matrix(), 3))))
    assert got == numpy_way
    assert host._fold_c(seqs, w.matrix(), 3, False, host.library()) == \
        [(sc, None) for sc, _ in got]


def _fold(capsys, monkeypatch, env, *argv):
    for k in ("JAXRNA_FOLD_HOST_WORK", "JAXRNA_FOLD_HOST_FILL"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    status = main(["fold", "--model", "nussinov", "-q", *argv])
    out, _ = capsys.readouterr()
    assert status == 0
    return out


@pytest.mark.parametrize("args", [["-f", "dbn"], ["-f", "json", "--weights", "integer"],
                                  ["-f", "ct", "--min-loop", "1"], ["--score-only", "-f", "tsv"]])
def test_cli_bytes_equal_on_every_engine(capsys, monkeypatch, args):
    fa = os.path.join(TEST_DATA, "fold_example.fa")
    monkeypatch.setattr(host, "HOST_WORK_LIMIT", 0)       # the compiled fill, however small
    c = _fold(capsys, monkeypatch, {}, fa, *args)                                 # C, auto
    monkeypatch.undo()
    numpy_way = _fold(capsys, monkeypatch, {"JAXRNA_FOLD_HOST_FILL": "numpy",
                                            "JAXRNA_FOLD_HOST_WORK": "1e15"}, fa, *args)
    jax_way = _fold(capsys, monkeypatch, {"JAXRNA_FOLD_HOST_WORK": "0"}, fa, *args)
    assert c == numpy_way == jax_way and c


def test_engine_choice(monkeypatch):
    monkeypatch.delenv("JAXRNA_FOLD_HOST_WORK", raising=False)
    import jaxrna.runtime as runtime

    monkeypatch.setattr(runtime, "gpu_possible", lambda: False)
    assert plan.host_limit("auto") == float("inf") == plan.host_limit("cpu")
    monkeypatch.setattr(runtime, "gpu_possible", lambda: True)
    small = plan.host_limit("auto")
    assert host.HOST_WORK_LIMIT <= small < float("inf")
    assert plan.host_limit("cpu") == float("inf")
    from jaxrna import native

    monkeypatch.setenv("CC", "/nonexistent/cc")                  # no C compiler
    monkeypatch.setattr(native, "_LIBS", {})
    monkeypatch.setenv("JAXRNA_CACHE_DIR", "off")
    assert host.library() is None
    assert plan.host_limit("auto") == host.HOST_WORK_LIMIT == plan.host_limit("cpu")
    monkeypatch.setenv("JAXRNA_FOLD_HOST_WORK", "0")
    assert plan.host_limit("cpu") == 0


def test_a_cpu_only_fold_never_imports_jax(tmp_path):
    fa = os.path.join(TEST_DATA, "fold_example.fa")
    code = ("import sys\nfrom jaxrna.cli import main\n"
            "status = main(['fold', '--model', 'nussinov', '-q', sys.argv[1], '-o', sys.argv[2],"
            " '--backend', 'cpu'])\nassert 'jax' not in sys.modules, 'JAX was imported'\n"
            "raise SystemExit(status)\n")
    env = {k: v for k, v in os.environ.items() if k != "JAXRNA_FOLD_HOST_WORK"}
    env.update(PYTHONPATH=ROOT, JAXRNA_CACHE_DIR=str(tmp_path / "cache"))
    out = tmp_path / "out.dbn"
    proc = subprocess.run([sys.executable, "-c", code, fa, str(out)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().count(">") >= 1
