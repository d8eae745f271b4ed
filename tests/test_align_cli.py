"""The ``jaxrna align`` command line: every format, pairing modes, errors (exit 2, no traceback)."""

import json
import os
import subprocess
import sys

import pytest
from Bio.Align import PairwiseAligner, substitution_matrices

from conftest import ROOT, TEST_DATA
from jaxrna.align.reference import rescore
from jaxrna.align.scoring import make_scoring
from jaxrna.cli import main
from jaxrna.io import read_fasta

QUERIES = os.path.join(TEST_DATA, "align_queries.fa")
TARGETS = os.path.join(TEST_DATA, "align_targets.fa")
PROTEIN = os.path.join(TEST_DATA, "align_protein.fa")


def run_cli(args, capsys):
    code = main(["align", "-q", *args])
    out, err = capsys.readouterr()
    return code, out, err


def run_proc(args):
    env = dict(os.environ, PYTHONPATH=ROOT, JAXRNA_CACHE_DIR="off")
    return subprocess.run([sys.executable, "-m", "jaxrna", "align", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)


def records(path):
    return {r.id: r.sequence for r in read_fasta(path, alphabet="letters")}


def parse_tsv(text):
    lines = text.splitlines()
    assert lines[0] == "#query_id\ttarget_id\tscore\tquery_start\tquery_end\ttarget_start\ttarget_end\tcigar\tidentity"
    return [line.split("\t") for line in lines[1:]]


def cigar_ops(cigar):
    ops, num = [], ""
    for ch in cigar:
        if ch.isdigit():
            num += ch
        else:
            ops.append({"=": "M", "X": "M", "I": "I", "D": "D"}[ch] * int(num))
            num = ""
    return "".join(ops)


@pytest.mark.parametrize("mode", ["global", "local"])
def test_tsv_scores_equal_biopython(capsys, mode):
    args = [QUERIES, TARGETS, "--mode", mode, "--match", "2", "--mismatch", "-3",
            "--gap-open", "5", "--gap-extend", "2", "-f", "tsv"]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    rows = parse_tsv(out)
    qs, ts = records(QUERIES), records(TARGETS)
    assert [(r[0], r[1]) for r in rows] == [(q, t) for q in qs for t in ts]   # query-major
    bio = PairwiseAligner(mode=mode, match_score=2, mismatch_score=-3, open_gap_score=-5,
                          extend_gap_score=-2)
    scoring = make_scoring(2, -3, None, 5, 2)
    for qid, tid, score, q0, q1, t0, t1, cigar, ident in rows:
        a, b = qs[qid].replace("U", "T"), ts[tid].replace("U", "T")
        assert float(score) == bio.score(a, b)
        assert "." not in score                                       # no trailing .0
        ops = cigar_ops(cigar) if cigar != "*" else ""
        start_q, start_t = max(int(q0) - 1, 0), max(int(t0) - 1, 0)
        assert rescore(a, b, scoring, start_q, start_t, ops) == int(score)
        if mode == "global":
            assert (int(q0), int(q1), int(t0), int(t1)) == (1, len(a), 1, len(b))
        assert 0 <= float(ident) <= 100


def test_pair_format(capsys):
    code, out, _ = run_cli([QUERIES, TARGETS], capsys)
    assert code == 0
    assert out.startswith("#" * 40 + "\n# Program: jaxrna align\n# Mode: global")
    assert out.count("# Aligned_sequences: 2") == 6
    assert "# Matrix: NUC.4.4" in out and "# Gap_penalty: 10" in out and "# Extend_penalty: 0.5" in out
    assert "# Score: 350.5" in out                                    # q1 x t1 under EDNAFULL
    assert "# Identity:        73/76 (96.1%)" in out
    assert "GUGUUCGAUCCACAGAAUUCG--CCA     74" in out
    assert out.rstrip().endswith("#" + "-" * 39)


def test_json_format_and_protein_matrix(capsys):
    code, out, _ = run_cli([PROTEIN, PROTEIN, "--matrix", "BLOSUM62", "--gap-open", "11",
                            "--gap-extend", "1", "--mode", "local", "-f", "json"], capsys)
    assert code == 0
    data = json.loads(out)
    assert len(data) == 4
    bio = PairwiseAligner(mode="local", substitution_matrix=substitution_matrices.load("BLOSUM62"),
                          open_gap_score=-11, extend_gap_score=-1)
    seqs = records(PROTEIN)
    for obj in data:
        assert obj["score"] == bio.score(seqs[obj["query_id"]], seqs[obj["target_id"]])
        assert obj["scoring"] == "BLOSUM62" and obj["gap_open"] == 11 and obj["mode"] == "local"
        assert len(obj["query_aligned"]) == len(obj["target_aligned"]) == obj["length"]


def test_zip_edit_preset_and_output_file(tmp_path, capsys):
    a = tmp_path / "a.fa"
    b = tmp_path / "b.fa"
    a.write_text(">x\nGATTACA\n>y\nACGT\n")
    b.write_text(">u\nGACTACA\n>v\nACGTACGT\n")
    out_file = tmp_path / "out.tsv"
    code, out, _ = run_cli([str(a), str(b), "--pairs", "zip", "--preset", "edit", "-f", "tsv",
                            "-o", str(out_file)], capsys)
    assert code == 0 and out == ""
    rows = parse_tsv(out_file.read_text())
    assert [(r[0], r[1], r[2]) for r in rows] == [("x", "u", "1"), ("y", "v", "12")]


def test_score_only(capsys):
    code, out, _ = run_cli([QUERIES, TARGETS, "--mode", "local", "--score-only", "-f", "tsv",
                            "--match", "1", "--mismatch", "-3", "--gap-open", "5", "--gap-extend", "2"], capsys)
    assert code == 0
    rows = parse_tsv(out)
    full = parse_tsv(run_cli([QUERIES, TARGETS, "--mode", "local", "-f", "tsv", "--match", "1",
                              "--mismatch", "-3", "--gap-open", "5", "--gap-extend", "2"], capsys)[1])
    for r, f in zip(rows, full):
        assert r[2] == f[2] and r[4] == f[4] and r[6] == f[6]           # score and ends agree
        assert r[3] == r[5] == r[7] == r[8] == "*"
    code, out, _ = run_cli([QUERIES, TARGETS, "--score-only", "-f", "json"], capsys)
    assert code == 0 and "cigar" not in json.loads(out)[0]


@pytest.mark.parametrize("args, message", [
    (["--matrix", "NOPE"], "unknown substitution matrix 'NOPE'"),
    (["--gap-open", "-1"], "gap penalties are positive costs"),
    (["--preset", "edit", "--mode", "local"], "cannot be used with --mode local"),
    (["--preset", "edit", "--match", "2"], "drop --match"),
    (["--match", "1", "--matrix", "BLOSUM62"], "not both"),
    (["--matrix", "BLOSUM62"], "letter 'U' at position 6 is not in the alphabet of BLOSUM62"),
    (["--score-only"], "needs a score-only format"),
    (["--pairs", "zip"], "has more records than"),
])
def test_bad_options_exit_2(capsys, args, message):
    code, out, err = run_cli([QUERIES, TARGETS, *args], capsys)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_bad_input_files_subprocess(tmp_path):
    bad = tmp_path / "bad.fa"
    bad.write_text(">a\nAC-GT\n")
    for args, message in [([QUERIES, str(tmp_path / "missing.fa")], "no such file"),
                          ([str(bad), TARGETS], "is not a letter"),
                          ([QUERIES, TARGETS, "--gap-extend", "x"], "expected a number")]:
        proc = run_proc(args)
        assert proc.returncode == 2
        assert message in proc.stderr and "Traceback" not in proc.stderr
