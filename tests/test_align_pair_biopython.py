"""``jaxrna align -f pair`` read back by Biopython's EMBOSS reader, ``Bio.Align.parse(path,
"emboss")``: the same ids, aligned rows, coordinates, score, identity, similarity, gaps and
match line for many random alignments (global and local, several scoring schemes, gaps at the
ends, rows of gaps only across whole 50-column blocks, empty local alignments), several per
file. With EMBOSS installed (Debian: ``apt-get install emboss``), also the rows of ``needle`` and
``water`` themselves, byte for byte, wherever they chose the same alignment.

One layout Biopython cannot read, from EMBOSS as from jaxrna: a row whose first block holding
any of its letters holds exactly one (``5 A 5``): the reader takes ``start == end`` for the
reverse strand (``test_biopython_misreads_emboss_own_single_letter_block`` shows it on water's
own output). Such alignments are checked one per file, against that known reading.
"""

import dataclasses
import os
import random
import shutil
import subprocess

import numpy as np
import pytest

Align = pytest.importorskip("Bio.Align")

from jaxrna.align.api import align  # noqa: E402
from jaxrna.formats.align import WIDTH, write_pair  # noqa: E402


def _random_seq(rng, n, alphabet="ACGT"):
    return "".join(rng.choice(alphabet) for _ in range(n))


