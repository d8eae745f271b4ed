"""``jaxrna warmup``: compile the standard program set of this machine's device into the cache.

Each subcommand compiles a few programs, fixed by its size classes and option class (issue 26),
and keeps them in the compile cache (``JAXRNA_CACHE_DIR``, default ``~/.cache/jaxrna/jax``).
``jaxrna warmup`` prepares them all up front, so that a Galaxy server, a container image built on
a GPU host or a pipeline's first step pays the compilation once and every later job on any data
up to ``--max-length`` compiles nothing. The programs depend on the device, JAX's version and
jaxrna's: warm up on the machine (and image) that runs the jobs.

Each algorithm package provides ``warmup.warm(backend, max_length, **options)``, which runs
minimal synthetic inputs through the same code path the CLI uses and returns how many programs
it prepared; this module chooses which, creates the cache with safe modes (only its owner may
write it: :func:`jaxrna.runtime.prepare_private_cache`) and reports what was compiled. On a
machine without a GPU, ``--backend auto`` folds ``--model turner`` with ViennaRNA
(:mod:`jaxrna.energy.vienna`), which has nothing to compile: that warmer is skipped there
(``--backend cpu`` warms jaxrna's own CPU engine). ``--partition`` adds, for ``fold --model
turner``, the partition engine's programs (and the MFE programs that engine runs) where
``fold --model turner --partition`` uses jaxrna's engine: ``--backend cpu`` or ``gpu``
(``--backend auto`` computes the ensemble with ViennaRNA, :func:`jaxrna.cli.fold_energy.
partition_engine`). The host engines' C libraries (the Nussinov fill, align's traceback walk,
interact's tables: :mod:`jaxrna.native`) are built into the cache as well.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

from jaxrna.io.errors import JaxrnaError

#: The subcommands warmed, in order, and the option classes each prepares: (label, module).
#: The options each ``warm`` gets come from this command's own options (:func:`options_for`).
WARMERS = {
    "fold": [("fold nussinov", "jaxrna.fold.warmup"), ("fold turner", "jaxrna.energy.warmup")],
    "align": [("align", "jaxrna.align.warmup")],
    "interact": [("interact", "jaxrna.interact.warmup")],
    "targets": [("targets", "jaxrna.targets.warmup")],
}


def options_for(label: str, args: argparse.Namespace) -> dict:
    """The option class a warmer prepares, from ``jaxrna warmup``'s options (the same names
    and meanings as the subcommands'; numeric values such as scores, penalties, weights,
    temperature and dangles never select a program, so they are not asked for).

    >>> from jaxrna.cli import build_parser
    >>> a = build_parser().parse_args(["warmup", "--score-only", "--mode", "local"])
    >>> options_for("fold nussinov", a), options_for("align", a)
    ({'score_only': True, 'partition': False}, {'mode': 'local', 'alignments': False})
    >>> options_for("targets", build_parser().parse_args(["warmup"]))
    {'no_energy': False}
    >>> options_for("fold turner", build_parser().parse_args(["warmup", "--partition"]))
    {'partition': True}
    """
    if label == "fold nussinov":
        return {"score_only": args.score_only, "partition": args.partition}
    if label == "fold turner":
        return {"partition": args.partition}
    if label == "align":
        return {"mode": args.mode, "alignments": not args.score_only}
    if label == "interact":
        return {"window1": args.window1, "window2": args.window2,
                "with_pairs": not args.score_only}
    if label == "targets":
        return {"no_energy": args.no_energy}
    return {}


EXAMPLES = """examples:
  jaxrna warmup                          # every subcommand, inputs up to 10,000 nt
  jaxrna warmup fold --model turner      # only the energy model's programs
  JAXRNA_CACHE_DIR=/srv/jaxrna-cache jaxrna warmup --max-length 5000

