"""Which engine computes ``fold --model turner --partition`` under ``--backend auto``
(:func:`jaxrna.cli.fold_energy.partition_engine`): ViennaRNA's on a machine without a GPU;
on a GPU host ViennaRNA's for jobs it finishes within ``GPU_PARTITION_FROM_S`` on the host's
cores (its estimate, :func:`jaxrna.energy.partition_vienna.estimate_seconds`), else the GPU;
the records read to decide are all passed on, in order."""

import pytest

from jaxrna.cli import fold_energy
from jaxrna.energy import partition_vienna, vienna
from jaxrna.io.fasta import Record

pytestmark = pytest.mark.skipif(not vienna.available(), reason="needs ViennaRNA")


@pytest.fixture
def gpu_host(monkeypatch):
    """A host with a GPU and 16 cores, as the choice sees it (no JAX started)."""
    from jaxrna import runtime

    monkeypatch.delenv(vienna.ENGINE_ENV, raising=False)
    monkeypatch.setattr(runtime, "gpu_possible", lambda: True)
    monkeypatch.setattr(runtime, "has_gpu", lambda: True)
    monkeypatch.setattr(vienna, "cpu_count", lambda: 16)


def test_without_a_gpu_auto_is_vienna_whatever_the_job(monkeypatch):
    from jaxrna import runtime

    monkeypatch.delenv(vienna.ENGINE_ENV, raising=False)
    monkeypatch.setattr(runtime, "gpu_possible", lambda: False)
    for lengths in (None, [200] * 10, [4000]):
        assert fold_energy.partition_engine("auto", lengths) == "vienna"
    assert fold_energy.partition_engine("cpu", [200]) == "jax"


def test_on_a_gpu_host_large_jobs_go_to_the_gpu(gpu_host, monkeypatch):
    choose = fold_energy.partition_engine
    assert choose("auto", [200] * 2000) == "vienna"     # ~18 s for ViennaRNA on 16 cores
    assert choose("auto", [200] * 4000) == "jax"        # ~37 s
    assert choose("auto", [1000, 300]) == "vienna"      # the longest alone ~8 s
    assert choose("auto", [2000]) == "jax"              # ~47 s on its one core
    assert choose("auto", None) == "jax"                # jaxrna warmup prepares the GPU's
    assert choose("gpu", [20]) == "jax"
    monkeypatch.setenv(vienna.ENGINE_ENV, "vienna")     # forced, either way
    assert choose("auto", [4000]) == "vienna"
    monkeypatch.setenv(vienna.ENGINE_ENV, "jax")
    assert choose("auto", [20]) == "jax"
    # the estimate the choice reads grows with the records and their length
    assert partition_vienna.estimate_seconds([2000], 16) > fold_energy.GPU_PARTITION_FROM_S
    assert partition_vienna.estimate_seconds([200] * 2000, 16) < fold_energy.GPU_PARTITION_FROM_S


def test_the_peek_reads_until_it_knows_and_passes_every_record_on(gpu_host):
    records = [Record(f"r{k}", "ACGU" * (25 if k != 3 else 500)) for k in range(10)]
    passed, lengths = fold_energy._peek_lengths(iter(records), fold_energy.GPU_PARTITION_FROM_S)
    assert lengths == [100, 100, 100, 2000]             # the 2,000 nt record decides
    assert [r.id for r in passed] == [r.id for r in records]
    short = [Record(f"s{k}", "GGGAAACCC") for k in range(5)]
    passed, lengths = fold_energy._peek_lengths(iter(short), fold_energy.GPU_PARTITION_FROM_S)
    assert lengths == [9] * 5 and [r.id for r in passed] == [r.id for r in short]


