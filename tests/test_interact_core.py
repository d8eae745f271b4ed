"""The JAX BPMax fill against the plain reference DP, cell by cell, and its layout pieces."""

import dataclasses
import random

import jax.numpy as jnp
import numpy as np
import pytest

from jaxrna.alphabet import encode, encode_batch
from jaxrna.fold.fill import nussinov_fill
from jaxrna.fold.reference import reference_table
from jaxrna.interact.api import fill_batch
from jaxrna.interact.recurrence import Geometry, banded_nussinov, band_to_tiles, bpmax_fill, tiles_to_band
from jaxrna.interact.reference import reference_tables
from jaxrna.interact.windows import cell_index, plan
from jaxrna.weights import parse_weights

# Geometries: unwindowed, windowed on both strands (with the GPU's reduce sweep and several
# outer blocks), and a band wider than one tile on a long inner matrix.
GEOMETRIES = [
    Geometry(n_outer=16, n_inner=32, w_outer=15, w_inner=31, tile=8),
    Geometry(n_outer=16, n_inner=32, w_outer=6, w_inner=9, tile=4, outer_blocks=3, inner_blocks=3,
             sweep="reduce"),
    Geometry(n_outer=8, n_inner=48, w_outer=7, w_inner=20, tile=8, inner_blocks=2),
]


def random_strand(rng, n):
    return "".join(rng.choice("ACGU") for _ in range(n))


def encode_padded(seqs, length):
    return encode_batch(seqs, length)[0].astype(np.int32)


def fill(pairs, geo, weights):
    """Tables (host) for (strand 1, strand 2) pairs with strand 1 outside."""
    cu = encode_padded([a for a, _ in pairs], geo.n_outer)
    cv = encode_padded([b[::-1] for _, b in pairs], geo.n_inner)
    table, s_o, s_i = fill_batch(cu, cv, jnp.asarray(weights.matrix()), geo)
    return np.asarray(table), np.asarray(s_o), np.asarray(s_i)


def cells(geo, n, m):
    """Every cell (i1, j1, i2, j2) of the true strands inside the windows, as index arrays."""
    out = [(i1, j1, i2, j2) for i1 in range(n) for j1 in range(i1, min(n, i1 + geo.w_outer + 1))
           for i2 in range(m) for j2 in range(i2, min(m, i2 + geo.w_inner + 1))]
    return tuple(np.array(c) for c in zip(*out))


