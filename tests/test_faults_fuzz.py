"""Fuzz (issue 15): random bytes and random option values thrown at every subcommand. Every
run ends with exit status 0 or 2, never a traceback, and leaves no file behind: no temporary
file ever, and no output when it failed with an error. Runs in-process through
``jaxrna.cli.main`` (fast), plus a few real subprocesses."""

import contextlib
import gzip
import io
import os
import random
import tempfile

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from faults_common import run
from jaxrna.cli import main

# ------------------------------------------------------------------------------------------
# inputs: FASTA-like text (short sequences: a handful of compiled shapes), or random bytes

ids = st.text("abcXYZ019_|.-", min_size=0, max_size=6)
residues = st.text("ACGUTNacgu", min_size=0, max_size=14) | st.text(
    "ACGU*-1 \t>x\u00e9\r", min_size=0, max_size=8)
record = st.builds(lambda i, s, d: f">{i}{d}\n{s}\n", ids, residues,
                   st.sampled_from(["", " desc", "\t", "  "]))
fasta_text = st.lists(record, min_size=0, max_size=3).map("".join) | st.text(max_size=40)
#: Valid FASTA: a few short records (a handful of compiled shapes in all).
clean_fasta = st.lists(st.text("ACGU", min_size=1, max_size=12), min_size=1, max_size=3).map(
    lambda seqs: "".join(f">r{k} d\n{s}\n" for k, s in enumerate(seqs)).encode())


@st.composite
def file_bytes(draw, clean: bool):
    if clean:
        data = draw(clean_fasta)
        return gzip.compress(data) if draw(st.integers(0, 4)) == 0 else data
    kind = draw(st.sampled_from(["text", "text", "text", "bytes", "gzip", "cut gzip"]))
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    data = draw(fasta_text).encode("utf-8", "surrogatepass")
    if kind == "gzip":
        return gzip.compress(data)
    if kind == "cut gzip":
        z = gzip.compress(data)
        return z[:draw(st.integers(0, len(z)))]
    return data


# ------------------------------------------------------------------------------------------
# options: (valid values, anything else): values out of range, and garbage

garbage = st.sampled_from(["", "x", "-1", "0", "nan", "inf", "-inf", "1e309", "1/0", "3/2",
                           "99999999999999999999", "\u00e9", "--", "-q"])


def opt(*valid):
    return (st.sampled_from(valid), st.sampled_from(valid) | garbage)


FLAG = (None, None)
numbers = opt("1", "2", "3", "0.5", "7")
weights = (st.sampled_from(["unit", "bpmax", "integer", "GC=3,AU=2,GU=1"]),
           st.sampled_from(["GC=1", "GC=x", "GC=3,AU=2,GU=1,AA=1", "GC=-1,AU=0,GU=0"]) | garbage)
seqs = (st.text("ACGU", min_size=1, max_size=10), st.text("ACGUNx ", min_size=0, max_size=10))
formats = {"fold": ["dbn", "ct", "bpseq", "tsv", "json"], "align": ["pair", "tsv", "json"],
           "interact": ["tsv", "dbn", "json"], "targets": ["miranda", "keyval", "tsv", "json"]}
COMMON = {"--backend": opt("cpu", "auto", "cpu", "gpu"), "-q": FLAG}
OPTIONS = {
    "fold": {**COMMON, "-w": weights, "-m": opt("0", "1", "3", "5"), "--score-only": FLAG,
             "--partition": FLAG, "--temperature": opt("0.5", "1", "2"),
             "--max-memory": opt("1e-9", "4", "1000"), "--sequence": seqs,
             "--model": opt("nussinov", "turner", "nussinov"), "--mea": opt("1", "0.5")},
    "align": {**COMMON, "--pairs": opt("all", "zip"), "--mode": opt("global", "local"),
              "--match": numbers, "--mismatch": opt("-1", "-3", "0"),
              "--matrix": opt("BLOSUM62", "NUC.4.4"), "--preset": opt("edit"),
              "--gap-open": numbers, "--gap-extend": numbers, "--score-only": FLAG,
              "--posterior": FLAG, "--temperature": opt("0.5", "1"),
              "--max-memory": opt("1e-9", "4")},
    "interact": {**COMMON, "--seq1": seqs, "--seq2": seqs, "--pairs": opt("all", "zip"),
                 "-w": weights, "--window1": opt("1", "4", "8"), "--window2": opt("2", "5"),
                 "--outer": opt("auto", "1", "2"), "--score-only": FLAG,
                 "--max-memory": opt("1e-9", "4"), "--all-windows": (st.just("@OUT2"),) * 2},
    "targets": {"--backend": COMMON["--backend"], "-sc": opt("100", "140", "60"),
                "-en": opt("1", "-20"), "-scale": opt("4", "1", "2.5"), "-go": opt("-9", "-2"),
                "-ge": opt("-4", "-1"), "-strict": FLAG, "-quiet": FLAG, "-keyval": FLAG,
                "--pair-offset": opt("0", "5"), "--chunk-nt": opt("1", "3", "1000")},
}
for sub, fmts in formats.items():
    OPTIONS[sub]["-f"] = (st.sampled_from(fmts), st.sampled_from(fmts + ["nope", "pair"]))
