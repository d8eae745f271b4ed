"""The GPU allocator a subcommand asks for, and the device memory its plans see under it."""

import pytest

from jaxrna import runtime


class _Gpu:
    """A stand-in CUDA device: ``stats`` is what its ``memory_stats()`` returns."""

    platform = "gpu"
    id = 0

    def __init__(self, stats):
        self.stats = stats

    def memory_stats(self):
        return self.stats


def test_memory_comes_from_the_driver_where_the_allocator_keeps_no_statistics(monkeypatch):
    """JAX's platform allocator reports no ``bytes_limit``: the plans then see the share of the
    card that the caching allocator would have had (0.75, or the user's fraction), so the
    batch rows -- and the programs -- do not depend on the allocator."""
    monkeypatch.setattr(runtime, "cuda_total_memory", lambda ordinal: 80 << 30)
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    assert runtime.device_memory_bytes(_Gpu(None)) == 60 << 30
    assert runtime.device_memory_bytes(_Gpu({"bytes_limit": 7 << 30})) == 7 << 30
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5")
    assert runtime.device_memory_bytes(_Gpu({})) == 40 << 30
    monkeypatch.setattr(runtime, "cuda_total_memory", lambda ordinal: 0)   # no CUDA driver
    assert runtime.device_memory_bytes(_Gpu(None)) == 0


def test_energy_rows_are_the_same_under_either_allocator(monkeypatch):
    """The turner batch plan of an 80 GB card is the same whether JAX's allocator reports the
    limit or the driver's memory stands in for it."""
    from jaxrna.energy.batch_plan import batch_rows_for, gpu_budget

    monkeypatch.setattr(runtime, "cuda_total_memory", lambda ordinal: 80 << 30)
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    caching, platform = _Gpu({"bytes_limit": 60 << 30}), _Gpu(None)
    assert gpu_budget(caching) == gpu_budget(platform)
    for length in (128, 512, 2048, 4096, 10240):
        assert batch_rows_for(length, "gpu", gpu_budget(caching)) == \
            batch_rows_for(length, "gpu", gpu_budget(platform))


@pytest.mark.parametrize("argv", [["fold"], ["fold", "--model", "turner"]])
def test_fold_asks_for_the_large_batch_allocator(monkeypatch, tmp_path, argv):
    """`fold` (both models) asks for :data:`~jaxrna.runtime.LARGE_BATCH_ALLOCATOR` before JAX
    starts (:func:`~jaxrna.runtime.gpu_memory_on_demand`; its doctests: set only where the user
    chose no allocator); the output is the same."""
    from jaxrna.cli import main

    asked = []
    monkeypatch.setattr(runtime, "gpu_memory_on_demand",
                        lambda allocator=None, _env=None: asked.append(allocator))
    fa = tmp_path / "a.fa"
    fa.write_text(">a\nGGGGAAACCCC\n")
    assert main(argv + [str(fa)] + ["-o", str(tmp_path / "out"), "-q"]) == 0
    assert asked[0] == runtime.LARGE_BATCH_ALLOCATOR
    assert (tmp_path / "out").read_text()


class _Driver:
    """A stand-in ``libcuda``: ``memory`` bytes on each of ``count`` devices; ``fails`` names
    the entry point that returns an error."""

    def __init__(self, memory, count=1, fails=None):
        self.memory, self.count, self.fails = memory, count, fails

    def cuInit(self, flags):
        return 100 if self.fails == "cuInit" else 0       # CUDA_ERROR_NO_DEVICE

    def cuDeviceGet(self, ref, ordinal):
        if ordinal >= self.count:
            return 101                                    # CUDA_ERROR_INVALID_DEVICE
        ref._obj.value = ordinal
        return 0

    def cuDeviceTotalMem_v2(self, ref, dev):
        assert dev.value < self.count                     # the device cuDeviceGet gave
        ref._obj.value = self.memory
        return 0


def test_cuda_total_memory_asks_the_driver(monkeypatch):
    """The card's memory as the driver says it, 0 without a driver or on its errors."""
    import ctypes

    def load(driver):
        def cdll(name, *args, **kwargs):
            assert name == "libcuda.so.1"
            if driver is None:
                raise OSError("libcuda.so.1: cannot open shared object file")
            return driver
        monkeypatch.setattr(ctypes, "CDLL", cdll)

    load(_Driver(80 << 30, count=2))
    assert runtime.cuda_total_memory(0) == 80 << 30
    assert runtime.cuda_total_memory(2) == 0               # no such device
    load(_Driver(80 << 30, fails="cuInit"))
    assert runtime.cuda_total_memory(0) == 0
    load(None)
    assert runtime.cuda_total_memory(0) == 0
