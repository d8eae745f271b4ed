"""The expected partition function of a probabilistic sequence (dangles 0 and 2,
:mod:`jaxrna.energy.partition_expected`, :mod:`jaxrna.energy.partition_expected_d2`) against
the enumeration of sequences folded by ViennaRNA 2.8: ``ln sum_S P(S) Z(S)``, ``Z(S)`` from
``fc.pf()`` with ``-d0`` / ``-d2``; one-hot against :mod:`jaxrna.energy.partition`."""

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


def vienna_log_z(seq, temperature=37.0, dangles=0):
    fc = fold_compound(seq, dangles, temperature)
    _, mfe = fc.mfe()
    fc.exp_params_rescale(mfe)
    _, g = fc.pf()
    return -g * 1000.0 / kt(temperature)


def enumerate_log_z(seq, q, positions, temperature=37.0, dangles=0):
    """ln sum over the letters of ``positions`` (the rest of ``seq`` fixed) of P * Z."""
    total = []
    for letters in itertools.product(range(4), repeat=len(positions)):
        s, logp = list(seq), 0.0
        for k, x in zip(positions, letters):
            s[k] = "ACGU"[x]
            logp += np.log(q[k, x])
        total.append(logp + vienna_log_z("".join(s), temperature, dangles))
    return float(np.logaddexp.reduce(total))


def _kcal(log_z, temperature=37.0):
    return -log_z * kt(temperature) / 1000.0


def test_one_hot_equals_the_partition_function():
    rng = random.Random("pfx-onehot")
    # 7 rows: the batch program of the dangles-2 one-hot test below (dangles are traced)
    seqs = ["".join(rng.choice("ACGU") for _ in range(rng.randint(1, LENGTH))) for _ in range(7)]
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


@pytest.mark.slow  # the one-hot and special-hairpin tests stay in the fast subset
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
    """Central differences on a soft 32-nt sequence, padded to 32: the gradient program is
    the one :func:`design` runs in the design test below (29 nt, class 32), the forward one
    the 8-mer test's, so this file compiles the dangles-0 gradient once (at 48 it was one
    more ~13 CPU-second compilation, CI time)."""
    rng = random.Random("pfx-grad")
    seq = "GGGAGCUAGCUAAAGCUAGCAUCCCAGCGAUA"
    q = _soft(rng, seq, range(len(seq)))
    with pf.x64():
        grad = np.asarray(jax.grad(lambda q: expected_log_z(q, length=32))(q))
        for k, x in ((0, 2), (10, 0), (20, 3), (31, 1)):
            h = 1e-5
            up, down = q.copy(), q.copy()
            up[k, x] += h
            down[k, x] -= h
            fd = (float(expected_log_z(up, length=32))
                  - float(expected_log_z(down, length=32))) / (2 * h)
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


@pytest.mark.slow  # the design doctest and the d2 one-hot test stay in the fast subset
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


# ------------------------------------------------------------------------------- dangles 2
# Every dangles-2 test pads to LENGTH: one forward program per parameter set (the 7-mer and
# the vmap test padded to 32 compiled one more, ~4 CPU-seconds, CI time).

#: Multiloops whose junction bases are shared: one unpaired base between the closing pair and
#: each branch (read by both), and two branches with no base between them (each reads the
#: other's pair base), with the positions left uncertain.
MULTILOOPS = (("GGGGAGCGCGAAAGCGCAGCGCGAAAGCGCACCCC", (4, 5, 16, 17, 18, 30)),
              ("GGGGGCGCGAAAGCGCGCGCGAAAGCGCCCCC", (3, 4, 15, 16, 27, 28)))


@pytest.mark.slow  # compiles the dangles-2 program (~30 s here); the dangles-0 tests stay in the fast subset
def test_d2_one_hot_equals_the_partition_function():
    """1-48 nt, both parameter sets: log E[Z] of a one-hot q is partition.py's log Z, -d2
    (padded to ``LENGTH``: the dangles-2 program the other tests of this file compile)."""
    rng = random.Random("pfx-d2-onehot")
    for name in ("turner2004", "turner1999"):
        seqs = ["".join(rng.choice("ACGU") for _ in range(n)) for n in (1, 5, 17, 33, LENGTH)]
        seqs += [MULTILOOPS[0][0], MULTILOOPS[1][0]]
        want = pf.ensemble_energies(seqs, name, dangles=2, length=LENGTH)
        with pf.x64():
            for seq, w in zip(seqs, want):
                got = _kcal(float(expected_log_z(one_hot(seq), name, length=LENGTH, dangles=2)))
                assert abs(got - w) <= 1e-9 * max(1.0, abs(w)), (name, seq, got, w)


