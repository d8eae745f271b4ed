"""``jaxrna targets`` energies: the jaxrna engines (``cpu``: NumPy, ``device``: the energy
engine's JAX program, here on the CPU) against ViennaRNA (``vienna``, the reference), hit for
hit, on miRanda's example, on thousands of random and planted miRNA/target pairs and on random
strings, and through the CLI, the worker processes and the device service."""

import io
import random

import numpy as np
import pytest

from jaxrna.cli import main
from jaxrna.formats.miranda import writer_for
from jaxrna.targets import energy as E
from jaxrna.targets import reference
from jaxrna.targets.api import write_scan
from jaxrna.targets.engine import Engine, make_target, prepare_query
from jaxrna.targets.scoring import ScanParams
from jaxrna.targets.select import TargetText, fold_strings, select
from test_targets_engine import make_cases
from test_targets_golden import CASES, MIRNA, UTR, golden

VIENNA = E.ViennaEngine()
CPU = E.CpuEngine()


def random_fold_strings(seed, count, linker=True):
    """Strings as miRanda folds them (miRNA 3'->5', linker, site), with planted complements,
    lowercase flanks, DNA letters, ambiguity codes, '-' past target ends; some without linker,
    some long enough for multiloops, some tiny."""
    rng = random.Random(seed)
    comp = {"A": "U", "C": "G", "G": "C", "U": "A", "T": "A"}
    out = []
    for k in range(count):
        alphabet = rng.choice(["ACGU", "ACGT", "ACGUacgu", "ACGUN-", "AAUUGC", "GGCCAU", "ACGURYKX"])
        a, b = rng.randint(1, 26), rng.randint(0, 34)
        if k % 17 == 0:  # long: multiloops, hairpins beyond 30 nt
            a, b = rng.randint(40, 60), rng.randint(30, 60)
        mirna = "".join(rng.choice(alphabet) for _ in range(a))
        site = "".join(rng.choice(alphabet) for _ in range(b))
        if rng.random() < 0.5:
            core = "".join(comp.get(c.upper(), "A") for c in mirna[:b])
            site = (core + site[len(core):])[:b]
        if rng.random() < 0.3:
            site = "--" + site.lower()
        out.append(mirna + (E.LINKER if linker or rng.random() < 0.5 else "") + site)
    return out


def test_cpu_engine_matches_vienna_on_random_strings():
    strings = random_fold_strings(1, 2500) + random_fold_strings(2, 300, linker=False)
    strings += ["A", "GGGGAAACCCC", "GGGGAAACCCC" + E.LINKER, E.LINKER, "xxxxxxx" + "GGGAAACCC"]
    ours, theirs = CPU.energies(strings), VIENNA.energies(strings)
    bad = [(s, a, b) for s, a, b in zip(strings, ours, theirs) if a != b]
    assert not bad, bad[:5]
    assert len(set(theirs)) > 500  # not a degenerate set


def test_duplex_folder_batches_of_mixed_lengths():
    """Strings of different lengths padded into one batch fold as they do alone."""
    from jaxrna.targets.duplex import DuplexFolder

    folder = DuplexFolder(E.recipe_params(), batch=7)
    strings = [s.upper().replace("X", "G").replace("-", "N") for s in random_fold_strings(3, 60)]
    together = folder.fold_strings(strings)
    alone = [int(folder.fold_strings([s])[0]) for s in strings]
    assert together.tolist() == alone


def test_recipe_matches_the_vienna_path_settings():
    """The parameters are Turner 1999 at 30 C with the terminal AU penalty of 37 C (0.50)."""
    p = E.recipe_params()
    assert (p.name, p.temperature, p.terminal_au) == ("turner1999", 30.0, 50)
    assert E.kcal([-2454, 0, -1]).tolist() == [float(np.float32(-24.54)), 0.0, float(np.float32(-0.01))]


def scan_hits(mirnas, targets, params, energy):
    engine = Engine(params, energy=energy, lane_columns=61)
    queries = [prepare_query(f"m{k}", "", s.upper(), params) for k, s in enumerate(mirnas)]
    tg = [make_target(f"t{k}", "", s.upper()) for k, s in enumerate(targets)]
    return engine.scan_chunk(queries, tg)


@pytest.mark.slow
def test_every_hit_of_random_and_planted_pairs():
    """Thousands of pairs: every hit's fold string gets the same energy from each engine, and
    the scan with the cpu engine equals the reference scan with ViennaRNA (threshold and all)."""
    mirnas, targets = make_cases(31, 16, 200, 300, plant=0.8, short=False)
    params = ScanParams(score_threshold=100)
    # every hit of every pair (no energy filter), folded by each engine
    engine = Engine(params)
    queries = [prepare_query(f"m{k}", "", s.upper(), params) for k, s in enumerate(mirnas)]
    text = TargetText.from_sequences([t.upper() for t in targets])
    strings = []
    for ks, traced in engine.iter_traced(queries, [make_target(f"t{k}", "", s.upper()) for k, s in enumerate(targets)]):
        strings += fold_strings(select(traced, [queries[k].sequence for k in ks], text))
    assert len(strings) >= 2000
    assert CPU.energies(strings) == VIENNA.energies(strings)
    # the whole scan, energy filter included, against the reference with ViennaRNA
    params = ScanParams(score_threshold=110, energy_threshold=-14)
    found = scan_hits(mirnas[:4], targets[:60], params, CPU)
    n = 0
    for k, q in enumerate(mirnas[:4]):
        for t, tg in enumerate(targets[:60]):
            expected = reference.scan_pair(q.upper(), tg.upper(), params)
            assert found.get((k, t), []) == expected, (k, t)
            n += len(expected)
    assert n >= 20


