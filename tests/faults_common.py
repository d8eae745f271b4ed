"""Helpers of the fault tests (tests/test_faults_*.py): running the real CLI, checking that a
run ended with one located line, and the inputs each subcommand needs."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

from conftest import ROOT, TEST_DATA

OK_FA = ">a\nGGGAAAUCCC\n>b\nGCGCAAAGCGC\n"
MIRNA = os.path.join(TEST_DATA, "miranda", "bantam_stRNA.fasta")
UTR = os.path.join(TEST_DATA, "miranda", "hid_UTR.fasta")

#: An error line located at FILE:LINE.
LOCATED = re.compile(r"^jaxrna: error: (?P<file>[^\n]+?):(?P<line>\d+): (?P<what>[^\n]+)\n\Z")


def env(**extra) -> dict:
    e = dict(os.environ, PYTHONPATH=ROOT, JAXRNA_CACHE_DIR="off")
    e.pop("PYTHONFAULTHANDLER", None)
    e.update(extra)
    return e


def command(args, prefix=()) -> list[str]:
    return [*prefix, sys.executable, "-m", "jaxrna", *args]


def run(args, *, stdin=None, prefix=(), timeout=180, **kw) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess; text output."""
    kw.setdefault("env", env())
    kw.setdefault("cwd", ROOT)
    return subprocess.run(command(args, prefix), input=stdin, capture_output=True, text=True,
                          timeout=timeout, **kw)


def argv_for(sub: str, path: str, other: str) -> list[str]:
    """The command line of subcommand ``sub`` reading ``path`` (and ``other`` as its second
    input where it has one)."""
    return {
        "fold": ["fold", path, "-q", "--model", "nussinov"],
        "align": ["align", path, other, "-q"],
        "interact": ["interact", path, other, "-q"],
        "targets": ["targets", path, other, "--no-energy", "--quiet"],
        "targets2": ["targets", other, path, "--no-energy", "--quiet"],  # the targets file
    }[sub]


def assert_one_error(result, located: bool = True, status: int = 2) -> re.Match | None:
    """The run ended with exit ``status`` and exactly one line on stderr: ``jaxrna: error: ...``
    (located at FILE:LINE with ``located``), never a traceback."""
    code, err = (result.returncode, result.stderr) if hasattr(result, "returncode") else result
    assert code == status, (code, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert err.count("\n") == 1 and err.startswith("jaxrna: error: "), err
    if located:
        m = LOCATED.match(err)
        assert m, f"not located at FILE:LINE: {err!r}"
        return m
    return None


def leftovers(*dirs) -> list[str]:
    """Temporary files a run may leave: atomic outputs' and scans' (none must remain)."""
    found = []
    for d in dirs:
        for name in os.listdir(d):
            if name.startswith(".jaxrna-") or name.startswith("jaxrna-targets-"):
                found.append(os.path.join(d, name))
    return found


def can_drop_root_privileges() -> bool:
    return os.geteuid() != 0 or shutil.which("setpriv") is not None


def as_unprivileged() -> tuple[str, ...]:
    """A command prefix under which file permissions apply (root loses CAP_DAC_OVERRIDE)."""
    if os.geteuid() != 0:
        return ()
    return ("setpriv", "--bounding-set", "-dac_override,-dac_read_search")


def file_size_limit(size: int) -> tuple[str, ...]:
    """A command prefix: the command runs with writes limited to ``size`` bytes per file
    (``RLIMIT_FSIZE``: a write beyond fails with EFBIG, as under a quota; SIGXFSZ ignored)."""
    code = ("import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({size}, {size})); "
            "os.execv(sys.argv[1], sys.argv[1:])")
    return (sys.executable, "-c", code)


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
