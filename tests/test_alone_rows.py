"""A record alone in its length class runs in a batch of one row on a GPU
(:func:`jaxrna.energy.batch_plan.alone_rows`): the class's second standard program, used only
where a run's records fit in one chunk, so a run still uses one row count per class."""

import pytest

from jaxrna.energy import batch_plan
from jaxrna.energy.batch_plan import ALONE_MIN_LENGTH, device_batches, standard_rows
from jaxrna.io.fasta import Record

BUDGET = 15 << 30


def test_a_long_record_alone_in_its_class_takes_one_row_on_a_gpu_only():
    full = batch_plan.batch_rows_for(2048, "gpu", BUDGET)
    assert full > 1
    assert device_batches([2000], "gpu", BUDGET) == [(2048, full, [0])]
    assert device_batches([2000], "gpu", BUDGET, alone=True) == [(2048, 1, [0])]
    # two records of the class: its fixed rows
    assert device_batches([2000, 1900], "gpu", BUDGET, alone=True) == [(2048, full, [0, 1])]
    # short classes keep their rows (a record of 300 nt alone: 512's rows)
    short = batch_plan.batch_rows_for(512, "gpu", BUDGET)
    assert device_batches([300], "gpu", BUDGET, alone=True) == [(512, short, [0])]
    assert ALONE_MIN_LENGTH > 512
    # a CPU's long classes have one row already; its short ones keep theirs
    assert device_batches([2000, 100], "cpu", 1 << 30, alone=True) == [(2048, 1, [0]),
                                                                        (128, 8, [1])]
    # a short record moved into the long class's spare rows: two records, the fixed rows
    assert device_batches([2000, 100], "gpu", BUDGET, alone=True) == [(2048, full, [0, 1])]


def test_every_row_count_a_plan_uses_is_a_standard_one():
    import random

    rng = random.Random("alone")
    for backend, budget in (("gpu", BUDGET), ("gpu", 80 << 30), ("cpu", 1 << 30)):
        for _ in range(200):
            lengths = [rng.choice([rng.randint(1, 600), rng.randint(600, 10_000)])
                       for _ in range(rng.randint(1, 4))]
            for alone in (False, True):
                plan = device_batches(lengths, backend, budget, alone=alone)
                assert sorted(k for _, _, b in plan for k in b) == list(range(len(lengths)))
                rows_of = {}
                for padded, rows, _ in plan:
                    assert rows in standard_rows(padded, backend, budget)
                    assert rows_of.setdefault(padded, rows) == rows     # one per class


def test_only_a_run_in_one_chunk_asks_for_batches_of_one_record(monkeypatch):
    from jaxrna.energy import api

    asked = []
    real = api.device_batches

    def spy(*args, alone=False, **kwargs):
        asked.append(alone)
        return real(*args, alone=alone, **kwargs)

    monkeypatch.setattr(api, "device_batches", spy)
    recs = [Record(id=f"s{k}", sequence="GGGGAAACCCC") for k in range(3)]
    one = list(api.fold_energy_records(recs, backend="cpu"))
    assert asked == [True]
    asked.clear()
    chunked = list(api.fold_energy_records(recs, backend="cpu", chunk=2))
    assert asked == [False, False]
    asked.clear()
    list(api.fold_energy_records(recs, backend="cpu", alone=False))
    assert asked == [False]
    import RNA

    want = round(RNA.fold_compound("GGGGAAACCCC").mfe()[1] * 100)        # ViennaRNA, dcal/mol
    assert [r.energy for r in one] == [r.energy for r in chunked] == [want] * 3


def test_the_partition_engine_asks_for_them_in_a_run_of_one_chunk(monkeypatch):
    from jaxrna.energy import partition_jax

    asked = []

    class Stop(Exception):
        pass

    def fake(records, model, **kwargs):
        asked.append(kwargs["alone"])
        raise Stop

    monkeypatch.setattr(partition_jax, "fold_energy_records", fake)
    recs = [Record(id=f"s{k}", sequence="GGGGAAACCCC") for k in range(3)]
    with pytest.raises(Stop):
        list(partition_jax.partition_records(recs, backend="cpu"))
    monkeypatch.setattr(partition_jax, "CHUNK", 2)
    with pytest.raises(Stop):
        list(partition_jax.partition_records(recs, backend="cpu"))
    assert asked == [True, False]


@pytest.mark.gpu
def test_on_a_gpu_a_record_alone_folds_in_one_row_as_in_its_class_batch():
    """The one-row program (traced without vmap) and the class's full batch give one record of
    1,100 nt the same energy and structure, ViennaRNA's."""
    import random

    import jax
    import numpy as np

    from energy_oracle import vienna_mfe
    from jaxrna.energy import api
    from jaxrna.energy.batch_plan import batch_rows_for, gpu_budget
    from jaxrna.energy.params import load_params

    rng = random.Random("alone on a gpu")
    seq = "".join(rng.choice("ACGU") for _ in range(1100))
    device = jax.devices("gpu")[0]
    budget = gpu_budget(device)
    assert device_batches([len(seq)], "gpu", budget, alone=True) == [(2048, 1, [0])]
    params = load_params()
    with jax.default_device(device):
        one = api._collect(api._launch([seq], params, 2, None, True, 2048, 1, "gpu"))
        full = api._collect(api._launch([seq], params, 2, None, True, 2048,
                                        batch_rows_for(2048, "gpu", budget), "gpu"))
    assert one[0][0] == full[0][0] == vienna_mfe(seq, 2, 37.0, ())[0]
    np.testing.assert_array_equal(one[0][1], full[0][1])
