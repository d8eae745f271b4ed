"""``jaxrna fold``: Nussinov folding of every record of FASTA files (or one ``--sequence``)."""

from __future__ import annotations

import argparse
import logging

from jaxrna.cli.common import (RunSummary, add_backend_option, add_ensemble_options,
                               add_output_options, ensemble_temperature, positive_int,
                               setup_logging, weights_arg)
from jaxrna.formats.fold import SCORE_ONLY_FORMATS, WRITERS
from jaxrna.io import InputError, atomic_output, read_fasta, sequence_record
from jaxrna.progress import progress

log = logging.getLogger("jaxrna")

EXAMPLES = """examples:
  jaxrna fold test-data/fold_example.fa
  jaxrna fold --sequence GGGAAAUCCCGCGCAAAGCGC --weights bpmax -f ct
  jaxrna fold seqs.fa.gz --weights GC=3,AU=2,GU=1 --min-loop 0 -f tsv -o folds.tsv
  cat seqs.fa | jaxrna fold - -f json
  jaxrna fold seqs.fa --partition --temperature 2 -f json -o probs.json
  jaxrna fold --sequence GGGAAAUCCC --partition -o dots.txt --plot dots.png

weights: unit (1 per pair, default), bpmax (GC 3, AU 1, GU 1.5), integer (GC 3, AU 2, GU 1),
or explicit GC=x,AU=y,GU=z (half-integers are exact).

--partition: the base-pair partition function Z (every structure weighs exp(W / T), W its
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
        "fold", help="Nussinov folding: maximum-weight secondary structures",
        description="Fold RNA sequences by maximising the total weight of base pairs "
                    "(Nussinov). Allowed pairs: A-U, G-C, G-U; N and other IUPAC codes never pair.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("fasta", nargs="*", metavar="FASTA",
                   help="FASTA file(s), plain or gzip; '-' reads standard input")
    p.add_argument("-s", "--sequence", metavar="SEQ", help="fold this one sequence (id 'seq')")
    p.add_argument("-w", "--weights", type=weights_arg, default="unit", metavar="SET",
                   help="unit (default), bpmax, integer, or GC=x,AU=y,GU=z")
    p.add_argument("-m", "--min-loop", type=positive_int, default=3, metavar="N",
                   help="a pair (i, j) needs j - i > N, i.e. at least N unpaired bases in a hairpin (default 3)")
    add_output_options(p, list(WRITERS), "dbn")
    p.add_argument("--score-only", action="store_true",
                   help="skip the traceback (formats tsv and json only)")
    add_ensemble_options(p, "partition", "partition function and base-pair probabilities "
                         "instead of one best structure", "structures", "pair probabilities")
    p.add_argument("--max-memory", type=float, metavar="GiB", default=None,
                   help="refuse sequences whose tables need more (default: 80%% of this machine's memory)")
    add_backend_option(p)
    p.set_defaults(func=run)


def _run_partition(args, temperature: float, backend: str, max_bytes) -> int:
    from jaxrna.fold.partition import partition_records
    from jaxrna.formats.fold_partition import plot_paths, plotting, writer_for

    records = _records(args)
    paths = None
    if args.plot is not None:
        records = list(records)
        paths = dict(zip((r.id for r in records), plot_paths(args.plot, len(records))))
    bar = progress(len(records) if paths is not None else None, "partition", quiet=args.quiet)
    summary = RunSummary("computed pair probabilities of", "record")
    try:
        results = partition_records(records, args.weights, args.min_loop, temperature,
                                    max_bytes=max_bytes, backend=backend, on_done=bar.update,
                                    on_error=lambda rec, exc: summary.skip(rec.id, exc))
        if paths is not None:
            results = plotting(results, paths)
        with atomic_output(args.output) as out:
            writer_for(args.format)(summary.count(results), out)
    finally:
        bar.close()
    return summary.finish()


def _records(args):
    if args.sequence is not None:
        yield sequence_record(args.sequence)
    for path in args.fasta:
        yield from read_fasta(path)


def run(args) -> int:
    setup_logging(args.quiet)
    if isinstance(args.weights, str):
        args.weights = weights_arg(args.weights)
    if not args.fasta and args.sequence is None:
        raise InputError("no input: give FASTA file(s), '-' for standard input, or --sequence SEQ")
    temperature = ensemble_temperature(args, "partition", "one structure")
    if args.score_only and args.format not in SCORE_ONLY_FORMATS:
        raise InputError(f"--score-only needs a score-only format ({', '.join(SCORE_ONLY_FORMATS)}), "
                         f"not {args.format}")
    from jaxrna.fold.api import fold_records
    from jaxrna.runtime import enable_compilation_cache, resolve_backend

    enable_compilation_cache()
    backend = resolve_backend(args.backend)
    max_bytes = int(args.max_memory * 2**30) if args.max_memory else None
    if args.partition:
        return _run_partition(args, temperature, backend, max_bytes)
    bar = progress(None, "fold", quiet=args.quiet)
    summary = RunSummary("folded", "record")
    try:
        results = fold_records(_records(args), args.weights, args.min_loop,
                               with_pairs=not args.score_only, max_bytes=max_bytes,
                               on_done=bar.update, backend=backend,
                               on_error=lambda rec, exc: summary.skip(rec.id, exc))
        with atomic_output(args.output) as out:
            WRITERS[args.format](summary.count(results), out)
    finally:
        bar.close()
    return summary.finish()
