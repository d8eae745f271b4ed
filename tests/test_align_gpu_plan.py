"""Issue 26, ``jaxrna align`` on the GPU: the plan's programs are fixed by its classes
(:mod:`jaxrna.align.classes`), never by the pair count or the mix of lengths, and the Pallas
lane kernels, whose loops run to each program's longest pair, give the results of the pure-JAX
sweep on pairs of any length inside a class and ignore empty rows.

Everything runs on the CPU: the GPU plan of :class:`jaxrna.align.device_runner.DeviceRunner`
with its Pallas kernels in interpret mode on small shapes (``kernel=SMALL``).
"""

from __future__ import annotations

import io
import random

import numpy as np
import pytest
from test_align_core import CONFIGS, encode_batch, random_pairs
from test_align_engine import _asymmetric

from jaxrna.align import classes as cl
from jaxrna.align import device_runner, engine, warmup
from jaxrna.align.chunks import Chunk, Ragged
from jaxrna.align.recurrence import params_of
from jaxrna.align.scoring import make_scoring, match_mismatch, with_end_gaps
from jaxrna.io.bulk import SeqBatch
from jaxrna.io.fasta import Record
from jaxrna.kernels.wavefront import batch_align, batch_sweep, lanes_align, pallas_scores
from jaxrna.kernels.wavefront_packed import packed_ok, packed_scores

SMALL = {"rows": 4, "lanes": 8, "min_side": 16}


def _batch(lengths, seed, name, letters="ACGT"):
    rng = random.Random(seed)
    return SeqBatch.from_records(
        [Record(id=f"{name}{k}", sequence="".join(rng.choice(letters) for _ in range(n)))
         for k, n in enumerate(lengths)], source=name)


def _with_empty_rows(q, t, m, n, every: int, pad: int):
    """Rows of padding (lengths ``pad``) after every ``every`` real rows, a whole program of
    them at the end, and the indices of the real rows."""
    rows, real = [], []
    for k in range(len(m)):
        real.append(len(rows))
        rows.append(k)
        if k % every == every - 1:
            rows.append(-1)
    rows += [-1] * 16
    rows += [-1] * (-len(rows) % 16)
    idx = np.array(rows)
    sel = np.maximum(idx, 0)
    q2, t2 = q[sel].copy(), t[sel].copy()
    m2, n2 = m[sel].copy(), n[sel].copy()
    q2[idx < 0], t2[idx < 0] = 0, 0
    m2[idx < 0], n2[idx < 0] = pad, pad
    return q2, t2, m2, n2, np.array(real)


SLOW = pytest.mark.slow


@pytest.mark.parametrize("name,mode,ends", [("affine", "global", False),
                                            pytest.param("affine", "local", False, marks=SLOW),
                                            pytest.param("halves", "global", True, marks=SLOW),
                                            pytest.param("asymmetric", "local", False,
                                                         marks=SLOW),
                                            pytest.param("asymmetric", "global", True,
                                                         marks=SLOW)])