@pytest.mark.slow  # dangles 2 (fast subset: the one-hot and junction tests)
def test_d2_every_7mer_soft():
    """Random soft q over 7 positions against all 16,384 sequences folded by ViennaRNA -d2
    (the exterior loop's mismatches and dangles at both ends)."""
    rng = random.Random("pfx-d2-7mer")
    q = np.array([[rng.random() + 0.05 for _ in range(4)] for _ in range(7)])
    q /= q.sum(axis=1, keepdims=True)
    with pf.x64():
        got = float(expected_log_z(q, length=LENGTH, dangles=2))
    want = enumerate_log_z("AAAAAAA", q, list(range(7)), dangles=2)
    assert abs(got - want) <= 1e-9 * max(1.0, abs(want)), (got, want)


@pytest.mark.slow  # dangles 2 (fast subset: the one-hot test)
def test_d2_shared_junction_bases_equal_enumeration():
    """Multiloops with uncertain junction bases (each read by two terms) against the sum over
    their 256 sequences of P(S) Z(S), Z(S) from :mod:`jaxrna.energy.partition` -d2 (exact in
    float64: ViennaRNA's fc.pf() rounds to a C float)."""
    rng = random.Random("pfx-d2-junction")
    for seq, positions in MULTILOOPS:
        positions = sorted(rng.sample(positions, 4))
        q = _soft(rng, seq, positions)
        seqs, logp = [], []
        for letters in itertools.product(range(4), repeat=4):
            s = list(seq)
            for k, x in zip(positions, letters):
                s[k] = "ACGU"[x]
            seqs.append("".join(s))
            logp.append(sum(np.log(q[k, x]) for k, x in zip(positions, letters)))
        g = pf.ensemble_energies(seqs, dangles=2, length=LENGTH)
        want = float(np.logaddexp.reduce(np.array(logp) - g * 1000.0 / kt(37.0)))
        with pf.x64():
            got = float(expected_log_z(q, length=LENGTH, dangles=2))
        assert abs(got - want) <= 1e-9 * max(1.0, abs(want)), (seq, positions, got, want)


@pytest.mark.slow  # dangles 2 (fast subset: the one-hot and junction tests)
def test_d2_random_uncertain_positions_equal_enumeration():
    """Random sequences of 20-45 nt with four uncertain positions (three adjacent), 37 C and
    50 C, turner2004 and turner1999."""
    rng = random.Random("pfx-d2-rand")
    for name, temperature in (("turner2004", 37.0), ("turner2004", 50.0), ("turner1999", 37.0)):
        with vienna_params(name), pf.x64():
            n = rng.randint(20, 45)
            seq = "".join(rng.choice("ACGU") for _ in range(n))
            start = rng.randint(0, n - 3)
            positions = sorted({start, start + 1, start + 2} | {rng.randrange(n)})
            q = _soft(rng, seq, positions)
            got = float(expected_log_z(q, name, temperature, LENGTH, dangles=2))
            want = enumerate_log_z(seq, q, positions, temperature, dangles=2)
            assert abs(_kcal(got - want, temperature)) < 1e-5, (name, seq, positions)


@pytest.mark.slow  # dangles 2 (fast subset: the one-hot test)
def test_d2_jit_vmap_and_dangle_models():
    """vmap over probabilistic sequences equals one call each; jit of the padded function;
    dangles 1 and 3 are computed as 2; others and traced dangles are refused."""
    from jaxrna.energy.partition_expected import (LEFT, expected_log_partition,
                                                  prepare_expected, static_dangles)

    rng = np.random.default_rng(5)
    qs = rng.dirichlet(np.ones(4), size=(3, 14))
    with pf.x64():
        each = [float(expected_log_z(q, length=LENGTH, dangles=2)) for q in qs]
        allowed, dp, spec = prepare_expected(14, LENGTH)

        def padded(q):
            qp = jax.numpy.zeros((allowed.shape[0], 4)).at[LEFT:LEFT + 14].set(q)
            return expected_log_partition(qp, allowed, dp, spec, LENGTH, dangles=2, n=14)

        batch = np.asarray(jax.jit(jax.vmap(padded))(qs))
        np.testing.assert_allclose(batch, each, rtol=1e-12)
        assert float(expected_log_z(qs[0], length=LENGTH, dangles=3)) == each[0]
    assert [static_dangles(d) for d in (0, 1, 2, 3)] == [0, 2, 2, 2]
    with pytest.raises(ValueError):
        static_dangles(4)
    with pytest.raises(TypeError):
        jax.jit(static_dangles)(2)


