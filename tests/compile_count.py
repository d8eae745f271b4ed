"""Count the programs a whole ``jaxrna`` process compiles (issue 26: tests count, not time).

:func:`run_counted` runs ``python -m jaxrna ARGS`` as a fresh process on the CPU with a given
compile cache directory and ``JAXRNA_PROFILE`` set, and returns its output and the counters of
:mod:`jaxrna.stages`: ``programs`` (every XLA backend compilation JAX reported, a load from the
persistent cache included), ``cache_hits``, ``compiled`` (= programs - cache_hits: programs
really compiled by XLA in that process), ``executables_compiled`` / ``executables_loaded``
(jaxrna's own store, :mod:`jaxrna.programs`).

A second run with the same cache directory that compiles nothing shows a job's programs are
fixed by its plan, not by its data or numeric options::

    first = run_counted(["fold", "--model", "nussinov", a_fa], cache)
    second = run_counted(["fold", "--model", "nussinov", other_fa, "--some-option", "3"], cache)
    assert second.counts["compiled"] == 0
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class CountedRun:
    returncode: int
    stdout: str
    stderr: str
    counts: dict

    @property
    def compiled(self) -> int:
        """Programs XLA compiled in the process (not found in the persistent cache)."""
        return int(self.counts.get("compiled", 0))

    @property
    def loaded(self) -> int:
        """Executables loaded from jaxrna's store (:mod:`jaxrna.programs`)."""
        return int(self.counts.get("executables_loaded", 0))

    def batches_on(self, device: str) -> int:
        """Batches the run dispatched to ``device`` (``"cpu:1"``; :func:`jaxrna.pipeline.schedule`)."""
        return int(self.counts.get(f"batches on {device}", 0))


def run_counted(args: list[str], cache_dir: str, *, env: dict | None = None,
                stdin: str | None = None, devices: int | None = None) -> CountedRun:
    """Run ``python -m jaxrna *args`` on the CPU with ``JAXRNA_CACHE_DIR=cache_dir``.

    ``devices``: force that many host CPU devices (``--xla_force_host_platform_device_count``).
    """
    fd, profile = tempfile.mkstemp(prefix="jaxrna-profile-", suffix=".json")
    os.close(fd)
    full_env = dict(os.environ)
    full_env.update(JAXRNA_CACHE_DIR=cache_dir, JAXRNA_PROFILE=profile, JAX_PLATFORMS="cpu",
                    PYTHONPATH=os.pathsep.join(
                        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    if devices:
        full_env["XLA_FLAGS"] = (full_env.get("XLA_FLAGS", "") +
                                 f" --xla_force_host_platform_device_count={devices}").strip()
    if env:
        full_env.update(env)
    r = subprocess.run([sys.executable, "-m", "jaxrna", *args], env=full_env,
                       capture_output=True, text=True, input=stdin)
    counts: dict = {}
    try:
        with open(profile) as fh:
            counts = json.load(fh)["counts"]
    except (OSError, ValueError, KeyError):
        pass
    finally:
        if os.path.exists(profile):
            os.unlink(profile)
    return CountedRun(r.returncode, r.stdout, r.stderr, counts)


def warm_counted(module: str, cache_dir: str, **options) -> int:
    """Run ``jaxrna.<module>.warmup.warm(**options)`` in a fresh CPU process with
    ``JAXRNA_CACHE_DIR=cache_dir``; returns the number of programs it prepared."""
    code = (f"from jaxrna.{module}.warmup import warm; "
            f"print(warm(**{options!r}))")
    env = dict(os.environ, JAXRNA_CACHE_DIR=cache_dir, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout)                  # its only output: the count


def write_fasta(path, lengths, seed) -> str:
    """A FASTA file of random RNA records ``r0, r1, ...`` of the given lengths (``random.Random
    (seed)``); returns its path."""
    import random

    rng = random.Random(seed)
    with open(path, "w") as fh:
        for k, n in enumerate(lengths):
            fh.write(f">r{k}\n{''.join(rng.choice('ACGU') for _ in range(n))}\n")
    return str(path)
