"""The Nussinov partition function and pair probabilities against independent oracles:
exhaustive enumeration, McCaskill's NumPy recursion, finite differences, plain autodiff, the
max-plus optimum; the tiled path against the exact one; the CLI outputs. Float64 throughout."""

import importlib.util
import json
import math
import os
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fold_brute import all_structures
from jaxrna.alphabet import encode
from jaxrna.cli import main
from jaxrna.fold import partition as pt
from jaxrna.fold.fill import nussinov_fill, score_from_table
from jaxrna.fold.partition_blocked import blocked_bytes, logmatmul, logmatmul_balanced
from jaxrna.fold.partition_reference import reference_partition
from jaxrna.fold.reference import pair_weight, reference_score
from jaxrna.semiring import MAX_PLUS, log_semiring
from jaxrna.weights import parse_weights

WEIGHT_SETS = ["unit", "bpmax", "integer", "GC=2.5,AU=2,GU=0.5"]


@pytest.fixture
def x64():
    with pt.float64():
        yield


def rand_seq(rng, n, alphabet="ACGU"):
    return "".join(rng.choice(alphabet) for _ in range(n))


def enumerate_ensemble(seq, weights, min_loop, T):
    """ln Z and P by summing over every structure."""
    n = len(seq)
    total, P = 0.0, np.zeros((n, n))
    for s in all_structures(seq, weights, min_loop):
        x = math.exp(sum(pair_weight(seq[i], seq[j], weights) for i, j in s) / weights.scale / T)
        total += x
        for i, j in s:
            P[i, j] += x
    return math.log(total), P / total


def float_scores(seq, weights, min_loop):
    wm = weights.matrix().astype(np.float64) / weights.scale
    return pt.pair_score_matrix(encode(seq), wm, min_loop, jnp.float64)


# ---------------------------------------------------------------------------------------
# exactness on tiny inputs


@pytest.mark.slow
@pytest.mark.parametrize("weights", WEIGHT_SETS)
@pytest.mark.parametrize("min_loop", [0, 1, 3])
def test_equals_exhaustive_enumeration(weights, min_loop):
    rng = random.Random(f"{weights}-{min_loop}")
    w = parse_weights(weights)
    for k in range(6):
        seq = rand_seq(rng, rng.randint(1, 12), "ACGUN" if k == 5 else "ACGU")
        T = rng.choice([0.3, 1.0, 2.5])
        lz, P = enumerate_ensemble(seq, w, min_loop, T)
        for method, tile in (("exact", None), ("blocked", 4)):
            r = pt.partition(seq, w, min_loop, T, method=method, tile=tile)
            assert abs(r.log_partition - lz) <= 1e-9 * max(1.0, abs(lz)), (seq, method)
            assert np.allclose(r.probabilities, P, rtol=1e-9, atol=1e-12), (seq, method)


def test_reference_equals_enumeration():
    rng = random.Random(7)
    for weights in ("unit", "bpmax"):
        w = parse_weights(weights)
        for _ in range(4):
            seq = rand_seq(rng, rng.randint(4, 12))
            lz, P = enumerate_ensemble(seq, w, 1, 0.8)
            lr, Pr = reference_partition(seq, w, 1, 0.8)
            assert abs(lz - lr) < 1e-9 and np.allclose(P, Pr, rtol=1e-9, atol=1e-12)


def test_known_values():
    # GGGAAAUCC, unit weights, min loop 3: 3 G x 2-3 pairable partners, enumerated by hand in
    # the docstring example; the empty structure weighs 1, so ln Z > 0 and P(1, 9) < 1.
    r = pt.partition("GGGAAAUCC", "unit", 3)
    lz, P = enumerate_ensemble("GGGAAAUCC", parse_weights("unit"), 3, 1.0)
    assert r.log_partition == pytest.approx(lz, abs=1e-12)
    assert pt.log_partition("AAAAAAAA") == 0.0                 # nothing pairs: only the empty one
    assert pt.pair_probabilities("AAAAAAAA").sum() == 0.0
    assert pt.log_partition("") == 0.0 and pt.log_partition("G") == 0.0
    assert pt.log_partition("GAAAC", min_loop=3) == pytest.approx(math.log(1 + math.e))
    codes = encode("GAAAC")
    assert pt.log_partition(codes, min_loop=3) == pytest.approx(math.log(1 + math.e))
    for bad in (np.array([0, 5]), np.array([[0, 1]]), np.array([0.5])):
        with pytest.raises(ValueError):
            pt.log_partition(bad)
    with pytest.raises(ValueError):
        pt.log_partition("GGGAAAUCC", temperature=0)
    with pytest.raises(ValueError):
        pt.log_partition("GGGAAAUCC", method="fast")


