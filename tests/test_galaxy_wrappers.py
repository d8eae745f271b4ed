"""The Galaxy tool wrappers in wrappers/: lint, schema, quoting, and agreement with the CLI.

Each wrapper must lint with galaxy-tool-util with zero errors and zero warnings (every linter
except the bio.tools look-up, which needs a network), validate against Galaxy's tool XSD, and
single-quote every variable of its command. The live run of the tool tests on a Galaxy server
is .ci/galaxy.sh.
"""

import argparse
import os
import re
import xml.etree.ElementTree as ET

import pytest
import yaml

from conftest import ROOT

pytestmark = pytest.mark.external  # galaxy-tool-util (in the test extra; skipped without it)
pytest.importorskip("galaxy.tool_util", reason="galaxy-tool-util is part of the test extra")

from galaxy.tool_util.lint import get_lint_context_for_tool_source  # noqa: E402
from galaxy.tool_util.parser import get_tool_source  # noqa: E402
from lxml import etree  # noqa: E402

from jaxrna._version import __version__  # noqa: E402
from jaxrna.cli import build_parser  # noqa: E402

WRAPPERS = os.path.join(ROOT, "wrappers")
TOOLS = ["jaxrna_fold", "jaxrna_align", "jaxrna_targets", "jaxrna_interact"]
# Linters that need a network: only the bio.tools look-up is left out.
SKIP_LINTERS = ["BioToolsValid"]


def tool_path(tool):
    return os.path.join(WRAPPERS, f"{tool}.xml")


def tool_source(tool):
    return get_tool_source(tool_path(tool))


def expanded_root(tool):
    """The tool's XML with macros and tokens expanded, as Galaxy reads it."""
    return tool_source(tool).xml_tree.getroot()


def subcommand_parser(tool) -> argparse.ArgumentParser:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return subparsers.choices[tool.split("_", 1)[1]]


# --- quoting --------------------------------------------------------------------------------

def unquoted_variables(command: str) -> list[str]:
    """Cheetah variables of a command that are not inside single quotes.

    Lines that start with ``#`` are Cheetah directives (``#if``, ``#else``, ``#set``...): their
    variables are Python expressions, not shell words. ``\\$`` is a literal dollar sign.
    """
    bad = []
    for line in command.splitlines():
        if line.strip().startswith("#"):
            continue
        in_single = in_double = False
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\" and not in_single:
                i += 2
                continue
            if c == "'" and not in_double:
                in_single = not in_single
            elif c == '"' and not in_single:
                in_double = not in_double
            elif c == "$" and not in_single:
                m = re.match(r"\$\{?[A-Za-z_][\w.]*\}?", line[i:])
                if m:
                    bad.append(f"{m.group(0)} in: {line.strip()}")
            i += 1
    return bad


def test_quoting_check_catches_unquoted_variables():
    assert unquoted_variables("jaxrna fold $input -o '$output'") == ["$input in: jaxrna fold $input -o '$output'"]
    assert unquoted_variables('jaxrna fold "$input"') != []
    assert unquoted_variables("--weights 'GC=$w.gc,AU=$w.au' ${x}") == ["${x} in: --weights 'GC=$w.gc,AU=$w.au' ${x}"]
    assert unquoted_variables("#if $fmt == 'tsv':\n    --score-only\n#end if") == []
    assert unquoted_variables(r"echo \$HOME '$a'") == []


@pytest.mark.parametrize("tool", TOOLS)
def test_every_command_variable_is_single_quoted(tool):
    command = tool_source(tool).parse_command()
    assert "$" in command
    assert unquoted_variables(command) == []


# --- lint and schema ------------------------------------------------------------------------

def test_edam_ontology_is_installed():
    """The EDAM linter reads the edam-ontology package (part of the test extra)."""
    import edam_ontology  # noqa: F401


