"""A cold GPU run's cheap batches folded by ViennaRNA on the host while programs compile
(:mod:`jaxrna.energy.host_help`): the results of jaxrna's engine alone, record for record, with
the batches split between both; the host takes only batches whose program is missing; the
programs of the batches it took are ready afterwards (a later run needs no help)."""

import random

import pytest

from jaxrna.energy import api, host_help
from jaxrna.energy.api import EnergyModel, fold_energy_records
from jaxrna.io.fasta import Record

pytest.importorskip("RNA")


def _records(rng, count, lo, hi):
    return [Record(f"r{k}", "".join(rng.choice("ACGU") for _ in range(rng.randint(lo, hi))))
            for k in range(count)]


def _fold(records, model, help_processes, unpaired=None):
    return [(r.id, r.energy, r.pairs) for r in fold_energy_records(
        records, model, backend="cpu", unpaired=unpaired, host_help=help_processes)]


@pytest.mark.parametrize("processes", [1, 2])
def test_split_between_host_and_device_gives_the_engines_results(monkeypatch, processes):
    rng = random.Random(31 + processes)
    # class 128 (short: the host's, its program reported missing) and class 256 (the
    # device's); with 2 processes enough letters for ViennaRNA's process pool
    records = _records(rng, 12 if processes == 1 else 40, 1, 120) + _records(rng, 5, 140, 250)
    rng.shuffle(records)
    model = EnergyModel("turner1999", 30.0, 0) if processes == 2 else EnergyModel()
    unpaired = {records[0].id: (0, 1, 2), records[3].id: (5,)}
    alone = _fold(records, model, 0, unpaired)

    taken = []
    real_choose = host_help.choose

    def choose(plan, lengths, ready, procs, budget=host_help.HOST_SECONDS):
        out = real_choose(plan, lengths, ready, procs, budget)
        taken.extend(plan[i][0] for i in out)
        return out

    monkeypatch.setattr(host_help, "choose", choose)
    monkeypatch.setattr(api, "program_available", lambda length, rows, p, d: length != 128)
    ensured = []
    monkeypatch.setattr(api, "ensure_program",
                        lambda length, rows, p, d: ensured.append((length, rows)))
    helped = _fold(records, model, processes, unpaired)
    assert helped == alone
    assert set(taken) == {128} and len(taken) == -(-sum(len(r) <= 128 for r in records) // 8)
    assert ensured == [(128, api.batch_rows_for(128, "cpu", 1 << 30))]


def test_no_help_where_every_program_is_ready_or_none_is_asked(monkeypatch):
    rng = random.Random(5)
    records = _records(rng, 6, 10, 100)
    started = []
    monkeypatch.setattr(host_help.HostFold, "start", lambda self: started.append(self))
    monkeypatch.setattr(api, "program_available", lambda *a: True)
    assert len(_fold(records, EnergyModel(), 2)) == 6
    assert started == []                             # everything ready: the device's
    monkeypatch.setattr(api, "program_available", lambda *a: False)
    assert len(_fold(records, EnergyModel(), 0)) == 6
    assert started == []                             # no processes: no help


def test_choice_budget_and_host_processes(monkeypatch):
    plan = [(128, 8, [0]), (256, 8, [1, 2]), (512, 8, [3])]
    lengths = [100, 200, 250, 500]
    cold = lambda b: False                           # noqa: E731
    # the cheapest first, within the budget on the processes
    assert host_help.choose(plan, lengths, cold, 1, 0.01) == [0]
    assert host_help.choose(plan, lengths, cold, 1, 0.1) == [0, 1]
    assert host_help.choose(plan, lengths, cold, 4, 0.1) == [0, 1, 2]
    assert host_help.choose(plan, lengths, lambda b: b[0] == 256, 4, 10) == [0, 2]
    assert host_help.vienna_seconds(400) > 4 * host_help.vienna_seconds(200)
    from jaxrna.energy import vienna

    monkeypatch.setattr(vienna, "cpu_count", lambda: 4)
    assert host_help.host_processes() == 0          # few cores: they compile
    monkeypatch.setattr(vienna, "cpu_count", lambda: 16)
    monkeypatch.setenv("JAXRNA_COMPILE_PROCESSES", "6")
    assert host_help.host_processes() == 9
    monkeypatch.setenv("JAXRNA_ENERGY_ENGINE", "jax")
    assert host_help.host_processes() == 0          # jaxrna's engine forced: no ViennaRNA
