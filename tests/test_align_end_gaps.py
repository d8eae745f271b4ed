"""End gaps scored apart from inner gaps (``jaxrna align --end-gaps free``, ``--end-open`` /
``--end-extend``; global mode) on every path, against the plain reference and Biopython, and
against EMBOSS ``needle`` and ``water`` themselves.

The model (:mod:`jaxrna.align.reference`): a gap before the first or after the last residue of
either sequence costs the end penalties (0 and 0: free). Paths checked: the reference against
Biopython's ``PairwiseAligner`` (``open_end_gap_score``/``extend_end_gap_score``); the pure-JAX
sweep (int32 and int16) and its device walk against the reference and the host walk; the Pallas
kernels in interpret mode (one pair per lane, int16x2 packed, direction bits, tile wavefront and
its checkpointed traceback) against the pure-JAX path; parasail's engine (free end gaps) against
the reference; whole ``jaxrna align`` runs byte for byte between engines; the partition function
against every alignment enumerated.

EMBOSS (Debian's ``emboss`` package; the tests skip without it unless
``JAXRNA_REQUIRE_EMBOSS=1``, which ``.ci/tools.sh`` sets after installing it): random DNA pairs
of 2 to 70 letters, EDNAFULL (= NUC.4.4), under needle's defaults (end gaps free), with
``-endweight`` (end gaps as inner gaps: jaxrna's default), with ``-endweight -endopen 5
-endextend 1`` (jaxrna's ``--end-open 5 --end-extend 1``) and other gap penalties, and water
(local). Every score is EMBOSS's. The aligned rows are EMBOSS's, byte for byte, on most pairs;
where they differ, EMBOSS's rows are another alignment of the same score under jaxrna's model
(EMBOSS breaks ties otherwise: it prefers a gap in the first sequence to one in the second),
or, only where end gaps cost other than inner gaps (free ones included), rows that do not reach
EMBOSS's own reported score (its traceback takes the end gap penalties for gaps after the first
residue too, ``A--GACT`` for ``A-GACT``; its score, jaxrna's, is right). On the seeds here: 96,
96, 84, 89 and 99 of 100 pairs with the same rows; 0, 0, 13, 1 and 0 with such rows. Sequences
of one letter are left out: needle's first row and column never take its last row's or column's
end gap rules, so it misses alignments there (``T`` against ``GCAC...T``: score 0 instead of
5).
"""

import io
import os
import random
import shutil
import subprocess

import numpy as np
import pytest
from Bio.Align import PairwiseAligner
from test_align_core import encode_batch, random_pairs

from jaxrna.align import engine
from jaxrna.align.api import align, align_records
from jaxrna.align.recurrence import fits_int16, params_of
from jaxrna.align.reference import gotoh, rescore
from jaxrna.align.scoring import (edit_preset, from_matrix, make_scoring, match_mismatch,
                                  with_end_gaps)
from jaxrna.align.traceback import SkewedBits, Walk, finish, walk
from jaxrna.formats.align import WRITERS
from jaxrna.io.bulk import read_batch
from jaxrna.io.fasta import Record, read_fasta
from jaxrna.kernels.wavefront import batch_align, batch_sweep, lanes_align, pallas_scores
from jaxrna.kernels.wavefront_packed import packed_ok, packed_scores

AFFINE = match_mismatch(2, -3, 5, 2)
TIES = match_mismatch(1, -1, 1, 1)
SCHEMES = {                                   # name -> (scoring, alphabet)
    "free": (with_end_gaps(AFFINE, "free"), "ACGT"),
    "free ties": (with_end_gaps(TIES, "free"), "AC"),
    "end penalties": (with_end_gaps(AFFINE, end_open=4, end_extend=1), "ACGT"),
    "end open<extend": (with_end_gaps(AFFINE, end_open=1, end_extend=3), "ACGT"),
    "BLOSUM62 ends": (with_end_gaps(from_matrix("BLOSUM62", 11, 1), end_open=4, end_extend=0.5),
                      "ARNDCQEGHILKMFPSTWYV"),
}


