"""The ``jaxrna`` command line: one parser, one module per subcommand.

Each subcommand module provides ``add_parser(subparsers)`` (which sets ``func``) and a
``run(args) -> int``. Errors of the user's making (:class:`~jaxrna.io.errors.JaxrnaError`)
print one line and exit with status 2; no traceback reaches the user.
"""

from __future__ import annotations

from jaxrna import stages  # noqa: I001  (first: its clock starts the run's profile)

import argparse
import importlib
import signal
import sys

from jaxrna import store_writes
from jaxrna._version import __version__
from jaxrna.io import cleanup
from jaxrna.io.errors import JaxrnaError

SUBCOMMANDS = ["fold", "align", "interact", "targets", "targets-split", "targets-merge", "info",
               "warmup"]

EPILOG = """examples:
  jaxrna fold test-data/fold_example.fa
  jaxrna fold --model nussinov --sequence GGGAAAUCCCGCGCAAAGCGC --weights bpmax -f ct
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
        importlib.import_module(f"jaxrna.cli.{name.replace('-', '_')}").add_parser(subparsers)
    return parser


class _Parser(argparse.ArgumentParser):
    pass


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (with ``JAXRNA_PROFILE=FILE``, the run's stage
    times are written to FILE: :mod:`jaxrna.stages`)."""
    installed = cleanup.install()  # SIGINT/SIGTERM: clean up, one line, 130/143
    background = store_writes.save_in_background(True)
    stopped = None
    status = None
    try:
        status = _main(argv)
        stopped = cleanup.stopping()
        return status
    finally:
        if installed:
            cleanup.uninstall()
        if stopped is None:
            store_writes.finish_all()   # executables still being written to the store
        store_writes.save_in_background(background)
        stages.write_report_if_asked()
        if argv is None and status is not None:  # the process's own run (console script)
            if stopped is not None:
                cleanup.exit_now(status)
            cleanup.leave(status)


def _main(argv: list[str] | None) -> int:
    with stages.stage("imports"):
        parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        _check_numbers(parser, args)
        _check_outputs(args)
        if getattr(args, "verbose", False):  # -v: the device the run computes on, one line
            from jaxrna import runtime

            runtime.announce_device(args.command)
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a full disk or a closed pipe is reported here, not at exit
        if getattr(args, "verbose", False):
            line = stages.devices_line(args.command)
            if line:
                print(line, file=sys.stderr, flush=True)
        return status
    except BaseException as exc:  # noqa: BLE001 - every ending is one line and a status
        return _failure(exc)
    finally:
        if getattr(args, "verbose", False):  # a run that ended before choosing a device
            from jaxrna import runtime       # leaves nothing for the next call in this process

            runtime.announce_device(None)


#: Options naming files a run writes, checked before any work (:func:`check_output`).
OUTPUT_OPTIONS = {"output": "-o", "all_windows": "--all-windows", "plot": "--plot"}


def _check_outputs(args) -> None:
    import os

    from jaxrna.io.atomic import check_output
    from jaxrna.io.errors import OutputError

    inputs = []                     # every other option naming an existing file is read
    for attr, value in vars(args).items():
        if attr in OUTPUT_OPTIONS:
            continue
        for v in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(v, str) and v != "-" and os.path.isfile(v):
                inputs.append(v)
    for attr, option in OUTPUT_OPTIONS.items():
        value = getattr(args, attr, None)
        if isinstance(value, str):
            check_output(value, option)
            if value != "-" and os.path.exists(value):
                for v in inputs:
                    try:
                        same = os.path.samefile(v, value)
                    except OSError:
                        same = False
                    if same:  # the rename at the end would replace the input
                        raise OutputError(f"cannot write {option}: it is an input of this run "
                                          f"({v}); write the output elsewhere", path=value)


def _check_numbers(parser: argparse.ArgumentParser, args) -> None:
    """No numeric option takes a value that is not a finite float (nan, inf, 1e309): refused
    here with one line, before any subcommand turns it into a size or a score."""
    import math
    import numbers

    flags = {}
    for action in parser._actions:  # the subcommand's own options
        for sub in getattr(action, "choices", None) or {}:
            if sub == getattr(args, "command", None):
                flags = {a.dest: a.option_strings[-1] for a in action.choices[sub]._actions
                         if a.option_strings}
    for dest, value in vars(args).items():
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            continue
        try:
            finite = math.isfinite(float(value))
        except (OverflowError, ValueError):
            finite = False
        if not finite:
            flag = flags.get(dest, "--" + dest.replace("_", "-"))
            text = str(value) if len(str(value)) < 24 else "a number out of range"
            raise JaxrnaError(f"{flag}: expected a finite number, got {text}")


def _failure(exc: BaseException) -> int:
    """The exit status of a run that raised ``exc``, after one line on stderr (SIGPIPE:
    none). Anything but a fault of the kinds below is a bug, and keeps its traceback."""
    from jaxrna.io.atomic import WRITE_ERRNOS

    if isinstance(exc, SystemExit):
        raise exc
    if isinstance(exc, BrokenPipeError):  # `jaxrna ... | head`: end quietly, as SIGPIPE would
        cleanup.quiet_stdout()
        return 141
    signum = cleanup.stopping()
    if isinstance(exc, KeyboardInterrupt) or signum is not None:
        # (anything raised while a stop signal unwinds the run is a consequence of it)
        cleanup.stop_children()
        return cleanup.report(getattr(exc, "signum", None) or signum or signal.SIGINT)
    if isinstance(exc, JaxrnaError):
        print(f"jaxrna: error: {exc}", file=sys.stderr)
        return exc.exit_status
    from jaxrna.oom import describe_out_of_memory

    oom = describe_out_of_memory(exc)
    if oom is not None:
        print(f"jaxrna: error: {oom}", file=sys.stderr)
        return 2
    if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"jaxrna: error: {where}{(exc.strerror or str(exc)).rstrip('.')}", file=sys.stderr)
        if not exc.filename:
            cleanup.quiet_stdout()
        return 2
    raise exc
