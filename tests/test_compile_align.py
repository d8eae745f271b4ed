"""Issue 26 for ``jaxrna align``'s JAX path: a run compiles the few programs of its length
classes (:mod:`jaxrna.align.classes`), once; other data and other scores reuse them.

The runs force the JAX path (``JAXRNA_ALIGN_ENGINE=device``: on a CPU with parasail the CLI
would not compile anything) and count whole processes (:func:`compile_count.run_counted`).
"""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from compile_count import ROOT, run_counted

from jaxrna.align import classes as cl
from jaxrna.align import warmup

DEVICE = {"JAXRNA_ALIGN_ENGINE": "device"}


def _fasta(path, lengths, seed, letters="ACGT"):
    rng = random.Random(seed)
    with open(path, "w") as fh:
        for k, n in enumerate(lengths):
            fh.write(f">r{k}\n{''.join(rng.choice(letters) for _ in range(n))}\n")
    return str(path)


def test_class_bounds_up_to_10000_nt():
    """The documented bounds: any mix of pairs up to 10,240 nt meets at most 8 classes scoring
    only (each with an int16 variant at most) and 12 with alignments; every pair of lengths
    lands in one of them, lanes >= its shorter side, width >= its longer side."""
    assert len(warmup.classes(10_000, alignments=False)) <= 8
    assert len(warmup.classes(10_000, alignments=True)) <= 12
    assert len(warmup._small_pairs(10_000)) <= 8
    rng = np.random.default_rng(26)
    a, b = rng.integers(1, 10_241, 5000), rng.integers(1, 10_241, 5000)
    short, long_ = np.minimum(a, b), np.maximum(a, b)
    for score_only in (True, False):
        h, w = cl.cpu_class(short, long_, score_only)
        assert (h >= short).all() and (w >= long_).all() and (w >= h).all()
        seen = set(zip(h.tolist(), w.tolist()))
        assert seen <= set(warmup.classes(10_240, alignments=not score_only))
        assert len(seen) <= (8 if score_only else 12)
        for hh, ww in seen:                      # a class's rows are fixed, its bits bounded
            rows = cl.cpu_rows(hh, ww, score_only)
            assert rows >= 1 and rows & (rows - 1) == 0
            assert score_only or rows == 1 or rows * (hh + ww) * hh <= cl.DIRS_BUDGET


@pytest.mark.slow
def test_second_run_other_mix_other_scores_compiles_nothing(tmp_path):
    """Alignments (global): a first run over a mix of lengths up to 700 nt compiles at most one
    program per class it meets; a second run over other lengths, all pairs instead of zip,
    with other scores and gap penalties, compiles nothing, and its alignments are those of a
    run in a fresh cache."""
    cache = str(tmp_path / "cache")
    rng = random.Random(5)
    reps = warmup._pairs(700, alignments=True)          # one pair of every class up to 700
    extra = [(rng.randint(1, 700), rng.randint(1, 700)) for _ in range(14)]
    q = _fasta(tmp_path / "q.fa", [a for a, _ in reps + extra], 1)
    t = _fasta(tmp_path / "t.fa", [b for _, b in reps + extra], 2)
    first = run_counted(["align", q, t, "--pairs", "zip", "-f", "tsv", "-q"], cache, env=DEVICE)
    assert first.returncode == 0, first.stderr
    assert 0 < first.compiled <= len(warmup.classes(700, alignments=True))
    q2 = _fasta(tmp_path / "q2.fa", [rng.randint(1, 700) for _ in range(6)], 3)
    t2 = _fasta(tmp_path / "t2.fa", [rng.randint(1, 700) for _ in range(5)], 4)
    args = ["align", q2, t2, "--match", "2", "--mismatch", "-3", "--gap-open", "5",
            "--gap-extend", "2", "-f", "tsv", "-q"]
    second = run_counted(args, cache, env=DEVICE)
    assert second.returncode == 0, second.stderr
    assert second.compiled == 0, second.counts
    fresh = run_counted(args, str(tmp_path / "fresh"), env=DEVICE)
    assert fresh.stdout == second.stdout and second.stdout.count("\n") == 31


def _warm(tmp_path, cache, call):
    env = dict(os.environ, JAXRNA_CACHE_DIR=cache, JAX_PLATFORMS="cpu", **DEVICE,
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", f"from jaxrna.align.warmup import warm; "
                           f"print(warm({call}))"], env=env, capture_output=True, text=True,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout.split()[-1])


