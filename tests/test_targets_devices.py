"""``jaxrna targets`` on every device of its backend (issue 27): with 2 and 4 forced CPU devices
(``--xla_force_host_platform_device_count``) the report is byte-identical to one device's, ``-v``
lists every device, and every device really scanned: the blocks of miRNAs (one miRNA each with
the XLA kernel) are handed to the devices in turn (:func:`jaxrna.pipeline.schedule`), each
device compiling the run's programs once for itself, so the count of compiled programs is one
device's count times the devices used. Energies are folded (the ``cpu`` engine: NumPy, no
device programs), so the energy filter and the energy columns are in the comparison too.
"""

from __future__ import annotations

import random
import re

import pytest

from compile_count import run_counted

MIRNAS = 6          # blocks of one miRNA each: every device of 4 gets at least one
LENGTH = 22         # one height: every device compiles the same programs


def _complement(s: str) -> str:
    return s[::-1].translate(str.maketrans("ACGU", "UGCA"))


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """miRNAs of one length and targets holding perfect and imperfect sites of each."""
    d = tmp_path_factory.mktemp("targets_devices")
    rng = random.Random(27)
    seq = lambda n: "".join(rng.choice("ACGU") for _ in range(n))  # noqa: E731
    mirnas = [seq(LENGTH) for _ in range(MIRNAS)]
    with open(d / "mirnas.fa", "w") as fh:
        for k, m in enumerate(mirnas):
            fh.write(f">miR-{k} desc {k}\n{m}\n")
    with open(d / "utrs.fa", "w") as fh:
        for t in range(12):
            parts = [seq(rng.randint(40, 300))]
            for _ in range(3):
                site = list(_complement(rng.choice(mirnas)))
                for _ in range(rng.randint(0, 3)):  # a few mismatches
                    site[rng.randrange(len(site))] = rng.choice("ACGU")
                parts += ["".join(site), seq(rng.randint(10, 200))]
            fh.write(f">utr{t}\n{''.join(parts)}\n")
    return [str(d / "mirnas.fa"), str(d / "utrs.fa")]


def _run(args, devices: int, tmp_path, *extra):
    r = run_counted(["targets", *args, "--backend", "cpu", "-v", *extra],
                    str(tmp_path / f"cache{devices}{''.join(extra)}"), devices=devices)
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stderr.splitlines() if " runs on " in x]
    assert len(line) == 1, r.stderr
    return r, re.findall(r"\b(cpu:\d+) \(cpu\)", line[0])


@pytest.fixture(scope="module")
def one_device(job, tmp_path_factory):
    """The run on one device (in a fresh cache of its own), made once for both tests."""
    return _run(job, 1, tmp_path_factory.mktemp("one_device"))


@pytest.mark.slow  # 1, 2 and 4 devices; the fast subset keeps the --devices test
def test_targets_on_every_device_same_report(job, one_device, tmp_path):
    one, used = one_device
    assert used == ["cpu:0"]
    assert one.stdout.count("Forward:") >= MIRNAS and "Energy:" in one.stdout
    for n in (2, 4):
        many, used = _run(job, n, tmp_path)
        assert used == [f"cpu:{k}" for k in range(n)]
        assert many.stdout == one.stdout               # byte for byte, in miRanda's order
        assert all(many.batches_on(f"cpu:{k}") > 0 for k in range(n)), many.counts
        # every program on every device: compiled there, or (the energy model's, which the
        # store keeps) compiled once and loaded onto the other devices
        assert many.compiled + many.loaded == one.compiled * n, (n, many.counts, one.counts)
        assert many.loaded >= n - 1, many.counts


def test_devices_option_limits_targets(job, one_device, tmp_path):
    one, _ = one_device
    limited, used = _run(job, 4, tmp_path, "--devices", "1")
    assert used == ["cpu:0"]
    assert limited.stdout == one.stdout and limited.compiled == one.compiled
