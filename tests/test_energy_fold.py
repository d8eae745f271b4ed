"""The JAX energy folding (fill + traceback) against ViennaRNA and the Python reference.

Every minimum free energy must equal ViennaRNA's (``RNA.fold_compound(seq, md).mfe()``) and
every returned structure must evaluate to it. Sequences go through a few fixed batch shapes
(padded length x batch size), so the whole file compiles a handful of programs.
"""

import random

import numpy as np
import pytest

from energy_oracle import (check_optimal, dot_bracket, random_case, random_sequence,
                           vienna_mfe, vienna_params)
from jaxrna.energy.api import EnergyModel, fold_batch, fold_energy
from jaxrna.energy.params import load_params
from jaxrna.energy.reference import mfe as reference_mfe

CONFIGS = [("turner2004", 37.0), ("turner2004", 55.0), ("turner1999", 37.0), ("turner1999", 20.0)]
#: (padded length, batch size, sequences per configuration and dangle model, length range)
SWEEPS = {"short": (64, 8, 96, (1, 64)), "medium": (256, 8, 16, (65, 250))}
STATS = {"sequences": 0, "vienna_eval_above_mfe": 0}


def run_and_check(cases, name, temperature, dangles, length, batch):
    """Fold ``cases`` [(seq, unpaired)] in batches and check each against ViennaRNA."""
    params = load_params(name, temperature)
    for k in range(0, len(cases), batch):
        group = cases[k:k + batch]
        got = fold_batch([s for s, _ in group], params, dangles, unpaired=[u for _, u in group],
                         length=length, batch=batch)
        for (seq, up), (energy, partner) in zip(group, got):
            want, _, fc = vienna_mfe(seq, dangles, temperature, up)
            assert energy == want, (name, temperature, dangles, seq, up)
            structure = dot_bracket(partner)
            assert all(structure[i] == "." for i in up)
            exact = check_optimal(fc, seq, structure, params, dangles, want)
            STATS["sequences"] += 1
            STATS["vienna_eval_above_mfe"] += not exact


@pytest.mark.slow
@pytest.mark.parametrize("sweep", sorted(SWEEPS))
@pytest.mark.parametrize("name,temperature", CONFIGS)
def test_random_sequences_equal_vienna(sweep, name, temperature):
    length, batch, count, (lo, hi) = SWEEPS[sweep]
    rng = random.Random(f"{sweep}{name}{temperature}")
    with vienna_params(name):
        for dangles in (0, 1, 2):
            cases = [random_case(rng, lo, hi) for _ in range(count)]
            run_and_check(cases, name, temperature, dangles, length, batch)


@pytest.mark.slow
def test_up_to_500_nt_equal_vienna():
    rng = random.Random("large")
    for name, temperature in (("turner2004", 37.0), ("turner1999", 30.0)):
        with vienna_params(name):
            for dangles in (0, 1, 2):
                cases = [random_case(rng, 251, 500) for _ in range(8)]
                run_and_check(cases, name, temperature, dangles, 512, 8)


@pytest.mark.slow
def test_long_sequences_equal_vienna():
    rng = random.Random("long")
    for name, temperature, dangles, n in (("turner2004", 37.0, 2, 1500), ("turner1999", 30.0, 1, 900)):
        with vienna_params(name):
            run_and_check([(random_sequence(rng, n), [])], name, temperature, dangles, 1536, 1)


def special_hairpin_cases(params):
    """Sequences holding every special hairpin of a set, in a stem and alone."""
    out = []
    for string in (params.triloops, params.tetraloops, params.hexaloops):
        for loop in string.split():
            out.append("GGG" + loop + "CCC")
            out.append("A" + loop + "U")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["turner2004", "turner1999"])
def test_special_hairpins_equal_vienna(name):
    params = load_params(name)
    cases = [(s, []) for s in special_hairpin_cases(params)]
    with vienna_params(name):
        for dangles in (0, 1, 2):
            run_and_check(cases, name, 37.0, dangles, 64, 8)


@pytest.mark.slow  # the bundled sets stay in the fast subset
def test_user_parameter_file(tmp_path):
    from test_energy_params import CUSTOM

    path = tmp_path / "custom.par"
    path.write_text(CUSTOM)
    rng = random.Random("custom")
    cases = [random_case(rng, 10, 64) for _ in range(16)] + [("GGGGGGACCCC", []), ("CCGAAAGGAACGGG", [])]
    with vienna_params(str(path)):
        for t in (37.0, 45.0):
            params = load_params(str(path), t)
            for dangles in (0, 2):
                for k in range(0, len(cases), 8):
                    group = cases[k:k + 8]
                    got = fold_batch([s for s, _ in group], params, dangles,
                                     unpaired=[u for _, u in group], length=64, batch=8)
                    for (seq, up), (energy, partner) in zip(group, got):
                        want, _, fc = vienna_mfe(seq, dangles, t, up)
                        assert energy == want, (seq, t, dangles)
                        check_optimal(fc, seq, dot_bracket(partner), params, dangles, want)