def test_trimmed_lane_kernels_equal_pure_jax(name, mode, ends):
    """Pairs of very different lengths in a padded shape far larger than most of them, empty
    rows between them and a program of empty rows only: the trimmed kernels (scores, int16x2
    packed scores, alignments with direction bits) give the pure-JAX sweep's results on every
    real row."""
    scoring = _asymmetric() if name == "asymmetric" else CONFIGS[name][0]
    alphabet = "AC" if name == "asymmetric" else "ACGT"
    if ends:
        scoring = with_end_gaps(scoring, "penalized", end_open=3, end_extend=1)
    local = mode == "local"
    rng = random.Random(hash((name, mode, ends)) % 997)
    pairs = random_pairs(rng, alphabet, 21, 11, 29) + [("A" * 24, "C" * 40)]
    q, t, m, n = encode_batch(scoring, pairs, 24, 40)
    p = params_of(scoring)
    eq = scoring.equality
    opts = {"ends": True} if ends else {}
    want = [np.asarray(a) for a in batch_sweep(q, t, m, n, p, local=local, equality=eq,
                                               **opts)[:3]]
    q0, t0, m0, n0, real = _with_empty_rows(q, t, m, n, 5, 0)
    got = pallas_scores(q0, t0, m0, n0, p, local=local, equality=eq, interpret=True, rows=4,
                        lanes=8, **opts)
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, np.asarray(b)[real])
    if eq and packed_ok(scoring, 24 + 64, 40):
        q1, t1, m1, n1, real1 = _with_empty_rows(q, t, m, n, 3, 1)
        got = packed_scores(q1, t1, m1, n1, p, local=local, rows=4, lanes=4, interpret=True,
                            **opts)
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, np.asarray(b)[real1])
    ref = [np.asarray(a) for a in batch_align(q, t, m, n, p, local=local, equality=eq, **opts)]
    got = [np.asarray(a) for a in lanes_align(q0, t0, m0, n0, p, local=local, equality=eq,
                                              interpret=True, rows=4, lanes=8, **opts)]
    for k, (a, b) in enumerate(zip(ref, got)):
        if k == 5:                           # ops: up to each alignment's length
            length = ref[6]
            for r, L in enumerate(length.tolist()):
                np.testing.assert_array_equal(a[r, :L], b[real[r], :L])
        else:
            np.testing.assert_array_equal(a, b[real])


def _plan(job, kernel=None, **kw):
    """The GPU plan of every pair of ``job`` (one chunk; the record path only recorded)."""
    sent = []
    orig = device_runner.record_path
    device_runner.record_path = lambda job_, pos, *a, **k: sent.append(np.asarray(pos))
    try:
        runner = device_runner.DeviceRunner(job, "cpu", interpret=True, kernel=kernel, **kw)
        qi, ti = job.pairs(0, job.n_pairs)
        ragged = None if job.score_only else Ragged(len(qi))
        batches = runner.plan(0, qi, ti, Chunk.empty(0, qi, ti), ragged)
    finally:
        device_runner.record_path = orig
    return runner, batches, (np.concatenate(sent) if sent else np.zeros(0, np.int64)), qi, ti


def _programs(runner, batches, qi, ti):
    """The programs a plan's batches run: (kind, h, w, rows, variant), the variant as
    :meth:`~jaxrna.align.device_runner.DeviceRunner.launch` picks it (the run's, else the
    batch's own: packed where its longest sides fit)."""
    job = runner.job
    out = set()
    for b in batches:
        small = b.small
        if small is None:
            small = False
            if b.kind == "scores":
                m = np.minimum(job.qlen[qi], job.tlen[ti])[b.positions]
                n = np.maximum(job.qlen[qi], job.tlen[ti])[b.positions]
                if len(b.positions) < b.rows:        # topped up with 1 x 1 rows
                    m, n = np.append(m, 1), np.append(n, 1)
                small = runner.packed(m, n) if runner.pallas else \
                    runner._small(b, m, n)
        out.add((b.kind, b.h, b.w, b.rows, bool(small)))
    return out


