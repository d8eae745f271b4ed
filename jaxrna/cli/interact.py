"""``jaxrna interact``: BPMax RNA-RNA interaction of strand-1 records against strand-2 records."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import logging

from jaxrna.cli.common import (RunSummary, add_backend_option, add_output_options, int_at_least,
                               setup_logging, use_device_options, weights_arg)
from jaxrna.formats.interact import SCORE_ONLY_FORMATS, WRITERS, write_window_rows, write_windows_header
from jaxrna.io import InputError, sequence_record
from jaxrna.progress import progress
from jaxrna.stages import stage

log = logging.getLogger("jaxrna")

EXAMPLES = """examples:
  jaxrna interact test-data/interact_a.fa test-data/interact_b.fa
  jaxrna interact --seq1 UCGCUGCU --seq2 GUCGGA -f dbn
  jaxrna interact mirnas.fa targets.fa --pairs zip --weights integer -f json -o out.json
  jaxrna interact srna.fa transcripts.fa --window2 128 --all-windows windows.tsv

Strand 1 comes from the first input, strand 2 from the second, both read 5'->3'; strand 2 is
paired antiparallel. In structures, intramolecular pairs are () and intermolecular pairs are
[ on strand 1 and ] on strand 2. With --window1/--window2 the score is that of the best pair
of windows (spans of at most L1 and L2 nt), reported with its 1-based coordinates.

