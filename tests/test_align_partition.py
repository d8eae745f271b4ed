"""Alignment partition function and match posteriors (jaxrna.align.partition) against
independent oracles: every alignment enumerated, a plain forward-backward in Python floats,
the max-plus reference (jaxrna.align.reference) and finite differences. Float64 throughout
(a fixture turns x64 on for each test and restores it)."""

import importlib.util
import json
import math
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrna.align.api import align
from jaxrna.align.partition import (_batch_log_z, batch_log_partition, batch_posteriors,
                                    forward, gap_scores, log_partition, match_posteriors,
                                    substitution_scores)
from jaxrna.align.partition_reference import enumerated, forward_backward
from jaxrna.align.reference import gotoh
from jaxrna.align.scoring import Scoring, edit_preset, from_matrix, match_mismatch
from jaxrna.cli import main
from jaxrna.semiring import MAX_PLUS, log_semiring

SCHEMES = {
    "linear": match_mismatch(1, -1, 1, 1),
    "affine": match_mismatch(2, -3, 5, 2),
    "open<extend": match_mismatch(1, -2, 1, 3),
    "halves": match_mismatch(5, -4, 10, 0.5),
    "NUC.4.4": from_matrix("NUC.4.4", 10, 0.5),
    "BLOSUM62": from_matrix("BLOSUM62", 11, 1),
}
# 1-nt, equal and unequal lengths, both orientations (the shorter sequence goes on the lanes)
DNA_PAIRS = [("A", "A"), ("A", "G"), ("G", "ACGT"), ("ACGTA", "CG"), ("GATT", "GAT"),
             ("ACG", "ACG"), ("CA", "ACA")]
PROTEIN_PAIRS = [("W", "W"), ("WK", "KWC"), ("MKV", "MV"), ("HEAG", "HAG")]


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def dense(q, t, scoring):
    """Substitution scores in the user's units, float64, by plain NumPy."""
    return scoring.matrix[scoring.encode(q)][:, scoring.encode(t)] / scoring.scale


def gaps(scoring):
    return -scoring.gap_open / scoring.scale, -scoring.gap_extend / scoring.scale


def random_seq(rng, n, alphabet="ACGT"):
    return "".join(rng.choice(alphabet) for _ in range(n))


# --------------------------------------------------------------------------------------
# against enumeration


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["global", "local"])
@pytest.mark.parametrize("name", list(SCHEMES))
def test_equals_enumeration(name, mode):
    scoring = SCHEMES[name]
    pairs = PROTEIN_PAIRS if name == "BLOSUM62" else DNA_PAIRS
    temperature = 3.0 if name in ("NUC.4.4", "BLOSUM62", "halves") else 1.0
    for q, t in pairs:
        lz, P = match_posteriors(q, t, scoring, mode=mode, temperature=temperature)
        e_lz, e_P, _ = enumerated(dense(q, t, scoring), *gaps(scoring), local=mode == "local",
                                  temperature=temperature)
        assert lz == pytest.approx(e_lz, abs=1e-9), (q, t)
        assert P.shape == (len(q), len(t))
        np.testing.assert_allclose(P, e_P, atol=1e-9, err_msg=f"{q} x {t}")
        assert log_partition(q, t, scoring, mode=mode, temperature=temperature) == \
            pytest.approx(e_lz, abs=1e-9)


def test_empty_sequences_global():
    scoring = SCHEMES["affine"]
    for q, t in [("", "ACG"), ("AC", ""), ("", "")]:
        lz, P = match_posteriors(q, t, scoring, temperature=2.0)
        e_lz = enumerated(np.zeros((len(q), len(t))), *gaps(scoring), local=False,
                          temperature=2.0)[0]
        assert lz == pytest.approx(e_lz, abs=1e-12)
        assert P.shape == (len(q), len(t))
        assert log_partition(q, t, scoring, mode="local") == 0.0   # only the empty one


def test_other_temperatures_and_edit_preset():
    for temperature in (0.3, 7.0):
        q, t = "GATTA", "GTA"
        scoring = SCHEMES["affine"]
        lz, P = match_posteriors(q, t, scoring, mode="local", temperature=temperature)
        e_lz, e_P, _ = enumerated(dense(q, t, scoring), *gaps(scoring), local=True,
                                  temperature=temperature)
        assert lz == pytest.approx(e_lz, abs=1e-9)
        np.testing.assert_allclose(P, e_P, atol=1e-9)
    edit = edit_preset()                   # weighs exp(-cost / T)
    lz, P = match_posteriors("ACGT", "AGT", preset="edit")
    e_lz, e_P, best = enumerated(dense("ACGT", "AGT", edit), *gaps(edit), local=False)
    assert lz == pytest.approx(e_lz, abs=1e-9) and best == -3
    np.testing.assert_allclose(P, e_P, atol=1e-9)
    with pytest.raises(ValueError, match="global"):
        log_partition("AC", "A", preset="edit", mode="local")


