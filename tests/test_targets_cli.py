"""``jaxrna targets``: many miRNAs and targets in miRanda's order, streaming, chunking, spooling,
formats, option spellings and validation."""

import gzip
import io
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, TEST_DATA
from jaxrna.cli import main
from jaxrna.formats.miranda import writer_for
from jaxrna.targets import api, reference
from jaxrna.targets.records import PairResult
from jaxrna.targets.scoring import ScanParams

DATA = os.path.join(TEST_DATA, "miranda")
MIRNA = os.path.join(DATA, "bantam_stRNA.fasta")
UTR = os.path.join(DATA, "hid_UTR.fasta")

MIRNAS = [
    ("mir-a", "first miRNA", "UGAGGUAGUAGGUUGUAUAGUU"),
    ("mir-b", "", "tggaatgtaaagaagtatgtat"),           # lowercase DNA
    ("mir-a", "duplicate id", "GTGAGATCATTTTGAAAGCTG"),
    ("mir-n", "ambiguity", "UAAAGUGCUUAUNGUGCAGGUAG"),
]


def site(mirna):
    comp = {"A": "U", "C": "G", "G": "C", "U": "A", "T": "A", "N": "A"}
    return "".join(comp[c] for c in reversed(mirna.upper()))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    rng = np.random.default_rng(2026)
    d = tmp_path_factory.mktemp("targets")

    def rand(n):
        return "".join(rng.choice(list("ACGT"), size=n, p=[.3, .2, .2, .3]))

    targets = []
    for k in range(7):
        seq = rand(int(rng.integers(40, 900)))
        for _ in range(k % 3):
            m = MIRNAS[int(rng.integers(0, len(MIRNAS)))][2]
            pos = int(rng.integers(0, len(seq)))
            seq = seq[:pos] + site(m).replace("U", "T") + seq[pos:]
        targets.append((f"utr{k}", f"target number {k}", seq))
    targets.append(("utr-end", "", rand(50) + site(MIRNAS[0][2])))
    targets.append(("short", "", "ACGU"))
    mirna_fa, utr_fa = d / "mirnas.fa", d / "utrs.fa"
    mirna_fa.write_text("".join(f">{i} {desc}\n{s}\n" if desc else f">{i}\n{s}\n" for i, desc, s in MIRNAS))
    utr_fa.write_text("".join(f">{i} {desc}\n{s[:60]}\n{s[60:]}\n" if desc else f">{i}\n{s}\n"
                              for i, desc, s in targets))
    gz = d / "utrs.fa.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(utr_fa.read_text())
    return {"mirnas": str(mirna_fa), "utrs": str(utr_fa), "gz": str(gz), "targets": targets}


def expected_report(files, params, fmt="miranda", quiet=False, offset=0, energy=None):
    """The report built pair by pair from the slow reference, in miRanda's order
    (``energy``: a function folding a duplex string, default ViennaRNA's recipe)."""
    out = io.StringIO()
    w = writer_for(fmt, out, no_energy=params.no_energy, quiet=quiet)
    w.begin()
    targets = files["targets"]
    for k, (qid, qdesc, q) in enumerate(MIRNAS):
        w.write(w.mirna_text(qid, f"{qid} {qdesc}".strip(), len(q)))
        for t, (tid, tdesc, tseq) in enumerate(targets):
            hits = reference.scan_pair(q.upper(), tseq.upper(), params, energy)
            if hits or w.pairs_need_text():
                w.write(w.pair_text(PairResult(qid, tid, len(q), len(tseq),
                                               offset + k * len(targets) + t + 1, hits,
                                               f"{qid} {qdesc}".strip(), f"{tid} {tdesc}".strip())))
    w.end()
    return out.getvalue()


