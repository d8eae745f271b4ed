"""The Pallas kernel of the energy fill's interior loops (jaxrna.kernels.shifted_min), run in
Pallas' interpret mode on the CPU, against its pure-JAX form and through the whole fill against
the fill without it and ViennaRNA."""

import functools
import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from energy_oracle import random_case, vienna_mfe, vienna_params
from jaxrna.energy.fill import fill, interior_mode, prepare_batch
from jaxrna.energy.params import load_params
from jaxrna.energy.terms import COL_PAD, ROW_PAD, device_params
from jaxrna.kernels.shifted_min import (INF, UNROLL, block_width, shifted_min,
                                        shifted_min_reference, tap_table)


def _taps(rng, groups, tables, max_loop):
    """Interior-loop-like taps: (dd, di) = (-2 - u1 - u2, 1 + u1), shuffled into groups."""
    cells = [(u1, u2) for u1 in range(max_loop + 1) for u2 in range(max_loop + 1 - u1)]
    rng.shuffle(cells)
    out, cost = [], 0
    for g in range(groups):
        members = cells[g::groups]
        out.append((tables[g], tuple((-2 - u1 - u2, 1 + u1, cost + m)
                                     for m, (u1, u2) in enumerate(members))))
        cost += len(members)
    return tuple(out), cost


@pytest.mark.slow
@pytest.mark.parametrize("height,cols,max_loop", [(5, 24, 3), (44, 80, 12), (150, 170, 9)])
def test_kernel_equals_reference_under_vmap(height, cols, max_loop):
    rng = np.random.default_rng(height)
    taps, count = _taps(random.Random(height), 3, (0, 2, 3), max_loop)
    rows = max_loop + 8
    T = rng.integers(-900, 900, (3, rows, 4, cols)).astype(np.int32)
    T[T > 600] = INF                         # impossible cells among the values
    costs = jnp.asarray(rng.integers(-50, 400, count), jnp.int32)
    d = jnp.int32(max_loop + 2)

    def run(t, kernel):
        f = shifted_min if kernel else shifted_min_reference
        extra = {"interpret": True} if kernel else {}
        return f(t, d, costs, taps, row_base=4, height=height, **extra)

    want = jax.vmap(lambda t: run(t, False))(T)
    got = jax.vmap(lambda t: run(t, True))(T)
    assert got.shape == want.shape == (3, 3, height)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    # the reference itself, for one cell, by hand
    g, (k, members) = 1, taps[1]
    i = height - 1
    by_hand = min((int(T[0, 4 + int(d) + dd, k, i + di]) if i + di < cols else INF) + int(costs[c])
                  for dd, di, c in members)
    assert int(want[0, g, i]) == by_hand


def test_tap_table_pads_groups_with_taps_that_cannot_win():
    rows, cost, groups = tap_table(((1, ((0, 1, 0),) * 3), (2, ((-1, 2, 3),) * 9)))
    assert rows.shape == (3 * UNROLL, 2) and groups == ((1, 0), (2, 1))
    assert cost.tolist().count(-1) == (UNROLL - 3) + (2 * UNROLL - 9)
    assert [block_width(h) for h in (1, 32, 33, 64, 65, 500)] == [32, 32, 64, 64, 128, 128]


def test_interior_mode_picks_the_kernel_on_gpus_only(monkeypatch):
    import jaxrna.energy.fill_plan as fill_module

    monkeypatch.delenv("JAXRNA_ENERGY_INTERIOR", raising=False)
    monkeypatch.delenv("JAXRNA_ENERGY_INTERIOR_LONG", raising=False)
    monkeypatch.setattr(fill_module, "_cuda", lambda: True)
    assert interior_mode("cpu") == "gather" and interior_mode("gpu") == "pallas"
    assert interior_mode("cpu", 4096) == "gather"
    assert interior_mode("gpu", 256) == "pallas" and interior_mode("gpu", 320) == "gather"
    monkeypatch.setenv("JAXRNA_ENERGY_INTERIOR_LONG", "jax")      # the slices, for an A/B
    assert interior_mode("gpu", 320) == "jax" and interior_mode("gpu", 256) == "pallas"
    monkeypatch.delenv("JAXRNA_ENERGY_INTERIOR_LONG")
    monkeypatch.setattr(fill_module, "_cuda", lambda: False)      # e.g. ROCm
    assert interior_mode("gpu") == "gather"
    monkeypatch.setenv("JAXRNA_ENERGY_INTERIOR", "interpret")
    assert interior_mode("gpu") == "interpret"