weights: bpmax (GC 3, AU 1, GU 1.5; default), unit (1 per pair), integer (GC 3, AU 2, GU 1),
or explicit GC=x,AU=y,GU=z (half-integers are exact).
"""


window_length = int_at_least(1, "a window is at least 1 nt, got {value}")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "interact", help="BPMax RNA-RNA interaction: maximum-weight joint structures",
        description="Predict the joint secondary structure of two RNAs by maximising the total "
                    "weight of intramolecular and intermolecular base pairs (BPMax). Allowed "
                    "pairs: A-U, G-C, G-U; N and other IUPAC codes never pair. Hairpins close "
                    "at least 3 unpaired bases.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("fasta1", nargs="?", metavar="A.fa",
                   help="strand-1 records (FASTA, plain or gzip; '-' reads standard input)")
    p.add_argument("fasta2", nargs="?", metavar="B.fa", help="strand-2 records (FASTA)")
    p.add_argument("--seq1", metavar="SEQ", help="strand 1 given directly (id 'seq1'), instead of A.fa")
    p.add_argument("--seq2", metavar="SEQ", help="strand 2 given directly (id 'seq2'), instead of B.fa")
    p.add_argument("--pairs", choices=["all", "zip"], default="all",
                   help="all: every record of A with every record of B (default); "
                        "zip: the k-th record of A with the k-th of B")
    p.add_argument("-w", "--weights", type=weights_arg, default="bpmax", metavar="SET",
                   help="bpmax (default), unit, integer, or GC=x,AU=y,GU=z")
    p.add_argument("--window1", type=window_length, metavar="L1", default=None,
                   help="limit spans on strand 1 to L1 nt and report the best window (default: whole strand)")
    p.add_argument("--window2", type=window_length, metavar="L2", default=None,
                   help="limit spans on strand 2 to L2 nt and report the best window (default: whole strand)")
    p.add_argument("--all-windows", metavar="FILE", default=None,
                   help="also write every window's score to FILE (tsv)")
    p.add_argument("--outer", choices=["auto", "1", "2"], default="auto",
                   help="which strand forms the grid of matrices: auto = the shorter (default); "
                        "the result is the same, only time and memory change")
    add_output_options(p, list(WRITERS), "tsv")
    p.add_argument("--score-only", action="store_true",
                   help="skip the traceback (formats tsv and json only)")
    p.add_argument("--max-memory", type=float, metavar="GiB", default=None,
                   help="refuse pairs whose tables need more (default: 80%% of the device's memory)")
    add_backend_option(p)
    p.set_defaults(func=run)


def _records(path: str | None, seq: str | None, name: str, flag: str):
    if path is not None and seq is not None:
        raise InputError(f"give strand {name[-1]} either as a FASTA file or with {flag}, not both")
    if seq is not None:
        return [sequence_record(seq, id=name)]
    if path is None:
        raise InputError(f"no strand-{name[-1]} input: give a FASTA file or {flag} SEQ")
    from jaxrna.io.bulk import read_batch

    return read_batch(path).records()


def run(args) -> int:
    setup_logging(args.quiet)
    use_device_options(args)           # --devices N
    if isinstance(args.weights, str):
        args.weights = weights_arg(args.weights)
    if args.seq1 is not None and args.fasta2 is None and args.fasta1 is not None:
        args.fasta1, args.fasta2 = None, args.fasta1      # `--seq1 S B.fa`
    if args.score_only and args.format not in SCORE_ONLY_FORMATS:
        raise InputError(f"--score-only needs a score-only format ({', '.join(SCORE_ONLY_FORMATS)}), "
                         f"not {args.format}")
    if args.fasta1 == "-" and args.fasta2 == "-":
        raise InputError("only one input can be standard input ('-')")
    with stage("read"):
        recs1 = _records(args.fasta1, args.seq1, "seq1", "--seq1")
        recs2 = _records(args.fasta2, args.seq2, "seq2", "--seq2")
    if args.pairs == "zip":
        if len(recs1) != len(recs2):
            raise InputError(f"--pairs zip needs as many records in each input; got "
                             f"{len(recs1)} and {len(recs2)}")
        pairs = list(zip(recs1, recs2))
    else:
        pairs = list(itertools.product(recs1, recs2))

    with stage("imports"):
        from jaxrna.interact import host_engine
        from jaxrna.interact.api import interact_pairs
        from jaxrna.pipeline import cores
        from jaxrna.runtime import announce_host, choose_backend, enable_compilation_cache, \
            gpu_possible

    with stage("setup"):
        # Pairs small enough for the host engine (C on every core, :mod:`jaxrna.interact.
        # host_engine`) run there on a CPU, and a whole job of them runs there even where a GPU
        # is present when it takes less than a GPU process spends starting; a job all on the
        # host engine never imports JAX.
        host_s = float("inf")
        if args.backend != "gpu" and host_engine.engine_choice() != "device":
            host_s = host_engine.job_seconds(((len(a), len(b)) for a, b in pairs),
                                             args.window1, args.window2)
        cpu_only = args.backend == "cpu" or not gpu_possible() or host_s < host_engine.SMALL_JOB_S
        if host_s < float("inf") and cpu_only and host_engine.library() is not None:
            backend = "cpu"
            announce_host(f"--backend {args.backend}", "the host engine (C)",
                          f"on {cores()} threads")
        else:
            # (the GPU's memory is taken as needed, not 75% of it at the start: runtime)
            backend = choose_backend(args.backend, host_s, host_engine.SMALL_JOB_S)
            enable_compilation_cache()    # programs as executables: a warm run loads
    max_bytes = int(args.max_memory * 2**30) if args.max_memory else None
    bar = progress(len(pairs), "interact", unit="pair", quiet=args.quiet)
    summary = RunSummary("computed", "pair")

    def report(pair, exc) -> None:
        summary.skip(f"{pair[0].id} x {pair[1].id}", exc)

    try:
        results = interact_pairs(pairs, args.weights, args.window1, args.window2, args.outer,
                                 with_pairs=not args.score_only,
                                 keep_windows=args.all_windows is not None, max_bytes=max_bytes,
                                 backend=backend, on_done=bar.update, on_error=report)
        from jaxrna.pipeline import ordered_output

        windows_file = (ordered_output(args.all_windows) if args.all_windows
                        else contextlib.nullcontext())
        with ordered_output(args.output) as out, windows_file as wout:
            if args.all_windows:
                write_windows_header(wout)

            def with_windows(results):
                for r in results:
                    write_window_rows(r, wout)
                    yield r

            stream = with_windows(results) if args.all_windows else results
            with stage("format"):     # formatting and writing (computing is booked apart)
                WRITERS[args.format](summary.count(stream), out)
    finally:
        bar.close()
    return summary.finish()
