"""The Galaxy wrappers through planemo, the Galaxy tool developers' own linter: ``planemo lint``
on every tool and the offline parts of ``planemo shed_lint`` on the Tool Shed repository
(``wrappers/.shed.yml``), both with ``--fail_level warn``.

Left out because they need the network: the bio.tools look-up (``BioToolsValid``) and the
Tool Shed's latest installed revision (``version_bumped``). Also left out:
``shed_remote_repository_url``, which compares the URL with the local checkout's directory
names (a clone in any directory would warn); ``test_remote_repository_url`` checks the URL
instead.

planemo pins its own galaxy-tool-util, so it lives in its own virtual environment: the test
runs ``$JAXRNA_PLANEMO`` (the planemo executable; ``.ci/run`` installs one and sets it) or
``planemo`` from PATH, and is skipped without either unless ``JAXRNA_REQUIRE_PLANEMO=1``.
"""

import glob
import os
import re
import shutil
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRAPPERS = os.path.join(ROOT, "wrappers")
TOOLS = sorted(p for p in glob.glob(os.path.join(WRAPPERS, "*.xml")) if not p.endswith("macros.xml"))
OFFLINE_SKIPS = "BioToolsValid,version_bumped,shed_remote_repository_url"


def planemo_or_skip() -> str:
    exe = os.environ.get("JAXRNA_PLANEMO") or shutil.which("planemo")
    if not exe or not os.access(exe, os.X_OK):
        if os.environ.get("JAXRNA_REQUIRE_PLANEMO") == "1":
            pytest.fail(f"JAXRNA_REQUIRE_PLANEMO=1 but no planemo (JAXRNA_PLANEMO={exe!r})")
        pytest.skip("planemo is not installed (pip install planemo, in its own virtual "
                    "environment; then JAXRNA_PLANEMO=.../bin/planemo); .ci/run does this")
    return exe


def planemo(*args, cwd=ROOT):
    out = subprocess.run([planemo_or_skip(), *args], cwd=cwd, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "HOME": os.environ.get("HOME", "/tmp")})
    return out.returncode, out.stdout + out.stderr


def problems(text: str) -> list:
    return [line for line in text.splitlines() if re.search(r"\b(WARNING|ERROR)\b", line)
            and "Unknown linter type" not in line]


@pytest.mark.external
def test_planemo_lint_every_tool():
    code, text = planemo("lint", "--fail_level", "warn", "--skip", "BioToolsValid", *TOOLS)
    assert code == 0 and not problems(text), text[-4000:]
    linted = re.findall(r"Linting tool (\S+)", text)
    assert sorted(os.path.realpath(p) for p in linted) == [os.path.realpath(t) for t in TOOLS]
    assert len(TOOLS) == 4


@pytest.mark.external
def test_planemo_shed_lint_offline():
    code, text = planemo("shed_lint", "--tools", "--ensure_metadata", "--fail_level", "warn",
                         "--skip", OFFLINE_SKIPS, WRAPPERS)
    assert code == 0 and not problems(text), text[-4000:]
    assert "Found all shed metadata fields required" in text
    assert ".shed.yml found and appears to be valid YAML" in text
    assert len(re.findall(r"Linting tool ", text)) == len(TOOLS)


@pytest.mark.external
def test_planemo_lint_can_fail(tmp_path):
    """A copy of the wrappers with one tool's help removed: lint fails."""
    copy = tmp_path / "wrappers"
    shutil.copytree(WRAPPERS, copy)
    tool = copy / "jaxrna_fold.xml"
    text = tool.read_text(encoding="utf-8")
    broken = re.sub(r"<help>.*?</help>", "", text, flags=re.S)
    assert broken != text
    tool.write_text(broken, encoding="utf-8")
    code, out = planemo("lint", "--fail_level", "warn", "--skip", "BioToolsValid", str(tool))
    assert code != 0 and "HelpMissing" in out, out[-3000:]


def test_remote_repository_url():
    """What shed_remote_repository_url would check, without depending on the checkout's path:
    the URL points at the wrappers/ folder of the repository named as the homepage."""
    with open(os.path.join(WRAPPERS, ".shed.yml"), encoding="utf-8") as fh:
        shed = yaml.safe_load(fh)
    assert shed["remote_repository_url"] == shed["homepage_url"].rstrip("/") + "/tree/main/wrappers"
    assert shed["type"] == "unrestricted" and shed["name"] == "jaxrna"
    for pattern in shed["include"]:
        assert glob.glob(os.path.join(WRAPPERS, pattern)), pattern
