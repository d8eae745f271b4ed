"""Which form of the interior loop a GPU's long energy-model classes run
(:func:`jaxrna.energy.api.static_for`): the unrolled slices where their program is stored
(``jaxrna warmup`` prepares it), else the rolled loop; the same results either way. The form
is the fill program's (:data:`jaxrna.energy.api.FILL_PROGRAM`); the traceback has one."""

import jax
import numpy as np
import pytest

from energy_oracle import vienna_mfe
from jaxrna import programs, stages
from jaxrna.energy import api
from jaxrna.energy.fill import prepare_batch
from jaxrna.energy.params import load_params

SEQS = ["GGGGAAACCCC", "GGGAAAUCCCAGCUAGCUAGGCAUCGAUCGAUUAGCGCGAUAUCG" * 7]


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A program store in ``tmp_path`` and no interior loop forced by the environment."""
    monkeypatch.delenv("JAXRNA_ENERGY_INTERIOR", raising=False)
    monkeypatch.delenv("JAXRNA_ENERGY_INTERIOR_LONG", raising=False)
    programs.use_disk(str(tmp_path))
    try:
        yield tmp_path
    finally:
        programs.use_disk(None)
        programs.forget()


def _args(seqs, length=512):
    """The fill program's arguments (the batch program's less ``with_pairs``)."""
    params = load_params()
    return api.program_args(prepare_batch(seqs, params, length), params, length, 2, True)[:-1]


def _specs(args):
    return jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype), args)


def test_the_slices_run_where_warmup_stored_them(store, monkeypatch):
    device = jax.devices("cpu")[0]
    args = _args(SEQS)
    assert api.static_for("gpu", 512, args, device)["interior"] == "loop"   # nothing stored
    fast = api.static_for("gpu", 512, args, device, fast=True)
    assert fast["interior"] == "jax"
    # what warmup stores (the shapes of a batch of empty rows) is what a run looks up
    empty = _specs(_args(["", ""]))
    assert api.static_for("gpu", 512, empty, device, fast=True) == fast
    path = programs.store_path(programs.store_key(api.FILL_PROGRAM, empty, fast, device, True),
                               device, True)
    assert not programs.stored(api.FILL_PROGRAM, args, fast, device, True)
    (store / "executables").mkdir()
    open(path, "wb").close()
    assert programs.stored(api.FILL_PROGRAM, args, fast, device, True)
    assert programs.stored(api.FILL_PROGRAM, empty, fast, device, True)
    assert api.static_for("gpu", 512, args, device) == fast
    # another row count is another program, not stored
    assert api.static_for("gpu", 512, _args(SEQS * 2), device)["interior"] == "loop"
    # CPUs and the classes of the Pallas kernel keep their form; the environment decides first
    assert api.static_for("cpu", 512, args, device)["interior"] == "loop"
    assert api.static_for("gpu", 256, _args(SEQS[:1], 256), device, fast=True)["interior"] \
        != "jax"
    monkeypatch.setenv("JAXRNA_ENERGY_INTERIOR_LONG", "loop")
    assert api.static_for("gpu", 512, args, device)["interior"] == "loop"


def test_without_a_store_a_run_takes_the_loop(monkeypatch):
    monkeypatch.delenv("JAXRNA_ENERGY_INTERIOR", raising=False)
    monkeypatch.delenv("JAXRNA_ENERGY_INTERIOR_LONG", raising=False)
    programs.use_disk(None)
    assert api.static_for("gpu", 1024, _args(SEQS, 1024), jax.devices("cpu")[0]) \
        == {"interior": "loop", "bands": 1}


@pytest.mark.slow
def test_a_run_after_the_fast_form_was_prepared_uses_it_with_the_same_results(store):
    """prepare_program(fast=True) compiles and stores the slices; a run of the class (as a GPU
    would pick, on this CPU) then compiles nothing and gives the loop's energies and pairs."""
    params = load_params()
    device = jax.devices("cpu")[0]
    loop = api._collect(api._launch(SEQS, params, 2, None, True, 512, 2, "cpu"))
    api.prepare_program(512, 2, params, _GpuLabel(device), fast=True)
    before = stages.counts().get("executables_compiled", 0)
    fast = api._collect(api._launch(SEQS, params, 2, None, True, 512, 2, "gpu"))
    assert stages.counts().get("executables_compiled", 0) == before      # loaded, not compiled
    assert [e for e, _ in fast] == [e for e, _ in loop]
    for (_, a), (_, b) in zip(fast, loop):
        np.testing.assert_array_equal(a, b)
    assert fast[1][0] == vienna_mfe(SEQS[1], 2, 37.0, ())[0]


class _GpuLabel:
    """A CPU device that says it is a GPU's (the programs a GPU would pick, run here)."""

    platform = "gpu"

    def __init__(self, device):
        self._device = device

    def __getattr__(self, name):
        return getattr(self._device, name)


@pytest.mark.gpu
def test_on_a_gpu_the_stored_fast_form_runs_and_gives_the_loops_results(store):
    device = jax.devices("gpu")[0]
    params = load_params()
    with jax.default_device(device):
        args = _args(SEQS)
        loop = api._collect(api._launch(SEQS, params, 2, None, True, 512, 2))   # none stored
        fast = api.static_for("gpu", 512, args, device, fast=True)
        assert fast["interior"] == "jax"
        assert not programs.stored(api.FILL_PROGRAM, args, fast, device, True)
        api.prepare_program(512, 2, params, device, fast=True)
        assert programs.stored(api.FILL_PROGRAM, args, fast, device, True)
        before = stages.counts().get("executables_compiled", 0)
        got = api._collect(api._launch(SEQS, params, 2, None, True, 512, 2))
        assert stages.counts().get("executables_compiled", 0) == before
    assert [e for e, _ in got] == [e for e, _ in loop]
    for (_, a), (_, b) in zip(got, loop):
        np.testing.assert_array_equal(a, b)
    assert got[1][0] == vienna_mfe(SEQS[1], 2, 37.0, ())[0]