@functools.lru_cache(maxsize=None)
def _batched_fill(interior):
    """The fill of a batch, compiled once per ``interior`` and shape (``dangles`` traced)."""
    return jax.jit(jax.vmap(
        lambda s, a, sp, n, dp, dangles, stop: fill(s, a, sp, n, dp, dangles, stop,
                                                     interior=interior),
        in_axes=(0, 0, 0, 0, None, None, None)))


def _cells(T):
    """The tables' cells (i, i + d) that exist, i + d < L (a band also computes cells past
    the table's end, whose values mean nothing), others set to 0."""
    length = T.shape[-1] - COL_PAD
    d = np.arange(T.shape[1])[:, None] - ROW_PAD
    i = np.arange(T.shape[-1])[None, :]
    inside = (d >= 0) & (i + d < length) & (i < length)
    return np.where(inside[None, :, None, :], T, 0)


def _fill_all(stack, dp, dangles, interior):
    out = _batched_fill(interior)(stack["s"], stack["allowed"], stack["special"], stack["n"],
                                  dp, np.int32(dangles), np.int32(stack["n"].max()))
    return np.asarray(out["T"]), np.asarray(out["F"])


@pytest.mark.parametrize("dangles", [2, 0])
def test_the_gather_form_fills_the_tables_of_the_slices(dangles):
    """The interior loop read by one gather per group (the default where no kernel serves)
    fills every cell as the ~490 static slices do, and gives ViennaRNA's energies."""
    rng = random.Random(f"gather{dangles}")
    cases = [random_case(rng, 30, 64) for _ in range(5)] + [("GGGGAAACCCCAUCCGAAAGGAUG", ())]
    params = load_params()
    stack = prepare_batch([s for s, _ in cases], params, 64, [u for _, u in cases])
    dp = device_params(params, 64)
    T_jax, F_jax = _fill_all(stack, dp, dangles, "jax")
    T_gather, F_gather = _fill_all(stack, dp, dangles, "gather")
    np.testing.assert_array_equal(_cells(T_gather), _cells(T_jax))
    np.testing.assert_array_equal(F_gather, F_jax)
    with vienna_params("turner2004"):
        for k, (seq, up) in enumerate(cases):
            want, _, _ = vienna_mfe(seq, dangles, 37.0, up)
            assert int(F_gather[k, len(seq)]) == want, (seq, up)


@pytest.mark.slow
@pytest.mark.parametrize("name,temperature,dangles", [("turner2004", 37.0, 2),
                                                      ("turner1999", 30.0, 1),
                                                      ("turner2004", 55.0, 0)])
def test_fill_with_the_kernel_equals_fill_without_and_vienna(name, temperature, dangles):
    rng = random.Random(f"kernel{name}{dangles}")
    cases = [random_case(rng, 1, 64) for _ in range(7)] + [("GGGGAAACCCCAUCCGAAAGGAUG", ())]
    params = load_params(name, temperature)
    stack = prepare_batch([s for s, _ in cases], params, 64, [u for _, u in cases])
    dp = device_params(params, 64)
    T_jax, F_jax = _fill_all(stack, dp, dangles, "jax")
    T_ker, F_ker = _fill_all(stack, dp, dangles, "interpret")
    np.testing.assert_array_equal(_cells(T_ker), _cells(T_jax))    # every table and cell
    np.testing.assert_array_equal(F_ker, F_jax)
    for form in ("loop", "gather"):                                # the pure-JAX forms too
        T_form, F_form = _fill_all(stack, dp, dangles, form)
        np.testing.assert_array_equal(_cells(T_form), _cells(T_jax))
        np.testing.assert_array_equal(F_form, F_jax)
    with vienna_params(name):
        for k, (seq, up) in enumerate(cases):
            want, _, _ = vienna_mfe(seq, dangles, temperature, up)
            assert int(F_ker[k, len(seq)]) == want, (seq, up)


