"""Issue 26 for ``jaxrna fold`` (Nussinov): a run compiles a few fixed programs, whatever its
lengths and numeric options (counted in whole processes, :mod:`compile_count`)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from compile_count import run_counted, warm_counted

JAX_ENGINE = {"JAXRNA_FOLD_HOST_WORK": "0"}        # JAX's CPU, not the NumPy engine


def _fasta(path, count, lo, hi, seed):
    rng = random.Random(seed)
    with open(path, "w") as fh:
        for k in range(count):
            n = rng.randint(lo, hi)
            fh.write(f">r{k}\n{''.join(rng.choice('ACGU') for _ in range(n))}\n")
    return str(path)


def test_plan_bound_up_to_10000_nt():
    """Any length mix up to 10,240 nt: at most 8 batch shapes (one per class, fixed rows)."""
    from jaxrna.batching import length_class_ladder
    from jaxrna.fold.plan import plan_batches

    assert len(length_class_ladder(10_000)) == len(length_class_ladder(10_240)) == 8
    rng = np.random.default_rng(0)
    for _ in range(5):
        lengths = rng.integers(1, 10_241, 3000)
        shapes = {(p, cap) for p, cap, _ in plan_batches(lengths, np.arange(len(lengths)),
                                                         "cpu", None)}
        assert len(shapes) <= 8 and len({p for p, _ in shapes}) == len(shapes)


def test_gpu_batch_shapes_do_not_depend_on_the_counts():
    """On a GPU too, a batch's rows are its class's fixed count whatever the number of
    sequences (a job of 3 and one of 3,000 use the same programs), and they are the shapes
    ``jaxrna warmup fold`` compiles: a run after the warm-up compiles nothing."""
    from jaxrna.fold import warmup
    from jaxrna.fold.api import GPU_PACKED_ABOVE, _Folder
    from jaxrna.fold.plan import batch_cap, plan_batches

    warmed = {(batch_cap(p, "gpu"), p) for p in warmup.classes("gpu", GPU_PACKED_ABOVE)}
    rng = np.random.default_rng(7)
    seen = {}
    for count in (1, 2, 3, 17, 300, 3000):
        lengths = rng.integers(1, GPU_PACKED_ABOVE + 1, count)
        for padded, cap, group in plan_batches(lengths, np.arange(count), "gpu", None):
            rows = _Folder.rows(None, len(group), cap)
            assert len(group) <= rows
            assert (rows, padded) in warmed
            assert seen.setdefault(padded, rows) == rows     # one row count per class
    # longer sequences: one packed program per class of packed_length, 8 programs in all
    from jaxrna.fold.api import packed_length

    packed = warmup.packed_lengths(10_240)
    assert len(warmed) + len(packed) == 8
    for n in rng.integers(GPU_PACKED_ABOVE + 1, 10_241, 500).tolist():
        assert n <= packed_length(n) in packed


@pytest.mark.slow
def test_warm_then_runs_compile_one_program_per_new_class(tmp_path):
    """``warm`` up to 200 nt prepares class 256's program, with structures and score-only;
    then each run compiles exactly one program per class it meets that nothing prepared (class
    512, then 1,024 with other options), score-only runs their own (class 512's score-only
    program compiled beside the one with structures), and runs of other lengths and options in
    prepared classes nothing. (One cache, each program compiled once: three tests compiled
    the programs of classes 256 and 512 cold and after a warm-up, nine compilations instead
    of five, CI time.)"""
    cache = str(tmp_path / "cache")
    assert warm_counted("fold", cache, backend="cpu", max_length=200) == 1
    assert warm_counted("fold", cache, backend="cpu", max_length=200, score_only=True) == 1
    a = _fasta(tmp_path / "a.fa", 30, 20, 500, 1)                 # classes 256 and 512
    b = _fasta(tmp_path / "b.fa", 25, 5, 900, 2)                  # and 1,024
    first = run_counted(["fold", "--model", "nussinov", a, "--backend", "cpu"], cache, env=JAX_ENGINE)
    assert first.returncode == 0, first.stderr
    assert first.compiled == 1, first.counts                     # class 512 (256: warmed)
    scores = run_counted(["fold", "--model", "nussinov", a, "--backend", "cpu", "--score-only", "-f", "tsv"],
                         cache, env=JAX_ENGINE)
    assert scores.returncode == 0 and scores.compiled == 1, scores.counts   # its own 512
    second = run_counted(["fold", "--model", "nussinov", b, "--backend", "cpu", "--weights", "integer",
                          "--min-loop", "2", "-f", "ct"], cache, env=JAX_ENGINE)
    assert second.returncode == 0, second.stderr
    assert second.compiled == 1                                  # only the new class 1024
    c = _fasta(tmp_path / "c.fa", 20, 30, 480, 4)
    scores = run_counted(["fold", "--model", "nussinov", c, "--backend", "cpu", "--score-only", "-f", "json",
                          "--min-loop", "1", "--weights", "bpmax"], cache, env=JAX_ENGINE)
    assert scores.returncode == 0 and scores.compiled == 0, scores.counts
    third = run_counted(["fold", "--model", "nussinov", a, b, "--backend", "cpu", "--weights", "GC=3,AU=2,GU=0.5",
                         "--min-loop", "0"], cache, env=JAX_ENGINE)
    assert third.returncode == 0 and third.compiled == 0, third.counts
    # the same structures as the NumPy engine (no JAX)
    host = run_counted(["fold", "--model", "nussinov", a, b, "--backend", "cpu", "--weights", "GC=3,AU=2,GU=0.5",
                        "--min-loop", "0"], str(tmp_path / "c2"),
                       env={"JAXRNA_FOLD_HOST_WORK": "1e15"})
    assert host.returncode == 0 and host.stdout == third.stdout
    assert host.counts.get("compiled", 0) == 0


@pytest.mark.slow
def test_partition_options_are_runtime_values(tmp_path):
    cache = str(tmp_path / "cache")
    assert warm_counted("fold", cache, backend="cpu", max_length=40, partition=True) == 1
    # (the 80-nt class)
    seqs = ">x\nGGGAAAUCCCGCGCAAAGCGCAUAUGGC\n>y\nGCGCAAAGCGCAUAUGG\n"
    for extra in ([], ["--temperature", "2", "--min-loop", "1", "--weights", "integer"]):
        run = run_counted(["fold", "--model", "nussinov", "-", "--partition", "-f", "json", *extra], cache, stdin=seqs)
        assert run.returncode == 0, run.stderr
        assert run.compiled == 0, run.counts
