"""A Pallas kernel that does not build (a later JAX without Pallas' Triton backend) falls back
to its pure-JAX path with one warning line on stderr per process, and the same output
(:mod:`jaxrna.kernels.fallback`). The failure is forced with ``JAXRNA_FORCE_PALLAS_FAILURE``,
on a CPU in interpret mode, where the code would otherwise run the Pallas kernels."""

import functools

import numpy as np
import pytest

from jaxrna.alphabet import encode
from jaxrna.kernels import fallback
from jaxrna.weights import parse_weights


@pytest.fixture(autouse=True)
def fresh_failures():
    fallback.reset()
    yield
    fallback.reset()


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "warning" in line]


@pytest.mark.slow  # compiles the packed fold twice
def test_the_packed_fold_falls_back_to_its_pure_path(monkeypatch, capsys):
    from jaxrna.fold.gpu import GpuFoldConfig, fold_gpu

    cfg = GpuFoldConfig(tile=16, block=16, unroll=4)
    w = parse_weights("unit").matrix()
    seqs = ["GGGAAAUCCGGGAAAUCC" * 2, "GCAUCGAUGCAAAGCUAGCUAGCAUCG", "ACGU"]
    # one padded length (48): each path compiles once, not once per length (CI time)
    fold = functools.partial(fold_gpu, config=cfg, interpret=True, pad_to=48)
    want = [fold(encode(s), w, 3) for s in seqs]
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(fallback.FORCE_ENV, "1")
    got = [fold(encode(s), w, 3) for s in seqs]
    got_scores = [fold(encode(s), w, 3, with_pairs=False)[0] for s in seqs]
    assert got == want
    assert got_scores == [score for score, _ in want]
    err = capsys.readouterr().err
    assert len(_warnings(err)) == 1 and err.count("\n") == 1
    assert "Pallas kernel fold.packed_fill" in err and "pure-JAX" in err
    assert not fallback.usable("fold.packed_fill")


def test_a_failure_is_remembered_and_named_kernels_only_fail(monkeypatch, capsys):
    monkeypatch.setenv(fallback.FORCE_ENV, "a, b")
    calls = []

    def pallas(name):
        calls.append(name)
        return "pallas"

    assert fallback.compile_or_fallback("a", lambda: pallas("a"), lambda: "pure") == "pure"
    assert fallback.compile_or_fallback("c", lambda: pallas("c"), lambda: "pure") == "pallas"
    assert fallback.compile_or_fallback("b", lambda: pallas("b"), lambda: "pure") == "pure"
    monkeypatch.delenv(fallback.FORCE_ENV)
    assert fallback.compile_or_fallback("a", lambda: pallas("a"), lambda: "pure") == "pure"
    assert calls == ["c"]
    assert len(_warnings(capsys.readouterr().err)) == 1      # once per process


def test_a_real_compile_error_falls_back_and_pure_errors_propagate(capsys):
    import jax
    import jax.numpy as jnp

    def broken():
        return jax.jit(lambda x: jnp.dot(x, x)).lower(np.ones((2, 3), np.float32)).compile()

    good = jax.jit(lambda x: x + 1).lower(np.ones(3, np.float32)).compile()
    assert fallback.compile_or_fallback("k", broken, lambda: good) is good
    assert "Pallas kernel k" in capsys.readouterr().err
    with pytest.raises(ZeroDivisionError):
        fallback.compile_or_fallback("k2", lambda: 1 / 0, lambda: 1 / 0)


def _forced_run(monkeypatch, capsys, kernels: str, run):
    """``run()`` as is and with ``kernels`` forced to fail: both outputs, and the warnings of
    the forced run (none may come without)."""
    want = run()
    assert _warnings(capsys.readouterr().err) == []
    monkeypatch.setenv(fallback.FORCE_ENV, kernels)
    got = run()
    monkeypatch.delenv(fallback.FORCE_ENV)
    return want, got, _warnings(capsys.readouterr().err)


# -- align: the device engine (lane kernels) and the record path (tile wavefront) ------------

