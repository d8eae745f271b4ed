"""Batch planning of the batched fold (:func:`jaxrna.fold.api.fold_batches`): the padded
length class of each sequence on a backend (:func:`class_of`: the CPU's classes, whose fill
runs each row over its own tiles; the GPU's coarse ladder), the rows of a batch of each class
(:func:`batch_cap`: a power of two within a memory budget, so a class compiles one program),
and the grouping of a chunk's sequences into batches (:func:`plan_batches`); before all that,
which engine folds a job of so much work (:func:`choose_engine`). Pure NumPy: the plan is made
on the host before any device work, and it fixes the programs a job compiles.

>>> class_of(300, "gpu"), batch_cap(512, "gpu")
(512, 1024)
"""

from __future__ import annotations

import os
from typing import Iterable

import numpy as np

from jaxrna.batching import batch_rows, bucket_length_coarse

#: Device bytes per padded position squared of a batch row (tiles, shifted copy, slack).
DEVICE_BYTES_PER_CELL = 12
#: Rows of one batch, at most (CPU, GPU); every batch of a class has the class's rows,
#: whatever its count (one program per class; a last batch is topped up with empty rows).
MAX_ROWS = {"cpu": 64, "gpu": 1024}
#: Device memory one GPU batch may take.
GPU_BATCH_BUDGET = 4 << 30
#: On a GPU, rows x padded^3 of one batch at most: the vmapped fill computes every row, the
#: empty ones too, so a long class gets few rows (2,048 nt: 16, 4,096 nt: 2), and a job of a
#: few long sequences pays little for its empty rows (H200, 3 x 1,800 nt: 0.07 s on the
#: device with 4 rows, 0.58 s with 64). Short classes keep the memory budget's rows (their
#: batches' time is set by the chain of dependent steps).
GPU_WORK = 1 << 37


def length_classes(backend: str) -> list[int]:
    """The padded lengths (classes) of the batch programs on ``backend``, up to 10,240 nt
    (:func:`jaxrna.batching.length_class` on a CPU, whose fill runs each row over its own
    tiles; the GPU's coarse ladder, :func:`jaxrna.batching.bucket_length_coarse`, whose
    vmapped fill works on every tile of a row)."""
    from jaxrna.batching import length_class_ladder

    if backend == "cpu":
        return length_class_ladder(10_240)
    return sorted({bucket_length_coarse(n) for n in (1, *[1 << k for k in range(7, 13)])})


def class_of(n: int, backend: str) -> int:
    """The padded length of a sequence of ``n`` nt in a batch on ``backend``."""
    from jaxrna.batching import length_class

    return length_class(n) if backend == "cpu" else bucket_length_coarse(n)