@pytest.mark.slow  # test_api_results_and_formatting stays in the fast subset
def test_fast_path_equals_reference():
    rng = random.Random("reference")
    for name, temperature in (("turner2004", 37.0), ("turner1999", 25.0)):
        params = load_params(name, temperature)
        for dangles in (0, 1, 2):
            cases = [random_case(rng, 1, 40) for _ in range(8)]
            got = fold_batch([s for s, _ in cases], params, dangles,
                             unpaired=[u for _, u in cases], length=64, batch=8)
            for (seq, up), (energy, partner) in zip(cases, got):
                e, _ = reference_mfe(seq, params, dangles, unpaired=up)
                assert energy == e


def test_api_results_and_formatting():
    with vienna_params("turner1999"):
        want, structure, _ = vienna_mfe("GGGGAAACCCCAUCGAAAGAUU", 1, 30.0)
    r = fold_energy("GGGGAAACCCCAUCGAAAGAUU", params="turner1999", temperature=30.0, dangles=1)
    assert (r.energy, r.structure) == (want, structure)
    assert r.model == EnergyModel("turner1999", 30.0, 1)
    assert r.score_text == f"{r.energy / 100:6.2f}" and r.score == r.energy / 100
    assert r.json_fields()["params"] == "turner1999"
    assert [x.pairs is None for x in fold_energy(["GGGGAAACCCC"] * 3, with_pairs=False)] == [True] * 3
    u = fold_energy("GGGGAAACCCC", unpaired=[0, 10])
    assert u.structure[0] == "." and u.structure[10] == "."
    assert fold_energy("").energy == 0 and fold_energy("").structure == ""


def test_statistics_are_reported():
    """Runs last in this file: how many sequences were compared (see -rA / the report)."""
    print(f"compared {STATS['sequences']} sequences with ViennaRNA; ViennaRNA's own evaluation "
          f"above the minimum (dangles 1 exterior-loop rule): {STATS['vienna_eval_above_mfe']}")
    assert STATS["sequences"] == 0 or STATS["sequences"] > 100


def test_batched_host_preparation_matches_the_plain_one():
    """prepare_batch's vectorised special-hairpin lookup equals the per-position one."""
    from jaxrna.energy.encoding import encode, special_hairpin_energies
    from jaxrna.energy.fill import SEQ_LEFT, prepare_batch
    from jaxrna.energy.terms import COL_PAD

    rng = random.Random("prepare")
    for name in ("turner2004", "turner1999"):
        params = load_params(name)
        loops = [x for t in (params.triloops, params.tetraloops, params.hexaloops) for x in t.split()]
        def piece():
            if rng.random() < 0.3:
                return rng.choice(loops)
            return random_sequence(rng, rng.randint(0, 6), "ACGUNTacgu")

        seqs = ["".join(piece() for _ in range(rng.randint(0, 12)))[:128] for _ in range(200)]
        batch = prepare_batch(seqs, params, 128, [[0] if seq else [] for seq in seqs])
        for row, seq in enumerate(seqs):
            sp = special_hairpin_energies(seq, params, 128 + COL_PAD)
            assert (batch["special"][row] == np.stack([sp[3], sp[4], sp[6]])).all(), seq
            assert (batch["s"][row, SEQ_LEFT:SEQ_LEFT + len(seq)] == encode(seq)).all()
            assert batch["n"][row] == len(seq) and batch["allowed"][row].sum() == max(len(seq) - 1, 0)


def test_a_reloaded_cpu_program_that_fails_is_compiled_afresh():
    """executable_files.checked_first_call: a reloaded CPU program that fails on its first call is
    replaced by a fresh compile (once); one that works is kept and never rechecked."""
    from jaxrna import executable_files

    calls = []

    def broken(x):
        calls.append("broken")
        raise RuntimeError("INTERNAL: Function fused_computation not found")

    def fresh():
        calls.append("compiled")
        return lambda x: x + 1

    run = executable_files.checked_first_call("t", broken, fresh)
    assert run(1) == 2 and run(2) == 3
    assert calls == ["broken", "compiled"]
    calls.clear()
    run = executable_files.checked_first_call("t", lambda x: x * 10, fresh)
    assert run(1) == 10 and run(3) == 30 and calls == []


def _gpu_band_plan(cases, dangles, length, batch):
    """Fold ``cases`` with a GPU's programs' sweep bands (:func:`jaxrna.energy.fill.bands_for`),
    here on the CPU (the interior loop is the rolled loop where no CUDA GPU builds the kernels)."""
    from jaxrna.energy.api import _collect, _launch

    params = load_params()
    return _collect(_launch([s for s, _ in cases], params, dangles, [u for _, u in cases], True,
                            length, batch, platform="gpu"))