@pytest.mark.parametrize("tool", TOOLS)
def test_lint_has_no_errors_and_no_warnings(tool):
    ctx = get_lint_context_for_tool_source(tool_source(tool), skip_types=SKIP_LINTERS)
    problems = [f"{m.level} {m.linter}: {m.message}" for m in ctx.error_messages + ctx.warn_messages]
    assert problems == []
    assert ctx.valid_messages, "no linter ran"


@pytest.mark.parametrize("tool", TOOLS)
def test_validates_against_galaxy_tool_xsd(tool):
    import galaxy.tool_util

    xsd_path = os.path.join(os.path.dirname(galaxy.tool_util.__file__), "xsd", "galaxy.xsd")
    schema = etree.XMLSchema(etree.parse(xsd_path))
    tree = etree.fromstring(ET.tostring(expanded_root(tool)))
    assert schema.validate(tree), [str(e) for e in schema.error_log]


# --- the IUC conventions this repository promises -------------------------------------------

def macro_tokens():
    root = ET.parse(os.path.join(WRAPPERS, "macros.xml")).getroot()
    return {t.get("name"): (t.text or "").strip() for t in root.findall("token")}


def test_macros_tokens_and_requirement():
    tokens = macro_tokens()
    assert tokens["@TOOL_VERSION@"] == __version__
    assert re.fullmatch(r"\d+", tokens["@VERSION_SUFFIX@"])
    assert re.fullmatch(r"\d+\.\d+", tokens["@PROFILE@"])


@pytest.mark.parametrize("tool", TOOLS)
def test_tool_header_requirement_and_version_command(tool):
    raw = open(tool_path(tool)).read()
    assert f'<tool id="{tool}" ' in raw
    assert 'version="@TOOL_VERSION@+galaxy@VERSION_SUFFIX@"' in raw
    assert 'profile="@PROFILE@"' in raw
    assert '<command detect_errors="exit_code"><![CDATA[' in raw
    root = expanded_root(tool)
    assert root.get("id") == tool
    assert root.get("version") == f"{__version__}+galaxy{macro_tokens()['@VERSION_SUFFIX@']}"
    reqs = root.findall("requirements/requirement")
    assert [(r.get("type"), r.text, r.get("version")) for r in reqs] == [("package", "jaxrna", __version__)]
    assert root.find("version_command").text.strip() == "jaxrna --version"
    assert root.findall("edam_topics/edam_topic") and root.findall("edam_operations/edam_operation")
    assert root.findall("xrefs/xref")
    assert root.findall("citations/citation")
    assert root.find("creator") is not None
    assert "**Example**" in root.find("help").text


@pytest.mark.parametrize("tool", TOOLS)
def test_commands_are_joined_by_and_not_by_separators(tool):
    """Galaxy joins the command's lines with spaces: a second command needs ``&&``."""
    command = tool_source(tool).parse_command()
    shell = [line for line in command.splitlines() if not line.strip().startswith("#")]
    assert not any(";" in line.replace("';'", "") for line in shell)
    assert [line.strip() for line in shell if line.strip()][0].startswith("jaxrna ")


@pytest.mark.parametrize("tool", TOOLS)
def test_tests_cover_options_content_and_failure(tool):
    tests = expanded_root(tool).findall("tests/test")
    failing = [t for t in tests if t.get("expect_failure") == "true" or t.get("expect_exit_code")]
    passing = [t for t in tests if t not in failing]
    assert len(passing) >= 2 and len(failing) >= 1
    for t in passing:
        for out in t.findall("output"):
            assert out.get("file") or out.find("assert_contents") is not None, ET.tostring(out)
    for t in failing:
        assert t.get("expect_exit_code") == "2"  # jaxrna's status for bad input
        assert t.find("assert_stderr") is not None


def test_test_data_is_complete_and_used():
    used = set()
    for tool in TOOLS:
        for el in expanded_root(tool).iter():
            if el.tag in ("param", "output") and el.get("value" if el.tag == "param" else "file"):
                name = el.get("value") if el.tag == "param" else el.get("file")
                if os.path.splitext(name)[1] in (".fa", ".fasta", ".gz", ".txt", ".tsv", ".dbn", ".json", ".ct"):
                    used.add(name)
    present = set(os.listdir(os.path.join(WRAPPERS, "test-data")))
    assert used - present == set()
    assert present - used == set()