@pytest.mark.slow
def test_warm_then_any_data_and_scores_compile_nothing(tmp_path):
    """Score only, global with end gaps of their own (semi-global): after ``warm`` in one
    process, CLI runs in others on new data with any scores and end gap penalties (int16 or
    int32 batches alike) compile nothing."""
    cache = str(tmp_path / "cache")
    prepared = _warm(tmp_path, cache, "'cpu', 700, mode='semi-global', alignments=False")
    assert prepared == len(warmup.classes(700, alignments=False)) + len(warmup._small_pairs(700))
    rng = random.Random(9)
    q = _fasta(tmp_path / "q.fa", [rng.randint(1, 700) for _ in range(12)], 5)
    t = _fasta(tmp_path / "t.fa", [rng.randint(1, 700) for _ in range(12)], 6)
    for extra in (["--end-open", "3", "--end-extend", "1"],
                  ["--match", "1", "--mismatch", "-1", "--gap-open", "1", "--gap-extend", "1",
                   "--end-gaps", "free"],
                  ["--match", "90", "--mismatch", "-70", "--gap-open", "200", "--end-open",
                   "0.5"]):
        r = run_counted(["align", q, t, "--pairs", "zip", "--score-only", "-f", "tsv", "-q",
                         *extra], cache, env=DEVICE)
        assert r.returncode == 0, r.stderr
        assert r.compiled == 0, (extra, r.counts)
        assert r.stdout.count("\n") == 13


@pytest.mark.slow
def test_warm_local_alignments_then_cli_compiles_nothing(tmp_path):
    """Local alignments: ``warm`` prepares one program per class; a CLI run on new data with
    other scores compiles nothing."""
    cache = str(tmp_path / "cache")
    prepared = _warm(tmp_path, cache, "'cpu', 300, mode='local'")
    assert prepared == len(warmup.classes(300, alignments=True))
    rng = random.Random(3)
    q = _fasta(tmp_path / "q.fa", [rng.randint(1, 300) for _ in range(5)], 7)
    t = _fasta(tmp_path / "t.fa", [rng.randint(1, 300) for _ in range(4)], 8)
    r = run_counted(["align", q, t, "--mode", "local", "--match", "2", "--mismatch", "-1",
                     "--gap-open", "3", "--gap-extend", "1", "-q"], cache, env=DEVICE)
    assert r.returncode == 0, r.stderr
    assert r.compiled == 0, r.counts


SMALL_SCORES = ["--match", "1", "--mismatch", "-1", "--gap-open", "1", "--gap-extend", "1"]


def _plan_of(q, t, score_only, scoring, zip_pairs=True):
    """The run's plan (:mod:`jaxrna.align.budget`) for FASTA files ``q``, ``t``, computed in
    this process without compiling."""
    from jaxrna.align import engine
    from jaxrna.io.bulk import read_batch

    job = engine.Job(read_batch(q), read_batch(t), scoring, False, zip_pairs, score_only)
    return engine.DeviceRunner(job, "cpu").run_plan


@pytest.mark.slow
def test_adversarial_score_mix_compiles_at_most_8_then_nothing(tmp_path):
    """Score only, |scores| = 1 (int16 fits every lanes class up to 4,096): batches of every
    CPU class up to 10,240 nt in both variants (15 programs before the budget) compile at
    most 8; a second run over another mix, all pairs, other scores (int32 only), compiles
    nothing."""
    from jaxrna.align.scoring import make_scoring

    cache = str(tmp_path / "cache")
    # per lanes class up to 4,096: a batch (its fixed rows) of its shortest pairs, int16, and
    # a batch with one pair of 10,240 nt, int32; and one pair of the last class
    lows = [1] + [h + 1 for h in cl.CPU_LANES[:-1]]
    pairs = [p for h, lo in zip(cl.CPU_LANES[:-1], lows)
             for p in [(lo, lo)] * (cl.cpu_rows(h, 10_240, True) + 1) + [(h, 10_240)]]
    pairs.append((10_240, 10_240))
    q = _fasta(tmp_path / "q.fa", [a for a, _ in pairs], 11)
    t = _fasta(tmp_path / "t.fa", [b for _, b in pairs], 12)
    small = make_scoring(1, -1, None, 1, 1)
    plan = _plan_of(q, t, True, small)
    assert plan.possible == 15 and len(plan.programs) <= 8
    first = run_counted(["align", q, t, "--pairs", "zip", "--score-only", "-f", "tsv", "-q",
                         *SMALL_SCORES], cache, env=DEVICE)
    assert first.returncode == 0, first.stderr
    assert 0 < first.compiled <= 8, first.counts
    assert first.stdout.count("\n") == len(pairs) + 1
    if importlib.util.find_spec("parasail"):  # the host engine's bytes (no JAX)
        host = run_counted(["align", q, t, "--pairs", "zip", "--score-only", "-f", "tsv", "-q",
                            *SMALL_SCORES], cache, env={"JAXRNA_ALIGN_ENGINE": "host"})
        assert host.stdout == first.stdout
    # lengths in the classes run 1 served in int32: any pair of them meets only those
    rng = random.Random(12)
    lanes = [h for kind, h, w, s in plan.programs if not s]
    low = dict(zip(cl.CPU_LANES, lows))
    ql = [rng.randint(low[h], h) for h in lanes for _ in range(2)]
    tl = [rng.randint(low[h], h) for h in lanes]
    q2, t2 = _fasta(tmp_path / "q2.fa", ql, 13), _fasta(tmp_path / "t2.fa", tl, 14)
    second = run_counted(["align", q2, t2, "--score-only", "-f", "tsv", "-q", "--match", "90",
                          "--mismatch", "-70", "--gap-open", "200", "--gap-extend", "3"],
                         cache, env=DEVICE)
    assert second.returncode == 0, second.stderr
    assert second.compiled == 0, second.counts
    assert second.stdout.count("\n") == len(ql) * len(tl) + 1


