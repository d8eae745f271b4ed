"""The GPU benchmark scripts of ``bench/`` kept working on this CPU (Pallas in interpret mode,
tiny sizes): a script that no longer matches the library fails here, not in a GPU call
(``bench_fold_gpu.py`` once called its compiled fill without the traced ``min_loop``).
"""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(script, *args, timeout=600):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, os.path.join(ROOT, "bench", script), *args],
                          capture_output=True, text=True, env=env, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_bench_fold_gpu_fills_and_checks_in_interpret_mode():
    out = _run("bench_fold_gpu.py", "--auto", "--sizes", "256", "--reps", "1", "--interpret",
               "--check", "70")
    assert "ERROR" not in out and "error" not in out, out
    assert "checks: 16/16 equal to the CPU path" in out, out
    row = [line.split() for line in out.splitlines() if line.split()[:1] == ["256"]]
    assert row and float(row[0][2]) > 0, out          # a fill time was measured


@pytest.mark.slow
def test_bench_refill_kernel_strips_and_a_variant_agree(tmp_path):
    variant = tmp_path / "same_kernel.py"       # the committed kernel as a "variant" file
    variant.write_text(open(os.path.join(ROOT, "jaxrna", "kernels", "miranda_fill.py")).read()
                       .replace('"kernels.miranda_fill.refill_pallas"',
                                '"test.bench.refill_variant"'))
    out = _run("bench_refill_kernel.py", "--heights", "16", "--strips", "16,8", "--lanes", "256",
               "--reps", "1", "--variant", str(variant))
    lines = [line for line in out.splitlines() if line.startswith("refill")]
    assert len(lines) == 4, out
    assert all(line.endswith("same as the first: True") for line in lines[1:]), out


@pytest.mark.slow
def test_bench_energy_programs_with_options_and_phases():
    out = _run("bench_energy_programs.py", "--lengths", "64", "--rows", "2", "--reps", "1",
               "--phases", "--trace-options", "none;xla_llvm_disable_expensive_passes=true",
               "--pretouch", "0.01", "--envs", "none;JAXRNA_TEST_MARK=1")
    results = [line.split("] ", 1)[-1] for line in out.splitlines() if "64 nt x 2 rows" in line]
    assert len(results) == 4, out
    assert out.count("[env JAXRNA_TEST_MARK=1] ") == 2, out
    assert out.count("  first calls: inputs to the device") == 4, out
    assert out.count("0.01 GB made in") == 4, out
    hashes = {line.rsplit("hash ", 1)[1] for line in results}
    assert len(hashes) == 1 and all("all traced True" in line for line in results), out
    assert sum("xla_llvm_disable_expensive_passes" in line for line in results) == 2
    assert "backend_compile" in out or "Compile" in out, out     # the profiler's events


@pytest.mark.slow
def test_bench_one_row_measures_each_program():
    out = _run("bench_one_row.py", "--partition", "128", "--mfe", "128", "--fold", "256")
    lines = out.splitlines()
    assert len(lines) == 4 and not any("failed" in line for line in lines), out
    assert lines[0].startswith("partition 128 nt x 1: trace ") and ", runs " in lines[0], out
    assert lines[1].startswith("mfe fill 128 nt x 1: ") and lines[2].startswith("mfe traceback")
    assert lines[3].startswith("fold (Nussinov, GPU path, interpret) 256 nt x 1: "), out
    assert all(int(line.split(" lines")[0].rsplit(" ", 1)[1]) > 100 for line in lines), out


@pytest.mark.slow
def test_bench_expected_grad_reports_times_and_memory(tmp_path):
    import json

    out_file = tmp_path / "grad.json"
    out = _run("bench_expected_grad.py", "--lengths", "20", "--dangles", "0,2", "--repeats", "1",
               "--chunk", "7", "--json", str(out_file))
    rows = json.loads(out_file.read_text())
    assert [(r["n"], r["length"], r["dangles"]) for r in rows] == [(20, 32, 0), (20, 32, 2)], out
    for r in rows:
        assert r["compile_s"] > 0 and r["mean_s"] > 0 and r["temp_bytes"] > 0, r
        assert r["grad_norm"] > 0 and abs(r["value"]) > 0, r
    assert "temp" in out and "dangles 2" in out, out
