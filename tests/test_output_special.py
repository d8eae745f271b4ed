"""Outputs onto the kernel's own file systems (issue 27): ``-o /proc/version``,
``-o /proc/self/foo``, ``-o /sys/...`` end with one line naming the path and why, exit 2,
before any work and with nothing written, for every subcommand that writes a file; no
traceback (it was an OSError at the temporary file). ``/dev/stdout`` and ``/dev/null`` stay
written directly (tests/test_faults_output.py)."""

import importlib.util
import os

import pytest

from faults_common import MIRNA, UTR, assert_one_error, run
from jaxrna.cli import main
from jaxrna.io.atomic import atomic_output, check_output
from jaxrna.io.errors import OutputError

pytestmark = pytest.mark.skipif(not os.path.ismount("/proc"), reason="no /proc (not Linux)")

#: Inputs that do not exist: the output is checked before anything is read.
MISSING = "/nonexistent-jaxrna-input.fa"


def argvs(out: str):
    """Every subcommand with an option naming an output file (targets-split writes into
    --outdir, warmup only into the compile cache: neither takes -o)."""
    return [["fold", "--model", "nussinov", MISSING, "-o", out], ["align", MISSING, MISSING, "-o", out],
            ["interact", MISSING, MISSING, "-o", out],
            ["interact", MISSING, MISSING, "--all-windows", out],
            ["targets", MISSING, MISSING, "-o", out],
            ["targets-merge", MISSING, "--manifest", MISSING, "--mirnas", MISSING, "-o", out],
            ["fold", "--model", "nussinov", MISSING, "--partition", "--plot", out]]


def kernel_paths():
    paths = ["/proc/version", "/proc/self/foo", "/proc/sys/vm/max_map_count"]
    if os.path.ismount("/sys"):
        paths += ["/sys/jaxrna-out.txt", "/sys/kernel/jaxrna-out.txt"]
    return paths


@pytest.mark.parametrize("out", kernel_paths())
def test_every_subcommand_refuses_kernel_file_systems(out, capsys):
    before = open(out).read() if os.path.isfile(out) else None
    for argv in argvs(out):
        if argv[-2] == "--plot" and importlib.util.find_spec("matplotlib") is None:
            continue                  # refused for the missing matplotlib first
        code = main(argv)
        err = capsys.readouterr().err
        assert_one_error((code, err), located=False)
        assert err.startswith(f"jaxrna: error: {out}: cannot write {argv[-2]}: "), err
        assert "is the kernel's own file system" in err, err
    if before is None:
        assert not os.path.exists(out)
    else:  # /proc/sys/vm/max_map_count is writable by root: nothing was written into it
        assert open(out).read() == before


@pytest.mark.parametrize("argv", [["fold", "--model", "nussinov", "--sequence", "GGGAAAUCCC", "-o", "/proc/version"],
                                  ["targets", MIRNA, UTR, "--no-energy", "-o", "/proc/self/x"]])
def test_real_process_one_line(argv):
    """The console entry point in a process of its own (``/proc/self`` is that process)."""
    r = run(argv)
    assert_one_error(r, located=False)
    assert f"{argv[-1]}: cannot write -o: /proc is the kernel's own file system" in r.stderr


def test_atomic_output_refuses_kernel_files_itself():
    """Writers that do not go through the CLI's up-front check (a library caller) are refused
    too, before anything is opened."""
    for out in ("/proc/version", "/proc/self/foo"):
        with pytest.raises(OutputError, match="kernel's own file system"):
            with atomic_output(out) as fh:
                fh.write("x")


def test_direct_outputs_still_pass(tmp_path):
    """What is written directly stays allowed: standard output by any name, /dev/null, a
    descriptor naming a regular file; a missing /dev name is refused in one line."""
    for ok in ("/dev/stdout", "/proc/self/fd/1", "/dev/null"):
        check_output(ok)
    f = tmp_path / "out.txt"
    with open(f, "w") as fh:
        fd_path = f"/proc/self/fd/{fh.fileno()}"
        check_output(fd_path)
        with atomic_output(fd_path) as out:
            out.write("written\n")
    assert f.read_text() == "written\n"
    with pytest.raises(OutputError, match="does not exist"):
        check_output("/dev/jaxrna-no-such-device")
