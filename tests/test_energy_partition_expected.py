"""The expected partition function of a probabilistic sequence (dangles 0,
:mod:`jaxrna.energy.partition_expected`) against the enumeration of sequences folded by
ViennaRNA 2.8: ``ln sum_S P(S) Z(S)``, ``Z(S)`` from ``fc.pf()`` with ``-d0``."""

import itertools
import random

import jax
import numpy as np
import pytest

from energy_oracle import fold_compound, vienna_params
from jaxrna.energy import partition as pf
from jaxrna.energy.design import design, log_target_probability, pairs_of
from jaxrna.energy.partition_expected import expected_log_z, one_hot
from jaxrna.energy.partition_params import float_params, kt

LENGTH = 48


def vienna_log_z(seq, temperature=37.0):
    fc = fold_compound(seq, 0, temperature)
    _, mfe = fc.mfe()
    fc.exp_params_rescale(mfe)
    _, g = fc.pf()
    return -g * 1000.0 / kt(temperature)


def enumerate_log_z(seq, q, positions, temperature=37.0):
    """ln sum over the letters of ``positions`` (the rest of ``seq`` fixed) of P * Z."""
    total = []
    for letters in itertools.product(range(4), repeat=len(positions)):
        s, logp = list(seq), 0.0
        for k, x in zip(positions, letters):
            s[k] = "ACGU"[x]
            logp += np.log(q[k, x])
        total.append(logp + vienna_log_z("".join(s), temperature))
    return float(np.logaddexp.reduce(total))


def _kcal(log_z, temperature=37.0):
    return -log_z * kt(temperature) / 1000.0


def test_one_hot_equals_the_partition_function():
    rng = random.Random("pfx-onehot")
    seqs = ["".join(rng.choice("ACGU") for _ in range(rng.randint(1, LENGTH))) for _ in range(6)]
    want = pf.ensemble_energies(seqs, dangles=0, length=LENGTH)
    with pf.x64():
        for seq, w in zip(seqs, want):
            assert abs(_kcal(float(expected_log_z(one_hot(seq), length=LENGTH))) - w) < 1e-9


def _soft(rng, seq, positions):
    q = one_hot(seq)
    for k in positions:
        w = np.array([rng.random() + 0.05 for _ in range(4)])
        q[k] = w / w.sum()
    return q


def test_random_uncertain_positions_equal_enumeration():
    """Random sequences of 12-45 nt, four uncertain positions (three of them adjacent:
    shared loop bases), 37 C and 50 C, turner2004 and turner1999."""
    rng = random.Random("pfx-enum")
    for name, temperature in (("turner2004", 37.0), ("turner2004", 50.0), ("turner1999", 37.0)):
        with vienna_params(name), pf.x64():
            for _ in range(3):
                n = rng.randint(12, 45)
                seq = "".join(rng.choice("ACGU") for _ in range(n))
                start = rng.randint(0, n - 3)
                positions = sorted({start, start + 1, start + 2} | {rng.randrange(n)})
                q = _soft(rng, seq, positions)
                got = float(expected_log_z(q, name, temperature, LENGTH))
                want = enumerate_log_z(seq, q, positions, temperature)
                assert abs(_kcal(got - want, temperature)) < 1e-5, (name, seq, positions)


def test_special_hairpins_equal_enumeration():
    """Stems closing uncertain loops that are often a tri-, tetra- or hexaloop."""
    p = float_params("turner2004", 37.0)
    with pf.x64():
        for string in (p.triloops, p.tetraloops, p.hexaloops):
            for loop in string.split()[:2]:
                seq = "GGG" + loop + "CCC"
                positions = list(range(4, 4 + min(4, len(loop) - 2)))
                q = one_hot(seq)
                for k in positions:
                    q[k] = 0.1
                    q[k, "ACGU".index(seq[k])] = 0.7
                got = float(expected_log_z(q, length=LENGTH))
                want = enumerate_log_z(seq, q, positions)
                assert abs(_kcal(got - want)) < 1e-5, (seq, positions)


@pytest.mark.slow
def test_gradient_wrt_probabilities_matches_finite_differences():
    rng = random.Random("pfx-grad")
    seq = "GGGAGCUAGCUAAAGCUAGCAUCCCAGCGAUAAUCGCU"
    q = _soft(rng, seq, range(len(seq)))
    with pf.x64():
        grad = np.asarray(jax.grad(lambda q: expected_log_z(q, length=LENGTH))(q))
        for k, x in ((0, 2), (10, 0), (20, 3), (37, 1)):
            h = 1e-5
            up, down = q.copy(), q.copy()
            up[k, x] += h
            down[k, x] -= h
            fd = (float(expected_log_z(up, length=LENGTH))
                  - float(expected_log_z(down, length=LENGTH))) / (2 * h)
            assert abs(fd - grad[k, x]) < 1e-6 * max(1.0, abs(grad[k, x])), (k, x, fd, grad[k, x])


def test_target_probability_equals_vienna():
    """One-hot: ln E[w(target)] - ln E[Z] is ViennaRNA's ln fc.pr_structure(target)."""
    rng = random.Random("pfx-target")
    with pf.x64():
        for _ in range(4):
            seq = "".join(rng.choice("ACGU") for _ in range(rng.randint(20, LENGTH)))
            fc = fold_compound(seq, 0)
            structure, mfe = fc.mfe()
            fc.exp_params_rescale(mfe)
            fc.pf()
            for target in (structure, "." * len(seq)):
                got = float(log_target_probability(one_hot(seq), target, length=LENGTH))
                assert abs(got - np.log(fc.pr_structure(target))) < 1e-5, (seq, target)
    with pytest.raises(ValueError):
        pairs_of("(()")
    with pytest.raises(ValueError):
        log_target_probability(one_hot("GGGAAACCC"), "((....))")


def test_design_raises_the_target_probability():
    """Twelve gradient steps from random logits: the objective rises, and ViennaRNA gives
    the designed sequence's target structure most of the ensemble."""
    target = "(((((....)))))...((((....))))"
    seq, history = design(target, steps=12, seed=0)
    assert history[-1] > history[0] + 5
    fc = fold_compound(seq, 0)
    _, mfe = fc.mfe()
    fc.exp_params_rescale(mfe)
    fc.pf()
    assert fc.pr_structure(target) > 0.5, (seq, history)


@pytest.mark.slow
def test_every_8mer_uniform():
    """Uniform probabilities over 8 positions against all 65,536 sequences."""
    with pf.x64():
        got = float(expected_log_z(np.full((8, 4), 0.25), length=32))
    want = enumerate_log_z("AAAAAAAA", np.full((8, 4), 0.25), list(range(8)))
    assert abs(got - want) < 1e-6
