"""Which form of the interior loop the energy model's classes run
(:func:`jaxrna.energy.api.static_for`): one per class, the Pallas kernels for a GPU's classes up
to 256 nt and one gather per group of members everywhere else; the environment can force
another form for comparisons, with the same results. The form is the fill program's
(:data:`jaxrna.energy.api.FILL_PROGRAM`); the traceback has one."""

import jax
import numpy as np
import pytest

from energy_oracle import vienna_mfe
from jaxrna.energy import api
from jaxrna.energy.params import load_params

SEQS = ["GGGGAAACCCC", "GGGAAAUCCCAGCUAGCUAGGCAUCGAUCGAUUAGCGCGAUAUCG" * 7]


@pytest.fixture
def unforced(monkeypatch):
    """No interior loop forced by the environment, and a CUDA GPU wherever one is asked about."""
    import jaxrna.energy.fill_plan as fill_plan

    monkeypatch.delenv("JAXRNA_ENERGY_INTERIOR", raising=False)
    monkeypatch.delenv("JAXRNA_ENERGY_INTERIOR_LONG", raising=False)
    monkeypatch.setattr(fill_plan, "_cuda", lambda: True)


def test_each_class_has_one_form(unforced, monkeypatch):
    import jaxrna.energy.mfe_programs as mp

    monkeypatch.setattr(mp, "usable", lambda name: True)
    assert api.static_for("gpu", 512) == {"interior": "gather", "bands": 1}
    assert api.static_for("gpu", 4096) == {"interior": "gather", "bands": 2}
    assert api.static_for("gpu", 256)["interior"] == "pallas"
    assert api.static_for("cpu", 512) == {"interior": "gather", "bands": 2}
    monkeypatch.setattr(mp, "usable", lambda name: False)     # kernels that failed to build
    assert api.static_for("gpu", 256)["interior"] == "gather"
    monkeypatch.setenv("JAXRNA_ENERGY_INTERIOR_LONG", "jax")   # the slices, for an A/B
    assert api.static_for("gpu", 512)["interior"] == "jax"
    monkeypatch.setenv("JAXRNA_ENERGY_INTERIOR_LONG", "loop")
    assert api.static_for("gpu", 512)["interior"] == "loop"
    assert api.static_for("cpu", 512)["interior"] == "gather"  # only a GPU's long classes


@pytest.mark.slow
@pytest.mark.parametrize("form", ["jax", "loop"])
def test_the_forms_fold_alike(form, monkeypatch):
    """A GPU's 512-nt class as it runs here (the gather) and forced to another form: the
    same energies and structures, and ViennaRNA's energy."""
    monkeypatch.delenv("JAXRNA_ENERGY_INTERIOR", raising=False)
    params = load_params()
    monkeypatch.setenv("JAXRNA_ENERGY_INTERIOR_LONG", "gather")
    gather = api._collect(api._launch(SEQS, params, 2, None, True, 512, 2, "gpu"))
    monkeypatch.setenv("JAXRNA_ENERGY_INTERIOR_LONG", form)
    other = api._collect(api._launch(SEQS, params, 2, None, True, 512, 2, "gpu"))
    assert [e for e, _ in other] == [e for e, _ in gather]
    for (_, a), (_, b) in zip(other, gather):
        np.testing.assert_array_equal(a, b)
    assert gather[1][0] == vienna_mfe(SEQS[1], 2, 37.0, ())[0]


@pytest.mark.gpu
def test_on_a_gpu_the_gather_folds_as_the_loop(monkeypatch):
    monkeypatch.delenv("JAXRNA_ENERGY_INTERIOR", raising=False)
    monkeypatch.delenv("JAXRNA_ENERGY_INTERIOR_LONG", raising=False)
    device = jax.devices("gpu")[0]
    params = load_params()
    with jax.default_device(device):
        assert api.static_for("gpu", 512)["interior"] == "gather"
        got = api._collect(api._launch(SEQS, params, 2, None, True, 512, 2))
        monkeypatch.setenv("JAXRNA_ENERGY_INTERIOR_LONG", "loop")
        loop = api._collect(api._launch(SEQS, params, 2, None, True, 512, 2))
    assert [e for e, _ in got] == [e for e, _ in loop]
    for (_, a), (_, b) in zip(got, loop):
        np.testing.assert_array_equal(a, b)
    assert got[1][0] == vienna_mfe(SEQS[1], 2, 37.0, ())[0]
