"""Prepare every program ``jaxrna align`` can use, before a run needs it.

The JAX path of a run compiles one program per length class it meets
(:mod:`jaxrna.align.classes`: the shorter side picks the lanes, the longer side the width; the
lengths inside a class, the scores and the gap penalties are runtime values), and, scoring only,
an int16 variant of a class for batches whose longest path fits int16 under the job's scores.
What stays static is the *option class*: the mode (``global``, ``local``, or ``semi-global``:
global with end gaps scored apart, free or with penalties of their own), alignments or scores
only, and whether the scores are a match/mismatch scheme on the letters used (the default
NUC.4.4 on nucleotides is one) or a full ``matrix`` lookup (e.g. BLOSUM62 on proteins).

:func:`warm` aligns minimal synthetic pairs, one per class (and variant) up to ``max_length``,
through :func:`jaxrna.align.engine.run`, the code path of the CLI, so the programs are compiled
(or loaded) and kept in the cache directory (``JAXRNA_CACHE_DIR``): a later ``jaxrna align``
of that option class on any data within ``max_length`` with any scores compiles nothing. Where
the CLI would align on the CPU through parasail (``--backend cpu`` or ``auto`` on a machine
without a GPU, for the schemes parasail supports, unless ``JAXRNA_ALIGN_ENGINE=device``), so
does :func:`warm`: only the JAX programs of pairs too large for parasail's traceback are made.

>>> [(int(h), int(w)) for h, w in classes(300, alignments=True)]
[(64, 512), (128, 1024), (256, 2048), (512, 4096)]
>>> warm("cpu", max_length=300, mode="local")        # doctest: +SKIP
4
"""

from __future__ import annotations

import io

import numpy as np

MODES = ("global", "local", "semi-global")


def _pairs(max_length: int, alignments: bool) -> list[tuple[int, int]]:
    """Representative ``(short, long)`` lengths of every class up to ``max_length``: the
    largest pair of each class (so a class whose pairs are long enough for the record path's
    checkpoints gets one, as the CLI would)."""
    from jaxrna.align import classes as cl

    top = max(1, int(max_length))
    ladder = [h for h in cl.CPU_LANES if h < top] + [top]
    cands = set()
    for h in ladder:
        short = min(h, top)
        for long_ in (short, h * cl.CPU_WIDE, h * cl.CPU_WIDE + 1, top):
            if short <= long_ <= top:
                cands.add((short, long_))
    best: dict[tuple[int, int], tuple[int, int]] = {}
    for short, long_ in sorted(cands):
        h, w = cl.cpu_class(np.array([short]), np.array([long_]), not alignments)
        key = (int(h[0]), int(w[0]))
        if key not in best or short * long_ > best[key][0] * best[key][1]:
            best[key] = (short, long_)
    return [best[k] for k in sorted(best)]


def classes(max_length: int, alignments: bool = True) -> list[tuple[int, int]]:
    """The ``(lanes, width)`` classes a run over pairs of up to ``max_length`` nt may use."""
    from jaxrna.align import classes as cl

    out = set()
    for short, long_ in _pairs(max_length, alignments):
        h, w = cl.cpu_class(np.array([short]), np.array([long_]), not alignments)
        out.add((int(h[0]), int(w[0])))
    return sorted(out)


def _small_pairs(max_length: int) -> list[tuple[int, int]]:
    """Score only: one pair per lanes class that can run in int16 (with |scores| <= 1)."""
    from jaxrna.align import classes as cl
    from jaxrna.align.recurrence import fits_int16

    class _Unit:
        @staticmethod
        def max_abs():
            return 1

    out, low = [], 1
    for short, long_ in _pairs(max_length, False):
        h = int(cl.cpu_class(np.array([short]), np.array([long_]), True)[0][0])
        n = max(1, min(short, low))
        if fits_int16(_Unit, h, n):
            out.append((n, n))
        low = h + 1
    return out


def _batch(name: str, lengths: list[int], letters: str, seed: int):
    from jaxrna.io.bulk import SeqBatch
    from jaxrna.io.fasta import Record

    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(letters.encode(), np.uint8)
    recs = [Record(id=f"{name}{k}", sequence=alphabet[rng.integers(0, len(alphabet), n)]
                   .tobytes().decode()) for k, n in enumerate(lengths)]
    return SeqBatch.from_records(recs, source=f"<warmup {name}>")


def _scoring(mode: str, matrix: bool, big: bool):
    """A scheme of the option class; ``big``: scores too large for int16 (the int32 variant),
    else |scores| <= 1. The values are runtime arguments: any will do."""
    from jaxrna.align.scoring import Scoring, match_mismatch, with_end_gaps

    k = 1000 if big else 1
    if matrix:              # not a match/mismatch scheme on the letters used
        mat = np.array([[1, 0, -1, 0], [0, 1, 0, -1], [-1, 0, 1, 0], [0, -1, 0, 1]]) * k
        sc = Scoring(alphabet="ACGT", matrix=mat, gap_open=k, gap_extend=k, name="warmup")
    else:
        sc = match_mismatch(k, -k, k, k)
    if mode == "semi-global":   # end gaps of their own (parasail takes only free ones)
        return with_end_gaps(sc, "penalized", end_open=0, end_extend=k)
    return sc


def warm(backend: str = "cpu", max_length: int = 10_000, mode: str = "global",
         alignments: bool = True, matrix: bool = False, **options) -> int:
    """Compile (or load from the cache) the programs ``jaxrna align`` can use for pairs of up
    to ``max_length`` nt on ``backend`` ("cpu", "gpu" or "auto") in one option class: ``mode``
    ("global", "local", "semi-global", or a sequence of them), ``alignments`` (False: score only;
    None: both), ``matrix`` (a full substitution matrix instead of match/mismatch; None: both).
    Returns how many programs were prepared (0 where the CLI would use parasail). Other
    ``options`` (scores, gap penalties, end gap penalties) are accepted and ignored: they are
    runtime values of the same programs.

    The GPU path's shapes are still those of its job-wide plan (see the module docstring of
    :mod:`jaxrna.align.engine`); this warms the classes the pure-JAX path uses."""
    from jaxrna import programs
    from jaxrna.align import engine
    from jaxrna.runtime import enable_compilation_cache

    modes = MODES if mode is None else (mode,) if isinstance(mode, str) else tuple(mode)
    for m in modes:
        if m not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {m!r}")
    kinds = (True, False) if alignments is None else (bool(alignments),)
    matrices = (False, True) if matrix is None else (bool(matrix),)
    enable_compilation_cache()
    before = programs.memo_size()
    seed = 0
    for m in modes:
        for align_ in kinds:
            for mat in matrices:
                runs = [(_pairs(max_length, align_), True)]
                if not align_:
                    runs.append((_small_pairs(max_length), False))
                for pairs, big in runs:
                    if not pairs:
                        continue
                    seed += 1
                    queries = _batch("q", [a for a, _ in pairs], "ACGT", seed)
                    targets = _batch("t", [b for _, b in pairs], "ACGT", seed + 1000)
                    job = engine.Job(queries, targets, _scoring(m, mat, big), m == "local",
                                     True, not align_)
                    engine.run(job, "tsv", io.StringIO(), backend=backend, workers=0)
    return programs.memo_size() - before