@pytest.mark.parametrize("score_only, kernels", [
    (False, "align.lanes_align"),
    (True, "align.packed_scores,align.pallas_scores"),
])
def test_align_engine_falls_back(tmp_path, monkeypatch, capsys, score_only, kernels):
    import io
    import random

    from jaxrna.align import engine
    from jaxrna.align.scoring import match_mismatch
    from jaxrna.io.bulk import read_batch

    rng = random.Random(27)
    paths = []
    for name in ("q", "t"):
        path = tmp_path / f"{name}.fa"
        path.write_text("".join(f">{name}{k}\n" + "".join(rng.choice("ACGU") for _ in range(
            rng.randint(1, 14))) + "\n" for k in range(3)))
        paths.append(str(path))
    scoring = match_mismatch(2, -3, 5, 2)

    def run():
        job = engine.Job(read_batch(paths[0], "letters"), read_batch(paths[1], "letters"),
                         scoring, True, False, score_only)
        out = io.StringIO()
        engine.run(job, "tsv", out, backend="cpu", engine="device", interpret=True,
                   kernel={"rows": 4, "lanes": 8, "min_side": 16})
        return out.getvalue()

    want, got, warned = _forced_run(monkeypatch, capsys, kernels, run)
    assert got == want and want.count("\n") >= 9
    assert len(warned) == 1 and "Pallas kernel align." in warned[0]
    assert not any(fallback.usable(k) for k in kernels.split(",") if k in warned[0])


@pytest.mark.slow  # the fold program's fallback stays in the fast subset
def test_align_tile_wavefront_falls_back(monkeypatch, capsys):
    import random

    from jaxrna.align.api import align_records
    from jaxrna.align.scoring import match_mismatch
    from jaxrna.io.fasta import Record

    rng = random.Random(28)
    seq = lambda: "".join(rng.choice("ACGU") for _ in range(rng.randint(17, 32)))  # noqa: E731
    pairs = [(Record(f"q{k}", seq()), Record(f"t{k}", seq())) for k in range(3)]
    scoring = match_mismatch(2, -3, 5, 2)
    small = {"tile": 8, "rows": 4, "lanes": 8}

    def run():
        scores = [(r.score, r.query_end) for r in align_records(
            pairs, scoring, "local", score_only=True, use_pallas=True, interpret=True,
            kernel=small, tiled_min_length=1)]
        traced = [(r.score, r.ops, r.query_start) for r in align_records(
            pairs, scoring, "global", use_pallas=True, interpret=True, kernel=small,
            table_bytes=0, block=16, tiled_min_length=1)]
        return scores, traced

    want, got, warned = _forced_run(monkeypatch, capsys, "align.tile_wavefront", run)
    assert got == want
    assert len(warned) == 1 and "align.tile_wavefront" in warned[0]


# -- fold: the GPU batch program (Pallas max-plus fill, one-kernel walk) --------------------

@pytest.mark.parametrize("kernels", ["fold.walk", "tropical.maxplus"])
def test_fold_batch_program_falls_back(monkeypatch, capsys, kernels):
    import jax

    from jaxrna.fold import api
    from jaxrna.fold.reference import reference_score

    monkeypatch.setattr(api, "PALLAS_INTERPRET", True)
    monkeypatch.setattr(api, "WALK_KERNEL", True)
    w = parse_weights("unit").matrix()
    seqs = ["GGGAAAUCCGGGAAAUCC" * 4, "GCAUCGAUGCAAAGCUAGCUAGCAUCG", "A"]
    codes = np.full((4, 128), 4, np.int8)
    for b, s in enumerate(seqs):
        codes[b, :len(s)] = encode(s)
    lengths = np.array([len(s) for s in seqs] + [0], np.int32)
    cpu = jax.devices("cpu")[0]

    def run():
        prog = api.batch_program(codes, lengths, w, api.min_loop_arg(3), True, "gpu", cpu)
        return [np.asarray(x).tolist() for x in prog(codes, lengths, w, api.min_loop_arg(3))]

    want, got, warned = _forced_run(monkeypatch, capsys, kernels, run)
    assert got == want
    assert want[0][:3] == [reference_score(s, parse_weights("unit"), 3) for s in seqs]
    assert len(warned) == 1 and f"Pallas kernel {kernels} " in warned[0]
    assert not fallback.usable(kernels)


# -- energy (fold --turner): the fill's interior-loop kernels ---------------------------------

