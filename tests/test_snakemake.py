"""jaxrna under a real Snakemake: the wrappers in ``snakemake/wrappers/bio/jaxrna/*`` (each
wrapper's own ``test/Snakefile``, run as the snakemake-wrappers repository runs them, with
``--wrapper-prefix``) and the example workflow ``snakemake/workflow/Snakefile`` (a chunked
``targets`` scan merged back byte for byte, and one job of each other subcommand). Every output
is compared with the same ``jaxrna`` command run here directly.

Snakemake has many dependencies of its own, so it lives in its own virtual environment: the
tests run ``$JAXRNA_SNAKEMAKE`` (the snakemake executable) or ``snakemake`` from PATH, and are
skipped without either unless ``JAXRNA_REQUIRE_SNAKEMAKE=1``. ``bash .ci/snakemake.sh`` installs
Snakemake from PyPI into its own environment and runs this file (``.ci/run`` does that).
Jobs run this checkout's ``jaxrna`` (a shim on PATH), without conda.
"""

import filecmp
import glob
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

WRAPPERS = os.path.join(ROOT, "snakemake", "wrappers")
WORKFLOW = os.path.join(ROOT, "snakemake", "workflow", "Snakefile")
SUBCOMMANDS = ["fold", "align", "targets", "interact"]


def snakemake_or_skip() -> str:
    exe = os.environ.get("JAXRNA_SNAKEMAKE") or shutil.which("snakemake")
    if not exe or not os.access(exe, os.X_OK):
        if os.environ.get("JAXRNA_REQUIRE_SNAKEMAKE") == "1":
            pytest.fail(f"JAXRNA_REQUIRE_SNAKEMAKE=1 but no snakemake (JAXRNA_SNAKEMAKE={exe!r})")
        pytest.skip("snakemake is not installed (bash .ci/snakemake.sh installs it in its own "
                    "virtual environment and runs these tests)")
    return exe


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """PATH with a `jaxrna` that runs this checkout with this interpreter; one compile cache."""
    bin_dir = tmp_path_factory.mktemp("bin")
    shim = bin_dir / "jaxrna"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" '
                    f'exec "{sys.executable}" -m jaxrna "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("JAXRNA_CACHE_DIR", str(tmp_path_factory.mktemp("jax-cache")))
    env.pop("VIRTUAL_ENV", None)
    return env


def run_snakemake(args, cwd, env, timeout=900):
    cmd = [snakemake_or_skip(), "--cores", "2", "--nolock", *args]
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, (cmd, out.stdout[-3000:], out.stderr[-5000:])
    return out


