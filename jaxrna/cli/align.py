"""``jaxrna align``: global (Needleman-Wunsch) or local (Smith-Waterman) alignment with affine
gaps of every query against every target, or the i-th query with the i-th target."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from fractions import Fraction

from jaxrna.cli.common import (RunSummary, add_backend_option, add_ensemble_options,
                               add_output_options, ensemble_temperature, setup_logging,
                               use_device_options)
from jaxrna.formats.align import SCORE_ONLY_FORMATS, WRITERS
from jaxrna.io import InputError, atomic_output, read_fasta
from jaxrna.progress import progress

log = logging.getLogger("jaxrna")

EXAMPLES = """examples:
  jaxrna align test-data/align_queries.fa test-data/align_targets.fa
  jaxrna align q.fa t.fa --mode local --match 2 --mismatch -3 --gap-open 5 --gap-extend 2 -f tsv
  jaxrna align prot_q.fa prot_t.fa --matrix BLOSUM62 --gap-open 11 --gap-extend 1
  jaxrna align a.fa b.fa --pairs zip --preset edit -f tsv
  jaxrna align q.fa t.fa --end-gaps free                  # EMBOSS needle's defaults
  jaxrna align q.fa t.fa --end-open 5 --end-extend 1      # needle -endweight -endopen 5 ...
  jaxrna align many.fa db.fa --mode local --score-only -f tsv -o hits.tsv
  jaxrna align q.fa t.fa --posterior --temperature 2 -f json -o posteriors.json
  jaxrna align q.fa t.fa --posterior --mode local -o dots.txt --plot dots.png