@pytest.mark.parametrize("engine", ["cpu", "vienna"])
@pytest.mark.parametrize("name", sorted(n for n in CASES if "noenergy" not in n))
def test_golden_examples_with_each_engine(name, engine, tmp_path):
    out = tmp_path / "out.txt"
    assert main(["targets", MIRNA, UTR, *CASES[name], "--energy-engine", engine, "-o", str(out)]) == 0
    assert out.read_text() == golden(name)


def test_engine_from_environment(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(E.ENGINE_ENV, "vienna")
    assert E.engine_name(None, "gpu") == "vienna"
    assert E.engine_name("cpu", "gpu") == "cpu"
    out = tmp_path / "out.txt"
    assert main(["targets", MIRNA, UTR, "-o", str(out)]) == 0
    assert out.read_text() == golden("bantam_hid_default.txt")
    monkeypatch.setenv(E.ENGINE_ENV, "bogus")
    assert main(["targets", MIRNA, UTR, "-o", str(out)]) == 2
    assert "JAXRNA_ENERGY_ENGINE" in capsys.readouterr().err
    monkeypatch.delenv(E.ENGINE_ENV)
    assert (E.engine_name(None, "gpu"), E.engine_name(None, "cpu"), E.engine_name("auto", "gpu")) == \
        ("device", "cpu", "device")


# --------------------------------------------------------------------------- the device engine

@pytest.mark.slow
def test_device_engine_matches_vienna():
    """The device engine's program (on this CPU) on the golden example's hits and random
    strings (the longer ones folded by the cpu engine), against ViennaRNA."""
    strings = random_fold_strings(4, 120)
    assert sum(len(s) > E.DEVICE_LENGTH for s in strings) >= 5
    scan = reference.scan_pair(next(_records(MIRNA)), next(_records(UTR)), ScanParams(), energy=lambda s: 0.0)
    strings += fold_strings_of(scan)
    assert E.DeviceEngine().energies(strings) == VIENNA.energies(strings)


def _records(path):
    with open(path) as fh:
        seq = []
        for line in fh:
            if line.startswith(">"):
                if seq:
                    yield "".join(seq).upper()
                seq = []
            else:
                seq.append(line.strip())
        if seq:
            yield "".join(seq).upper()


def fold_strings_of(hits):
    return [E.duplex_string(h.aln_mirna, h.aln_target, h.row_start, h.mirna_len - h.row_end) for h in hits]


@pytest.fixture(scope="module")
def scan_files(tmp_path_factory):
    mirnas, targets = make_cases(41, 5, 40, 400, plant=1.0, short=False)
    d = tmp_path_factory.mktemp("energy")
    m, t = d / "m.fa", d / "t.fa"
    m.write_text("".join(f">m{k}\n{s}\n" for k, s in enumerate(mirnas)))
    t.write_text("".join(f">t{k}\n{s}\n" for k, s in enumerate(targets)))
    return str(m), str(t)


def _report(files, params, engine, workers):
    out = io.StringIO()
    stats = write_scan(*files, writer_for("miranda", out, no_energy=False, quiet=False), params,
                       chunk_nt=3000, host_workers=workers, energy_engine=engine,
                       engine_options={"query_block": 2})
    return out.getvalue(), stats


@pytest.mark.slow
@pytest.mark.parametrize("threshold", [1, -18])
def test_device_energies_in_worker_processes(scan_files, threshold):
    """With worker processes the device engine folds the hits of many jobs in this process
    between the workers' two steps; the report is the ViennaRNA path's, byte for byte."""
    params = ScanParams(score_threshold=120, energy_threshold=threshold)
    expected, stats = _report(scan_files, params, "vienna", 0)
    assert stats["hits"] >= 10
    got, stats = _report(scan_files, params, "device", 2)
    assert got == expected
    assert stats["energy_engine"] == "device" and stats["energy"]["hits"] >= stats["hits"]
    got, _ = _report(scan_files, params, "cpu", 2)
    assert got == expected


def test_device_service_errors_reach_the_run(scan_files, monkeypatch):
    """A failing device fold ends the run with its error (no hang, no partial report)."""
    def broken(self, *args, **kwargs):
        raise RuntimeError("device fold failed")

    monkeypatch.setattr(E.DeviceEngine, "fold", broken)
    with pytest.raises(RuntimeError, match="device fold failed"):
        _report(scan_files, ScanParams(score_threshold=120), "device", 2)


def test_golden_example_with_the_device_engine(tmp_path):
    for name in ("bantam_hid_default.txt", "bantam_hid_en-20.txt"):
        out = tmp_path / "out.txt"
        assert main(["targets", MIRNA, UTR, *CASES[name], "--energy-engine", "device", "-o", str(out)]) == 0
        assert out.read_text() == golden(name)


def test_no_energy_folds_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(E, "make_engine", lambda *a, **k: pytest.fail("an engine was made"))
    out = tmp_path / "out.txt"
    assert main(["targets", MIRNA, UTR, "--no-energy", "--energy-engine", "vienna", "-o", str(out)]) == 0
    assert out.read_text() == golden("bantam_hid_noenergy.txt")


def test_device_service_folds_full_batches_and_splits_jobs(monkeypatch):
    """DeviceEnergies folds the queued strings of many jobs in calls of exactly the batch size
    (a job split over calls where it falls), and each job gets back its own energies."""
    import concurrent.futures
    import threading
    import time

    import jax

    from jaxrna.targets import output

    sizes = [5, 0, 13, 8, 1, 21, 3]
    calls, lock = [], threading.Lock()

    class FakeEngine:
        devices = jax.devices("cpu")[:1]

        def batch_rows(self, platform, device=None):
            return 8

        def fold(self, inputs, special, device):
            with lock:
                calls.append(len(inputs))
            # a string's "energy": minus its length, plus its special hairpins' energies
            out = -inputs.lengths.astype(np.int32)
            np.add.at(out, special[0], special[3])
            return out

    class Job:
        def __init__(self, k):
            self.k, self.energies = k, None

    def fake_inputs(job):
        n = sizes[job.k]
        lengths = np.arange(n, dtype=np.int32) + 100 * job.k + 1
        inputs = E.FoldInputs(np.zeros((n, 4), np.uint8), lengths, np.full(n, -1, np.int32))
        special = (np.arange(n) % 3 == 0).nonzero()[0]
        special = (special, np.zeros(len(special), np.int64), special, np.full(len(special), 7))
        where = np.arange(n)[::-1]  # hits map to strings in reverse
        time.sleep(0.01 * (job.k % 3))  # jobs finish out of order
        return inputs, special, where, None

    monkeypatch.setattr(output, "fold_inputs_block", fake_inputs)
    monkeypatch.setattr(output, "run_block", lambda job: job.energies)
    pool = concurrent.futures.ThreadPoolExecutor(3)
    service = output.DeviceEnergies(FakeEngine(), pool)
    service.WAIT = 0.5  # the test's jobs arrive slowly: wait for them
    try:
        futures = [service.submit(Job(k)) for k in range(len(sizes))]
        got = [f.result(timeout=60) for f in futures]
    finally:
        service.close()
        pool.shutdown()
    for k, energies in enumerate(got):
        n = sizes[k]
        lengths = np.arange(n) + 100 * k + 1
        want = -lengths + 7 * (np.arange(n) % 3 == 0)
        assert energies.tolist() == E.kcal(want)[np.arange(n)[::-1]].tolist()
    assert sum(calls) == sum(sizes) and sum(c != 8 for c in calls) <= 1, calls


def test_gpu_batch_follows_device_memory():
    """The device engine's call size: the largest whose two calls fit in 60% of the device
    memory JAX may use, the smallest when the device does not say."""
    from jaxrna.targets import energy as E

    class Device:
        def __init__(self, limit):
            self.limit = limit

        def memory_stats(self):
            return None if self.limit is None else {"bytes_limit": self.limit}

    gib = 1 << 30
    assert E.gpu_batch(Device(140 * gib)) == 65536          # an H200
    assert E.gpu_batch(Device(105 * gib)) == 65536          # ... 75% of it
    assert E.gpu_batch(Device(80 * gib)) == 32768           # an H100
    assert E.gpu_batch(Device(60 * gib)) == 32768
    assert E.gpu_batch(Device(24 * gib)) == 16384
    assert E.gpu_batch(Device(None)) == E.DEVICE_BATCH
    assert E.DeviceEngine(batch=7).batch_rows("gpu", Device(140 * gib)) == 7
    assert E.DeviceEngine().batch_rows("cpu") == E.DEVICE_BATCH_CPU


def test_vienna_engine_leaves_viennas_global_parameters_alone():
    """The ViennaRNA path folds with the recipe's parameters without leaving them loaded:
    code folding with ViennaRNA in the same process afterwards gets its own set (Turner 2004)."""
    import RNA

    def rna_fold(seq):
        return RNA.fold_compound(seq, RNA.md()).mfe()

    seq = "GGGGAAACCCCAUCGAAAGAUU"
    E._model.cache_clear()                          # the recipe is loaded afresh below
    before = rna_fold(seq)
    assert round(before[1] * 100) == -650           # Turner 2004, ViennaRNA's default set
    assert E.fold_energy("gtCGAAAGTTTTACTAGAGTgXXXXXXXtACTCTAGTTATTACTATaaat") < 0
    assert rna_fold(seq) == before
