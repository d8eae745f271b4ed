"""The bulk alignment path of ``jaxrna align``: device tracebacks, the parasail-backed CPU engine,
the array formatters, and the whole engine, each against the reference it replaces."""

import io
import json
import os
import random
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from Bio.Align import PairwiseAligner
from test_align_core import CONFIGS, aligner, check_alignment, encode_batch, random_pairs

from conftest import ROOT
from jaxrna.align import engine
from jaxrna.align.api import align_records
from jaxrna.align.recurrence import params_of
from jaxrna.align.reference import gotoh
from jaxrna.align.scoring import edit_preset, make_scoring, match_mismatch
from jaxrna.align.traceback import SkewedBits, Walk, finish, walk
from jaxrna.formats.align import WRITERS
from jaxrna.align.text import AlignedBatch, file_parts, format_batch
from jaxrna.io.bulk import read_batch
from jaxrna.io.errors import InputError
from jaxrna.io.fasta import read_fasta
from jaxrna.kernels.wavefront import batch_align, batch_sweep, lanes_align

TIES = match_mismatch(1, -1, 1, 1)          # linear gaps, small alphabets: many co-optimal paths


def _asymmetric():
    base = match_mismatch(2, -1, 3, 1)
    mat = base.matrix.copy()
    a, c = base.alphabet.index("A"), base.alphabet.index("C")
    mat[a, c], mat[c, a] = 1, -3
    return replace(base, matrix=mat, equality=False, name="asymmetric")


def _tie_pairs(rng, count, max_q, max_t):
    pairs = random_pairs(rng, "AC", count, max_q, max_t)
    return pairs + [("AAAA", "CCCC"), ("A", "C"), ("ACAC", "CACA")]    # empty local ones too


def _host_ops(scoring, pairs, h, w, local):
    q, t, m, n = encode_batch(scoring, pairs, h, w)
    score, ei, ej, state, dirs = (np.asarray(x) for x in batch_sweep(
        q, t, m, n, params_of(scoring), local=local, equality=scoring.equality, with_dirs=True))
    wk = Walk.start(ei, ej, state, done=(score <= 0) if local else None)
    walk(wk, SkewedBits(dirs), local=local)
    return score, ei, ej, wk.i, wk.j, finish(wk, local=local)


def _ops_text(ops, length):
    return ["".join("MID"[o] for o in row[:k]) for row, k in zip(ops, length)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["global", "local"])
@pytest.mark.parametrize("name", ["ties", "BLOSUM62"])
def test_device_walk_equals_host_walk_and_biopython(mode, name):
    """The on-device walk (:func:`batch_align`) gives the host reference walk's alignments,
    starts and ends; they score what Biopython scores."""
    local = mode == "local"
    if name == "ties":
        scoring, pairs = TIES, _tie_pairs(random.Random(21), 120, 12, 20)
        bio = PairwiseAligner(mode=mode, match_score=1, mismatch_score=-1, open_gap_score=-1,
                              extend_gap_score=-1)
    else:
        scoring, alphabet, _ = CONFIGS[name]
        pairs = random_pairs(random.Random(22), alphabet, 60, 12, 20)
        bio = aligner(name, mode)
    score, ei, ej, si, sj, ops = _host_ops(scoring, pairs, 12, 20, local)
    q, t, m, n = encode_batch(scoring, pairs, 12, 20)
    out = [np.asarray(x) for x in batch_align(q, t, m, n, params_of(scoring), local=local,
                                               equality=scoring.equality)]
    assert _ops_text(out[5], out[6]) == ops
    for a, b in zip((score, ei, ej, si, sj), out[:5]):
        np.testing.assert_array_equal(a, b)
    for k, (a, b) in enumerate(pairs):
        assert float(scoring.to_fraction(int(out[0][k]))) == pytest.approx(bio.score(a, b))
        check_alignment(scoring, a, b, int(out[0][k]), int(out[3][k]), int(out[1][k]),
                        int(out[4][k]), int(out[2][k]), ops[k], local)


