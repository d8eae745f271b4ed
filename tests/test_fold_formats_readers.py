"""``jaxrna fold``'s ``dbn`` and ``ct`` output read back by ViennaRNA's own readers (the ``RNA``
module, a dependency of jaxrna): ``RNA.file_fasta_read`` (the reader of RNAfold's input and
output: header, sequence, then the structure line) and ``RNA.file_connect_read_record`` (ct).
Every record: the same id, sequence, structure (and so pairs) and score.

Not here, for want of a standard reader: ``bpseq`` (neither Biopython nor ViennaRNA reads it;
the fold tests check it against ``ct``), and ``tsv``/``json``, which are jaxrna's own.
"""

import dataclasses
import io
import os

import pytest

RNA = pytest.importorskip("RNA")

from conftest import ROOT  # noqa: E402
from jaxrna.fold.api import fold  # noqa: E402
from jaxrna.formats.fold import write_ct, write_dbn  # noqa: E402
from jaxrna.io import read_fasta  # noqa: E402

EXAMPLE = os.path.join(ROOT, "test-data", "fold_example.fa")


@pytest.fixture(scope="module")
def results():
    records = list(read_fasta(EXAMPLE))
    seqs = [r.sequence for r in records]
    out = []
    for weights, min_loop in (("unit", 3), ("bpmax", 3), ("integer", 0)):
        res = fold(seqs, weights=weights, min_loop=min_loop, backend="cpu")
        out += [dataclasses.replace(r, id=rec.id) for r, rec in zip(res, records)]
    assert any(r.score_text.endswith(".5") for r in out)          # fractional scores too
    assert any("N" in r.sequence for r in out)                     # letters that never pair
    return out


def vienna_pairs(structure: str) -> list:
    pt = RNA.ptable(structure)
    return [(i - 1, pt[i] - 1) for i in range(1, pt[0] + 1) if pt[i] > i]


def test_vienna_reads_dbn(results, tmp_path):
    path = tmp_path / "f.dbn"
    with open(path, "w") as fh:
        write_dbn(results, fh)
    read = []
    with open(path) as fh:
        while True:
            code, header, sequence, rest = RNA.file_fasta_read(fh, 0)[:4]
            if not sequence:
                break
            read.append((header, sequence, list(rest)))
    assert len(read) == len(results)
    for (header, sequence, rest), r in zip(read, results):
        assert header == f">{r.id}" and sequence == r.sequence
        (line,) = rest
        structure, score = line.split(" ", 1)
        assert structure == r.structure and score == f"({r.score_text})"
        assert vienna_pairs(structure) == sorted(r.pairs)


def test_vienna_reads_ct(results, tmp_path):
    path = tmp_path / "f.ct"
    with open(path, "w") as fh:
        write_ct(results, fh)
    read, remainder = [], ""
    with open(path) as fh:
        while True:
            code, name, sequence, structure, remainder = RNA.file_connect_read_record(fh, remainder)
            assert code > 0, (code, name)
            read.append((name, sequence, structure))
            if not remainder:
                break
    assert len(read) == len(results)
    for (name, sequence, structure), r in zip(read, results):
        assert name == f"SCORE = {r.score_text} {r.id}"     # the rest of the header line
        assert sequence == r.sequence and structure == r.structure
        assert vienna_pairs(structure) == sorted(r.pairs)


def test_ct_reader_reads_the_partner_column(tmp_path):
    """The comparison above means something: the reader takes the pairs from the partner
    column (pair 1-9 changed into 1-10 reads as such)."""
    r = fold("GGGAAAUCCC", backend="cpu")
    assert r.structure == "(((...)))."
    out = io.StringIO()
    write_ct([r], out)
    lines = out.getvalue().splitlines(keepends=True)
    for k, partner in ((1, "10"), (9, "0"), (10, "1")):
        fields = lines[k].split()
        fields[4] = partner
        lines[k] = " ".join(fields) + "\n"
    path = tmp_path / "changed.ct"
    path.write_text("".join(lines))
    with open(path) as fh:
        code, name, sequence, structure, remainder = RNA.file_connect_read_record(fh, "")
    assert code > 0 and structure == "(((...)).)"
