"""How a fill program is laid out for a platform and a padded length: the sweep's bands of
diagonals (:func:`sweep_bands`, :func:`bands_for`), the multiloop split's sub-bands
(:func:`split_bands_for`) and the form of the interior loop (:func:`interior_mode`).
:mod:`jaxrna.energy.fill` builds its program from these (and re-exports them); they are
static choices, part of a program's key.

>>> bands_for("gpu", 512), interior_mode("cpu"), split_bands_for(512, 4, 200)
(1, 'gather', [(4, 53), (53, 102), (102, 151), (151, 200)])
"""

from __future__ import annotations

import functools
import os

import jax


def band_bounds(length: int, bands: int, first: int = 4) -> list[tuple[int, int]]:
    """Diagonals ``first .. length-1`` in at most ``bands`` ranges of similar size.

    >>> band_bounds(64, 4)
    [(4, 19), (19, 34), (34, 49), (49, 64)]
    """
    if length <= first:
        return [(first, first + 1)]
    size = max(1, -(-(length - first) // bands))
    return [(d0, min(d0 + size, length)) for d0 in range(first, length, size)]


def sweep_bands(length: int, count: int | None = None) -> list[tuple[int, int]]:
    """The bands of the sweep, diagonals 4 .. length-1 in ``count`` ranges of equal size
    (default: a CPU's count, :func:`bands_for`: two up to 512 nt, four beyond). Each band compiles its
    own loop body (most of a program's size and compile time), and computes its diagonals over
    the static height of its first one, so fewer bands mean smaller programs but more cells
    computed: one band computes L^2 cells, two 0.75 L^2, four 0.63 L^2 against the triangle's
    0.5 L^2 (issue 26: six bands before, two of them for the first 32 diagonals, 0.72 L^2 at
    512 nt, 0.63 at 1,024).

    >>> sweep_bands(64)
    [(4, 34), (34, 64)]
    >>> sweep_bands(1024)
    [(4, 259), (259, 514), (514, 769), (769, 1024)]
    >>> sweep_bands(1024, 1)
    [(4, 1024)]
    """
    return band_bounds(length, count or bands_for("cpu", length), first=4)


#: A GPU's programs of padded length up to this sweep in one band, up to
#: :data:`GPU_TWO_BANDS_MAX` in two (:func:`bands_for`).
GPU_ONE_BAND_MAX = 1024
GPU_TWO_BANDS_MAX = 4096


def bands_for(platform: str, length: int) -> int:
    """How many sweep bands (:func:`sweep_bands`) a program of padded ``length`` has on
    ``platform``. A GPU's diagonal steps are bound by their chain of dependent launches, not by
    the cells they compute, so it takes fewer, larger bands: one up to 1,024 nt and two up to
    4,096 (issue 26, H100, one program of the batch: 1,024 nt, 128 rows, compiled in 14.2 s
    with four bands, 8.8 with two, 7.0 with one, running 0.60-0.70 s each way; 4,096 nt, 16
    rows, 12.5 s with four, 8.1 with two, running 2.43 -> 2.57 s). A CPU computes every cell it
    is given: two bands up to 512 nt, four beyond.

    >>> bands_for("cpu", 512), bands_for("cpu", 1024), bands_for("gpu", 1024), bands_for("gpu", 4096)
    (2, 4, 1, 2)
    """
    if platform == "gpu":
        if length <= GPU_ONE_BAND_MAX:
            return 1
        if length <= GPU_TWO_BANDS_MAX:
            return 2
    return 2 if length <= 512 else 4


def split_bands_for(length: int, d0: int, d1: int) -> list[tuple[int, int]]:
    """Sub-bands of the multiloop split inside the sweep band [d0, d1): one per 64
    diagonals, at most 16 over the whole table."""
    per = max(64, -(-length // 16))
    count = max(1, -(-(d1 - d0) // per))
    return band_bounds(d1, count, first=d0) if d1 - d0 > per else [(d0, d1)]


#: ``interior`` values of :func:`fill`.
INTERIOR_MODES = ("jax", "loop", "gather", "pallas", "interpret")


#: Padded lengths up to this use the kernels on a GPU (see :func:`interior_mode`).
KERNEL_MAX_LENGTH = 256


#: The interior loop's pure-JAX form where no kernel serves: each group of members read by one
#: gather of row slices and reduced by ``min``
#: (:meth:`jaxrna.energy.fill.DiagView.group_min_gather`).
PURE_JAX = "gather"


def interior_mode(platform: str, length: int = 64) -> str:
    """The ``interior`` of :func:`fill` for programs compiled for ``platform`` (a JAX device's
    ``platform``) and tables of padded ``length``: the Pallas kernels on GPUs for short
    sequences (folded in large batches: one program per sequence and block of cells keeps the
    GPU full), one gather per group of members elsewhere (:data:`PURE_JAX`): on CPUs and on GPUs
    above :data:`KERNEL_MAX_LENGTH`. The gather is a program a fraction of the size of the ~490
    slices (``"jax"``) or of the rolled loop (``"loop"``, 16 slices a trip) and runs as fast
    (H100, twenty-second session, the same tables: 512 nt x 512 rows compiled in 1.59 s against
    3.51 s with the rolled loop, ran 0.240 s against 0.255-0.296; 1,024 x 256: 1.86 / 3.56 s,
    0.557 / 0.587-0.596 s; 4,096 x 32: 2.91 / 5.94 s, 2.13 / 2.47-2.54 s).
    ``JAXRNA_ENERGY_INTERIOR`` (one of :data:`INTERIOR_MODES`) overrides it, for comparisons;
    ``JAXRNA_ENERGY_INTERIOR_LONG`` ("jax", "loop" or "gather") only that of GPUs above
    :data:`KERNEL_MAX_LENGTH`.

    >>> interior_mode("cpu"), interior_mode("gpu", 4096)
    ('gather', 'gather')
    """
    forced = forced_interior()
    if forced["all"]:
        return forced["all"]
    if platform != "gpu":
        return PURE_JAX
    if length <= KERNEL_MAX_LENGTH and _cuda():
        return "pallas"
    return forced["long"] or PURE_JAX


def forced_interior() -> dict:
    """``{"all": ..., "long": ...}``: the interior loop ``JAXRNA_ENERGY_INTERIOR`` (one of
    :data:`INTERIOR_MODES`) and ``JAXRNA_ENERGY_INTERIOR_LONG`` ("jax", "loop" or "gather") ask
    for, or "" where they are unset or unknown.

    >>> forced_interior()["all"] in ("",) + INTERIOR_MODES
    True
    """
    every = os.environ.get("JAXRNA_ENERGY_INTERIOR", "")
    long = os.environ.get("JAXRNA_ENERGY_INTERIOR_LONG", "")
    return {"all": every if every in INTERIOR_MODES else "",
            "long": long if long in ("jax", "loop", "gather") else ""}


@functools.lru_cache(maxsize=1)
def _cuda() -> bool:
    """Whether JAX's GPUs are NVIDIA's (the kernels are built and measured with Triton for
    CUDA; a ROCm GPU keeps the pure-JAX form)."""
    try:
        return "rocm" not in jax.devices("gpu")[0].client.platform_version.lower()
    except Exception:  # no GPU backend, or a client that does not say
        return False