@pytest.mark.slow
def test_lanes_align_interpret_equals_batch_align():
    """The Pallas kernel writing direction bits (one pair per lane) and the walk over them,
    in interpret mode on small shapes."""
    rng = random.Random(23)
    pairs = _tie_pairs(rng, 5, 8, 8)
    q, t, m, n = encode_batch(TIES, pairs, 8, 8)
    p = params_of(TIES)
    for local in (False, True):
        want = [np.asarray(x) for x in batch_align(q, t, m, n, p, local=local, equality=True)]
        got = [np.asarray(x) for x in lanes_align(q, t, m, n, p, local=local, equality=True,
                                                   interpret=True, rows=4, lanes=8)]
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b)


def _parasail():
    return pytest.importorskip("parasail")


@pytest.mark.parametrize("mode", ["global", "local"])
def test_host_engine_is_the_reference(mode):
    """parasail's values with our traceback: the reference's scores, ends and alignments on
    tie-heavy pairs, for match/mismatch, matrices (BLOSUM62, NUC.4.4), an asymmetric matrix,
    free gap extension and the edit preset."""
    _parasail()
    from jaxrna.align.host import HostEngine, code_text, supports

    local = mode == "local"
    rng = random.Random(24)
    schemes = [(TIES, "AC"), (match_mismatch(1, -20, 5, 1), "ACG"), (CONFIGS["BLOSUM62"][0],
               "ARND"), (CONFIGS["NUC.4.4"][0], "ACGTN"), (_asymmetric(), "AC"),
               (match_mismatch(1, 0, 1, 0), "AC")]
    if not local:
        schemes.append((edit_preset(), "ACGU"))
    assert not supports(CONFIGS["open<extend"][0], local)
    for scoring, alphabet in schemes:
        assert supports(scoring, local)
        pairs = random_pairs(rng, alphabet, 80, 30, 40) + [("AAAA", "CCCC")]
        eng = HostEngine(scoring, local)
        codes = [(scoring.encode(a), scoring.encode(b)) for a, b in pairs]
        rows = [code_text(a) for a, _ in codes]
        cols = [code_text(b) for _, b in codes]
        rc = np.concatenate([a for a, _ in codes]).astype(np.int16)
        cc = np.concatenate([b for _, b in codes]).astype(np.int16)
        r0 = np.concatenate([[0], np.cumsum([len(a) for a, _ in codes])[:-1]])
        c0 = np.concatenate([[0], np.cumsum([len(b) for _, b in codes])[:-1]])
        swap = np.zeros(len(pairs), bool)
        score, ei, ej, si, sj, ops, off = eng.align(rows, cols, swap, rc, r0, cc, c0)
        s2, e2i, e2j = eng.scores(rows, cols, swap)
        for k, (a, b) in enumerate(pairs):
            r = gotoh(a, b, scoring, local=local)
            text = "".join("MID"[o] for o in ops[off[k]:off[k + 1]])
            got = (int(score[k]), int(si[k]), int(ei[k]), int(sj[k]), int(ej[k]), text)
            assert got == (r.score, r.query_start, r.query_end, r.target_start, r.target_end,
                           r.ops), (scoring.name, a, b)
            assert (int(s2[k]), int(e2i[k]), int(e2j[k])) == (r.score, r.query_end,
                                                              r.target_end)


def _records(path):
    return list(read_fasta(path, alphabet="letters"))


def _write(path, rng, count, lo, hi, alphabet):
    with open(path, "w") as fh:
        for k in range(count):
            seq = "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))
            fh.write(f">r{k} some description\n{seq[:37]}\n{seq[37:]}\n" if len(seq) > 37
                     else f">r{k}\n{seq}\n")
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("engine_name", ["device", "host"])
def test_engine_output_is_the_old_paths(tmp_path, engine_name):
    """Whole runs (all pairs and zip, global and local, every format, score only) write what
    :func:`align_records` and the object writers write, byte for byte: tie rules, the shorter
    sequence on the table's rows, an asymmetric matrix, empty local alignments."""
    if engine_name == "host":
        _parasail()
    rng = random.Random(25)
    q = _write(tmp_path / "q.fa", rng, 5, 33, 48, "ACG")     # one length bucket: few programs
    t = _write(tmp_path / "t.fa", rng, 4, 33, 48, "ACG")
    z = _write(tmp_path / "z.fa", rng, 5, 33, 48, "ACG")
    cases = [("global", make_scoring(), False, "pair", t),
             ("local", TIES, False, "tsv", t),
             ("local", _asymmetric(), False, "json", z),
             ("global", _asymmetric(), True, "tsv", t),
             ("local", make_scoring(2, -3, None, 5, 2), True, "json", t)]
    for mode, scoring, score_only, fmt, targets in cases:
        qs, ts = _records(q), _records(targets)
        zipped = targets == z
        todo = list(zip(qs, ts)) if zipped else [(a, b) for a in qs for b in ts]
        ref = io.StringIO()
        WRITERS[fmt](align_records(todo, scoring, mode, score_only), ref)
        job = engine.Job(read_batch(q, "letters"), read_batch(targets, "letters"), scoring,
                         mode == "local", zipped, score_only)
        out = io.StringIO()
        assert engine.run(job, fmt, out, backend="cpu", engine=engine_name) == len(todo)
        assert out.getvalue() == ref.getvalue(), (mode, scoring.name, score_only, fmt, zipped)


