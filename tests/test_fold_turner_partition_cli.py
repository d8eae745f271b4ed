"""``jaxrna fold --model turner --partition`` (issue 25): the ensemble as RNAfold -p, against
ViennaRNA's own API called here the way RNAfold -p calls it (and the RNAfold binary where it
is installed); the energy model as ``fold``'s default."""

import json
import math
import random
import shutil
import subprocess
import sys

import pytest

from energy_oracle import RNA, vienna_params
from test_energy_cli import normalised, run
from jaxrna.cli import main
from jaxrna.cli.fold_energy import DANGLES_NOTE

SEQS = {"hp": "GGGGAAACCCCAUCGAAAGAUU",
        "trna": "GCGGAUUUAGCUCAGUUGGGAGAGCGCCAGACUGAAGAUCUGGAGGUCCUGUGUUCGAUCCACAGAAUUCGCACCA",
        "lower_t": "gcgcTTTTgcgcNNacguAAGGCCUUCGGGCC", "short": "ACGU",
        "rand": "UAGCUAGGCUAUAUCGGAUCGAUCGGCAUAUGCGAUUAGCGCGAUAUAGCGCUAGGCAAUCG"}
KEYS = ["id", "length", "sequence", "energy", "structure", "ensemble_energy",
        "pair_probabilities", "centroid", "centroid_distance", "mfe_frequency",
        "ensemble_diversity"]


@pytest.fixture
def fasta(tmp_path):
    path = tmp_path / "in.fa"
    path.write_text("".join(f">{k} some description\n{v}\n" for k, v in SEQS.items()))
    return str(path)


def oracle(seq, dangles=2, temperature=37.0, gamma=None, unpaired=()):
    """What RNAfold -p (--MEA) computes, from ViennaRNA's API (the global parameter set)."""
    def compound(d):
        md = RNA.md()
        md.dangles, md.temperature = d, temperature
        fc = RNA.fold_compound(seq, md)
        for k in unpaired:
            fc.hc_add_up(k + 1)
        return fc

    fc = compound(dangles)
    structure, mfe = fc.mfe()
    min_en = mfe if dangles % 2 == 0 else compound(2).eval_structure(structure)
    fc.exp_params_rescale(min_en)
    symbols, ensemble = fc.pf()
    bpp = fc.bpp()
    probs = {(i, j): bpp[i][j] for i in range(1, len(seq) + 1)
             for j in range(i + 1, len(seq) + 1) if bpp[i][j] >= 1e-6}
    centroid, distance = fc.centroid()
    out = dict(energy=mfe, structure=structure, symbols=symbols, ensemble=ensemble,
               probs=probs, centroid=centroid, distance=distance,
               centroid_energy=fc.eval_structure(centroid), frequency=fc.pr_energy(min_en),
               diversity=fc.mean_bp_distance(), kT=fc.exp_params.kT / 1000, min_en=min_en)
    if gamma is not None:
        mea, value = fc.MEA(gamma)
        out.update(mea=mea, mea_value=value, mea_energy=fc.eval_structure(mea))
    return out


def rnafold_text(rid, seq, o, gamma=None):
    """RNAfold -p's lines to a file or pipe (its format strings)."""
    lines = [f">{rid}", seq, f"{o['structure']} ({o['energy']:6.2f})",
             f"{o['symbols']} [{o['ensemble']:6.2f}]",
             f"{o['centroid']} {{{o['centroid_energy']:6.2f} d={o['distance']:.2f}}}"]
    if gamma is not None:
        lines.append(f"{o['mea']} {{{o['mea_energy']:6.2f} MEA={o['mea_value']:.2f}}}")
    lines.append(" frequency of mfe structure in ensemble %g; ensemble diversity %-6.2f"
                 % (o["frequency"], o["diversity"]))
    return "\n".join(lines) + "\n"


