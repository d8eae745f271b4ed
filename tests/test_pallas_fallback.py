"""A Pallas kernel that does not build (a later JAX without Pallas' Triton backend) falls back
to its pure-JAX path with one warning line on stderr per process, and the same output
(:mod:`jaxrna.kernels.fallback`). The failure is forced with ``JAXRNA_FORCE_PALLAS_FAILURE``,
on a CPU in interpret mode, where the code would otherwise run the Pallas kernels."""

import numpy as np
import pytest

from jaxrna.alphabet import encode
from jaxrna.kernels import fallback
from jaxrna.weights import parse_weights


@pytest.fixture(autouse=True)
def fresh_failures():
    fallback.reset()
    yield
    fallback.reset()


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "warning" in line]


def test_the_packed_fold_falls_back_to_its_pure_path(monkeypatch, capsys):
    from jaxrna.fold.gpu import GpuFoldConfig, fold_gpu

    cfg = GpuFoldConfig(tile=16, block=16, unroll=4)
    w = parse_weights("unit").matrix()
    seqs = ["GGGAAAUCCGGGAAAUCC" * 2, "GCAUCGAUGCAAAGCUAGCUAGCAUCG", "ACGU"]
    want = [fold_gpu(encode(s), w, 3, config=cfg, interpret=True) for s in seqs]
    assert capsys.readouterr().err == ""
    monkeypatch.setenv(fallback.FORCE_ENV, "1")
    got = [fold_gpu(encode(s), w, 3, config=cfg, interpret=True) for s in seqs]
    got_scores = [fold_gpu(encode(s), w, 3, config=cfg, interpret=True, with_pairs=False)[0]
                  for s in seqs]
    assert got == want
    assert got_scores == [score for score, _ in want]
    err = capsys.readouterr().err
    assert len(_warnings(err)) == 1 and err.count("\n") == 1
    assert "Pallas kernel fold.packed_fill" in err and "pure-JAX" in err
    assert not fallback.usable("fold.packed_fill")


def test_a_failure_is_remembered_and_named_kernels_only_fail(monkeypatch, capsys):
    monkeypatch.setenv(fallback.FORCE_ENV, "a, b")
    calls = []

    def pallas(name):
        calls.append(name)
        return "pallas"

    assert fallback.compile_or_fallback("a", lambda: pallas("a"), lambda: "pure") == "pure"
    assert fallback.compile_or_fallback("c", lambda: pallas("c"), lambda: "pure") == "pallas"
    assert fallback.compile_or_fallback("b", lambda: pallas("b"), lambda: "pure") == "pure"
    monkeypatch.delenv(fallback.FORCE_ENV)
    assert fallback.compile_or_fallback("a", lambda: pallas("a"), lambda: "pure") == "pure"
    assert calls == ["c"]
    assert len(_warnings(capsys.readouterr().err)) == 1      # once per process


def test_a_real_compile_error_falls_back_and_pure_errors_propagate(capsys):
    import jax
    import jax.numpy as jnp

    def broken():
        return jax.jit(lambda x: jnp.dot(x, x)).lower(np.ones((2, 3), np.float32)).compile()

    good = jax.jit(lambda x: x + 1).lower(np.ones(3, np.float32)).compile()
    assert fallback.compile_or_fallback("k", broken, lambda: good) is good
    assert "Pallas kernel k" in capsys.readouterr().err
    with pytest.raises(ZeroDivisionError):
        fallback.compile_or_fallback("k2", lambda: 1 / 0, lambda: 1 / 0)
