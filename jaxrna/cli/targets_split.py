"""``jaxrna targets-split``: cut a target FASTA file into chunks for parallel ``jaxrna targets``
runs (:mod:`jaxrna.targets.chunks`); ``jaxrna targets-merge`` puts the reports back together."""

from __future__ import annotations

import argparse
import logging

from jaxrna.cli.common import positive_int, setup_logging
from jaxrna.io import InputError

log = logging.getLogger("jaxrna")

EXAMPLES = """examples:
  jaxrna targets-split --chunk-nt 2000000 --prefix utrs utrs.fa.gz
  jaxrna targets mirnas.fa utrs.chunk000001.fa -o utrs.chunk000001.targets.txt   (each chunk)
  jaxrna targets-merge --manifest utrs.chunks.tsv --mirnas mirnas.fa -o utrs.targets.txt utrs.chunk*.targets.txt

Records are copied byte for byte (headers, line breaks) and never cut: a chunk closes once it
holds NT sequence letters or N records. PREFIX.chunks.tsv lists the chunks in file order (file,
records, letters); targets-merge needs it. Scan the chunks with the same options and without
--pair-offset: the merge renumbers miRanda's pair counter itself.
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "targets-split", help="split a target FASTA file into chunks for parallel targets runs",
        description="Split a target FASTA file (plain or gzip) into PREFIX.chunkNNNNNN.fa files "
                    "and a manifest PREFIX.chunks.tsv, for 'jaxrna targets' runs in parallel "
                    "whose reports 'jaxrna targets-merge' merges into the single run's report.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("fasta", metavar="TARGETS.fa", help="target FASTA file (plain or gzip; '-' reads standard input)")
    p.add_argument("--prefix", required=True, help="chunk files are PREFIX.chunkNNNNNN.fa")
    p.add_argument("--chunk-nt", type=positive_int, default=0, metavar="NT",
                   help="close a chunk once it holds NT sequence letters (0: no limit; default 0)")
    p.add_argument("--chunk-records", type=positive_int, default=0, metavar="N",
                   help="close a chunk once it holds N records (0: no limit; default 0)")
    p.add_argument("--outdir", default=".", metavar="DIR",
                   help="directory for the chunks and the manifest (default: the current one)")
    p.add_argument("-q", "--quiet", action="store_true", help="no message on stderr")
    p.set_defaults(func=run)


def run(args) -> int:
    from jaxrna.targets.chunks import split

    setup_logging(args.quiet)
    if "/" in args.prefix or not args.prefix:
        raise InputError(f"--prefix must be a file name prefix without '/', not {args.prefix!r} "
                         "(use --outdir for the directory)")
    try:
        rows = split(args.fasta, args.prefix, args.chunk_nt, args.chunk_records, outdir=args.outdir)
    except OSError as exc:
        raise InputError(exc.strerror or str(exc), path=exc.filename) from None
    log.info("%s: %d records in %d chunk(s)", args.fasta, sum(r for _, r, _ in rows), len(rows))
    return 0
