"""`jaxrna interact` on the command line: formats against golden files, windows, input errors."""

import json
import os

import pytest

from jaxrna.cli import main

from conftest import TEST_DATA

A = os.path.join(TEST_DATA, "interact_a.fa")
B = os.path.join(TEST_DATA, "interact_b.fa")
TV3 = ["--seq1", "CCACAGGUAGCCUGCC", "--seq2", "GUCGUGGUCCGCAACACUCG"]


def golden(name):
    with open(os.path.join(TEST_DATA, name)) as fh:
        return fh.read()


def run(capsys, *argv):
    status = main(["interact", "-q", *argv])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("fmt", ["tsv", "dbn", "json"])
def test_formats_match_golden_files(capsys, fmt):
    status, out, _ = run(capsys, A, B, "--pairs", "zip", "-f", fmt)
    assert status == 0
    assert out == golden(f"interact_zip.{fmt}")


def test_tsv_scores_are_the_spec_values(capsys):
    _, out, _ = run(capsys, A, B, "--pairs", "zip")
    lines = out.splitlines()
    assert lines[0].startswith("#id1\tid2\tscore\ts1_score\ts2_score\tstructure")
    rows = [line.split("\t") for line in lines[1:]]
    assert [r[2:5] for r in rows] == [["14.5", "3", "1"], ["20", "7", "7.5"], ["35", "10", "14.5"]]
    for r in rows:                       # a joint structure over both strands, brackets balanced
        s1, s2 = r[5].split("&")
        assert s1.count("[") == s2.count("]") and s1.count("(") == s1.count(")")


def test_json_pairs_have_kinds(capsys):
    _, out, _ = run(capsys, A, B, "--pairs", "zip", "-f", "json")
    first = json.loads(out)[0]
    assert first["score"] == 14.5
    assert {p["kind"] for p in first["pairs"]} == {"intra1", "intra2", "inter"}
    assert {"kind": "inter", "i": 8, "j": 1, "weight": 1.5} in first["pairs"]     # 1-based


def test_windows_and_all_windows(capsys, tmp_path):
    windows = tmp_path / "windows.tsv"
    status, out, _ = run(capsys, *TV3, "--window1", "8", "--window2", "8", "-f", "dbn",
                         "--all-windows", str(windows))
    assert status == 0
    assert out == golden("interact_tv3_w8.dbn")
    assert "window1=9-16 window2=1-8" in out and out.rstrip().endswith("(17.5)")
    assert windows.read_text() == golden("interact_tv3_w8_windows.tsv")


def test_all_pairs(capsys):
    status, out, _ = run(capsys, os.path.join(TEST_DATA, "interact_short_a.fa"),
                         os.path.join(TEST_DATA, "interact_short_b.fa"), "--weights", "unit")
    assert status == 0
    assert out == golden("interact_short_all.tsv")
    assert [line.split("\t")[:2] for line in out.splitlines()[1:]] == [
        ["s1a", "s2a"], ["s1a", "s2b"], ["s1b", "s2a"], ["s1b", "s2b"]]


def test_score_only(capsys):
    _, out, _ = run(capsys, A, B, "--pairs", "zip", "--score-only")
    assert [line.split("\t")[2:6] for line in out.splitlines()[1:]][0] == ["14.5", "3", "1", "-"]


@pytest.mark.parametrize("argv,message", [
    (["missing.fa", B], "missing.fa: no such file"),
    ([A, os.path.join(TEST_DATA, "interact_short_b.fa"), "--pairs", "zip"], "as many records"),
    ([A, B, "-f", "dbn", "--score-only"], "--score-only needs"),
    (["--seq1", "ACGU"], "no strand-2 input"),
    (["--seq1", "AC1U", "--seq2", "ACGU"], "'1' at column 3"),
    ([A, B, "--max-memory", "0.000001", "--pairs", "zip"], "needs about"),
])
def test_bad_input_exits_2_with_a_message(capsys, argv, message):
    status, out, err = run(capsys, *argv)
    assert status == 2
    assert message in err and "Traceback" not in err


def test_bad_fasta_is_located(capsys, tmp_path):
    bad = tmp_path / "bad.fa"
    bad.write_text(">r1\nACGU\n>r2\nAC-U\n")
    status, _, err = run(capsys, str(bad), B)
    assert status == 2 and f"{bad}:4: record 'r2'" in err


@pytest.mark.parametrize("argv", [["--window1", "0", A, B], ["--weights", "GC=x", A, B],
                                  ["--pairs", "some", A, B]])
def test_bad_options_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(["interact", *argv])
    assert exc.value.code == 2


def test_warm_run_compiles_nothing(tmp_path):
    """A second process with the same cache directory compiles nothing: it loads the stored
    executable and does not even trace (jaxrna.programs; on CPUs too since issue 26), and the
    output is the same."""
    import subprocess
    import sys

    from conftest import ROOT

    outputs, reports = [], []
    for k in range(2):
        profile = tmp_path / f"profile{k}.json"
        env = dict(os.environ, JAXRNA_CACHE_DIR=str(tmp_path / "cache"), JAXRNA_PROFILE=str(profile),
                   PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run([sys.executable, "-m", "jaxrna", "interact", "-q", "--seq1",
                               "GGGAAAUCCCAG", "--seq2", "GGAUUUCCCAGU", "-f", "dbn"], env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout)
        reports.append(json.loads(profile.read_text()))
    cold, warm = reports
    assert cold["counts"]["compiled"] >= 1 and cold["counts"].get("executables_compiled", 0) >= 1
    assert warm["counts"]["compiled"] == 0
    assert warm["counts"].get("executables_loaded", 0) >= 1
    assert warm["counts"].get("executables_compiled", 0) == 0
    assert outputs[0] == outputs[1] and outputs[0].startswith(">seq1&seq2")
