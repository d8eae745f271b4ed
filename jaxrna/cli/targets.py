"""``jaxrna targets``: miRNA target scanning that reproduces miRanda 3.3a.

miRanda's own spellings are accepted too (``-sc -en -scale -go -ge -strict -noenergy -quiet
-keyval -out``), so a pipeline switches from ``miranda`` by changing the program name only.
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import time

from jaxrna.cli.common import (add_backend_option, positive_int, setup_logging,
                               use_device_options)
from jaxrna.io import InputError, atomic_output
from jaxrna.progress import progress

log = logging.getLogger("jaxrna")

EXAMPLES = """examples:
  jaxrna targets test-data/miranda/bantam_stRNA.fasta test-data/miranda/hid_UTR.fasta
  jaxrna targets mirnas.fa utrs.fa --no-energy --quiet -o hits.txt
  jaxrna targets mirnas.fa utrs.fa -f tsv -o hits.tsv
  jaxrna targets mirnas.fa utrs.fa -sc 150 -en -20 -strict -out hits.txt   (miRanda spellings)

The miranda format is byte-identical to miRanda 3.3a's output without its banner and settings
header. To scan a large job in pieces and concatenate the reports, split the miRNA file and give
each piece --pair-offset (miRNAs before the piece) x (targets in the target file), so the
running pair counter ("Strand") continues as in one run.
"""

_WHOLE = re.compile(r"\s*([+-]?\d+)(\.\d*)?\s*")


def whole_number(text: str) -> int:
    """miRanda reads these with C ``atoi``: a whole number (a fractional part is dropped)."""
    m = _WHOLE.fullmatch(text)
    if not m:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(m.group(1))


def real_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def add_parser(subparsers) -> None:
    from jaxrna.formats.miranda import FORMATS

    p = subparsers.add_parser(
        "targets", help="miRNA target scanning (miRanda 3.3a, exactly)",
        description="Scan every miRNA against every target (miRNA-major, as miRanda does) and "
                    "report miRanda 3.3a's hits: same scores, coordinates, alignments and "
                    "energies (Turner 1999, 30 C, as ViennaRNA folds miRanda's duplex string).",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mirnas", metavar="MIRNAS.fa", help="miRNA FASTA file (plain or gzip)")
    p.add_argument("targets", metavar="TARGETS.fa",
                   help="target (3'UTR) FASTA file, plain or gzip, any size; '-' reads standard input")
    g = p.add_argument_group("miRanda options (its own spellings work too)")
    g.add_argument("--score-threshold", "-sc", type=whole_number, default=140, metavar="S",
                   help="report alignments scoring at least S (default 140)")
    g.add_argument("--energy-threshold", "-en", type=whole_number, default=1, metavar="E",
                   help="keep hits with energy below E kcal/mol (default 1, i.e. all)")
    g.add_argument("--scale", "-scale", type=real_number, default=4.0, metavar="Z",
                   help="scaling of seed positions 2-8 (default 4)")
    g.add_argument("--gap-open", "-go", type=whole_number, default=-9, metavar="X",
                   help="gap-open penalty, <= 0 (default -9)")
    g.add_argument("--gap-extend", "-ge", type=whole_number, default=-4, metavar="Y",
                   help="gap-extend penalty, <= 0 (default -4)")
    g.add_argument("--strict", "-strict", action="store_true",
                   help="demand strict seed pairing (positions 2-8 Watson-Crick, no gaps)")
    g.add_argument("--no-energy", "-noenergy", "--noenergy", action="store_true",
                   help="skip the folding step (energies print as 0)")
    g.add_argument("--quiet", "-quiet", action="store_true",
                   help="miRanda's -quiet: leave out per-sequence notices and no-hit pairs; "
                        "also no progress bar")
    g.add_argument("--keyval", "-keyval", action="store_true", help="same as --format keyval")
    g.add_argument("-o", "--output", "-out", metavar="FILE", default=None,
                   help="write results to FILE (written atomically; default: standard output)")
    p.add_argument("-f", "--format", choices=FORMATS, default="miranda",
                   help="miranda (default), keyval, tsv (one row per hit, clean 1-based spans) or json")
    p.add_argument("--pair-offset", type=positive_int, default=0, metavar="N",
                   help="start miRanda's running pair counter (\"Strand\") at N+1, for pieces of a split run")
    p.add_argument("--energy-engine", choices=("auto", "device", "cpu", "vienna"), default=None,
                   help="what folds the hits' energies (the same energies, byte-identical output): "
                        "jaxrna's energy engine on the run's device (device), the same model "
                        "vectorised on the CPU (cpu), or ViennaRNA, the reference (vienna); "
                        "default auto: device on a GPU, cpu on a CPU (or $JAXRNA_ENERGY_ENGINE)")
    p.add_argument("--chunk-nt", type=positive_int, default=None, metavar="NT",
                   help="target nucleotides scanned per chunk (memory vs. speed; default 64,000,000)")
    add_backend_option(p)
    p.set_defaults(func=run)


#: ``--backend auto`` scans fewer cells than this on the CPU: it finishes them before a GPU
#: would have started (CUDA's start-up and program loads take about a second; this CPU scans
#: ~0.6 G cells/s on 2 cores).
GPU_CELLS_FROM = 2e8


def _scan_size(mirnas: str, targets: str) -> float | None:
    """Cells of the scan (miRNA nt x target nt), estimated from the sizes of plain files
    (None when a file is compressed, a stream or unreadable: then it is not taken as small)."""
    import os

    sizes = []
    for path in (mirnas, targets):
        try:
            if path == "-" or not os.path.isfile(path):
                return None
            with open(path, "rb") as fh:
                if fh.read(2) == b"\x1f\x8b":
                    return None
            sizes.append(os.path.getsize(path))
        except OSError:
            return None
    return float(sizes[0]) * float(sizes[1])


def _energy_program_early(args, params, size: float | None) -> bool:
    """Start the device energy engine's program in a compile worker at once, before JAX is
    imported here (:func:`jaxrna.compile_workers.submit_early`), for a cold run with energies
    on a GPU: ``--energy-engine`` auto or device, ``--backend`` gpu or auto on a scan not left
    to the CPU, a GPU possible, a trusted store holding no executable. Asked for with the
    first chunk's programs (~2 s into a run), that program traced and compiled in a worker
    until ~8 s, 2.2 s after the energies first waited for it (H200, BENCHMARKS.md,
    twenty-fourth session); started here, 2,000 x 30,000 took 1.4-4.7 s less cold, warm the
    same (twenty-fifth session). Returns whether a worker was started."""
    from jaxrna.io.errors import InputError
    from jaxrna.programs import holds_executables
    from jaxrna.runtime import cache_dir, gpu_possible, trusted_store
    from jaxrna.targets.energy import engine_name

    if params.no_energy or args.backend == "cpu":
        return False
    try:
        if engine_name(args.energy_engine, "gpu") != "device":
            return False
    except InputError:                  # reported by the run itself, where it always was
        return False
    if args.backend == "auto" and size is not None and size < GPU_CELLS_FROM:
        return False
    if not gpu_possible():
        return False
    store = trusted_store()
    if store is None or holds_executables(cache_dir()):
        return False
    from jaxrna.compile_workers import submit_early

    return submit_early("targets.energy.fold_batch",
                        "jaxrna.targets.prefetch:energy_program_here", store) is not None


def run(args) -> int:
    setup_logging(args.quiet)
    use_device_options(args)           # --devices N
    from jaxrna.targets.sequences import forget_read_ahead, read_ahead

    read_ahead(args.targets)  # the target file is read while JAX starts
    try:
        return _run(args)
    finally:
        forget_read_ahead()


def _run(args) -> int:
    from jaxrna.formats.miranda import writer_for
    from jaxrna.targets.api import DEFAULT_CHUNK_NT, write_scan
    from jaxrna.targets.scoring import ScanParams

    fmt = "keyval" if args.keyval else args.format
    if args.keyval and args.format not in ("miranda", "keyval"):
        raise InputError(f"--keyval and --format {args.format} contradict each other")
    try:
        params = ScanParams(score_threshold=args.score_threshold, energy_threshold=args.energy_threshold,
                            scale=args.scale, gap_open=args.gap_open, gap_extend=args.gap_extend,
                            strict=args.strict, no_energy=args.no_energy)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    from jaxrna.stages import stage

    with stage("setup"):
        from jaxrna.runtime import choose_backend, enable_compilation_cache

        size = _scan_size(args.mirnas, args.targets)
        _energy_program_early(args, params, size)
        backend = choose_backend(args.backend, size, GPU_CELLS_FROM)
        import jax

        enable_compilation_cache()
    chunk_nt = args.chunk_nt or DEFAULT_CHUNK_NT
    bar = progress(None, "targets", unit="pair", quiet=args.quiet)
    start = time.perf_counter()
    try:
        from jaxrna.runtime import devices

        used = devices(backend)             # every device, or the first --devices N
        with jax.default_device(used[0]):
            with atomic_output(args.output) as out:
                writer = writer_for(fmt, out, no_energy=params.no_energy, quiet=args.quiet)
                stats = write_scan(args.mirnas, args.targets, writer, params, chunk_nt=chunk_nt,
                                   pair_offset=args.pair_offset, progress=bar,
                                   engine_options={"devices": used},
                                   energy_engine=args.energy_engine)
    finally:
        bar.close()
    elapsed = time.perf_counter() - start
    log.info("scanned %d miRNA%s x %d target%s (%.3g cells) in %.2f s: %d hit%s",
             stats["mirnas"], "" if stats["mirnas"] == 1 else "s", stats["targets"],
             "" if stats["targets"] == 1 else "s", stats["cells"], elapsed, stats["hits"],
             "" if stats["hits"] == 1 else "s")
    return 0
