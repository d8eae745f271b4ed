"""Which engine ``jaxrna align --backend auto`` runs a job on: the one estimated to finish first.

Two engines give the same bytes (``tests/test_align_cpu_engine.py``): the *host* engine
(parasail's SIMD kernels and a compiled traceback walk, :mod:`jaxrna.align.host`, one forked
process per core; no JAX) and the *device* engine (JAX/Pallas, :mod:`jaxrna.align.engine`).
Where JAX has no GPU plugin (:func:`jaxrna.runtime.gpu_possible`) every job the host engine
supports runs there. On a GPU host, :func:`choose` compares two estimates of the seconds a job
costs beyond what both engines spend alike (starting Python, reading and encoding the input,
writing):

* host:   ``HOST_POOL_S + (cells * HOST_CELL_S[kind] + letters * HOST_LETTER_S[kind]) / e``,
  ``e = effective_cores(cores)``
* device: ``DEVICE_SETUP_S + cells * DEVICE_CELL_S[kind] + letters * DEVICE_LETTER_S[kind]``

``kind`` is ``"score"`` (``--score-only``) or ``"align"`` (with alignments); ``cells`` is the
sum of ``m * n`` over the pairs, ``letters`` the sum of ``m + n`` (what a pair's traceback and
text grow with), ``cores`` the CPU cores this process may use. The host engine computes and
formats in one forked process per core (each part of a chunk formatted where it was
computed), so both of its terms divide by the cores it keeps busy (:func:`effective_cores`:
beyond 4 cores, 0.6 of each further core); the device
engine traces back and formats on the host after the device (its per-letter term). A
device whose setup has already begun (the background start while reading,
:func:`jaxrna.align.engine.prestart`) costs ``DEVICE_STARTED_S`` instead of
``DEVICE_SETUP_S``.

Where the constants come from:

* ``HOST_CELL_S``, ``HOST_LETTER_S``: one core of the 2-core development VM (2026-11-25,
  ``python -m jaxrna.align.choice``, which runs :func:`measure`: the host engine in this
  process on synthetic pairs, 1,000 x 1,000 global for score-only, 200-400 nt local for
  alignments, and the formatting of those alignments). A GPU host's cores are usually no
  slower; run ``python -m jaxrna.align.choice`` there to see its own rates.
* ``DEVICE_*``: the stage times of ``bench/bench_cli.py --preset gpu`` on an H100 host
  (2026-11-25, warm): ``align_zip`` (1e11 cells, score only) spent about 1.0 s in setup and
  0.4 s on the device beyond reading and encoding; ``align_all`` (8e9 cells, 90,000 local
  pairs with alignments, 5.4e7 letters) 1.07 s setup, 0.35 s device, then 2.6 s of
  traceback, formatting and the rest on the host.
* ``HOST_POOL_S``: forking one process per core and collecting their results (about 0.1 s
  on 16 cores).
* :func:`effective_cores` and the device constants, again (eighth session, 2026-11-26): on
  an H100 host and an H200 host (16 cores each), ``align_all`` took 4.6-4.9 s on the host
  engine (about 8 of the development VM's cores' worth) and 3.9 s on the device engine
  (setup 0.81 s, device 0.38 s, traceback 0.42 s, formatting 0.81 s, the rest 0.9 s): the
  host engine had been chosen, on the estimate of 16 fully used cores.
* Again (fourteenth session, 2026-11-27, an H100 host, 16 cores), after the host engine
  formatted each part in the process that computed it: ``python -m jaxrna.align.choice``
  there gave ``align_cell_s`` 3.72e-9 (the constant) and ``align_letter_s`` 2.51e-8
  (``HOST_LETTER_S``); ``align_all`` on the host engine limited to 1 / 4 / 8 / 16 cores
  (``taskset``) took 31.97 / 7.64 / 5.02 / 3.23 s (4.9 / 7.8 / 4.9 / 2.9 s by the model with
  ``FURTHER_CORE`` 0.6, the last without the ~0.2 s both engines spend alike), and whole
  runs 2.92-2.93 s warm, 3.08-3.15 cold, against the device engine's 3.14-3.41 warm and
  5.49-7.11 cold (it compiles a program on an empty cache); parasail alone 1.36-1.59 s.

``-v`` prints the choice and both estimates. ``JAXRNA_ALIGN_ENGINE=host|device`` (see
:func:`jaxrna.align.engine.run`) and ``--backend gpu|cpu`` bypass it.

>>> big = Size(pairs=100_000, cells=1e11, letters=2e8)            # align_zip
>>> choose(big, score_only=True, cores=16).engine
'device'
>>> many = Size(pairs=90_000, cells=8.1e9, letters=5.4e7)         # align_all, local
>>> choose(many, score_only=False, cores=16).engine
'host'
>>> choose(many, score_only=False, cores=8).engine
'device'
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

#: Seconds per cell on one core of the host engine (parasail values; with alignments also the
#: score table and the compiled walk).
HOST_CELL_S = {"score": 1 / 1.2e9, "align": 1 / 2.7e8}
#: Seconds per letter (``m + n`` of a pair) on one core: the pair's result and text.
HOST_LETTER_S = {"score": 2e-9, "align": 2.5e-8}
#: Forking the pool and gathering its results.
HOST_POOL_S = 0.1
#: JAX import, GPU start-up and program loads (warm cache) left visible after reading.
DEVICE_SETUP_S = 0.8
#: The same once the background start has begun before reading.
DEVICE_STARTED_S = 0.5
#: Seconds per cell on the device (H100).
DEVICE_CELL_S = {"score": 1 / 2.5e11, "align": 1 / 2.0e10}
#: Seconds per letter on the host after the device: traceback, formatting, the rest.
DEVICE_LETTER_S = {"score": 2e-9, "align": 4.0e-8}
#: Cores the host engine keeps fully busy: all of them up to this many, then a fraction of
#: each further one (memory traffic, the formatting pool and the parent's own work share
#: them).
FULL_CORES = 4
FURTHER_CORE = 0.6
#: The cores' worth of the host engine on threads (a process where JAX runs cannot fork): the
#: GIL serialises what is not parasail's or the walk's C. An H100 host's 16 cores, 300 x 300
#: local pairs with alignments: 14.4-20.5 s on threads against 31.97 s on one core and 2.9 s
#: in forked processes (fourteenth session, call S14a).
THREADED_CORES = 2


def effective_cores(cores: int) -> float:
    """The development VM's cores' worth of work the host engine does at once on ``cores``.

    >>> effective_cores(2), effective_cores(16)
    (2, 11.2)
    """
    cores = max(1, int(cores))
    return cores if cores <= FULL_CORES else FULL_CORES + (cores - FULL_CORES) * FURTHER_CORE


@dataclass(frozen=True)
class Size:
    """What a job costs grows with: its pairs, cells (sum of ``m * n``) and letters (sum of
    ``m + n``)."""

    pairs: int
    cells: float
    letters: float


@dataclass(frozen=True)
class Choice:
    """The engine (``"host"`` or ``"device"``) and both estimates in seconds."""

    engine: str
    host_s: float
    device_s: float
    cores: int

    def line(self, device: str = "the GPU") -> str:
        """The ``-v`` line, e.g. ``align: host engine (parasail) on 16 cores: estimate 1.6 s
        against 3.9 s on the GPU``."""
        if self.engine == "host":
            return (f"align: host engine (parasail) on {self.cores} core"
                    f"{'' if self.cores == 1 else 's'}: estimate {self.host_s:.1f} s against "
                    f"{self.device_s:.1f} s on {device}")
        return (f"align: device engine on {device}: estimate {self.device_s:.1f} s against "
                f"{self.host_s:.1f} s on {self.cores} core{'' if self.cores == 1 else 's'} "
                f"(parasail)")


def estimate_host(size: Size, score_only: bool, cores: int) -> float:
    kind = "score" if score_only else "align"
    e = effective_cores(cores)
    return HOST_POOL_S + (size.cells * HOST_CELL_S[kind] + size.letters * HOST_LETTER_S[kind]) / e


def estimate_device(size: Size, score_only: bool, started: bool = False) -> float:
    kind = "score" if score_only else "align"
    return ((DEVICE_STARTED_S if started else DEVICE_SETUP_S) + size.cells * DEVICE_CELL_S[kind]
            + size.letters * DEVICE_LETTER_S[kind])


def choose(size: Size, score_only: bool, cores: int, started: bool = False) -> Choice:
    """The engine estimated to finish ``size`` first on a host with ``cores`` cores and a GPU
    (ties: the host engine, which needs no GPU start-up). ``started``: JAX was started in the
    background; the host engine then cannot fork its processes and runs on threads, worth
    :data:`THREADED_CORES` cores whatever the host has."""
    h = estimate_host(size, score_only, min(cores, THREADED_CORES) if started else cores)
    d = estimate_device(size, score_only, started)
    return Choice("host" if h <= d else "device", h, d, max(1, cores))


def size_of(qlen: np.ndarray, tlen: np.ndarray, zip_pairs: bool) -> Size:
    """The :class:`Size` of a job from its records' lengths (all pairs, or zipped)."""
    q = np.asarray(qlen, np.float64)
    t = np.asarray(tlen, np.float64)
    if zip_pairs:
        n = min(len(q), len(t))
        q, t = q[:n], t[:n]
        return Size(n, float(np.dot(q, t)), float(q.sum() + t.sum()))
    return Size(len(q) * len(t), float(q.sum()) * float(t.sum()),
                float(q.sum()) * len(t) + float(t.sum()) * len(q))