def ref_oriented(a, b, scoring):
    """The reference as the batch paths run it: the shorter sequence on the table's rows."""
    if len(a) <= len(b):
        return gotoh(a, b, scoring)
    r = gotoh(b, a, scoring.transposed())
    return r.__class__(r.score, 0, len(a), 0, len(b), r.ops.translate(str.maketrans("ID", "DI")))


# --------------------------------------------------------------------------- the model


def test_options_and_scales():
    free = make_scoring(end_gaps="free")
    assert free.free_end_gaps and free.describe()["end_gap_open"] == "0"
    assert free.end_gaps_text() == "free" and make_scoring().end_gaps_text() is None
    same = make_scoring(end_open=10, end_extend=0.5)          # = the gap penalties: the default
    assert not same.separate_end_gaps and same == make_scoring()
    fine = make_scoring(match=1, end_open=1.25, end_extend=0.25)
    assert (fine.scale, fine.gap_open, fine.end_gap_open, fine.match) == (4, 40, 5, 4)
    assert fine.end_gaps_text() == "open 1.25, extend 0.25"
    with pytest.raises(ValueError, match="drop --end-open"):
        make_scoring(end_gaps="free", end_open=2)
    with pytest.raises(ValueError, match="drop --end-open"):
        make_scoring(preset="edit", end_open=2)
    with pytest.raises(ValueError, match="positive"):
        make_scoring(end_open=-1)
    with pytest.raises(ValueError, match="no end gaps"):
        align("ACGT", "AC", "local", end_gaps="free")


def _biopython(scoring):
    """PairwiseAligner with ``scoring``'s match/mismatch scores, gaps and end gaps."""
    f = lambda v: -v / scoring.scale  # noqa: E731
    al = PairwiseAligner(mode="global", match_score=scoring.match / scoring.scale,
                         mismatch_score=scoring.mismatch / scoring.scale,
                         open_gap_score=f(scoring.gap_open), extend_gap_score=f(scoring.gap_extend))
    new = hasattr(al, "open_end_gap_score")      # Biopython 1.86 renamed end_open_gap_score
    setattr(al, "open_end_gap_score" if new else "end_open_gap_score", f(scoring.end_gap_open))
    setattr(al, "extend_end_gap_score" if new else "end_extend_gap_score",
            f(scoring.end_gap_extend))
    return al


@pytest.mark.parametrize("name", ["free", "free ties", "end penalties", "end open<extend"])
def test_reference_equals_biopython(name):
    """The reference's scores are Biopython's with the same end gap scores, and its alignments
    span both sequences and rescore (end gaps included) to its score."""
    scoring, alphabet = SCHEMES[name]
    bio = _biopython(scoring)
    for a, b in random_pairs(random.Random(31), alphabet, 60, 9, 14):
        r = gotoh(a, b, scoring)
        assert r.score / scoring.scale == pytest.approx(bio.score(a, b), abs=1e-9), (a, b)
        assert r.ops.count("M") + r.ops.count("I") == len(a)
        assert r.ops.count("M") + r.ops.count("D") == len(b)
        assert rescore(a, b, scoring, 0, 0, r.ops) == r.score
    # free end gaps: a sequence inside another costs nothing; the end gap is written as columns
    r = gotoh("ACGTACGT", "TTACGTACGTTT", SCHEMES["free"][0])
    assert (r.score, r.ops) == (16, "DDMMMMMMMMDD")


# --------------------------------------------------------------------------- the JAX paths


