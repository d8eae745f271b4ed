"""The ``jaxrna`` command line: one parser, one module per subcommand.

Each subcommand module provides ``add_parser(subparsers)`` (which sets ``func``) and a
``run(args) -> int``. Errors of the user's making (:class:`~jaxrna.io.errors.JaxrnaError`)
print one line and exit with status 2; no traceback reaches the user.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from jaxrna._version import __version__
from jaxrna.io.errors import JaxrnaError

SUBCOMMANDS = ["fold", "align", "interact", "targets"]

EPILOG = """examples:
  jaxrna fold test-data/fold_example.fa
  jaxrna fold --sequence GGGAAAUCCCGCGCAAAGCGC --weights bpmax -f ct
  zcat many.fa.gz | jaxrna fold - -f tsv -o folds.tsv

Run 'jaxrna SUBCOMMAND --help' for each subcommand's options and examples.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="jaxrna", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="GPU-accelerated RNA dynamic programming: folding, alignment, "
                    "miRNA target scanning and RNA-RNA interaction.",
        epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"jaxrna {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="SUBCOMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"jaxrna.cli.{name}").add_parser(subparsers)
    return parser


class _Parser(argparse.ArgumentParser):
    pass


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except JaxrnaError as exc:
        print(f"jaxrna: error: {exc}", file=sys.stderr)
        return exc.exit_status
    except KeyboardInterrupt:
        print("jaxrna: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = None  # type: ignore[assignment]
        finally:
            return 141
