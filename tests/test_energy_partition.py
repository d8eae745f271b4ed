"""The JAX partition function of the energy model (:mod:`jaxrna.energy.partition`) against
ViennaRNA 2.8: ``fc.mfe()``, ``fc.exp_params_rescale(mfe)``, ``fc.pf()``, ``fc.bpp()``.

Ensemble free energies within 1e-4 kcal/mol and pair probabilities within 1e-6 on seeded
random sequences (some with N, some with unpaired constraints) of both parameter sets,
dangles 0 and 2, 37 C and another temperature; batches of mixed lengths equal one-by-one
runs and compile one program per class; gradients with respect to parameters match finite
differences. Everything goes through a few fixed shapes (padded length x batch size).
"""

import functools
import random

import jax
import numpy as np
import pytest

from energy_oracle import fold_compound, random_case, vienna_params
from jaxrna.energy import partition as pf
from jaxrna.energy.partition_params import float_params, pf_device_params

BATCH = 8
#: (parameter set, temperature) of the fast sweep; the sets are loaded into ViennaRNA.
CONFIGS = [("turner2004", 37.0), ("turner2004", 55.0), ("turner1999", 37.0)]


def vienna_pf(seq, dangles, temperature, unpaired=(), bpp=False):
    """ViennaRNA's ensemble energy (kcal/mol) and pair probabilities (``n x n``, 0-based)."""
    fc = fold_compound(seq, dangles, temperature, unpaired)
    _, mfe = fc.mfe()
    fc.exp_params_rescale(mfe)
    _, g = fc.pf()
    if not bpp:
        return g, None
    n = len(seq)
    return g, np.triu(np.array(fc.bpp())[1:n + 1, 1:n + 1], 1)


def check_batches(cases, name, temperature, dangles, length, bpp: bool):
    worst = (0.0, 0.0)
    for k in range(0, len(cases), BATCH):
        group = cases[k:k + BATCH]
        group = group + [("", [])] * (BATCH - len(group))
        seqs, ups = [s for s, _ in group], [u for _, u in group]
        if bpp:
            got, probs = pf.pair_probabilities(seqs, name, dangles, temperature, ups, length)
        else:
            got, probs = pf.ensemble_energies(seqs, name, dangles, temperature, ups, length), None
        for row, (seq, up) in enumerate(group):
            if not seq:
                continue
            want, want_p = vienna_pf(seq, dangles, temperature, up, bpp)
            assert abs(got[row] - want) < 1e-4, (name, temperature, dangles, seq, up, got[row],
                                                 want)
            worst = (max(worst[0], abs(got[row] - want)), worst[1])
            if bpp:
                err = float(np.abs(probs[row] - want_p).max()) if len(seq) > 1 else 0.0
                assert err < 1e-6, (name, temperature, dangles, seq, up, err)
                worst = (worst[0], max(worst[1], err))
    return worst


@pytest.mark.parametrize("name,temperature", CONFIGS)
def test_ensemble_energies_equal_vienna(name, temperature):
    """32 sequences of 1-120 nt per dangle model and configuration (one program: 128 x 8)."""
    rng = random.Random(f"pf{name}{temperature}")
    with vienna_params(name):
        for dangles in (0, 2):
            cases = [random_case(rng, 1, 120) for _ in range(32)]
            check_batches(cases, name, temperature, dangles, 128, bpp=False)


def test_pair_probabilities_equal_vienna():
    """Pair probabilities (the gradient of log Z) of 1-60 nt sequences, both dangle models,
    two temperatures and both sets (one program: 64 x 8)."""
    rng = random.Random("pf-bpp")
    for name, temperature in (("turner2004", 37.0), ("turner1999", 24.0)):
        with vienna_params(name):
            for dangles in (0, 2):
                cases = [random_case(rng, 1, 60) for _ in range(16)]
                check_batches(cases, name, temperature, dangles, 64, bpp=True)


def test_dangles_1_and_3_are_2():
    seq = "GGGAAAUCCCGCGAUAGCUAGCAAGCUAGGGG"
    d2 = pf.ensemble_energies([seq] * BATCH, dangles=2, length=32)
    assert abs(d2[0] - vienna_pf(seq, 2, 37.0)[0]) < 1e-4
    for d in (1, 3):
        assert pf.ensemble_energies([seq] * BATCH, dangles=d, length=32)[0] == d2[0]
    with pytest.raises(ValueError):
        pf.pf_dangles(4)