def _reference_alignments(qs, ts, scoring, local, score_only):
    """Alignments as the API reports them, from the plain-Python reference (no JAX)."""
    from jaxrna.align.api import Alignment

    out = []
    for qk, a in enumerate(qs):
        for tk, b in enumerate(ts):
            r = gotoh(a, b, scoring, local=local)
            start = 0 if not local or r.score <= 0 else (None if score_only else r.query_start)
            tstart = 0 if not local or r.score <= 0 else (None if score_only else r.target_start)
            out.append(Alignment(f"query{qk + 1}", f"target{tk + 1}", r.score,
                                 "local" if local else "global", start, r.query_end, tstart,
                                 r.target_end, None if score_only else r.ops, a, b, scoring))
    return out


def test_engine_lanes_path_interpret(tmp_path):
    """The GPU plan (one square shape, the Pallas lane kernel writing direction bits, pairs
    with the longer query turned round, an asymmetric matrix), in interpret mode."""
    rng = random.Random(29)
    q = _write(tmp_path / "q.fa", rng, 3, 1, 14, "AC")
    t = _write(tmp_path / "t.fa", rng, 3, 1, 14, "AC")
    scoring = _asymmetric()
    qs, ts = _records(q), _records(t)
    ref = io.StringIO()
    WRITERS["tsv"](align_records([(a, b) for a in qs for b in ts], scoring, "local"), ref)
    job = engine.Job(read_batch(q, "letters"), read_batch(t, "letters"), scoring, True, False,
                     False)
    out = io.StringIO()
    engine.run(job, "tsv", out, backend="cpu", engine="device", interpret=True,
               kernel={"rows": 4, "lanes": 8, "min_side": 16})
    assert out.getvalue() == ref.getvalue()


def test_bulk_formats_equal_the_writers():
    rng = random.Random(26)
    seq = lambda n: "".join(rng.choice("ACGT") for _ in range(n))  # noqa: E731
    qs = [seq(rng.randint(1, 120)) for _ in range(4)] + ["AAAA", "ACGTTGCA" * 14]
    ts = [seq(rng.randint(1, 120)) for _ in range(3)] + ["CCCC", "T"]
    for local, scoring in [(False, make_scoring()), (False, edit_preset()),
                           (True, make_scoring(1, -1, None, 1, 0.5))]:
        mode = "local" if local else "global"
        for score_only in (False, True):
            alns = _reference_alignments(qs, ts, scoring, local, score_only)
            b = AlignedBatch.from_alignments(alns)
            for fmt in ("tsv", "pair", "json"):
                if fmt == "pair" and score_only:
                    continue
                ref = io.StringIO()
                WRITERS[fmt](alns, ref)
                head, tail = file_parts(fmt, mode, scoring, len(alns))
                half = len(alns) // 2        # two batches: the json separators
                text = head + format_batch(_part(b, 0, half), fmt, True) + \
                    format_batch(_part(b, half, len(alns)), fmt, False) + tail
                assert text == ref.getvalue(), (mode, scoring.name, score_only, fmt)


def test_pair_format_with_long_and_non_ascii_names():
    """The pair format's blocks are built as bytes for ASCII names and line by line otherwise:
    both give the writer's text (names cut to 13 characters, not bytes)."""
    rng = random.Random(31)
    seq = lambda n: "".join(rng.choice("ACGU") for _ in range(n))  # noqa: E731
    qs, ts = [seq(130), seq(7)], [seq(120), seq(1)]
    scoring = make_scoring(1, -1, None, 1, 0.5)
    for names in (("a_name_longer_than_13", "t"), ("ärger_über_ñandú_long", "ß")):
        alns = [replace(a, query_id=names[0] + a.query_id, target_id=names[1] + a.target_id)
                for a in _reference_alignments(qs, ts, scoring, True, False)]
        ref = io.StringIO()
        WRITERS["pair"](alns, ref)
        head, tail = file_parts("pair", "local", scoring, len(alns))
        text = head + format_batch(AlignedBatch.from_alignments(alns), "pair", True) + tail
        assert text == ref.getvalue(), names
        assert text.count("\n\n") > 8


