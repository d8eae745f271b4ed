"""How the energy model's records become device batches: a fixed row count per length class
(:func:`batch_rows_for`), records grouped by class into batches of those rows
(:func:`device_batches`), short classes moved into a longer class's spare rows on a GPU
(:func:`into_spare_rows`), a long class's only record in one row on a GPU
(:func:`alone_rows`), and a GPU batch's memory budget (:func:`gpu_budget`). Used by
:func:`jaxrna.energy.api.fold_energy_records` and ``jaxrna warmup``.

>>> [(c, r, len(b)) for c, r, b in device_batches([100] * 9 + [300], "cpu", 1 << 30)]
[(128, 8, 8), (128, 8, 1), (512, 8, 1)]
"""

from __future__ import annotations

from jaxrna.batching import energy_length_class

#: Bytes per padded position squared that a sequence's tables need (seven diagonal tables,
#: the column copy of the multiloop table, traceback reads), for the memory check.
BYTES_PER_CELL = 48
#: Rows of a device batch on a CPU for length classes up to :data:`CPU_BATCH_MAX_LENGTH`
#: (larger batches are not faster there); longer classes fold one sequence at a time.
CPU_BATCH = 8
CPU_BATCH_MAX_LENGTH = 512
#: At most this many rows in a GPU batch (the memory budget sets fewer for long classes);
#: ``JAXRNA_ENERGY_GPU_ROWS`` overrides it (A/B measurements).
GPU_MAX_ROWS = 2048
#: Length classes from this many nt take twice the batch budget on a GPU: their batches are
#: bound by the chain of diagonal steps, not by the rows (on an H100, 4,096 nt: a batch of one
#: sequence of 2,600 nt took 1.17 s, of 16 1.34 s, of 32 1.90 s), while shorter classes'
#: time grows with their rows (1,024 nt: 76 sequences in 256 rows 0.69 s, in 512 1.07 s).
GPU_LONG_CLASS = 4096
#: On a GPU, a class from this many nt that holds a single record of a run runs it in a batch
#: of one row (:func:`alone_rows`), the class's second standard program: a batch computes all
#: its rows, filled or not, so one record of 4,000 nt in the class's 64 rows took 3.3 s of MFE
#: where one row takes about 1.2 (H200, S26b), and a one-row program is traced without
#: ``vmap`` (:func:`jaxrna.batching.map_rows`) and compiles sooner.
ALONE_MIN_LENGTH = 1024


