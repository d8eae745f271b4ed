"""``jaxrna targets`` spread out: host worker processes, several devices, device threads and
chunked target files all give the report of the slow reference, byte for byte."""

import io
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from jaxrna.formats.miranda import writer_for
from jaxrna.targets.api import write_scan
from jaxrna.targets.scoring import ScanParams
from test_targets_cli import expected_report, files  # noqa: F401  (a fixture)


def report(files, params, fmt, quiet, workers, chunk_nt=10_000, **engine):  # noqa: F811
    out = io.StringIO()
    writer = writer_for(fmt, out, no_energy=params.no_energy, quiet=quiet)
    stats = write_scan(files["mirnas"], files["utrs"], writer, params, chunk_nt=chunk_nt,
                       host_workers=workers, engine_options=engine)
    return out.getvalue(), stats


@pytest.mark.parametrize("fmt,quiet", [("miranda", True), ("miranda", False), ("keyval", True),
                                       ("tsv", True), ("json", True)])
def test_one_and_two_workers_match_the_reference(files, fmt, quiet):  # noqa: F811
    params = ScanParams(score_threshold=120, no_energy=True)
    expected = expected_report(files, params, fmt=fmt, quiet=quiet)
    for workers, chunk_nt in ((0, 700), (1, 10_000), (2, 700)):  # 700: the targets in 6 chunks
        got, stats = report(files, params, fmt, quiet, workers, chunk_nt, query_block=3)
        assert got == expected, (workers, chunk_nt)
    assert stats["hits"] >= 10
    from jaxrna.targets.output import _POOLS

    assert {1, 2} <= set(_POOLS)  # the jobs did go to worker processes


def test_workers_with_energies_and_strict(files):  # noqa: F811
    params = ScanParams(score_threshold=130, strict=True, energy_threshold=-5)
    got, _ = report(files, params, "miranda", True, 2, 700, query_block=2)
    assert got == expected_report(files, params, quiet=True)


SCRIPT = """
import io, sys
import jax
from jaxrna.formats.miranda import writer_for
from jaxrna.targets.api import write_scan
from jaxrna.targets.scoring import ScanParams

mirnas, utrs = sys.argv[1:3]
params = ScanParams(score_threshold=120, no_energy=True)
outs = []
assert len(jax.devices()) == 2, jax.devices()
for devices, threads in ((jax.devices()[:1], 1), (jax.devices(), 1), (jax.devices(), 2)):
    out = io.StringIO()
    write_scan(mirnas, utrs, writer_for("miranda", out, no_energy=True, quiet=False), params,
               chunk_nt=900, host_workers=0,
               engine_options=dict(devices=devices, threads_per_device=threads, lane_columns=61))
    outs.append(out.getvalue())
print("SAME" if outs[0] == outs[1] == outs[2] else "DIFFERENT", len(outs[0]))
sys.stdout.write(outs[0])
"""


def test_one_and_two_devices_match(files):  # noqa: F811
    """Two (fake, CPU) devices and two threads per device give the one-device report."""
    env = dict(os.environ, PYTHONPATH=ROOT, JAXRNA_CACHE_DIR="off", JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=2")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, files["mirnas"], files["utrs"]],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    head, _, text = proc.stdout.partition("\n")
    assert head.startswith("SAME"), head
    assert text == expected_report(files, ScanParams(score_threshold=120, no_energy=True))