def test_special_hairpins_equal_vienna():
    """Every tri-, tetra- and hexaloop of Turner 2004, alone and in a stem, at 37 and 50 C."""
    p = float_params("turner2004", 37.0)
    seqs = []
    for string in (p.triloops, p.tetraloops, p.hexaloops):
        for loop in string.split():
            seqs += ["GGG" + loop + "CCC", "A" + loop + "U"]
    for temperature in (37.0, 50.0):
        for k in range(0, len(seqs), BATCH):
            group = seqs[k:k + BATCH]
            group = group + [""] * (BATCH - len(group))
            got = pf.ensemble_energies(group, "turner2004", 2, temperature, length=32)
            for row, seq in enumerate(group):
                if seq:
                    want, _ = vienna_pf(seq, 2, temperature)
                    assert abs(got[row] - want) < 1e-4, (seq, temperature, got[row], want)


def _batch_inputs(seqs, length, temperature=37.0, name="turner2004"):
    inp = pf.prepare_pf_batch(seqs, length, name, temperature)
    dp = pf_device_params(float_params(name, temperature), length, temperature)
    return inp, dp


def test_vmap_of_mixed_lengths_equals_one_by_one_and_compiles_once():
    """A batch of mixed lengths in one class gives each sequence's own log Z (run alone, in
    a batch of one), and other length mixes, temperatures, dangles and parameter sets run
    the same program."""
    rng = random.Random("pf-vmap")
    seqs = ["".join(rng.choice("ACGU") for _ in range(n)) for n in (1, 17, 33, 48)]
    with jax.enable_x64(True):
        inp, dp = _batch_inputs(seqs, 48)
        args = (inp["s"], inp["allowed"], inp["special"], inp["n"], dp, np.int32(2))
        together = np.asarray(pf.batch_log_partition(*args))
        for k in range(len(seqs)):
            alone = pf.batch_log_partition(*(a[k:k + 1] for a in args[:4]), dp, np.int32(2))
            assert abs(float(alone[0]) - together[k]) < 1e-9
        programs = pf.batch_log_partition._cache_size()
        other = ["".join(rng.choice("ACGU") for _ in range(n)) for n in (40, 2, 29, 12)]
        for name, temperature, dangles in (("turner2004", 37.0, 0), ("turner1999", 60.0, 2)):
            inp, dp = _batch_inputs(other, 48, temperature, name)
            pf.batch_log_partition(inp["s"], inp["allowed"], inp["special"], inp["n"], dp,
                                   np.int32(dangles))
        assert pf.batch_log_partition._cache_size() == programs
    with vienna_params("turner1999"):
        want, _ = vienna_pf(other[0], 2, 60.0)
    got = pf.ensemble_energies(other, "turner1999", 2, 60.0, length=48)
    assert abs(got[0] - want) < 1e-4


@functools.partial(jax.jit, static_argnames=("outside",))
def _value_and_grads(dp, bonus, s, allowed, special, n, dangles, *, outside):
    """``log Z`` and its gradient with respect to the parameters and the pair bonus.
    ``outside`` is a keyword every call passes: ``jax.jit`` keys a static argument left at its
    default apart from one passed, and the finite-difference test and the reverse-mode test
    share the outside pass's program (one ~5 CPU-second compilation less)."""
    return jax.value_and_grad(
        lambda dp, b: pf.log_partition(s, allowed, special, n, dp, dangles, b, outside),
        argnums=(0, 1))(dp, bonus)


def _single(seq, length, name="turner2004", temperature=37.0, unpaired=()):
    inp = pf.prepare_pf(seq, length, name, temperature, unpaired)
    dp = pf_device_params(float_params(name, temperature), length, temperature)
    return dp, (inp["s"], inp["allowed"], inp["special"], np.int32(inp["n"]))


