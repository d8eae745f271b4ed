"""Prepare every program ``jaxrna targets`` can use, before a run needs it.

A run's device programs are fixed by (:mod:`jaxrna.targets.engine`):

- the chunk's *class*: its target nucleotides padded to a power of two from 65,536
  (:data:`~jaxrna.targets.sizes.MIN_CHUNK_CLASS`; later chunks of a run keep the first one's
  class, and a run whose first chunk is full takes at once the class of the largest chunk it
  can have, :func:`~jaxrna.targets.sizes.full_chunk_class`: one class per run): the device
  arrays' shapes follow from it, the chunk's own sizes (nucleotides, targets, lane length,
  overlap) are traced values;
- the miRNA heights (lengths rounded up to 8; at most
  :data:`~jaxrna.targets.sizes.MAX_HEIGHTS` per run) and the tallest of them, which with the
  gap penalties and the scale fixes the refill lead and the value type;
- the option class: free gaps or not (a zero gap penalty or a scale <= 0 frees them: whole
  targets per lane, a host path this module does not prepare), energies or not.

Scores, the energy threshold and the penalties' values inside one lead are traced: they never
make a new program. Per run: one lane-packing program and one tiling program for its chunk
class, and per height one bulk-scan and one refill-and-traceback program (2 + 2 x 2 = 6 at
most), and with energies the ``device`` energy engine's one program
(:mod:`jaxrna.targets.energy`; the ``cpu`` and ``vienna`` engines compile none): **at most 7
per run** (per device), for target records of up to 10,240 nt (or the first chunk's longest).
On a CPU with a C compiler the bulk scan runs in C (:mod:`jaxrna.targets.host_scan`): its tile
counts are one program for every height instead of a scan program per height.
With the default chunk size a run's class is at most 2^26 (a full chunk of 64,000,000 nt plus
a record); with ``--chunk-nt C``, at most ``bucket(C + 10,239)``, which :func:`chunk_classes`
covers where ``target_nt`` reaches it.

:func:`warm` scans minimal synthetic inputs (a miRNA per height, targets of ``N`` filler with
one perfect site per miRNA) through :class:`~jaxrna.targets.engine.Engine`, the engine the CLI
runs, for every chunk class up to ``target_nt`` and every pair (height, tallest height) up to
``mirna_length``, on every device of ``backend``; the programs land in the cache directory
(``JAXRNA_CACHE_DIR``), so a later ``jaxrna targets`` of that option class on target files of
up to ``target_nt`` nucleotides (records up to ``max_length``) and miRNAs of up to
``mirna_length`` nt compiles nothing, whatever its scores, thresholds and penalties (within the
lead of the gap penalties warmed).

>>> heights(32)
[8, 16, 24, 32]
>>> [c >> 16 for c in chunk_classes(300_000)]
[1, 2, 4, 8]
>>> warm("cpu", target_nt=60_000, mirna_length=24)      # doctest: +SKIP
8
"""

from __future__ import annotations

#: miRNAs are at most this long unless told (mature miRNAs are 17-28 nt)
MIRNA_LENGTH = 32
#: target nucleotides per run prepared unless told (chunk classes up to 1,048,576)
TARGET_NT = 1 << 20


def heights(mirna_length: int = MIRNA_LENGTH) -> list[int]:
    """The miRNA heights (lengths rounded up to :data:`~jaxrna.targets.sizes.ROW_STEP`) of
    miRNAs up to ``mirna_length`` nt."""
    from jaxrna.targets.sizes import ROW_STEP, round_up

    return list(range(ROW_STEP, round_up(max(1, mirna_length), ROW_STEP) + 1, ROW_STEP))