def check_json(obj, o, mea=False):
    assert list(obj) == KEYS + (["mea_structure", "mea"] if mea else [])
    assert obj["structure"] == o["structure"]
    assert round(obj["energy"] * 100) == round(o["energy"] * 100)
    # ViennaRNA's pf() rounds the ensemble energy to a C float; the MFE structure's frequency
    # gives it in double precision: G = E_mfe + kT ln(frequency)
    assert abs(obj["ensemble_energy"] - o["ensemble"]) < 2e-5
    assert abs(obj["ensemble_energy"] - (o["min_en"] + o["kT"] * math.log(o["frequency"]))) < 1e-5
    got = {(i, j): p for i, j, p in obj["pair_probabilities"]}
    assert set(got) == set(o["probs"])
    assert all(i < j for i, j in got)
    assert max((abs(got[k] - o["probs"][k]) for k in got), default=0.0) <= 1e-6
    assert obj["centroid"] == o["centroid"]
    assert abs(obj["centroid_distance"] - o["distance"]) <= 1e-6
    assert abs(obj["mfe_frequency"] - o["frequency"]) <= 1e-6
    assert abs(obj["ensemble_diversity"] - o["diversity"]) <= 1e-6
    if mea:
        assert obj["mea_structure"] == o["mea"]
        assert abs(obj["mea"] - o["mea_value"]) <= 1e-6


@pytest.mark.parametrize("params,dangles,temp", [("turner2004", 2, 37.0), ("turner1999", 0, 25.0),
                                                 ("turner2004", 0, 50.0)])
def test_json_is_viennas_ensemble(fasta, capsys, params, dangles, temp):
    code, out, _ = run(["fold", "--model", "turner", "--partition", fasta, "-q", "-f", "json",
                        "--params", params, "--dangles", str(dangles), "-T", str(temp)], capsys)
    assert code == 0
    objs = json.loads(out)
    assert [o["id"] for o in objs] == list(SEQS)
    with vienna_params(params):
        for obj, seq in zip(objs, SEQS.values()):
            assert obj["sequence"] == normalised(seq) and obj["length"] == len(seq)
            check_json(obj, oracle(obj["sequence"], dangles, temp))


def test_dbn_is_rnafold_p_layout(fasta, capsys):
    code, out, _ = run(["fold", "--partition", fasta, "-q"], capsys)
    assert code == 0
    want = "".join(rnafold_text(k, normalised(s), oracle(normalised(s))) for k, s in SEQS.items())
    assert out == want
    assert out.splitlines()[5].startswith(" frequency of mfe structure in ensemble ")


def test_mea(fasta, capsys):
    for gamma, args in ((1.0, ["--mea"]), (2.5, ["--mea", "2.5"]), (0.5, ["--mea=0.5"])):
        code, out, _ = run(["fold", fasta, "--partition", "-q", *args], capsys)
        assert code == 0
        want = "".join(rnafold_text(k, normalised(s), oracle(normalised(s), gamma=gamma), gamma)
                       for k, s in SEQS.items())
        assert out == want
    code, out, _ = run(["fold", fasta, "--partition", "-q", "-f", "json", "--mea", "2"], capsys)
    for obj in json.loads(out):
        check_json(obj, oracle(obj["sequence"], gamma=2.0), mea=True)


def test_dangles_1_is_computed_as_2_and_said_once(fasta, capsys):
    code, out, err = run(["fold", fasta, "--partition", "--dangles", "1"], capsys)
    assert code == 0
    assert err.count(DANGLES_NOTE) == 1
    want = "".join(rnafold_text(k, normalised(s), oracle(normalised(s), dangles=1))
                   for k, s in SEQS.items())
    assert out == want
    # the ensemble lines equal dangles 2's; the MFE line is dangles 1's
    _, out2, err2 = run(["fold", fasta, "--partition", "--dangles", "2"], capsys)
    assert DANGLES_NOTE not in err2
    lines1, lines2 = out.splitlines(), out2.splitlines()
    assert [x for k, x in enumerate(lines1) if k % 6 == 3] == \
        [x for k, x in enumerate(lines2) if k % 6 == 3]
    for k, s in enumerate(SEQS.values()):
        md = RNA.md()
        md.dangles = 1
        structure, mfe = RNA.fold_compound(normalised(s), md).mfe()
        assert lines1[6 * k + 2] == f"{structure} ({mfe:6.2f})"
    # and --help says so
    with pytest.raises(SystemExit):
        main(["fold", "--help"])
    assert "treats --dangles 1 as\n--dangles 2" in capsys.readouterr().out


