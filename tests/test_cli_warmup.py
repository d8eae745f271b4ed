"""``jaxrna warmup`` (issue 26): it fills a private cache with the standard programs, after which
a job on new data compiles nothing; it refuses to run without a cache."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from compile_count import run_counted


def _fasta(path, lengths, seed):
    rng = np.random.default_rng(seed)
    with open(path, "w") as fh:
        for k, n in enumerate(lengths):
            fh.write(f">r{k}\n{''.join(rng.choice(list('ACGU'), n))}\n")
    return str(path)


def test_warmup_options_choose_the_warmers():
    from jaxrna.cli import build_parser
    from jaxrna.cli.warmup import WARMERS, chosen

    parse = build_parser().parse_args
    assert [c[0] for c in chosen(parse(["warmup"]))] == [
        label for name in WARMERS for label, _ in WARMERS[name]]
    assert [c[0] for c in chosen(parse(["warmup", "fold", "--model", "nussinov"]))] == \
        ["fold nussinov"]
    assert [c[0] for c in chosen(parse(["warmup", "align", "interact"]))] == ["align", "interact"]


def test_warmup_needs_a_cache_and_known_subcommands(tmp_path):
    off = run_counted(["warmup", "fold"], str(tmp_path / "c"), env={"JAXRNA_CACHE_DIR": "off"})
    assert off.returncode == 2 and "JAXRNA_CACHE_DIR is off" in off.stderr
    assert "Traceback" not in off.stderr
    bad = run_counted(["warmup", "fnord"], str(tmp_path / "c"))
    assert bad.returncode == 2 and "unknown subcommand 'fnord'" in bad.stderr


@pytest.mark.slow
def test_warmup_then_a_turner_job_on_new_data_compiles_nothing(tmp_path):
    cache = str(tmp_path / "cache")
    # one class (128; tests/test_compile_energy.py warms three): CI time
    warm = run_counted(["warmup", "fold", "--model", "turner", "--max-length", "128",
                        "--backend", "cpu"], cache)
    assert warm.returncode == 0, warm.stderr
    assert warm.compiled >= 1
    lines = warm.stdout.splitlines()
    assert lines[0] == f"cache\t{cache}" and lines[2].startswith("fold turner\t")
    # the cache was created private: only its owner may write it
    assert stat.S_IMODE(os.stat(cache).st_mode) & 0o022 == 0
    fa = _fasta(tmp_path / "new.fa", [7, 33, 80, 127, 128, 61], seed=5)
    job = run_counted(["fold", "--model", "turner", "--backend", "cpu", fa, "-T", "30",
                       "--dangles", "0"], cache)
    assert job.returncode == 0, job.stderr
    assert job.stdout.count(">") == 6
    assert job.compiled == 0, job.counts


def test_warmup_on_a_cpu_skips_the_energy_model_that_auto_folds_with_viennarna(tmp_path):
    """Without a GPU, ``fold --model turner`` (``--backend auto``) folds with ViennaRNA, so
    there is nothing of it to compile; ``--backend cpu`` warms jaxrna's own engine (above)."""
    pytest.importorskip("RNA")
    r = run_counted(["warmup", "fold", "--model", "turner"], str(tmp_path / "c"))
    assert r.returncode == 0, r.stderr
    assert "fold turner (ViennaRNA engine: nothing to compile)\t0\t0" in r.stdout
    assert r.compiled == 0


def test_warmup_builds_the_host_engines_libraries(tmp_path, monkeypatch):
    """Each warmed subcommand's host-engine C library lands in the cache (a fresh job then
    loads it instead of building it); a second warm-up builds nothing."""
    from jaxrna import native
    from jaxrna.align import hostwalk
    from jaxrna.cli import build_parser
    from jaxrna.cli.warmup import _host_engines

    monkeypatch.setenv("JAXRNA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(native, "_LIBS", {})
    monkeypatch.setattr(hostwalk, "_LIB", [])          # (the walk keeps its own per process)
    args = build_parser().parse_args(["warmup", "interact", "fold", "align", "targets", "-q"])
    rows = _host_engines(args)
    assert [r[:3] for r in rows] == [("interact host engine (C)", 1, 1),
                                     ("fold nussinov host fill (C)", 1, 1),
                                     ("align host walk (C)", 1, 1),
                                     ("targets bulk scan (C)", 1, 1)]
    names = sorted(f.split("-")[0] for f in os.listdir(tmp_path / "cache" / "host"))
    assert names == ["bpmax", "miranda_scan", "nussinov", "walk"]
    monkeypatch.setattr(native, "_LIBS", {})
    monkeypatch.setattr(hostwalk, "_LIB", [])
    assert [r[2] for r in _host_engines(args)] == [0, 0, 0, 0]
    turner = build_parser().parse_args(["warmup", "fold", "--model", "turner", "-q"])
    assert _host_engines(turner) == []