scores: --match/--mismatch (identical letters match; T and U are the same letter), or
--matrix NAME (Biopython's substitution matrices: NUC.4.4 alias EDNAFULL, BLOSUM62, PAM250,
...; every letter must be in the matrix's alphabet), or --preset edit (seed 002's edit
distance: indel 3, substitution 1, match 0, minimised; the reported score is the cost).
Default: NUC.4.4 with gap open 10, extend 0.5 (as EMBOSS needle/water).
Gaps: a gap of length L costs OPEN + (L-1) * EXTEND (Biopython PairwiseAligner with
open_gap_score=-OPEN, extend_gap_score=-EXTEND; parasail's convention); linear when equal.
End gaps (global mode: gaps before the first or after the last residue of either sequence)
cost the same by default (--end-gaps penalized: needle -endweight with its end penalties equal
to the gap penalties); --end-gaps free makes them cost nothing (EMBOSS needle's default;
Biopython's end_gap_score=0); --end-open/--end-extend give them penalties of their own
(needle's -endweight -endopen -endextend). The free end gap is written as gap columns, the
alignment still spans both sequences. Refused with --mode local (a local alignment has no end
gaps) and with --preset edit (free end gaps would make every edit cost 0).

--posterior: the partition function Z (every alignment weighs exp(score / T); local mode
counts the empty alignment and every alignment between substrings that starts and ends with
an aligned pair) and the probability of each query position being aligned to each target
position, by automatic differentiation. With -f json a list of objects (query_id, target_id,
mode, log_partition, match_probabilities as [i, j, p], 1-based, every p >= 1e-6); with other
formats a dot-plot text (per pair '# QUERY TARGET LOG_PARTITION', then 'i j p' lines);
--plot FILE.png also draws heat maps (one pair: FILE.png; several: FILE_1.png, FILE_2.png,
...; needs matplotlib: pip install 'jaxrna[plot]'). Memory grows as the product of the
lengths (about 0.35 GB for 2,000 x 2,000); a pair that would need more than --max-memory is
refused up front, before anything is computed.
"""


def number(text: str) -> Fraction:
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "align", help="pairwise alignment: Needleman-Wunsch / Smith-Waterman, affine gaps",
        description="Align every query against every target (or pairwise with --pairs zip): "
                    "global (Needleman-Wunsch) or local (Smith-Waterman), affine gaps "
                    "(three-state Gotoh), scores equal to Biopython's PairwiseAligner.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("queries", metavar="QUERIES",
                   help="FASTA file of queries (plain or gzip; '-' for standard input)")
    p.add_argument("targets", metavar="TARGETS", help="FASTA file of targets (plain or gzip)")
    p.add_argument("--pairs", choices=["all", "zip"], default="all",
                   help="all query x target pairs (default), or the i-th query with the "
                        "i-th target")
    p.add_argument("--mode", choices=["global", "local"], default="global",
                   help="global (Needleman-Wunsch, default) or local (Smith-Waterman)")
    p.add_argument("--match", type=number, metavar="M", help="score of identical letters")
    p.add_argument("--mismatch", type=number, metavar="X", help="score of different letters")
    p.add_argument("--matrix", metavar="NAME", help="substitution matrix (default NUC.4.4)")
    p.add_argument("--preset", choices=["edit"], help="edit: edit distance (indel 3, "
                   "substitution 1, match 0), minimised; other score options not allowed")
    p.add_argument("--gap-open", type=number, metavar="O",
                   help="penalty (>= 0) of a gap's first position (default 10)")
    p.add_argument("--gap-extend", type=number, metavar="E",
                   help="penalty (>= 0) of each further position (default 0.5)")
    p.add_argument("--end-gaps", choices=["penalized", "free"], default="penalized",
                   help="global mode: gaps at either end of either sequence cost as other "
                        "gaps (penalized, default) or nothing (free, EMBOSS needle's default)")
    p.add_argument("--end-open", type=number, metavar="O",
                   help="penalty of an end gap's first position (default: --gap-open; "
                        "needle's -endopen)")
    p.add_argument("--end-extend", type=number, metavar="E",
                   help="penalty of each further position of an end gap (default: "
                        "--gap-extend; needle's -endextend)")
    add_output_options(p, list(WRITERS), "pair")
    p.add_argument("--score-only", action="store_true",
                   help="skip the traceback (formats tsv and json; a local start is then '*')")
    add_ensemble_options(p, "posterior", "partition function and match probabilities instead "
                         "of one best alignment", "alignments", "match probabilities")
    p.add_argument("--max-memory", type=float, metavar="GiB", default=None,
                   help="refuse pairs whose traceback (or posteriors) needs more (default: "
                        "80%% of this machine's memory, or of the GPU's)")
    add_backend_option(p)
    p.set_defaults(func=run)


def _pairs(args):
    queries = read_fasta(args.queries, alphabet="letters")
    if args.pairs == "all":
        targets = list(read_fasta(args.targets, alphabet="letters"))
        for q in queries:
            for t in targets:
                yield q, t
        return
    targets = read_fasta(args.targets, alphabet="letters")
    count = 0
    while True:
        q = next(queries, None)
        t = next(targets, None)
        if q is None and t is None:
            return
        if q is None or t is None:
            longer, shorter = ((args.targets, args.queries) if q is None
                               else (args.queries, args.targets))
            raise InputError(f"--pairs zip: {longer} has more records than {shorter} "
                             f"(after {count} pair{'' if count == 1 else 's'})")
        count += 1
        yield q, t


def _run_posterior(args, temperature: float, scoring, backend: str, max_bytes) -> int:
    from jaxrna.align.partition import posterior_records
    from jaxrna.formats.align_posterior import plotting, writer_for
    from jaxrna.formats.heatmap import plot_paths

    pairs = list(_pairs(args))
    bar = progress(len(pairs), "posteriors", unit="pair", quiet=args.quiet)
    summary = RunSummary("computed posteriors of", "pair")
    try:
        results = posterior_records(pairs, scoring, args.mode, temperature, backend=backend,
                                    max_bytes=max_bytes, on_done=bar.update)
        if args.plot is not None:
            results = plotting(results, plot_paths(args.plot, len(pairs)))
        from jaxrna.pipeline import ordered_output

        with ordered_output(args.output) as out:
            writer_for(args.format)(summary.count(results), out)
    finally:
        bar.close()
    return summary.finish()


def _read(path: str):
    """``(batch, error, records read before the error)`` of one FASTA file, in bulk."""
    from jaxrna.io.bulk import SeqBatch, iter_batches

    batches, count = [], 0
    try:
        for b in iter_batches(path, alphabet="letters"):
            batches.append(b)
            count += len(b)
    except InputError as exc:
        return None, exc, count
    return SeqBatch.concat(batches), None, count


def read_inputs(args):
    """Both FASTA files in bulk (:mod:`jaxrna.io.bulk`: the records and located errors of
    :func:`~jaxrna.io.fasta.read_fasta`), raising the error that reading them pair by pair
    would raise first: all pairs read the targets first; ``--pairs zip`` reads a query, then
    a target, and fails on a file that runs out before the other."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(2) as pool:   # both files at once
        fq = pool.submit(_read, args.queries)
        ft = pool.submit(_read, args.targets)
        (queries, qerr, nq), (targets, terr, nt) = fq.result(), ft.result()
    if args.pairs == "all":
        for err in (terr, qerr):
            if err:
                raise err
        return queries, targets
    # pair k reads query k, then target k: the first event in that order wins
    events = []
    if qerr:
        events.append((nq, 0, qerr))
    if terr:
        events.append((nt, 1, terr))
    if not qerr and not terr and nq != nt:
        longer, shorter = ((args.targets, args.queries) if nq < nt
                           else (args.queries, args.targets))
        k = min(nq, nt)
        events.append((k, 2, InputError(f"--pairs zip: {longer} has more records than "
                                        f"{shorter} (after {k} pair{'' if k == 1 else 's'})")))
    elif qerr and not terr and nt < nq:
        events.append((nt, 2, InputError(f"--pairs zip: {args.queries} has more records than "
                                         f"{args.targets} (after {nt} pair"
                                         f"{'' if nt == 1 else 's'})")))
    elif terr and not qerr and nq < nt:
        events.append((nq, 2, InputError(f"--pairs zip: {args.targets} has more records than "
                                         f"{args.queries} (after {nq} pair"
                                         f"{'' if nq == 1 else 's'})")))
    if events:
        raise min(events, key=lambda e: (e[0], e[1]))[2]
    return queries, targets


def _cores() -> int:
    from jaxrna.pipeline import cores

    return cores()


def _choosing(args, scoring, local: bool) -> bool:
    """Whether this run picks its engine by estimate (:mod:`jaxrna.align.choice`):
    ``--backend auto`` on a host where JAX may find a GPU, a scheme the host engine supports,
    and no engine forced by ``$JAXRNA_ALIGN_ENGINE``."""
    if args.backend != "auto" or os.environ.get("JAXRNA_ALIGN_ENGINE"):
        return False
    from jaxrna.align.host import supports
    from jaxrna.runtime import gpu_possible

    return gpu_possible() and supports(scoring, local)


def run(args) -> int:
    setup_logging(args.quiet)
    use_device_options(args)           # --devices N
    temperature = ensemble_temperature(args, "posterior", "one alignment")
    if args.score_only and args.format not in SCORE_ONLY_FORMATS:
        raise InputError(f"--score-only needs a score-only format "
                         f"({', '.join(SCORE_ONLY_FORMATS)}), not {args.format}")
    from jaxrna.align.scoring import make_scoring

    if args.mode == "local" and (args.end_gaps == "free" or args.end_open is not None
                                 or args.end_extend is not None):
        raise InputError("--end-gaps free, --end-open and --end-extend apply to global "
                         "alignments: a local alignment has no end gaps (use --mode global)")
    try:
        scoring = make_scoring(args.match, args.mismatch, args.matrix, args.gap_open,
                               args.gap_extend, args.preset, args.end_gaps, args.end_open,
                               args.end_extend)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if scoring.minimise and args.mode != "global":
        raise InputError("--preset edit is a global edit distance; "
                         "it cannot be used with --mode local")
    if args.max_memory is not None and args.max_memory <= 0:
        raise InputError("--max-memory must be positive")
    max_bytes = int(args.max_memory * 2**30) if args.max_memory else None
    if args.posterior:
        from jaxrna.runtime import choose_backend, enable_compilation_cache

        backend = choose_backend(args.backend)
        enable_compilation_cache()
        return _run_posterior(args, temperature, scoring, backend, max_bytes)
    from jaxrna.align import engine
    from jaxrna.stages import stage

    local = args.mode == "local"
    choosing = _choosing(args, scoring, local)
    started = None
    if choosing:                    # start JAX while reading only where the device may win
        from jaxrna.align import choice

        guess = choice.size_of_files(args.queries, args.targets, args.pairs == "zip")
        if guess is None or choice.choose(guess, args.score_only,
                                          _cores()).engine == "device":
            started = engine.prestart(args.backend, scoring, local,
                                      float("inf") if guess is None else guess.cells)
    elif os.environ.get("JAXRNA_ALIGN_ENGINE") != "host":   # forced host: no JAX, so it forks
        started = engine.prestart(args.backend, scoring, local,
                                  engine.estimate_cells(args.queries, args.targets,
                                                        args.pairs == "zip"))
    with stage("read"):
        queries, targets = read_inputs(args)
    job = engine.Job(queries, targets, scoring, local, args.pairs == "zip", args.score_only)
    forced = None
    if choosing:
        picked = choice.choose(choice.size_of(job.qlen, job.tlen, job.zip), args.score_only,
                               _cores(), started=started is not None)
        forced = picked.engine
        if getattr(args, "verbose", False):
            print(f"jaxrna: {picked.line()}", file=sys.stderr, flush=True)
        if forced == "host":
            from jaxrna import runtime

            runtime.announce_host("--backend auto, estimated faster", "parasail")
    bar = progress(job.n_pairs, "align", unit="pair", quiet=args.quiet)
    summary = RunSummary("aligned", "pair")
    try:
        with atomic_output(args.output) as out:
            summary.done = engine.run(
                job, args.format, out, backend=args.backend, max_bytes=max_bytes,
                on_error=lambda pair, exc: summary.skip(f"{pair[0].id} x {pair[1].id}", exc),
                on_done=bar.update, started=started, engine=forced)
    finally:
        bar.close()
    return summary.finish()