def batch_rows_for(length: int, backend: str, budget: int) -> int:
    """The fixed row count of a device batch of length class ``length`` (every batch of the
    class has it, a last one topped up with empty rows: one program per class): on a CPU
    :data:`CPU_BATCH` up to :data:`CPU_BATCH_MAX_LENGTH` nt, else 1; on a GPU the largest
    power of two whose tables fit in ``budget`` bytes (twice ``budget`` for classes from
    :data:`GPU_LONG_CLASS` nt), at most :data:`GPU_MAX_ROWS`.

    >>> batch_rows_for(256, "cpu", 1 << 30), batch_rows_for(1024, "cpu", 1 << 30)
    (8, 1)
    >>> batch_rows_for(128, "gpu", 15 << 30), batch_rows_for(2048, "gpu", 15 << 30)
    (2048, 64)
    >>> batch_rows_for(4096, "gpu", 15 << 30)
    32
    """
    import os

    if backend != "cpu" and length >= GPU_LONG_CLASS:
        budget *= 2
    fit = max(1, budget // (BYTES_PER_CELL * (length + 64) ** 2))
    if backend == "cpu":
        cap = CPU_BATCH if length <= CPU_BATCH_MAX_LENGTH else 1
    else:
        cap = int(os.environ.get("JAXRNA_ENERGY_GPU_ROWS") or GPU_MAX_ROWS)
    rows = max(1, min(cap, fit))
    return 1 << (rows.bit_length() - 1)


def alone_rows(length: int, backend: str) -> int | None:
    """The row count of a batch that holds the only record of class ``length`` in a run: 1 on
    a GPU from :data:`ALONE_MIN_LENGTH` nt (the class's second standard program, which
    ``jaxrna warmup`` prepares too), else None (the class's :func:`batch_rows_for`).

    >>> alone_rows(2048, "gpu"), alone_rows(512, "gpu"), alone_rows(2048, "cpu")
    (1, None, None)
    """
    return 1 if backend != "cpu" and length >= ALONE_MIN_LENGTH else None


def standard_rows(length: int, backend: str, budget: int) -> list[int]:
    """Every row count a run may use for class ``length``: :func:`batch_rows_for`, and
    :func:`alone_rows` where it differs (what ``jaxrna warmup`` prepares).

    >>> standard_rows(2048, "gpu", 15 << 30), standard_rows(2048, "cpu", 1 << 30)
    ([64, 1], [1])
    """
    rows = [batch_rows_for(length, backend, budget)]
    alone = alone_rows(length, backend)
    return rows + [alone] if alone is not None and alone not in rows else rows


def device_batches(lengths: list[int], backend: str, budget: int, length_class=None,
                   alone: bool = False) -> list[tuple[int, int, list[int]]]:
    """Indices of ``lengths`` grouped by length class (``length_class(n)``, default
    :func:`energy_length_class`) into device batches: ``(class, rows, indices)`` with ``rows``
    the class's fixed row count (:func:`batch_rows_for`), at most ``rows`` indices each, in
    order of their first member. ``alone``: these are a whole run's records, and a class that
    holds one of them takes :func:`alone_rows` where that says so.

    >>> [(c, r, len(b)) for c, r, b in device_batches([100] * 20 + [300], "cpu", 1 << 30)]
    [(128, 8, 8), (128, 8, 8), (128, 8, 4), (512, 8, 1)]
    >>> device_batches([2000], "gpu", 15 << 30), device_batches([2000], "gpu", 15 << 30, alone=True)
    ([(2048, 64, [0])], [(2048, 1, [0])])
    >>> device_batches([2000, 100], "gpu", 15 << 30, alone=True)   # 100 nt in a spare row
    [(2048, 64, [0, 1])]
    """
    groups: dict[int, list[int]] = {}
    for idx, n in enumerate(lengths):
        groups.setdefault((length_class or energy_length_class)(n), []).append(idx)
    rows_of = {padded: batch_rows_for(padded, backend, budget) for padded in groups}
    if backend != "cpu":
        groups = into_spare_rows(groups, rows_of)
    for padded, members in groups.items():
        one = alone_rows(padded, backend) if alone and len(members) == 1 else None
        if one is not None:
            rows_of[padded] = one
    out = []
    for padded, members in groups.items():
        rows, members = rows_of[padded], sorted(members)
        out += [(padded, rows, members[k:k + rows]) for k in range(0, len(members), rows)]
    out.sort(key=lambda b: b[2][0])
    return out


def into_spare_rows(groups: dict[int, list[int]], rows_of: dict[int, int]
                    ) -> dict[int, list[int]]:
    """``groups`` (length class -> members) with every class whose members fit in the empty
    rows of a longer class's last batch moved there (the smallest such class; shortest
    classes first, so moves chain): on a GPU a batch computes all its fixed rows, filled or
    not, and runs to its longest sequence, so a moved class costs no device time -- and one
    program fewer to compile. The results do not depend on the class.

    >>> into_spare_rows({128: [0, 1], 512: [2], 2048: [3]}, {128: 64, 512: 8, 2048: 1})
    {512: [2, 0, 1], 2048: [3]}
    >>> into_spare_rows({128: list(range(9)), 512: [9]}, {128: 64, 512: 8})
    {128: [0, 1, 2, 3, 4, 5, 6, 7, 8], 512: [9]}
    """
    out = {padded: list(members) for padded, members in sorted(groups.items())}
    for padded in list(out):
        count = len(out[padded])
        for longer in [c for c in out if c > padded]:
            spare = -len(out[longer]) % rows_of[longer]
            if count <= spare:
                out[longer] += out.pop(padded)
                break
    return out


#: Share of the memory JAX may use on a GPU that one batch's tables take;
#: ``JAXRNA_ENERGY_GPU_SHARE`` overrides it (A/B measurements).
GPU_BATCH_SHARE = 0.25


def gpu_budget(device) -> int:
    """Bytes of one GPU batch: :data:`GPU_BATCH_SHARE` of the memory JAX may use on
    ``device``, at least 8 GiB (also when the device does not say)."""
    import os

    from jaxrna.runtime import device_memory_bytes

    share = float(os.environ.get("JAXRNA_ENERGY_GPU_SHARE") or GPU_BATCH_SHARE)
    return max(8 << 30, int(device_memory_bytes(device) * share))
