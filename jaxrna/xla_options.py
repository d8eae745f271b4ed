"""The XLA options a program of jaxrna's store is compiled with, by its name and platform.

:func:`jaxrna.programs.program` passes them to ``jax.jit(...).lower(...).compile`` and puts them
in the program's key, so a run and ``jaxrna warmup`` compile and find the same executable (a
process-wide ``XLA_FLAGS`` would reach every subcommand's programs alike).

>>> compiler_options("fold.tiles", "gpu")
{'xla_gpu_autotune_level': 0}
"""

from __future__ import annotations

#: XLA options of a GPU program, by the start of its name: autotuning off for the programs of
#: ``fold`` (Nussinov), whose compilation it lengthened without making them faster (H100, one
#: call, alternating: `fold --partition` 2,000 nt cold 3.25-3.28 s instead of 3.93-4.52, warm
#: 1.76-1.90 against 1.77-2.14). Tried on the others and not kept: `fold --model turner`
#: (1,000 x 50-500 nt cold 7.10-9.12 s against 7.35-8.73; 404 x 1-2,600 nt 20.0-21.5 against
#: 20.7-21.5) and `interact` (4.54-5.21 against 4.77-5.56) showed no difference; `align` and
#: `targets` ran 6-9% slower warm with the flag set for the whole process.
#: Not kept: ``xla_gpu_deterministic_ops`` for the energy model's partition program (its pair
#: probabilities are a gradient, whose scatter-adds XLA ran with atomic additions on a GPU, so
#: the last bits changed from run to run): the same output every run, but 3.5 times slower
#: (2,000 x 200 nt warm 87.8 s against 24.9 s, H100, eleventh session; 2.5-9x for the batch
#: program, S17i). The program's reads now have derivatives without atomics instead
#: (:mod:`jaxrna.energy.tap_rows`, :func:`jaxrna.energy.partition.exterior_c`; S17j).
GPU_COMPILER_OPTIONS = {
    ("fold.",): {"xla_gpu_autotune_level": 0},
}


#: ``JAXRNA_XLA_OPTIONS``: GPU compiler options to try, by program name prefix, over
#: :data:`GPU_COMPILER_OPTIONS` (benchmarks: ``"energy.:xla_gpu_autotune_level=1;interact.:
#: xla_gpu_autotune_level=0"``). They are part of a program's key like the others.
ENV = "JAXRNA_XLA_OPTIONS"


def env_options(text: str | None = None) -> list[tuple[str, dict]]:
    """``(name prefix, options)`` of :data:`ENV` (or ``text``): ``;``-separated
    ``PREFIX:key=value,key=value`` (an empty prefix: every program); ``true``/``false`` are
    booleans, whole numbers ints.

    >>> env_options("energy.:xla_gpu_autotune_level=1,xla_llvm_disable_expensive_passes=true")
    [('energy.', {'xla_gpu_autotune_level': 1, 'xla_llvm_disable_expensive_passes': True})]
    """
    import os

    text = os.environ.get(ENV, "") if text is None else text
    out = []
    for part in text.split(";"):
        prefix, sep, items = part.strip().partition(":")
        if not sep:
            continue
        options = {}
        for item in items.split(","):
            key, eq, value = item.strip().partition("=")
            if not eq or not key.strip():
                continue
            low = value.strip().lower()
            options[key.strip()] = (low == "true" if low in ("true", "false") else
                                    int(low) if low.lstrip("-").isdigit() else value.strip())
        out.append((prefix.strip(), options))
    return out


def compiler_options(name: str, platform: str) -> dict:
    """The XLA options program ``name`` is compiled with on ``platform``
    (:data:`GPU_COMPILER_OPTIONS`, then :data:`ENV`'s; none on CPUs).

    >>> compiler_options("fold.partition", "gpu"), compiler_options("fold.partition", "cpu")
    ({'xla_gpu_autotune_level': 0}, {})
    >>> compiler_options("targets.scan.scan_lanes", "gpu")
    {}
    """
    if platform != "gpu":
        return {}
    out: dict = {}
    for prefixes, options in GPU_COMPILER_OPTIONS.items():
        if name.startswith(prefixes):
            out = dict(options)
            break
    for prefix, options in env_options():
        if name.startswith(prefix):
            out.update(options)
    return out