# ---------------------------------------------------------------------------------------
# beyond enumeration: McCaskill's recursion, sum rules, limits


@pytest.fixture(scope="module")
def medium():
    rng = random.Random(11)
    return [(rand_seq(rng, 60), "bpmax", 3, 1.0), (rand_seq(rng, 57), "integer", 0, 0.6),
            (rand_seq(rng, 64, "ACGUN"), "unit", 1, 2.0)]


@pytest.mark.slow
def test_equals_mccaskill_reference(medium):
    for seq, weights, ml, T in medium:
        w = parse_weights(weights)
        lr, Pr = reference_partition(seq, w, ml, T)
        for method, tile in (("exact", None), ("blocked", 16)):
            r = pt.partition(seq, w, ml, T, method=method, tile=tile)
            assert r.log_partition == pytest.approx(lr, rel=1e-11)
            assert np.allclose(r.probabilities, Pr, rtol=1e-9, atol=1e-13)


def test_probability_sum_rules(medium):
    for seq, weights, ml, T in medium:
        w = parse_weights(weights)
        r = pt.partition(seq, w, ml, T)
        P = r.probabilities
        n = len(seq)
        assert P.shape == (n, n)
        assert np.all(P >= 0) and np.all(np.tril(P) == 0)       # only i < j is stored
        full = P + P.T
        assert np.all(full.sum(axis=1) <= 1 + 1e-12)             # each base pairs at most once
        for i, j in zip(*np.nonzero(P > 0)):                    # only allowed pairs
            assert j - i > ml and pair_weight(seq[i], seq[j], w) > 0
        # E[W] = sum_ij P_ij w_ij = -T^2 d lnZ / dT  (central difference)
        W = np.array([[pair_weight(a, b, w) / w.scale for b in seq] for a in seq])
        h = 1e-5
        d = (pt.log_partition(seq, w, ml, T + h) - pt.log_partition(seq, w, ml, T - h)) / (2 * h)
        assert (P * W).sum() == pytest.approx(-T * T * d, rel=1e-6)


def test_low_temperature_tends_to_max_plus():
    rng = random.Random(5)
    seq = rand_seq(rng, 40)
    w = parse_weights("bpmax")
    best = reference_score(seq, w, 3) / w.scale
    gaps = []
    for T in (1.0, 0.1, 0.01, 0.001):
        lz = pt.log_partition(seq, w, 3, T)
        gap = T * lz - best
        # exp(best / T) <= Z <= (number of structures, < 3^n) * exp(best / T)
        assert -1e-9 <= gap <= T * 40 * math.log(3) + 1e-9
        gaps.append(gap)
    # T ln Z = max over distributions of E[W] + T * entropy: falls with T, down to the optimum
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 0.01


# ---------------------------------------------------------------------------------------
# the one recurrence in two semirings; gradients


def test_max_plus_is_the_nussinov_optimum(x64):
    rng = random.Random(3)
    for weights in WEIGHT_SETS:
        w = parse_weights(weights)
        for ml in (0, 3):
            seq = rand_seq(rng, 47, "ACGUN")
            s = pt.pair_score_matrix(encode(seq), w.matrix(), ml, np.int32)
            got = int(pt.inside_spans(s, MAX_PLUS, min_loop=ml)[len(seq), 0])
            assert got == reference_score(seq, w, ml)
            if ml == 3:                                     # the existing (ambiguous) fill
                table = nussinov_fill(encode(seq), w.matrix(), ml, blocks=2)
                assert got == int(score_from_table(table, len(seq)))


def test_log_semiring_evaluation_is_ln_z(x64):
    seq = "GGGAAAUCCGCAUAGC"
    w = parse_weights("bpmax")
    for T in (0.5,):
        rows = pt.inside_spans(float_scores(seq, w, 3), log_semiring(T), min_loop=3)
        lz, _ = enumerate_ensemble(seq, w, 3, T)
        assert float(rows[len(seq), 0]) == pytest.approx(lz, abs=1e-12)


