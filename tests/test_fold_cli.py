"""The ``jaxrna fold`` command line: formats, inputs, errors."""

import gzip
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TEST_DATA
from jaxrna._version import __version__
from jaxrna.cli import main
from jaxrna.fold.api import fold
from jaxrna.io import read_fasta

EXAMPLE = os.path.join(TEST_DATA, "fold_example.fa")


def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def run_proc(args, stdin=None):
    env = dict(os.environ, PYTHONPATH=ROOT, JAXRNA_CACHE_DIR="off")
    return subprocess.run([sys.executable, "-m", "jaxrna", *args], input=stdin, capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def expected():
    recs = list(read_fasta(EXAMPLE))
    return {r.id: fold(r.sequence) for r in recs}


def parse_dbn(text):
    lines = text.splitlines()
    out = {}
    for k in range(0, len(lines), 3):
        rid, seq, last = lines[k][1:], lines[k + 1], lines[k + 2]
        structure, score = last.rsplit(" ", 1)
        out[rid] = (seq, structure, score.strip("()"))
    return out


def test_dbn_default(capsys, expected):
    code, out, _ = run_cli(["fold", "--model", "nussinov", EXAMPLE, "-q"], capsys)
    assert code == 0
    got = parse_dbn(out)
    assert list(got) == list(expected)                       # input order
    for rid, (seq, structure, score) in got.items():
        assert seq == expected[rid].sequence and structure == expected[rid].structure
        assert score == expected[rid].score_text


def pairs_from_partner_lines(lines, idx_col, partner_col):
    pairs = set()
    for line in lines:
        f = line.split()
        i, p = int(f[idx_col]), int(f[partner_col])
        if p > i:
            pairs.add((i - 1, p - 1))
    return pairs


def test_ct_and_bpseq_encode_the_same_pairs(capsys, expected):
    _, ct, _ = run_cli(["fold", "--model", "nussinov", EXAMPLE, "-f", "ct", "-q"], capsys)
    _, bpseq, _ = run_cli(["fold", "--model", "nussinov", EXAMPLE, "-f", "bpseq", "-q"], capsys)
    ct_lines, bp_lines = ct.splitlines(), bpseq.splitlines()
    for rid, res in expected.items():
        header = ct_lines.pop(0).split()
        assert int(header[0]) == res.length and header[-1] == rid
        assert header[1:4] == ["SCORE", "=", res.score_text]
        body, ct_lines = ct_lines[:res.length], ct_lines[res.length:]
        assert pairs_from_partner_lines(body, 0, 4) == set(res.pairs)
        assert [l.split()[1] for l in body] == list(res.sequence)
        assert bp_lines.pop(0) == f"# {rid}" and bp_lines.pop(0) == f"# score = {res.score_text}"
        body, bp_lines = bp_lines[:res.length], bp_lines[res.length:]
        assert pairs_from_partner_lines(body, 0, 2) == set(res.pairs)
    assert ct_lines == [] and bp_lines == []


def test_tsv_and_json(capsys, expected):
    _, tsv, _ = run_cli(["fold", "--model", "nussinov", EXAMPLE, "-f", "tsv", "--weights", "bpmax", "-q"], capsys)
    rows = [l.split("\t") for l in tsv.splitlines()]
    assert rows[0] == ["#id", "length", "score", "structure"]
    bp = {r.id: fold(r.sequence, weights="bpmax") for r in read_fasta(EXAMPLE)}
    for row in rows[1:]:
        assert row[2] == bp[row[0]].score_text and not row[2].endswith(".0")
        assert row[3] == bp[row[0]].structure and int(row[1]) == bp[row[0]].length
    _, js, _ = run_cli(["fold", "--model", "nussinov", EXAMPLE, "-f", "json", "-q"], capsys)
    data = json.loads(js)
    assert [d["id"] for d in data] == list(expected)
    for d in data:
        assert d["score"] == expected[d["id"]].score
        assert [tuple(p) for p in d["pairs"]] == [(i + 1, j + 1) for i, j in expected[d["id"]].pairs]


def test_score_only(capsys, expected):
    code, tsv, _ = run_cli(["fold", "--model", "nussinov", EXAMPLE, "-f", "tsv", "--score-only", "-q"], capsys)
    assert code == 0
    for row in [l.split("\t") for l in tsv.splitlines()[1:]]:
        assert row[2] == expected[row[0]].score_text and row[3] == "-"
    code, _, err = run_cli(["fold", "--model", "nussinov", EXAMPLE, "--score-only", "-q"], capsys)
    assert code == 2 and "--score-only" in err


def test_sequence_option_and_output_file(capsys, tmp_path):
    out = tmp_path / "x.dbn"
    code, stdout, _ = run_cli(["fold", "--model", "nussinov", "--sequence", "gggaaaucc", "-o", str(out), "-q"], capsys)
    assert code == 0 and stdout == ""
    assert out.read_text() == ">seq\nGGGAAAUCC\n(((...))) (3)\n"


def test_gzip_input(capsys, tmp_path):
    gz = tmp_path / "x.fa.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(open(EXAMPLE).read())
    _, a, _ = run_cli(["fold", "--model", "nussinov", str(gz), "-q"], capsys)
    _, b, _ = run_cli(["fold", "--model", "nussinov", EXAMPLE, "-q"], capsys)
    assert a == b and a


def test_stdin_and_real_process():
    proc = run_proc(["fold", "--model", "nussinov", "-", "-f", "tsv"], stdin=">s1\nGGGAAAUCC\n>s2\nACGU\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1:] == ["s1\t9\t3\t(((...)))", "s2\t4\t0\t...."]
    assert "folded 2 records" in proc.stderr


@pytest.mark.parametrize("content,fragment", [
    (">a\nACGU\n>a\nGG\n", ":3: record 'a': duplicate record id"),
    ("not fasta\n", ":1: not FASTA"),
    (">a\n>b\nACGU\n", ":1: record 'a': empty record"),
    (">a\nAC-GU\n", ":2: record 'a': character '-' at column 3"),
])
def test_bad_input_process(tmp_path, content, fragment):
    p = tmp_path / "bad.fa"
    p.write_text(content)
    proc = run_proc(["fold", "--model", "nussinov", str(p), "-o", str(tmp_path / "out.dbn")])
    assert proc.returncode == 2
    assert fragment in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("jaxrna: error: ")
    assert not (tmp_path / "out.dbn").exists()          # nothing half-written


def test_missing_file_and_no_input(capsys):
    code, _, err = run_cli(["fold", "--model", "nussinov", "/no/such/file.fa"], capsys)
    assert code == 2 and "no such file" in err
    code, _, err = run_cli(["fold"], capsys)
    assert code == 2 and "no input" in err


def test_bad_option_values():
    for args in (["--weights", "GC=3"], ["--min-loop", "-1"], ["--min-loop", "x"]):
        proc = run_proc(["fold", "--model", "nussinov", "--sequence", "ACGU", *args])
        assert proc.returncode == 2 and "Traceback" not in proc.stderr and "error" in proc.stderr


def test_too_large_record_is_reported_and_others_kept(capsys, tmp_path):
    p = tmp_path / "mix.fa"
    p.write_text(">small\nGGGAAAUCC\n>big\n" + "ACGU" * 300 + "\n")
    code, out, err = run_cli(["fold", "--model", "nussinov", str(p), "-f", "tsv", "--max-memory", "0.001"], capsys)
    assert code == 2
    assert out.splitlines()[1].startswith("small\t9\t3")
    assert "record 'big' skipped" in err and "need about" in err and "MiB" in err


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"jaxrna {__version__}"
    with pytest.raises(SystemExit):
        main(["fold", "--model", "nussinov", "--help"])
    assert "examples:" in capsys.readouterr().out
