"""Options and helpers shared by every subcommand."""

from __future__ import annotations

import argparse
import logging
import sys

from jaxrna.io.errors import InputError


def add_output_options(parser: argparse.ArgumentParser, formats: list[str], default: str) -> None:
    """``-o/--output FILE`` (atomic), ``-f/--format`` and ``-q/--quiet``."""
    parser.add_argument("-o", "--output", metavar="FILE", default=None,
                        help="write results to FILE (written atomically; default: standard output)")
    parser.add_argument("-f", "--format", choices=formats, default=default,
                        help=f"output format (default: {default})")
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar and no informational messages on stderr")


def add_backend_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=["auto", "cpu", "gpu"], default="auto",
                        help="where to compute: auto picks the GPU when JAX sees one (default: auto)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print the devices the run computes on (one line on stderr)")
    parser.add_argument("--devices", type=int_at_least(1), metavar="N", default=None,
                        help="compute on the first N devices of the backend (default: every "
                             "device JAX exposes; CUDA_VISIBLE_DEVICES also limits them)")


def use_device_options(args) -> None:
    """Apply ``--devices N`` (:func:`add_backend_option`) to this run, before its backend is
    chosen (:func:`jaxrna.runtime.limit_devices`); without it, every device."""
    from jaxrna import runtime

    runtime.limit_devices(getattr(args, "devices", None))


def _temperature(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def add_ensemble_options(parser: argparse.ArgumentParser, flag: str, computes: str,
                         weighs: str, plotted: str) -> None:
    """``--FLAG`` (an ensemble instead of one optimum), ``--temperature T`` and ``--plot FILE.png``
    (see :func:`ensemble_temperature`)."""
    parser.add_argument(f"--{flag}", action="store_true",
                        help=f"{computes} (formats: json, or a dot-plot text for the others)")
    parser.add_argument("--temperature", type=_temperature, metavar="T", default=None,
                        help=f"with --{flag}: {weighs} weigh exp(score / T) (default 1)")
    parser.add_argument("--plot", metavar="FILE.png", default=None,
                        help=f"with --{flag}: PNG heat map(s) of the {plotted} (needs matplotlib)")


def ensemble_temperature(args, flag: str, instead_of: str) -> float:
    """Check the options of :func:`add_ensemble_options`; the temperature (1 by default).

    ``--temperature``/``--plot`` need ``--FLAG``, which excludes ``--score-only``; T must be a
    finite number > 0; ``--plot`` needs matplotlib (checked before any work).
    """
    if not getattr(args, flag):
        for name, value in (("--temperature", args.temperature), ("--plot", args.plot)):
            if value is not None:
                raise InputError(f"{name} needs --{flag}")
        return 1.0
    if args.score_only:
        raise InputError(f"--{flag} computes probabilities, not {instead_of}; "
                         "it cannot be used with --score-only")
    t = 1.0 if args.temperature is None else args.temperature
    if not 0 < t < float("inf"):
        raise InputError(f"--temperature must be > 0 (and finite), not {args.temperature}")
    if args.plot is not None:
        from jaxrna.formats import heatmap

        try:
            heatmap.pyplot()
        except ImportError as exc:
            raise InputError(str(exc)) from None
    return t


def setup_logging(quiet: bool) -> None:
    """Messages of the ``jaxrna`` logger go to stderr (warnings only with ``--quiet``)."""
    log = logging.getLogger("jaxrna")
    log.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("jaxrna: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.WARNING if quiet else logging.INFO)
    log.propagate = False
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.ERROR)  # "no TPU" chatter


def int_at_least(minimum: int, too_small: str = "expected a number >= {minimum}, got {value}"):
    """An argparse type: a whole number >= ``minimum`` (``too_small`` formats the complaint).

    >>> int_at_least(1)("3")
    3
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(too_small.format(minimum=minimum, value=value))
        return value

    return parse


positive_int = int_at_least(0)


def weights_arg(text: str):
    from jaxrna.weights import parse_weights

    try:
        return parse_weights(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def usage_error(message: str) -> InputError:
    return InputError(message)


class RunSummary:
    """Counts the results a run writes, collects the items it had to skip, and ends the run
    with one summary line: exit status 0, or 2 when anything was left out.

    >>> s = RunSummary("folded", "record")
    >>> list(s.count(iter("ab")))
    ['a', 'b']
    >>> s.skip("r3", "too large")
    >>> s.finish()
    2
    """

    def __init__(self, verb: str, noun: str) -> None:
        import time

        self.verb, self.noun = verb, noun
        self.done = 0
        self.failed: list[str] = []
        self._start = time.perf_counter()

    def count(self, results):
        for r in results:
            self.done += 1
            yield r

    def skip(self, name: str, reason) -> None:
        self.failed.append(name)
        logging.getLogger("jaxrna").error("%s '%s' skipped: %s", self.noun, name, reason)

    def finish(self) -> int:
        import time

        log = logging.getLogger("jaxrna")
        plural = lambda k, w: w if k == 1 else w + "s"  # noqa: E731
        log.info("%s %d %s in %.2f s", self.verb, self.done, plural(self.done, self.noun),
                 time.perf_counter() - self._start)
        if not self.failed:
            return 0
        k = len(self.failed)
        log.error("%d %s failed and %s left out of the output: %s", k, plural(k, self.noun),
                  "was" if k == 1 else "were", ", ".join(self.failed))
        return 2


def run_ensembles(args, records, compute, computed: str, writer, write) -> int:
    """Both ``fold --partition`` paths' run around their engine: with ``--plot FILE`` the
    records listed first (the heat maps' names, and the progress bar's total) and each
    result's heat map written as it passes; progress on stderr; a record that fails skipped
    and named (:class:`RunSummary`, whose verb is ``computed``); the results written with
    ``write(args.output, writer, results)``. ``compute(records, on_done, on_error)`` yields
    the results. Returns the exit status."""
    from jaxrna.formats.fold_partition import plot_paths, plotting
    from jaxrna.progress import progress

    paths = None
    if args.plot is not None:
        records = list(records)
        paths = dict(zip((r.id for r in records), plot_paths(args.plot, len(records))))
    bar = progress(len(records) if paths is not None else None, "partition", quiet=args.quiet)
    summary = RunSummary(computed, "record")
    try:
        results = compute(records, bar.update, lambda rec, exc: summary.skip(rec.id, exc))
        if paths is not None:
            results = plotting(results, paths)
        write(args.output, writer, summary.count(results))
    finally:
        bar.close()
    return summary.finish()
