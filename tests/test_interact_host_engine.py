"""`jaxrna interact`'s host engine (C, :mod:`jaxrna.interact.host_engine`): its tables against
the reference DP, its results against the device engine (JAX), the command line's bytes under
both engines against the golden files, and which engine a run picks."""

import os
import random
import sys

import numpy as np
import pytest

from jaxrna import stages
from jaxrna.alphabet import encode
from jaxrna.cli import main
from jaxrna.interact import api, host_engine, host_fill
from jaxrna.interact.api import interact_pairs, make_problem
from jaxrna.interact.reference import reference_tables
from jaxrna.io.errors import ResourceError
from jaxrna.io.fasta import Record
from jaxrna.weights import parse_weights

from conftest import TEST_DATA
from test_interact_cli import A, B, TV3, golden

WEIGHTS = ["bpmax", "integer", "unit", "GC=2.5,AU=1,GU=0.5"]


def strand(rng, n):
    return "".join(rng.choice("ACGUACGUACGUN") for _ in range(n))


def test_the_library_builds_here():
    # CI and this VM have a C compiler: the host engine's tests below must not pass vacuously
    assert host_fill.library() is not None


def test_tables_equal_the_reference_dp():
    """Every cell of F inside the windows and both S tables, on random pairs of 1-11 nt with N,
    random windows and weight sets (the reference: the spec's recurrence in plain Python)."""
    rng = random.Random(7)
    for trial in range(160):
        n, m = rng.randint(1, 11), rng.randint(1, 11)
        s1, s2 = strand(rng, n), strand(rng, m)
        w = parse_weights(rng.choice(WEIGHTS))
        w1 = rng.choice([n - 1, rng.randint(0, n - 1)])
        w2 = rng.choice([m - 1, rng.randint(0, m - 1)])
        F, S1, S2 = reference_tables(s1, s2, w, w1, w2)
        t = host_fill.tables(encode(s1), encode(s2[::-1]), np.asarray(w.matrix(), np.int32), w1, w2)
        assert t.S1.tolist() == [[S1[i][j] if j >= i else 0 for j in range(n)] for i in range(n)]
        assert t.S2.tolist() == [[S2[i][j] if j >= i else 0 for j in range(m)] for i in range(m)]
        got = {(i1, i1 + d1, i2, i2 + d2): int(t.F[i1, d1, i2, d2])
               for i1 in range(n) for d1 in range(w1 + 1) if i1 + d1 < n
               for i2 in range(m) for d2 in range(w2 + 1) if i2 + d2 < m}
        want = {k: F[k[0]][k[1]][k[2]][k[3]] for k in got}
        assert got == want, (trial, s1, s2, w1, w2)


def _records(rng, count, hi1, hi2):
    return [(Record(f"a{k}", strand(rng, rng.randint(1, hi1))),
             Record(f"b{k}", strand(rng, rng.randint(1, hi2)))) for k in range(count)]


def _compare(host, device):
    assert len(host) == len(device)
    for h, d in zip(host, device):
        assert (h.id1, h.id2, h.score_units, h.s1_units, h.s2_units, h.window1, h.window2,
                h.windowed, h.pairs) == (d.id1, d.id2, d.score_units, d.s1_units, d.s2_units,
                                         d.window1, d.window2, d.windowed, d.pairs)
        assert np.array_equal(h.windows, d.windows)


@pytest.mark.parametrize("windows", [(None, None), (12, 9), (5, None)])
def test_host_engine_equals_device_engine(windows):
    """Scores, best windows (the tie rule), every window's score and the traced structures of
    random pairs of 1-16 x 1-31 nt (both orientations: either strand may be the shorter) and
    several weight sets, on both engines; the device engine's programs are shared by the
    cases (lengths and windows are runtime values; these lengths are one geometry class, so
    the cases compile one program: 1-30 x 1-45 nt compiled three, 30 CPU-seconds)."""
    rng = random.Random(hash(windows) & 0xFFFF)
    recs = _records(rng, 24, 16, 31) + [(b, a) for a, b in _records(rng, 8, 16, 31)]
    for wname in ("bpmax", "GC=2.5,AU=1,GU=0.5"):
        kw = dict(window1=windows[0], window2=windows[1], keep_windows=True, backend="cpu")
        host = list(interact_pairs(recs, wname, engine="host", **kw))
        device = list(interact_pairs(recs, wname, engine="device", **kw))
        _compare(host, device)
    outer2 = list(interact_pairs(recs[:6], "bpmax", outer="2", engine="host", **kw))
    _compare(outer2, list(interact_pairs(recs[:6], "bpmax", outer="2", engine="device", **kw)))


