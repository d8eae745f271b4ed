"""Every ``.nf`` and ``.config`` file of the Nextflow pipelines parsed by Groovy's own parser
(``tests/groovy/parse.groovy``: compiled to Groovy's CONVERSION phase, i.e. parsed and turned
into an AST, as Nextflow does before its own transformations). A syntax error there fails here as
it would when Nextflow loads the file. The checks of Nextflow's own semantics are in the other
``test_nextflow_*`` files.

Needs ``groovy`` (Debian: ``apt-get install groovy``) and a Java runtime; skipped without them,
unless ``JAXRNA_REQUIRE_GROOVY=1`` (set by ``.ci/run``, which installs it), where a missing
``groovy`` fails.
"""

import glob
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKFLOWS = os.path.join(ROOT, "workflows")
PARSE = os.path.join(ROOT, "tests", "groovy", "parse.groovy")


def groovy_env() -> dict:
    """The environment for ``groovy``: Debian's start script wants ``JAVA_HOME`` (it falls back
    to /usr/lib/jvm/default-java, absent when another package provided the JRE)."""
    env = dict(os.environ)
    home = env.get("JAVA_HOME")
    if not home or not os.path.exists(os.path.join(home, "bin", "java")):
        java = shutil.which("java")
        if java:
            env["JAVA_HOME"] = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    return env


def groovy_or_skip() -> str:
    groovy = shutil.which("groovy")
    if groovy is None or shutil.which("java") is None:
        if os.environ.get("JAXRNA_REQUIRE_GROOVY") == "1":
            pytest.fail("JAXRNA_REQUIRE_GROOVY=1 but groovy or java is not on PATH")
        pytest.skip("groovy is not installed (Debian: apt-get install groovy); .ci/run installs it")
    return groovy


def parse(paths: list) -> dict:
    """``{path: 'ok' | 'FAIL ...'}`` from one groovy run over ``paths``."""
    out = subprocess.run([groovy_or_skip(), PARSE, *paths], env=groovy_env(), cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    results = {}
    for line in out.stdout.splitlines():
        if line.startswith("ok "):
            results[line[3:]] = "ok"
        elif line.startswith("FAIL "):
            path, _, message = line[5:].partition(": ")
            results[path] = "FAIL " + message
    assert set(results) == set(paths), (out.returncode, out.stdout[-2000:], out.stderr[-2000:])
    assert out.returncode == (0 if all(v == "ok" for v in results.values()) else 1)
    return results


def pipeline_files() -> list:
    files = sorted(glob.glob(os.path.join(WORKFLOWS, "**", "*.nf"), recursive=True)
                   + glob.glob(os.path.join(WORKFLOWS, "**", "*.config"), recursive=True))
    return [os.path.relpath(f, ROOT) for f in files]


def test_the_file_list_is_the_pipeline():
    files = pipeline_files()
    for expected in ("workflows/main.nf", "workflows/nextflow.config", "workflows/conf/base.config",
                     "workflows/conf/modules.config", "workflows/conf/test.config"):
        assert expected in files
    modules = [f for f in files if f.startswith("workflows/modules/")]
    assert len(modules) == len(os.listdir(os.path.join(WORKFLOWS, "modules", "local", "jaxrna"))) >= 6


# Broken copies that Groovy's parser must reject: the parse is not a no-op.
BREAKAGES = [
    ("workflows/main.nf", "drop the last closing brace", lambda t: t[: t.rindex("}")] + t[t.rindex("}") + 1:]),
    ("workflows/main.nf", "an unclosed string", lambda t: t.replace("include {", "include { 'x", 1)),
    ("workflows/nextflow.config", "an unclosed list", lambda t: t.replace("[", "[ (", 1)),
    ("workflows/conf/modules.config", "a stray operator", lambda t: t.replace("ext.args   = {", "ext.args = = {", 1)),
    ("workflows/modules/local/jaxrna/fold/main.nf", "a triple-quoted script never closed",
     lambda t: t[: t.rindex('"""')] + t[t.rindex('"""') + 3:]),
]


@pytest.mark.external
def test_every_nf_and_config_file_parses_and_broken_copies_do_not(tmp_path):
    files = pipeline_files()
    broken = []
    for k, (path, what, mutate) in enumerate(BREAKAGES):
        with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
            text = fh.read()
        bad = mutate(text)
        assert bad != text, (path, what)
        dest = tmp_path / f"broken{k}{os.path.splitext(path)[1]}"
        dest.write_text(bad, encoding="utf-8")
        broken.append(str(dest))
    results = parse(files + broken)
    assert {f: results[f] for f in files} == {f: "ok" for f in files}
    for dest, (path, what, _) in zip(broken, BREAKAGES):
        assert results[dest].startswith("FAIL"), f"{path} with {what} parsed"
