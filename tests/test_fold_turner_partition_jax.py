"""jaxrna's own engine of ``fold --model turner --partition`` (:mod:`jaxrna.energy.partition_jax`)
against ViennaRNA's (:mod:`jaxrna.energy.partition_vienna`, itself checked against ViennaRNA's
API in tests/test_fold_turner_partition_cli.py): the same structures, energies and symbols,
ensemble energies within 1e-4 kcal/mol, probabilities within 1e-6, on random sequences with
both parameter sets, dangles 0, 1 and 2, two temperatures, unpaired positions and MEA; the CLI
with ``--backend cpu`` (the JAX engine) against ``--backend auto`` (ViennaRNA's on a machine
without a GPU), and a record too large refused with its estimate."""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from jaxrna.energy.api import EnergyModel
from jaxrna.energy.ensemble import partition_energy_records
from jaxrna.io.fasta import Record

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _records(seed: str, count: int, longest: int) -> list[Record]:
    rng = random.Random(seed)
    out = []
    for k in range(count):
        n = rng.randint(1, longest)
        alphabet = "ACGU" if k % 3 else "GGCCAU"       # some GC-rich, more structure
        out.append(Record(f"r{k}", "".join(rng.choice(alphabet) for _ in range(n))))
    return out


def _same(a, b):
    assert (a.id, a.sequence, a.energy, a.structure) == (b.id, b.sequence, b.energy, b.structure)
    assert abs(a.ensemble_energy - b.ensemble_energy) < 1e-4, (a.id, a.ensemble_energy,
                                                                 b.ensemble_energy)
    assert np.abs(a.probabilities - b.probabilities).max(initial=0) < 1e-6, a.id
    assert a.ensemble_symbols == b.ensemble_symbols, a.id
    assert a.centroid == b.centroid and a.centroid_energy == pytest.approx(b.centroid_energy)
    assert abs(a.centroid_distance - b.centroid_distance) < 1e-5
    assert abs(a.mfe_frequency - b.mfe_frequency) < 1e-5 * max(1.0, b.mfe_frequency)
    assert abs(a.ensemble_diversity - b.ensemble_diversity) < 1e-5
    assert a.mea_structure == b.mea_structure, a.id
    if b.mea_energy is not None:        # ViennaRNA's eval_structure is a C float
        assert a.mea_energy == pytest.approx(b.mea_energy, abs=1e-5)
    if b.mea is not None:
        assert abs(a.mea - b.mea) < 1e-4 * max(1.0, abs(b.mea)), (a.mea, b.mea)


@pytest.mark.parametrize("params,temperature,dangles", [
    ("turner2004", 37.0, 2), ("turner2004", 37.0, 0), ("turner1999", 30.0, 1)])
def test_jax_engine_equals_vienna_engine(params, temperature, dangles):
    records = _records(f"{params}{temperature}{dangles}", 14, 120) + [Record("empty", "")]
    model = EnergyModel(params, temperature, dangles)
    unpaired = {"r1": (0, 3, 5), "r4": (2,)}
    gamma = 1.5 if dangles != 0 else None
    jax_results = list(partition_energy_records(records, model, mea_gamma=gamma,
                                                unpaired=unpaired, engine="jax", backend="cpu"))
    vienna_results = list(partition_energy_records(records, model, mea_gamma=gamma,
                                                   unpaired=unpaired, processes=1))
    assert [r.id for r in jax_results] == [r.id for r in records]
    for a, b in zip(jax_results, vienna_results):
        _same(a, b)
    assert any(r.mfe_frequency < 0.9 for r in vienna_results)       # not all trivial
    assert any(len(r.pair_p) > 3 for r in vienna_results)


def _cli(args, env=None):
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    full = dict(os.environ, PYTHONPATH=path, **(env or {}))
    return subprocess.run([sys.executable, "-m", "jaxrna", "fold", *args], capture_output=True,
                          text=True, env=full)


@pytest.fixture(scope="module")
def cli_cache(tmp_path_factory):
    """One compile cache for this module's CLI runs (none of them counts programs): the JAX
    engine's programs of class 128 are compiled once, by whichever runs first (CI time)."""
    return str(tmp_path_factory.mktemp("cli-cache"))


