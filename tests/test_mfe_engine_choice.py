"""Which engine folds ``fold --model turner`` (MFE) under ``--backend auto`` on a GPU host
(:func:`jaxrna.cli.fold_energy.mfe_engine`): ViennaRNA's on the host's cores for a job it
finishes within ``VIENNA_MFE_UP_TO_S`` (its estimate,
:func:`jaxrna.energy.vienna.mfe_estimate_seconds`), JAX not imported; else the GPU. The records
read to decide are all passed on, in order; the output is the same either way
(tests/test_energy_vienna_engine.py compares the engines, and a run below)."""

import pytest

from jaxrna.cli import fold_energy
from jaxrna.energy import vienna
from jaxrna.io.fasta import Record

pytestmark = pytest.mark.skipif(not vienna.available(), reason="needs ViennaRNA")


def _records(count, length):
    return [Record(f"r{k}", ("GGGAAACCCAUCG" * (length // 13 + 1))[:length]) for k in range(count)]


@pytest.fixture
def gpu_host(monkeypatch):
    """A host with a GPU plugin and 16 cores, as the choice sees it; asking JAX whether it
    sees a GPU fails the test unless a test allows it."""
    from jaxrna import runtime

    monkeypatch.delenv(vienna.ENGINE_ENV, raising=False)
    monkeypatch.setattr(runtime, "gpu_possible", lambda: True)
    monkeypatch.setattr(vienna, "cpu_count", lambda: 16)

    def asked():
        raise AssertionError("JAX was asked for its devices")
    monkeypatch.setattr(runtime, "has_gpu", asked)
    return monkeypatch


def test_a_small_job_is_viennas_without_asking_jax(gpu_host):
    records = _records(50, 200)                     # ~0.1 s on 16 cores
    engine, passed, why = fold_energy.mfe_engine("auto", iter(records))
    assert engine == "vienna" and "small job" in why
    assert [r.id for r in passed] == [r.id for r in records]    # every record passed on
    # the bound, by the estimate: 1,000 x 275 nt is ~5 s on 16 cores
    assert vienna.mfe_estimate_seconds([200] * 50, 16) < fold_energy.VIENNA_MFE_UP_TO_S
    assert vienna.mfe_estimate_seconds([275] * 1000, 16) > fold_energy.VIENNA_MFE_UP_TO_S


def test_larger_jobs_go_to_the_gpu_and_keep_every_record(gpu_host):
    from jaxrna import runtime

    gpu_host.setattr(runtime, "has_gpu", lambda: True)
    for records in (_records(1000, 275), _records(3, 3000), _records(200, 100) + _records(1, 4000)):
        engine, passed, why = fold_energy.mfe_engine("auto", iter(records))
        assert (engine, why) == ("jax", "")
        assert [r.id for r in passed] == [r.id for r in records]
    # a GPU plugin but no GPU: ViennaRNA, whatever the job
    gpu_host.setattr(runtime, "has_gpu", lambda: False)
    assert fold_energy.mfe_engine("auto", iter(_records(3, 3000)))[0] == "vienna"


def test_asked_or_forced_engines_are_kept(gpu_host):
    records = _records(5, 50)
    assert fold_energy.mfe_engine("cpu", iter(records))[0] == "jax"
    gpu_host.setenv(vienna.ENGINE_ENV, "jax")
    assert fold_energy.mfe_engine("auto", iter(records))[0] == "jax"
    gpu_host.setenv(vienna.ENGINE_ENV, "vienna")
    assert fold_energy.mfe_engine("auto", iter(records))[0] == "vienna"


def test_a_small_job_on_a_gpu_host_runs_without_jax_and_writes_the_same(tmp_path, monkeypatch):
    """A whole ``fold`` run as on a GPU host (in a child process, so that JAX's absence can
    be seen): ViennaRNA's engine, JAX never imported, the output byte for byte the JAX
    engine's (``--backend cpu``)."""
    import os
    import subprocess
    import sys

    from jaxrna.cli import main

    records = _records(6, 70) + [Record("long", "GGGGAAACCCCAUCGAAAGAUU" * 5)]
    fasta = tmp_path / "in.fa"
    fasta.write_text("".join(f">{r.id}\n{r.sequence}\n" for r in records))
    jax_out = tmp_path / "jax.txt"
    assert main(["fold", str(fasta), "--backend", "cpu", "-q", "-o", str(jax_out)]) == 0
    out = tmp_path / "vienna.txt"
    code = ("import sys, jaxrna.runtime as r; r.gpu_possible = lambda: True\n"
            "from jaxrna.cli import main\n"
            f"code = main(['fold', {str(fasta)!r}, '-v', '-q', '-o', {str(out)!r}])\n"
            "assert 'jax' not in sys.modules, 'JAX was imported'\n"
            "sys.exit(code)\n")
    env = dict(os.environ)
    env.pop(vienna.ENGINE_ENV, None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "a small job" in proc.stderr and "ViennaRNA" in proc.stderr
    assert out.read_bytes() == jax_out.read_bytes()