@pytest.mark.parametrize("name", ["free ties", "end penalties", "end open<extend"])
def test_batch_paths_equal_reference(name):
    """The vmapped sweep (int32 and int16), its device walk and the host walk over its
    direction bits: the reference's scores and alignments, tie for tie (one batch shape: the
    schemes share the programs)."""
    scoring, alphabet = SCHEMES[name]
    pairs = random_pairs(random.Random(32), alphabet, 40, 12, 20) + [("AAAA", "CCCC")]
    q, t, m, n = encode_batch(scoring, pairs, 12, 20)
    p = params_of(scoring)
    for small in {False, fits_int16(scoring, 12, 20)}:
        score, ei, ej, si, sj, ops, length = (np.asarray(x) for x in batch_align(
            q, t, m, n, p, local=False, equality=scoring.equality, small=small, ends=True))
        s2, e2i, e2j, state, dirs = (np.asarray(x) for x in batch_sweep(
            q, t, m, n, p, local=False, equality=scoring.equality, with_dirs=True, small=small,
            ends=True))
        wk = Walk.start(e2i, e2j, state)
        walk(wk, SkewedBits(dirs), local=False)
        host_ops = finish(wk, local=False)
        for k, (a, b) in enumerate(pairs):
            r = gotoh(a, b, scoring)
            text = "".join("MID"[o] for o in ops[k, :length[k]])
            assert (int(score[k]), text, host_ops[k]) == (r.score, r.ops, r.ops), (name, a, b)
            assert (int(s2[k]), int(si[k]), int(sj[k])) == (r.score, 0, 0)


@pytest.mark.slow
def test_pallas_kernels_interpret_equal_pure_jax():
    """The lane kernel (scores; direction bits and the device walk) and the int16x2 packed
    kernel (its end gap rows: each pair's first row inside the kernel, the last row) in
    interpret mode, small shapes, against the pure-JAX path."""
    packed = 0
    for name in ("free ties", "end penalties", "end open<extend", "BLOSUM62 ends"):
        scoring, alphabet = SCHEMES[name]
        pairs = random_pairs(random.Random(33), alphabet, 16, 8, 13)
        q, t, m, n = encode_batch(scoring, pairs, 8, 13)
        p = params_of(scoring)
        eq = scoring.equality
        want = [np.asarray(x) for x in batch_sweep(q, t, m, n, p, local=False, equality=eq,
                                                    ends=True)]
        got = pallas_scores(q, t, m, n, p, local=False, equality=eq, interpret=True, rows=4,
                            lanes=8, ends=True)
        for a, b in zip(want[:3], got):
            np.testing.assert_array_equal(a, np.asarray(b))
        if packed_ok(scoring, 8 + 64, 13):
            packed += 1
            got = packed_scores(q, t, m, n, p, local=False, interpret=True, rows=4, lanes=8,
                                ends=True)
            for a, b in zip(want[:3], got):
                np.testing.assert_array_equal(a, np.asarray(b))
        want = [np.asarray(x) for x in batch_align(q, t, m, n, p, local=False, equality=eq,
                                                    ends=True)]
        got = [np.asarray(x) for x in lanes_align(q, t, m, n, p, local=False, equality=eq,
                                                   interpret=True, rows=4, lanes=8, ends=True)]
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b)
    # opening from H needs end_open >= end_extend, as for the inner gaps
    assert packed == 2 and not packed_ok(SCHEMES["end open<extend"][0], 72, 13)