def test_encoded_arrays_and_errors():
    scoring = SCHEMES["linear"]
    a = log_partition("GATTA", "GTA", scoring, mode="local")
    b = log_partition(scoring.encode("GATTA"), scoring.encode("GTA"), scoring, mode="local")
    assert a == b
    with pytest.raises(ValueError, match="codes must lie"):
        log_partition(np.array([0, 99]), "A", scoring)
    with pytest.raises(ValueError, match="not in the alphabet"):
        log_partition("AC*", "A", from_matrix("NUC.4.4"))
    with pytest.raises(ValueError, match="mode"):
        log_partition("A", "A", scoring, mode="semi")
    with pytest.raises(ValueError, match="either scoring or score options"):
        log_partition("A", "A", scoring, match=2)
    with pytest.raises(ValueError, match="temperature"):
        log_partition("A", "A", scoring, temperature=0)


# --------------------------------------------------------------------------------------
# beyond enumeration: forward-backward, sum rules, limits, gradients


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["global", "local"])
def test_forward_backward_and_sum_rules(mode):
    rng = random.Random(7)
    scoring = SCHEMES["affine"]
    sizes = [(31, 24), (9, 40), (1, 17), (32, 48)]
    pairs = [(random_seq(rng, m), random_seq(rng, n)) for m, n in sizes]
    S = np.zeros((len(pairs), 32, 48))
    for b, (q, t) in enumerate(pairs):
        S[b, :len(q), :len(t)] = dense(q, t, scoring)
    m = np.array([m for m, _ in sizes])
    n = np.array([n for _, n in sizes])
    lz, P = batch_posteriors(S, *gaps(scoring), m, n, 1.5, local=mode == "local")
    for b, (q, t) in enumerate(pairs):
        r_lz, r_P = forward_backward(dense(q, t, scoring), *gaps(scoring),
                                     local=mode == "local", temperature=1.5)
        Pb = np.asarray(P[b, :len(q), :len(t)])
        assert float(lz[b]) == pytest.approx(r_lz, abs=1e-9)
        np.testing.assert_allclose(Pb, r_P, atol=1e-9)
        # each query (target) residue sits in at most one M column
        assert Pb.min() >= -1e-12
        assert Pb.sum(axis=1).max() <= 1 + 1e-9 and Pb.sum(axis=0).max() <= 1 + 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["global", "local"])
def test_zero_temperature_limit_is_the_best_score(mode):
    rng = random.Random(3)
    for name in ("affine", "open<extend", "NUC.4.4"):
        scoring = SCHEMES[name]
        for _ in range(3):
            q, t = random_seq(rng, rng.randint(1, 16)), random_seq(rng, rng.randint(1, 16))
            best = float(align(q, t, mode, scoring=scoring).score)
            paths = (len(q) + len(t)) * math.log(3) + 2 * math.log(len(q) * len(t) + 1)
            previous = None
            for temperature in (1.0, 0.1, 0.01, 0.001):
                value = temperature * log_partition(q, t, scoring, mode=mode,
                                                    temperature=temperature)
                # best <= T ln Z <= best + T ln(number of alignments)
                assert best - 1e-9 <= value <= best + temperature * paths + 1e-9
                if previous is not None:
                    assert value <= previous + 1e-9         # T ln Z falls with T
                previous = value
            assert value == pytest.approx(best, abs=0.02)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["global", "local"])
def test_gradients_equal_finite_differences(mode):
    rng = np.random.default_rng(11)
    S = np.zeros((1, 16, 16))
    S[0, :6, :5] = rng.normal(size=(6, 5))
    local, T = mode == "local", 1.3
    m, n = np.array([6]), np.array([5])

    def f(S, go, ge):
        return _batch_log_z(S, go, ge, m, n, T, local=local)[0]

    grads = jax.jit(jax.grad(f, argnums=(0, 1, 2)))(S, -1.2, -0.4)
    eps = 1e-6
    for i, j in [(0, 0), (2, 3), (5, 4), (3, 1)]:
        d = np.zeros_like(S)
        d[0, i, j] = eps
        fd = (f(S + d, -1.2, -0.4) - f(S - d, -1.2, -0.4)) / (2 * eps)
        assert float(grads[0][0, i, j]) == pytest.approx(float(fd), abs=1e-7)
    for k, (a, b) in enumerate([((-1.2 + eps, -0.4), (-1.2 - eps, -0.4)),
                                ((-1.2, -0.4 + eps), (-1.2, -0.4 - eps))]):
        fd = (f(S, *a) - f(S, *b)) / (2 * eps)
        assert float(grads[k + 1]) == pytest.approx(float(fd), abs=1e-7)
    assert np.abs(np.asarray(grads[0])[0, 6:]).max() == 0       # padding has no say
    # and the posterior is T times the gradient
    _, P = batch_posteriors(S, -1.2, -0.4, m, n, T, local=local)
    np.testing.assert_allclose(P, T * np.asarray(grads[0]), atol=1e-12)


