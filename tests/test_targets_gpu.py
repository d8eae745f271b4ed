"""The Pallas GPU kernel of the bulk scan (jaxrna/kernels/miranda_fill.py) against the pure-JAX
path: in Pallas' interpret mode on CPU, compiled on a GPU when JAX sees one."""

import numpy as np
import pytest

import jax

from jaxrna.kernels.miranda_fill import packed_positions, scan_lanes_packed, unpack_flags
from jaxrna.targets.engine import Engine, make_target, prepare_query
from jaxrna.targets.scan import scan_lanes
from jaxrna.targets.scoring import ScanParams



def _case(seed, length, width):
    rng = np.random.default_rng(seed)
    params = ScanParams(score_threshold=60)
    mirnas = ["UGAGGUAGUAGGUUGUAUAGUU", "ACGUNACG", "GUGAGAUCAUUUUGAAAGCUG", "UUAGC"]
    queries = [prepare_query("q", "", s, params) for s in mirnas]
    height = max(q.height for q in queries)
    tabs = [q.tables_at(height) for q in queries]
    lanes = rng.integers(0, 5, size=(length, width)).astype(np.int8)
    lanes[rng.random((length, width)) < 0.02] |= 8
    return params, tabs, lanes


def _expected(params, tab, lanes):
    prof, go, ge, sd = tab
    return np.asarray(scan_lanes(prof[:, :, None], go[:, None], ge[:, None], sd[:, None], lanes,
                                 threshold=params.score_threshold))


@pytest.mark.slow
def test_pallas_interpret_matches_pure_jax():
    params, tabs, lanes = _case(1, 32, 128)
    tabs = tabs[:2]
    words = scan_lanes_packed(*[np.stack([t[x] for t in tabs]) for x in range(4)], lanes,
                              params.score_threshold, interpret=True)
    for k, tab in enumerate(tabs):
        exp = _expected(params, tab, lanes)
        assert np.array_equal(unpack_flags(np.asarray(words[k])), exp) and exp.any()
        col, lane = packed_positions(np.asarray(words[k]))
        assert sorted(zip(col.tolist(), lane.tolist())) == sorted(zip(*map(list, np.nonzero(exp))))


@pytest.mark.gpu
def test_pallas_gpu_matches_pure_jax():
    params, tabs, lanes = _case(2, 640, 1024)
    words = scan_lanes_packed(*[np.stack([t[x] for t in tabs]) for x in range(4)], lanes,
                              params.score_threshold)
    for k, tab in enumerate(tabs):
        assert np.array_equal(unpack_flags(np.asarray(words[k])), _expected(params, tab, lanes))