@pytest.mark.slow  # finite differences; the ViennaRNA checks stay in the fast subset
def test_gradient_wrt_parameters_matches_finite_differences():
    """d log Z / d (the most influential entry of several tables, ml_base, ml_closing, kT)
    against central differences, on a sequence folding into a three-way junction."""
    seq = "GGCGAGCCGAAAGGCAGCCGAAAGGCACGCC"
    with jax.enable_x64(True):
        dp, args = _single(seq, 48)
        bonus = np.zeros((48, 48))
        _, (grad, _) = _value_and_grads(dp, bonus, *args, np.int32(2), outside=True)
        checked = 0
        for key in ("stack", "int11", "mismatch_exterior", "mismatch_multi", "hp_len", "ml_base",
                    "ml_closing", "kT"):
            g_all = np.asarray(grad[key])
            index = np.unravel_index(int(np.argmax(np.abs(g_all))), g_all.shape)
            h = 1e-3
            up = {**dp, key: dp[key].copy()}
            down = {**dp, key: dp[key].copy()}
            up[key][index] += h
            down[key][index] -= h
            fd = (float(_value_and_grads(up, bonus, *args, np.int32(2), outside=True)[0])
                  - float(_value_and_grads(down, bonus, *args, np.int32(2),
                                          outside=True)[0])) / (2 * h)
            g = float(g_all[index])
            assert abs(g) > 1e-6, (key, index, g)
            assert abs(fd - g) < 1e-6 * max(1.0, abs(g)), (key, index, fd, g)
            checked += 1
        assert checked == 8


@pytest.mark.slow
def test_outside_pass_equals_reverse_mode():
    """The custom VJP (outside pass) gives reverse mode's gradients: pair probabilities and
    parameter gradients (with unpaired constraints, dangles 0 and 2, at 30 C)."""
    seq = "GGGAGCUAGCUAAAGCUAGCAUCCCAGCGAUAAUCGCUGCAAUUCG"
    with jax.enable_x64(True):
        dp, args = _single(seq, 48, "turner2004", 30.0, [5, 30])
        for dangles in (0, 2):
            grads = [jax.tree.map(np.asarray, _value_and_grads(
                dp, np.zeros((48, 48)), *args, np.int32(dangles), outside=outside)[1])
                for outside in (True, False)]
            (d1, b1), (d2, b2) = grads
            assert np.abs(b1 - b2).max() < 1e-12
            assert b1[:, 5].max() == 0 and b1[30].max() == 0 and b1.sum() > 0.5
            for x, y in zip(jax.tree.leaves(d1), jax.tree.leaves(d2)):
                assert np.abs(x - y).max() < 1e-9 * max(1.0, np.abs(y).max())


#: The padded length of the longer energies: past the one band of up to 256
#: (:data:`jaxrna.energy.partition_sweep.ONE_BAND_MAX`), so the sweep runs in two bands as
#: their class 384 does, at half its run time (a 384 x 8 batch: 3.9 s warm, 288 x 8: 1.9 s).
LONGER = 288


@pytest.mark.slow
def test_longer_sequences_equal_vienna():
    """121-288 nt padded to :data:`LONGER` (two bands), both dangle models, energies (a batch
    of 8 each) and (for a few, 100-190 nt) pair probabilities."""
    from jaxrna.energy.partition_sweep import bands

    assert len(bands(LONGER)) == len(bands(384)) == 2
    rng = random.Random("pf-long")
    with vienna_params("turner2004"):
        for dangles in (0, 2):
            cases = [random_case(rng, 121, LONGER) for _ in range(8)]
            assert max(len(s) for s, _ in cases) > 256
            check_batches(cases, "turner2004", 37.0, dangles, LONGER, bpp=False)
    with vienna_params("turner1999"):
        cases = [random_case(rng, 100, 190) for _ in range(8)]
        check_batches(cases, "turner1999", 45.0, 2, 192, bpp=True)


@pytest.mark.slow
def test_520_nt_equals_vienna():
    """One 520 nt sequence padded to 528 (four bands, as its class 768 and 1,024 have: a CPU
    sweeps above 512 in four): energy and every probability. The run costs the padded
    length's cube: 700 nt padded to 768 took 3x the run of 528 here, 1,000 nt (padded to
    1,024) 32 CPU-seconds after a 21-second compilation, CI time."""
    from jaxrna.energy.partition_sweep import bands

    rng = random.Random("pf-1000")
    seq = "".join(rng.choice("ACGU") for _ in range(520))
    assert pf.length_class(len(seq)) == 768 and len(bands(768)) == len(bands(528)) == 4
    got, (probs,) = pf.pair_probabilities([seq], length=528)
    want, want_p = vienna_pf(seq, 2, 37.0, bpp=True)
    assert abs(got[0] - want) < 1e-4
    assert np.abs(probs - want_p).max() < 1e-6