def _cli(capsys, monkeypatch, engine, *argv):
    monkeypatch.setenv("JAXRNA_INTERACT_ENGINE", engine)
    stages.reset()
    status = main(["interact", "-q", *argv])
    out, err = capsys.readouterr()
    return status, out, stages.counts()


@pytest.mark.parametrize("engine", ["host", "device"])
def test_cli_bytes_match_golden_files_on_both_engines(capsys, monkeypatch, tmp_path, engine):
    on_host = 0
    for fmt in ("tsv", "dbn", "json"):
        status, out, counts = _cli(capsys, monkeypatch, engine, A, B, "--pairs", "zip", "-f", fmt)
        assert status == 0 and out == golden(f"interact_zip.{fmt}")
        on_host += counts.get("host engine pairs", 0)
    windows = tmp_path / "windows.tsv"
    status, out, counts = _cli(capsys, monkeypatch, engine, *TV3, "--window1", "8", "--window2",
                               "8", "-f", "dbn", "--all-windows", str(windows))
    assert status == 0 and out == golden("interact_tv3_w8.dbn")
    assert windows.read_text() == golden("interact_tv3_w8_windows.tsv")
    on_host += counts.get("host engine pairs", 0)
    status, out, counts = _cli(capsys, monkeypatch, engine,
                               os.path.join(TEST_DATA, "interact_short_a.fa"),
                               os.path.join(TEST_DATA, "interact_short_b.fa"), "--weights", "unit")
    assert status == 0 and out == golden("interact_short_all.tsv")
    on_host += counts.get("host engine pairs", 0)
    # the engine asked for computed every pair: 3 x 3 formats, 1, 4
    assert on_host == (14 if engine == "host" else 0)


def test_auto_runs_small_pairs_on_the_host_engine_only_on_a_cpu(monkeypatch):
    monkeypatch.delenv("JAXRNA_INTERACT_ENGINE", raising=False)
    prob = make_problem(Record("a", "GGGAAAUCC"), Record("b", "GGAUUUCCC"))
    assert host_engine.wanted(prob, "auto", "cpu")
    assert not host_engine.wanted(prob, "auto", "gpu")
    assert not host_engine.wanted(prob, "device", "cpu")
    assert host_engine.wanted(prob, "host", "gpu")
    monkeypatch.setenv("JAXRNA_INTERACT_ENGINE", "device")
    assert not host_engine.wanted(prob, "auto", "cpu")
    big = make_problem(Record("a", "A" * 400), Record("b", "C" * 500))
    assert not host_engine.fits(big) and not host_engine.wanted(big, "host", "cpu")
    # the device engine is never called for a run the host engine takes
    monkeypatch.delenv("JAXRNA_INTERACT_ENGINE")

    def no_device(*a, **k):
        raise AssertionError("the device engine ran")

    monkeypatch.setattr(api, "run_problems", no_device)
    r = list(interact_pairs([(Record("a", "GGGAAAUCC"), Record("b", "GGAUUUCCC"))], "bpmax"))
    assert r[0].score == 19


def test_without_a_compiler_auto_takes_the_device_engine(monkeypatch):
    monkeypatch.delenv("JAXRNA_INTERACT_ENGINE", raising=False)
    monkeypatch.setattr(host_engine, "library", lambda: None)
    called = []
    real = api.run_problems
    monkeypatch.setattr(api, "run_problems", lambda *a, **k: called.append(1) or real(*a, **k))
    r = list(interact_pairs([(Record("a", "UCGCUGCU"), Record("b", "GUCGGA"))], "bpmax"))
    assert called and r[0].score == 14.5


def test_mixed_run_keeps_input_order_and_memory_checks(monkeypatch):
    """Pairs too large for the host engine go to the device engine in the same run, results in
    input order; the host engine's pairs are checked against their own (smaller) tables."""
    monkeypatch.setattr(host_engine, "MAX_WORK", 3e5)
    rng = random.Random(3)
    recs = _records(rng, 10, 16, 31)
    picked = [host_engine.fits(make_problem(a, b)) for a, b in recs]
    assert any(picked) and not all(picked)
    mixed = list(interact_pairs(recs, "bpmax", engine="host", backend="cpu"))
    _compare(mixed, list(interact_pairs(recs, "bpmax", engine="device", backend="cpu")))
    small = make_problem(Record("a", "GGGAAAUCC"), Record("b", "GGAUUUCCC"))
    need = host_engine.pair_bytes(small)
    assert need < small.plan.bytes_needed()
    ok = list(interact_pairs([(small.rec1, small.rec2)], "bpmax", engine="host",
                             max_bytes=need + 1))
    assert ok[0].score == 19
    with pytest.raises(ResourceError, match="needs about"):
        list(interact_pairs([(small.rec1, small.rec2)], "bpmax", engine="host", max_bytes=need - 1))


