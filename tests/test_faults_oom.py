"""Out of device memory (issue 15): XLA's RESOURCE_EXHAUSTED errors are recognised whatever
their class; batched work is retried in halves down to single items (same output); an item
that does not fit alone is named with the memory it asked for; anything else that runs out
of memory ends with one line and exit 2. There is no GPU here: the error is injected (the
real ``jax.errors.JaxRuntimeError`` with XLA's text) into the functions that run a batch."""

import os

import pytest
from jax.errors import JaxRuntimeError

from conftest import TEST_DATA
from faults_common import assert_one_error
from jaxrna.cli import main
from jaxrna.oom import (DeviceMemoryError, describe_out_of_memory, is_out_of_memory,
                        needed_bytes, split_on_oom)

XLA_OOM = ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 6442450944 bytes.\n"
           "BufferAssignment OOM Debugging.\n...")


def oom() -> JaxRuntimeError:
    return JaxRuntimeError(XLA_OOM)


def test_recognised_and_measured():
    assert is_out_of_memory(oom()) and needed_bytes(oom()) == 6 << 30
    assert is_out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: Failed to allocate request for "
                                         "1.50GiB (1610612736B) on device ordinal 0"))
    assert needed_bytes(RuntimeError("allocation of 1.5GiB failed")) == int(1.5 * 2**30)
    assert not is_out_of_memory(RuntimeError("INVALID_ARGUMENT: shapes")) \
        and not is_out_of_memory(ValueError("RESOURCE_EXHAUSTED"))
    assert describe_out_of_memory(oom(), "record 'x'") == (
        "record 'x': out of device memory (an allocation of 6.0 GiB did not fit); use a device "
        "with more memory, --backend cpu, or shorter sequences")


def test_split_on_oom_halves_down_to_single_items():
    calls = []

    def run(batch):
        calls.append(list(batch))
        if len(batch) > 1 or batch == ["big"]:
            raise oom()
        return [x.upper() for x in batch]

    skipped = []
    got = split_on_oom(run, ["a", "b", "big", "c", "d"], lambda x: f"record '{x}'",
                       on_error=lambda x, e: skipped.append((x, str(e))))
    assert got == ["A", "B", None, "C", "D"]
    assert calls[0] == ["a", "b", "big", "c", "d"] and calls[1] == ["a", "b", "big"]
    assert skipped == [("big", "out of device memory (an allocation of 6.0 GiB did not fit); "
                               "use a device with more memory, --backend cpu, or shorter "
                               "sequences")]
    with pytest.raises(DeviceMemoryError, match=r"^record 'big': out of device memory"):
        split_on_oom(run, ["big"], lambda x: f"record '{x}'")
    with pytest.raises(KeyError):                       # other errors are not retried
        split_on_oom(lambda b: {}["x"], ["a", "b"], str)