INPUTS = {"fold": (0, 2), "align": (2, 2), "interact": (0, 2), "targets": (2, 2)}


@st.composite
def command_lines(draw):
    """A subcommand, its input files and options: clean (valid inputs and values: the run
    goes deep) or not (anything goes)."""
    sub = draw(st.sampled_from(sorted(OPTIONS)))
    clean = draw(st.booleans())
    lo, hi = INPUTS[sub]
    files = draw(st.lists(file_bytes(clean), min_size=lo, max_size=hi))
    opts = draw(st.lists(st.sampled_from(sorted(OPTIONS[sub])), max_size=4, unique=True))
    argv = [sub, *(f"@IN{k}" for k in range(len(files)))]
    for name in opts:
        argv.append(name)
        strategy = OPTIONS[sub][name][0 if clean else 1]
        if strategy is not None:
            argv.append(draw(strategy))
    if sub == "targets":
        argv.append("--no-energy")
    out = draw(st.sampled_from([None, "out.txt", "out.txt", "missing/out.txt", "."]))
    if out is not None:
        argv += ["-o", f"@DIR/{out}"]
    return argv, files


def realise(argv, files, d):
    paths = []
    for k, data in enumerate(files):
        p = os.path.join(d, f"in{k}.fa")
        with open(p, "wb") as fh:
            fh.write(data)
        paths.append(p)
    subs = {f"@IN{k}": p for k, p in enumerate(paths)}
    subs["@OUT2"] = os.path.join(d, "windows.tsv")
    out = []
    for a in argv:
        a = subs.get(a, a)
        out.append(a.replace("@DIR", d))
    return out, {os.path.basename(p) for p in paths}


def run_in_process(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def check(code, err, d, inputs):
    assert code in (0, 2), (code, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    left = set(os.listdir(d)) - inputs - {"missing"}
    assert not [n for n in left if n.startswith(".jaxrna-") or n.endswith(".tmp")], left
    if "jaxrna: error:" in err or code != 0 and "usage:" in err:
        assert left == set(), (left, err)      # a run that failed writes nothing
    assert left <= {"out.txt", "windows.tsv"}, left


# JAXRNA_FUZZ_EXAMPLES=2000 for a longer search (CI runs 70: well under a minute)
@pytest.mark.slow
@settings(max_examples=int(os.environ.get("JAXRNA_FUZZ_EXAMPLES", 70)), deadline=None,
          suppress_health_check=list(HealthCheck), derandomize=True)
@given(command_lines())
def test_fuzz_in_process(case):
    argv, files = case
    with tempfile.TemporaryDirectory() as d:
        argv, inputs = realise(argv, files, d)
        code, _, err = run_in_process(argv)
        check(code, err, d, inputs)


def test_fuzz_subprocesses(tmp_path):
    """The real CLI on random bytes, each subcommand once."""
    rng = random.Random(15)
    for sub in ["fold", "align", "interact", "targets"]:
        d = tmp_path / sub
        d.mkdir()
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        files = [blob if j == 0 else b">ok\nGGGAAAUCCC\n" for j in range(INPUTS[sub][1] or 1)]
        argv, inputs = realise([sub, *(f"@IN{j}" for j in range(len(files))), "-o",
                                "@DIR/out.txt"], files, str(d))
        r = run(argv + (["--no-energy"] if sub == "targets" else []))
        check(r.returncode, r.stderr, str(d), inputs)
        assert r.returncode == 2 and r.stderr.startswith("jaxrna: error: "), r.stderr
