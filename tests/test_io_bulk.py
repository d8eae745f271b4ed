"""The bulk FASTA reader (jaxrna.io.bulk) against the validating record reader (read_fasta):
same records, ids, descriptions, lines and error messages, whatever the block size."""

import gzip
import io
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from jaxrna.io.bulk import SeqBatch, iter_batches, padded_codes, read_batch
from jaxrna.io.errors import InputError
from jaxrna.io.fasta import read_fasta

PIECES = [">r{}\n", ">r{} desc  \n", ">  r{} lead\n", ">\n", "> \n", "ACGU\n", "acgtn\n", "\n",
          "AC GU\n", "AC\tG\n", "ACGU\r\n", ">r{}\r\n", "ACGZ\n", "AC-G\n", "XX\n", ">r1\n",
          "ACGU", "MKLV\n", "ACé\n"]


def _reference(path, alphabet):
    try:
        return [(r.id, r.sequence, r.description, r.line) for r in read_fasta(path, alphabet)]
    except InputError as exc:
        return str(exc)


def _bulk(path, alphabet, block_bytes):
    try:
        return [(r.id, r.sequence, r.description, r.line)
                for b in iter_batches(path, alphabet, block_bytes=block_bytes) for r in b.records()]
    except InputError as exc:
        return str(exc)


def test_same_records_and_errors_as_read_fasta(tmp_path):
    rng = random.Random(7)
    path = str(tmp_path / "x.fa")
    compared = errors = 0
    for _ in range(600):
        text = "".join(rng.choice(PIECES).format(rng.randint(1, 6)) for _ in range(rng.randint(0, 8)))
        if rng.random() < 0.5:
            text = ">r0\nACGU\n" + text
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        for alphabet in ("rna", "letters"):
            want = _reference(path, alphabet)
            errors += isinstance(want, str)
            for block in (1 << 20, 7, 1):
                assert _bulk(path, alphabet, block) == want, (text, alphabet, block)
                compared += 1
    assert compared == 3600 and 300 < errors < 3300   # both outcomes were exercised


def test_plain_file_in_blocks_gzip_and_stdin(tmp_path):
    rng = np.random.default_rng(3)
    lines = []
    for k in range(300):
        seq = "".join(rng.choice(list("ACGTUNacgu"), size=rng.integers(1, 300)))
        lines.append(f">s{k} some text {k}\n" + "\n".join(seq[i:i + 60] for i in range(0, len(seq), 60)))
    text = "\n".join(lines) + "\n"
    plain = tmp_path / "a.fa"
    plain.write_text(text)
    gz = tmp_path / "a.fa.gz"
    with gzip.open(gz, "wt") as fh:
        fh.write(text)
    want = [(r.id, r.sequence, r.description, r.line) for r in read_fasta(str(plain))]
    for path in (plain, gz):
        for block in (1 << 26, 1000, 1):
            batches = list(iter_batches(str(path), block_bytes=block))
            got = [(r.id, r.sequence, r.description, r.line) for b in batches for r in b.records()]
            assert got == want
        whole = read_batch(str(path))
        assert whole.lengths.tolist() == [len(w[1]) for w in want]
        assert whole.lines.tolist() == [w[3] for w in want]
    code = ("import sys; from jaxrna.io.bulk import read_batch; b = read_batch('-'); "
            "print(len(b), b.letters.size, b.ids[-1])")
    for data in (text.encode(), gzip.compress(text.encode())):
        out = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True,
                             check=True, cwd=os.path.dirname(os.path.dirname(__file__)))
        assert out.stdout.decode().split() == [str(len(want)), str(sum(len(w[1]) for w in want)),
                                               want[-1][0]]


def test_duplicates_across_blocks_and_truncated_gzip(tmp_path):
    p = tmp_path / "d.fa"
    p.write_text(">a\nACGU\n>b\nGG\n>c\nUU\n>a\nCC\n")
    for block in (1 << 20, 4):
        with pytest.raises(InputError, match=r"d.fa:7: record 'a': duplicate record id \(first seen on line 1\)"):
            list(iter_batches(str(p), block_bytes=block))
    assert len(read_batch(str(p), unique_ids=False)) == 4
    gz = tmp_path / "t.fa.gz"
    gz.write_bytes(gzip.compress(b">a\n" + b"ACGU\n" * 5000)[:-40])
    with pytest.raises(InputError, match="t.fa.gz"):
        read_batch(str(gz))


def test_padded_codes_and_concat():
    a = SeqBatch.from_records(read_fasta(io_path := _write(">x\nACGUN\n>y\nGU\n")))
    b = SeqBatch.from_records(read_fasta(_write(">z\nC\n")))
    both = SeqBatch.concat([a, b])
    assert both.ids == ["x", "y", "z"] and both.sequence(2) == "C"
    codes = padded_codes(both, [2, 0, 1], 6, rows=4)
    assert codes.tolist() == [[1, 4, 4, 4, 4, 4], [0, 1, 2, 3, 4, 4], [2, 3, 4, 4, 4, 4],
                              [4, 4, 4, 4, 4, 4]]
    with pytest.raises(ValueError):
        padded_codes(both, [0], 3)
    os.unlink(io_path)


def _write(text: str) -> str:
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".fa")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    return path
