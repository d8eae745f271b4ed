"""``jaxrna targets-merge``: merge the reports of ``jaxrna targets`` runs over the chunks that
``jaxrna targets-split`` wrote into exactly the report of one run over the whole target file
(:mod:`jaxrna.targets.chunks`)."""

from __future__ import annotations

import argparse

from jaxrna.cli.common import setup_logging
from jaxrna.io import InputError

EXAMPLES = """examples:
  jaxrna targets-merge --manifest utrs.chunks.tsv --mirnas mirnas.fa -o utrs.targets.txt utrs.chunk*.targets.txt

Each report is matched to its chunk by name: it must start with the chunk file's name less
'.fa', then a dot (utrs.chunk000002.targets.txt for utrs.chunk000002.fa), so the reports may come
in any order. All formats merge byte for byte: miranda and keyval (with or without --quiet), tsv
and json. Where two miRNAs share an id and a tsv/json row (or a quiet hit without a '>>' line)
could belong to either, the merge stops with an error rather than guess; give the miRNAs
distinct ids or scan unsplit.
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "targets-merge", help="merge chunk reports of targets runs into the single run's report",
        description="Merge the reports of 'jaxrna targets' runs over the chunks of "
                    "'jaxrna targets-split' into the report one run over the whole target file "
                    "writes, byte for byte (miRanda's pair counter renumbered).",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("reports", nargs="+", metavar="REPORT", help="chunk reports, any order")
    p.add_argument("--manifest", required=True, metavar="PREFIX.chunks.tsv",
                   help="the manifest targets-split wrote")
    p.add_argument("--mirnas", required=True, metavar="MIRNAS.fa",
                   help="the miRNA FASTA file the chunks were scanned with")
    p.add_argument("-o", "--output", metavar="FILE", default=None,
                   help="merged report (written atomically; default: standard output)")
    p.set_defaults(func=run)


def run(args) -> int:
    from jaxrna.targets.chunks import merge

    setup_logging(False)
    try:
        merge(args.manifest, args.mirnas, args.reports, args.output)
    except OSError as exc:
        raise InputError(exc.strerror or str(exc), path=exc.filename) from None
    except (ValueError, KeyError) as exc:  # a manifest or report that is not ours
        raise InputError(f"unreadable input: {exc}") from None
    return 0
