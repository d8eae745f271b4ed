"""Co-optimal structures: jaxrna's JAX engine picks exactly RNAfold's (ViennaRNA 2.8).

Where several structures share the minimum free energy (about 2% of random sequences, far
more of repeats and AU-rich ones), the traceback of :mod:`jaxrna.energy.traceback` tries each
cell's decompositions in ViennaRNA's backtracking order, so its structure is the one
``RNA.fold_compound(seq, md).mfe()`` returns, and ``jaxrna fold --model turner`` writes the
same bytes with either engine (:mod:`jaxrna.energy.vienna`). The plain Python reference
(:mod:`jaxrna.energy.reference`) follows the same order.

The JAX engine folds every case through one program (padded length 256, batches of 8).
"""

import os
import random
import subprocess
import sys

import pytest

from jaxrna.energy import vienna
from jaxrna.energy.api import EnergyModel, fold_batch
from jaxrna.energy.params import load_params
from jaxrna.energy.reference import dot_bracket, mfe
from jaxrna.io.fasta import Record

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = [(p, d) for p in ("turner2004", "turner1999") for d in (0, 1, 2)]
UNITS = ["GGGAAACCC", "GCAUAUGC", "AUAUAU", "GGAACC", "CGCGAAAA", "GAAAC", "GGGGAAAACCCC"]


def tie_prone(rng: random.Random, count: int, lo: int, hi: int) -> list[str]:
    """Repeats of short stems (a few bases changed) and AU-rich sequences: many structures
    share the minimum energy."""
    out = []
    for k in range(count):
        n = rng.randint(lo, hi)
        if k % 2:
            out.append("".join(rng.choice("AAUUUAGC") for _ in range(n)))
            continue
        unit = rng.choice(UNITS)
        seq = list((unit * (n // len(unit) + 1))[:n])
        for _ in range(rng.randint(0, 3)):
            seq[rng.randrange(n)] = rng.choice("ACGU")
        out.append("".join(seq))
    return out


def cases(seed: str, random_count: int, tie_count: int, hi: int = 250) -> list[Record]:
    rng = random.Random(seed)
    seqs = ["".join(rng.choice("ACGU") for _ in range(rng.randint(1, hi)))
            for _ in range(random_count)]
    seqs += tie_prone(rng, tie_count, 10, hi)
    seqs += ["GGGAAACCC" * 4 + "G", "GGGAAACCCU" * 6, "AUAUAUAUAUAUAUAU" * 3,
             "CGCGAAAACGGGAAAAAGCGAAAA" + "CGCGAAAA" * 8 + "CGCG"]
    return [Record(f"r{k}", s) for k, s in enumerate(seqs)]


def jax_structures(records, model: EnergyModel) -> list[tuple[int, str]]:
    params = model.load()
    out = []
    for k in range(0, len(records), 8):
        group = [r.sequence for r in records[k:k + 8]]
        for seq, (energy, partner) in zip(group, fold_batch(group, params, model.dangles,
                                                              length=256, batch=8)):
            pairs = [(i, int(j)) for i, j in enumerate(partner[:len(seq)]) if j > i]
            out.append((int(energy), dot_bracket(pairs, len(seq))))
    return out


@pytest.mark.slow  # the reference's tie test stays in the fast subset
@pytest.mark.parametrize("params,dangles", CONFIGS)
def test_jax_engine_picks_rnafolds_structure(params, dangles):
    model = EnergyModel(params, 37.0, dangles)
    records = cases(f"ties-{params}-{dangles}", 40, 24)
    want = [(r.energy, r.structure) for r in vienna.fold_records(records, model, processes=1)]
    got = jax_structures(records, model)
    bad = [(r.sequence, g, w) for r, g, w in zip(records, got, want) if g != w]
    assert not bad, f"{len(bad)} of {len(records)} differ, first: {bad[0]}"


def test_reference_picks_rnafolds_structure():
    """The Python reference's traceback follows the same order (short sequences: it is slow)."""
    for params, dangles in CONFIGS:
        p = load_params(params)
        model = EnergyModel(params, 37.0, dangles)
        records = cases(f"ref-{params}-{dangles}", 12, 12, hi=45)[:-3]
        want = [(r.energy, r.structure) for r in vienna.fold_records(records, model, processes=1)]
        got = [mfe(r.sequence, p, dangles) for r in records]
        bad = [(r.sequence, g, w) for r, g, w in zip(records, got, want) if g != w]
        assert not bad, (params, dangles, bad[0])


@pytest.mark.slow  # a JAX engine CLI run; the API tests stay fast
def test_cli_output_is_byte_identical_with_either_engine(tmp_path):
    """``jaxrna fold --model turner`` with ``JAXRNA_ENERGY_ENGINE=vienna`` and ``=jax``: the
    same bytes, tie-prone sequences included (one length class: one program to compile)."""
    records = cases("cli", 10, 14, hi=120)
    fa = tmp_path / "in.fa"
    fa.write_text("".join(f">{r.id} some description\n{r.sequence}\n" for r in records))
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAXRNA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    outs = {}
    for engine in ("vienna", "jax"):
        for extra in ([], ["--dangles", "0", "-f", "json"]):
            r = subprocess.run([sys.executable, "-m", "jaxrna", "fold", "--model", "turner",
                                str(fa), "-q", *extra],
                               env=dict(env, **{vienna.ENGINE_ENV: engine}),
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            outs[engine, tuple(extra)] = r.stdout
    for extra in ((), ("--dangles", "0", "-f", "json")):
        assert outs["vienna", extra] == outs["jax", extra]
        assert outs["jax", extra].count("(") > 50