@pytest.mark.slow
def test_custom_vjp_equals_plain_autodiff_and_finite_differences(x64):
    rng = random.Random(9)
    seq = rand_seq(rng, 30)
    w = parse_weights("integer")
    s = float_scores(seq, w, 1)
    T = 0.7
    plain = jax.grad(lambda x: pt.inside_spans(x, log_semiring(T), min_loop=1)[30, 0])(s)
    for method in ("exact", "blocked"):
        f = jax.jit(lambda x, m=method: pt.log_partition_from_scores(x, T, 1, m, tile=8))
        g = jax.grad(f)(s)
        assert np.allclose(g, plain, rtol=1e-10, atol=1e-14)
        assert float(f(s)) == pytest.approx(float(pt.inside_spans(
            s, log_semiring(T), min_loop=1)[30, 0]), rel=1e-13)
        allowed = list(zip(*np.nonzero(np.asarray(s) > 0)))
        for i, j in rng.sample(allowed, 5):
            h = 1e-5
            e = jnp.zeros_like(s).at[i, j].set(h)
            fd = (float(f(s + e)) - float(f(s - e))) / (2 * h)
            assert float(g[i, j]) == pytest.approx(fd, rel=1e-6, abs=1e-10)
    # P = T * d lnZ / d w
    P = pt.pair_probabilities(seq, w, 1, T)
    assert np.allclose(T * np.triu(np.asarray(plain), 1), P, rtol=1e-10, atol=1e-14)


def test_vmap_over_a_padded_batch(x64):
    rng = random.Random(4)
    seqs = [rand_seq(rng, n) for n in (9, 20, 32)]
    w = parse_weights("unit")
    wm = jnp.asarray(w.matrix(), jnp.float64)
    codes = np.full((3, 32), 4, np.int32)
    for b, s in enumerate(seqs):
        codes[b, :len(s)] = encode(s)

    def one(c):
        return pt.log_partition_from_scores(pt.pair_score_matrix(c, wm, 3), 1.0, 3, "exact")

    lz = jax.vmap(one)(jnp.asarray(codes))
    grads = jax.vmap(jax.grad(lambda c_s: pt.log_partition_from_scores(c_s, 1.0, 3)))(
        jax.vmap(lambda c: pt.pair_score_matrix(c, wm, 3))(jnp.asarray(codes)))
    for b, s in enumerate(seqs):
        assert float(lz[b]) == pytest.approx(pt.log_partition(s, w, 3), rel=1e-13)
        n = len(s)
        assert np.allclose(np.triu(np.asarray(grads[b])[:n, :n], 1),
                           pt.pair_probabilities(s, w, 3), atol=1e-13)
        assert np.all(np.asarray(grads[b])[n:, :] == 0)         # padding never pairs


@pytest.mark.slow
def test_gradient_memory_is_quadratic(x64):
    """Plain autodiff through the sweep keeps every span's slices (O(n^3)); the custom_vjp
    keeps the tables (O(n^2)), within the estimate the CLI refuses sequences by."""
    def temp(f, n):
        c = jax.jit(jax.grad(f)).lower(jnp.zeros((n, n))).compile().memory_analysis()
        if c is None:
            pytest.skip("no memory analysis on this backend")
        return c.temp_size_in_bytes

    n = 160
    plain = temp(lambda x: pt.inside_spans(x, log_semiring(1.0), 3)[n, 0], n)
    custom = temp(lambda x: pt.log_partition_from_scores(x, 1.0, 3, "exact"), n)
    side = pt.skew_size(n, pt.sweep_blocks(n))
    assert custom < 12 * 8 * side * side                    # the estimate, without its margin
    assert plain > 4 * custom                               # ~n/2 saved slices of ~n^2 / 3
    blocked = temp(lambda x: pt.log_partition_from_scores(x, 1.0, 3, "blocked", tile=32), n)
    assert blocked < blocked_bytes(n, 32)


@pytest.mark.slow
def test_vmap_of_the_blocked_gradient(x64):
    rng = random.Random(6)
    seqs = [rand_seq(rng, 30), rand_seq(rng, 17)]
    w = parse_weights("bpmax")
    wm = jnp.asarray(w.matrix(), jnp.float64) / w.scale
    codes = np.full((2, 32), 4, np.int32)
    for b, s in enumerate(seqs):
        codes[b, :len(s)] = encode(s)
    scores = jax.vmap(lambda c: pt.pair_score_matrix(c, wm, 3))(jnp.asarray(codes))
    f = lambda x: pt.log_partition_from_scores(x, 0.9, 3, "blocked", tile=8)  # noqa: E731
    lz, g = jax.vmap(jax.value_and_grad(f))(scores)
    for b, s in enumerate(seqs):
        r = pt.partition(s, w, 3, 0.9, method="exact")
        assert float(lz[b]) == pytest.approx(r.log_partition, rel=1e-13)
        n = len(s)
        assert np.allclose(0.9 * np.triu(np.asarray(g[b])[:n, :n], 1), r.probabilities,
                           atol=1e-13)


