"""A cold run's batches in the order their programs become ready
(:func:`jaxrna.pipeline.ready_first`, :func:`jaxrna.programs.readiness`): a
device runs the classes whose programs are compiled while the others still compile, and the
results still come out in input order."""

import concurrent.futures
import threading
import time

import pytest

from jaxrna.pipeline import ready_first, schedule


def test_ready_items_go_first_in_their_order_and_the_rest_as_they_become_ready():
    done = {"a": concurrent.futures.Future(), "c": concurrent.futures.Future()}
    for f in done.values():
        f.set_running_or_notify_cancel()
    ready = lambda x: x not in done or done[x].done()            # noqa: E731
    pending = lambda x: [done[x]] if x in done and not done[x].done() else []   # noqa: E731
    threading.Timer(0.2, lambda: done["c"].set_result(None)).start()
    threading.Timer(0.4, lambda: done["a"].set_result(None)).start()
    t0 = time.perf_counter()
    got = list(ready_first(["a", "b", "c", "d"], ready, pending, recheck_s=5))
    # b and d at once, then c (ready first), then a: woken by the futures, not by the recheck
    assert got == ["b", "d", "c", "a"]
    assert time.perf_counter() - t0 < 2


def test_without_programs_under_way_the_order_is_the_given_one():
    assert list(ready_first(range(5), lambda x: False, lambda x: [])) == [0, 1, 2, 3, 4]
    assert list(ready_first(range(5), lambda x: True, lambda x: [])) == [0, 1, 2, 3, 4]
    # a failed compilation (a done future whose program is not ready) does not spin
    failed = concurrent.futures.Future()
    failed.set_exception(RuntimeError("no"))
    assert list(ready_first([1, 2], lambda x: x == 2, lambda x: [failed])) == [2, 1]


def test_a_round_asks_once_per_key_not_per_item():
    """Thousands of batches in a few classes: the questions grow with the batches, not with
    their square (a class asked about once a round, a ready one never again)."""
    asked = []

    def ready(item):
        asked.append(item)
        return item[0] == "a"

    items = [("a" if k % 2 else "b", k) for k in range(4000)]
    got = list(ready_first(items, ready, lambda item: [], key=lambda item: item[0]))
    assert [x for x in got[:2000]] == [x for x in items if x[0] == "a"]
    assert [x for x in got[2000:]] == [x for x in items if x[0] == "b"]
    assert len(asked) <= 2 * len(items) + 2


def test_schedule_takes_the_reordered_batches_lazily():
    """schedule asks for the next batch only after dispatching one: a batch whose program
    becomes ready while the device runs another is picked then."""
    late = concurrent.futures.Future()
    late.set_running_or_notify_cancel()
    seen = []

    def run(batch, device):
        seen.append(batch)
        if batch == "b":
            late.set_result(None)          # "a"'s program is ready once "b" is dispatched
        return batch.upper()

    order = ready_first(["a", "b", "c"], lambda x: x != "a" or late.done(),
                        lambda x: [late] if x == "a" and not late.done() else [])
    out = [r for _, r in schedule(order, run, lambda b, p: p, depth=1)]
    assert seen == ["b", "a", "c"] and out == ["B", "A", "C"]


def test_a_class_is_ready_once_its_fill_is_and_pending_while_the_fill_is_under_way():
    """A batch starts with its fill (the device computes it while the traceback's compilation
    ends): the class counts as ready once the fill is, whatever its traceback's state."""
    from jaxrna import programs
    from jaxrna.energy import mfe_programs
    from jaxrna.energy.params import load_params

    programs.forget()
    params = load_params()
    device = programs.default_device()
    ready, pending = programs.readiness(mfe_programs.first_program(params, device))
    cls = (128, 2)
    assert pending(cls) == [] and not ready(cls)
    gates = {mfe_programs.FILL_PROGRAM: threading.Event(),
             mfe_programs.TRACE_PROGRAM: threading.Event()}
    real = programs._load_or_compile

    def gated(name, *args, **kwargs):
        gates[name].wait(60)
        return real(name, *args, **kwargs)

    futures = {}
    try:
        programs._load_or_compile = gated
        for name, source, specs, filled in mfe_programs._program_specs(128, 2, params, False):
            static = mfe_programs.static_for(device.platform, 128) if filled else {}
            jitted = mfe_programs.fill_jitted() if filled else mfe_programs.trace_jitted()
            programs.prefetch(name, jitted, specs, static, device, cpu_store=True, always=True)
            futures[name] = programs.in_flight(name, specs, static, device)
        # both under way: the fill's future is the class's, not ready
        assert pending(cls) == [futures[mfe_programs.FILL_PROGRAM]]
        assert not ready(cls)
        gates[mfe_programs.FILL_PROGRAM].set()
        futures[mfe_programs.FILL_PROGRAM].result(timeout=600)
        # the fill compiled, the traceback still under way: ready
        assert not futures[mfe_programs.TRACE_PROGRAM].done()
        assert ready(cls) and pending(cls) == []
    finally:
        for gate in gates.values():
            gate.set()
        programs._load_or_compile = real
    futures[mfe_programs.TRACE_PROGRAM].result(timeout=600)
    programs.forget()


@pytest.mark.parametrize("reverse", [False, True])
def test_mfe_results_in_input_order_whatever_order_the_batches_run(monkeypatch, reverse):
    """The energies and structures of a run over two classes are the same (and in input order)
    when its batches run in another order than the plan's."""
    import RNA

    from jaxrna import pipeline
    from jaxrna.energy import api
    from jaxrna.io.fasta import Record

    seqs = ["GGGGAAACCCC", "A" * 150 + "GGGCGCAAGCCU", "CCCAAAGGG", "GCGCUUCGGCGCAAA" * 12,
            "AUGGCUACGUAGCUAGCUAGGCUAGCUAGCUAGC"]
    recs = [Record(id=f"s{k}", sequence=s) for k, s in enumerate(seqs)]
    order = []
    if reverse:
        def backwards(items, ready, pending, **kwargs):
            items = list(items)[::-1]
            order.extend(b[0] for b in items)
            yield from items

        monkeypatch.setattr(pipeline, "ready_first", backwards)
    got = list(api.fold_energy_records(recs, backend="cpu"))
    assert [r.id for r in got] == [r.id for r in recs]
    for rec, res in zip(recs, got):
        structure, energy = RNA.fold_compound(rec.sequence).mfe()
        assert res.energy == round(energy * 100), rec.id
        assert res.structure == structure, rec.id
    if reverse:
        # two classes (128 and 256 nt), the longer's batch first
        assert len(set(order)) == 2 and order[0] > order[-1]


def test_nussinov_batches_ready_once_their_prefetched_program_is():
    """fold's GPU batches are ordered by the program :meth:`_Folder.program_of` names: it
    must be the one its prefetch prepares (same key), or a cold run would wait for every
    compilation before its first batch."""
    from jaxrna import programs
    from jaxrna.fold import api
    from jaxrna.weights import parse_weights

    programs.forget()
    folder = api._Folder(parse_weights("unit"), 3, True, "cpu", None, None, None, None)
    ready, pending = programs.readiness(folder.program_of)
    batch = (64, 8, [0, 1])
    assert ready(batch) is False and pending(batch) == []
    rows = folder.rows(2, 8)
    programs.prefetch("fold.tiles", api.tiles_jitted(), api._shape_args(rows, 64),
                      api._first_static(True, "cpu"), folder.devices[0], always=True)
    concurrent.futures.wait(pending(batch), timeout=600)
    assert ready(batch) is True
    programs.forget()