@pytest.mark.slow
def test_adversarial_alignment_mix_compiles_at_most_8(tmp_path):
    """With alignments: a pair of every CPU class up to 4,096 nt (10 classes before the
    budget) compiles at most 8 programs, and its alignments are the host engine's (parasail,
    where installed: the same bytes as the JAX path, tests/test_align_cpu_engine.py); then
    warm-up prepares all 10 (in runs within the budget) and another mix with other scores
    compiles nothing."""
    cache = str(tmp_path / "cache")
    pairs = warmup._pairs(4096, alignments=True)
    assert len(pairs) == len(warmup.classes(4096, alignments=True)) == 10
    q = _fasta(tmp_path / "q.fa", [a for a, _ in pairs], 15)
    t = _fasta(tmp_path / "t.fa", [b for _, b in pairs], 16)
    first = run_counted(["align", q, t, "--pairs", "zip", "-f", "tsv", "-q"], cache, env=DEVICE)
    assert first.returncode == 0, first.stderr
    assert 0 < first.compiled <= 8, first.counts
    assert first.stdout.count("\n") == len(pairs) + 1
    pytest.importorskip("parasail")
    if importlib.util.find_spec("parasail"):
        host = run_counted(["align", q, t, "--pairs", "zip", "-f", "tsv", "-q"], cache,
                           env={"JAXRNA_ALIGN_ENGINE": "host"})
        assert host.returncode == 0 and host.stdout == first.stdout
    assert _warm(tmp_path, cache, "'cpu', 4096, mode='global'") == 10
    rng = random.Random(19)
    q2 = _fasta(tmp_path / "q2.fa", [rng.randint(1, 4096) for _ in range(7)], 20)
    t2 = _fasta(tmp_path / "t2.fa", [rng.randint(1, 4096) for _ in range(3)] + [1, 4096], 21)
    second = run_counted(["align", q2, t2, "-f", "tsv", "-q", *SMALL_SCORES], cache, env=DEVICE)
    assert second.returncode == 0, second.stderr
    assert second.compiled == 0, second.counts


def test_the_checkpointed_traceback_compiles_only_its_programs(caplog):
    """A long pair's checkpointed traceback on the CPU (table borders built on the host, inputs
    passed as NumPy values) compiles its two programs and no eager ones."""
    import logging
    import random
    import re

    import jax

    from jaxrna.align.api import align_records
    from jaxrna.align.scoring import match_mismatch
    from jaxrna.io.fasta import Record

    rng = random.Random(9)
    seq = lambda n: "".join(rng.choice("ACGU") for _ in range(n))  # noqa: E731
    pairs = [(Record("q", seq(150)), Record("t", seq(170)))]
    jax.config.update("jax_log_compiles", True)
    try:
        with caplog.at_level(logging.WARNING, logger="jax"):
            got = [r.score_units for mode in ("global", "local") for r in
                   align_records(pairs, match_mismatch(2, -3, 5, 2), mode, table_bytes=0,
                                 block=32)]
    finally:
        jax.config.update("jax_log_compiles", False)
    names = set(re.findall(r"Compiling (\S+)", caplog.text))
    assert names <= {"jit(_checkpoint_sweep)", "jit(block_dirs)"}, names
    from jaxrna.align.reference import gotoh
    assert got == [gotoh(pairs[0][0].sequence, pairs[0][1].sequence,
                         match_mismatch(2, -3, 5, 2), local).score for local in (False, True)]
