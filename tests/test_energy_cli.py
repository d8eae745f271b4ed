"""``jaxrna fold --model turner``: RNAfold's layout, the other formats, option errors."""

import json
import os

import pytest

from energy_oracle import vienna_mfe, vienna_params
from jaxrna.cli import main

SEQS = {"hp": "GGGGAAACCCCAUCGAAAGAUU", "trna_half": "GCGGAUUUAGCUCAGUUGGGAGAGCGCCAGACUGAAGAU",
        "lower_t": "gcgcTTTTgcgcNNacguAAGGCCUUCGGGCC", "short": "ACGU"}


@pytest.fixture
def fasta(tmp_path):
    path = tmp_path / "in.fa"
    path.write_text("".join(f">{k} some description\n{v}\n" for k, v in SEQS.items()))
    return str(path)


def run(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def normalised(seq):
    return seq.upper().replace("T", "U")


def test_dbn_is_rnafold_layout(fasta, capsys):
    code, out, _ = run(["fold", "--model", "turner", fasta, "-q"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 3 * len(SEQS)
    for k, (rid, seq) in enumerate(SEQS.items()):
        header, sequence, last = lines[3 * k:3 * k + 3]
        assert header == f">{rid}"
        assert sequence == normalised(seq)
        want, structure, fc = vienna_mfe(sequence, 2, 37.0)
        assert last == f"{structure} ({want / 100:6.2f})" or \
            (last.endswith(f" ({want / 100:6.2f})") and
             round(fc.eval_structure(last.split(" ")[0]) * 100) == want)


def test_options_reach_the_model(fasta, capsys):
    code, out, _ = run(["fold", "--model", "turner", fasta, "-q", "--params", "turner1999",
                        "--dangles", "0", "-T", "30", "-f", "json"], capsys)
    assert code == 0
    objs = json.loads(out)
    with vienna_params("turner1999"):
        for obj in objs:
            want, _, fc = vienna_mfe(obj["sequence"], 0, 30.0)
            assert round(obj["energy"] * 100) == want
            assert round(fc.eval_structure(obj["structure"]) * 100) == want
            assert (obj["model"], obj["params"], obj["temperature"], obj["dangles"]) == \
                ("turner", "turner1999", 30.0, 0)
            assert [p for p in obj["pairs"] if obj["structure"][p[0] - 1] != "("] == []


def test_other_formats_carry_the_energy(capsys):
    seq = SEQS["hp"]
    want = vienna_mfe(seq)[0]
    _, tsv, _ = run(["fold", "--model", "turner", "--sequence", seq, "-q", "-f", "tsv"], capsys)
    assert tsv.splitlines()[0] == "#id\tlength\tenergy\tstructure"
    assert tsv.splitlines()[1].split("\t")[:3] == ["seq", str(len(seq)), f"{want / 100:.2f}"]
    _, ct, _ = run(["fold", "--model", "turner", "--sequence", seq, "-q", "-f", "ct"], capsys)
    assert ct.splitlines()[0] == f"{len(seq):>5}  ENERGY = {want / 100:6.2f}  seq"
    _, bpseq, _ = run(["fold", "--model", "turner", "--sequence", seq, "-q", "-f", "bpseq"], capsys)
    assert bpseq.splitlines()[:2] == ["# seq", f"# energy = {want / 100:.2f}"]
    _, score_only, _ = run(["fold", "--model", "turner", "--sequence", seq, "-q", "-f", "tsv",
                            "--score-only"], capsys)
    assert score_only.splitlines()[1].endswith("\t-")


def test_parameter_file(tmp_path, capsys):
    from test_energy_params import CUSTOM

    path = tmp_path / "my.par"
    path.write_text(CUSTOM)
    seq = SEQS["trna_half"]
    code, out, _ = run(["fold", "--model", "turner", "--sequence", seq, "-q", "--params",
                        str(path), "-f", "json"], capsys)
    assert code == 0
    with vienna_params(str(path)):
        want = vienna_mfe(seq)[0]
    obj = json.loads(out)[0]
    assert round(obj["energy"] * 100) == want and obj["params"] == "my.par"


@pytest.mark.parametrize("args,fragment", [
    (["--model", "turner", "--weights", "bpmax"], "--weights"),
    (["--model", "turner", "--min-loop", "2"], "--min-loop"),
    (["--model", "nussinov", "--dangles", "1"], "--dangles needs --model turner"),
    (["--model", "nussinov", "-T", "25", "--params", "turner1999"], "need --model turner"),
    (["--weights", "bpmax"], "add --model nussinov"),
    (["--model", "turner", "--params", "no/such.par"], "no such parameter file"),
    (["--model", "turner", "--temperature", "2"], "-T/--temp"),
    (["--model", "nussinov", "--temperature", "2"], "--temperature needs --partition"),
])
def test_bad_combinations_are_errors(args, fragment, capsys):
    code, _, err = run(["fold", "--sequence", "GGGAAAUCCC", *args], capsys)
    assert code == 2
    assert err.startswith("jaxrna: error:") and fragment in err


def test_bad_values_are_argparse_errors(capsys):
    for args in (["--dangles", "3"], ["-T", "-300"], ["-T", "warm"], ["--model", "zuker"]):
        with pytest.raises(SystemExit) as exc:
            main(["fold", "--sequence", "GGGAAAUCCC", "--model", "turner", *args])
        assert exc.value.code == 2
    capsys.readouterr()


def test_turner_is_the_default_and_nussinov_stays(capsys):
    code, out, _ = run(["fold", "--model", "nussinov", "--sequence", "GGGAAAUCCC", "-q"], capsys)
    assert code == 0 and out.splitlines()[-1] == "(((...))). (3)"
    code, out, _ = run(["fold", "--sequence", "GGGAAAUCCC", "-q"], capsys)
    want, structure, _ = vienna_mfe("GGGAAAUCCC")
    assert code == 0 and out.splitlines()[-1] == f"{structure} ({want / 100:6.2f})"


def test_example_is_byte_identical_to_rnafold(capsys, test_data):
    """test-data/fold_example_turner.dbn (also the Galaxy tool's expected output) is what
    RNAfold prints for test-data/fold_example.fa, structures and energies."""
    golden = open(os.path.join(test_data, "fold_example_turner.dbn")).read()
    lines = golden.splitlines()
    for k in range(0, len(lines), 3):
        structure, energy = vienna_mfe(lines[k + 1])[1:2] + (vienna_mfe(lines[k + 1])[0],)
        assert lines[k + 2] == f"{structure} ({energy / 100:6.2f})"
    code, out, _ = run(["fold", "--model", "turner", os.path.join(test_data, "fold_example.fa"),
                        "-q"], capsys)
    assert code == 0 and out == golden


def test_nextflow_turner_parameters_become_these_options():
    from test_nextflow_groovy import pipeline_params, task_ext

    from jaxrna.cli import build_parser
    from jaxrna.cli.fold_energy import energy_model
    from jaxrna.energy.api import EnergyModel

    params = pipeline_params(fold_model="turner", fold_params="turner1999", fold_dangles=1, fold_temp=30)
    args = task_ext("JAXRNA_FOLD", params, {"id": "x"})["args"].split()
    parsed = build_parser().parse_args(["fold", *args, "a.fa"])
    assert energy_model(parsed) == EnergyModel("turner1999", 30.0, 1)
    default = task_ext("JAXRNA_FOLD", pipeline_params(), {"id": "x"})["args"].split()
    assert energy_model(build_parser().parse_args(["fold", *default, "a.fa"])) == EnergyModel()
    nussinov = task_ext("JAXRNA_FOLD", pipeline_params(fold_model="nussinov"), {"id": "x"})
    assert energy_model(build_parser().parse_args(["fold", *nussinov["args"].split(),
                                                   "a.fa"])) is None


@pytest.mark.slow
def test_warm_cpu_run_loads_the_stored_program(fasta, tmp_path):
    """A second ``fold --model turner`` process with the same cache loads the energy program
    from jaxrna's store, also on a CPU (tracing it is most of a small run): nothing compiled,
    nothing traced for it, the same output."""
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, JAXRNA_CACHE_DIR=str(tmp_path / "cache"), JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    outs, profiles = [], []
    for run_ in ("cold", "warm"):
        env["JAXRNA_PROFILE"] = str(tmp_path / f"{run_}.json")
        r = subprocess.run([sys.executable, "-m", "jaxrna", "fold", "--model", "turner", fasta,
                            "--backend", "cpu"], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
        with open(env["JAXRNA_PROFILE"]) as fh:
            profiles.append(json.load(fh)["counts"])
    assert outs[0] == outs[1] and outs[0].count(">") == len(SEQS)
    assert profiles[0].get("executables_compiled", 0) >= 1
    assert profiles[1].get("executables_loaded", 0) >= 1
    assert profiles[1].get("executables_compiled", 0) == 0, profiles[1]


def test_a_record_too_large_for_the_memory_limit_is_left_out_by_name(tmp_path, capsys):
    """--max-memory (GiB) is checked per record before any folding: the record that needs
    more is named and left out, the others are folded, exit status 2."""
    path = tmp_path / "two.fa"
    path.write_text(">small\nGGGGAAACCCC\n>big\n" + "GGGAAACCCU" * 40 + "\n")
    code, out, err = run(["fold", "--model", "turner", str(path), "--max-memory", "0.01"], capsys)
    assert code == 2
    assert out.splitlines()[:3] == [">small", "GGGGAAACCCC", "((((...)))) ( -4.50)"]
    assert "big" not in out
    assert "record 'big' skipped: 400 nt need about" in err and "--max-memory" in err
