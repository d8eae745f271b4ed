"""FASTA reading, validation messages, weights parsing and atomic output."""

import gzip
import os

import pytest

from jaxrna.io import InputError, atomic_output, read_fasta, sequence_record
from jaxrna.weights import format_number, parse_weights


def write(tmp_path, name, text, mode="w"):
    p = tmp_path / name
    if name.endswith(".gz"):
        with gzip.open(p, "wt") as fh:
            fh.write(text)
    else:
        p.write_text(text)
    return str(p)


def test_reads_records_normalised(tmp_path):
    p = write(tmp_path, "a.fa", "\n>r1 some description\nacgT\nNRY\n>r2\nGGCC\n")
    recs = list(read_fasta(p))
    assert [(r.id, r.sequence, r.line) for r in recs] == [("r1", "ACGUNRY", 2), ("r2", "GGCC", 5)]
    assert recs[0].description == "r1 some description"


def test_gzip(tmp_path):
    p = write(tmp_path, "a.fa.gz", ">x\nACGU\n")
    assert [r.sequence for r in read_fasta(p)] == ["ACGU"]


@pytest.mark.parametrize("text,line,record,fragment", [
    ("hello\n", 1, None, "not FASTA"),
    (">a\nACGU\n>b\n>c\nGG\n", 3, "b", "empty record"),
    (">a\nACGU\n>a\nGG\n", 3, "a", "duplicate record id (first seen on line 1)"),
    (">a\nACGU\nAC1U\n", 3, "a", "character '1' at column 3 (sequence position 7) is not a letter"),
    (">a\nACGU\nACEU\n", 3, "a", "'E' at column 3 (sequence position 7) is not an IUPAC nucleotide code"),
    (">\nACGU\n", 1, None, "no record id"),
    ("", None, None, "no records found"),
])
def test_bad_input_is_located(tmp_path, text, line, record, fragment):
    p = write(tmp_path, "bad.fa", text)
    with pytest.raises(InputError) as info:
        list(read_fasta(p))
    err = info.value
    assert fragment in err.message
    assert (err.path, err.line, err.record) == (p, line, record)
    assert str(err).startswith(p)


def test_missing_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        list(read_fasta(str(tmp_path / "nope.fa")))
    with pytest.raises(InputError, match="directory"):
        list(read_fasta(str(tmp_path)))


def test_binary_file(tmp_path):
    p = tmp_path / "bin.fa"
    p.write_bytes(b">a\nAC\xff\xfeGU\n")
    with pytest.raises(InputError, match="not text"):
        list(read_fasta(str(p)))


def test_letters_alphabet_accepts_protein(tmp_path):
    p = write(tmp_path, "p.fa", ">p\nMKVLE\n")
    assert next(read_fasta(p, alphabet="letters")).sequence == "MKVLE"


def test_sequence_record():
    assert sequence_record("acgt").sequence == "ACGU"
    with pytest.raises(InputError, match="not a letter"):
        sequence_record("AC GU!")
    with pytest.raises(InputError, match="empty"):
        sequence_record("")


def test_weights():
    w = parse_weights("bpmax")
    assert (w.gc, w.au, w.gu, w.scale) == (6, 2, 3, 2)
    w = parse_weights("gc=3, au=2, gu=1")
    assert (w.gc, w.au, w.gu, w.scale) == (3, 2, 1, 1)
    w = parse_weights("GC=0.3,AU=0.25,GU=1")
    assert w.scale == 20 and (w.gc, w.au, w.gu) == (6, 5, 20)
    for bad in ("foo", "GC=3,AU=2", "GC=3,AU=x,GU=1", "GC=-1,AU=2,GU=1", "GC=1,GC=2,AU=1,GU=1"):
        with pytest.raises(ValueError):
            parse_weights(bad)
    assert format_number(14) == "14" and format_number(14.5) == "14.5"


def test_atomic_output_keeps_old_file_on_error(tmp_path):
    p = tmp_path / "out.txt"
    p.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_output(str(p)) as fh:
            fh.write("partial")
            raise RuntimeError("boom")
    assert p.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.txt"]
    with atomic_output(str(p)) as fh:
        fh.write("new\n")
    assert p.read_text() == "new\n"
