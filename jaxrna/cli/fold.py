"""``jaxrna fold``: folding of every record of FASTA files (or one ``--sequence``): in the energy
model (``--model turner``, the default: :mod:`jaxrna.cli.fold_energy`) or by pair maximisation
(``--model nussinov``)."""

from __future__ import annotations

import argparse
import itertools
import logging

from jaxrna.cli.common import (RunSummary, add_backend_option, add_ensemble_options,
                               add_output_options, ensemble_temperature, positive_int,
                               run_ensembles, setup_logging, use_device_options, weights_arg)
from jaxrna.cli.fold_energy import (ENERGY_HELP, add_energy_options, energy_model, run_turner,
                                    run_turner_partition)
from jaxrna.formats.fold import SCORE_ONLY_FORMATS, WRITERS
from jaxrna.io import InputError, sequence_record
from jaxrna.progress import progress
from jaxrna.stages import stage

log = logging.getLogger("jaxrna")

EXAMPLES = """examples:
  jaxrna fold test-data/fold_example.fa                  # energy model (as RNAfold)
  jaxrna fold test-data/fold_example.fa --partition --mea  # as RNAfold -p --MEA
  jaxrna fold --model nussinov --sequence GGGAAAUCCCGCGCAAAGCGC --weights bpmax -f ct
  jaxrna fold --model nussinov seqs.fa.gz --weights GC=3,AU=2,GU=1 --min-loop 0 -f tsv -o folds.tsv
  cat seqs.fa | jaxrna fold - -f json
  jaxrna fold --model nussinov seqs.fa --partition --temperature 2 -f json -o probs.json
  jaxrna fold --model nussinov --sequence GGGAAAUCCC --partition -o dots.txt --plot dots.png

--model nussinov: maximum total pair weight. weights: unit (1 per pair, default), bpmax (GC 3, AU 1, GU 1.5), integer (GC 3, AU 2, GU 1),
or explicit GC=x,AU=y,GU=z (half-integers are exact).

--model nussinov --partition: the base-pair partition function Z (every structure weighs exp(W / T), W its
total pair weight, the empty structure included) and the probability of every pair. With -f
json a list with one object per record (id, length, temperature, weights, min_loop,
log_partition = ln Z, pair_probabilities as [i, j, p], 1-based, i < j, every p >= 1e-6);
with the other formats a dot-plot text (per record '# ID LENGTH LOG_PARTITION', then 'i j p'
lines). --plot FILE.png also draws heat maps (one record: FILE.png; several: FILE_1.png,
FILE_2.png, ... numbered by input position; needs matplotlib: pip install 'jaxrna[plot]').
Memory grows as n^2 (about 2 GiB for 4,000 nt, 11 GiB for 10,000 nt; float64).
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "fold", help="minimum free energy structures and ensembles (energy model, as RNAfold) "
                     "or, with --model nussinov, maximum-weight structures",
        description="Fold RNA sequences: by default to the minimum free energy of ViennaRNA's "
                    "nearest-neighbour (Turner) model, as RNAfold (with --partition: the "
                    "ensemble, as RNAfold -p); with --model nussinov by maximising the total "
                    "weight of base pairs. Allowed pairs: A-U, G-C, G-U; N and other IUPAC "
                    "codes never pair.",
        epilog=EXAMPLES + "\n" + ENERGY_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("fasta", nargs="*", metavar="FASTA",
                   help="FASTA file(s), plain or gzip; '-' reads standard input")
    p.add_argument("-s", "--sequence", metavar="SEQ", help="fold this one sequence (id 'seq')")
    p.add_argument("-w", "--weights", type=weights_arg, default=None, metavar="SET",
                   help="with --model nussinov: unit (default), bpmax, integer, or GC=x,AU=y,GU=z")
    p.add_argument("-m", "--min-loop", type=positive_int, default=3, metavar="N",
                   help="with --model nussinov: a pair (i, j) needs j - i > N, i.e. at least N "
                        "unpaired bases in a hairpin (default 3)")
    add_output_options(p, list(WRITERS), "dbn")
    p.add_argument("--score-only", action="store_true",
                   help="skip the traceback (formats tsv and json only)")
    add_ensemble_options(p, "partition", "partition function and base-pair probabilities "
                         "instead of one best structure", "Nussinov structures",
                         "pair probabilities")
    p.add_argument("--max-memory", type=float, metavar="GiB", default=None,
                   help="refuse sequences whose tables need more (default: 80%% of this machine's memory)")
    add_backend_option(p)
    add_energy_options(p)
    p.set_defaults(func=run)


def _run_partition(args, temperature: float, requested: str, max_bytes) -> int:
    chunks, work = _peek(_read(args), PARTITION_PEEK)
    backend = _start_jax(requested, work, partition=True)
    with stage("imports"):
        from jaxrna.fold.partition import partition_records
        from jaxrna.formats.fold_partition import writer_for
    records = (c.record(k) for c in chunks for k in range(len(c)))

    def compute(records, on_done, on_error):
        return partition_records(records, args.weights, args.min_loop, temperature,
                                 max_bytes=max_bytes, backend=backend, on_done=on_done,
                                 on_error=on_error)

    return run_ensembles(args, records, compute, "computed pair probabilities of",
                         writer_for(args.format), _write)


def _read(args):
    """The input as :class:`~jaxrna.io.bulk.SeqBatch` blocks (``--sequence`` first, then each
    FASTA file, read in bulk), the time booked to the ``read`` stage."""
    from jaxrna.io.bulk import SeqBatch, iter_batches

    def blocks():
        if args.sequence is not None:
            yield SeqBatch.from_records([sequence_record(args.sequence)], "--sequence")
        for path in args.fasta:
            yield from iter_batches(path)

    it = blocks()
    held, size = [], 0
    while True:
        with stage("read"):
            block = next(it, None)
        if block is None:
            break
        held.append(block)          # whole blocks together: one batch plan, fewer shapes
        size += len(block.letters)
        if size >= CHUNK_LETTERS:
            yield SeqBatch.concat(held)
            held, size = [], 0
    if held:
        yield SeqBatch.concat(held)


#: Blocks of the bulk reader are joined into chunks of about this many letters (the reader
#: cuts a file's last record into a block of its own).
CHUNK_LETTERS = 1 << 25


#: Input is read ahead until its work (split operations) passes these before the engine and
#: backend are chosen (the rest of a large input streams).
FOLD_PEEK = 4e9
PARTITION_PEEK = 4e9


def _peek(chunks, limit: float):
    """``(all chunks, work of those read so far)``: reads until the work passes ``limit``."""
    from jaxrna.fold.api import work_estimate

    head, work = [], 0.0
    for chunk in chunks:
        head.append(chunk)
        work += work_estimate(chunk.lengths.tolist())
        if work >= limit:
            break
    return itertools.chain(head, chunks), work


def _start_jax(requested: str, work: float, partition: bool = False) -> str:
    """Choose the backend (before JAX starts any: :func:`jaxrna.runtime.choose_backend`) and
    turn on the compilation caches."""
    from jaxrna.fold.api import GPU_WORK_FROM, PARTITION_GPU_WORK_FROM
    from jaxrna.runtime import choose_backend, enable_compilation_cache

    with stage("setup"):
        backend = choose_backend(requested, work,
                                 PARTITION_GPU_WORK_FROM if partition else GPU_WORK_FROM)
        enable_compilation_cache()
    return backend


def _write(output, writer, results) -> None:
    """Format ``results`` with ``writer`` (``format`` stage) into ``output``
    (:func:`jaxrna.pipeline.ordered_output`: atomically, written in ~1 MB pieces by a
    background thread, the ``write`` stage)."""
    from jaxrna.pipeline import ordered_output

    with ordered_output(output) as out, stage("format"):
        writer(results, out)
        out.flush()                     # the last piece handed on inside the stage, as before


def run(args) -> int:
    from jaxrna.runtime import LARGE_BATCH_ALLOCATOR, gpu_memory_on_demand

    setup_logging(args.quiet)
    use_device_options(args)           # --devices N
    gpu_memory_on_demand(LARGE_BATCH_ALLOCATOR)   # few, large batches (before JAX starts)
    model = energy_model(args)          # --model turner, the default (None: Nussinov)
    if args.weights is None:
        args.weights = "unit"
    if isinstance(args.weights, str):
        args.weights = weights_arg(args.weights)
    if not args.fasta and args.sequence is None:
        raise InputError("no input: give FASTA file(s), '-' for standard input, or --sequence SEQ")
    temperature = ensemble_temperature(args, "partition", "one structure")
    if args.score_only and args.format not in SCORE_ONLY_FORMATS:
        raise InputError(f"--score-only needs a score-only format ({', '.join(SCORE_ONLY_FORMATS)}), "
                         f"not {args.format}")
    max_bytes = int(args.max_memory * 2**30) if args.max_memory else None
    if model is not None:
        if args.partition:
            return run_turner_partition(args, model, max_bytes)
        return run_turner(args, model, max_bytes)
    if args.partition:
        return _run_partition(args, temperature, args.backend, max_bytes)
    from jaxrna.fold.api import choose_engine, fold_batches

    chunks, work = _peek(_read(args), FOLD_PEEK)
    with stage("setup"):
        engine = choose_engine(args.backend, work)
    if engine != "host":
        engine = _start_jax(args.backend, work)
    bar = progress(None, "fold", quiet=args.quiet)
    summary = RunSummary("folded", "record")
    try:
        results = fold_batches(chunks, args.weights, args.min_loop,
                               with_pairs=not args.score_only, max_bytes=max_bytes,
                               on_done=bar.update, backend=engine,
                               on_error=lambda rec, exc: summary.skip(rec.id, exc),
                               host_work=work)
        _write(args.output, WRITERS[args.format], summary.count(results))
    finally:
        bar.close()
    return summary.finish()
