"""``jaxrna targets`` spread out: host worker processes, several devices, device threads and
chunked target files all give the report of the slow reference, byte for byte."""

import io
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from jaxrna.formats.miranda import writer_for
from jaxrna.targets.api import write_scan
from jaxrna.targets.scoring import ScanParams
from test_targets_cli import expected_report, files  # noqa: F401  (a fixture)


def report(files, params, fmt, quiet, workers, chunk_nt=10_000, **engine):  # noqa: F811
    out = io.StringIO()
    writer = writer_for(fmt, out, no_energy=params.no_energy, quiet=quiet)
    stats = write_scan(files["mirnas"], files["utrs"], writer, params, chunk_nt=chunk_nt,
                       host_workers=workers, engine_options=engine)
    return out.getvalue(), stats


@pytest.mark.slow
@pytest.mark.parametrize("fmt,quiet", [("miranda", True), ("miranda", False), ("keyval", True),
                                       ("tsv", True), ("json", True)])
def test_one_and_two_workers_match_the_reference(files, fmt, quiet):  # noqa: F811
    params = ScanParams(score_threshold=120, no_energy=True)
    expected = expected_report(files, params, fmt=fmt, quiet=quiet)
    for workers, chunk_nt in ((0, 700), (1, 10_000), (2, 700)):  # 700: the targets in 6 chunks
        got, stats = report(files, params, fmt, quiet, workers, chunk_nt, query_block=3)
        assert got == expected, (workers, chunk_nt)
    assert stats["hits"] >= 10
    from jaxrna.pipeline import _POOLS

    assert {1, 2} <= set(_POOLS)  # the jobs did go to worker processes


@pytest.mark.slow
def test_workers_with_energies_and_strict(files):  # noqa: F811
    params = ScanParams(score_threshold=130, strict=True, energy_threshold=-5)
    got, _ = report(files, params, "miranda", True, 2, 700, query_block=2)
    assert got == expected_report(files, params, quiet=True)


SCRIPT = """
import io, sys
import jax
from jaxrna.formats.miranda import writer_for
from jaxrna.targets.api import write_scan
from jaxrna.targets.scoring import ScanParams

mirnas, utrs = sys.argv[1:3]
params = ScanParams(score_threshold=120, no_energy=True)
outs = []
assert len(jax.devices()) == 2, jax.devices()
for devices, threads in ((jax.devices()[:1], 1), (jax.devices(), 1), (jax.devices(), 2)):
    out = io.StringIO()
    write_scan(mirnas, utrs, writer_for("miranda", out, no_energy=True, quiet=False), params,
               chunk_nt=900, host_workers=0,
               engine_options=dict(devices=devices, threads_per_device=threads, lane_columns=61))
    outs.append(out.getvalue())
print("SAME" if outs[0] == outs[1] == outs[2] else "DIFFERENT", len(outs[0]))
sys.stdout.write(outs[0])
"""