@pytest.mark.slow
def test_forward_semiring_temperature():
    """forward(..., semiring=log_semiring(T)) is ln Z at T (the batched paths divide the
    scores by T and sum at T = 1 instead)."""
    S = jnp.asarray(np.random.default_rng(4).normal(size=(3, 4)))
    for local in (False, True):
        got = forward(S, -1.0, -0.5, local=local, semiring=log_semiring(0.7))
        want = enumerated(np.asarray(S), -1.0, -0.5, local=local, temperature=0.7)[0]
        assert float(got) == pytest.approx(want, abs=1e-9)


# --------------------------------------------------------------------------------------
# the shared cell in max-plus, batches


@pytest.mark.slow
def test_max_plus_equals_alignment_scores():
    rng = random.Random(5)
    skew_matrix = np.array([[3, -1, -2, 0], [-4, 2, -1, -3], [1, -2, 4, -1], [-2, 0, -3, 1]])
    custom = Scoring(alphabet="ACGT", matrix=skew_matrix, gap_open=3, gap_extend=1,
                     name="asymmetric")
    for scoring in (SCHEMES["affine"], SCHEMES["open<extend"], SCHEMES["halves"], custom):
        go, ge = gap_scores(scoring, jnp.int32)
        for local in (False, True):
            pairs = [(random_seq(rng, rng.randint(1, 16)), random_seq(rng, rng.randint(1, 16)))
                     for _ in range(8)]
            h, w = 16, 16                  # padded: one compiled shape
            S = np.zeros((len(pairs), h, w), np.int32)
            for b, (q, t) in enumerate(pairs):
                S[b, :len(q), :len(t)] = scoring.matrix[scoring.encode(q)][:, scoring.encode(t)]
            m = np.array([len(q) for q, _ in pairs])
            n = np.array([len(t) for _, t in pairs])
            got = np.asarray(batch_log_partition(S, go, ge, m, n, local=local,
                                                 semiring=MAX_PLUS))
            assert got.dtype == np.int32
            want = [gotoh(q, t, scoring, local=local).score for q, t in pairs]
            assert got.tolist() == want
            if scoring is not custom:
                mode = "local" if local else "global"
                assert got.tolist() == [a.score_units for a in
                                        align([q for q, _ in pairs], [t for _, t in pairs],
                                              mode, scoring=scoring, pairs="zip")]


@pytest.mark.slow
def test_batch_equals_one_at_a_time():
    rng = random.Random(9)
    scoring = SCHEMES["NUC.4.4"]
    go, ge = gap_scores(scoring)
    for _ in range(3):
        pairs = [(random_seq(rng, rng.randint(1, 16)), random_seq(rng, rng.randint(1, 16)))
                 for _ in range(2)]
        S = np.zeros((len(pairs), 16, 16))
        for b, (q, t) in enumerate(pairs):
            S[b, :len(q), :len(t)] = dense(q, t, scoring)
            S[b, len(q):, :] = 7.0             # padding that would matter if it were read
            S[b, :, len(t):] = -3.0
        m = np.array([len(q) for q, _ in pairs])
        n = np.array([len(t) for _, t in pairs])
        for mode in ("global", "local"):
            lz, P = batch_posteriors(S, go, ge, m, n, 2.0, local=mode == "local")
            for b, (q, t) in enumerate(pairs):
                one_lz, one_P = match_posteriors(q, t, scoring, mode=mode, temperature=2.0)
                assert float(lz[b]) == pytest.approx(one_lz, abs=1e-10)
                np.testing.assert_allclose(P[b, :len(q), :len(t)], one_P, atol=1e-10)
                assert np.abs(np.asarray(P[b])[len(q):]).max(initial=0) == 0
                assert np.abs(np.asarray(P[b])[:, len(t):]).max(initial=0) == 0


def test_substitution_scores_units():
    scoring = SCHEMES["halves"]
    q, t = scoring.encode("ACG"), scoring.encode("AAT")
    np.testing.assert_array_equal(substitution_scores(q, t, scoring, jnp.int32),
                                  scoring.matrix[q][:, t])
    np.testing.assert_allclose(substitution_scores(q, t, scoring, jnp.float64),
                               scoring.matrix[q][:, t] / 2)