@pytest.mark.parametrize("score_only", [True, False])
def test_gpu_plan_fixed_programs_any_mix_any_count(score_only):
    """Random mixes of lengths up to 10,240 nt and of pair counts: the plan's (kind, h, w, rows)
    stay within the documented ladder (15 classes scoring only; 5 squares with alignments and
    the 9 CPU classes of longer pairs), a run uses at most 8 programs (variants counted), every
    pair fits its class, every pair is planned once, and a class's rows are the same whether a
    job has 6 pairs or thousands (a last batch is topped up, not shrunk)."""
    rng = np.random.default_rng(26 + score_only)
    ladder = 15 if score_only else 5 + 9
    seen_rows: dict = {}
    for count_q, count_t, top in ((3, 2, 10_240), (40, 60, 10_240), (70, 90, 2_000),
                                  (120, 100, 400)):
        ql = rng.integers(1, top + 1, count_q)
        tl = rng.integers(1, top + 1, count_t)
        ql[0], tl[0] = 1, top                # the extremes
        for scoring in (make_scoring(), match_mismatch(1, -1, 1, 1)):
            job = engine.Job(_batch(ql.tolist(), 1, "q", "A"), _batch(tl.tolist(), 2, "t", "A"),
                             scoring, False, False, score_only)
            runner, batches, sent, qi, ti = _plan(job)
            allowed = set(warmup.gpu_programs(runner, 10_240))
            assert len(allowed) <= ladder
            planned = np.concatenate([b.positions for b in batches] + [sent])
            assert sorted(planned.tolist()) == list(range(job.n_pairs))
            assert not len(sent)                 # longer pairs: batch_align batches
            m, n = job.qlen[qi], job.tlen[ti]
            for b in batches:
                key = (b.kind, b.h, b.w, b.rows)
                assert key in allowed, key
                assert 0 < len(b.positions) <= b.rows
                short = np.minimum(m, n)[b.positions]
                long_ = np.maximum(m, n)[b.positions]
                assert (short <= b.h).all() and (long_ <= b.w).all()
                assert seen_rows.setdefault((b.kind, b.h, b.w), b.rows) == b.rows
                if b.small:                      # the run's packed variant: every batch fits
                    assert packed_ok(runner.kscoring, int(short.max()) + 64, int(long_.max()))
            assert len(_programs(runner, batches, qi, ti)) <= 8
    # the same lengths, 6 pairs and thousands: the same rows
    ql = rng.integers(1, 700, 80)
    small = engine.Job(_batch(ql[:3].tolist(), 3, "q", "A"), _batch(ql[3:5].tolist(), 4, "t",
                                                                         "A"),
                       make_scoring(), True, False, score_only)
    big = engine.Job(_batch(ql[:60].tolist(), 3, "q", "A"), _batch(ql[:80].tolist(), 4, "t",
                                                                       "A"),
                     make_scoring(), True, False, score_only)
    rows_small = {(b.kind, b.h, b.w): b.rows for b in _plan(small)[1]}
    rows_big = {(b.kind, b.h, b.w): b.rows for b in _plan(big)[1]}
    shared = set(rows_small) & set(rows_big)
    assert shared and all(rows_small[k] == rows_big[k] for k in shared)


def _run(job_args, interpret, fmt="tsv", **kw):
    job = engine.Job(*job_args)
    out = io.StringIO()
    if interpret:
        engine.run(job, fmt, out, backend="cpu", engine="device", interpret=True,
                   kernel=SMALL, **kw)
    else:
        engine.run(job, fmt, out, backend="cpu", engine="device")
    return out.getvalue()


@pytest.mark.parametrize("case", [pytest.param(c, marks=SLOW) for c in (
    "scores-global", "scores-local-asym", "scores-ends", "align-global", "align-ends")]
    + ["align-local-asym"])
def test_gpu_plan_output_equals_cpu_path(case):
    """The GPU plan (interpret mode), its batches topped up with empty rows, with several
    batches per class (a small memory limit), against the CPU plan: the same bytes."""
    score_only = case.startswith("scores")
    scoring = make_scoring()
    letters = "ACGT"
    if "asym" in case:
        scoring, letters = _asymmetric(), "AC"
    if "ends" in case:
        scoring = make_scoring(end_open=4, end_extend=1)
    local = "local" in case
    rng = random.Random(case)
    ql = [rng.randint(1, 40) for _ in range(9)] + [1]
    tl = [rng.randint(1, 70) for _ in range(5)] + [70]
    args = (_batch(ql, 7, "q", letters), _batch(tl, 8, "t", letters), scoring, local, False,
            score_only)
    fmt = "tsv" if score_only else "json"
    want = _run(args, False, fmt)
    assert want.count("query") >= 60 or fmt == "tsv"
    assert _run(args, True, fmt) == want
    assert _run(args, True, fmt, max_bytes=1 << 19) == want     # many batches of few rows