# ---------------------------------------------------------------------------------------
# the tiled path


@pytest.mark.slow
def test_blocked_equals_exact_on_longer_sequences(x64):
    rng = random.Random(12)
    for n, weights, ml, T, tile in ((96, "bpmax", 3, 1.0, 16), (96, "unit", 0, 0.4, 16)):
        seq = rand_seq(rng, n)
        w = parse_weights(weights)
        lw = pt.masked_log_weights(float_scores(seq, w, ml), T, ml)
        le, Pe, _ = pt.partition_and_probabilities(lw, "exact")
        lb, Pb, guard = pt.partition_and_probabilities(lw, "blocked", tile)
        assert 0 < float(guard) < pt.GUARD_LIMIT_F64
        assert float(lb) == pytest.approx(float(le), rel=1e-12)
        assert np.allclose(Pb, Pe, rtol=1e-9, atol=1e-13)


@pytest.mark.slow
def test_guard_falls_back_to_the_exact_path(monkeypatch):
    rng = random.Random(13)
    seq = rand_seq(rng, 60)
    monkeypatch.setattr(pt, "BLOCKED_FROM", 16)
    T = 0.004                                    # one pair = 250 nats: tiles span far more
    r = pt.partition(seq, "unit", 3, T, tile=16)
    assert r.method == "exact"
    best = reference_score(seq, parse_weights("unit"), 3)
    assert 0 <= T * r.log_partition - best <= T * 60 * math.log(3)


def test_logmatmul_against_the_exact_log_path(x64):
    rng = np.random.default_rng(0)

    def exact(a, b):
        terms = a[:, :, None] + b[None, :, :]
        m = terms.max(axis=1)
        return np.log(np.exp(terms - m[:, None, :]).sum(axis=1)) + m

    a = rng.normal(size=(5, 7)) * 30
    b = rng.normal(size=(7, 4)) * 30
    assert np.allclose(logmatmul(jnp.asarray(a), jnp.asarray(b)), exact(a, b), rtol=1e-12)
    assert np.allclose(logmatmul_balanced(jnp.asarray(a), jnp.asarray(b)), exact(a, b), rtol=1e-12)
    # the caveat: a growing row against a shrinking column (ln Z[i, k] + ln P[k, j] over a long
    # k). Plain row/column maxima put the scale ~1000 nats above every term: all underflow.
    k = np.arange(40.0)
    a = np.stack([30 * k, 30 * k - 3.0])                    # rows of one tile, close together
    b = (-30 * k + 2.0)[:, None]
    want = np.log(40.0) + np.array([2.0, -1.0])
    assert np.allclose(np.asarray(logmatmul_balanced(jnp.asarray(a), jnp.asarray(b)))[:, 0],
                       want, rtol=1e-12)
    assert np.all(np.asarray(logmatmul(jnp.asarray(a), jnp.asarray(b))) < -1e29)   # lost


# ---------------------------------------------------------------------------------------
# command line


def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def fasta(tmp_path):
    p = tmp_path / "in.fa"
    p.write_text(">a\nGGGAAAUCC\n>b two\nGCGCAAAGCGCAUAUGC\n>c\nAAAA\n")
    return str(p)


def test_cli_json(fasta, capsys):
    code, out, _ = run_cli(["fold", "--model", "nussinov", fasta, "--partition", "-f", "json", "-q",
                            "--temperature", "0.8", "-w", "bpmax", "-m", "1"], capsys)
    assert code == 0
    objs = json.loads(out)
    assert [o["id"] for o in objs] == ["a", "b", "c"]
    for o, seq in zip(objs, ["GGGAAAUCC", "GCGCAAAGCGCAUAUGC", "AAAA"]):
        r = pt.partition(seq, "bpmax", 1, 0.8)
        assert o["length"] == len(seq) and o["temperature"] == 0.8 and o["min_loop"] == 1
        assert o["log_partition"] == pytest.approx(r.log_partition, rel=1e-9)
        triples = o["pair_probabilities"]
        assert triples == sorted(triples)
        assert all(1 <= i < j <= len(seq) and p >= 1e-6 for i, j, p in triples)
        want = {(i, j): p for i, j, p in r.triples(1e-6)}
        assert {(i, j) for i, j, _ in triples} == set(want)
        for i, j, p in triples:
            assert p == pytest.approx(want[(i, j)], rel=1e-5)
    assert objs[2]["log_partition"] == 0 and objs[2]["pair_probabilities"] == []


