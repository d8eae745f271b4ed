"""GPU checks of the bulk alignment path (were bench/check_align_gpu.py, moved here in issue 27).

1. :func:`jaxrna.kernels.wavefront.lanes_align` (the Pallas lane kernel writing direction
   bits, then the device walk) against :func:`~jaxrna.kernels.wavefront.batch_align` (pure
   JAX) on the GPU: mixed lengths, ties, empty local alignments, match/mismatch and BLOSUM62.
2. ``jaxrna.align.engine.run`` on the GPU against the same run on the CPU (parasail's path when
   installed, else the JAX path), every format, all pairs and zip, score only: byte for byte.
3. End gaps (free end gaps, end penalties of their own): the Pallas lane kernel (scores;
   direction bits and the device walk) and the int16x2 packed kernel against the pure-JAX path
   on the GPU, long pairs through the tile wavefront and its checkpointed traceback against the
   pure-JAX path on the CPU, and engine runs GPU vs CPU. Its ``dry`` form runs the same checks
   on the CPU, Pallas in interpret mode on small shapes (``slow``, not ``gpu``).

On a GPU machine: ``python -m pytest -m gpu tests/`` (these and the other GPU tests).
"""

from __future__ import annotations

import io
import os
import random
import tempfile
import time

import numpy as np
import pytest

from jaxrna.align import engine
from jaxrna.align.recurrence import params_of
from jaxrna.align.scoring import from_matrix, make_scoring, match_mismatch
from jaxrna.io.bulk import read_batch