@pytest.mark.slow
def test_float32_stays_close_to_float64():
    rng = random.Random(2)
    q = random_seq(rng, 120)
    t = "".join(c if rng.random() > 0.2 else rng.choice("ACGT") for c in q)
    scoring = SCHEMES["NUC.4.4"]
    lz64, P64 = match_posteriors(q, t, scoring, mode="local")
    lz32, P32 = match_posteriors(q, t, scoring, mode="local", dtype=jnp.float32)
    assert P32.dtype == np.float32
    assert lz32 == pytest.approx(lz64, rel=1e-6)
    assert np.abs(P32 - P64).max() < 2e-5


# --------------------------------------------------------------------------------------
# command line


def run_cli(args, capsys):
    code = main(["align", "-q", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def fasta(tmp_path):
    q = tmp_path / "q.fa"
    t = tmp_path / "t.fa"
    q.write_text(">q1\nGATTACA\n>q2\nACG\n")
    t.write_text(">t1\nGATCA\n")
    return str(q), str(t)


SCORES = ["--match", "1", "--mismatch", "-1", "--gap-open", "2", "--gap-extend", "1"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["global", "local"])
def test_cli_json(fasta, capsys, mode):
    code, out, err = run_cli([*fasta, "--posterior", "--mode", mode, "--temperature", "0.5",
                              *SCORES, "-f", "json"], capsys)
    assert code == 0, err
    data = json.loads(out)
    assert [(d["query_id"], d["target_id"], d["mode"]) for d in data] == \
        [("q1", "t1", mode), ("q2", "t1", mode)]
    scoring = match_mismatch(1, -1, 2, 1)
    for d, q in zip(data, ["GATTACA", "ACG"]):
        lz, P = match_posteriors(q, "GATCA", scoring, mode=mode, temperature=0.5)
        assert d["log_partition"] == pytest.approx(lz, abs=1e-6)
        listed = {(i, j): p for i, j, p in d["match_probabilities"]}
        want = {(i + 1, j + 1): P[i, j] for i, j in zip(*np.nonzero(P >= 1e-6))}
        assert set(listed) == set(want)
        for key, p in listed.items():
            assert p == pytest.approx(want[key], rel=1e-5, abs=1e-9)
        assert d["query_length"] == len(q) and d["target_length"] == 5


def test_cli_dotplot_and_plot(fasta, capsys, tmp_path):
    out_file = tmp_path / "dots.txt"
    plot = tmp_path / "dots.png"
    args = [*fasta, "--posterior", *SCORES, "-o", str(out_file)]
    if importlib.util.find_spec("matplotlib") is None:
        plot = None
    else:
        args += ["--plot", str(plot)]
    code, _, err = run_cli(args, capsys)
    assert code == 0, err
    lines = out_file.read_text().splitlines()
    headers = [k for k, line in enumerate(lines) if line.startswith("#")]
    assert len(headers) == 2
    name_q, name_t, lz = lines[0][2:].split()
    assert (name_q, name_t) == ("q1", "t1")
    want_lz, P = match_posteriors("GATTACA", "GATCA", match_mismatch(1, -1, 2, 1))
    assert float(lz) == pytest.approx(want_lz, abs=1e-6)
    body = [line.split() for line in lines[1:headers[1]]]
    assert len(body) == int(np.sum(P >= 1e-6))
    for i, j, p in body:
        assert float(p) == pytest.approx(P[int(i) - 1, int(j) - 1], rel=1e-5, abs=1e-9)
    if plot is not None:
        for k in (1, 2):
            png = tmp_path / f"dots_{k}.png"
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_plot_without_matplotlib(fasta, capsys, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *a, **kw):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("no matplotlib")
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    code, out, err = run_cli([*fasta, "--posterior", "--plot", str(tmp_path / "x.png")],
                             capsys)
    assert code == 2 and "pip install" in err and "jaxrna[plot]" in err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("extra, message", [
    (["--posterior", "--score-only", "-f", "tsv"], "--score-only"),
    (["--temperature", "2"], "--temperature needs --posterior"),
    (["--plot", "x.png"], "--plot needs --posterior"),
    (["--posterior", "--temperature", "0"], "must be > 0"),
    (["--posterior", "--temperature", "-1"], "must be > 0"),
    (["--posterior", "--preset", "edit", "--mode", "local"], "local"),
    (["--posterior", "--max-memory", "0.01"], "needs about"),
])
def test_cli_bad_options(fasta, capsys, extra, message):
    code, out, err = run_cli([*fasta, *extra], capsys)
    assert code == 2
    assert message in err
    assert out == ""


def test_cli_bad_letter(tmp_path, capsys):
    bad = tmp_path / "bad.fa"
    bad.write_text(">b\nACJGT\n")
    code, out, err = run_cli([str(bad), str(bad), "--posterior", "--matrix", "NUC.4.4"],
                             capsys)
    assert code == 2 and "not in the alphabet" in err and out == ""