def test_cli_dotplot_and_png(fasta, tmp_path, capsys):
    out_file = tmp_path / "dots.txt"
    png = tmp_path / "map.png"
    args = ["fold", "--model", "nussinov", fasta, "--partition", "-o", str(out_file), "-q"]
    plots = importlib.util.find_spec("matplotlib") is not None
    if plots:
        args += ["--plot", str(png)]
    code, _, _ = run_cli(args, capsys)
    assert code == 0
    lines = out_file.read_text().splitlines()
    headers = [l for l in lines if l.startswith("#")]
    assert [h.split()[1:3] for h in headers] == [["a", "9"], ["b", "17"], ["c", "4"]]
    r = pt.partition("GGGAAAUCC", "unit", 3)
    assert float(headers[0].split()[3]) == pytest.approx(r.log_partition, rel=1e-9)
    body = lines[1:lines.index(headers[1])]
    assert [(int(i), int(j)) for i, j, _ in (l.split() for l in body)] == \
        [(i, j) for i, j, _ in r.triples()]
    if plots:
        for k in (1, 2, 3):
            data = (tmp_path / f"map_{k}.png").read_bytes()
            assert data[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_errors(fasta, tmp_path, capsys, monkeypatch):
    for args, msg in ((["--partition", "--score-only", "-f", "json"], "--score-only"),
                      (["--partition", "--temperature", "0"], "--temperature"),
                      (["--partition", "--temperature", "nan"], "--temperature"),
                      (["--temperature", "2"], "needs --partition"),
                      (["--plot", str(tmp_path / "x.png")], "needs --partition")):
        code, out, err = run_cli(["fold", "--model", "nussinov", fasta, *args], capsys)
        assert code == 2 and msg in err and out == ""

    import jaxrna.formats.heatmap as hm

    def no_matplotlib():
        raise ImportError(f"--plot needs matplotlib, which is not installed: {hm.PLOT_HINT}")

    monkeypatch.setattr(hm, "pyplot", no_matplotlib)
    code, out, err = run_cli(["fold", "--model", "nussinov", fasta, "--partition", "--plot", str(tmp_path / "x.png")],
                             capsys)
    assert code == 2 and "pip install 'jaxrna[plot]'" in err and out == ""
    assert not os.path.exists(tmp_path / "x.png")
    # too large for the memory allowed: refused up front with an estimate, others still done
    code, out, err = run_cli(["fold", "--model", "nussinov", fasta, "--partition", "--max-memory", "0.0000001"],
                             capsys)
    assert code == 2 and "need about" in err and out == ""


def test_triples_text_is_the_per_triple_formatting():
    """The array formatter of the dot-plot and JSON writers: byte for byte what formatting
    each triple with %.6g (and json.dumps of that float) writes, rounding ties included."""
    import json as _json

    from jaxrna.formats.fold_partition import _p, triples_text

    rng = np.random.default_rng(11)

    def reference(P, style):
        rows, cols = np.nonzero(np.triu(P, 1) >= 1e-6)
        if style == "json":
            return ", ".join(_json.dumps([int(a) + 1, int(b) + 1, _p(float(P[a, b]))])
                             for a, b in zip(rows, cols))
        return "".join(f"{a + 1} {b + 1} {P[a, b]:.6g}\n" for a, b in zip(rows, cols))

    for trial in range(12):
        n = int(rng.integers(2, 300))
        kind = trial % 4
        if kind == 0:
            P = rng.random((n, n))
        elif kind == 1:
            P = 10.0 ** rng.uniform(-7, 0, (n, n))
        elif kind == 2:                      # decimal ties, and values a hair off them
            P = rng.integers(1, 10 ** 6, (n, n)) / 10.0 ** rng.integers(6, 12, (n, n))
            P = np.clip(P + rng.choice([0.0, 5e-12, -5e-12], (n, n)), 0, 1)
        else:                                # round numbers: 1, 0.5, 1e-06, ...
            P = np.round(rng.random((n, n)), int(rng.integers(0, 7)))
            P[0, -1], P[0, 1] = 1.0, 1e-6
        for style in ("dotplot", "json"):
            assert triples_text(P, style) == reference(P, style), (trial, style)
    assert triples_text(np.zeros((3, 3)), "json") == ""