def _inject(monkeypatch, module, name, fails):
    """Wrap ``module.name(items, ...)``: raise XLA's OOM when ``fails(items)``."""
    real = getattr(module, name)
    sizes = []

    def wrapped(items, *args, **kwargs):
        sizes.append(len(items))
        if fails(items):
            raise oom()
        return real(items, *args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return sizes


@pytest.mark.slow
def test_align_retries_in_smaller_batches(monkeypatch):
    import jaxrna.align.api as api
    from jaxrna.align.scoring import make_scoring
    from jaxrna.io import read_fasta

    queries = list(read_fasta(os.path.join(TEST_DATA, "align_queries.fa"), alphabet="letters"))
    targets = list(read_fasta(os.path.join(TEST_DATA, "align_targets.fa"), alphabet="letters"))
    pairs = [(q, t) for q in queries for t in targets]
    scoring = make_scoring(None, None, None, None, None, None)

    def align():
        return [(a.score, a.ops) for a in api.align_records(pairs, scoring, backend="cpu")]

    want = align()
    sizes = _inject(monkeypatch, api, "_run_batch", lambda jobs: len(jobs) > 1)
    assert align() == want
    assert max(sizes) > 1 and sizes.count(1) == len(pairs)


def test_interact_pair_that_does_not_fit_alone(monkeypatch, capsys):
    """Three pairs: the batch is split; the pair that does not fit even alone is skipped with
    its name and the memory it asked for (exit 2), the others are in the output."""
    import jaxrna.interact.api as api

    a, b = (os.path.join(TEST_DATA, f"interact_{x}.fa") for x in "ab")
    sizes = _inject(monkeypatch, api, "run_problems",
                    lambda probs: len(probs) > 1 or probs[0].rec1.id == "tv2_s1")
    code = main(["interact", a, b, "--pairs", "zip", "-f", "tsv"])
    out, err = capsys.readouterr()
    assert sizes == [3, 2, 1, 1, 1]
    with open(os.path.join(TEST_DATA, "interact_zip.tsv")) as fh:
        assert out == "".join(line for line in fh if not line.startswith("tv2_"))
    assert code == 2
    lines = err.splitlines()       # (also: the retries, then the summary of what failed)
    assert lines[0] == "jaxrna: out of device memory for a batch of 3; retrying in batches " \
                       "of 2 and 1"
    assert "Traceback" not in err and "jaxrna: pair 'tv2_s1 x tv2_s2' skipped: " \
        "out of device memory (an allocation of 6.0 GiB did not fit); use a device with more " \
        "memory, --backend cpu, or shorter sequences" in lines
    assert lines[-1] == (
        "jaxrna: 1 pair failed and was left out of the output: tv2_s1 x tv2_s2")


@pytest.mark.slow
def test_fold_batches_launched_ahead_are_retried_in_halves(monkeypatch):
    """fold launches batches ahead and collects them later: out of memory at launch or at
    collection, the batch is folded again in halves; a record that does not fit alone goes
    to on_error, or is raised naming it."""
    import jaxrna.fold.api as api
    from jaxrna.io.fasta import Record

    recs = [Record(f"r{k}", "GGGAAAUCCC"[k:] + "GCGCAAAGCGC"[:k + 2]) for k in range(5)]
    want = [(r.id, r.score_units, r.pairs) for r in api.fold_records(recs, backend="host")]
    launch, collect = api._Folder.launch, api._Folder._collect_batch
    sizes = []

    def launch_small(self, job, *device):          # a batch of several: no room at launch
        if job.kind != "batch":
            return launch(self, job, *device)
        sizes.append(len(job.members))
        return oom() if len(job.members) > 1 else launch(self, job, *device)

    def collect_but(self, job, outputs):           # one record: no room when collected
        if job.chunk.ids[int(job.members[0])] == fails_alone:
            raise oom()
        return collect(self, job, outputs)

    monkeypatch.setattr(api._Folder, "launch", launch_small)
    monkeypatch.setattr(api._Folder, "_collect_batch", collect_but)
    fails_alone = None
    got = [(r.id, r.score_units, r.pairs) for r in api.fold_records(recs, backend="cpu")]
    assert got == want and sizes[0] == 5 and sizes.count(1) == 5
    fails_alone, skipped = "r3", []
    got = [r.id for r in api.fold_records(recs, backend="cpu",
                                          on_error=lambda rec, e: skipped.append((rec.id, e)))]
    assert got == ["r0", "r1", "r2", "r4"]
    assert [(rid, type(e).__name__) for rid, e in skipped] == [("r3", "DeviceMemoryError")]
    with pytest.raises(DeviceMemoryError, match=r"^record 'r3': out of device memory \(an "
                                                r"allocation of 6\.0 GiB did not fit\)"):
        list(api.fold_records(recs, backend="cpu"))


def test_unbatched_out_of_memory_is_one_line(monkeypatch, capsys):
    """Wherever the work is not batched (or the error escapes), main() says it in one line."""
    import jaxrna.fold.api as api

    def fold_records(*args, **kwargs):
        raise oom()
        yield

    monkeypatch.setattr(api, "fold_records", fold_records)
    monkeypatch.setattr(api, "fold_batches", fold_records)
    code = main(["fold", "--model", "nussinov", "--sequence", "GGGAAAUCCC", "-q"])
    err = capsys.readouterr().err
    assert_one_error((code, err), located=False)
    assert err == ("jaxrna: error: out of device memory (an allocation of 6.0 GiB did not "
                   "fit); use a device with more memory, --backend cpu, or shorter sequences\n")


@pytest.mark.slow
@pytest.mark.parametrize("where", ["launch", "collect"])
def test_align_cli_engine_batches_are_retried_in_pieces(monkeypatch, capsys, where):
    """The CLI's alignment engine launches batches ahead: out of memory at launch or when a
    batch is collected, that batch is aligned again in pieces (halves down to single pairs)
    and the output is the same, byte for byte."""
    import jaxrna.align.api as api
    import jaxrna.align.engine as engine

    q, t = (os.path.join(TEST_DATA, f"align_{x}.fa") for x in ("queries", "targets"))
    args = ["align", q, t, "--mode", "local", "-f", "tsv", "--backend", "cpu", "-q"]
    monkeypatch.setenv("JAXRNA_ALIGN_ENGINE", "device")
    assert main(args) == 0
    want = capsys.readouterr().out
    real = getattr(engine.DeviceRunner, where)
    failed = []

    def no_room(self, b, *rest):
        if len(b.positions) > 1:
            failed.append(len(b.positions))
            raise oom()
        return real(self, b, *rest)

    monkeypatch.setattr(engine.DeviceRunner, where, no_room)
    sizes = _inject(monkeypatch, api, "_run_batch", lambda jobs: len(jobs) > 1)
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert out == want and failed and sizes.count(1) >= sum(failed)
    assert "ran out of device memory" in err and "Traceback" not in err