def padded(pairs, scoring, h: int, w: int, empty: int):
    """The pairs as one device batch: codes padded to ``h`` x ``w`` in rows rounded up to 128,
    and their lengths; the padding rows have length ``empty``."""
    rows = -(-len(pairs) // 128) * 128
    q = np.zeros((rows, h), np.int8)
    t = np.zeros((rows, w), np.int8)
    mm = np.full(rows, empty, np.int32)
    nn = np.full(rows, empty, np.int32)
    for k, (a, b) in enumerate(pairs):
        q[k, :len(a)], t[k, :len(b)] = scoring.encode(a), scoring.encode(b)
        mm[k], nn[k] = len(a), len(b)
    return q, t, mm, nn


def kernels() -> None:
    from jaxrna.kernels.wavefront import batch_align, lanes_align

    rng = random.Random(5)
    for scoring, alphabet in ((match_mismatch(1, -1, 1, 1), "AC"),
                              (match_mismatch(2, -3, 5, 2), "ACGT"),
                              (from_matrix("BLOSUM62", 11, 1), "ARNDCQEGHILKMFPSTWYV")):
        for h, w, count in ((128, 128, 300), (256, 256, 200)):
            pairs = []
            for k in range(count):
                m = rng.randint(1, h) if k % 3 else rng.randint(1, 8)
                n = rng.randint(1, w)
                pairs.append(("".join(rng.choice(alphabet) for _ in range(m)),
                              "".join(rng.choice(alphabet) for _ in range(n))))
            pairs.append(("A" * 9, "C" * 9))
            q, t, mm, nn = padded(pairs, scoring, h, w, empty=0)
            p = params_of(scoring)
            for local in (False, True):
                want = [np.asarray(x) for x in batch_align(q, t, mm, nn, p, local=local,
                                                           equality=scoring.equality)]
                got = [np.asarray(x) for x in lanes_align(q, t, mm, nn, p, local=local,
                                                          equality=scoring.equality)]
                k = len(pairs)
                same = all(np.array_equal(a[:k], b[:k]) for a, b in zip(want, got))
                assert same, f"lanes_align vs batch_align, {scoring.name}, {h}x{w}, local={local}"


def runs(backend: str = "gpu") -> None:
    rng = np.random.default_rng(9)
    d = tempfile.mkdtemp()

    def fasta(name, count, lo, hi, letters=b"ACGU"):
        path = os.path.join(d, name)
        with open(path, "w") as fh:
            for k in range(count):
                n = int(rng.integers(lo, hi + 1))
                seq = np.frombuffer(letters, np.uint8)[rng.integers(0, len(letters), n)]
                fh.write(f">{name}{k}\n{seq.tobytes().decode()}\n")
        return path

    q, t = fasta("q", 40, 20, 300), fasta("t", 30, 20, 300)
    z = fasta("z", 40, 20, 300)
    p = fasta("p", 25, 20, 200, b"ACDEFGHIKLMNPQRSTVWY")
    try:                                     # the reference: parasail's path where it can,
        import parasail  # noqa: F401        # else the JAX path on the CPU (slow to compile)
        engines = ["host"]
    except ImportError:
        engines = ["device"]
    blosum = make_scoring(matrix="BLOSUM62", gap_open=11, gap_extend=1)
    cases = [("global", make_scoring(), False, "pair", q, t),
             ("local", make_scoring(), False, "tsv", q, t),
             ("local", make_scoring(2, -3, None, 5, 2), False, "json", q, z),
             ("global", make_scoring(), True, "tsv", q, z),
             ("local", blosum, True, "tsv", p, p),
             ("local", blosum, False, "pair", p, p)]
    for mode, scoring, score_only, fmt, q, targets in cases:
        texts = {}
        for where, eng in [(backend, "device"), *[("cpu", e) for e in engines]]:
            job = engine.Job(read_batch(q, "letters"), read_batch(targets, "letters"), scoring,
                             mode == "local", targets == z, score_only)
            out = io.StringIO()
            start = time.perf_counter()
            engine.run(job, fmt, out, backend=where, engine=eng)
            texts[f"{where}/{eng}"] = (out.getvalue(), time.perf_counter() - start)
        ref = texts[f"{backend}/device"][0]
        assert all(v[0] == ref for v in texts.values()), \
            (mode, scoring.name, score_only, fmt, "zip" if targets == z else "all")


def end_gaps(dry: bool = False) -> None:
    """Free end gaps and end penalties of their own on the GPU paths (see the docstring).
    ``dry``: the same checks on the CPU, Pallas in interpret mode on small shapes (to try the
    script without a GPU)."""
    import jax

    from jaxrna.align.api import align_records
    from jaxrna.align.scoring import with_end_gaps
    from jaxrna.io.fasta import Record
    from jaxrna.kernels.wavefront import batch_align, batch_sweep, lanes_align, pallas_scores
    from jaxrna.kernels.wavefront_packed import packed_ok, packed_scores

    rng = random.Random(7)
    failed = []
    cpu = jax.devices("cpu")[0]
    gpu = cpu if dry else jax.devices("gpu")[0]
    small = {"interpret": True, "rows": 4, "lanes": 8} if dry else {}
    tiles = {"use_pallas": True, "interpret": True,
             "kernel": {"tile": 8, "rows": 4, "lanes": 8}} if dry else {}
    schemes = [(with_end_gaps(match_mismatch(1, -1, 1, 1), "free"), "AC"),
               (with_end_gaps(match_mismatch(2, -3, 5, 2), end_open=4, end_extend=1), "ACGT"),
               (with_end_gaps(from_matrix("BLOSUM62", 11, 1), "free"), "ARNDCQEGHILKMFPSTWYV")]
    for scoring, alphabet in schemes:
        h = w = 16 if dry else 128
        pairs = []
        for k in range(20 if dry else 300):
            m = rng.randint(1, h) if k % 3 else rng.randint(1, 8)
            pairs.append(("".join(rng.choice(alphabet) for _ in range(m)),
                          "".join(rng.choice(alphabet) for _ in range(rng.randint(1, w)))))
        q, t, mm, nn = padded(pairs, scoring, h, w, empty=1)
        k = len(pairs)
        eq = scoring.equality
        with jax.default_device(cpu):            # the reference: pure JAX on the CPU
            p = params_of(scoring)
            want = [np.asarray(x) for x in batch_align(q, t, mm, nn, p, local=False, equality=eq,
                                                       ends=True)]
            want_s = [np.asarray(x) for x in batch_sweep(q, t, mm, nn, p, local=False,
                                                         equality=eq, ends=True)[:3]]
        with jax.default_device(gpu):
            p = params_of(scoring)
            got = [np.asarray(x) for x in lanes_align(q, t, mm, nn, p, local=False, equality=eq,
                                                      ends=True, **small)]
            runs_ = {"lanes_align": (want, got),
                     "pallas_scores": (want_s, [np.asarray(x) for x in pallas_scores(
                         q, t, mm, nn, p, local=False, equality=eq, ends=True, **small)])}
            if packed_ok(scoring, h + 64, w):
                runs_["packed_scores"] = (want_s, [np.asarray(x) for x in packed_scores(
                    q, t, mm, nn, p, local=False, ends=True, **small)])
        for name, (a_, b_) in runs_.items():
            same = all(np.array_equal(x[:k], y[:k]) for x, y in zip(a_, b_))
            print(f"end gaps ({scoring.end_gaps_text()}), {name} GPU vs pure JAX CPU, "
                  f"{scoring.name}: {'OK' if same else 'DIFFERENT'}", flush=True)
            if not same:
                failed.append(name)
    # long pairs: the tile wavefront (Pallas) and its checkpointed traceback
    seq = lambda n: "".join(rng.choice("ACGT") for _ in range(n))  # noqa: E731
    n = 30 if dry else 2500
    block = 16 if dry else 2048
    core = seq(n)
    pairs = [(Record("inside", core), Record("outer", seq(n // 8) + core + seq(n // 4))),
             (Record("a", seq(n - n // 10)), Record("b", seq(n + n // 10)))]
    for scoring in (with_end_gaps(match_mismatch(2, -3, 5, 2), "free"),
                    with_end_gaps(match_mismatch(2, -3, 5, 2), end_open=4, end_extend=1)):
        want = [(r.score_units, r.ops) for r in align_records(
            pairs, scoring, "global", backend="cpu", table_bytes=0, block=block)]
        for label, kw in (("tile wavefront scores", dict(score_only=True, tiled_min_length=1)),
                          ("tile traceback", dict(table_bytes=0, block=block))):
            start = time.perf_counter()
            got = list(align_records(pairs, scoring, "global", backend="cpu" if dry else "gpu",
                                     **kw, **tiles))
            same = [r.score_units for r in got] == [s for s, _ in want] and (
                kw.get("score_only") or [r.ops for r in got] == [o for _, o in want])
            print(f"end gaps ({scoring.end_gaps_text()}), long pairs, {label}: "
                  f"{'OK' if same else 'DIFFERENT'} ({time.perf_counter() - start:.1f} s)",
                  flush=True)
            if not same:
                failed.append(label)
    # whole runs, GPU against CPU
    d = tempfile.mkdtemp()
    nrng = np.random.default_rng(3)

    def fasta(name, count, lo, hi):
        path = os.path.join(d, name)
        with open(path, "w") as fh:
            for k in range(count):
                n = int(nrng.integers(lo, hi + 1))
                letters = np.frombuffer(b"ACGU", np.uint8)[nrng.integers(0, 4, n)]
                fh.write(f">{name}{k}\n{letters.tobytes().decode()}\n")
        return path

    qf, tf = fasta("q", 30, 100, 120), fasta("t", 20, 100, 120)   # few CPU shapes to compile
    if dry:
        qf, tf = fasta("q", 4, 5, 14), fasta("t", 3, 5, 14)
    for scoring, score_only, fmt in ((make_scoring(end_gaps="free"), False, "pair"),
                                     (make_scoring(end_gaps="free"), True, "tsv"),
                                     (make_scoring(end_open=5, end_extend=1), False, "tsv")):
        texts = []
        for backend in ("gpu", "cpu"):
            job = engine.Job(read_batch(qf, "letters"), read_batch(tf, "letters"), scoring, False,
                             False, score_only)
            out = io.StringIO()
            if dry and backend == "gpu":         # the GPU plan, Pallas interpreted
                engine.run(job, fmt, out, backend="cpu", engine="device", interpret=True,
                           kernel={"rows": 4, "lanes": 8, "min_side": 16})
            else:
                engine.run(job, fmt, out, backend=backend)
            texts.append(out.getvalue())
        same = texts[0] == texts[1]
        print(f"end gaps ({scoring.end_gaps_text()}), engine GPU vs CPU, score_only={score_only} "
              f"{fmt}: {'OK' if same else 'DIFFERENT'}", flush=True)
        if not same:
            failed.append(f"engine {fmt}")
    assert not failed, f"end gaps: DIFFERENT: {failed}"


@pytest.mark.gpu
def test_lane_kernel_equals_pure_jax_on_gpu():
    kernels()


@pytest.mark.gpu
def test_engine_on_gpu_equals_cpu():
    runs("gpu")


@pytest.mark.gpu
def test_end_gaps_on_gpu():
    end_gaps(dry=False)


@pytest.mark.slow
def test_end_gaps_dry_on_cpu():
    """The end-gap checks' GPU plan on the CPU: Pallas interpreted, small shapes."""
    end_gaps(dry=True)