@pytest.mark.slow
def test_long_pair_paths_interpret():
    """The checkpointed traceback (pure JAX and the tile wavefront, blocks of 16, tiles of 8)
    and the tile wavefront's scores: the plain batch path's results, the end gaps of a
    sequence inside another crossing blocks."""
    rng = random.Random(34)
    seq = lambda: "".join(rng.choice("ACGT") for _ in range(rng.randint(17, 32)))  # noqa: E731
    pairs = [(Record(f"q{k}", seq()), Record(f"t{k}", seq())) for k in range(4)]
    pairs.append((Record("in", "ACGTACGTACGTACGTAC"), Record("out", "T" * 5 + "ACGT" * 4 + "AC"
                                                              + "T" * 9)))
    kernel = {"tile": 8, "rows": 4, "lanes": 8}
    for name in ("free", "end penalties"):
        scoring = SCHEMES[name][0]
        base = [(r.score_units, r.ops) for r in align_records(pairs, scoring, "global")]
        if name == "free":                    # the query inside the target: its matches only
            assert base[-1] == (36, "D" * 5 + "M" * 18 + "D" * 9)
        for (q, t), (s, ops) in zip(pairs, base):
            assert s == gotoh(q.sequence, t.sequence, scoring).score
            assert rescore(q.sequence, t.sequence, scoring, 0, 0, ops) == s
        blocks = align_records(pairs, scoring, "global", table_bytes=0, block=16)
        assert [(r.score_units, r.ops) for r in blocks] == base
        tiles = align_records(pairs, scoring, "global", use_pallas=True, interpret=True,
                              kernel=kernel, table_bytes=0, block=16)
        assert [(r.score_units, r.ops) for r in tiles] == base
        tiled = align_records(pairs, scoring, "global", score_only=True, use_pallas=True,
                              interpret=True, kernel=kernel, tiled_min_length=1)
        assert [r.score_units for r in tiled] == [s for s, _ in base]


# --------------------------------------------------------------------------- parasail, engines


def test_host_engine_free_end_gaps_is_the_reference():
    """parasail's semi-global values with our traceback (the trailing gap chosen by our tie
    rules): the reference's scores and alignments on tie-heavy pairs; other end penalties and
    local mode go to JAX."""
    pytest.importorskip("parasail")
    from jaxrna.align.host import HostEngine, code_text, supports

    assert not supports(SCHEMES["end penalties"][0], False)
    assert not supports(SCHEMES["end open<extend"][0], False)
    rng = random.Random(35)
    for base, alphabet in ((TIES, "AC"), (from_matrix("NUC.4.4", 10, 0.5), "ACGTN"),
                           (match_mismatch(1, 0, 1, 0), "AC"), (edit_preset(), "ACGU")):
        scoring = with_end_gaps(base, "free")
        assert supports(scoring, False) and not supports(scoring, True)
        pairs = random_pairs(rng, alphabet, 60, 25, 30) + [("AAAA", "CCCC"), ("AC", "CA")]
        codes = [(scoring.encode(a), scoring.encode(b)) for a, b in pairs]
        rc = np.concatenate([a for a, _ in codes]).astype(np.int16)
        cc = np.concatenate([b for _, b in codes]).astype(np.int16)
        r0 = np.concatenate([[0], np.cumsum([len(a) for a, _ in codes])[:-1]])
        c0 = np.concatenate([[0], np.cumsum([len(b) for _, b in codes])[:-1]])
        eng = HostEngine(scoring, False)
        rows, cols = [code_text(a) for a, _ in codes], [code_text(b) for _, b in codes]
        swap = np.zeros(len(pairs), bool)
        score, ei, ej, si, sj, ops, off = eng.align(rows, cols, swap, rc, r0, cc, c0)
        s2 = eng.scores(rows, cols, swap)[0]
        for k, (a, b) in enumerate(pairs):
            r = gotoh(a, b, scoring)
            text = "".join("MID"[o] for o in ops[off[k]:off[k + 1]])
            assert (int(score[k]), int(s2[k]), text) == (r.score, r.score, r.ops), (a, b)


def _write(path, seqs):
    path.write_text("".join(f">s{k}\n{s}\n" for k, s in enumerate(seqs)))
    return str(path)


