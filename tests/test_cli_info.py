"""``jaxrna info`` (versions, devices, the backend ``--backend auto`` picks, the compile cache),
``-v/--verbose`` on the compute subcommands, and the GPU install extras."""

import importlib.metadata
import json
import os
import re
import sys

import jax
import pytest

from conftest import ROOT
from jaxrna.cli import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = None


def info_json(capsys):
    capsys.readouterr()
    assert main(["info", "-f", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_info_json_reports_what_jax_sees(capsys, monkeypatch):
    monkeypatch.setenv("JAXRNA_CACHE_DIR", "/some/where/cache")
    info = info_json(capsys)
    from jaxrna._version import __version__

    assert info["jaxrna"] == __version__
    assert info["jax"] == jax.__version__ == importlib.metadata.version("jax")
    assert info["jaxlib"] == importlib.metadata.version("jaxlib")
    names = [d["name"] for d in info["devices"]]
    assert names[: len(jax.devices())] == [str(d) for d in jax.devices()]
    assert all(d["platform"] in ("cpu", "gpu", "cuda", "rocm", "tpu") for d in info["devices"])
    from jaxrna.runtime import resolve_backend

    assert info["auto_backend"] == resolve_backend("auto")
    assert info["cache_dir"] == "/some/where/cache"
    if info["auto_backend"] == "cpu":
        assert info["gpu_error"]          # why there is no GPU, as JAX says it
    monkeypatch.setenv("JAXRNA_CACHE_DIR", "off")
    assert info_json(capsys)["cache_dir"] is None


def test_info_text(capsys, monkeypatch):
    monkeypatch.setenv("JAXRNA_CACHE_DIR", "/x/y")
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    from jaxrna._version import __version__

    assert lines[0] == f"jaxrna {__version__}"
    assert f"jax {jax.__version__}" in lines
    assert f"jaxlib {importlib.metadata.version('jaxlib')}" in lines
    assert f"devices: {len(info_json(capsys)['devices'])}" in lines
    for d in jax.devices():
        assert any(line.startswith(f"  {d}: ") for line in lines), (d, text)
    from jaxrna.runtime import resolve_backend

    assert f"auto backend: {resolve_backend('auto')}" in lines
    assert "compile cache: /x/y" in lines


def _inputs(tmp_path):
    (tmp_path / "a.fa").write_text(">a\nGGGAAAUCCC\n")
    (tmp_path / "b.fa").write_text(">b\nGGAUUUCCC\n")
    return str(tmp_path / "a.fa"), str(tmp_path / "b.fa")


def _argv(sub, a, b):
    return {"fold": ["fold", a, "--model", "nussinov"], "align": ["align", a, b], "interact": ["interact", a, b],
            "targets": ["targets", "--no-energy", a, b]}[sub]


@pytest.mark.slow
@pytest.mark.parametrize("sub", ["fold", "align", "interact", "targets"])
def test_verbose_names_the_device(sub, tmp_path, capsys):
    a, b = _inputs(tmp_path)
    assert main([*_argv(sub, a, b), "-o", str(tmp_path / "out")]) == 0
    assert "runs on" not in capsys.readouterr().err           # not without -v
    assert main([*_argv(sub, a, b), "-v", "-q", "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    from jaxrna.runtime import resolve_backend

    backend = resolve_backend("auto")
    devices = jax.devices(backend)          # every subcommand uses every device (issue 27)
    expected = (f"jaxrna: {sub} runs on {backend} (--backend auto): "
                + ", ".join(f"{d} ({d.device_kind})" for d in devices))
    if sub == "fold":     # a job this small folds with NumPy (the compiled fill where it is
        from jaxrna.fold.host import library  # built already), JAX not even imported

        expected = ("jaxrna: fold runs on cpu (--backend auto, a small job): NumPy in this "
                    "process, without JAX") if library(build=False) is None else (
            f"jaxrna: fold runs on cpu (--backend auto, a small job): the compiled fill (C) "
            f"on {len(os.sched_getaffinity(0))} threads, without JAX")
    if sub == "align":    # parasail, where installed (the test extra has it)
        from jaxrna import runtime

        # (on a GPU host, align/choice.py estimated the host engine faster for this job)
        expected = ("jaxrna: align runs on cpu (--backend auto"
                    + (", estimated faster" if runtime.gpu_possible() else "")
                    + "): parasail in this process, without JAX")
    assert [line for line in err.splitlines() if "runs on" in line] == [expected]
    # --backend cpu -v: always the CPU
    assert main([*_argv(sub, a, b), "--backend", "cpu", "--verbose", "-o", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert re.search(rf"^jaxrna: {sub} runs on cpu \(--backend cpu[),]", err, re.M), err


def test_verbose_gpu_without_a_gpu_is_one_error_line(tmp_path, capsys):
    from jaxrna.runtime import has_gpu

    if has_gpu():
        pytest.skip("this machine has a GPU")
    a, _ = _inputs(tmp_path)
    assert main(["fold", a, "--model", "nussinov", "-v", "--backend", "gpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jaxrna: error: --backend gpu was asked for but JAX sees no GPU")
    assert "Traceback" not in err


def test_gpu_extras_and_readme():
    """pyproject's cuda12/cuda13 extras are JAX's CUDA wheels (extras the installed JAX has), and
    the README's GPU section installs one and checks with `jaxrna info`."""
    if tomllib is None:
        pytest.skip("tomllib needs Python >= 3.11")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        extras = tomllib.load(fh)["project"]["optional-dependencies"]
    jax_extras = importlib.metadata.metadata("jax").get_all("Provides-Extra")
    for cuda in ("cuda12", "cuda13"):
        (req,) = extras[cuda]
        assert re.fullmatch(rf"jax\[{cuda}\](>=[0-9.]+)?", req), req
        assert cuda in jax_extras
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as fh:
        readme = fh.read()
    section = readme.split("\n## GPU\n", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert commands[0].strip() == 'pip install ".[cuda13]" && jaxrna info'
