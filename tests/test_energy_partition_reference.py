"""The plain partition function (jaxrna.energy.partition_reference) and the ensemble
quantities (jaxrna.energy.ensemble_measures) against brute-force enumeration and ViennaRNA 2.8."""

import math
import random

import numpy as np
import pytest

from energy_oracle import fold_compound, random_case, vienna_params
from jaxrna.energy import ensemble_measures as ensemble
from jaxrna.energy.boltzmann import kt, pf_params, smooth
from jaxrna.energy.evaluate import energy_of_structure
from jaxrna.energy.params import load_params, raw_params
from jaxrna.energy.partition_reference import partition
from test_energy_reference import all_structures

SETS = ("turner2004", "turner1999")


def vienna_pf(seq, dangles, temperature, unpaired=()):
    """ViennaRNA as RNAfold -p runs it: ``(fc, mfe structure, mfe kcal, G kcal, probs)``."""
    fc = fold_compound(seq, dangles, temperature, unpaired)
    structure, mfe = fc.mfe()
    fc.exp_params_rescale(mfe)
    _, g = fc.pf()
    probs = np.array(fc.bpp())[1:, 1:]
    return fc, structure, mfe, g, probs


def brute_force(seq, params, dangles, temperature, unpaired=()):
    """``(ln Z, pair probabilities)`` summed over every structure, each weighed by its
    energy as jaxrna.energy.evaluate computes it."""
    n = len(seq)
    structures = all_structures(seq, tuple(unpaired))
    logw = []
    for pairs in structures:
        pt = [-1] * n
        for i, j in pairs:
            pt[i], pt[j] = j, i
        e = energy_of_structure(seq, pt, params, dangles)
        logw.append(-e / (100 * kt(temperature)))
    m = max(logw)
    weights = [math.exp(x - m) for x in logw]
    z = math.fsum(weights)
    probs = np.zeros((n, n))
    for pairs, wgt in zip(structures, weights):
        for i, j in pairs:
            probs[i, j] += wgt / z
    return m + math.log(z), probs


