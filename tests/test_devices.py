"""Every subcommand on every device of its backend (issue 27): with 2 and 4 forced CPU devices
(``--xla_force_host_platform_device_count``) the output is byte-identical to one device's,
``-v`` lists every device (``--devices 1`` only the first), and every device really computed
(the run's count of batches dispatched to each device). Each device gets the one program of
the job's class: the energy model's, kept in jaxrna's store, is compiled once and loaded onto
every other device (:func:`jaxrna.programs.store_key`, as every program on a GPU); the other
CPU programs are compiled once per device.

The JAX engines are forced where a CPU run would otherwise take a host engine (the NumPy fold
below its work limit, ViennaRNA for ``--model turner``, parasail for ``align``).
"""

from __future__ import annotations

import os
import random
import re
import shutil

import pytest

from compile_count import run_counted

#: The JAX engine of each subcommand, on a CPU.
FORCE_JAX = {"JAXRNA_FOLD_HOST_WORK": "0", "JAXRNA_ENERGY_ENGINE": "jax",
             "JAXRNA_ALIGN_ENGINE": "device"}


def _fasta(path, prefix: str, lengths, seed: int) -> str:
    rng = random.Random(seed)
    with open(path, "w") as fh:
        for k, n in enumerate(lengths):
            fh.write(f">{prefix}{k}\n{''.join(rng.choice('ACGU') for _ in range(n))}\n")
    return str(path)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Per subcommand: its arguments and the fewest batches (all of one class) it runs."""
    d = tmp_path_factory.mktemp("devices")
    rng = random.Random(5)
    lengths = lambda k, lo, hi: [rng.randint(lo, hi) for _ in range(k)]  # noqa: E731
    fold = _fasta(d / "fold.fa", "f", lengths(200, 20, 40), 1)         # 5 batches (of up to 64 rows)
    turner = _fasta(d / "turner.fa", "e", lengths(30, 15, 30), 2)       # 4 batches of 8 rows
    pf = _fasta(d / "pf.fa", "p", lengths(8, 20, 60), 7)                 # 8 records, one by one
    s1 = _fasta(d / "s1.fa", "a", lengths(16, 10, 16), 3)              # 4 batches of 4 pairs
    s2 = _fasta(d / "s2.fa", "b", lengths(16, 20, 31), 4)
    q = _fasta(d / "q.fa", "q", lengths(20, 30, 60), 5)                # 400 pairs: 4 batches
    t = _fasta(d / "t.fa", "t", lengths(20, 30, 60), 6)
    return {
        "fold": (["fold", fold, "--model", "nussinov", "-f", "dbn"], 4),
        "turner": (["fold", turner, "--model", "turner"], 4),
        "fold_partition": (["fold", pf, "--model", "nussinov", "--partition", "-f", "json"], 8),
        # the MFE's 4 batches, then the partition function's 4 (of 8 rows)
        "turner_partition": (["fold", turner, "--model", "turner", "--partition", "-f", "json"],
                             8),
        "interact": (["interact", s1, s2, "--pairs", "zip", "-f", "tsv"], 4),
        "align": (["align", q, t, "--mode", "local", "-f", "tsv"], 4),
        "align_posterior": (["align", q, t, "--posterior", "-f", "json"], 4),
    }


def _run(args, devices: int, tmp_path, *extra, seed=None):
    """The run on ``devices`` CPU devices in a fresh cache (a copy of ``seed``'s, if given)."""
    cache = tmp_path / f"cache{devices}{''.join(extra)}"
    if seed is not None:
        shutil.copytree(seed, cache)
    r = run_counted([*args, "--backend", "cpu", "-v", *extra], str(cache), env=FORCE_JAX,
                    devices=devices)
    assert r.returncode == 0, r.stderr
    line = [x for x in r.stderr.splitlines() if " runs on " in x]
    assert len(line) == 1, r.stderr
    return r, re.findall(r"\b(cpu:\d+) \(cpu\)", line[0])


#: Jobs whose runs start from a copy of another job's one-device cache (their runs then load
#: the programs they share onto every device instead of compiling them again; CI time). None
#: now: the energy model's partition job folds its MFE with fill and traceback in one program,
#: and ``turner`` with the two halves (:mod:`jaxrna.energy.mfe_programs`), so they share none.
SEEDED: dict[str, str] = {}


@pytest.fixture(scope="module")
def one_device(jobs, tmp_path_factory):
    """Each job's run on one device (in a fresh cache of its own, or a copy of its
    :data:`SEEDED` job's), made once per module: every test of a job compares with the same
    run. ``(run, devices used, its cache)``."""
    runs = {}

    def get(name):
        if name not in runs:
            tmp = tmp_path_factory.mktemp(f"one_{name}")
            seed = get(SEEDED[name])[2] if name in SEEDED else None
            runs[name] = (*_run(jobs[name][0], 1, tmp, seed=seed), tmp / "cache1")
        return runs[name]
    return get


@pytest.mark.slow  # 7 CLI runs per subcommand; the fast subset keeps test_devices_option_limits_them
@pytest.mark.parametrize("name", ["fold", "fold_partition", "turner", "turner_partition",
                                  "interact", "align", "align_posterior"])
def test_every_device_same_output(jobs, one_device, name, tmp_path):
    args, batches = jobs[name]
    one, used, _ = one_device(name)
    seed = one_device(SEEDED[name])[2] if name in SEEDED else None
    assert used == ["cpu:0"] and one.stdout
    assert one.batches_on("cpu:0") >= batches           # enough for 4 devices
    assert one.loaded == (1 if name in SEEDED else 0), one.counts   # the seed's MFE program
    # (the energy model's partition: 4 devices only, each run compiles its heavy program)
    for n in (4,) if name == "turner_partition" else (2, 4):
        many, used = _run(args, n, tmp_path, seed=seed)
        assert used == [f"cpu:{k}" for k in range(n)]
        assert many.stdout == one.stdout               # byte for byte, in input order
        # the batches of one device's run, every device given some (round robin)
        assert [many.batches_on(f"cpu:{k}") > 0 for k in range(n)] == [True] * n
        assert sum(many.batches_on(f"cpu:{k}") for k in range(n)) == one.batches_on("cpu:0")
        # one program per class on each device: compiled there, or for a program the store
        # keeps (the energy model's, interact's, the posteriors'), compiled once and loaded
        # onto the others; one the seeded cache holds, loaded onto each
        assert many.compiled + many.loaded == (one.compiled + one.loaded) * n, (many.counts,
                                                                               one.counts)
        shared = one.compiled if name in ("turner", "turner_partition", "interact",
                                          "align_posterior") else 0
        assert many.loaded == shared * (n - 1) + one.loaded * n, (many.counts, one.counts)


@pytest.mark.slow            # --devices N: a whole run per subcommand (the fast subset: the others)
def test_devices_option_limits_them(jobs, one_device, tmp_path):
    args, _ = jobs["interact"]
    one, used, _ = one_device("interact")
    limited, used = _run(args, 2, tmp_path, "--devices", "1")
    assert used == ["cpu:0"]
    assert limited.stdout == one.stdout and limited.compiled == one.compiled
    assert limited.batches_on("cpu:0") == one.batches_on("cpu:0") >= 4
    assert limited.batches_on("cpu:1") == 0


@pytest.mark.slow  # a CLI run of the energy model on a CPU (~5 s), after the one-device run
def test_programs_one_device_compiled_serve_every_device(jobs, one_device, tmp_path):
    """What a run on one device compiled (the energy model's program, kept in jaxrna's store)
    is loaded by a later run on four devices with (a copy of) the same cache: nothing is
    compiled again, each device loads it (as ``jaxrna warmup`` on one GPU prepares every GPU
    of a host). The first run is the ``turner`` job's one-device run (its own process and
    cache; a run of its own here compiled the same program again, ~7 CPU-seconds, CI time)."""
    args, _ = jobs["turner"]
    first, _, one_cache = one_device("turner")
    cache = str(tmp_path / "shared-cache")
    shutil.copytree(one_cache, cache)
    assert first.returncode == 0 and first.compiled >= 1 and first.loaded == 0, first.counts
    later = run_counted([*args, "--backend", "cpu", "-v"], cache, env=FORCE_JAX, devices=4)
    assert later.returncode == 0, later.stderr
    assert later.stdout == first.stdout
    assert later.compiled == 0, later.counts
    assert later.loaded == 4 * first.compiled, later.counts
    assert all(later.batches_on(f"cpu:{k}") == 1 for k in range(4)), later.counts
    assert "computed batches on cpu:0 1, cpu:1 1, cpu:2 1, cpu:3 1" in later.stderr