def size_of_files(queries: str, targets: str, zip_pairs: bool) -> Size | None:
    """A rough :class:`Size` from the files' sizes and the record count of their first 64 KiB
    (before reading them); None where that cannot tell (standard input, gzip, empty)."""
    counts, sizes = [], []
    for path in (queries, targets):
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as fh:
                head = fh.read(1 << 16)
        except OSError:
            return None
        if head[:2] == b"\x1f\x8b" or not head or not size:
            return None
        records = max(1.0, head.count(b">") * size / len(head))
        counts.append(records)
        sizes.append(float(size))
    (nq, nt), (sq, st) = counts, sizes
    if zip_pairs:
        n = min(nq, nt)
        return Size(int(n), sq / nq * st / nt * n, (sq / nq + st / nt) * n)
    return Size(int(nq * nt), sq * st, sq * nt + st * nq)


# --------------------------------------------------------------------------------------
# measuring this CPU's rates


def measure(pairs: int = 400, seed: int = 0) -> dict:
    """This CPU's host-engine rates on one core, as :data:`HOST_CELL_S` and
    :data:`HOST_LETTER_S` express them: score-only global 1,000 x 1,000 pairs, and local
    200-400 nt pairs with alignments (computed, then formatted as ``pair`` text); CPU time of
    this process, so that other load on the machine matters less."""
    import time

    from jaxrna.align import engine
    from jaxrna.align.scoring import make_scoring
    from jaxrna.io.bulk import SeqBatch

    rng = np.random.default_rng(seed)

    def batch(lengths, name):
        letters = np.frombuffer(b"ACGU", np.uint8)[rng.integers(0, 4, int(sum(lengths)))]
        off = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=off[1:])
        return SeqBatch(name, [f"{name}{k}" for k in range(len(lengths))],
                        [f"{name}{k}" for k in range(len(lengths))],
                        np.arange(1, 2 * len(lengths), 2), letters.copy(), off)

    scoring = make_scoring(2, -3, None, 5, 2, None, "penalized", None, None)
    out = {}
    n = max(8, pairs // 8)
    job = engine.Job(batch([1000] * n, "q"), batch([1000] * n, "t"), scoring, False, True, True)
    t0 = time.process_time()
    engine.HostRunner(job, 1).run(0, *job.pairs(0, job.n_pairs))
    out["score_cell_s"] = (time.process_time() - t0) / job.cells()
    side = max(2, int(pairs ** 0.5))
    job = engine.Job(batch(rng.integers(200, 401, side), "q"),
                     batch(rng.integers(200, 401, side), "t"), scoring, True, False, False)
    t0 = time.process_time()
    runner = engine.HostRunner(job, 1)
    qi, ti = job.pairs(0, job.n_pairs)
    c = runner.run(0, qi, ti)
    t1 = time.process_time()
    engine.format_batch(engine.to_aligned(job, c), "pair", True)
    t2 = time.process_time()
    size = size_of(job.qlen, job.tlen, False)
    out["align_cell_s"] = (t1 - t0) / size.cells
    out["align_letter_s"] = (t2 - t1) / size.letters
    return out


if __name__ == "__main__":
    for key, value in measure().items():
        print(f"{key}: {value:.3g} s (1 / {1 / value:.3g})")