@pytest.mark.slow
@pytest.mark.parametrize("geo", GEOMETRIES, ids=["whole", "windowed-reduce", "band>tile"])
def test_fill_equals_reference_everywhere(geo):
    rng = random.Random(geo.n_inner + geo.w_outer)
    weights = parse_weights("bpmax")
    pairs = []
    for _ in range(5):
        n = rng.randint(max(1, geo.n_outer - 7), geo.n_outer)
        m = rng.randint(max(1, geo.n_inner // 2), min(25, geo.n_inner - 1))
        pairs.append((random_strand(rng, n), random_strand(rng, m)))
    table, s_o, s_i = fill(pairs, geo, weights)
    for k, (s1, s2) in enumerate(pairs):
        F, S1, S2 = reference_tables(s1, s2, weights, geo.w_outer, geo.w_inner)
        i1, j1, i2, j2 = cells(geo, len(s1), len(s2))
        got = table[k][cell_index(geo, i1, j1, i2, j2)]
        want = np.array([F[a][b][c][d] for a, b, c, d in zip(i1, j1, i2, j2)])
        assert np.array_equal(got, want), (s1, s2)
        for d in range(min(len(s1), geo.w_outer + 1)):                 # S1 on its band
            assert [int(x) for x in s_o[k][d, :len(s1) - d]] == [S1[i][i + d] for i in range(len(s1) - d)]
        t = s2[::-1]
        for d in range(min(len(t), geo.w_inner + 1)):
            assert [int(x) for x in s_i[k][d, :len(t) - d]] == [S2[i][i + d] for i in range(len(t) - d)]


@pytest.mark.slow
def test_windowed_cells_equal_unwindowed():
    # the windowed geometry and the whole one share padded sizes and batch size, so both are
    # compiled once for the test above
    whole, windowed = GEOMETRIES[0], GEOMETRIES[1]
    rng = random.Random(11)
    weights = parse_weights("integer")
    pairs = [(random_strand(rng, 16), random_strand(rng, 31)) for _ in range(5)]
    full, _, _ = fill(pairs, whole, weights)
    win, _, _ = fill(pairs, windowed, weights)
    i1, j1, i2, j2 = cells(windowed, 16, 31)
    for k in range(len(pairs)):
        assert np.array_equal(win[k][cell_index(windowed, i1, j1, i2, j2)],
                              full[k][cell_index(whole, i1, j1, i2, j2)])


@pytest.mark.slow  # the other interact oracle tests stay in the fast subset
def test_outer_and_inner_strands_can_swap():
    # F is symmetric: F_{u,v}(i1, j1, i2, j2) = F_{v,u}(i2, j2, i1, j1)
    rng = random.Random(5)
    weights = parse_weights("bpmax")
    geo = GEOMETRIES[0]
    u, v = random_strand(rng, 12), random_strand(rng, 15)
    pad = [("A", "A")] * 3
    tables, _, _ = fill([(u, v[::-1]), (v, u[::-1])] + pad, geo, weights)
    i1, j1, i2, j2 = cells(geo, 12, 15)
    assert np.array_equal(tables[0][cell_index(geo, i1, j1, i2, j2)],
                          tables[1][cell_index(geo, i2, j2, i1, j1)])


def test_banded_nussinov_is_the_folding_engine_on_its_band():
    rng = random.Random(2)
    weights = parse_weights("bpmax")
    seq = random_strand(rng, 40)
    codes = jnp.asarray(encode(seq).astype(np.int32))
    full = np.asarray(nussinov_fill(codes, jnp.asarray(weights.matrix()), min_loop=3))
    ref = reference_table(seq, weights, 3)
    width = 9
    rows, cols = banded_nussinov(codes, jnp.asarray(weights.matrix()), width)
    rows, cols = np.asarray(rows), np.asarray(cols)
    for d in range(width + 1):
        for i in range(40 - d):
            assert rows[1 + d, i] == full[1 + d, i] == ref[i][i + d]
            assert cols[width - d, i + d] == ref[i][i + d]


def test_tiles_band_round_trip():
    geo = GEOMETRIES[2]
    rng = np.random.default_rng(0)
    band = jnp.asarray(rng.integers(0, 100, (geo.wb, 3, geo.n_inner)), jnp.int32)
    tiles = band_to_tiles(band, geo.ne, geo.tile)
    back = tiles_to_band([tiles[:, e] for e in range(geo.ne)], geo.wb)
    e, i = np.meshgrid(np.arange(geo.wb), np.arange(geo.n_inner), indexing="ij")
    inside = (i + e + 1) < geo.n_inner                      # cells that exist in the tiles
    assert np.array_equal(np.asarray(back)[:, :, :][:, 0][inside], np.asarray(band)[:, 0][inside])


@pytest.mark.slow
def test_pallas_interpret_kernel_gives_the_same_table():
    geo = Geometry(n_outer=4, n_inner=8, w_outer=3, w_inner=7, tile=4)
    w = jnp.asarray(parse_weights("bpmax").matrix())
    cu = jnp.asarray(encode_padded(["GGCU"], 4)[0])
    cv = jnp.asarray(encode_padded(["AGCCGU"], 8)[0])
    xla = bpmax_fill(cu, cv, w, geo)[0]
    interpret = bpmax_fill(cu, cv, w, dataclasses.replace(geo, kernel="interpret"))[0]
    assert bool((xla == interpret).all())


def test_plan_allocates_only_the_band():
    p = plan(23, 20000, None, 128)
    assert (p.geo.w_outer, p.geo.w_inner) == (23, 127)      # outer padded to 24, unwindowed
    whole_matrix = p.geo.n_inner ** 2 * 4
    assert p.geo.table_bytes() / p.geo.n_cells < whole_matrix / 50



# windowed on both strands, a band of three tiles, two outer blocks: small enough to interpret
FUSED = Geometry(n_outer=8, n_inner=32, w_outer=5, w_inner=9, tile=4, outer_blocks=2,
                 inner_blocks=2, sweep="reduce", kernel="interpret", fused=True)


def check_against_reference(table, pairs, geo, weights):
    for k, (s1, s2) in enumerate(pairs):
        F, _, _ = reference_tables(s1, s2, weights, geo.w_outer, geo.w_inner)
        i1, j1, i2, j2 = cells(geo, len(s1), len(s2))
        want = np.array([F[a][b][c][d] for a, b, c, d in zip(i1, j1, i2, j2)])
        assert np.array_equal(table[k][cell_index(geo, i1, j1, i2, j2)], want), (s1, s2)


@pytest.mark.slow
def test_fused_split_kernel_interpret_equals_reference(monkeypatch):
    """All splits of an outer diagonal in one Pallas kernel (interpret mode): a batch of pairs
    in one launch, then pair after pair (a batch too large for one launch's offsets)."""
    import jaxrna.kernels.bpmax_splits as splits

    rng = random.Random(21)
    weights = parse_weights("bpmax")
    pairs = [(random_strand(rng, 8 - k), random_strand(rng, 17 + 3 * k)) for k in range(2)]
    table, _, _ = fill(pairs, FUSED, weights)
    check_against_reference(table, pairs, FUSED, weights)
    monkeypatch.setattr(splits, "MAX_ELEMENTS", int(np.prod(FUSED.table_shape())) + 1)
    splits._batched.cache_clear()
    try:
        each, _, _ = fill(pairs, dataclasses.replace(FUSED, inner_blocks=3), weights)
    finally:
        splits._batched.cache_clear()
    check_against_reference(each, pairs, FUSED, weights)


def test_stored_programs_change_with_the_sources(tmp_path, monkeypatch):
    """The executable store must never load a program built from older code: its key carries
    a hash of every jaxrna source file, so editing any of them gives every program a new key."""
    import os
    import shutil

    import jax

    import jaxrna
    from jaxrna import program_keys, programs

    device = jax.devices("cpu")[0]
    args = (np.zeros((2, 8), np.int32),)
    key = programs.program_key("interact.batch", args, {"w": 1}, device)
    assert programs.program_key("interact.batch", args, {"w": 1}, device) == key
    copy = tmp_path / "jaxrna"
    shutil.copytree(os.path.dirname(jaxrna.__file__), copy,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "interact" / "recurrence.py").write_text(
        (copy / "interact" / "recurrence.py").read_text() + "\n# edited\n")
    monkeypatch.setattr(program_keys, "__file__", str(copy / "program_keys.py"))
    monkeypatch.setattr(program_keys, "_source_hash", None)
    assert programs.program_key("interact.batch", args, {"w": 1}, device) != key