def test_gpu_plan_limit_gives_many_batches():
    """The memory limit used above does split a job into several batches per class."""
    job = engine.Job(_batch([30] * 10, 1, "q"), _batch([30] * 6, 2, "t"), make_scoring(),
                     False, False, False)
    _, batches, _, _, _ = _plan(job, SMALL, max_bytes=1 << 19)
    assert len(batches) >= 3 and all(b.rows == batches[0].rows for b in batches)


@pytest.mark.slow
def test_warm_gpu_plan_then_new_data_compiles_nothing(monkeypatch, tmp_path):
    """``warm`` of the GPU plan (interpret mode, both kinds): runs on new data, other scores
    (the int32 variant) and counts then prepare no program of their own."""
    from jaxrna import programs

    monkeypatch.setenv("JAXRNA_CACHE_DIR", str(tmp_path / "cache"))
    prepared = warmup.warm("cpu", 40, mode="local", alignments=None, interpret=True,
                           kernel=SMALL)
    assert prepared <= 2 + 3                 # (64, 64) in two variants, 3 squares
    before = programs.memo_size()
    rng = random.Random(11)
    for score_only in (True, False):
        for scoring in (make_scoring(), make_scoring(90, -70, None, 200, 3),
                        match_mismatch(1, -1, 1, 1)):
            ql = [rng.randint(1, 40) for _ in range(rng.randint(1, 7))]
            tl = [rng.randint(1, 40) for _ in range(rng.randint(1, 5))]
            _run((_batch(ql, 5, "q"), _batch(tl, 6, "t"), scoring, True, False, score_only),
                 True)
    assert programs.memo_size() == before


def test_gpu_class_bounds_up_to_10240_nt():
    """The documented GPU bounds: 15 score-only classes (rows x codes within the budget), 5
    squares with alignments (direction bits within GPU_DIRS_BYTES); every pair fits its class
    and takes the class of fewest codes that holds it."""
    assert len(cl.gpu_classes(10_240, True)) == len(cl.GPU_SCORE_CLASSES) == 15
    assert cl.gpu_classes(10_240, False) == [(s, s) for s in (128, 256, 512, 1024, 2048)]
    rng = np.random.default_rng(7)
    a, b = rng.integers(1, 10_241, 20_000), rng.integers(1, 10_241, 20_000)
    short, long_ = np.minimum(a, b), np.maximum(a, b)
    h, w = cl.gpu_score_class(short, long_)
    assert (h >= short).all() and (w >= long_).all()
    table = np.array(cl.GPU_SCORE_CLASSES)
    for s, g, hh, ww in zip(short[:500], long_[:500], h[:500], w[:500]):
        fit = table[(table[:, 0] >= s) & (table[:, 1] >= g)]
        assert hh + ww == fit.sum(axis=1).min()
    for hh, ww in cl.GPU_SCORE_CLASSES:
        rows = cl.gpu_score_rows(hh, ww)
        assert rows & (rows - 1) == 0 and rows % 256 == 0
        assert rows * (hh + ww) <= cl.GPU_SCORE_BYTES
    for s, _ in cl.gpu_classes(10_240, False):
        rows = cl.gpu_lanes_rows(s)
        assert rows % 128 == 0 and rows * s * s <= cl.GPU_DIRS_BYTES


