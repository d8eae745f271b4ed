"""Prepare every program ``jaxrna align`` can use, before a run needs it.

The JAX path of a run compiles one program per length class it meets, each with a fixed batch
row count (:mod:`jaxrna.align.classes`; the lengths inside a class, the pair count, the scores
and the gap penalties are runtime values):

* on the CPU (the vmapped sweep) the shorter side picks the lanes, the longer side the width;
  scoring only, an int16 variant of a class for batches whose longest path fits int16 under the
  job's scores;
* on the GPU (the Pallas lane kernels) score only: 15 classes up to 10,240 nt, each
  with two variants at most (two pairs per 32-bit lane for batches whose values fit int16
  under the job's scores, else one); with alignments: 5 square classes up to 2,048 nt,
  longer pairs in the CPU classes of pure-JAX ``batch_align``.

One run uses at most 8 of them (:mod:`jaxrna.align.budget`); a run over that joins its
classes onto larger ones of the same ladders (and folds small variants into int32), so the
programs it uses are among those prepared here.

What stays static is the *option class*: the mode (``global``, ``local``, or ``semi-global``:
global with end gaps scored apart, free or with penalties of their own), alignments or scores
only, and whether the scores are a match/mismatch scheme on the letters used (the default
NUC.4.4 on nucleotides is one) or a full ``matrix`` lookup (e.g. BLOSUM62 on proteins).

:func:`warm` prepares them all and keeps them in the cache directory (``JAXRNA_CACHE_DIR``): a
later ``jaxrna align`` of that option class on any data within ``max_length`` with any scores
compiles nothing. On the CPU it aligns minimal synthetic pairs, one per class (and variant),
through :func:`jaxrna.align.engine.run`, the code path of the CLI; where the CLI would align
on the CPU through parasail (``--backend cpu`` or ``auto`` on a machine without a GPU, for the
schemes parasail supports, unless ``JAXRNA_ALIGN_ENGINE=device``), so does :func:`warm`: only
the JAX programs of pairs too large for parasail's traceback are made. On the GPU it launches
one batch of every class (:func:`gpu_programs`) through the runner of a run
(:class:`jaxrna.align.device_runner.DeviceRunner`), one real pair and the rest empty rows.
Not prepared: the long-pair paths, whose shapes follow each pair (score only on a GPU: fewer
than 512 pairs of a class whose shorter side is 2,048 nt or more, through the tile wavefront,
at each pair's shape, or its class's in a run over the budget; with alignments: pairs whose
traceback table exceeds 256 MiB, beyond 10,240 nt, checkpointed).

>>> [(int(h), int(w)) for h, w in classes(300, alignments=True)]
[(64, 512), (128, 1024), (256, 2048), (512, 4096)]
>>> warm("cpu", max_length=300, mode="local")        # doctest: +SKIP
4
"""

from __future__ import annotations

import io

import numpy as np

from jaxrna.align.budget import PROGRAM_BUDGET

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


def gpu_programs(runner, max_length: int) -> list[tuple[str, int, int, int]]:
    """``(kind, h, w, rows)`` of every GPU batch shape the plan of ``runner`` (a
    :class:`~jaxrna.align.device_runner.DeviceRunner` on the GPU, or in interpret mode) may
    launch for pairs of up to ``max_length`` nt (score only, each in two variants at most:
    :meth:`~jaxrna.align.device_runner.DeviceRunner.packed`; with alignments, the squares and
    the CPU classes of longer pairs, ``"align"``: pure-JAX ``batch_align``)."""
    from jaxrna.align import classes as cl

    k = runner.kernel
    score_only = runner.job.score_only
    kind = "scores" if score_only else "lanes"
    out = [(kind, h, w, runner.rows(kind, h, w)) for h, w in cl.gpu_classes(
        max_length, score_only, k.get("min_side", 128), k.get("rows", 8),
        k.get("lanes", cl.GPU_LANES_PER_PROGRAM))]
    if not score_only:
        for h, w in _longer_classes(max_length, k):
            out.append(("align", h, w, runner.rows("align", h, w)))
    return out


def _longer_classes(max_length: int, kernel: dict | None) -> list[tuple[int, int]]:
    """GPU alignments: the CPU classes of pairs whose square's direction bits do not fit a
    batch (:func:`jaxrna.align.classes.gpu_lanes_fit`)."""
    from jaxrna.align import classes as cl

    k = kernel or {}
    lanes = k.get("lanes", cl.GPU_LANES_PER_PROGRAM)
    out = []
    for a, b in _pairs(max_length, True):
        if not cl.gpu_lanes_fit(cl.gpu_square(b, k.get("min_side", 128), k.get("rows", 8)),
                                lanes):
            h, w = cl.cpu_class(np.array([a]), np.array([b]), False)
            out.append((int(h[0]), int(w[0])))
    return out