def test_brute_force_small_sequences():
    rng = random.Random(25)
    checked = 0
    for case in range(150):
        n = rng.randint(1, 14)
        seq = "".join(rng.choice("ACGU" if case % 7 else "ACGUN") for _ in range(n))
        if case % 3 == 0:
            seq = "GGG" + seq[3:-3] + "CCC" if n > 8 else seq
        dangles = (0, 2)[case % 2]
        temperature = (37.0, 50.0, 15.0)[case % 3]
        name = SETS[(case // 2) % 2]
        unpaired = sorted(rng.sample(range(n), 1)) if n and case % 5 == 0 else []
        p = pf_params(name, temperature, dangles)
        want_log_z, want = brute_force(seq, p, dangles, temperature, unpaired)
        g, probs = partition(seq, name, dangles, temperature, unpaired)
        assert g == pytest.approx(-kt(temperature) * want_log_z, abs=1e-9), (seq, name, dangles)
        assert np.abs(probs - want).max() <= 1e-9, (seq, name, dangles, temperature)
        checked += want.any()
    assert checked > 60


def _check_against_vienna(rng, cases, max_len, gammas=(0.5, 1.0, 2.0, 6.0),
                          temperatures=(37.0, 37.0, 25.0, 50.0, 37.0, 42.5)):
    for case in range(cases):
        seq, unpaired = random_case(rng, 1, max_len)
        name = SETS[case % 2]
        dangles = (0, 2, 2, 1, 0, 2, 3, 2)[case % 8]
        temperature = temperatures[case % len(temperatures)]
        with vienna_params(name):
            fc, mfe_structure, mfe, g, want = vienna_pf(seq, dangles, temperature, unpaired)
            gamma = gammas[case % len(gammas)]
            want_mea = fc.MEA(gamma)
            want_centroid = fc.centroid()
            want_div = fc.mean_bp_distance()
            want_freq = fc.pr_structure(mfe_structure)
        got_g, probs = partition(seq, name, dangles, temperature, unpaired)
        where = (seq, unpaired, name, dangles, temperature)
        assert abs(got_g - g) <= 1e-4, where
        if seq:
            assert np.abs(probs - want).max() <= 1e-6, where
        structure, distance = ensemble.centroid(probs)
        assert structure == want_centroid[0], where
        assert distance == pytest.approx(want_centroid[1], abs=1e-6), where
        assert ensemble.ensemble_diversity(probs) == pytest.approx(want_div, abs=1e-6), where
        # ViennaRNA evaluates the structure with dangles 2 where the model has odd dangles
        energy = energy_of_structure(seq, mfe_structure, load_params(name, temperature),
                                     0 if dangles == 0 else 2)
        if dangles in (0, 2):
            assert energy == round(mfe * 100), where
        # pr_structure reads the energy as a C float: allow its rounding (2^-24 relative)
        freq = ensemble.mfe_frequency(energy / 100, got_g, temperature)
        tol = 1e-6 + freq * abs(energy / 100) * 2.0 ** -23 / kt(temperature)
        assert freq == pytest.approx(want_freq, abs=tol), where
        mea_structure, mea_value = ensemble.mea(probs, gamma)
        assert mea_structure == want_mea[0], where + (gamma,)
        assert mea_value == pytest.approx(want_mea[1], rel=1e-6, abs=1e-6), where + (gamma,)


def test_against_vienna_random():
    """Both parameter sets, dangles 0 and 2 (1 and 3 as 2), several temperatures, with
    unpaired constraints and N: energy, every probability and the derived quantities."""
    _check_against_vienna(random.Random(2025), 60, 64)


@pytest.mark.slow
def test_against_vienna_random_more():
    """The same checks on 48 more random sequences (the fast subset runs 60): each slot of
    the cycles of sets, dangles, temperatures and gammas (24 cases) twice more. (110 took 12
    CPU-seconds here, CI time.)"""
    _check_against_vienna(random.Random(2026), 48, 64)


@pytest.mark.slow
def test_against_vienna_sweep():
    """1-80 nt, 5-95 C, MEA gammas 0.1-10: 56 cases, so that each slot of the dangles and
    parameter-set cycle (8) meets each of the 7 temperatures once (the pairs 150 cases met;
    the pure-Python reference is cubic: 150 cases took 53-61 CPU-seconds here, the 56 of
    1-100 nt 17.6, of 1-80 nt 12.8, CI time)."""
    _check_against_vienna(random.Random(7), 56, 80, gammas=(0.1, 0.5, 1.0, 2.0, 4.0, 10.0),
                          temperatures=(37.0, 5.0, 25.0, 37.0, 50.0, 70.0, 95.0))


def test_special_loops_and_letters():
    """Long hairpins (lxc untruncated), special hairpins, N, T and lowercase letters."""
    cases = ["GGGGC" + "A" * 45 + "GCCCC", "GGGAC" + "A" * 33 + "GUCCC", "NNGGGGAAACCCCNNACGUN",
             "gggGAAAcccAUCGAAAGAUU", "GGGTTTTCCCAAGGTACGCC", "CGCGAGAACGCG" * 3,
             "GGACUUCGGUCC" * 3, "CCGGCACAGUUGCGGCGGAACCGGA"]
    for name in SETS:                     # tri-, tetra- and hexaloops of each set
        p = load_params(name)
        for table in (p.triloops, p.tetraloops, p.hexaloops):
            cases += ["GAC" + loop + "GUCAA" for loop in table.split()[:2]]
    assert len(cases) > 12
    for seq in cases:
        for name in SETS:
            for dangles, temperature in ((2, 37.0), (0, 24.0), (2, 60.0)):
                with vienna_params(name):
                    _, _, _, g, want = vienna_pf(seq, dangles, temperature)
                got_g, probs = partition(seq, name, dangles, temperature)
                assert abs(got_g - g) <= 1e-4, (seq, name, dangles, temperature)
                assert np.abs(probs - want).max() <= 1e-6, (seq, name, dangles, temperature)


def test_pf_parameters_differ_from_mfe_where_vienna_does():
    """The partition function's energies are not the minimum free energy's: equal at 37 C
    except the smoothed dangle entries, untruncated at other temperatures; the integer tables
    would miss ViennaRNA's ensemble energy."""
    for name in SETS:
        mfe_p, pf_p = load_params(name, 37.0), pf_params(name, 37.0)
        assert np.array_equal(mfe_p.stack, pf_p.stack)
        assert np.array_equal(mfe_p.int22, pf_p.int22)
        raw = raw_params(name).dg["dangle5"][1:].astype(float)
        changed = pf_p.dangle5[1:] != mfe_p.dangle5[1:]
        assert changed.any() and np.all((raw[changed] > -9) & (raw[changed] < 13)), name
        assert np.array_equal(pf_p.dangle5[1:], -smooth(-raw))
    assert pf_params("turner2004", 50.0).stack[1, 1] != load_params("turner2004", 50.0).stack[1, 1]
    seq = "GGGAUCCGAUAGCGAAUCCAGAUACGGCAUCCGCA"
    _, _, _, g, _ = vienna_pf(seq, 2, 50.0)
    mfe_tables, _ = partition(seq, load_params("turner2004", 50.0), 2, 50.0, probabilities=False)
    assert abs(mfe_tables - g) > 1e-3
    assert abs(partition(seq, "turner2004", 2, 50.0, probabilities=False)[0] - g) <= 1e-4


def test_odd_dangles_are_two_and_bad_params():
    seq = "GGGAUCCGAUAGCGAAUCCAGAUACGGCAUCCGCA"
    g2, p2 = partition(seq, dangles=2)
    for d in (1, 3):
        g, p = partition(seq, dangles=d)
        assert g == g2 and np.array_equal(p, p2)
    with pytest.raises(ValueError):
        partition(seq, pf_params("turner2004", 37.0), temperature=25.0)
    with pytest.raises(ValueError):
        partition(seq, dangles=4)
    assert partition("", dangles=2)[0] == 0.0
    assert partition("ACGU")[1].shape == (4, 4)


def test_ensemble_quantities_on_simple_matrices():
    probs = np.zeros((8, 8))
    probs[0, 7], probs[1, 6], probs[2, 5] = 0.9, 0.6, 0.2
    assert ensemble.centroid(probs)[0] == "((....))"
    assert ensemble.centroid(probs)[1] == pytest.approx(0.1 + 0.4 + 0.2)
    assert ensemble.ensemble_diversity(probs) == pytest.approx(2 * (0.09 + 0.24 + 0.16))
    assert ensemble.mfe_frequency(-5.0, -5.0) == 1.0
    assert ensemble.mfe_frequency(-4.0, -5.0, 37.0) == pytest.approx(math.exp(-1 / kt(37.0)))
    up = ensemble.unpaired_probabilities(probs)
    assert up[0] == pytest.approx(0.1) and up[3] == 1.0
    # gamma large: every kept pair; gamma tiny: nothing
    assert ensemble.mea(probs, 100.0)[0] == "(((..)))"
    assert ensemble.mea(probs, 0.01)[0] == "........"
    with pytest.raises(ValueError):
        ensemble.centroid(np.zeros((3, 4)))


@pytest.mark.slow
def test_long_sequence_finite_and_equal():
    """The reference on a longer sequence (200 nt, twice the sweep's longest and more than six
    times the longest interior loop: the pure-Python reference is cubic, 300 nt took 18
    CPU-seconds here, 400 nt 30-34, CI time; the JAX path's 520-nt test is
    tests/test_energy_partition.py's)."""
    rng = random.Random(600)
    seq = "".join(rng.choice("ACGU") for _ in range(200))
    _, _, _, g, _ = vienna_pf(seq, 2, 37.0)
    got, _ = partition(seq, "turner2004", 2, 37.0, probabilities=False)
    assert math.isfinite(got) and abs(got - g) <= 1e-4


def test_parameter_file(tmp_path):
    """A .par file read on top of Turner 2004, as ViennaRNA reads it."""
    from test_energy_params import CUSTOM

    path = tmp_path / "custom.par"
    path.write_text(CUSTOM)
    rng = random.Random(11)
    for case in range(12):
        seq, unpaired = random_case(rng, 8, 50)
        dangles, temperature = (0, 2)[case % 2], (37.0, 10.0, 45.0)[case % 3]
        with vienna_params(str(path)):
            _, _, _, g, want = vienna_pf(seq, dangles, temperature, unpaired)
        got, probs = partition(seq, str(path), dangles, temperature, unpaired)
        assert abs(got - g) <= 1e-4, (seq, dangles, temperature)
        assert np.abs(probs - want).max() <= 1e-6, (seq, dangles, temperature)


def test_pair_symbols_equal_viennas_string():
    """RNAfold -p's symbol string from the probabilities equals ViennaRNA's own
    (``fc.db_from_probs()``) on random sequences, both dangle models of its partition
    function."""
    import random

    import RNA

    from jaxrna.energy.ensemble_measures import pair_symbols

    rng = random.Random("symbols")
    seen = set()
    for k in range(60):
        seq = "".join(rng.choice("ACGU") for _ in range(rng.randint(1, 120)))
        md = RNA.md()
        md.dangles = (0, 2)[k % 2]
        fc = RNA.fold_compound(seq, md)
        _, mfe = fc.mfe()
        fc.exp_params_rescale(mfe)
        fc.pf()
        bpp = np.array(fc.bpp())[1:, 1:]
        got = pair_symbols(bpp)
        assert got == fc.db_from_probs(), (seq, got)
        seen.update(got)
    assert {".", "(", ")"} <= seen and len(seen) >= 5, seen
