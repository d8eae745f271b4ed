"""The plain Python energy folding (jaxrna.energy.reference) against brute force and ViennaRNA."""

import random
from functools import lru_cache

import pytest

from energy_oracle import check_optimal, random_case, vienna_mfe, vienna_params
from jaxrna.energy.encoding import PAIR, encode
from jaxrna.energy.evaluate import energy_of_structure
from jaxrna.energy.params import INF, load_params
from jaxrna.energy.reference import mfe


def all_structures(seq: str, unpaired=()):
    """Every secondary structure with canonical pairs, hairpins of >= 3 bases."""
    codes = encode(seq)
    n = len(seq)
    banned = set(unpaired)

    @lru_cache(maxsize=None)
    def between(i, j):
        if i > j:
            return ((),)
        out = list(between(i + 1, j))
        if i not in banned:
            for k in range(i + 4, j + 1):
                if k not in banned and PAIR[codes[i], codes[k]]:
                    for inside in between(i + 1, k - 1):
                        for outside in between(k + 1, j):
                            out.append(((i, k),) + inside + outside)
        return tuple(out)

    return between(0, n - 1)


def to_db(pairs, n):
    s = ["."] * n
    for i, j in pairs:
        s[i], s[j] = "(", ")"
    return "".join(s)


@pytest.mark.parametrize("dangles", [0, 1, 2])
def test_reference_equals_brute_force(dangles):
    rng = random.Random(100 + dangles)
    checked = 0
    for name, t in (("turner2004", 37.0), ("turner1999", 25.0)):
        p = load_params(name, t)
        for _ in range(25):
            n = rng.randint(1, 16)
            seq = "".join(rng.choice("ACGU" if rng.random() < 0.8 else "ACGUN") for _ in range(n))
            up = rng.sample(range(n), rng.randint(0, 2)) if n and rng.random() < 0.3 else []
            best = min(energy_of_structure(seq, to_db(s, n), p, dangles, vienna_d1=False)
                       for s in all_structures(seq, up))
            e, structure = mfe(seq, p, dangles, unpaired=up)
            assert e == best, (seq, up)
            assert energy_of_structure(seq, structure, p, dangles, vienna_d1=False) == e
            assert all(structure[k] == "." for k in up)
            checked += 1
    assert checked == 50


@pytest.mark.parametrize("name,temperature", [("turner2004", 37.0), ("turner1999", 30.0),
                                              ("turner2004", 60.0)])
def test_reference_equals_vienna(name, temperature):
    rng = random.Random(f"{name}{temperature}")
    p = load_params(name, temperature)
    with vienna_params(name):
        for k in range(36):
            seq, up = random_case(rng, 1, 45)
            dangles = k % 3
            want, _, fc = vienna_mfe(seq, dangles, temperature, up)
            got, structure = mfe(seq, p, dangles, unpaired=up)
            assert got == want, (seq, dangles, up)
            check_optimal(fc, seq, structure, p, dangles, want)


def test_short_and_empty():
    assert mfe("") == (0, "")
    assert mfe("GGGAAAUCC"[:4]) == (0, "....")
    assert mfe("NNNNNNNNNN") == (0, "..........")
    assert energy_of_structure("GGGAAACCC", "(((...)))") < INF