Jobs then use the same cache (the same JAXRNA_CACHE_DIR, user and machine type) and compile
nothing for inputs up to --max-length nt. The cache is created so that only its owner can write
it; a cache that others can write is never loaded from (jaxrna info says whether it is trusted).
"""


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "warmup", help="compile the standard programs into the cache, once",
        description="Compile every program the subcommands use on this machine's device, for "
                    "inputs up to --max-length nt, into the compile cache, so that later jobs "
                    "compile nothing.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("subcommands", nargs="*", metavar="SUBCOMMAND",
                   help=f"which to warm up, of {', '.join(WARMERS)} (default: all)")
    p.add_argument("--model", choices=["nussinov", "turner", "all"], default="all",
                   help="for fold: which model's programs (default: all)")
    p.add_argument("--max-length", type=int, default=10_000, metavar="NT",
                   help="longest input the programs must cover (default 10000)")
    p.add_argument("--backend", choices=["auto", "cpu", "gpu"], default="auto",
                   help="the device whose programs to compile (auto: a GPU if JAX sees one)")
    g = p.add_argument_group("option classes (as the subcommands' options of the same name)")
    g.add_argument("--score-only", action="store_true",
                   help="fold, align, interact: the programs of runs without structures or "
                        "alignments (default: with them)")
    g.add_argument("--partition", action="store_true", help="fold: the pair ensemble's programs")
    g.add_argument("--mode", choices=["global", "local", "semi-global"], default="global",
                   help="align: the alignment mode (semi-global: end gaps scored apart)")
    g.add_argument("--window1", type=int, default=None, metavar="W",
                   help="interact: a window on the first strand")
    g.add_argument("--window2", type=int, default=None, metavar="W",
                   help="interact: a window on the second strand")
    g.add_argument("--no-energy", action="store_true",
                   help="targets: scans without energies (default: with, as targets runs)")
    p.add_argument("-q", "--quiet", action="store_true", help="no report on standard error")
    p.add_argument("-v", "--verbose", action="store_true", help="print the device used")
    p.set_defaults(func=run)


def chosen(args: argparse.Namespace) -> list[tuple[str, str, dict]]:
    """The (label, module, options) of the warmers this run asks for.

    >>> from jaxrna.cli import build_parser
    >>> [c[0] for c in chosen(build_parser().parse_args(["warmup", "fold", "--model", "turner"]))]
    ['fold turner']
    >>> len(chosen(build_parser().parse_args(["warmup"])))
    5
    """
    names = args.subcommands or list(WARMERS)
    unknown = [n for n in names if n not in WARMERS]
    if unknown:
        raise JaxrnaError(f"warmup: unknown subcommand {unknown[0]!r} (of {', '.join(WARMERS)})")
    out = []
    for name in dict.fromkeys(names):
        for label, module in WARMERS[name]:
            if name == "fold" and args.model != "all" and not label.endswith(args.model):
                continue
            out.append((label, module, options_for(label, args)))
    return out


def _turner_runs_vienna(requested: str) -> bool:
    """Whether ``fold --model turner --backend requested`` folds with ViennaRNA here (a CPU
    without GPU under ``--backend auto``): then it has no program to prepare."""
    from jaxrna.cli.fold_energy import energy_engine

    return energy_engine(requested) == "vienna"


def _partition_runs_vienna(requested: str) -> bool:
    """Whether ``fold --model turner --partition --backend requested`` computes the ensemble
    with ViennaRNA here (then the partition engine has no program to prepare)."""
    from jaxrna.cli.fold_energy import partition_engine

    return partition_engine(requested) == "vienna"


#: The host engines' compiled C (:mod:`jaxrna.native`) of each subcommand: (label, module).
HOST_LIBRARIES = {"fold": ("fold nussinov host fill (C)", "jaxrna.fold.host"),
                  "align": ("align host walk (C)", "jaxrna.align.hostwalk"),
                  "interact": ("interact host engine (C)", "jaxrna.interact.host_fill"),
                  "targets": ("targets bulk scan (C)", "jaxrna.targets.host_scan")}


def _host_engines(args: argparse.Namespace) -> list[tuple[str, int, int, float]]:
    """Build the C libraries of the host engines of the subcommands warmed into the cache
    (a job that needs one then loads it: about 0.3-0.6 s of building saved per fresh job);
    a row each, ``programs`` 1 when the library is ready (0: no C compiler here)."""
    from jaxrna import native

    rows = []
    for name in dict.fromkeys(args.subcommands or list(WARMERS)):
        if name not in HOST_LIBRARIES or (name == "fold" and args.model == "turner"):
            continue
        label, module = HOST_LIBRARIES[name]
        start = time.perf_counter()
        mod = importlib.import_module(module)
        before = native.cached(mod.LIBRARY_NAME, mod.SOURCE, mod.FLAGS)
        lib = mod.library()
        built = int(lib is not None and not before)
        rows.append((label, int(lib is not None), built, time.perf_counter() - start))
        if not args.quiet:
            print(f"jaxrna: warmup {label}: {'ready' if lib is not None else 'no C compiler'} "
                  f"in {rows[-1][3]:.1f} s", file=sys.stderr, flush=True)
    return rows


def run(args: argparse.Namespace) -> int:
    from jaxrna import runtime, stages

    if args.max_length < 1:
        raise JaxrnaError("--max-length must be at least 1")
    path = runtime.cache_dir()
    if path is None:
        raise JaxrnaError("warmup needs a compile cache, but JAXRNA_CACHE_DIR is off")
    runtime.prepare_private_cache(path)
    if runtime.enable_compilation_cache() is None:
        raise JaxrnaError(f"warmup: the compile cache {path} cannot be used (see above)")
    backend = runtime.resolve_backend(args.backend)
    rows = []
    for label, module, options in chosen(args):
        if label == "fold turner":
            asked = bool(options.get("partition"))
            pf = asked and not _partition_runs_vienna(args.backend)
            options = dict(options, partition=pf)
            if pf:                                  # the partition engine and its MFE
                label = "fold turner partition"
            elif _turner_runs_vienna(args.backend):
                rows.append((label + " (ViennaRNA engine: nothing to compile)", 0, 0, 0.0))
                continue
            elif asked:                             # the MFE programs only
                label += " (--partition: ViennaRNA engine)"
        before = stages.counts()
        start = time.perf_counter()
        prepared = importlib.import_module(module).warm(backend=backend,
                                                        max_length=args.max_length, **options)
        after = stages.counts()
        compiled = after.get("compiled", 0) - before.get("compiled", 0)
        rows.append((label, int(prepared or 0), compiled, time.perf_counter() - start))
        if not args.quiet:
            print(f"jaxrna: warmup {label}: {rows[-1][1]} programs ready ({compiled} compiled) in "
                  f"{rows[-1][3]:.1f} s", file=sys.stderr, flush=True)
    rows += _host_engines(args)
    print(f"cache\t{path}")
    print("subcommand\tprograms\tcompiled\tseconds")
    for label, prepared, compiled, seconds in rows:
        print(f"{label}\t{prepared}\t{compiled}\t{seconds:.1f}")
    return 0