def test_dotplot_text_for_other_formats(fasta, capsys):
    code, out, _ = run(["fold", fasta, "--partition", "-q", "-f", "tsv"], capsys)
    assert code == 0
    records, current = {}, None
    for line in out.splitlines():
        if line.startswith("# "):
            _, rid, n, g = line.split()
            current = records.setdefault(rid, {"n": int(n), "g": float(g), "p": {}})
        else:
            i, j, p = line.split()
            current["p"][int(i), int(j)] = float(p)
    assert list(records) == list(SEQS)
    for rid, seq in SEQS.items():
        o = oracle(normalised(seq))
        assert records[rid]["n"] == len(seq)
        assert abs(records[rid]["g"] - o["ensemble"]) < 2e-5
        assert set(records[rid]["p"]) == set(o["probs"])
        assert max((abs(p - o["probs"][k]) for k, p in records[rid]["p"].items()),
                   default=0.0) <= 1e-6


def test_engine_with_unpaired_constraints_and_processes():
    from jaxrna.energy.api import EnergyModel
    from jaxrna.energy.ensemble import partition_energy_records
    from jaxrna.io.fasta import Record

    rng = random.Random(25)
    recs = [Record(f"r{k}", "".join(rng.choice("ACGU") for _ in range(rng.randint(1, 120))))
            for k in range(24)]
    unpaired = {r.id: sorted(rng.sample(range(len(r)), min(len(r), 3))) for r in recs[::2]}
    model = EnergyModel("turner2004", 42.0, 2)
    one = list(partition_energy_records(recs, model, mea_gamma=1.0, unpaired=unpaired,
                                        processes=1))
    pool = list(partition_energy_records(recs, model, mea_gamma=1.0, unpaired=unpaired,
                                         processes=2))
    assert [r.id for r in one] == [r.id for r in recs]
    for a, b, rec in zip(one, pool, recs):
        o = oracle(rec.sequence, 2, 42.0, gamma=1.0, unpaired=unpaired.get(rec.id, ()))
        for r in (a, b):
            assert (r.structure, r.centroid, r.mea_structure) == (o["structure"], o["centroid"],
                                                                 o["mea"])
            assert r.energy == round(o["energy"] * 100)
            assert abs(r.ensemble_energy - o["ensemble"]) < 2e-5
            got = {(i, j): p for i, j, p in r.pair_triples()}
            assert set(got) == set(o["probs"])
            assert all(abs(got[k] - o["probs"][k]) <= 1e-12 for k in got)
            for k in unpaired.get(rec.id, ()):
                assert r.structure[k] == "." and all(k + 1 not in pair for pair in got)
        assert a.ensemble_energy == b.ensemble_energy and a.structure == b.structure


def test_the_default_model_is_turner(fasta, capsys):
    _, default, _ = run(["fold", fasta, "-q"], capsys)
    _, turner, _ = run(["fold", "--model", "turner", fasta, "-q"], capsys)
    _, nussinov, _ = run(["fold", "--model", "nussinov", fasta, "-q"], capsys)
    assert default == turner != nussinov
    assert default.splitlines()[2].endswith(" ( -6.50)")
    _, default_pf, _ = run(["fold", fasta, "-q", "--partition"], capsys)
    _, turner_pf, _ = run(["fold", "--model", "turner", fasta, "-q", "--partition"], capsys)
    assert default_pf == turner_pf and default_pf.splitlines()[3].endswith("]")


