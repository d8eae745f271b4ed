"""Issue 26 for ``jaxrna fold --partition`` (Nussinov): a run compiles at most 8 programs, one
per length class met (:data:`jaxrna.fold.partition.CLASSES`), whatever the lengths inside the
classes, the weights, the temperature and ``min_loop``; ``jaxrna warmup fold --partition``
prepares exactly those programs. Padding a sequence to its class (code 4, never pairs) changes
neither ``ln Z`` nor a probability (checked against the unpadded program and the McCaskill
reference, float64)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from compile_count import run_counted, warm_counted, write_fasta
from jaxrna import programs
from jaxrna.alphabet import encode
from jaxrna.fold import partition as pt
from jaxrna.fold import warmup
from jaxrna.fold.partition_reference import reference_partition
from jaxrna.weights import parse_weights


def _static(n: int, platform: str) -> tuple:
    padded = pt.padded_length(n)
    method = pt.check_method("auto", n)
    return padded, tuple(sorted(pt.solve_static(method, pt.default_tile(padded),
                                                platform).items()))


@pytest.mark.parametrize("platform", ["cpu", "gpu"])
def test_bound_for_every_length_up_to_10240(platform):
    """Every length 2 .. 10,240 nt maps to one of 8 programs (class, path, tile, loop shape),
    the same set ``warmup`` prepares; every class holds its lengths and takes one path."""
    seen = {}
    for n in range(2, 10_241):
        padded, static = _static(n, platform)
        assert n <= padded
        assert dict(static)["method"] == pt.class_method(padded)
        assert seen.setdefault(padded, static) == static            # one program per class
    assert len(seen) == 8
    assert sorted(seen) == list(pt.CLASSES) == warmup.partition_lengths(10_240)
    assert warmup.partition_lengths(300) == [80, 128, 512]
    assert _static(10_241, platform)[0] == 12_288                   # then one per 4,096 nt


class _Asked(Exception):
    pass


def test_warmup_prepares_exactly_the_programs_a_run_asks_for(monkeypatch):
    """The program keys (name, argument shapes and dtypes, static arguments, device) that
    ``warm(partition=True)`` prepares are those ``partition`` asks for, for any length and
    numeric options (recorded, nothing compiled)."""
    keys = []

    def record(name, jitted, args, static=None, device=None, **kw):
        keys.append(programs.program_key(name, args, static or {}, device))
        return None

    monkeypatch.setattr(programs, "program", record)
    # the default backend: the one ``partition`` runs on (its loop shapes differ on a GPU)
    assert warmup.warm("auto", max_length=10_240, partition=True) == 8
    warmed = set(keys)
    assert len(warmed) == 8

    def asking(*args, **kwargs):
        record(*args, **kwargs)
        raise _Asked

    monkeypatch.setattr(programs, "program", asking)
    rng = random.Random(5)
    lengths = [2, 3, 80, 81, 128, 129, 512, 513, 1000, 2049, 6144, 6145, 10_240]
    lengths += [rng.randint(2, 10_240) for _ in range(30)]
    for n in lengths:
        keys.clear()
        seq = "".join(rng.choice("ACGU") for _ in range(n))
        with pytest.raises(_Asked):
            pt.partition(seq, rng.choice(["unit", "bpmax", "GC=3,AU=2,GU=0.5"]),
                         rng.randint(0, 5), rng.choice([0.3, 1.0, 2.5]))
        assert len(keys) == 1 and keys[0] in warmed, n


def _solve(codes, n, padded, weights, T, min_loop, method, tile=None, platform="cpu"):
    """``(ln Z, P)`` of the first ``n`` codes padded to ``padded`` by one direct call of
    :func:`jaxrna.fold.partition.solve_jit`'s program (with the loop shapes ``platform``
    uses), through jaxrna's program store as :func:`jaxrna.fold.partition.partition` calls
    it: with the CPU's loop shapes, the programs of classes 80, 128 and 512 (tile 16) are the
    ones the string API asks for, compiled once for this module (CI time)."""
    import jax

    full = np.full(padded, 4, np.int32)
    full[:n] = codes[:n]
    wm = np.asarray(weights.matrix(), np.float64) / weights.scale
    static = pt.solve_static(method, tile or pt.default_tile(padded), platform)
    args = (full, wm, np.asarray(T, np.float64), np.asarray(min_loop, np.int32),
            np.asarray(n, np.int32))
    device = programs.default_device()          # where partition() runs it
    run = programs.program("fold.partition", pt.solve_jit, args, static, device)
    lnz, P, _ = run(*jax.device_put(args, device))
    return float(lnz), np.triu(np.asarray(P)[:n, :n], 1)


@pytest.mark.slow
@pytest.mark.parametrize("method,n,classes,platform", [
    ("exact", 37, (37, 80, 128), "cpu"),
    ("blocked", 100, (100, 512), "cpu"),              # tiles 4 at a time
    ("blocked", 100, (100, 512), "gpu")])             # every tile of the class in one step
def test_padding_changes_nothing(method, n, classes, platform):
    """A sequence padded to its class, or to a larger one, has the ``ln Z`` and probabilities
    of the unpadded program and of McCaskill's reference, within 1e-9 (float64); the program
    runs to the sequence's own length whatever the padding (the GPU's loop shapes computed on
    the CPU). The blocked path pads 100 nt to the class 512 (32 tiles; a padding to 256, no
    class of a run, was one more compilation of the same path, CI time)."""
    rng = random.Random(f"{method}-{n}")
    seq = "".join(rng.choice("ACGUN") for _ in range(n))
    weights, T, min_loop = parse_weights("GC=2.5,AU=2,GU=0.5"), 1.7, 2
    ref_lnz, ref_P = reference_partition(seq, weights, min_loop, T)
    codes = encode(seq).astype(np.int32)
    with pt.float64():
        results = [_solve(codes, n, padded, weights, T, min_loop, method, 16, platform)
                   for padded in classes]
    base_lnz, base_P = results[0]                                   # no padding
    for lnz, P in results:
        assert abs(lnz - base_lnz) <= 1e-9 * abs(base_lnz)
        assert abs(lnz - ref_lnz) <= 1e-9 * abs(ref_lnz)
        assert np.allclose(P, base_P, rtol=1e-9, atol=1e-12)
        assert np.allclose(P, np.triu(ref_P, 1), rtol=1e-9, atol=1e-12)
    assert base_P.max() > 0.1                                        # pairs are there


@pytest.mark.slow
def test_partition_by_class_equals_the_reference():
    """The string API (classes 80, 128, 512; lengths on both sides of each boundary) against
    McCaskill's reference, with several weights, temperatures and ``min_loop`` (it runs the
    programs the padding test above compiled: the same keys, counted below)."""
    from jaxrna import stages

    before = stages.counts().get("executables_compiled", 0)
    rng = random.Random(26)
    for n in (2, 5, 80, 81, 100, 128, 129, 200, 300):
        seq = "".join(rng.choice("ACGU") for _ in range(n))
        w = parse_weights(rng.choice(["unit", "bpmax", "integer", "GC=3,AU=2,GU=0.5"]))
        T, ml = rng.choice([0.5, 1.0, 2.0]), rng.randint(0, 4)
        r = pt.partition(seq, w, ml, T)
        lnz, P = reference_partition(seq, w, ml, T)
        assert r.method == ("exact" if n <= 128 else "blocked")
        assert abs(r.log_partition - lnz) <= 1e-9 * max(1.0, abs(lnz)), n
        assert np.allclose(r.probabilities, np.triu(P, 1), rtol=1e-9, atol=1e-12), n
    # with the padding test run first (file order, one worker per file): nothing compiled
    # here; run alone, one program per class
    assert stages.counts().get("executables_compiled", 0) - before <= 3


@pytest.mark.slow
def test_a_run_then_warmup_then_other_lengths_and_options_compile_nothing(tmp_path):
    """A cold run over a mix of lengths in classes 80 and 128 compiles their 2 programs (one
    per class met, nothing else); ``warmup`` up to 300 nt then prepares classes 80, 128 and
    512, after which runs of other lengths (classes 80-512), weights, temperatures and min loops
    compile nothing. (One cache: where a cold-run test and a warm-up test compiled the three
    classes' programs twice, ~15 CPU-seconds more, CI time.)"""
    cache = str(tmp_path / "cache")
    a = write_fasta(tmp_path / "a.fa", [12, 40, 80, 81, 100, 128], 1)
    first = run_counted(["fold", "--model", "nussinov", a, "--partition", "-f", "json"], cache)
    assert first.returncode == 0, first.stderr
    assert first.compiled == 2, first.counts                         # classes 80 and 128
    assert warm_counted("fold", cache, backend="cpu", max_length=300,
                        partition=True) == 3                         # classes 80, 128, 512
    b = write_fasta(tmp_path / "b.fa", [3, 29, 63, 90, 201, 257, 420, 512], 2)
    second = run_counted(["fold", "--model", "nussinov", b, "--partition", "-f", "json",
                          "--weights", "GC=3,AU=2,GU=0.5", "--temperature", "0.7",
                          "--min-loop", "1"], cache)
    assert second.returncode == 0, second.stderr
    assert second.compiled == 0, second.counts
    fa = write_fasta(tmp_path / "c.fa", [7, 50, 77, 199, 299], 3)
    run = run_counted(["fold", "--model", "nussinov", fa, "--partition", "-f", "json",
                       "--weights", "bpmax", "--temperature", "1.5", "--min-loop", "2"], cache)
    assert run.returncode == 0, run.stderr
    assert run.compiled == 0, run.counts
