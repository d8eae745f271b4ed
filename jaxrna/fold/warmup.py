"""Prepare every program ``jaxrna fold`` (the Nussinov model) can use, before a run needs it.

On a CPU a run compiles one batch program per length class it meets
(:func:`jaxrna.batching.length_class`: 256, 512, 1,024, 2,048, 4,096, 6,144, 8,192 and
10,240 nt, then multiples of 4,096), each with the class's fixed row count
(:func:`jaxrna.fold.api.batch_cap`): at most 8 programs for any length mix up to 10,240 nt.
On a GPU the batch classes are the coarse ladder's (128 ... 4,096 nt, :func:`classes`: 6
programs), also with a fixed row count each whatever the number of sequences, and each longer
sequence runs alone through the packed program of its padded length
(:func:`jaxrna.fold.api.packed_length`: 6,144 and 10,240 nt, then multiples of 4,096): at
most 8 programs up to 10,240 nt on a GPU too.
Lengths, weights and ``--min-loop`` are runtime values of the same program; ``--score-only``
(no traceback) is a program of its own per class, so a run uses either set, never both.

``--partition`` compiles one program per class of :func:`jaxrna.fold.partition.padded_length`
(:data:`~jaxrna.fold.partition.CLASSES`: 80 and 128 nt on the exact path, 512, 1,024, 2,048,
4,096, 6,144 and 10,240 nt on the tiled one; the sequence's length, weights,
temperature and ``min_loop`` are runtime values): at most 8 programs up to 10,240 nt, the
same on a CPU and a GPU. Only where the tiled path's guard trips (temperatures far below 1)
does a class compile one more program, its exact recompute; :func:`warm` does not prepare it.

:func:`warm` compiles the programs through the code path the CLI uses (the persistent cache
of ``JAXRNA_CACHE_DIR`` keeps them), without running them: a later ``jaxrna fold`` on any
data within ``max_length`` with the same option class compiles nothing.

>>> classes("cpu", 3000)
[256, 512, 1024, 2048, 4096]
>>> warm("cpu", max_length=300, score_only=True)        # doctest: +SKIP
2
"""

from __future__ import annotations


def classes(backend: str, max_length: int) -> list[int]:
    """The padded lengths of the batch programs a run on ``backend`` over sequences of up to
    ``max_length`` nt may use (the GPU's batches; its longer sequences go one by one through
    the packed schedule, :func:`packed_lengths`)."""
    from jaxrna.batching import bucket_length_coarse, length_class_ladder
    from jaxrna.fold.api import GPU_PACKED_ABOVE

    if backend == "cpu":
        return length_class_ladder(max_length)
    top = min(max_length, GPU_PACKED_ABOVE)
    out, n = [], 1
    while True:
        c = bucket_length_coarse(n)
        out.append(c)
        if c >= top:
            return out
        n = c + 1


def packed_lengths(max_length: int) -> list[int]:
    """The padded lengths of the GPU's packed programs for sequences of up to ``max_length``."""
    from jaxrna.fold.api import GPU_PACKED_ABOVE, packed_length

    out, n = [], GPU_PACKED_ABOVE + 1
    while n <= max_length:
        c = packed_length(n)
        out.append(c)
        n = c + 1
    return out


def partition_lengths(max_length: int) -> list[int]:
    """The padded lengths (classes) of the ``--partition`` programs up to ``max_length`` nt.

    >>> partition_lengths(10_240)
    [80, 128, 512, 1024, 2048, 4096, 6144, 10240]
    """
    from jaxrna.fold.partition import class_ladder

    return class_ladder(max_length) if max_length >= 2 else []


def warm(backend: str = "cpu", max_length: int = 10_000, *, partition: bool = False,
         score_only: bool = False, **options) -> int:
    """Compile (or load from the cache) every program ``jaxrna fold`` (Nussinov) may use on
    ``backend`` ("cpu", "gpu" or "auto") for sequences of up to ``max_length`` nt, for the
    option class ``partition`` / ``score_only``; returns how many programs were prepared.
    Other ``options`` (weights, min_loop, temperature) are accepted and ignored: they do not
    change the programs."""
    import jax
    import numpy as np

    from jaxrna import programs
    from jaxrna.runtime import enable_compilation_cache, resolve_backend

    del options
    enable_compilation_cache()
    backend = resolve_backend(backend)
    device = jax.devices(backend)[0]
    count = 0
    if partition:
        from jaxrna.fold import partition as part

        with part.float64():
            for padded in partition_lengths(max_length):
                static = part.solve_static(part.class_method(padded), part.default_tile(padded),
                                           device.platform)
                args = (np.full(padded, 4, np.int32), np.zeros((5, 5), np.float64),
                        np.asarray(1.0), np.asarray(3, np.int32), np.asarray(2, np.int32))
                programs.program("fold.partition", part.solve_jit, args, static, device)
                count += 1
        return count
    from jaxrna.fold import api

    with_pairs = not score_only
    for padded in classes(backend, max_length):
        rows = api.batch_cap(padded, backend)
        codes = np.full((rows, padded), 4, np.int8)
        lengths = np.zeros(rows, np.int32)
        api.batch_program(codes, lengths, np.zeros((5, 5), np.int32), api.min_loop_arg(3),
                     with_pairs, backend, device)
        count += 1
    if backend == "gpu":
        # the packed programs: a short sequence run padded to each length
        from jaxrna.alphabet import encode
        from jaxrna.fold.gpu import fold_gpu

        for padded in packed_lengths(max_length):
            with jax.default_device(device):
                fold_gpu(encode("GGGAAAUCCC"), np.ones((5, 5), np.int32), 3,
                         with_pairs=with_pairs, pad_to=padded)
            count += 1
    return count