@pytest.mark.parametrize("length,count,lo,hi", [
    (128, 8, 40, 120),
    pytest.param(1536, 1, 1100, 1500, marks=pytest.mark.slow),
])
def test_the_gpus_fewer_bands_give_the_cpus_results(length, count, lo, hi):
    """A GPU's programs sweep in fewer, larger bands (one up to 1,024 nt, two up to 4,096):
    the same energies as ViennaRNA and the same structures as the CPU's band plan."""
    from jaxrna.energy.fill import bands_for, sweep_bands

    assert len(sweep_bands(length, bands_for("gpu", length))) < len(sweep_bands(length))
    rng = random.Random(f"bands{length}")
    cases = [random_case(rng, lo, hi) for _ in range(count)]
    got = _gpu_band_plan(cases, 2, length, count)
    cpu = fold_batch([s for s, _ in cases], load_params(), 2, unpaired=[u for _, u in cases],
                     length=length, batch=count)
    for (seq, up), (energy, partner), (e_cpu, p_cpu) in zip(cases, got, cpu):
        assert energy == vienna_mfe(seq, 2, 37.0, up)[0] == e_cpu
        assert np.array_equal(partner, p_cpu)


@pytest.mark.slow  # two CPU programs; the fast subset keeps the oracle tests above
def test_a_gpu_plan_moves_short_classes_into_spare_rows_with_the_same_results():
    """On a GPU a class whose sequences fit in the empty rows of a longer class's last batch is
    folded there (:func:`jaxrna.energy.batch_plan.into_spare_rows`): fewer programs, no more
    batches, and the same energies (ViennaRNA's) and structures as the CPU's plan; a CPU plan keeps
    every class."""
    from jaxrna.energy.api import _collect, _launch, fold_energy_records
    from jaxrna.energy.batch_plan import BYTES_PER_CELL, device_batches
    from jaxrna.io.fasta import Record

    rng = random.Random("spare rows")
    seqs = [random_sequence(rng, rng.randint(20, 110)) for _ in range(5)] + \
        [random_sequence(rng, rng.randint(300, 420)) for _ in range(2)]
    rng.shuffle(seqs)
    lengths = [len(s) for s in seqs]
    budget = BYTES_PER_CELL * (512 + 64) ** 2 * 8          # 8 rows in the 512 class
    gpu = device_batches(lengths, "gpu", budget)
    cpu = device_batches(lengths, "cpu", budget)
    assert {c for c, _, _ in cpu} == {128, 512}
    assert [(c, r) for c, r, _ in gpu] == [(512, 8)]         # 2 + 5 in one batch of 8 rows
    assert sorted(k for _, _, b in gpu for k in b) == list(range(len(seqs)))
    params = load_params()
    got = {}
    for padded, rows, members in gpu:
        out = _collect(_launch([seqs[k] for k in members], params, 2, None, True, padded, rows,
                               "cpu"), as_pairs=True)
        got.update(zip(members, out))
    expected = list(fold_energy_records([Record(id=f"s{k}", sequence=s)
                                         for k, s in enumerate(seqs)], backend="cpu"))
    for k, (seq, ref) in enumerate(zip(seqs, expected)):
        assert got[k][0] == ref.energy == vienna_mfe(seq, 2, 37.0, ())[0]
        assert tuple(got[k][1]) == tuple(ref.pairs)


def test_fill_and_traceback_programs_equal_the_one_program_form():
    """A batch runs as two programs (the fill, then the traceback of its tables) or, for the
    partition engine, as one (``combined``): the same energies and structures (ViennaRNA's,
    ties included: repeats fold into several optimal structures), and without structures the
    fill alone gives the same energies."""
    from jaxrna.energy.api import _collect, _launch

    rng = random.Random("split")
    seqs = ["GGGGAAACCCC" * 3, "AUAUAUAUAUAUAUAUAU", "A", ""] + \
        [random_sequence(rng, rng.randint(5, 120)) for _ in range(4)]
    params = load_params()
    split = _collect(_launch(seqs, params, 2, None, True, 128, 8, "cpu"), as_pairs=True)
    one = _collect(_launch(seqs, params, 2, None, True, 128, 8, "cpu", combined=True),
                   as_pairs=True)
    scores = _collect(_launch(seqs, params, 2, None, False, 128, 8, "cpu"), as_pairs=True)
    assert split == one
    assert [e for e, _ in scores] == [e for e, _ in split]
    assert all(p is None for _, p in scores)
    assert split[3] == (0, ())                     # the empty row
    for seq, (energy, pairs) in zip(seqs[:3] + seqs[4:], split[:3] + split[4:]):
        ref_energy, ref_structure, _ = vienna_mfe(seq, 2, 37.0, ())
        partner = [-1] * len(seq)
        for i, j in pairs:
            partner[i], partner[j] = j, i
        assert energy == ref_energy
        assert dot_bracket(partner) == ref_structure