@pytest.mark.gpu
def test_gpu_classes_on_gpu_equal_cpu():
    """On a GPU: a mix of lengths 1-2,500 nt over many classes, all pairs, score only (int16x2
    and int32 variants) and local alignments, byte for byte the CPU's output (parasail's path
    where installed, else the JAX path); then the trimmed kernels natively on a wide class
    with empty rows against the pure-JAX sweep."""
    rng = np.random.default_rng(26)
    ql = rng.integers(1, 2_501, 30).tolist()
    tl = rng.integers(1, 2_501, 20).tolist()
    try:
        import parasail  # noqa: F401
        ref_engine = "host"
    except ImportError:
        ref_engine = "device"
    for scoring, local, score_only, fmt in ((make_scoring(), False, True, "tsv"),
                                            (make_scoring(90, -70, None, 200, 3), True, True,
                                             "tsv"),
                                            (make_scoring(), True, False, "json")):
        texts = []
        for backend, eng in (("gpu", "device"), ("cpu", ref_engine)):
            job = engine.Job(_batch(ql, 1, "q"), _batch(tl, 2, "t"), scoring, local, False,
                             score_only)
            out = io.StringIO()
            engine.run(job, fmt, out, backend=backend, engine=eng)
            texts.append(out.getvalue())
        assert texts[0] == texts[1], (scoring.name, local, score_only)
    scoring = match_mismatch(1, -1, 2, 1)
    assert packed_ok(scoring, 1024 + 64, 4096)
    pairs = random_pairs(random.Random(3), "ACGT", 300, 1000, 4000)
    q, t, m, n = encode_batch(scoring, pairs, 1024, 4096)
    p = params_of(scoring)
    for local in (False, True):
        want = [np.asarray(a) for a in batch_sweep(q, t, m, n, p, local=local, equality=True)[:3]]
        q0, t0, m0, n0, real = _with_empty_rows(q, t, m, n, 7, 0)
        got = pallas_scores(q0, t0, m0, n0, p, local=local, equality=True)
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, np.asarray(b)[real])
        q1, t1, m1, n1, real1 = _with_empty_rows(q, t, m, n, 7, 1)
        got = packed_scores(q1, t1, m1, n1, p, local=local)
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, np.asarray(b)[real1])


@pytest.mark.gpu
def test_gpu_cold_runs_compile_at_most_8(tmp_path):
    """On a GPU, cold CLI runs over adversarial mixes up to 10,240 nt (every score-only class
    in both variants and few long pairs for the tile wavefront; every alignment square and
    longer pairs in batch_align classes) compile at most 8 programs each, and give the CPU's
    bytes (parasail where installed, else the JAX path)."""
    from compile_count import run_counted, write_fasta

    rng = np.random.default_rng(26)
    edges = sorted({1, 10_240} | {v for h in cl.CPU_LANES for v in (h, h + 1, 4 * h + 1)
                                  if v <= 10_240})
    ql = edges + rng.integers(1, 3000, 40).tolist()
    tl = edges[::2] + rng.integers(1, 600, 30).tolist()
    scores = (write_fasta(tmp_path / "q.fa", ql, 1), write_fasta(tmp_path / "t.fa", tl, 2))
    ql = [1, 100, 200, 400, 900, 1500, 2049, 3000, 10_240] + rng.integers(1, 300, 20).tolist()
    tl = [5, 120, 300, 700, 2048, 4097, 9000] + rng.integers(1, 300, 10).tolist()
    aligned = (write_fasta(tmp_path / "qa.fa", ql, 3), write_fasta(tmp_path / "ta.fa", tl, 4))
    gpu = {"JAX_PLATFORMS": "", "JAXRNA_ALIGN_ENGINE": "device"}
    for (q, t), extra in ((scores, ["--score-only", "--match", "1", "--mismatch", "-1",
                                    "--gap-open", "1", "--gap-extend", "1"]),
                          (aligned, ["--mode", "local"])):
        args = ["align", q, t, "-f", "tsv", "-q", *extra]
        cold = run_counted([*args, "--backend", "gpu"], str(tmp_path / f"c{len(extra)}"),
                           env=gpu)
        assert cold.returncode == 0, cold.stderr
        assert 0 < cold.compiled <= 8, cold.counts
        ref = run_counted([*args, "--backend", "cpu"], str(tmp_path / "cpu"),
                          env={"JAXRNA_ALIGN_ENGINE": "host"})
        assert ref.returncode == 0 and ref.stdout == cold.stdout