def batch_cap(size: int, backend: str, budget: int | None = None) -> int:
    """Rows of every batch of padded length ``size`` on ``backend`` (a power of two: the
    memory budget's, at most :data:`MAX_ROWS`; on a GPU at most :data:`GPU_WORK` / size^3).

    >>> [batch_cap(n, "gpu") for n in (128, 512, 1024, 2048, 4096)]
    [1024, 1024, 128, 16, 2]
    """
    if budget is None:
        budget = GPU_BATCH_BUDGET if backend == "gpu" else 1 << 30
    fit = max(1, budget // (DEVICE_BYTES_PER_CELL * size * size))
    if backend == "gpu":
        fit = min(fit, max(1, GPU_WORK // size ** 3))
    return batch_rows(0, min(fit, MAX_ROWS[backend]), fill=True)


def plan_batches(lengths: np.ndarray, members: np.ndarray, backend: str,
             budget: int | None) -> list[tuple[int, int, np.ndarray]]:
    """``(padded length, row cap, members)`` of each batch (members: indices into the chunk).

    Members are grouped by padded length (the CPU's classes, :func:`class_of`, the GPU's
    coarse ladder) into batches of ``cap`` rows (the memory budget's, a power of two: one
    batch shape per class). On a CPU a class's members go by length (a batch's traceback
    takes as many steps as its longest row needs). On a GPU, where a
    batch's time is set by its chain of dependent steps (which grows with the padded length)
    far more than by its rows, the free rows of each length's last batch are then filled with
    the shortest-padded sequences of the shorter lengths: 1,000 sequences of 50-500 nt go as
    one batch of 1,024 x 512 (one program; 0.21 s on an H200, against 0.40 s for three
    batches of 128, 256 and 512).

    >>> lengths = np.array([60, 300, 500, 100, 200])
    >>> [(p, m.tolist()) for p, _, m in plan_batches(lengths, np.arange(5), "gpu", None)]
    [(512, [1, 2, 4, 0, 3])]
    >>> [(p, m.tolist()) for p, _, m in plan_batches(lengths, np.arange(5), "cpu", None)]
    [(256, [0, 3, 4]), (512, [1, 2])]
    """
    padded = np.array([class_of(int(n), backend) for n in lengths[members]], np.int64) \
        if len(members) else np.zeros(0, np.int64)

    def cap_for(size: int) -> int:
        return batch_cap(size, backend, budget)

    out: list[list] = []
    for size in sorted(set(padded.tolist()), reverse=backend == "gpu"):
        group = members[padded == size]
        if backend == "cpu":
            group = group[np.argsort(lengths[group], kind="stable")]
        cap = cap_for(size)
        if backend == "gpu" and out:                     # top up the last, longer batch
            last = out[-1]
            take = group[:max(last[1] - len(last[2]), 0)]
            if len(take):
                last[2] = np.concatenate([last[2], take])
                group = group[len(take):]
        for s in range(0, len(group), cap):
            out.append([size, cap, group[s:s + cap]])
    out.sort(key=lambda b: int(b[2].min()))
    return [(size, cap, m) for size, cap, m in out]


def work_estimate(lengths: Iterable[int]) -> float:
    """Split operations (n^3 / 6 per sequence) of folding sequences of these lengths."""
    return float(sum(n * n * n for n in lengths)) / 6.0


#: ``--backend auto``: jobs of less work (split operations) fold on the CPU, where they finish
#: before a GPU would have started (CUDA start-up and loading the programs take seconds).
GPU_WORK_FROM = 2e9
#: The same for the partition function (about 20 times the CPU time per operation).
PARTITION_GPU_WORK_FROM = 1e8


def choose_engine(requested: str, work: float) -> str:
    """``host`` (no JAX: :mod:`jaxrna.fold.host`), ``cpu`` or ``gpu`` for a job of ``work``
    split operations and ``--backend requested``, decided before JAX starts. ``host`` when the
    CPU is asked for or good enough (``auto``) and the work is below :func:`host_limit`:
    with a C compiler every job on a machine without a GPU (the compiled fill at each
    sequence's length beats JAX's padded batches on a CPU: 200 x 20-2,000 nt took 45 s warm
    there), and jobs the host's cores finish in :data:`~jaxrna.fold.host.SMALL_JOB_S` on a GPU
    host; without one, jobs below :data:`~jaxrna.fold.host.HOST_WORK_LIMIT` (NumPy; importing
    JAX alone would take longer). Otherwise :func:`jaxrna.runtime.choose_backend` (the CPU
    without starting CUDA when the work is below :data:`GPU_WORK_FROM`).

    ``$JAXRNA_FOLD_HOST_WORK`` overrides the limit (0: never the host engine).

    >>> choose_engine("auto", 1e6), choose_engine("cpu", 1e6)
    ('host', 'host')
    """
    from jaxrna.runtime import announce_host, choose_backend

    limit = host_limit(requested)
    if requested in ("auto", "cpu") and work < limit:
        from jaxrna.fold.host import will_use_compiled
        from jaxrna.pipeline import cores

        compiled = will_use_compiled(work)
        announce_host(f"--backend {requested}" + (", a small job" if limit < float("inf")
                                                  else ""),
                      "the compiled fill (C)" if compiled else "NumPy",
                      f"on {cores()} threads" if compiled else "in this process")
        return "host"
    return choose_backend(requested, work, GPU_WORK_FROM)


def host_limit(requested: str) -> float:
    """Split operations below which a ``fold`` job runs on the host engine
    (:func:`choose_engine`)."""
    from jaxrna.fold.host import C_SPLITS_PER_S, HOST_WORK_LIMIT, SMALL_JOB_S, compiled_possible
    from jaxrna.pipeline import cores
    from jaxrna.runtime import gpu_possible

    forced = os.environ.get("JAXRNA_FOLD_HOST_WORK")
    if forced is not None:
        return float(forced)
    if not compiled_possible():
        return HOST_WORK_LIMIT
    if requested == "cpu" or not gpu_possible():
        return float("inf")
    return max(HOST_WORK_LIMIT, C_SPLITS_PER_S * cores() * SMALL_JOB_S)


#: Tile size of the fold's batch and packed programs (:mod:`jaxrna.fold.api`).
TILE = 64


def packed_length(n: int) -> int:
    """The padded length of the packed GPU program that folds one sequence of ``n`` nt (above
    :data:`jaxrna.fold.api.GPU_PACKED_ABOVE`): the energy model's classes, 6,144 and 10,240 nt,
    then multiples of 4,096 (:func:`jaxrna.batching.energy_length_class`), so that up to
    10,240 nt a GPU run compiles at most 2 of them beside the 6 batch classes. The padding is
    exact (code 4 never pairs) and costs little: one 10,240 nt fill takes ~0.1 s on an H200.

    >>> [packed_length(n) for n in (4097, 6145, 10240, 16000)]
    [6144, 10240, 10240, 16384]
    """
    from jaxrna.batching import energy_length_class

    return -(-energy_length_class(n) // TILE) * TILE
