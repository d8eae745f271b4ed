"""Output faults (issue 15): outputs are checked before any work (exit 2 at once), and a
write that fails (disk full, file-size quota, a full standard output) ends with one line and
exit 2, leaving neither a partial output nor a temporary file (and an older file in place).

Disk full is real: a 16 KiB tmpfs where one can be mounted (root), and always a file-size
limit (``RLIMIT_FSIZE``, the kernel's EFBIG, as a quota gives) and ``/dev/full``."""

import os
import subprocess

import pytest

from faults_common import (as_unprivileged, assert_one_error, can_drop_root_privileges,
                           command, env, file_size_limit, leftovers, run)
from jaxrna.cli import main

#: About 30 KB of output in every format (more than the 16 KiB the disk-full tests allow).
RECORDS = "".join(f">r{k}\n{'GGGAAACCCAUGCAUGCAUGGGGUUUCCCA'}\n" for k in range(300))


@pytest.fixture
def fa(tmp_path):
    p = tmp_path / "in.fa"
    p.write_text(RECORDS)
    return str(p)


def argvs(inp: str, out: str):
    """Every subcommand with ``-o out`` (and interact's --all-windows, fold's --plot)."""
    return [["fold", "--model", "nussinov", inp, "-o", out], ["align", inp, inp, "-o", out],
            ["interact", inp, inp, "-o", out], ["targets", inp, inp, "-o", out],
            ["interact", inp, inp, "--all-windows", out], ["fold", "--model", "nussinov", inp, "--partition",
                                                            "--plot", out]]


def test_missing_directory_is_refused_before_any_work(tmp_path, capsys):
    """The input does not even exist: the output is what is checked first."""
    missing_in = str(tmp_path / "not-there.fa")
    for out in (str(tmp_path / "no" / "such" / "dir" / "out.txt"), str(tmp_path)):
        for argv in argvs(missing_in, out):
            if argv[-2] == "--plot":
                pytest.importorskip("matplotlib")
            code = main(argv)
            err = capsys.readouterr().err
            assert_one_error((code, err), located=False)
            assert err.startswith(f"jaxrna: error: {out}: cannot write "), err
            assert ("does not exist" if out != str(tmp_path) else "is a directory") in err
    assert leftovers(tmp_path) == []


def test_output_naming_an_input_is_refused(tmp_path, fa, capsys):
    """``-o`` (or --all-windows, --plot) naming one of the run's inputs, by any path to it, is
    refused before any work: the rename at the end would replace the input with the output."""
    link = tmp_path / "link.fa"
    link.symlink_to(fa)
    for out in (fa, str(link)):
        for argv in argvs(fa, out):
            if argv[-2] == "--plot":
                continue                      # matplotlib may be missing; same check
            code = main(argv)
            err = capsys.readouterr().err
            assert_one_error((code, err), located=False)
            assert f"cannot write {argv[-2]}: it is an input of this run" in err, err
    with open(fa) as fh:
        assert fh.read() == RECORDS
    assert leftovers(tmp_path) == []


def test_cli_missing_directory(tmp_path):
    out = tmp_path / "missing" / "x.tsv"
    r = run(["interact", "--seq1", "GGGAAAUCCC", "--seq2", "GGGAAAUCCC", "-o", str(out)])
    assert_one_error(r, located=False)
    assert f"{out}: cannot write -o: the directory {out.parent} does not exist" in r.stderr


@pytest.mark.skipif(not can_drop_root_privileges(), reason="root without setpriv")
def test_cli_read_only_directory(tmp_path, fa):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        r = run(["fold", "--model", "nussinov", fa, "-o", str(ro / "out.dbn")], prefix=as_unprivileged())
    finally:
        ro.chmod(0o755)
    assert_one_error(r, located=False)
    assert "cannot create a file in" in r.stderr and "Permission denied" in r.stderr
    assert os.listdir(ro) == []


def test_cli_file_size_quota_leaves_nothing_behind(tmp_path, fa):
    out = tmp_path / "out.tsv"
    out.write_text("the previous result\n")
    r = run(["align", fa, fa, "--pairs", "zip", "-o", str(out), "-q"],
            prefix=file_size_limit(16384))
    assert_one_error(r, located=False)
    assert r.stderr == f"jaxrna: error: {out}: cannot write: File too large\n", r.stderr
    assert out.read_text() == "the previous result\n"       # untouched
    assert leftovers(tmp_path) == []


@pytest.fixture
def small_disk(tmp_path):
    d = tmp_path / "disk"
    d.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(d)],
                       capture_output=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=False)


def test_cli_disk_full_leaves_nothing_behind(small_disk, fa):
    out = small_disk / "folds.dbn"
    r = run(["fold", "--model", "nussinov", fa, "-o", str(out), "-q"])
    assert_one_error(r, located=False)
    assert r.stderr == f"jaxrna: error: {out}: cannot write: No space left on device\n"
    assert os.listdir(small_disk) == []


def test_cli_full_standard_output():
    with open("/dev/full", "w") as full:
        r = subprocess.run(command(["fold", "--model", "nussinov", "-", "-q"]), input=RECORDS,
                           stdout=full, stderr=subprocess.PIPE, text=True,
                           env=env(), timeout=120)
    assert_one_error((r.returncode, r.stderr), located=False)
    assert r.stderr == "jaxrna: error: standard output: cannot write: No space left on device\n"


def test_atomic_output_write_errors_in_process(tmp_path, monkeypatch):
    """A write failing with ENOSPC inside the block: OutputError, no temporary file left."""
    import errno

    from jaxrna.io.atomic import atomic_output
    from jaxrna.io.errors import OutputError

    out = tmp_path / "x.txt"
    with pytest.raises(OutputError, match=r"x\.txt: cannot write: No space left on device"):
        with atomic_output(str(out)) as fh:
            fh.write("partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError):              # other errors pass through, file removed too
        with atomic_output(str(out)) as fh:
            raise ValueError("x")
    assert os.listdir(tmp_path) == []




def test_device_and_link_outputs(tmp_path):
    """``-o /dev/stdout`` writes to standard output (it used to rename a file over the link
    /dev/stdout itself, as root); ``-o`` through a symbolic link replaces the file it names."""
    was_link = os.path.islink("/dev/stdout")
    r = run(["fold", "--model", "nussinov", "--sequence", "GGGAAAUCCC", "-f", "tsv", "-o", "/dev/stdout", "-q"])
    assert r.returncode == 0 and r.stdout.startswith("#id\t"), r.stderr
    assert os.path.islink("/dev/stdout") == was_link
    real, link = tmp_path / "real.tsv", tmp_path / "link.tsv"
    link.symlink_to(real)
    r = run(["fold", "--model", "nussinov", "--sequence", "GGGAAAUCCC", "-f", "tsv", "-o", str(link), "-q"])
    assert r.returncode == 0 and link.is_symlink() and real.read_text().startswith("#id\t")
