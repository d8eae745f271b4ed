"""The compilation cache shared by parallel runs (issue 15): four processes started at once
on one empty ``JAXRNA_CACHE_DIR`` all succeed with identical outputs; entries are written
whole (a temporary file renamed), so no reader sees half an entry; a corrupt entry is ignored
(recompiled) and replaced, silently."""

import subprocess

import pytest

from faults_common import command, env



#: A run that compiles (and caches) a few JAX programs, quickly.
ARGS = ["fold", "--model", "nussinov", "--sequence", "GGGAAAUCCCAGCUAGC", "--partition", "-f", "json", "-q"]


@pytest.mark.slow
def test_parallel_runs_then_corrupt_entries(tmp_path):
    cache = tmp_path / "cache"
    e = env(JAXRNA_CACHE_DIR=str(cache))
    procs = [subprocess.Popen(command(ARGS), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=e) for _ in range(4)]
    results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    outs = {out for out, _, _ in results}
    assert all(code == 0 for _, _, code in results), results
    assert all("warn" not in err.lower() and "Traceback" not in err for _, err, _ in results)
    assert len(outs) == 1 and '"log_partition"' in next(iter(outs))
    entries = sorted(p for p in cache.rglob("*") if p.is_file())   # JAX's, and jaxrna's own
    assert entries and not [p for p in entries if p.name.endswith(".tmp")]

    sizes = {}
    for k, p in enumerate(entries):        # garbage, or cut short as by a killed writer
        data = p.read_bytes()
        sizes[p] = len(data)
        p.write_bytes(b"not a cache entry" if k % 2 else data[:len(data) // 2])
    r = subprocess.run(command(ARGS), capture_output=True, text=True, env=e, timeout=300)
    assert r.returncode == 0 and r.stdout == next(iter(outs)), r.stderr
    assert "warn" not in r.stderr.lower() and "Traceback" not in r.stderr, r.stderr
    for p in entries:                      # replaced by whole entries (sizes vary a little)
        assert p.stat().st_size > 0.75 * sizes[p], p
    assert not [p for p in cache.rglob("*") if p.name.endswith(".tmp")]
