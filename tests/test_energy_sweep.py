"""Exactness sweep of the Turner energy engine against ViennaRNA (was bench/bench_turner_sweep.py,
moved here in issue 27): random sequences of 1-500 nt (some with N, some with positions forced
unpaired), both bundled parameter sets, three temperatures, every dangle model. jaxrna's minimum
free energy must equal ViennaRNA's, and its structure must be optimal (see
:func:`energy_oracle.check_optimal`). tests/test_energy_fold.py holds the quick sweep; this one
covers the temperatures and the whole length range, so it is marked ``slow``.

``JAXRNA_SWEEP_COUNT`` sets the sequences per configuration (default 12; the old script's 150:
``JAXRNA_SWEEP_COUNT=150 python -m pytest tests/test_energy_sweep.py``).
"""

import os
import random

import pytest

from energy_oracle import check_optimal, dot_bracket, random_case, vienna_mfe, vienna_params
from jaxrna.energy.api import fold_batch
from jaxrna.energy.params import load_params

pytestmark = pytest.mark.slow

COUNT = int(os.environ.get("JAXRNA_SWEEP_COUNT", "12"))
#: padded lengths and their batch sizes: one program, 512 x 4, for the whole sweep. Four
#: shapes (64 x 8, 128 x 8, 256 x 8, 512 x 4) compiled four programs, ~10 CPU-seconds each,
#: most of the sweep's time (45 of 67 s here; every test after the first ran in ~4 s, mostly
#: ViennaRNA): the one program runs the shorter sequences padded, as fast.
SHAPES = ((512, 4),)


def shape_of(n: int) -> tuple[int, int]:
    return next((length, batch) for length, batch in SHAPES if n <= length)


@pytest.mark.parametrize("name", ["turner2004", "turner1999"])
@pytest.mark.parametrize("temperature", [37.0, 20.0, 55.0])
def test_sweep_equals_vienna(name, temperature):
    rng = random.Random(f"sweep {name} {temperature}")
    params = load_params(name, temperature)
    checked = 0
    with vienna_params(name):
        for dangles in (0, 1, 2):
            cases = sorted((random_case(rng, 1, 500) for _ in range(COUNT)),
                           key=lambda c: len(c[0]))
            for length, batch in SHAPES:
                group = [c for c in cases if shape_of(len(c[0]))[0] == length]
                for k in range(0, len(group), batch):
                    part = group[k:k + batch]
                    got = fold_batch([s for s, _ in part], params, dangles,
                                     unpaired=[u for _, u in part], length=length, batch=batch)
                    for (seq, up), (energy, partner) in zip(part, got):
                        want, _, fc = vienna_mfe(seq, dangles, temperature, up)
                        assert energy == want, (name, temperature, dangles, seq, up)
                        structure = dot_bracket(partner)
                        assert all(structure[i] == "." for i in up)
                        check_optimal(fc, seq, structure, params, dangles, want)
                        checked += 1
    assert checked == 3 * COUNT
