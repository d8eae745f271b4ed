"""Signals (issue 15): SIGINT and SIGTERM stop a run promptly, also while the main thread is
blocked in a device computation (XLA does not return to Python: the watchdog of
:mod:`jaxrna.io.cleanup` ends the run), remove the temporary files (the atomic output's, a
scan's spill directory), stop the worker processes, print one line and exit 130 / 143.
SIGPIPE (``jaxrna ... | head``) ends quietly: status 141, nothing on stderr.

Each test runs the real CLI in a subprocess with one function wrapped to hold the run at a
known point (a marker file says it is there), then sends the signal."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from faults_common import MIRNA, UTR, env, leftovers, stop, wait_for

#: Wraps atomic_output: once its temporary file exists, the marker is written and the run
#: blocks, either in native code (a JAX computation that runs for hours) or in Python.
HOLD_IN_OUTPUT = """
import contextlib, sys, time
import jaxrna.io, jaxrna.io.atomic as atomic
real = atomic.atomic_output

def block():
    if HOW == "device":
        import jax, jax.numpy as jnp
        inner = lambda i, v: jax.lax.fori_loop(0, 1 << 20, lambda k, w: w * 1.0000001 + 1.0, v)
        f = jax.jit(lambda x: jax.lax.fori_loop(0, 1 << 30, inner, x))
        f = f.lower(jnp.float32(1)).compile()
        open(MARK, "w").close()
        f(jnp.float32(1)).block_until_ready()
    else:
        open(MARK, "w").close()
        time.sleep(600)

@contextlib.contextmanager
def held(path, mode="w"):
    with real(path, mode) as fh:
        block()
        yield fh

jaxrna.io.atomic_output = atomic.atomic_output = held
from jaxrna.cli import main
sys.argv = ["jaxrna"] + ARGS
sys.exit(main())
"""


def start(script: str, tmp_path, **names) -> tuple[subprocess.Popen, str]:
    mark = str(tmp_path / "held")
    head = "".join(f"{k} = {v!r}\n" for k, v in dict(names, MARK=mark).items())
    proc = subprocess.Popen([sys.executable, "-c", head + textwrap.dedent(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(TMPDIR=str(tmp_path)), cwd=str(tmp_path))
    return proc, mark


def finish(proc, signum, mark, *, within: float):
    try:
        wait_for(lambda: os.path.exists(mark) or proc.poll() is not None, 120, "the run to hold")
        assert proc.poll() is None, proc.communicate()
        sent = time.monotonic()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        stop(proc)
    name = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated"}[signum]
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    assert err.splitlines()[-1:] == [f"jaxrna: {name}"] and "Traceback" not in err, err
    assert took < within, took
    return err


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_device_work(tmp_path, signum):
    """The main thread is inside a JAX computation that would run for hours."""
    out = tmp_path / "out.tsv"
    proc, mark = start(HOLD_IN_OUTPUT, tmp_path, HOW="device",
                       ARGS=["interact", "--seq1", "GGGAAAUCCC", "--seq2", "GGGAUUUCCC", "-o",
                             str(out), "-q"])
    err = finish(proc, signum, mark, within=20)
    assert err.count("\n") == 1
    assert not out.exists() and leftovers(tmp_path) == []


def test_sigterm_during_host_work_leaves_no_temporary_file(tmp_path):
    out = tmp_path / "out.dbn"
    proc, mark = start(HOLD_IN_OUTPUT, tmp_path, HOW="python",
                       ARGS=["fold", "--model", "nussinov", "--sequence", "GGGAAAUCCC", "-o", str(out)])
    err = finish(proc, signal.SIGTERM, mark, within=15)
    assert err == "jaxrna: terminated\n"
    assert not out.exists() and leftovers(tmp_path) == []


#: A target scan with two worker processes (a machine with 3 cores says so) that holds once
#: the first job is handed out: spill directory and workers exist.
HOLD_IN_SCAN = """
import os, sys, time
import jaxrna.pipeline as pipeline
import jaxrna.targets.api as api
import jaxrna.targets.output as output
pipeline.default_workers = lambda: 2
api.POOL_MIN_CELLS = 0
real = output.OrderedReport.submit

def submit(self, *args, **kwargs):
    real(self, *args, **kwargs)
    if self.pool is not None and not os.path.exists(MARK):
        self.pool.submit(time.sleep, 0).result()
        with open(MARK + ".pids", "w") as fh:
            fh.write(" ".join(str(p) for p in self.pool._processes))
        with open(MARK + ".dir", "w") as fh:
            fh.write(self.tmp.name)
        open(MARK, "w").close()
        time.sleep(600)

output.OrderedReport.submit = submit
from jaxrna.cli import main
sys.argv = ["jaxrna"] + ARGS
sys.exit(main())
"""


@pytest.mark.slow
def test_sigterm_stops_target_scan_workers_and_removes_spill_files(tmp_path):
    out = tmp_path / "hits.txt"
    proc, mark = start(HOLD_IN_SCAN, tmp_path,
                       ARGS=["targets", MIRNA, UTR, "--no-energy", "-o", str(out)])
    err = finish(proc, signal.SIGTERM, mark, within=20)
    assert err == "jaxrna: terminated\n"     # (nor the resource tracker's leak warnings)
    pids = [int(p) for p in open(mark + ".pids").read().split()]
    spill = open(mark + ".dir").read()
    assert len(pids) == 2 and spill.startswith(str(tmp_path))
    assert not os.path.exists(spill) and not out.exists()
    assert leftovers(tmp_path) == []

    def gone(pid):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().split(") ")[1][0] in "ZX"
        except OSError:
            return True

    wait_for(lambda: all(gone(p) for p in pids), 10, "the worker processes to end")


def test_sigpipe_ends_quietly(tmp_path):
    """``jaxrna fold many.fa | head -1``: no traceback, no "Exception ignored", status 141."""
    fa = tmp_path / "many.fa"
    # ~1 MB of output: far more than the pipe and every buffer on the way hold
    fa.write_text("".join(f">r{k}\nGGGAAAUCCCGGGAAAUCCC\n" for k in range(20000)))
    proc = subprocess.Popen([sys.executable, "-m", "jaxrna", "fold", "--model", "nussinov", str(fa), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    try:
        assert proc.stdout.readline() == b">r0\n"
        proc.stdout.close()
        err = proc.stderr.read()
        proc.wait(120)
    finally:
        stop(proc)
    assert proc.returncode == 141, (proc.returncode, err)
    assert err == b"", err