def jaxrna(argv, out_path, env):
    """The same command, run directly by the same `jaxrna` (a process of its own, as the jobs
    are); returns its output's bytes. (targets' -q would be miRanda's -quiet.)"""
    quiet = [] if argv[0] == "targets" else ["-q"]
    out = subprocess.run(["jaxrna", *argv, *quiet, "-o", str(out_path)], env=env, cwd=os.getcwd(),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out_path.read_bytes()


FOLD_PARTITION_KEYS = ["id", "length", "sequence", "energy", "structure", "ensemble_energy",
                       "pair_probabilities", "centroid", "centroid_distance", "mfe_frequency",
                       "ensemble_diversity", "mea_structure", "mea"]

# What each wrapper's test Snakefile asks for: the direct jaxrna command for the first output
# (its bytes must be equal), and for the second a check of the format the extension chose.
WRAPPER_CASES = {
    "fold": [("folds/ex.dbn", ["fold", "--model", "nussinov", "--weights", "bpmax", "--min-loop", "3",
                               "-f", "dbn", "seqs.fa"]),
             ("folds/ex.ct", lambda text: text.startswith("   10  ENERGY =  -2.50  hairpin\n")),
             ("folds/ex.partition.json", lambda text: [sorted(o) for o in json.loads(text)] == [sorted(
                 FOLD_PARTITION_KEYS)] * 2)],
    "align": [("aligned/ex.pair", ["align", "--mode", "local", "--match", "2", "--mismatch", "-3",
                                   "--gap-open", "5", "--gap-extend", "2", "-f", "pair", "queries.fa",
                                   "targets.fa"]),
              ("aligned/ex.tsv", lambda text: text.startswith("#query_id\ttarget_id\tscore"))],
    "targets": [("hits/ex.txt", ["targets", "-sc", "140", "-en", "1", "mirnas.fa", "utrs.fa"]),
                ("hits/ex.tsv", lambda text: text.startswith("#mirna_id\t") and text.count("\n") >= 3)],
    "interact": [("interact/ex.tsv", ["interact", "--window2", "8", "-f", "tsv", "srna.fa", "mrna.fa"]),
                 ("interact/ex.windows.tsv", lambda text: text.startswith("#")),
                 ("interact/ex.dbn", lambda text: text.startswith(">s1&m1") and "&" in text.splitlines()[2])],
}


def test_every_wrapper_has_the_snakemake_wrappers_layout():
    import yaml

    for sub in SUBCOMMANDS:
        d = os.path.join(WRAPPERS, "bio", "jaxrna", sub)
        for name in ("wrapper.py", "environment.yaml", "meta.yaml", "test/Snakefile"):
            assert os.path.isfile(os.path.join(d, name)), (sub, name)
        meta = yaml.safe_load(Path(d, "meta.yaml").read_text())
        assert meta["name"] == f"jaxrna {sub}" and meta["description"] and meta["authors"]
        assert meta["input"] and meta["output"] and meta["params"]
        envy = yaml.safe_load(Path(d, "environment.yaml").read_text())
        assert envy["channels"] == ["conda-forge", "bioconda", "nodefaults"]
        from jaxrna._version import __version__

        assert {"pip": [f"jaxrna =={__version__}"]} in envy["dependencies"]
        text = Path(d, "wrapper.py").read_text()
        assert f'"jaxrna {sub} {{extra}}' in text and "snakemake.log_fmt_shell" in text
        snakefile = Path(d, "test", "Snakefile").read_text()
        assert f'"master/bio/jaxrna/{sub}"' in snakefile
    assert sorted(WRAPPER_CASES) == sorted(SUBCOMMANDS)


@pytest.mark.external
@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_wrapper_under_snakemake(sub, tmp_path, env):
    """The wrapper's test Snakefile, as snakemake-wrappers runs it (the test directory copied,
    the wrapper found through --wrapper-prefix as master/bio/jaxrna/SUB)."""
    snakemake_or_skip()
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    os.symlink(WRAPPERS, prefix / "master")
    work = tmp_path / "test"
    shutil.copytree(os.path.join(WRAPPERS, "bio", "jaxrna", sub, "test"), work)
    outputs = [path for path, _ in WRAPPER_CASES[sub]]
    run_snakemake(["--wrapper-prefix", f"file://{prefix}/", *outputs], work, env)
    cwd = os.getcwd()
    os.chdir(work)
    try:
        for path, check in WRAPPER_CASES[sub]:
            got = (work / path).read_bytes()
            if callable(check):
                assert check(got.decode()), (path, got[:300])
            else:
                assert got == jaxrna(check, tmp_path / "direct.out", env), path
    finally:
        os.chdir(cwd)
    logs = glob.glob(str(work / "logs" / "**" / "*.log"), recursive=True)
    rules = (work / "Snakefile").read_text().count("\nrule ") + 1
    assert len(logs) == rules >= 2            # one log per job, as the rules declare them


@pytest.mark.external
def test_example_workflow(tmp_path, env):
    """The example workflow: split into 5 chunks, 5 chunk scans, merge == the unsplit scan ==
    a direct `jaxrna targets` run, byte for byte; fold, align and interact as direct runs."""
    snakemake_or_skip()
    out = tmp_path / "results"
    run_snakemake(["-s", WORKFLOW, "--directory", str(out)], tmp_path, env)
    chunks = sorted(glob.glob(str(out / "targets" / "chunks" / "utrs.chunk*.fa")))
    reports = sorted(glob.glob(str(out / "targets" / "reports" / "*.targets.txt")))
    assert len(chunks) == 5 and len(reports) == 5
    merged = out / "targets" / "utrs.targets.txt"
    assert (out / "targets" / "utrs.identical").exists()
    assert filecmp.cmp(merged, out / "targets" / "unsplit" / "utrs.targets.txt", shallow=False)
    assets = os.path.join(ROOT, "workflows", "assets", "test")
    direct = jaxrna(["targets", "-sc", "120", os.path.join(assets, "mirnas.fa"),
                     os.path.join(assets, "utrs.fa")], tmp_path / "direct.txt", env)
    assert merged.read_bytes() == direct and direct.count(b">>") >= 5
    # the other jobs: what their wrappers' tests check in detail, here their formats
    fold = (out / "fold" / "example.dbn").read_text()
    assert fold.startswith(">tRNA-Phe\nGCGGAUUUAG") and " frequency of mfe structure in ensemble " in fold
    pairs = (out / "align" / "example.pair").read_text().count("# Aligned_sequences: 2\n")
    records = [Path(ROOT, "test-data", name).read_text().count("\n>") + 1
               for name in ("align_queries.fa", "align_targets.fa")]
    assert pairs == records[0] * records[1]
    assert (out / "interact" / "example.tsv").read_text().startswith("#")


class _Params(dict):
    def get(self, key, default=None):
        return dict.get(self, key, default)


@pytest.mark.parametrize("params,want", [
    ({}, {"model": "turner", "partition": False, "mea": None}),
    ({"model": "nussinov", "extra": "--weights bpmax"}, {"model": "nussinov", "partition": False}),
    ({"partition": True, "mea": True}, {"model": "turner", "partition": True, "mea": 1.0}),
    ({"partition": True, "mea": 2.5, "extra": "-T 30"},
     {"model": "turner", "partition": True, "mea": 2.5, "temp": 30.0}),
    ({"model": "nussinov", "partition": True}, {"model": "nussinov", "partition": True, "mea": None}),
])
def test_fold_wrapper_command_line(params, want, monkeypatch):
    """The fold wrapper's command (run with a stand-in for snakemake's objects) is one the CLI
    takes, with the model and partition options the params ask for."""
    import shlex
    import types

    from jaxrna.cli import build_parser
    from jaxrna.cli.fold_energy import energy_model

    ran = []
    shell_mod = types.ModuleType("snakemake.shell")
    shell_mod.shell = lambda cmd: ran.append(cmd)
    monkeypatch.setitem(sys.modules, "snakemake", types.ModuleType("snakemake"))
    monkeypatch.setitem(sys.modules, "snakemake.shell", shell_mod)
    fake = types.SimpleNamespace(params=_Params(params), output=["out/x.json"], input="in.fa",
                                 log_fmt_shell=lambda **kw: "2> log.txt")
    path = os.path.join(WRAPPERS, "bio", "jaxrna", "fold", "wrapper.py")
    code = Path(path).read_text()
    # shell() formats its command from the caller's variables; do it here
    code = code.replace('shell("jaxrna fold', 'shell(f"jaxrna fold').replace(
        "{output:q}", "{output}").replace("{snakemake.input:q}", "{snakemake.input}")
    exec(compile(code, path, "exec"), {"snakemake": fake, "__name__": "wrapper"})
    argv = shlex.split(ran[0])[1:-2]             # without "jaxrna" and the log redirection
    args = build_parser().parse_args(argv)
    assert args.format == "json" and args.output == "out/x.json" and args.fasta == ["in.fa"]
    model = energy_model(args)
    assert args.model == want["model"] and (model is None) == (want["model"] == "nussinov")
    for key in ("partition", "mea"):
        if key in want:
            assert getattr(args, key) == want[key], (key, argv)
    if "temp" in want:
        assert model.temperature == want["temp"]
