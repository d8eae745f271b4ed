"""The Pallas GPU kernel of the bulk scan (jaxrna/kernels/miranda_fill.py) against the pure-JAX
path: in Pallas' interpret mode on CPU, compiled on a GPU when JAX sees one."""

import numpy as np
import pytest

import jax

from jaxrna.kernels.miranda_fill import packed_positions, scan_lanes_packed, unpack_flags
from jaxrna.targets.engine import Engine, make_target, prepare_query
from jaxrna.targets.scan import scan_lanes
from jaxrna.targets.scoring import ScanParams

HAS_GPU = any(d.platform == "gpu" for d in jax.devices())


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


@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
def test_pallas_gpu_matches_pure_jax():
    params, tabs, lanes = _case(2, 640, 1024)
    words = scan_lanes_packed(*[np.stack([t[x] for t in tabs]) for x in range(4)], lanes,
                              params.score_threshold)
    for k, tab in enumerate(tabs):
        assert np.array_equal(unpack_flags(np.asarray(words[k])), _expected(params, tab, lanes))


@pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")
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


def test_pallas_full_interpret_matches_pure_jax():
    from jaxrna.kernels.miranda_fill import fill_segments_pallas
    from jaxrna.targets.scan import fill_segments

    rng = np.random.default_rng(3)
    q = prepare_query("q", "", "ACGUNAGU", ScanParams(score_threshold=30))
    lanes = rng.integers(0, 5, size=(24, 128)).astype(np.int8)
    best, code = fill_segments(q.profile, q.gap_open, q.gap_extend, q.seed, lanes)
    best2, code2 = fill_segments_pallas(q.profile[:, :, 0], q.gap_open[:, 0], q.gap_extend[:, 0],
                                        q.seed[:, 0], lanes, interpret=True)
    assert np.array_equal(np.asarray(best), np.asarray(best2))
    assert np.array_equal(np.asarray(code).astype(np.int8), np.asarray(code2))