@pytest.mark.parametrize("engine_name", ["device", "host"])
def test_engine_runs_equal_align_records(tmp_path, engine_name):
    """Whole runs (all pairs and zip, every format, score only) write what
    :func:`align_records` and the object writers write, byte for byte; the pair header names
    the end gaps."""
    if engine_name == "host":
        pytest.importorskip("parasail")
    rng = random.Random(36)
    seqs = lambda k: ["".join(rng.choice("ACG") for _ in range(rng.randint(33, 48)))  # noqa: E731
                      for _ in range(k)]
    q, t = _write(tmp_path / "q.fa", seqs(4)), _write(tmp_path / "t.fa", seqs(4))
    cases = [(SCHEMES["free"][0], False, "pair", False), (make_scoring(end_gaps="free"), False,
             "json", True), (SCHEMES["end penalties"][0], False, "tsv", False),
             (with_end_gaps(TIES, "free"), True, "tsv", False)]
    for scoring, score_only, fmt, zipped in cases:
        qs = list(read_fasta(q, alphabet="letters"))
        ts = list(read_fasta(t, alphabet="letters"))
        todo = list(zip(qs, ts)) if zipped else [(a, b) for a in qs for b in ts]
        ref = io.StringIO()
        WRITERS[fmt](align_records(todo, scoring, "global", score_only), ref)
        job = engine.Job(read_batch(q, "letters"), read_batch(t, "letters"), scoring, False,
                         zipped, score_only)
        out = io.StringIO()
        engine.run(job, fmt, out, backend="cpu", engine=engine_name)
        assert out.getvalue() == ref.getvalue(), (scoring.name, fmt)
        if fmt == "pair":
            assert "\n# End_gaps: free\n" in out.getvalue()
        if fmt == "json":
            assert '"end_gap_open": 0, "end_gap_extend": 0' in out.getvalue()