def _part(b, a, z):
    from jaxrna.align.engine import _slice

    return _slice(b, a, z)


def test_errors_and_pairing(tmp_path):
    """Located letter errors of a record in the middle of a file; zip files of unequal
    length; the first failing pair in order wins."""
    rng = random.Random(27)
    q = _write(tmp_path / "q.fa", rng, 4, 5, 20, "ACGT")
    t = tmp_path / "t.fa"
    t.write_text(">a\nACGT\n>b\nACGT\n>c\nAC\nGJT\n>d\nAC\n")
    blosum = make_scoring(matrix="BLOSUM62")
    job = engine.Job(read_batch(q, "letters"), read_batch(t, "letters"), blosum, False, False,
                     False)
    with pytest.raises(InputError) as err:
        engine.run(job, "tsv", io.StringIO(), backend="cpu")
    assert str(err.value) == (f"{t}:5: record 'c': letter 'J' at position 4 is not in the "
                              "alphabet of BLOSUM62 (ARNDCQEGHILKMFPSTWYVBZX*)")

    from jaxrna.cli.align import read_inputs

    class Args:
        pairs = "zip"
        queries = _write(tmp_path / "q5.fa", rng, 5, 5, 9, "ACGT")
        targets = str(t)

    t.write_text("".join(f">x{k}\nACGT\n" for k in range(4)))
    with pytest.raises(InputError) as err:
        read_inputs(Args)
    assert str(err.value) == f"--pairs zip: {Args.queries} has more records than {t} (after 4 pairs)"
    t.write_text(">x0\nACGT\n>x1\nAC-GT\n")    # the target's error comes first (pair 2)
    with pytest.raises(InputError, match="is not a letter"):
        read_inputs(Args)


@pytest.mark.slow
def test_warm_run_compiles_nothing(tmp_path):
    """A second ``jaxrna align`` process sharing the compilation cache loads every program:
    stages' ``compiled`` count is 0 (the first run's is not), on the JAX path."""
    rng = random.Random(28)
    q = _write(tmp_path / "q.fa", rng, 6, 20, 70, "ACGU")
    t = _write(tmp_path / "t.fa", rng, 5, 20, 90, "ACGU")
    cache = tmp_path / "cache"
    counts, outs = [], []
    for k in range(2):
        profile = tmp_path / f"profile{k}.json"
        out = tmp_path / f"out{k}.txt"
        env = dict(os.environ, PYTHONPATH=ROOT, JAXRNA_CACHE_DIR=str(cache),
                   JAXRNA_PROFILE=str(profile), JAXRNA_ALIGN_ENGINE="device")
        proc = subprocess.run([sys.executable, "-m", "jaxrna", "align", q, t, "--mode", "local",
                               "--backend", "cpu", "-q", "-o", str(out)], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        counts.append(json.loads(profile.read_text())["counts"])
        outs.append(out.read_text())
    assert counts[0]["compiled"] > 0
    assert counts[1]["compiled"] == 0, counts
    assert counts[1]["programs"] == counts[0]["programs"]
    assert outs[0] == outs[1] and outs[0].count("# Aligned_sequences: 2") == 30


def test_kernels_import_no_algorithm_package():
    """``jaxrna/kernels`` is the lowest layer: no module of it imports an algorithm package
    (``jaxrna.align``, ``fold``, ``interact``, ``targets``), at any level of the module."""
    import ast

    kernels = os.path.join(ROOT, "jaxrna", "kernels")
    banned = ("jaxrna.align", "jaxrna.fold", "jaxrna.interact", "jaxrna.targets")
    for name in sorted(os.listdir(kernels)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(kernels, name)) as fh:
            tree = ast.parse(fh.read())
        for node in ast.walk(tree):
            mods = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for mod in mods:
                assert not mod.startswith(banned), f"jaxrna/kernels/{name} imports {mod}"