def test_a_middle_job_goes_to_the_gpu_only_where_its_programs_are_stored(gpu_host, monkeypatch,
                                                                          tmp_path):
    """``--partition`` jobs ViennaRNA would take (estimate under GPU_PARTITION_FROM_S): from
    WARM_GPU_PARTITION_FROM_S up, the GPU where every program it would run is stored; smaller
    jobs, and any job while the store holds no executable, never ask JAX."""
    import jax

    from jaxrna import runtime
    from jaxrna.energy import partition_jax

    def never(*_):
        raise AssertionError("JAX was asked")
    monkeypatch.setattr(runtime, "has_gpu", never)
    assert fold_energy.warm_gpu_partition([200] * 50, None) is False       # ~0.5 s
    cache = tmp_path / "cache"
    monkeypatch.setenv("JAXRNA_CACHE_DIR", str(cache))
    assert fold_energy.warm_gpu_partition([200] * 2000, None) is False     # an empty store
    (cache / "executables").mkdir(parents=True)
    (cache / "executables" / "x.bin").write_bytes(b"")
    monkeypatch.setattr(runtime, "has_gpu", lambda: True)
    monkeypatch.setattr(runtime, "devices", lambda backend=None: jax.devices("cpu"))
    seen = []
    for stored in (True, False):
        monkeypatch.setattr(partition_jax, "programs_stored",
                            lambda lengths, device, max_bytes, s=stored: seen.append(len(lengths)) or s)
        assert fold_energy.warm_gpu_partition([200] * 2000, None) is stored   # ~18 s
    assert seen == [2000, 2000]
    assert partition_vienna.estimate_seconds([200] * 2000, 16) >= fold_energy.WARM_GPU_PARTITION_FROM_S


def test_the_verbose_line_says_jax_started_for_the_store_check_only(gpu_host, monkeypatch,
                                                                     tmp_path, capsys):
    """``-v`` on a job the store check sent to ViennaRNA after starting JAX says so; a job
    that never started JAX says "without JAX"."""
    import jax

    from jaxrna import runtime
    from jaxrna.energy import partition_jax

    cache = tmp_path / "cache"
    monkeypatch.setenv("JAXRNA_CACHE_DIR", str(cache))
    (cache / "executables").mkdir(parents=True)
    (cache / "executables" / "x.bin").write_bytes(b"")
    monkeypatch.setattr(runtime, "has_gpu", lambda: True)
    monkeypatch.setattr(runtime, "devices", lambda backend=None: jax.devices("cpu"))
    monkeypatch.setattr(partition_jax, "programs_stored", lambda *a: False)
    runtime.announce_device("fold")
    assert fold_energy.warm_gpu_partition([200] * 2000, None) is False
    runtime.announce_host("--backend auto", "ViennaRNA", "on 2 processes")
    assert capsys.readouterr().err.strip().endswith(
        "ViennaRNA on 2 processes, JAX started for a look at the store only")
    runtime.announce_device("fold")
    assert fold_energy.warm_gpu_partition([200] * 50, None) is False       # no check: small
    runtime.announce_host("--backend auto", "ViennaRNA", "on 2 processes")
    assert capsys.readouterr().err.strip().endswith("ViennaRNA on 2 processes, without JAX")
    runtime.announce_device(None)


def test_programs_stored_knows_a_run_of_the_same_plan(tmp_path, monkeypatch):
    """After a run of the JAX engine over some records (programs stored), another job of the
    same classes finds every program stored; a job of another class does not."""
    import jax

    from jaxrna import programs
    from jaxrna.energy.api import EnergyModel
    from jaxrna.energy.partition_jax import partition_records, programs_stored
    from jaxrna.runtime import enable_compilation_cache

    monkeypatch.setenv("JAXRNA_CACHE_DIR", str(tmp_path / "cache"))
    assert enable_compilation_cache() is not None
    programs.forget()
    device = jax.devices("cpu")[0]
    records = [Record(f"r{k}", "GGGAAACCCAUCGAUGC" * 4) for k in range(3)]      # 68 nt
    assert not programs_stored([68, 68, 68], device)
    list(partition_records(records, EnergyModel(), backend="cpu"))
    programs.forget()                               # only the store counts now
    assert programs_stored([60, 70], device)
    assert not programs_stored([60, 300], device)