@pytest.mark.parametrize("args,says", [
    (["--partition", "--mea", "x"], None),
    (["--mea"], "--mea needs --partition"),
    (["--model", "nussinov", "--partition", "--mea"], "--mea needs --model turner"),
    (["--partition", "--temperature", "2"], "--temperature belongs to the Nussinov model"),
    (["--model", "turner", "--partition", "--temperature", "2"], "-T/--temp"),
    (["--weights", "bpmax"], "add --model nussinov"),
    (["--partition", "--score-only", "-f", "json"], "--score-only"),
    (["--partition", "--params", "/nonexistent.par"], "nonexistent"),
])
def test_bad_options_exit_2(fasta, capsys, args, says):
    if says is None:
        with pytest.raises(SystemExit) as exc:
            main(["fold", fasta, *args])
        assert exc.value.code == 2
        assert "expected a number GAMMA" in capsys.readouterr().err
        return
    code, out, err = run(["fold", fasta, *args], capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and says in err, err


def test_bad_input_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.fa"
    bad.write_text(">ok\nGGGGAAACCCC\n>b\nACGUXZ\n")
    out = tmp_path / "out.txt"
    r = subprocess.run([sys.executable, "-m", "jaxrna", "fold", "--partition", str(bad), "-o",
                        str(out)], capture_output=True, text=True)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "record 'b'" in r.stderr, r.stderr
    assert not out.exists()


def test_plot(fasta, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "dots.png"
    code, _, _ = run(["fold", fasta, "--partition", "-q", "--plot", str(png)], capsys)
    assert code == 0
    assert [p.name for p in sorted(tmp_path.glob("dots_*.png"))] == \
        [f"dots_{k}.png" for k in range(1, len(SEQS) + 1)]


@pytest.mark.external
@pytest.mark.skipif(shutil.which("RNAfold") is None, reason="the RNAfold binary is not installed")
@pytest.mark.parametrize("args,theirs", [([], []), (["--mea"], ["--MEA"]),
                                         (["--dangles", "0", "-T", "30"], ["-d0", "-T", "30"])])
def test_dbn_equals_rnafold_p(tmp_path, capsys, args, theirs):
    fa = tmp_path / "in.fa"
    seqs = {k: normalised(v) for k, v in SEQS.items() if "N" not in normalised(v)}
    fa.write_text("".join(f">{k}\n{v}\n" for k, v in seqs.items()))
    r = subprocess.run(["RNAfold", "-p", "--noPS", *theirs, str(fa)], capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    code, out, _ = run(["fold", str(fa), "--partition", "-q", *args], capsys)
    assert code == 0 and out == r.stdout


def test_golden_example_is_rnafold_p_mea(capsys, test_data):
    """test-data/fold_example_turner_partition.dbn (the Galaxy tool's expected output) is what
    RNAfold -p --MEA prints for test-data/fold_example.fa, and what jaxrna writes."""
    import os

    golden = open(os.path.join(test_data, "fold_example_turner_partition.dbn")).read()
    lines = golden.splitlines()
    want = ""
    for k in range(0, len(lines), 7):
        want += rnafold_text(lines[k][1:], lines[k + 1], oracle(lines[k + 1], gamma=1.0), 1.0)
    assert golden == want
    code, out, _ = run(["fold", os.path.join(test_data, "fold_example.fa"), "--partition",
                        "--mea", "-q"], capsys)
    assert code == 0 and out == golden


def test_max_memory_refuses_records_and_lists_them(fasta, capsys):
    code, out, err = run(["fold", fasta, "--partition", "-f", "json", "--max-memory", "1e-7"],
                         capsys)
    assert code == 2 and json.loads(out) == []
    assert "record 'trna' skipped" in err and "--max-memory" in err


@pytest.mark.parametrize("params,dangles,temp,processes", [
    ("turner2004", 2, 37.0, 2), ("turner1999", 0, 24.0, 2), ("turner1999", 1, 45.0, 1),
    ("custom", 2, 37.0, 1), ("custom", 0, 30.0, 2)])
def test_random_sweep_against_vienna(tmp_path, params, dangles, temp, processes):
    """Random sequences (1-260 nt, some with unpaired positions) in every parameter set, dangle
    model and a few temperatures, in this process and on a pool: equal to ViennaRNA's API."""
    from test_energy_params import CUSTOM

    from jaxrna.energy.api import EnergyModel
    from jaxrna.energy.ensemble import partition_energy_records
    from jaxrna.io.fasta import Record

    if params == "custom":
        params = str(tmp_path / "my.par")
        open(params, "w").write(CUSTOM)
    rng = random.Random(f"{params}{dangles}{temp}")
    recs = [Record(f"r{k}", "".join(rng.choice("ACGU") for _ in range(rng.randint(1, 260))))
            for k in range(30)]
    unpaired = {r.id: sorted(rng.sample(range(len(r)), min(len(r), 4))) for r in recs[::3]}
    got = list(partition_energy_records(recs, EnergyModel(params, temp, dangles), mea_gamma=1.5,
                                        unpaired=unpaired, processes=processes))
    assert [r.id for r in got] == [r.id for r in recs]
    with vienna_params(params):
        for r, rec in zip(got, recs):
            o = oracle(rec.sequence, dangles, temp, gamma=1.5, unpaired=unpaired.get(rec.id, ()))
            assert (r.structure, r.centroid, r.mea_structure, r.ensemble_symbols) == \
                (o["structure"], o["centroid"], o["mea"], o["symbols"])
            assert r.energy == round(o["energy"] * 100)
            assert abs(r.ensemble_energy - o["ensemble"]) < 2e-5
            assert abs(r.ensemble_energy - (o["min_en"] + o["kT"] * math.log(o["frequency"]))) \
                < 1e-5
            p = {(i, j): x for i, j, x in r.pair_triples()}
            assert set(p) == set(o["probs"]) and all(abs(p[k] - o["probs"][k]) <= 1e-12 for k in p)
            assert (r.centroid_distance, r.mfe_frequency, r.ensemble_diversity) == \
                pytest.approx((o["distance"], o["frequency"], o["diversity"]), abs=1e-12)
            assert (r.centroid_energy, r.mea, r.mea_energy) == \
                pytest.approx((o["centroid_energy"], o["mea_value"], o["mea_energy"]), abs=1e-9)


def test_in_process_par_file_folds_as_the_loaded_set(tmp_path):
    """In the caller's process a .par file's set is loaded around each task (a parameter
    object substituted into a fold compound folds some sequences 0.3-0.5 kcal/mol higher),
    for the MFE engine as for the partition function; the caller's set is restored."""
    from test_energy_params import CUSTOM

    from jaxrna.energy import vienna
    from jaxrna.energy.api import EnergyModel
    from jaxrna.energy.partition_vienna import partition_records
    from jaxrna.io.fasta import Record

    par = tmp_path / "my.par"
    par.write_text(CUSTOM)
    rng = random.Random("/tmp/my.par237.0")     # 6 of these 30 differed
    recs = [Record(f"r{k}", "".join(rng.choice("ACGU") for _ in range(rng.randint(1, 260))))
            for k in range(30)]
    model = EnergyModel(str(par), 37.0, 2)
    mfe = [r.energy for r in vienna.fold_records(recs, model, processes=1)]
    pf = [r.energy for r in partition_records(recs, model, processes=1)]
    with vienna_params(str(par)):
        want = [round(RNA.fold_compound(r.sequence).mfe()[1] * 100) for r in recs]
    assert mfe == want and pf == want
    # the caller's set (Turner 2004) is in place again
    assert round(RNA.fold_compound(SEQS["trna"]).mfe()[1] * 100) == \
        round(oracle(SEQS["trna"])["energy"] * 100)