def test_job_seconds_decides_a_small_job():
    assert host_engine.job_seconds([(30, 45)] * 40, None, None, 16) < host_engine.SMALL_JOB_S
    assert host_engine.job_seconds([(300, 300)] * 40, 64, 64, 16) > host_engine.SMALL_JOB_S
    assert host_engine.job_seconds([(1, 0)], None, None, 1) == float("inf")


def test_host_only_run_never_imports_jax(tmp_path):
    """A CLI run all on the host engine starts no JAX (the whole process: JAX not imported)."""
    import subprocess

    from conftest import ROOT

    code = ("import sys\n"
            "from jaxrna.cli import main\n"
            "status = main(['interact', '-q', sys.argv[1], sys.argv[2], '--pairs', 'zip',"
            " '-o', sys.argv[3]])\n"
            "assert 'jax' not in sys.modules, 'JAX was imported'\n"
            "raise SystemExit(status)\n")
    out = tmp_path / "out.tsv"
    env = {k: v for k, v in os.environ.items() if k != "JAXRNA_INTERACT_ENGINE"}
    env.update(PYTHONPATH=ROOT, JAXRNA_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run([sys.executable, "-c", code, A, B, str(out)], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text() == golden("interact_zip.tsv")


def test_one_pair_split_over_threads_gives_the_same_tables_and_results():
    """A run of fewer pairs than workers splits each pair's outer spans over the threads
    (``host_fill.tables(..., pool, threads)``): the same tables, the same results."""
    from concurrent.futures import ThreadPoolExecutor

    rng = random.Random(5)
    wm = np.asarray(parse_weights("bpmax").matrix(), np.int32)
    with ThreadPoolExecutor(3) as pool:
        for _ in range(12):
            n, m = rng.randint(1, 24), rng.randint(1, 40)
            u, t = encode(strand(rng, n)), encode(strand(rng, m))
            w1, w2 = rng.randint(0, n - 1), rng.randint(0, m - 1)
            one = host_fill.tables(u, t, wm, w1, w2)
            split = host_fill.tables(u, t, wm, w1, w2, pool=pool, threads=3)
            assert all(np.array_equal(a, b) for a, b in zip(one, split))
    recs = _records(rng, 2, 16, 31)
    probs = [make_problem(a, b, None, 20) for a, b in recs]
    w = parse_weights("bpmax")
    few = host_engine.run_host(probs, w, keep_windows=True, workers=4)      # 2 pairs < 4
    many = host_engine.run_host(probs, w, keep_windows=True, workers=1)
    _compare(few, many)
    _compare(few, list(interact_pairs(recs, w, window2=20, keep_windows=True, engine="device")))


def test_cpu_warmup_leaves_out_the_classes_the_host_engine_takes(monkeypatch):
    """``jaxrna warmup interact`` on a CPU compiles the device engine's programs only for the
    classes holding a pair past the host engine's limits (with the device engine forced, all)."""
    from jaxrna.interact import warmup

    everything = warmup.run_classes("cpu", 2000)
    on_host = lambda p: host_engine.wanted(p, "auto", "cpu")  # noqa: E731
    monkeypatch.delenv(host_engine.ENV, raising=False)
    kept = warmup.run_classes("cpu", 2000, host_engine=on_host)
    assert kept and set(kept) < set(everything)
    # a class left out: every pair of it runs on the host (its sample pair among them)
    assert all(on_host(everything[g]) for g in set(everything) - set(kept))
    prepared = []
    monkeypatch.setattr(api, "prepare", lambda problems, batch, *a, **k: prepared.append(batch[0]))
    assert warmup.warm("cpu", 2000) == len(kept)
    assert set(prepared) == set(kept)                  # each kept geometry's program, no other
    monkeypatch.setenv(host_engine.ENV, "device")
    assert warmup.warm("cpu", 2000) == len(everything)