# --- agreement with the command line --------------------------------------------------------

@pytest.mark.parametrize("tool", TOOLS)
def test_command_options_exist_in_the_cli(tool):
    """Every --option of the command, and every select value passed to one, is the CLI's."""
    parser = subcommand_parser(tool)
    options = parser._option_string_actions
    command = tool_source(tool).parse_command()
    for flag in set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", command)):
        assert flag in options, f"{tool}: {flag} is not an option of jaxrna {tool[7:]}"
    for param in expanded_root(tool).iter("param"):
        arg = param.get("argument")
        if not arg:
            continue
        assert arg in options, f"{tool}: argument {arg} is not an option of jaxrna {tool[7:]}"
        choices = options[arg].choices
        if param.get("type") == "select" and choices:
            values = [o.get("value") for o in param.findall("option")]
            assert set(values) <= set(choices), (arg, values, choices)


def test_align_matrices_are_known():
    from jaxrna.align.scoring import from_matrix

    matrix = next(p for p in expanded_root("jaxrna_align").iter("param") if p.get("argument") == "--matrix")
    for option in matrix.findall("option"):
        from_matrix(option.get("value"))


def test_targets_defaults_are_mirandas():
    """miRanda 3.3a's defaults: -sc 140, -en 1, -scale 4, -go -9, -ge -4, switches off."""
    params = {p.get("argument"): p for p in expanded_root("jaxrna_targets").iter("param") if p.get("argument")}
    assert params["--score-threshold"].get("value") == "140"
    assert params["--energy-threshold"].get("value") == "1"
    assert float(params["--scale"].get("value")) == 4
    assert params["--gap-open"].get("value") == "-9"
    assert params["--gap-extend"].get("value") == "-4"
    for switch in ("--strict", "--no-energy", "--quiet"):
        assert params[switch].get("checked") == "false"
    assert [o.get("value") for o in params["--format"].findall("option")] == ["miranda", "keyval", "tsv", "json"]
    cli = subcommand_parser("jaxrna_targets")
    defaults = {a.option_strings[0]: a.default for a in cli._actions if a.option_strings}
    assert (defaults["--score-threshold"], defaults["--energy-threshold"], defaults["--scale"],
            defaults["--gap-open"], defaults["--gap-extend"]) == (140, 1, 4.0, -9, -4)


def test_shed_yml():
    shed = yaml.safe_load(open(os.path.join(WRAPPERS, ".shed.yml")))
    assert shed["name"] == "jaxrna"
    assert shed["owner"] and shed["description"] and shed["long_description"]
    assert shed["categories"]


def test_test_data_copies_match_the_originals():
    """wrappers/test-data copies test-data/ files; the miRanda reports are the goldens minus
    miRanda's 32-line banner and settings header."""
    wrapper_data = os.path.join(WRAPPERS, "test-data")
    originals = {}
    for folder in (os.path.join(ROOT, "test-data"), os.path.join(ROOT, "test-data", "miranda")):
        for name in os.listdir(folder):
            originals.setdefault(name, os.path.join(folder, name))
    checked = 0
    for name in sorted(os.listdir(wrapper_data)):
        if name.endswith(".gz"):
            import gzip

            copy = gzip.open(os.path.join(wrapper_data, name), "rt").read()
            assert copy == open(originals[name[:-3]]).read(), name
            continue
        copy = open(os.path.join(wrapper_data, name)).read()
        if name.startswith("bantam_hid_"):
            golden = open(originals[name]).read().splitlines(keepends=True)
            assert golden[31].startswith("=-=-="), name  # the end of the settings header
            assert copy == "".join(golden[32:]), name
            checked += 1
        elif name in originals:
            assert copy == open(originals[name]).read(), name
            checked += 1
    assert checked >= 10
