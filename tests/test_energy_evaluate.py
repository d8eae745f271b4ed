"""Energy of a given structure (jaxrna.energy.evaluate) equals ViennaRNA's eval_structure."""

import random

import pytest

from energy_oracle import fold_compound, random_sequence, vienna_eval, vienna_params
from jaxrna.energy.evaluate import energy_of_structure, loop_energies, pair_table
from jaxrna.energy.params import INF, load_params


def sampled_structures(fc, count):
    structure, e = fc.mfe()
    fc.exp_params_rescale(e)
    fc.pf()
    return [structure] + list(fc.pbacktrack(count))


@pytest.mark.slow
@pytest.mark.parametrize("name,temperature", [("turner2004", 37.0), ("turner1999", 37.0),
                                              ("turner2004", 18.0), ("turner1999", 50.0)])
def test_evaluation_equals_vienna(name, temperature):
    rng = random.Random(f"eval{name}{temperature}")
    p = load_params(name, temperature)
    checked = 0
    with vienna_params(name):
        for k in range(30):
            seq = random_sequence(rng, rng.randint(8, 160), "ACGUN" if k % 7 == 0 else "ACGU")
            for dangles in (0, 1, 2):
                fc = fold_compound(seq, dangles, temperature)
                for structure in sampled_structures(fc, 3):
                    assert energy_of_structure(seq, structure, p, dangles) == vienna_eval(fc, structure)
                    checked += 1
    assert checked == 30 * 3 * 4


def test_special_cases_equal_vienna():
    """Non-canonical pairs (ViennaRNA's pair type 7), loops longer than 30, lowercase, T,
    special hairpins of both sets."""
    cases = [
        ("GGGAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACCC", "(((" + "." * 39 + ")))"),       # hairpin 39
        ("GGGAAAAAAAAAAAAAAAAAAAAAGGGAAAACCCAAAAAAAAAAAAAACCC",
         "(((" + "." * 21 + "(((....)))" + "." * 14 + ")))"),                               # interior 35
        ("GGGCAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAGGGAAAACCCGCCC",
         "((((" + "." * 33 + "(((....)))" + "))))"),                                        # bulge 33
        ("GGGAAACCA", "(((...)))"),                                                          # AC pair
        ("gggGAAAcccAUCGAAAGAUU", "((((...))))(((....)))"),
        ("GGGTTCGCCC", "(((....)))"),
        ("CCUUCGGG", "((....))"), ("CUUCGG", "(....)"), ("CAACGG", "(....)"),
        ("GGCAACGCC", "((.....))"), ("ACAGUACU", "(......)"), ("GGACAGUGAUCC", "(((......)))"),
        ("GGGGACAAAAGUCC", "((((......))))"), ("GGGGAC", "(....)"),
    ]
    for name in ("turner2004", "turner1999"):
        with vienna_params(name):
            for t in (37.0, 30.0):
                p = load_params(name, t)
                for dangles in (0, 1, 2):
                    for seq, structure in cases:
                        fc = fold_compound(seq.upper(), dangles, t)
                        assert energy_of_structure(seq, structure, p, dangles) == \
                            vienna_eval(fc, structure), (name, t, dangles, seq, structure)


def test_too_short_hairpin_is_inf_and_pair_table():
    assert energy_of_structure("GGAACC", "((..))") >= INF
    assert pair_table("(.)") == [2, -1, 0]
    with pytest.raises(ValueError):
        pair_table("(()")
    kinds = [k for k, *_ in loop_energies("GGGGAAACCCCAUCGAAAGAUU", "((((...))))(((....))).")]
    assert kinds.count("hairpin") == 2 and kinds.count("interior") == 5 and kinds[0] == "exterior"