def test_cli(tmp_path, capsys):
    from jaxrna.cli import main

    q = _write(tmp_path / "q.fa", ["ACGTACGT", "GATTACA"])
    t = _write(tmp_path / "t.fa", ["TTACGTACGTTT", "CCGATTACAGG"])
    assert main(["align", "-q", q, t, "--pairs", "zip", "--end-gaps", "free", "-f", "tsv",
                 "--match", "1", "--mismatch", "-1", "--backend", "cpu"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()[1:]]
    assert [(r[2], r[7]) for r in rows] == [("8", "2D8=2D"), ("7", "2D7=2D")]
    for bad in (["--mode", "local", "--end-gaps", "free"], ["--mode", "local", "--end-open", "1"],
                ["--end-gaps", "free", "--end-extend", "1"],
                ["--preset", "edit", "--end-open", "1"],
                ["--preset", "edit", "--end-gaps", "free"]):    # the last: every cost 0
        assert main(["align", "-q", q, t, *bad]) == 2
        assert "end" in capsys.readouterr().err
    assert main(["align", "-q", q, t, "--posterior", "--end-gaps", "free", "-f", "json",
                 "--pairs", "zip", "--backend", "cpu"]) == 0
    assert '"log_partition"' in capsys.readouterr().out


# --------------------------------------------------------------------------- the partition function


@pytest.mark.slow
def test_partition_function_with_end_gaps():
    """``ln Z`` and the match posteriors with end gaps scored apart: every global alignment
    counted once, each end gap run weighing by the end gap scores (1 when free), as listing
    them all gives; at ``T -> 0`` the max-plus score."""
    import jax.numpy as jnp

    from jaxrna.align import partition as pf
    from jaxrna.align.partition_reference import enumerated

    rng = random.Random(37)
    for name in ("free", "end penalties"):
        scoring = SCHEMES[name][0]
        go, ge = pf.gap_scores(scoring)
        eo, ee = pf.end_gap_scores(scoring)
        for _ in range(4):
            a = "".join(rng.choice("ACGT") for _ in range(rng.randint(1, 4)))
            b = "".join(rng.choice("ACGT") for _ in range(rng.randint(1, 4)))
            S = np.asarray(pf.substitution_scores(scoring.encode(a), scoring.encode(b), scoring),
                           np.float64)
            lz, P, best = enumerated(S, go, ge, local=False, temperature=1.5, eo=eo, ee=ee)
            got_lz, got_P = pf.match_posteriors(a, b, scoring, temperature=1.5)
            assert got_lz == pytest.approx(lz, abs=1e-4) and np.abs(got_P - P).max() < 1e-4
            assert best * scoring.scale == gotoh(a, b, scoring).score
        # max-plus: the optimal score (one longer pair, in integer units)
        a, b = "GATTACAGATTACA", "TTGATCACAGGT"
        Si = pf.substitution_scores(scoring.encode(a), scoring.encode(b), scoring, jnp.int32)
        ie, ix = pf.end_gap_scores(scoring, jnp.int32)
        assert int(pf.forward(Si, scoring.open_score, scoring.extend_score, local=False, eo=ie,
                              ee=ix)) == gotoh(a, b, scoring).score
    # free end gaps: "A" with "ACC" scores 2 (affine 2/-3), at T -> 0 too
    assert pf.log_partition("A", "ACC", match=2, mismatch=-3, gap_open=5, gap_extend=2,
                            end_gaps="free", temperature=0.01) * 0.01 == pytest.approx(2, abs=1e-3)
    with pytest.raises(ValueError, match="no end gaps"):
        pf.log_partition("A", "ACC", mode="local", end_gaps="free")


# --------------------------------------------------------------------------- EMBOSS itself


def _emboss():
    missing = [p for p in ("needle", "water") if shutil.which(p) is None]
    if missing:
        if os.environ.get("JAXRNA_REQUIRE_EMBOSS") == "1":
            pytest.fail(f"JAXRNA_REQUIRE_EMBOSS=1 but {', '.join(missing)} not on PATH")
        pytest.skip("EMBOSS needle/water not installed (Debian: apt-get install emboss)")


def _groups(seed, lo=2, hi=70, count=20):
    """``count`` random DNA queries of 12 to 50 letters, each with 5 targets: a mutated copy
    inside random flanks, a piece of it, an overlap of its end with another sequence's start,
    an unrelated sequence, a copy with an inner insertion; every sequence ``lo`` to ``hi``
    letters (random letters appended, or cut at the end)."""
    rng = random.Random(seed)
    seq = lambda n: "".join(rng.choice("ACGT") for _ in range(n))  # noqa: E731
    mutate = lambda s: "".join(c if rng.random() > 0.12 else rng.choice("ACGT") for c in s)  # noqa: E731
    fit = lambda s: (s + seq(max(0, lo - len(s))))[:hi]  # noqa: E731
    groups = []
    for _ in range(count):
        a = fit(seq(rng.randint(max(12, lo), min(50, hi))))
        cut = rng.randint(2, len(a) - 2)
        targets = [seq(rng.randint(0, 8)) + mutate(a) + seq(rng.randint(0, 8)),
                   mutate(a[rng.randint(0, len(a) // 3):][:rng.randint(2, len(a) // 2 + 2)]),
                   mutate(a[len(a) // 2:]) + seq(rng.randint(2, 20)),
                   seq(rng.randint(2, 40)),
                   mutate(a[:cut]) + seq(rng.randint(3, 12)) + mutate(a[cut:])]
        groups.append((a, [fit(t) for t in targets]))
    return groups


def _pair_blocks(text):
    """``(score, row1, row2, start1, start2)`` of each alignment of a pair-format text."""
    out = []
    for part in text.split("# Aligned_sequences: 2\n")[1:]:
        score = float(part.split("# Score: ", 1)[1].split("\n", 1)[0])
        body = part.split("#=======================================\n\n", 1)[1]
        lines = [ln for ln in body.splitlines() if ln and not ln.startswith("#")]
        rows = [[ln[14:].split() for ln in lines[k::3]] for k in (0, 2)]
        out.append((score, "".join(r[1] for r in rows[0]), "".join(r[1] for r in rows[1]),
                    int(rows[0][0][0]), int(rows[1][0][0])))
    return out


def _ops(r1, r2):
    return "".join("M" if x != "-" and y != "-" else ("I" if y == "-" else "D")
                   for x, y in zip(r1, r2))


# name -> (EMBOSS program and options, jaxrna mode and score options, seed and lengths). The
# case on the JAX path (end penalties of their own; parasail takes the others) has sequences of
# 33 to 48 letters: one padded shape, one compiled program.
CASES = {
    "needle defaults (end gaps free)": (["needle"], ("global", {"end_gaps": "free"}), (41,)),
    "needle -endweight (end gaps as inner gaps)": (["needle", "-endweight"], ("global", {}),
                                                   (42,)),
    "needle -endweight -endopen 5 -endextend 1": (
        ["needle", "-endweight", "-endopen", "5", "-endextend", "1"],
        ("global", {"end_open": 5, "end_extend": 1}), (43, 33, 48)),
    "needle -gapopen 5 -gapextend 2 (end gaps free)": (
        ["needle", "-gapopen", "5", "-gapextend", "2"],
        ("global", {"gap_open": 5, "gap_extend": 2, "end_gaps": "free"}), (44,)),
    "water": (["water"], ("local", {}), (45,)),
}


@pytest.mark.slow
@pytest.mark.external
@pytest.mark.parametrize("case", list(CASES))
def test_scores_and_rows_equal_emboss(case, tmp_path):
    """jaxrna's ``pair`` output against EMBOSS's on 100 random pairs per case (see the module
    docstring): the same scores always; the same rows, byte for byte, on most pairs, and on
    the others EMBOSS's rows are another optimal alignment under jaxrna's model (or, with end
    penalties of their own only, rows that do not score EMBOSS's own score)."""
    _emboss()
    program, (mode, options), shape = CASES[case]
    scoring = make_scoring(**options)
    opts = options if "gap_open" in options else dict(options, gap_open=10, gap_extend=0.5)
    emboss_gaps = ["-gapopen", str(opts["gap_open"]), "-gapextend", str(opts["gap_extend"])]
    groups = _groups(*shape)
    queries, targets, theirs = [], [], []
    for k, (a, ts) in enumerate(groups):
        (tmp_path / "a.fa").write_text(f">q{k}\n{a}\n")
        (tmp_path / "b.fa").write_text("".join(f">t{k}_{x}\n{t}\n" for x, t in enumerate(ts)))
        cmd = [program[0], "-asequence", "a.fa", "-bsequence", "b.fa", *emboss_gaps,
               *program[1:], "-aformat", "pair", "-outfile", "e.pair", "-auto"]
        subprocess.run(cmd, cwd=tmp_path, check=True, capture_output=True, timeout=60)
        theirs += _pair_blocks((tmp_path / "e.pair").read_text())
        queries += [a] * len(ts)
        targets += ts
    q = _write(tmp_path / "q.fa", queries)
    t = _write(tmp_path / "t.fa", targets)
    out = io.StringIO()
    job = engine.Job(read_batch(q, "letters"), read_batch(t, "letters"), scoring,
                     mode == "local", True, False)
    engine.run(job, "pair", out, backend="cpu")
    ours = _pair_blocks(out.getvalue())
    assert len(ours) == len(theirs) == len(queries) == 100
    same = ties = emboss_off = 0
    separate = scoring.separate_end_gaps
    for a, b, mine, emb in zip(queries, targets, ours, theirs):
        assert mine[0] == emb[0], (case, a, b, mine, emb)             # the score
        if mine[1:] == emb[1:]:
            same += 1
            continue
        units = round(emb[0] * scoring.scale)
        qs, ts = emb[3] - 1, emb[4] - 1
        rows = (emb[1], emb[2])
        if mode == "global":
            assert (qs, ts) == (0, 0) and rows[0].replace("-", "") == a
        theirs_rescored = rescore(a, b, scoring, qs, ts, _ops(*rows))
        assert theirs_rescored <= units, (case, a, b, mine, emb)     # ours is the optimum
        if theirs_rescored == units:
            ties += 1                # another alignment of the same score
        else:                        # EMBOSS's rows miss its own (and our) score
            assert separate, (case, a, b, mine, emb)
            emboss_off += 1
        assert rescore(a, b, scoring, mine[3] - 1, mine[4] - 1, _ops(mine[1], mine[2])) == units
    assert same >= 75, (case, same, ties, emboss_off)
    assert emboss_off <= 20, (case, same, ties, emboss_off)