@pytest.mark.slow
def test_cli_jax_engine_equals_vienna_engine(tmp_path, cli_cache):
    fasta = tmp_path / "in.fa"
    recs = _records("cli", 6, 90)
    fasta.write_text("".join(f">{r.id}\n{r.sequence}\n" for r in recs))
    env = {"JAXRNA_CACHE_DIR": cli_cache}
    mine = _cli(["--partition", "--mea", "--backend", "cpu", "-f", "json", str(fasta)], env)
    theirs = _cli(["--partition", "--mea", "--backend", "auto", "-f", "json", str(fasta)], env)
    assert "ViennaRNA" in _cli(["--partition", "-v", "--sequence", "GGGAAACCC"], env).stderr
    assert mine.returncode == 0 and theirs.returncode == 0, (mine.stderr, theirs.stderr)
    a, b = json.loads(mine.stdout), json.loads(theirs.stdout)
    assert len(a) == len(b) == len(recs)
    for x, y in zip(a, b):
        for key in ("id", "sequence", "energy", "structure", "centroid", "mea_structure"):
            assert x[key] == y[key], key
        assert abs(x["ensemble_energy"] - y["ensemble_energy"]) < 1e-4
        px = {(i, j): p for i, j, p in x["pair_probabilities"]}
        py = {(i, j): p for i, j, p in y["pair_probabilities"]}
        for pair in set(px) | set(py):
            assert abs(px.get(pair, 0.0) - py.get(pair, 0.0)) < 2e-6, pair
    dbn = _cli(["--partition", "--backend", "cpu", str(fasta)], env)
    ref = _cli(["--partition", "--backend", "auto", str(fasta)], env)
    assert dbn.returncode == 0 and dbn.stdout == ref.stdout      # RNAfold -p's text, rounded


@pytest.mark.slow
def test_a_record_too_large_is_refused_with_its_estimate(tmp_path, cli_cache):
    fasta = tmp_path / "in.fa"
    fasta.write_text(">small\nGGGGAAACCCC\n>big\n" + "GGGAAACCC" * 30 + "\n")
    r = _cli(["--partition", "--backend", "cpu", "--max-memory", "0.05", str(fasta)],
             {"JAXRNA_CACHE_DIR": cli_cache})
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "big" in r.stderr and "partition function" in r.stderr, r.stderr
    assert "100.0 MiB" in r.stderr and "small" not in r.stderr, r.stderr  # 512-nt class
    assert r.stdout.startswith(">small")


@pytest.mark.gpu
def test_gpu_engine_equals_cpu_engine_and_vienna():
    """On a GPU: the JAX engine there equals ViennaRNA's (the same tolerances), and its
    probabilities equal the JAX engine's on the CPU to 1e-9."""
    records = _records("gpu", 24, 300)
    model = EnergyModel()
    gpu = list(partition_energy_records(records, model, mea_gamma=1.0, engine="jax",
                                        backend="gpu"))
    cpu = list(partition_energy_records(records, model, mea_gamma=1.0, engine="jax",
                                        backend="cpu"))
    vienna = list(partition_energy_records(records, model, mea_gamma=1.0, processes=1))
    for a, b, c in zip(gpu, cpu, vienna):
        _same(a, c)
        assert abs(a.ensemble_energy - b.ensemble_energy) < 1e-9
        assert np.abs(a.probabilities - b.probabilities).max(initial=0) < 1e-9


@pytest.mark.slow
def test_measures_in_worker_processes_change_nothing(monkeypatch):
    """Every record's measures, structures' energies and MEA computed by worker processes
    (hosts of many cores, while the device computes later batches) equal those computed
    here, in input order (an empty record among them). The second run takes the first one's device results (the
    partition batches: ~13 of its 16 CPU-seconds here, CI time); its workers recompute every
    structure energy and MEA from them."""
    import hashlib
    import pickle

    import jax

    from jaxrna.energy import partition
    from jaxrna.energy import partition_jax as pj

    real, device_results = partition.batch_pair_probabilities, {}

    def remembered(*args):
        # a batch's inputs, as arrays on the host: the same batch gives the same key
        key = hashlib.sha256(pickle.dumps(jax.tree_util.tree_map(np.asarray, args))).hexdigest()
        if key not in device_results:
            device_results[key] = real(*args)
        return device_results[key]

    monkeypatch.setattr(partition, "batch_pair_probabilities", remembered)
    records = _records("workers", 70, 60)
    records.insert(5, Record("empty", ""))
    model = EnergyModel("turner2004", 37.0, 1)
    here = list(partition_energy_records(records, model, mea_gamma=2.0, engine="jax",
                                         backend="cpu"))
    batches = len(device_results)
    assert batches > 1
    monkeypatch.setattr("jaxrna.pipeline.default_workers", lambda: 2)
    # as on a GPU: batches on two threads of the device, results handed on as they are ready
    monkeypatch.setitem(pj.THREADS_PER_DEVICE, "cpu", 2)
    there = list(partition_energy_records(records, model, mea_gamma=2.0, engine="jax",
                                          backend="cpu"))
    assert len(here) == len(there) == 71 and len(device_results) == batches
    assert [r.id for r in there] == [r.id for r in records]
    for a, b in zip(here, there):
        assert (a.centroid_energy, a.mfe_frequency, a.mea_structure, a.mea, a.mea_energy) == \
            (b.centroid_energy, b.mfe_frequency, b.mea_structure, b.mea, b.mea_energy)
        assert (a.structure, a.ensemble_energy, a.ensemble_symbols, a.centroid,
                a.centroid_distance, a.ensemble_diversity) == \
            (b.structure, b.ensemble_energy, b.ensemble_symbols, b.centroid,
             b.centroid_distance, b.ensemble_diversity)
        for name in ("pair_i", "pair_j", "pair_p"):
            assert np.array_equal(getattr(a, name), getattr(b, name))
    assert any(a.mea_structure.count("(") for a in here)