def _warm_gpu(backend: str, max_length: int, mode: str, alignments: bool, matrix: bool,
              interpret: bool, kernel: dict | None, seed: int) -> None:
    """The GPU plan's programs of one option class: one batch of each (see the module
    docstring); with alignments, then the ``batch_align`` classes of longer pairs."""
    import jax

    from jaxrna.align import classes as cl
    from jaxrna.align import engine
    from jaxrna.align.device_runner import Batch

    one = np.zeros(1, np.int64)
    # score only, a match/mismatch scheme: the int16x2 variant (small scores: a batch of one
    # 1 x 1 pair fits) and the int32 one (scores too large for int16)
    variants = (False, True) if not alignments and not matrix else (True,)
    for big in variants:
        job = engine.Job(_batch("q", [1], "ACGT", seed), _batch("t", [1], "ACGT", seed + 1),
                         _scoring(mode, matrix, big), mode == "local", True, not alignments)
        runner = engine.DeviceRunner(job, backend, interpret=interpret, kernel=kernel)
        for kind, h, w, rows in gpu_programs(runner, max_length):
            b = Batch(0, one, h, w, rows, np.zeros(1, bool), False, kind)
            jax.block_until_ready(runner.launch(b, one, one))
    if alignments:
        k = kernel or {}
        side = lambda n: cl.gpu_square(n, k.get("min_side", 128), k.get("rows", 8))  # noqa
        lanes = k.get("lanes", cl.GPU_LANES_PER_PROGRAM)
        longer = [(a, b) for a, b in _pairs(max_length, True)
                  if not cl.gpu_lanes_fit(side(b), lanes)]
        for k in range(0, len(longer), PROGRAM_BUDGET):   # runs within the budget
            part = longer[k:k + PROGRAM_BUDGET]
            job = engine.Job(_batch("q", [a for a, _ in part], "ACGT", seed + 2),
                             _batch("t", [b for _, b in part], "ACGT", seed + 3),
                             _scoring(mode, matrix, True), mode == "local", True, False)
            engine.run(job, "tsv", io.StringIO(), backend=backend, workers=0,
                       engine="device", interpret=interpret, kernel=kernel)


def warm(backend: str = "cpu", max_length: int = 10_000, mode: str = "global",
         alignments: bool = True, matrix: bool = False, interpret: bool = False,
         kernel: dict | None = None, **options) -> int:
    """Compile (or load from the cache) the programs ``jaxrna align`` can use for pairs of up
    to ``max_length`` nt on ``backend`` ("cpu", "gpu" or "auto") in one option class: ``mode``
    ("global", "local", "semi-global", or a sequence of them), ``alignments`` (False: score only;
    None: both), ``matrix`` (a full substitution matrix instead of match/mismatch; None: both).
    Returns how many programs were prepared (0 where the CLI would use parasail). Other
    ``options`` (scores, gap penalties, end gap penalties) are accepted and ignored: they are
    runtime values of the same programs. ``interpret`` (with ``kernel``, the kernels' shapes):
    the GPU plan on the CPU, its Pallas kernels in interpret mode (tests), as
    :func:`jaxrna.align.engine.run` takes them."""
    from jaxrna import programs
    from jaxrna.align import engine
    from jaxrna.runtime import enable_compilation_cache, resolve_backend

    modes = MODES if mode is None else (mode,) if isinstance(mode, str) else tuple(mode)
    for m in modes:
        if m not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {m!r}")
    kinds = (True, False) if alignments is None else (bool(alignments),)
    matrices = (False, True) if matrix is None else (bool(matrix),)
    enable_compilation_cache()
    gpu_plan = interpret or resolve_backend(backend) == "gpu"
    if gpu_plan and not interpret:
        backend = "gpu"
    before = programs.memo_size()
    seed = 0
    for m in modes:
        for align_ in kinds:
            for mat in matrices:
                if gpu_plan:
                    seed += 4
                    _warm_gpu(backend, max_length, m, align_, mat, interpret, kernel, seed)
                    continue
                runs = [(_pairs(max_length, align_), True)]
                if not align_:
                    runs.append((_small_pairs(max_length), False))
                for every, big in runs:
                    # one pair per class, in runs of at most a run's program budget (a run
                    # over it would join classes: jaxrna.align.budget)
                    for a in range(0, len(every), PROGRAM_BUDGET):
                        pairs = every[a:a + PROGRAM_BUDGET]
                        seed += 1
                        queries = _batch("q", [a for a, _ in pairs], "ACGT", seed)
                        targets = _batch("t", [b for _, b in pairs], "ACGT", seed + 1000)
                        job = engine.Job(queries, targets, _scoring(m, mat, big),
                                         m == "local", True, not align_)
                        engine.run(job, "tsv", io.StringIO(), backend=backend, workers=0)
    return programs.memo_size() - before