def chunk_classes(target_nt: int = TARGET_NT, max_length: int = 10_000) -> list[int]:
    """The chunk classes a run over target files of up to ``target_nt`` nucleotides (records of
    up to ``max_length``) can use: powers of two from the smallest class to the class of its
    largest chunk (a chunk closes once it holds the chunk size, with the record that reaches it)."""
    from jaxrna.targets.api import DEFAULT_CHUNK_NT
    from jaxrna.targets.sizes import MIN_CHUNK_CLASS, bucket

    largest = min(int(target_nt), DEFAULT_CHUNK_NT + int(max_length))
    top = bucket(max(largest, 1), MIN_CHUNK_CLASS)
    out, c = [], MIN_CHUNK_CLASS
    while c <= top:
        out.append(c)
        c *= 2
    return out


_COMPLEMENT = str.maketrans("ACGU", "UGCA")


def _mirna(n: int) -> str:
    """A synthetic miRNA of ``n`` nt (no long repeats)."""
    bases = "UGAGGUAGUAGGUUGUAUAGUUCACGAUCCAG"
    return (bases * (n // len(bases) + 1))[:n]


def _targets(mirnas: list[str], total: int, max_length: int):
    """A :class:`~jaxrna.targets.select.TargetText` of ``total`` nucleotides: ``N`` filler (it
    pairs with nothing) in records of at most ``max_length``, with a perfect site of every miRNA
    in the first record."""
    import numpy as np

    from jaxrna.targets.select import TargetText

    sites = "".join("N" * 8 + m.translate(_COMPLEMENT)[::-1] for m in dict.fromkeys(mirnas))
    step = max(1, int(max_length))
    first = min(max(len(sites), min(step, total)), max(total, len(sites)))
    lengths = [first]
    left = max(total - first, 0)
    while left:
        lengths.append(min(step, left))
        left -= lengths[-1]
    text = (sites + "N" * (first - len(sites))).encode() + b"N" * (sum(lengths) - first)
    return TargetText.from_lengths(np.frombuffer(text, np.uint8), np.array(lengths, np.int64))


def warm(backend: str = "cpu", max_length: int = 10_000, *, no_energy: bool = True,
         target_nt: int = TARGET_NT, mirna_length: int = MIRNA_LENGTH, energy_engine: str | None = None,
         **options) -> int:
    """Compile (or load from the cache) every program ``jaxrna targets`` uses on ``backend``
    for target files of up to ``target_nt`` nucleotides with records of up to ``max_length`` and
    miRNAs of up to ``mirna_length`` nt, with ``options`` (:class:`ScanParams` fields:
    ``gap_open``, ``gap_extend``, ``scale``, ``strict``; ``no_energy=False`` folds the hits'
    energies too, through ``energy_engine`` as the CLI would). Returns the number of programs
    prepared (kept in this process: compiled here or loaded)."""
    import jax

    from jaxrna import programs
    from jaxrna.runtime import enable_compilation_cache
    from jaxrna.targets.api import energy_for
    from jaxrna.targets.engine import MIN_CHUNK_CLASS, Engine, lead_for, prepare_query
    from jaxrna.targets.scoring import ScanParams

    enable_compilation_cache()
    options.pop("score_threshold", None)
    params = ScanParams(score_threshold=1, no_energy=no_energy, **options)  # every miRNA live
    before = programs.memo_size()
    hs = heights(mirna_length)
    for device in jax.devices(backend):
        with jax.default_device(device):
            engine = Engine(params, devices=[device])
            engine.energy = energy_for(params, engine, energy_engine)
            qb = engine.query_block
            for c in chunk_classes(target_nt, max_length):
                total = c if c == MIN_CHUNK_CLASS else c // 2 + 1   # a chunk of class c
                for top in hs:
                    seen = set()
                    for h in hs:
                        if h > top or (h, lead_for(top, params)) in seen:
                            continue
                        seen.add((h, lead_for(top, params)))
                        # a block of miRNAs of height h, then one of the tallest height
                        mirnas = [_mirna(min(h, mirna_length))] * qb + [_mirna(min(top, mirna_length))]
                        queries = [prepare_query(f"m{k}", "", m, params) for k, m in enumerate(mirnas)]
                        engine._class_floor = 0        # each class on its own
                        engine.scan_chunk(queries, _targets(mirnas, total, max_length))
    return programs.memo_size() - before