@pytest.mark.slow
def test_d2_gradient_wrt_probabilities_matches_finite_differences():
    """Central differences at the multiloop's three shared junction bases (4 and 30: next to
    the closing pair and a branch, 17: between two branches) and in its stems (0); the
    outside pass (the gradient of :func:`expected_log_z`) equals JAX's reverse mode through
    the sweep at every position. (Stem positions 18 and 34 were two more pairs of forward
    runs, ~2.6 CPU-seconds, CI time: the reverse-mode check covers them.)"""
    from jaxrna.energy.partition_expected import (LEFT, expected_log_partition,
                                                  prepare_expected)

    rng = random.Random("pfx-d2-grad")
    seq = MULTILOOPS[0][0]
    q = _soft(rng, seq, range(len(seq)))
    with pf.x64():
        f = lambda q: expected_log_z(q, length=LENGTH, dangles=2)  # noqa: E731
        grad = np.asarray(jax.grad(f)(q))
        for k, x in ((0, 2), (4, 0), (17, 3), (30, 1)):
            h = 1e-5
            up, down = q.copy(), q.copy()
            up[k, x] += h
            down[k, x] -= h
            fd = (float(f(up)) - float(f(down))) / (2 * h)
            assert abs(fd - grad[k, x]) < 1e-6 * max(1.0, abs(grad[k, x])), (k, x, fd, grad[k, x])
        allowed, dp, spec = prepare_expected(len(seq), LENGTH)

        def padded(q, outside):
            qp = jax.numpy.zeros((allowed.shape[0], 4)).at[LEFT:LEFT + len(seq)].set(q)
            return expected_log_partition(qp, allowed, dp, spec, LENGTH, outside=outside,
                                          dangles=2, n=len(seq))

        # ``grad`` is the outside pass's (``expected_log_z`` runs with ``outside=True``): a
        # jitted outside-pass gradient of ``padded`` would be the same, one more ~20 s compile
        g_rev = jax.jit(jax.grad(lambda q: padded(q, False)))(q)
        np.testing.assert_allclose(np.asarray(g_rev), grad, rtol=1e-9, atol=1e-12)


@pytest.mark.slow  # dangles 2 (fast subset: the one-hot and junction tests)
def test_d2_target_probability_equals_vienna():
    """One-hot, dangles 2: ln E[w(target)] - ln E[Z] is ViennaRNA's ln fc.pr_structure -d2."""
    seq = MULTILOOPS[0][0]
    fc = fold_compound(seq, 2)
    structure, mfe = fc.mfe()
    fc.exp_params_rescale(mfe)
    fc.pf()
    with pf.x64():
        for target in (structure, "." * len(seq)):
            got = float(log_target_probability(one_hot(seq), target, length=LENGTH, dangles=2))
            assert abs(got - np.log(fc.pr_structure(target))) < 1e-5, target


@pytest.mark.slow
def test_d2_design_raises_the_target_probability():
    """Five gradient steps with dangles 2 (a multiloop target): the objective rises, and
    ViennaRNA -d2 gives the designed sequence's target structure most of the ensemble (0.85
    after 5-8 steps, 0.88 after 12, 0.43 after 4; each step ~3 s here)."""
    target = "((((.((((....)))).((((....)))).))))"
    seq, history = design(target, steps=5, seed=0, dangles=2)
    assert history[-1] > history[0] + 5, history
    fc = fold_compound(seq, 2)
    _, mfe = fc.mfe()
    fc.exp_params_rescale(mfe)
    fc.pf()
    assert fc.pr_structure(target) > 0.5, (seq, history)