@pytest.mark.slow
def test_one_and_two_devices_match(files):  # noqa: F811
    """Two (fake, CPU) devices and two threads per device give the one-device report."""
    env = dict(os.environ, PYTHONPATH=ROOT, JAXRNA_CACHE_DIR="off", JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=2")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, files["mirnas"], files["utrs"]],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    head, _, text = proc.stdout.partition("\n")
    assert head.startswith("SAME"), head
    assert text == expected_report(files, ScanParams(score_threshold=120, no_energy=True))


NO_JAX_SCRIPT = """
import io, sys
from jaxrna.formats.miranda import writer_for
from jaxrna.pipeline import worker_pool
from jaxrna.targets.api import write_scan
from jaxrna.targets.scoring import ScanParams

out = io.StringIO()
params = ScanParams(score_threshold=120, no_energy=True)
stats = write_scan(sys.argv[1], sys.argv[2], writer_for("miranda", out, no_energy=True, quiet=True),
                   params, chunk_nt=700, host_workers=1, engine_options=dict(query_block=3))
seen = worker_pool(1).submit(eval, "sorted(m for m in __import__('sys').modules "
                                   "if m.split('.')[0] in ('jax', 'jaxlib'))").result(timeout=120)
print(stats["hits"], seen)
sys.stdout.write(out.getvalue())
"""


@pytest.mark.slow
def test_host_workers_never_import_jax(files):  # noqa: F811
    """The worker processes that select hits and write their text (no energies) import no
    JAX: on a 16-core GPU host fifteen workers importing it at start-up cost ~20 CPU seconds
    beside the device's first blocks. Same report as the reference."""
    env = dict(os.environ, PYTHONPATH=ROOT, JAXRNA_CACHE_DIR="off", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", NO_JAX_SCRIPT, files["mirnas"], files["utrs"]],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    head, _, text = proc.stdout.partition("\n")
    hits, seen = head.split(" ", 1)
    assert int(hits) >= 10 and seen == "[]", head
    assert text == expected_report(files, ScanParams(score_threshold=120, no_energy=True), quiet=True)


def test_workers_read_candidates_from_files_and_they_are_removed(files, monkeypatch):  # noqa: F811
    """With worker processes the device side writes each block's candidates to a file
    (SpilledRows) that the workers read; every file is gone once its jobs are done."""
    from jaxrna.targets import output, select

    written, left = [], []
    real_write, real_close = select.SpilledRows.write, output.OrderedReport.close

    def spy_write(path, rows, n):
        written.append(path)
        return real_write(path, rows, n)

    def spy_close(self):
        left.extend(p for p in written if os.path.exists(p))
        real_close(self)

    monkeypatch.setattr(select.SpilledRows, "write", staticmethod(spy_write))
    monkeypatch.setattr(output.OrderedReport, "close", spy_close)
    params = ScanParams(score_threshold=120, no_energy=True)
    got, _ = report(files, params, "miranda", True, 2, 700, query_block=3)
    assert got == expected_report(files, params, quiet=True)
    assert len(written) >= 4 and left == []


def test_a_blocks_file_outlives_its_first_jobs(files, monkeypatch):  # noqa: F811
    """A block's jobs (here a miRNA each) read one candidates file and are handed out one by
    one: a job that is done, and collected, before the next is submitted must not remove the
    file under the next (it did once workers got fast: FileNotFoundError in a worker)."""
    import concurrent.futures

    from jaxrna.targets import api, output

    real = output.OrderedReport.submit

    def submit_and_finish(self, c, bi, job, last):
        real(self, c, bi, job, last)
        done = self.jobs[(c, bi)]
        if isinstance(done, concurrent.futures.Future):
            done.result(timeout=120)
        self.flush(wait=False)        # collects it: the worst case for the next part

    monkeypatch.setattr(output.OrderedReport, "submit", submit_and_finish)
    monkeypatch.setattr(api, "JOB_MIRNAS", 1)
    params = ScanParams(score_threshold=120, no_energy=True)
    got, _ = report(files, params, "miranda", True, 2, 700, query_block=3)
    assert got == expected_report(files, params, quiet=True)


def test_spilled_rows_load_what_was_written(tmp_path):
    """SpilledRows.write / part / RowsRef.load round-trip rows, q counted from the part."""
    import numpy as np

    from jaxrna.targets.select import SpilledRows, Traced

    rng = np.random.default_rng(3)
    rows = rng.integers(0, 50, size=(40, 12)).astype(np.int32)
    rows[:, 0] = np.sort(rng.integers(0, 5, size=40))
    rows[:, 7] = rng.integers(0, 40, size=40)  # nsteps: up to 3 move words, zero words after
    rows[:, 9:][np.arange(3)[None, :] >= -(-rows[:, 7:8] // 16)] = 0
    spilled = SpilledRows.write(str(tmp_path / "r.i32"), rows, 6)
    assert len(spilled) == 40
    for lo, hi in ((0, 2), (2, 5), (5, 6), (0, 6)):
        got = spilled.part(lo, hi).load()
        want = Traced.from_rows(rows).part(lo, hi)
        assert len(got) == int(((rows[:, 0] >= lo) & (rows[:, 0] < hi)).sum())
        for name in ("q", "t", "i", "j", "i0", "j0", "score", "nsteps"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), name
        width = got.moves.shape[1]
        assert np.array_equal(got.moves, want.moves[:, :width]) and not want.moves[:, width:].any()
        assert (got.q >= 0).all() and (got.q < hi - lo).all()


def test_device_threads_lower_the_switch_interval_and_restore_it():
    """While several device threads run, Python switches threads every SWITCH_INTERVAL at most;
    the interval is restored after the scan."""
    import sys

    from jaxrna.targets import engine as eng

    params = ScanParams(score_threshold=120, no_energy=True)
    queries = [eng.prepare_query(f"m{k}", "", s, params)
               for k, s in enumerate(["UGAGGUAGUAGGUUGUAUAGUU", "GUGAGAUCAUUUUGAAAGCUG", "UAGCUUAUCAGACUGAUGUUGA"])]
    targets = [eng.make_target("t", "", "UAGUUUUCACAAUGAUCUCGGAACUAUACAACCUACUACCUCA" * 3)]
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.004)
    try:
        engine = eng.Engine(params, threads_per_device=2)
        seen = []
        for _ in engine.iter_traced(queries, targets):
            seen.append(sys.getswitchinterval())
        assert seen and all(abs(v - eng.SWITCH_INTERVAL) < 1e-9 for v in seen)
        assert abs(sys.getswitchinterval() - 0.004) < 1e-9
        one = eng.Engine(params)  # one thread: left alone
        assert all(abs(sys.getswitchinterval() - 0.004) < 1e-9 for _ in one.iter_traced(queries, targets))
    finally:
        sys.setswitchinterval(before)


def test_worker_processes_run_at_a_lower_priority():
    """Host workers are niced (the device threads of the main process come first)."""
    from jaxrna.pipeline import WORKER_NICENESS, worker_pool

    mine = os.nice(0)
    niceness = worker_pool(1).submit(os.nice, 0).result(timeout=120)
    assert niceness == min(mine + WORKER_NICENESS, 19)


def test_worker_processes_keep_their_heap():
    """Workers tune glibc malloc (mallopt) so memory is reused between jobs; the call works."""
    import platform

    from jaxrna.pipeline import keep_heap, worker_pool

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    assert worker_pool(1).submit(keep_heap).result(timeout=120) is True


def test_host_jobs_are_single_mirnas_in_the_last_blocks():
    """The blocks the device threads finish last go to the workers a miRNA at a time."""
    from jaxrna.targets.api import JOB_MIRNAS, _job_parts
    from jaxrna.targets.engine import Engine

    engine = Engine(ScanParams(no_energy=True), threads_per_device=2, query_block=4)
    blocks = engine.blocks(22)  # 6 blocks; one device, two threads: the last two split to singles
    parts = [_job_parts(ks, bi, len(blocks), engine) for bi, ks in enumerate(blocks)]
    assert [k for ps in parts for part in ps for k in part] == list(range(22))
    assert all(len(part) == JOB_MIRNAS for ps in parts[:4] for part in ps)
    assert all(len(part) == 1 for ps in parts[4:] for part in ps)
