"""Issue 26 for ``jaxrna interact``: a run compiles one program per geometry class, known in
advance (:func:`jaxrna.interact.windows.plan`), at most 8 (a run meeting more merges classes:
:mod:`jaxrna.interact.classes`; the plans of mixes to 10,240 nt are tested without compiling in
``test_interact_classes.py``); lengths, windows and weights never add one.

Whole processes on the CPU, counted with :func:`compile_count.run_counted`."""

from __future__ import annotations

import random

import pytest

from compile_count import run_counted, warm_counted

from jaxrna.interact.api import make_problem
from jaxrna.io.fasta import Record


def write_pairs(path, seed: int, n: int, len1: tuple[int, int], len2: tuple[int, int]):
    rng = random.Random(seed)
    recs = ([], [])
    for k in range(n):
        for side, (lo, hi) in enumerate((len1, len2)):
            recs[side].append(("ab"[side] + str(k),
                               "".join(rng.choice("ACGU") for _ in range(rng.randint(lo, hi)))))
    files = []
    for side in (0, 1):
        f = path / f"{'ab'[side]}{seed}.fa"
        f.write_text("".join(f">{i}\n{s}\n" for i, s in recs[side]))
        files.append(str(f))
    return files, recs


def classes(recs, window1=None, window2=None) -> set:
    return {make_problem(Record(a, s1), Record(b, s2), window1, window2).plan.geo
            for (a, s1), (b, s2) in zip(*recs)}


@pytest.mark.slow
def test_programs_of_a_run_within_the_bound(tmp_path):
    """Strand 1 of 20 nt against strands of 10-90 nt, windowed: one program per class (here
    (32, 32), (32, 64), (32, 128)), within the documented bound of 8."""
    cache = str(tmp_path / "cache")
    s1 = "".join(random.Random(1).choice("ACGU") for _ in range(20))
    rng = random.Random(2)
    seqs = ["".join(rng.choice("ACGU") for _ in range(n)) for n in (10, 40, 90, 15, 60)]
    a, b = tmp_path / "a.fa", tmp_path / "b.fa"
    a.write_text(f">s\n{s1}\n")
    b.write_text("".join(f">t{k}\n{s}\n" for k, s in enumerate(seqs)))
    run = run_counted(["interact", str(a), str(b), "--window2", "32", "--score-only",
                       "-o", str(tmp_path / "o.tsv")], cache)
    assert run.returncode == 0, run.stderr
    want = classes(([("s", s1)] * len(seqs), [(f"t{k}", s) for k, s in enumerate(seqs)]), None, 32)
    assert run.compiled == len(want) == 3 <= 8


@pytest.mark.slow
def test_after_warm_runs_of_other_mixes_windows_and_weights_compile_nothing(tmp_path):
    """``warm`` prepares the classes of pairs up to 45 nt; then a windowed run, a run of
    another mix (exactly one program per class it meets: each loaded, none compiled) and a
    run with other windows and weights compile nothing. (One cache: the mix's programs are
    the warm-up's, where a cold-run test compiled them a second time, CI time.)"""
    cache = str(tmp_path / "cache")
    # (32, 32), (16, 64), (32, 64), (64, 64)
    assert warm_counted("interact", cache, max_length=45) == 4
    (a, b), _ = write_pairs(tmp_path, 28, 30, (1, 30), (1, 45))
    run = run_counted(["interact", a, b, "--pairs", "zip", "--window1", "12", "--window2", "9",
                       "-o", str(tmp_path / "o.tsv")], cache)
    assert run.returncode == 0, run.stderr
    assert run.compiled == 0
    (a, b), recs = write_pairs(tmp_path, 26, 40, (1, 30), (1, 45))
    first = run_counted(["interact", a, b, "--pairs", "zip", "-o", str(tmp_path / "1.tsv")], cache)
    assert first.returncode == 0, first.stderr
    # one program per class met, and at most 3 for pairs of at most 32 x 63 nt
    assert first.compiled == 0 and first.counts.get("executables_compiled", 0) == 0, first.counts
    assert first.counts.get("executables_loaded", 0) == len(classes(recs)) <= 3, first.counts
    (a2, b2), recs2 = write_pairs(tmp_path, 27, 40, (1, 30), (1, 45))
    assert classes(recs2, 12, 9) <= classes(recs)       # the same classes, other lengths
    second = run_counted(["interact", a2, b2, "--pairs", "zip", "--window1", "12", "--window2",
                          "9", "--weights", "integer", "-o", str(tmp_path / "2.tsv")], cache)
    assert second.returncode == 0, second.stderr
    assert second.compiled == 0
    lines = (tmp_path / "2.tsv").read_text().splitlines()
    assert len(lines) == 41 and lines[1].startswith("a0\tb0\t")


def write_strands(path, name: str, seed: int, lengths) -> str:
    rng = random.Random(seed)
    f = path / f"{name}.fa"
    f.write_text("".join(f">{name}{k}\n{''.join(rng.choice('ACGU') for _ in range(n))}\n"
                         for k, n in enumerate(lengths)))
    return str(f)


@pytest.mark.slow
def test_a_mix_of_13_classes_compiles_8_then_another_nothing(tmp_path):
    """Short strands 1 against strands 2 of 20-1,000 nt with ``--window2``: 13 geometry classes
    (5 inner classes with whole bands, 2 windowed, 3 outer ladders), merged onto 8 programs;
    another run with other lengths of the same classes, another window of the same class and
    other weights compiles nothing."""
    cache = str(tmp_path / "cache")
    a = write_strands(tmp_path, "a", 1, (4, 12, 20))
    b = write_strands(tmp_path, "b", 2, (20, 50, 100, 200, 400, 900))
    probs = [make_problem(Record("a", "A" * n), Record("b", "A" * m), None, 16)
             for n in (4, 12, 20) for m in (20, 50, 100, 200, 400, 900)]
    assert len({p.plan.geo for p in probs}) == 13
    first = run_counted(["interact", a, b, "--window2", "16", "--score-only",
                         "-o", str(tmp_path / "1.tsv")], cache)
    assert first.returncode == 0, first.stderr
    assert first.compiled == 8
    a2 = write_strands(tmp_path, "c", 3, (3, 10, 18))
    b2 = write_strands(tmp_path, "d", 4, (25, 60, 120, 240, 450, 1000))
    second = run_counted(["interact", a2, b2, "--window2", "13", "--weights", "integer",
                          "--score-only", "-o", str(tmp_path / "2.tsv")], cache)
    assert second.returncode == 0, second.stderr
    assert second.compiled == 0
    assert len((tmp_path / "2.tsv").read_text().splitlines()) == 19