def run(args, capsys):
    code = main(["targets", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("quiet", [False, True])
def test_many_pairs_in_miranda_order(files, capsys, quiet):
    params = ScanParams(score_threshold=120, no_energy=True)
    args = [files["mirnas"], files["utrs"], "-sc", "120", "--no-energy"] + (["-quiet"] if quiet else [])
    code, out, _ = run(args, capsys)
    assert code == 0
    exp = expected_report(files, params, quiet=quiet)
    assert out == exp
    assert out.count("Performing Scan") == (0 if quiet else len(MIRNAS) * len(files["targets"]))
    assert ">>" in out


def test_chunks_spool_to_disk_and_gzip(files, capsys):
    params = ScanParams(score_threshold=120, no_energy=True)
    exp = expected_report(files, params)
    code, out, _ = run([files["mirnas"], files["gz"], "-sc", "120", "-noenergy", "--chunk-nt", "700"], capsys)
    assert code == 0 and out == exp


def test_energy_and_strict_through_the_cli(files, capsys):
    params = ScanParams(score_threshold=130, strict=True, energy_threshold=-5)
    code, out, _ = run([files["mirnas"], files["utrs"], "-sc", "130", "-strict", "-en", "-5", "-quiet"], capsys)
    assert code == 0
    assert out == expected_report(files, params, quiet=True)


def _fake_energy(fold_string: str) -> float:
    """A stand-in energy, a function of the string, with values where miRanda's report has its
    corner cases: 0 and positive energies below the threshold (a pair whose energies sum to 0
    or more gets no summary line), negative ones, repeated values."""
    import zlib

    return (0.0, 0.5, 2.0, -0.25, -3.5, -7.75, -12.0)[zlib.crc32(fold_string.encode()) % 7]


@pytest.mark.parametrize("fmt,quiet", [("miranda", True), ("miranda", False), ("keyval", True)])
def test_report_with_energies_in_bulk_equals_the_pair_by_pair_text(files, monkeypatch, fmt, quiet):
    """With energies the miranda writer formats a miRNA's hits in bulk (the energy filter,
    the hit lines and each pair's sums at once); the text equals the reference's, built a
    pair at a time by the slow path, for energies of every sign."""
    from jaxrna.formats.miranda import MirandaWriter

    monkeypatch.setattr(api, "energy_for", lambda params, engine, name: _fake_energy)
    params = ScanParams(score_threshold=120, energy_threshold=3)
    out = io.StringIO()
    with monkeypatch.context() as m:     # the bulk path: no pair formatted on its own
        m.setattr(MirandaWriter, "pair_text", lambda *a: pytest.fail("pair_text called"))
        api.write_scan(files["mirnas"], files["utrs"], writer_for(fmt, out, quiet=quiet), params,
                       host_workers=0, chunk_nt=700)
    expected = expected_report(files, params, fmt=fmt, quiet=quiet, energy=_fake_energy)
    assert out.getvalue() == expected
    shown = [e for e in (0.0, 0.5, 2.0, -0.25, -3.5, -7.75, -12.0)
             if (f"Energy:  {e:f} kCal/Mol" if fmt == "miranda" else f"energy={e:f}") in expected]
    assert 0.0 in shown and {0.5, 2.0} & set(shown) and min(shown) < 0, shown
    if fmt == "miranda":                 # some pair has hits but no summary (sum of energies >= 0)
        hit_pairs = {line.split("\t")[:2][1] + line.split("\t")[0]
                     for line in expected.splitlines() if line.startswith(">") and not line.startswith(">>")}
        summaries = [line for line in expected.splitlines() if line.startswith(">>")]
        assert len(summaries) < len(hit_pairs)


def test_targets_from_stdin(files):
    env = dict(os.environ, PYTHONPATH=ROOT, JAXRNA_CACHE_DIR="off")
    with open(files["utrs"]) as fh:
        data = fh.read()
    proc = subprocess.run([sys.executable, "-m", "jaxrna", "targets", files["mirnas"], "-", "-sc", "120",
                           "--no-energy", "--quiet"], input=data, capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected_report(files, ScanParams(score_threshold=120, no_energy=True), quiet=True)


def test_pair_offset_lets_split_runs_concatenate(files, tmp_path, capsys):
    full = expected_report(files, ScanParams(score_threshold=120, no_energy=True), quiet=True)
    lines = open(files["mirnas"]).read().splitlines(keepends=True)
    first, second = tmp_path / "a.fa", tmp_path / "b.fa"
    first.write_text("".join(lines[:4]))
    second.write_text("".join(lines[4:]))
    n_targets = len(files["targets"])
    _, out1, _ = run([str(first), files["utrs"], "-sc", "120", "-noenergy", "-quiet"], capsys)
    _, out2, _ = run([str(second), files["utrs"], "-sc", "120", "-noenergy", "-quiet",
                      "--pair-offset", str(2 * n_targets)], capsys)
    assert out1.endswith("Scan Complete\n\n")
    assert out1[:-len("Scan Complete\n\n")] + out2 == full


def test_tsv_and_json_many_miRNAs(files, capsys):
    params = ScanParams(score_threshold=120, no_energy=True)
    expected = [(qid, tid, h.score) for qid, _, q in MIRNAS for tid, _, t in files["targets"]
                for h in reference.scan_pair(q.upper(), t.upper(), params)]
    n_hits = len(expected)
    code, out, _ = run([files["mirnas"], files["utrs"], "-sc", "120", "--no-energy", "-f", "tsv"], capsys)
    rows = out.splitlines()
    assert code == 0 and rows[0].startswith("#") and len(rows) == n_hits + 1
    for row in rows[1:]:
        f = row.split("\t")
        assert int(f[4]) <= int(f[5]) and int(f[6]) <= int(f[7])
    code, out, _ = run([files["mirnas"], files["utrs"], "-sc", "120", "--no-energy", "-f", "json",
                        "--chunk-nt", "500"], capsys)
    objs = json.loads(out)
    assert code == 0 and len(objs) == n_hits and all(o["energy"] is None for o in objs)
    assert [(o["mirna_id"], o["target_id"], o["score"]) for o in objs] == expected


def test_display_keeps_input_letters(files, capsys):
    code, out, _ = run([files["mirnas"], files["utrs"], "-sc", "120", "--no-energy", "-quiet"], capsys)
    queries = [line for line in out.splitlines() if line.startswith("   Query:")]
    assert any("T" in q for q in queries) and any("U" in q for q in queries)


def test_whole_numbers_like_atoi(capsys):
    code, a, _ = run([MIRNA, UTR, "-sc", "155.9", "-noenergy"], capsys)
    code2, b, _ = run([MIRNA, UTR, "--score-threshold", "155", "-noenergy"], capsys)
    assert code == code2 == 0 and a == b and a.count("Forward:") == 3


@pytest.mark.parametrize("args,message", [
    (["-go", "3"], "gap penalties may not be greater than 0"),
    (["--gap-extend", "1"], "gap penalties may not be greater than 0"),
    (["-sc", "abc"], "expected a whole number"),
    (["-en", "1e3"], "expected a whole number"),
    (["-scale", "x"], "expected a number"),
    (["-sc", "0"], "score threshold must be at least 1"),
    (["-keyval", "-f", "tsv"], "contradict"),
    (["-bogus"], "unrecognized arguments"),
])
def test_invalid_options_exit_2(args, message, capsys):
    with pytest.raises(SystemExit) as exc:
        code = main(["targets", MIRNA, UTR, *args])
        raise SystemExit(code)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_input_files(tmp_path, capsys):
    bad = tmp_path / "bad.fa"
    bad.write_text(">x\nACGJT\n")
    code, _, err = run([MIRNA, str(bad)], capsys)
    assert code == 2 and "not an IUPAC nucleotide code" in err and "'x'" in err
    code, _, err = run([MIRNA, str(tmp_path / "missing.fa")], capsys)
    assert code == 2 and "no such file" in err


def test_python_api(files):
    res = api.scan_targets(files["mirnas"], files["utrs"], score_threshold=120, no_energy=True)
    assert len(res) == len(MIRNAS) * len(files["targets"])
    assert [r.pair_index for r in res] == list(range(1, len(res) + 1))
    for r in res:
        q = next(m for m in MIRNAS if m[0] == r.mirna_id and len(m[2]) == r.mirna_len)
        t = next(t for t in files["targets"] if t[0] == r.target_id)
        assert r.hits == reference.scan_pair(q[2].upper(), t[2].upper(), ScanParams(score_threshold=120, no_energy=True))
