"""Input faults (issue 15): every one ends with one located line on stderr and exit status 2,
in every subcommand: a ``.gz`` that is not gzip, a truncated gzip, bytes that are not UTF-8,
an unreadable file, a directory, a character device, a FIFO (read as a stream), a file that
changes while it is read. The whole matrix runs in-process through ``jaxrna.cli.main``; each
kind of fault also runs once through the real CLI in a subprocess."""

import gzip
import os
import threading
import time

import pytest

from faults_common import (MIRNA, OK_FA, UTR, argv_for, as_unprivileged, assert_one_error,
                           can_drop_root_privileges, leftovers, run)
from jaxrna.cli import main
from jaxrna.io.errors import InputError
from jaxrna.io.fasta import read_fasta

SUBCOMMANDS = ["fold", "align", "interact", "targets", "targets2"]
BIG_TEXT = "".join(f">r{k}\n{'ACGU' * 15}\n" for k in range(4000))


def faulty_files(d) -> dict:
    """name -> (path, line the fault is located at, fragment of the message)."""
    files = {}

    def put(name, data, line, fragment):
        p = os.path.join(d, name)
        with open(p, "wb") as fh:
            fh.write(data)
        files[name] = (p, line, fragment)

    put("not_gzip.fa.gz", b"\x1f\x8b" + b"this is not gzip data at all\n" * 3, 1, "gzip")
    whole = gzip.compress(BIG_TEXT.encode())
    cut = whole[:len(whole) // 2]
    put("truncated.fa.gz", cut, None, "truncated gzip")  # the line: see the test below
    put("bad_bytes.fa", b">a\nGGGAAA\nGG\xff\xfeAA\n", 3, "not UTF-8")
    put("nul_bytes.fa", b"\x00" * 300_000, 1, "not FASTA")
    return files


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("faults")
    ok = d / "ok.fa"
    ok.write_text(OK_FA)
    return str(d), str(ok), faulty_files(str(d))


def run_main(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, err


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_input_fault_in_every_subcommand(sub, inputs, capsys):
    d, ok, files = inputs
    other = MIRNA if sub == "targets2" else ok
    for name, (path, line, fragment) in files.items():
        m = assert_one_error(run_main(argv_for(sub, path, other), capsys))
        assert m["file"] == path, (name, m["file"])
        assert fragment in m["what"], (name, m["what"])
        if line is not None:
            assert int(m["line"]) == line, (name, m.group(0))
    for path, fragment in ((d, "is a directory"), ("/dev/zero", "character device"),
                           (os.path.join(d, "missing.fa"), "no such file")):
        code, err = run_main(argv_for(sub, path, other), capsys)
        assert_one_error((code, err), located=False)
        assert err.startswith(f"jaxrna: error: {path}: ") and fragment in err, err
    assert leftovers(d) == []


def test_truncated_gzip_is_located_where_it_stops(inputs):
    _, _, files = inputs
    path = files["truncated.fa.gz"][0]
    with pytest.raises(InputError) as err:
        list(read_fasta(path))
    assert err.value.line and err.value.line > 1000 and "truncated gzip" in str(err.value)


# ------------------------------------------------------------------------------------------
# the real CLI, once per kind of fault (several subcommands between them)


def test_cli_not_gzip_and_bad_bytes(inputs):
    _, ok, files = inputs
    m = assert_one_error(run(argv_for("fold", files["not_gzip.fa.gz"][0], ok)))
    assert m["line"] == "1" and "not a valid gzip file" in m["what"]
    m = assert_one_error(run(argv_for("align", files["bad_bytes.fa"][0], ok)))
    assert m["line"] == "3" and "byte 0xff is not UTF-8" in m["what"]


def test_cli_truncated_gzip_targets_file(inputs):
    _, _, files = inputs
    m = assert_one_error(run(argv_for("targets2", files["truncated.fa.gz"][0], MIRNA)))
    assert "truncated gzip file" in m["what"] and int(m["line"]) > 1000


def test_cli_character_device_does_not_hang(inputs):
    # /dev/zero as the targets file used to be read whole into memory, for ever
    r = run(argv_for("targets2", "/dev/zero", MIRNA), timeout=60)
    assert_one_error(r, located=False)
    assert "/dev/zero: is a character device" in r.stderr


@pytest.mark.skipif(not can_drop_root_privileges(), reason="root without setpriv")
def test_cli_unreadable_file(tmp_path):
    p = tmp_path / "secret.fa"
    p.write_text(OK_FA)
    p.chmod(0)
    r = run(argv_for("interact", str(p), str(p)), prefix=as_unprivileged())
    assert_one_error(r, located=False)
    assert f"{p}: permission denied" in r.stderr


@pytest.mark.slow
def test_cli_fifo_is_read_as_a_stream(tmp_path):
    """A FIFO (``<(zcat x.fa.gz)``, a named pipe) works like standard input, also as the
    targets file, which a scan of several miRNAs reads twice (it is copied first: it used to
    be counted, then opened again and waited on for ever)."""
    fifo = str(tmp_path / "targets.fifo")
    os.mkfifo(fifo)
    with open(UTR, "rb") as fh:
        data = gzip.compress(fh.read())

    def feed(payload):
        with open(fifo, "wb") as w:
            w.write(payload)

    two_mirnas = tmp_path / "two.fa"
    with open(MIRNA) as fh:
        text = fh.read()
    two_mirnas.write_text(text + text.replace(">", ">again_", 1))
    feeder = threading.Thread(target=feed, args=(data,))
    feeder.start()
    r = run(["targets", str(two_mirnas), fifo, "--no-energy", "-f", "tsv"], timeout=120)
    feeder.join(30)
    assert r.returncode == 0 and "error" not in r.stderr, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines() if not line.startswith("#")]
    first = [row[1:] for row in rows if not row[0].startswith("again_")]
    again = [row[1:] for row in rows if row[0].startswith("again_")]
    assert len(first) == 4 and first == again, r.stdout
    assert not any(n.startswith("jaxrna-targets-") for n in os.listdir(tmp_path))
    # and a FIFO of garbage: a located error
    threading.Thread(target=feed, args=(b"\x1f\x8bnot gzip\n",)).start()
    m = assert_one_error(run(argv_for("fold", fifo, fifo), timeout=60))
    assert m["file"] == fifo and "gzip" in m["what"]


def test_cli_file_growing_while_read(tmp_path):
    """A file still being written (appended to while jaxrna reads it): one located line."""
    p = tmp_path / "growing.fa"
    p.write_text("".join(f">g{k}\n{'ACGUACGUAC' * 8}\n" for k in range(60_000)))
    stop = threading.Event()

    def append():
        k = 0
        while not stop.is_set():
            with open(p, "a") as fh:
                fh.write(f">late{k}\nACGU\n")
            k += 1
            time.sleep(0.003)

    writer = threading.Thread(target=append)
    writer.start()
    try:
        r = run(["interact", str(p), "--seq2", "GGGAAAUCCC", "-q"], timeout=120)
    finally:
        stop.set()
        writer.join()
    m = assert_one_error(r)
    assert m["file"] == str(p) and "changed while it was read" in m["what"], m.group(0)
    assert int(m["line"]) >= 120_000


# ------------------------------------------------------------------------------------------
# each reader notices a file changing under it


def test_readers_notice_a_file_that_changes(tmp_path, monkeypatch):
    from jaxrna.io import bulk, source
    from jaxrna.targets.sequences import read_bulk, read_records

    from jaxrna.targets import sequences

    monkeypatch.setattr(source, "READ_BYTES", 4)        # small blocks: the end of the file
    monkeypatch.setattr(sequences, "BLOCK", 4)          # comes after the first record
    p = tmp_path / "x.fa"
    text = ">a\nACGU\n>b\nGGCC\n"
    for reader in (read_fasta, read_records,
                   lambda path: (r for b in bulk.iter_batches(path, block_bytes=4) for r in b.ids)):
        p.write_text(text)
        records = reader(str(p))
        next(records)
        with open(p, "a") as fh:
            fh.write(">c\nAAAA\n")
        with pytest.raises(InputError, match=r"x\.fa:\d+: the file changed while it was read"):
            list(records)
    # read_bulk reads in one go: a size that differs after the read is the change
    p.write_text(text)
    real = os.fstat
    calls = []

    def fstat(fd):
        st = real(fd)
        calls.append(st)
        if len(calls) == 2:
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid,
                                   st.st_gid, st.st_size + 9, st.st_atime, st.st_mtime,
                                   st.st_ctime))
        return st

    monkeypatch.setattr(source.os, "fstat", fstat)
    with pytest.raises(InputError, match="changed while it was read"):
        read_bulk(str(p))
