"""The bulk FASTA reader of target files against the streaming one: the same records and chunks,
or a refusal (and then the streaming reader's answer or error) on anything unusual."""

import numpy as np
import pytest

from jaxrna.io.errors import InputError
from jaxrna.targets.api import _chunks_and_last, _target_chunks
from jaxrna.targets.sequences import read_bulk, read_records


def random_fasta(rng, quirks: bool) -> str:
    out = []
    for k in range(int(rng.integers(1, 12))):
        head = f">t{k}" + (f" desc {k}" if rng.random() < 0.5 else "") + ("\t x " if rng.random() < 0.2 else "")
        seq = "".join(rng.choice(list("ACGTUacgtuNnRYKMSWBDHVX"), size=int(rng.integers(1, 200))))
        lines = [seq[s:s + int(rng.integers(5, 70))] for s in range(0, len(seq), 60)]
        if quirks:
            quirk = rng.integers(0, 30)  # one record in five has a quirk
            if quirk == 0:
                lines.insert(0, "")                      # a blank line
            elif quirk == 1:
                lines = [line + "\r" for line in lines]  # CRLF
            elif quirk == 2:
                lines[-1] += " "                         # a blank inside
            elif quirk == 3:
                lines = []                               # an empty record
            elif quirk == 4:
                lines[0] = lines[0][:1] + "*" + lines[0][1:]  # a bad letter
            elif quirk == 5:
                head = ">"                               # no id
        out.append("\n".join([head] + lines))
    text = "\n".join(out)
    if quirks and rng.random() < 0.2:
        text = "\n" + text                               # a blank line before the first header
    return text + ("\n" if rng.random() < 0.8 else "")


def records(path):
    try:
        return [(r.id, r.description, r.sequence) for r in read_records(path)]
    except InputError as exc:
        return str(exc)


@pytest.mark.parametrize("quirks", [False, True])
def test_bulk_reader_matches_streaming_reader(tmp_path, quirks):
    rng = np.random.default_rng(7 + quirks)
    accepted = 0
    for case in range(120):
        path = tmp_path / f"{case}.fa"
        path.write_text(random_fasta(rng, quirks))
        expected = records(path)
        bulk = read_bulk(path)
        if bulk is None:
            assert quirks, "a plain file was refused"
            continue
        ids, descriptions, letters, lengths = bulk
        text = letters.tobytes().decode()
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        got = [(i, d, text[s:s + n]) for i, d, s, n in zip(ids, descriptions, starts, lengths)]
        assert got == expected, case
        accepted += 1
    assert accepted >= 15


def test_chunks_match(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "t.fa"
    path.write_text(random_fasta(rng, False) + random_fasta(rng, False).replace(">t", ">u"))
    for chunk_nt in (1, 50, 180, 400, 10_000):
        stream = [([r.id for r in rec], [r.sequence for r in rec], last)
                  for rec, last in _chunks_and_last(read_records(path), chunk_nt)]
        bulk = []
        for ids, _, text, last, known in _target_chunks(str(path), chunk_nt):
            seqs = [text.chars[s:s + n].tobytes().decode() for s, n in zip(text.starts, text.lengths)]
            bulk.append((ids, seqs, last))
            assert known == sum(len(c[0]) for c in stream)
        assert bulk == stream, chunk_nt


def test_read_ahead_gives_the_file_as_it_is_when_taken(tmp_path):
    """The CLI starts reading the target file in a thread (read_ahead); the chunks are what
    the file holds when they are taken: the read-ahead's result if the file is unchanged,
    else a fresh read; streams and missing files are left to the usual readers."""
    from jaxrna.targets import sequences

    p = tmp_path / "t.fa"
    p.write_text(">a x\nACGU\n>b\nGG\n")
    sequences.read_ahead(str(tmp_path / "other.fa"))  # missing: nothing
    q = tmp_path / "q.fa"
    q.write_text(">q\nAAA\n")
    sequences.read_ahead(str(q))
    sequences.read_ahead(str(p))                     # one at a time: q's is dropped
    assert len(sequences._AHEAD) == 1
    ids, desc, letters, lengths = sequences.read_bulk_once(str(p))
    assert (ids, desc, letters.tobytes(), lengths.tolist()) == (["a", "b"], ["a x", "b"], b"ACGUGG", [4, 2])
    assert sequences._AHEAD == {}                       # taken once
    sequences.read_ahead(str(p))
    p.write_text(">c\nUUUUU\n")                         # changed after the read-ahead started
    ids, _, letters, lengths = sequences.read_bulk_once(str(p))
    assert (ids, letters.tobytes()) == (["c"], b"UUUUU") and sequences._AHEAD == {}
    for name in ("-", str(tmp_path / "missing.fa"), str(tmp_path)):
        sequences.read_ahead(name)
    assert sequences._AHEAD == {}
    sequences.read_ahead(str(p))
    chunks = list(_target_chunks(str(p), 1000))         # what the scan reads
    assert [c[0] for c in chunks] == [["c"]] and sequences._AHEAD == {}
    sequences.read_ahead(str(p))
    sequences.forget_read_ahead()                   # a run that ended before its targets
    assert sequences._AHEAD == {}


def test_read_ahead_of_a_bad_file_reports_as_the_reader_does(tmp_path):
    from jaxrna.targets import sequences

    p = tmp_path / "bad.fa"
    p.write_text(">a\nAC*GU\n")
    sequences.read_ahead(str(p))
    with pytest.raises(InputError, match=r"bad.fa:2: record .a.: character .\*. at column 3"):
        list(_target_chunks(str(p), 1000))


def test_a_cli_run_leaves_no_read_ahead_behind(tmp_path, capsys):
    """A run that stops before reading its targets (a bad miRNA file) drops the read-ahead."""
    from jaxrna.cli import main
    from jaxrna.targets import sequences

    (tmp_path / "m.fa").write_text(">m\nAC*GU\n")
    (tmp_path / "t.fa").write_text(">t\nACGUACGU\n")
    assert main(["targets", str(tmp_path / "m.fa"), str(tmp_path / "t.fa")]) == 2
    assert "m.fa:2" in capsys.readouterr().err and sequences._AHEAD == {}