def random_pairs(rng, n, alphabet="ACGT"):
    """Pairs of many shapes: related (mutated copies), unrelated, very unequal lengths (gaps at
    the ends), long insertions (whole blocks of gaps in one row), and single letters. At most
    64 letters each: one padded length, so one compiled program per scheme."""
    pairs = []
    for k in range(n):
        shape = k % 6
        a = _random_seq(rng, rng.randint(2, 64), alphabet)
        if shape == 0:      # a mutated copy
            b = "".join(c if rng.random() > 0.15 else rng.choice(alphabet) for c in a)
            b = b[rng.randint(0, 3):] or a
        elif shape == 1:    # unrelated
            b = _random_seq(rng, rng.randint(1, 64), alphabet)
        elif shape in (2, 3):   # a long insertion: blocks of gaps only in the other row
            a = a[: rng.randint(2, 12)]
            cut = rng.randint(0, len(a))
            b = a[:cut] + _random_seq(rng, rng.randint(51, 64 - len(a)), alphabet) + a[cut:]
            if shape == 3:
                a, b = b, a
        elif shape == 4:    # very unequal lengths: end gaps
            b = a[rng.randint(0, len(a) // 2):][: rng.randint(1, 8)] or a[:1]
            if rng.random() < 0.5:
                a, b = b, a
        else:
            b = _random_seq(rng, rng.randint(1, 4), alphabet)
        pairs.append((a, b))
    return pairs


# One list of pairs for every scheme: schemes of one kind (global or local; a matrix, or
# match/mismatch scores) share one compiled program (three here, the bulk of the time). The
# first pairs have no pair scoring above 0 in local mode (empty local alignments, followed by
# others in the same file), then a one-letter local alignment.
PAIRS = [("AAAA", "CCCC"), ("A", "G"), ("GGGG", "T"), ("A", "CCGTA")] + random_pairs(random.Random(5), 96)

SCHEMES = {
    "global NUC.4.4": ("global", {}),                          # 10 / 0.5, EMBOSS's defaults
    "local NUC.4.4": ("local", {}),
    "global match/mismatch": ("global", {"match": 2, "mismatch": -3, "gap_open": 5, "gap_extend": 2}),
    "global halves": ("global", {"match": 1.5, "mismatch": -1, "gap_open": 2.5, "gap_extend": 0.5}),
    "global edit": ("global", {"preset": "edit"}),
}


@pytest.fixture(scope="module")
def results():
    """scheme -> the alignments of PAIRS (ids q0, q1, ... and t0, t1, ..., some longer than the
    13 characters a row shows)."""
    out = {}
    for name, (mode, options) in SCHEMES.items():
        res = align([a for a, _ in PAIRS], [b for _, b in PAIRS], mode, pairs="zip", backend="cpu",
                    **options)
        out[name] = [dataclasses.replace(r, query_id=f"q{k}" + "_long_identifier" * (k % 3), target_id=f"t{k}")
                     for k, r in enumerate(res)]
    return out


def single_letter_first_block(aln) -> bool:
    """A row whose first block with any of its letters holds exactly one (see the docstring)."""
    if aln.ops == "":
        return False
    for row in aln.columns():
        for s in range(0, len(row), WIDTH):
            k = len(row[s:s + WIDTH].replace("-", ""))
            if k:
                if k == 1:
                    return True
                break
    return False


def expected_coordinates(aln) -> np.ndarray:
    """Biopython's coordinates: a column at every change between pair, query gap and target
    gap runs; 0-based positions in the whole sequences."""
    i, j = aln.query_start, aln.target_start
    points = [(i, j)]
    prev = None
    for op in aln.ops:
        kind = op
        if prev is not None and kind != prev:
            points.append((i, j))
        i += op in "MI"
        j += op in "MD"
        prev = kind
    points.append((i, j))
    return np.array(points).T


def expected_marks(aln) -> str:
    qa, ta = aln.columns()
    sc = aln.scoring
    marks = []
    for a, b in zip(qa, ta):
        if a == "-" or b == "-":
            marks.append(" ")
        elif a.upper() == b.upper():
            marks.append("|")
        else:
            marks.append(":" if sc.pair_score(a, b) > 0 else ".")
    return "".join(marks)


def check(parsed, aln):
    assert [s.id for s in parsed.sequences] == [aln.query_id, aln.target_id]
    assert parsed.annotations["Score"] == float(aln.score)
    assert parsed.annotations["Matrix"] == aln.scoring.name
    if aln.ops == "":
        assert parsed.coordinates.tolist() == [[0, 0], [0, 0]]
        assert [len(s.seq) for s in parsed.sequences] == [0, 0]
        return
    st = aln.stats()
    assert (parsed.annotations["Identity"], parsed.annotations["Similarity"], parsed.annotations["Gaps"]) \
        == (st["identical"], st["similar"], st["gaps"])
    assert parsed.coordinates.tolist() == expected_coordinates(aln).tolist()
    qa, ta = aln.columns()
    assert (parsed[0], parsed[1]) == (qa, ta)
    assert parsed.sequences[0].seq[aln.query_start:aln.query_end] == aln.query[aln.query_start:aln.query_end]
    assert parsed.sequences[1].seq[aln.target_start:aln.target_end] == aln.target[aln.target_start:aln.target_end]
    assert parsed.column_annotations["emboss_consensus"].rstrip() == expected_marks(aln).rstrip()


def write(path, alns):
    with open(path, "w", encoding="utf-8") as fh:
        write_pair(alns, fh)


def test_biopython_reads_random_pair_output(results, tmp_path):
    alns = [a for group in results.values() for a in group]
    readable = [a for a in alns if not single_letter_first_block(a)]
    odd = [a for a in alns if single_letter_first_block(a)]
    # the shapes the docstring promises are there
    assert len(readable) >= 0.8 * len(alns)
    assert sum(a.ops == "" for a in readable) >= 3                       # empty local alignments
    blocks_of_gaps = 0
    for a in readable:
        if a.ops:
            for row in a.columns():
                blocks_of_gaps += any(set(row[s:s + WIDTH]) == {"-"} for s in range(0, len(row), WIDTH))
    assert blocks_of_gaps >= 10
    assert sum(a.mode == "global" and a.ops[0] != "M" for a in readable) >= 10     # leading gaps
    assert sum(a.mode == "global" and a.ops[-1] != "M" for a in readable) >= 10    # trailing gaps
    # one file per scheme, many alignments each (empty ones in the middle of a file too)
    for k, name in enumerate(results):
        group = [a for a in results[name] if not single_letter_first_block(a)]
        path = tmp_path / f"g{k}.pair"
        write(path, group)
        parsed = list(Align.parse(str(path), "emboss"))
        assert len(parsed) == len(group)
        for p, a in zip(parsed, group):
            check(p, a)
    # Biopython's known misreading, one alignment per file
    for k, a in enumerate(odd):
        path = tmp_path / f"odd{k}.pair"
        write(path, [a])
        try:
            (p,) = list(Align.parse(str(path), "emboss"))
        except (AssertionError, ValueError):
            continue            # its reverse-strand reading contradicts the rest of the row
        try:
            check(p, a)         # a Biopython that reads it right
        except AssertionError:
            assert (np.diff(p.coordinates, axis=1) < 0).any(), "misread for another reason"


def test_all_gap_blocks_are_numbered_as_emboss_does(tmp_path):
    """``13 ---- 12``: a row of gaps only shows the next position, then the previous end."""
    q = "ACGTACGTACGT"
    a = align(q, q[:6] + "T" * 120 + q[6:], "global", backend="cpu")
    path = tmp_path / "a.pair"
    write(path, [a])
    rows = [line.split()[1:] for line in path.read_text().splitlines() if line.startswith(a.query_id[:13] + " ")]
    assert rows == [["1", "ACGTAC" + "-" * 44, "6"], ["7", "-" * 50, "6"], ["7", "-" * 26 + "GTACGT", "12"]]
    (p,) = Align.parse(str(path), "emboss")
    check(p, a)


# --------------------------------------------------------------------------- EMBOSS itself

WATER_ONE_LETTER = """########################################
# Program: water
# Rundate: Tue 24 Nov 2026 21:29:10
# Align_format: pair
# Report_file: w.pair
########################################

#=======================================
#
# Aligned_sequences: 2
# 1: q3
# 2: t2
# Matrix: EDNAFULL
# Gap_penalty: 10.0
# Extend_penalty: 0.5
#
# Length: 1
# Identity:       1/1 (100.0%)
# Similarity:     1/1 (100.0%)
# Gaps:           0/1 ( 0.0%)
# Score: 5.0
#
#
#=======================================

q3                 1 A      1
                     |
t2                 5 A      5


#---------------------------------------
#---------------------------------------
"""


def test_biopython_misreads_emboss_own_single_letter_block(results, tmp_path):
    """EMBOSS water's own output for a one-letter alignment (the A of 'A' with the A at 5 of the
    target): Biopython reads both rows as reverse strand; jaxrna writes the same rows."""
    path = tmp_path / "w.pair"
    path.write_text(WATER_ONE_LETTER)
    (p,) = Align.parse(str(path), "emboss")
    assert p.coordinates.tolist() == [[1, 0], [5, 4]]          # reverse strand: start > end
    a = results["local NUC.4.4"][PAIRS.index(("A", "CCGTA"))]
    assert single_letter_first_block(a)
    write(tmp_path / "j.pair", [a])
    assert emboss_rows((tmp_path / "j.pair").read_text()) == emboss_rows(WATER_ONE_LETTER)


def emboss_rows(text):
    """The alignment rows (numbers, letters, match lines; names cut) of a pair file."""
    body = text.split("#=======================================\n\n", 1)[1]
    return [line[13:].rstrip() for line in body.splitlines() if line and not line.startswith("#")]


@pytest.mark.slow
@pytest.mark.external
@pytest.mark.parametrize("program,scheme", [("needle", "global NUC.4.4"), ("water", "local NUC.4.4")])
def test_rows_equal_emboss_own(program, scheme, results, tmp_path):
    """needle (-endweight: end gaps cost as jaxrna's do) and water on the random DNA pairs,
    EDNAFULL 10 / 0.5 (= jaxrna's defaults): wherever EMBOSS chose the alignment jaxrna chose,
    its rows, numbers and match lines are jaxrna's, byte for byte (blocks of gaps included).
    Skipped without EMBOSS, unless ``JAXRNA_REQUIRE_EMBOSS=1`` (then a failure)."""
    if shutil.which("needle") is None or shutil.which("water") is None:
        if os.environ.get("JAXRNA_REQUIRE_EMBOSS") == "1":
            pytest.fail("JAXRNA_REQUIRE_EMBOSS=1 but EMBOSS needle/water is not on PATH")
        pytest.skip("EMBOSS is not installed (Debian: apt-get install emboss)")
    same = gap_blocks = 0
    for k, (q, t) in enumerate(PAIRS):
        (tmp_path / "q.fa").write_text(f">q\n{q}\n")
        (tmp_path / "t.fa").write_text(f">t\n{t}\n")
        cmd = [program, "-asequence", "q.fa", "-bsequence", "t.fa", "-gapopen", "10", "-gapextend", "0.5",
               "-aformat", "pair", "-outfile", "e.pair"] + (["-endweight"] if program == "needle" else [])
        subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True, timeout=60)
        a = results[scheme][k]
        if a.ops == "":
            continue  # water never writes an empty alignment (it shows its best column)
        e_rows = emboss_rows((tmp_path / "e.pair").read_text())
        write(tmp_path / "j.pair", [a])
        j_rows = emboss_rows((tmp_path / "j.pair").read_text())
        letters = lambda rows, r: "".join(line.split()[1] for line in rows[r::3])  # noqa: E731
        if (letters(e_rows, 0), letters(e_rows, 2)) != (letters(j_rows, 0), letters(j_rows, 2)):
            continue  # another alignment of the same score
        assert e_rows == j_rows, (program, q, t)
        same += 1
        gap_blocks += any(set(line.split()[1]) == {"-"} for line in j_rows[0::3] + j_rows[2::3])
    assert same >= len(PAIRS) // 2
    if program == "needle":
        assert gap_blocks >= 5