@pytest.mark.gpu
def test_gpu_engine_matches_cpu_engine():
    rng = np.random.default_rng(5)
    params = ScanParams(score_threshold=100, no_energy=True)
    mirnas = ["".join(rng.choice(list("ACGU"), size=int(n))) for n in rng.integers(16, 26, size=12)]
    targets = []
    for k in range(40):
        seq = "".join(rng.choice(list("ACGU"), size=int(rng.integers(20, 900))))
        m = mirnas[k % len(mirnas)]
        site = "".join({"A": "U", "C": "G", "G": "C", "U": "A"}[c] for c in reversed(m))
        targets.append(seq[:len(seq) // 2] + site + seq[len(seq) // 2:])
    qs = [prepare_query(f"m{k}", "", s, params) for k, s in enumerate(mirnas)]
    ts = [make_target(f"t{k}", "", s) for k, s in enumerate(targets)]
    cpu = jax.devices("cpu")
    expected = Engine(params, kernel="xla", devices=cpu).scan_chunk(qs, ts)
    got = Engine(params, kernel="pallas", query_block=4).scan_chunk(qs, ts)
    assert got == expected and len(expected) >= 12


@pytest.mark.slow
def test_pallas_refill_interpret_matches_pure_jax():
    """The multi-miRNA refill kernel (a miRNA per block of 128 lanes, blocks marked -1 skipped,
    reset flags starting new targets inside a segment) against the pure-JAX full fill."""
    from jaxrna.kernels.miranda_fill import refill_pallas
    from jaxrna.targets.scan import fill_segments

    rng = np.random.default_rng(3)
    params = ScanParams(score_threshold=30)
    queries = [prepare_query("q", "", s, params) for s in ("ACGUNAGUCCAUGGUA", "UUAGC")]
    tabs = [q.tables_at(16) for q in queries]
    lanes = rng.integers(0, 5, size=(40, 384)).astype(np.int8)
    lanes[rng.random(lanes.shape) < 0.05] |= 8
    qidx = np.array([1, -1, 0], np.int32)
    lead = 24
    best, code = refill_pallas(qidx, *[np.stack([t[x] for t in tabs]) for x in range(4)], lanes,
                               lead=lead, interpret=True)
    for blk, q in enumerate(qidx.tolist()):
        if q < 0:
            continue
        prof, go, ge, sd = tabs[q]
        part = lanes[:, blk * 128:(blk + 1) * 128]
        eb, ec = fill_segments(prof[:, :, None], go[:, None], ge[:, None], sd[:, None], part)
        assert np.array_equal(np.asarray(eb)[lead:], np.asarray(best)[:, :, blk * 128:(blk + 1) * 128])
        assert np.array_equal(np.asarray(ec).astype(np.int8), np.asarray(code)[:, :, blk * 128:(blk + 1) * 128])


@pytest.mark.slow
@pytest.mark.parametrize("height", [24, 32])
def test_refill_strips_match_the_pure_jax_fill(height):
    """The refill kernel fills a miRNA's rows 8 at a time (kernels.miranda_fill.STRIP), each
    strip's last row handed to the next through memory: at heights of 3 and 4 strips (the seed's
    pinned rows and the gap chain's in one strip, targets starting inside segments) its best
    scores and track codes equal the pure-JAX full fill's and the one-strip kernel's."""
    from jaxrna.kernels.miranda_fill import STRIP, SEED_SPAN, refill_pallas
    from jaxrna.targets.scan import fill_segments

    chain = height - SEED_SPAN - 1
    assert height - STRIP <= chain < height - 1     # the last strip: pinned rows, then a chained one
    rng = np.random.default_rng(height)
    params = ScanParams(score_threshold=30)
    seqs = ("ACGUNAGUCCAUGGUAGCAUGCAUGA", "UUAGC", "UGAGGUAGUAGGUUGUAUAGUU",
            "GGCAUUCAGCAUAGCAUCGAUCGAUCGAUGC")
    queries = [prepare_query("q", "", s, params) for s in seqs if len(s) <= height]
    tabs = [q.tables_at(height) for q in queries]
    lanes = rng.integers(0, 5, size=(height + 30, 512)).astype(np.int8)
    lanes[rng.random(lanes.shape) < 0.05] |= 8
    qidx = np.array([0, -1, len(queries) - 1, 1], np.int32)
    lead = height + 6
    tables = [np.stack([t[x] for t in tabs]) for x in range(4)]
    best, code = refill_pallas(qidx, *tables, lanes, lead=lead, interpret=True)
    whole = refill_pallas(qidx, *tables, lanes, lead=lead, interpret=True, strip=height)
    live = np.repeat(qidx >= 0, 128)
    assert np.array_equal(np.asarray(best)[..., live], np.asarray(whole[0])[..., live])
    assert np.array_equal(np.asarray(code)[..., live], np.asarray(whole[1])[..., live])
    for blk, q in enumerate(qidx.tolist()):
        if q < 0:
            continue
        prof, go, ge, sd = tabs[q]
        part = lanes[:, blk * 128:(blk + 1) * 128]
        eb, ec = fill_segments(prof[:, :, None], go[:, None], ge[:, None], sd[:, None], part)
        assert np.array_equal(np.asarray(eb)[lead:], np.asarray(best)[:, :, blk * 128:(blk + 1) * 128])
        assert np.array_equal(np.asarray(ec).astype(np.int8), np.asarray(code)[:, :, blk * 128:(blk + 1) * 128])


@pytest.mark.slow
def test_pallas_engine_interpret_matches_xla_engine(monkeypatch):
    """The whole Pallas path (bulk scan, tiles, refill, device traceback) in interpret mode,
    two device threads, against the pure-JAX engine; blocks of two miRNAs, one of them of a
    lower height served by its block's (one height class: one compiled shape). Every program
    the Pallas scan calls is one that :func:`jaxrna.targets.prefetch.chunk_programs` lists,
    with the same key, and no listed one goes unused: the Pallas case of
    tests/test_targets_prefetch.py's key test (which checks two height classes with the
    XLA engine), on this test's programs (a Pallas scan of its own there compiled six more
    programs in interpret mode, ~25 CPU-seconds, CI time)."""
    from test_targets_engine import random_seq, site_for
    from test_targets_prefetch import _recorded_keys

    from jaxrna import programs
    from jaxrna.targets.lanes import Chunk, ChunkRun
    from jaxrna.targets.prefetch import chunk_programs

    monkeypatch.setenv("JAXRNA_COMPILE_PROCESSES", "0")
    rng = np.random.default_rng(4)
    mirnas = [random_seq(rng, int(n)) for n in (16, 20, 22, 24)]  # heights 16, 24, 24, 24
    targets = []
    for k in range(8):
        seq = random_seq(rng, int(rng.integers(20, 150)))
        pos = int(rng.integers(0, len(seq)))
        targets.append(seq[:pos] + site_for(mirnas[k % 4], rng, k % 3) + seq[pos:])
    params = ScanParams(score_threshold=90, no_energy=True)
    qs = [prepare_query(f"m{k}", "", s.upper(), params) for k, s in enumerate(mirnas)]
    ts = [make_target(f"t{k}", "", s.upper()) for k, s in enumerate(targets)]
    assert [q.height for q in qs] == [16, 24, 24, 24]
    expected = Engine(params, kernel="xla", lane_columns=61).scan_chunk(qs, ts)
    engine = Engine(params, kernel="pallas", interpret=True, query_block=2, lane_columns=61,
                    threads_per_device=2, lane_batch=128)
    engine.prefetch = False
    seen = _recorded_keys(monkeypatch)
    got = engine.scan_chunk(qs, ts)
    assert got == expected and sum(map(len, expected.values())) >= 5
    assert {k for k, _ in got} == {0, 1, 2, 3}            # hits for every miRNA
    called = {key for name, key in seen if name.startswith("targets.")}
    chunk = Chunk(ts, engine.overlap(qs), engine.max_lanes, engine.lane_columns)
    run = ChunkRun(engine, qs, chunk, [True] * len(qs))
    assert run.block_heights(engine.blocks(len(qs))) == [24]
    device = engine.devices[0]
    listed = {programs.program_key(name, args, static, device)
              for name, args, static in chunk_programs(engine, run, device)}
    assert listed == called and len(listed) == 4          # 2 + 2 per height class