@pytest.mark.slow  # two energy programs in interpret mode
def test_energy_interior_kernels_fall_back(monkeypatch, capsys):
    from jaxrna.energy.api import INTERIOR_KERNEL, fold_batch, load_params

    monkeypatch.setenv("JAXRNA_ENERGY_INTERIOR", "interpret")
    seqs = ["GGGGAAACCCC", "GGGAAAUCCGCGCAAAGCGCA", "A"]

    def run():
        return [(e, None if p is None else p.tolist())
                for e, p in fold_batch(seqs, load_params(), batch=4)]

    want, got, warned = _forced_run(monkeypatch, capsys, INTERIOR_KERNEL, run)
    assert got == want and want[0][0] == -450
    assert len(warned) == 1 and f"Pallas kernel {INTERIOR_KERNEL} " in warned[0]
    assert not fallback.usable(INTERIOR_KERNEL)


# -- interact: the fused split kernel and the max-plus kernel of the BPMax fill ----------------

@pytest.mark.slow  # the fold program's fallback stays in the fast subset
def test_interact_falls_back(monkeypatch, capsys):
    """The BPMax fill with its Pallas kernels (interpret mode: fused splits, max-plus kernel),
    forced to fail: the pure-JAX fill gives the same score and structure, one warning."""
    import dataclasses

    from jaxrna.interact import api
    from jaxrna.interact import windows as win
    from jaxrna.interact.program import uses_pallas

    real = win.plan

    def pallas_plan(*args, **kwargs):
        p = real(*args, **kwargs)
        return dataclasses.replace(p, geo=dataclasses.replace(p.geo, kernel="interpret",
                                                              sweep="reduce", fused=True))

    monkeypatch.setattr(api, "plan", pallas_plan)
    assert uses_pallas(pallas_plan(7, 12).geo, None)

    def run():
        r = api.interact("GGGAAAC", "GUUUCCCAAGG", backend="cpu")
        return r.score, r.pairs

    want, got, warned = _forced_run(monkeypatch, capsys, "interact.bpmax", run)
    assert got == want and want[0] > 0
    assert len(warned) == 1 and "Pallas kernel interact.bpmax " in warned[0]
    assert not fallback.usable("interact.bpmax")


# -- targets: the scan's kernels are chosen before anything is built --------------------------

@pytest.mark.slow  # the scan in interpret mode, then pure
def test_targets_scan_falls_back(monkeypatch, capsys):
    """The scan with the Pallas kernels of kernels/miranda_fill (interpret mode), and with them
    forced to fail: the engine takes the pure-JAX scan, the same hits, one warning."""
    from jaxrna.targets import engine as eng
    from jaxrna.targets.scoring import ScanParams

    params = ScanParams(no_energy=True)
    q = eng.prepare_query("m", "", "GUGAGAUCAUUUUGAAAGCUG", params)
    targets = [eng.make_target("t", "", "ACGUACGUAC" * 20 + "UAGUUUUCACAAUGAUCUCGG"
                               + "ACGUACGUAC" * 20)]
    kernels = []

    def run():
        # the XLA scan's defaults (one miRNA per launch, 1,024 tiles per refill) for both: the
        # Pallas programs of 16 x 32,768 took 2-3 CPU-seconds more to build and interpret
        engine = eng.Engine(params, kernel="pallas", interpret=True, query_block=1,
                            lane_batch=eng.LANE_BATCH["xla"])
        kernels.append(engine.kernel)
        found = engine.scan_chunk([q], targets)
        return sorted(found.items())

    want, got, warned = _forced_run(monkeypatch, capsys, eng.PALLAS_KERNEL, run)
    assert kernels == ["pallas", "xla"]
    assert got == want and want[0][1][0].score == 167
    assert len(warned) == 1 and f"Pallas kernel {eng.PALLAS_KERNEL} " in warned[0]


def test_pallas_builds_probe(monkeypatch, capsys):
    """The probe compiles the smallest kernel (interpret mode on a CPU); forced, it fails."""
    assert fallback.pallas_builds("demo.probe", interpret=True)
    monkeypatch.setenv(fallback.FORCE_ENV, "demo.other")
    assert not fallback.pallas_builds("demo.other", interpret=True)
    assert fallback.pallas_builds("demo.probe", interpret=True)
    assert len(_warnings(capsys.readouterr().err)) == 1
