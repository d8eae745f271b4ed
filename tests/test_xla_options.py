"""Per-program XLA options (:mod:`jaxrna.xla_options`): the defaults by name prefix, the
``JAXRNA_XLA_OPTIONS`` overrides benchmarks try on whole runs, and both in a program's key (so a
run with other options compiles its own program instead of loading one built without them)."""

from types import SimpleNamespace

from jaxrna import programs, xla_options


def test_env_options_apply_by_prefix_on_gpus_only_and_enter_the_key(monkeypatch):
    monkeypatch.delenv(xla_options.ENV, raising=False)
    gpu = SimpleNamespace(platform="gpu", device_kind="fake GPU", id=0)
    assert xla_options.compiler_options("energy.fill_batch", "gpu") == {}
    assert xla_options.compiler_options("fold.tiles", "gpu") == {"xla_gpu_autotune_level": 0}
    plain = programs.program_key("energy.fill_batch", (), {}, gpu)
    monkeypatch.setenv(xla_options.ENV, "energy.:xla_gpu_autotune_level=1;fold.:"
                       "xla_gpu_autotune_level=2,xla_llvm_disable_expensive_passes=true")
    assert xla_options.compiler_options("energy.fill_batch", "gpu") == {"xla_gpu_autotune_level": 1}
    assert xla_options.compiler_options("energy.fill_batch", "cpu") == {}
    assert xla_options.compiler_options("fold.tiles", "gpu") == {
        "xla_gpu_autotune_level": 2, "xla_llvm_disable_expensive_passes": True}
    assert xla_options.compiler_options("interact.batch", "gpu") == {}
    assert programs.program_key("energy.fill_batch", (), {}, gpu) != plain
    monkeypatch.setenv(xla_options.ENV, "no colon here; :=;energy.:")
    assert xla_options.compiler_options("energy.fill_batch", "gpu") == {}
    assert programs.program_key("energy.fill_batch", (), {}, gpu) == plain