@pytest.mark.slow
def test_fill_with_the_kernel_over_several_blocks_of_cells():
    """A sequence long enough that a diagonal spans more than one program (128 cells)."""
    rng = random.Random("kernel-long")
    seq, up = random_case(rng, 150, 150)
    params = load_params()
    stack = prepare_batch([seq], params, 160, [up])
    dp = device_params(params, 160)
    T_jax, F_jax = _fill_all(stack, dp, 2, "jax")
    T_ker, F_ker = _fill_all(stack, dp, 2, "interpret")
    np.testing.assert_array_equal(_cells(T_ker), _cells(T_jax))
    with vienna_params("turner2004"):
        assert int(F_ker[0, 150]) == vienna_mfe(seq, 2, 37.0, up)[0]


@pytest.mark.slow
def test_targets_device_program_with_the_kernel(monkeypatch):
    """targets' energy program (duplex strings, linker held unpaired) with the kernel gives
    the energies of the one without it."""
    from jaxrna.targets import energy as E

    rng = np.random.default_rng(5)
    bases = np.frombuffer(b"ACGU", np.uint8)
    strings = [bases[rng.integers(0, 4, 22)].tobytes().decode() + E.LINKER +
               bases[rng.integers(0, 4, int(rng.integers(20, 31)))].tobytes().decode()
               for _ in range(12)] + ["GGGGAAACCCC" + E.LINKER + "GGGAAACCC"]
    inputs = E.encode(strings)
    special = E.special_hairpins(inputs)
    engine = E.DeviceEngine(batch=16)
    plain = engine.fold(inputs, special)
    monkeypatch.setenv("JAXRNA_ENERGY_INTERIOR", "interpret")
    with_kernel = engine.fold(inputs, special)
    np.testing.assert_array_equal(with_kernel, plain)
    assert len(set(plain.tolist())) > 5


@pytest.mark.slow
@pytest.mark.parametrize("height,cols,d", [(3, 8, 2), (40, 80, 23), (140, 176, 30)])
def test_split_kernel_equals_reference_under_vmap(height, cols, d):
    from jaxrna.kernels.shifted_min import split_min, split_min_reference

    rng = np.random.default_rng(d)
    T = rng.integers(-500, 500, (2, d + 6, 3, cols)).astype(np.int32)
    T[T > 300] = INF
    run = lambda f, **kw: jax.vmap(lambda t: f(t, jnp.int32(d), 1, row_base=3, height=height, **kw))(T)  # noqa: E731
    want, got = run(split_min_reference), run(split_min, interpret=True)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    i = height - 1                            # one cell by hand
    by_hand = min(int(T[1, 3 + t, 1, i]) + (int(T[1, 3 + d - 1 - t, 1, i + t + 1])
                                             if i + t + 1 < cols else INF) for t in range(d))
    assert int(want[1, i]) == by_hand


@pytest.mark.gpu
def test_compiled_kernels_on_the_gpu_equal_the_slices():
    """On a GPU: the fill with the Triton-compiled kernels equals the fill without them on
    every cell, for short sequences in a batch (what ``interior_mode`` picks there)."""
    rng = random.Random("gpu-kernels")
    cases = [random_case(rng, 1, 120) for _ in range(64)]
    params = load_params("turner1999", 30.0)
    stack = prepare_batch([s for s, _ in cases], params, 128, [u for _, u in cases])
    dp = device_params(params, 128)
    for dangles in (0, 1, 2):
        T_jax, F_jax = _fill_all(stack, dp, dangles, "jax")
        T_ker, F_ker = _fill_all(stack, dp, dangles, "pallas")
        # every cell (i, i + d) of the table, i + d < 128; the cells past its end are scratch
        # the two paths fill differently on a GPU (no cell of the table reads them)
        for d in range(128):
            np.testing.assert_array_equal(T_ker[:, ROW_PAD + d, :, :128 - d],
                                          T_jax[:, ROW_PAD + d, :, :128 - d], err_msg=f"d={d}")
        np.testing.assert_array_equal(F_ker, F_jax)
        assert (F_jax[np.arange(len(cases)), [len(s) for s, _ in cases]] < 0).sum() > 32
    assert interior_mode("gpu", 128) == "pallas"
