"""``jaxrna align --backend auto`` on a GPU host picks the engine estimated to finish first
(:mod:`jaxrna.align.choice`): the choice from synthetic sizes and core counts, and whole runs
where it picks either engine write the bytes of each forced engine."""

import random

import numpy as np
import pytest

from jaxrna.align import choice
from jaxrna.align.choice import Size, choose, size_of, size_of_files


def test_issue_jobs_on_16_cores():
    """The issue's two jobs: score only on the device; all pairs with alignments on the host
    engine from 16 cores (measured on an H100 host, fourteenth session: host 2.92 s warm,
    3.08-3.15 s cold; device 3.14-3.41 s warm, 5.5-7.1 s cold), on the device with 8."""
    zip_job = Size(pairs=100_000, cells=1e11, letters=2e8)         # 1,000 x 1,000 score only
    all_job = size_of(np.full(300, 300), np.full(300, 300), False)  # local, with alignments
    assert all_job == Size(90_000, 8.1e9, 5.4e7)
    assert choose(zip_job, score_only=True, cores=16).engine == "device"
    c = choose(all_job, score_only=False, cores=16)
    assert c.engine == "host" and c.host_s < c.device_s
    assert c.line().startswith("align: host engine (parasail) on 16 cores: estimate ")
    c = choose(all_job, score_only=False, cores=8)
    assert c.engine == "device" and c.device_s < c.host_s


def test_a_started_device_counts_the_host_engine_on_threads():
    """Once JAX runs in the process (started in the background while reading), the host
    engine cannot fork and runs on threads: its estimate is that of THREADED_CORES cores."""
    job = Size(pairs=90_000, cells=8.1e9, letters=5.4e7)
    assert choose(job, False, cores=16).engine == "host"
    started = choose(job, False, cores=16, started=True)
    assert started.engine == "device"
    assert started.host_s == pytest.approx(choice.estimate_host(job, False,
                                                                choice.THREADED_CORES))
    small = Size(pairs=10, cells=1e6, letters=2e4)
    assert choose(small, True, cores=16, started=True).engine == "host"   # still too small


def test_core_count_and_size_move_the_choice():
    job = Size(pairs=90_000, cells=8.1e9, letters=5.4e7)
    assert choose(job, False, cores=64).engine == "host"
    assert choose(job, False, cores=2).engine == "device"          # too few cores
    small = Size(pairs=10, cells=1e6, letters=2e4)
    assert choose(small, True, cores=1).engine == "host"           # no GPU start-up to pay
    big = Size(pairs=10 ** 6, cells=1e12, letters=2e9)
    assert choose(big, True, cores=16).engine == "device"
    assert choose(big, True, cores=1024).engine == "host"          # enough cores outrun it
    d = choose(big, True, cores=16)
    assert d.line().startswith("align: device engine on the GPU: estimate ")
    # the estimates grow with the work and shrink with cores
    assert choice.estimate_host(big, True, 8) > choice.estimate_host(big, True, 16)
    assert choice.estimate_device(big, True, started=True) < choice.estimate_device(big, True)


def test_the_crossover_follows_the_model():
    """Score only, 16 cores: the host wins below the cell count where both estimates meet."""
    k = "score"
    per_cell_host = choice.HOST_CELL_S[k] / choice.effective_cores(16)
    cross = (choice.DEVICE_SETUP_S - choice.HOST_POOL_S) / (per_cell_host - choice.DEVICE_CELL_S[k])
    below, above = Size(1, 0.9 * cross, 0), Size(1, 1.1 * cross, 0)
    assert choose(below, True, 16).engine == "host"
    assert choose(above, True, 16).engine == "device"


def test_size_of_zip_and_files(tmp_path):
    assert size_of([3, 4], [5, 6], True) == Size(2, 39.0, 18.0)
    assert size_of([3, 4], [5, 6], False) == Size(4, 77.0, 36.0)
    q, t = tmp_path / "q.fa", tmp_path / "t.fa"
    q.write_text("".join(f">q{k}\n{'A' * 100}\n" for k in range(50)))
    t.write_text("".join(f">t{k}\n{'C' * 200}\n" for k in range(20)))
    est = size_of_files(str(q), str(t), False)
    assert est.pairs == 1000 and 0.8 < est.cells / (5000 * 4000) < 1.3
    est = size_of_files(str(q), str(t), True)
    assert est.pairs == 20 and 0.8 < est.cells / (20 * 100 * 200) < 1.5
    assert size_of_files("-", str(t), False) is None
    assert size_of_files(str(tmp_path / "missing.fa"), str(t), False) is None


# --------------------------------------------------------------------------------------
# whole runs: the auto choice gives each forced engine's bytes


def _fasta(path, prefix, rng, count, lo, hi):
    with open(path, "w") as fh:
        for k in range(count):
            fh.write(f">{prefix}{k}\n{''.join(rng.choice('ACGU') for _ in range(rng.randint(lo, hi)))}\n")
    return str(path)


@pytest.mark.parametrize("extra", [["--mode", "local"], ["--score-only", "-f", "tsv"]])
def test_auto_choice_writes_the_forced_engines_bytes(extra, tmp_path, monkeypatch, capsys):
    pytest.importorskip("parasail")
    from jaxrna import runtime
    from jaxrna.cli import main

    rng = random.Random(7)
    q = _fasta(tmp_path / "q.fa", "q", rng, 6, 20, 60)
    t = _fasta(tmp_path / "t.fa", "t", rng, 5, 20, 60)
    argv = ["align", q, t, *extra, "--match", "2", "--mismatch", "-3", "--gap-open", "5",
            "--gap-extend", "2", "-q"]
    outs = {}
    for forced in ("host", "device"):
        monkeypatch.setenv("JAXRNA_ALIGN_ENGINE", forced)
        path = tmp_path / f"{forced}.out"
        assert main([*argv, "-o", str(path)]) == 0
        outs[forced] = path.read_bytes()
    assert outs["host"] == outs["device"] and outs["host"]
    monkeypatch.delenv("JAXRNA_ALIGN_ENGINE")
    monkeypatch.setattr(runtime, "gpu_possible", lambda: True)   # as on a GPU host
    capsys.readouterr()
    for want, setup in (("host", 1.0), ("device", -100.0)):     # the device made to win
        monkeypatch.setattr(choice, "DEVICE_SETUP_S", setup)
        monkeypatch.setattr(choice, "DEVICE_STARTED_S", setup)
        path = tmp_path / f"auto-{want}.out"
        assert main([*argv, "-v", "-o", str(path)]) == 0
        err = capsys.readouterr().err
        assert f"jaxrna: align: {want} engine" in err, err
        assert path.read_bytes() == outs[want]
