"""``jaxrna fold --model turner``: the energy-model options of ``fold`` and their runs.

``--model turner`` (the default, as RNAfold) folds to the minimum free energy of ViennaRNA's
nearest-neighbour model (:mod:`jaxrna.energy`) with ``--params``, ``--dangles`` and
``-T/--temp`` as RNAfold spells them; ``--model nussinov`` keeps ``fold``'s pair maximisation.
On a machine without a GPU, ``--backend auto`` folds with ViennaRNA's MFE on every core
(:mod:`jaxrna.energy.vienna`, JAX not even imported); ``--backend cpu`` or ``gpu`` runs
jaxrna's own engine (:func:`energy_engine`). ``--partition`` computes the ensemble as RNAfold
-p (:func:`run_turner_partition`, :func:`jaxrna.energy.ensemble.partition_energy_records`).
"""

from __future__ import annotations

import argparse
from typing import Iterator

from jaxrna.io import InputError

ENERGY_HELP = """--model turner (the default): minimum free energy structures in ViennaRNA's nearest-neighbour
(Turner) model, the energies exactly RNAfold's (integer dcal/mol): --params turner2004 (default,
RNAfold's), turner1999 or a ViennaRNA .par file; --dangles 0|1|2 (RNAfold -d, default 2);
-T/--temp C (default 37). Output as RNAfold prints it: 'STRUCTURE (ENERGY)' in kcal/mol with
two decimals; the other formats carry the energy (ct: ENERGY =, json: energy).
Engine: with --backend auto and no GPU, ViennaRNA's MFE on every core (the same energies, no
compilation), also on a GPU host for a job it finishes within about a second; --backend
cpu/gpu: jaxrna's engine (JAXRNA_ENERGY_ENGINE=vienna|jax forces one).
  jaxrna fold --sequence GGGGAAACCCCAUCGAAAGAUU
  jaxrna fold seqs.fa --params turner1999 --dangles 0 -T 30 -f json

--model turner --partition: the ensemble as RNAfold -p computes it (--backend auto:
ViennaRNA's partition function on every core, or the GPU for large jobs): the MFE
structure, the ensemble free energy, base-pair probabilities, the centroid structure and its
distance to the ensemble, the MFE structure's frequency in the ensemble, the ensemble
diversity; --mea [GAMMA] also the maximum expected accuracy structure (RNAfold --MEA, gamma 1
by default). dbn: RNAfold -p's lines
('STRUCTURE (MFE)', 'SYMBOLS [ENSEMBLE]', 'CENTROID {E d=D}', 'MEA {E MEA=M}',
' frequency of mfe structure in ensemble F; ensemble diversity D'); -f json: per record id,
length, sequence, energy, structure, ensemble_energy (kcal/mol, full precision),
pair_probabilities ([i, j, p], 1-based, i < j, every p >= 1e-6), centroid,
centroid_distance, mfe_frequency, ensemble_diversity (mea_structure, mea with --mea); other
formats: the dot-plot text ('# ID LENGTH ENSEMBLE_ENERGY', then 'i j p'); --plot FILE.png
heat maps. As ViennaRNA (RNAfold -p -d1), the partition function treats --dangles 1 as
--dangles 2; the MFE line keeps dangles 1.
  jaxrna fold --sequence GGGGAAACCCCAUCGAAAGAUU --partition --mea
  jaxrna fold seqs.fa --partition -f json -o ensembles.json --plot dots.png
"""

#: Said once on stderr where --dangles 1 meets --partition.
DANGLES_NOTE = ("--dangles 1: the partition function is computed with dangles 2 (as "
                "ViennaRNA's, RNAfold -p -d1); the MFE structure and energies use dangles 1")


def _celsius(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a temperature in Celsius, got {text!r}") from None
    if not -273.15 < value < 1000 or value != value:
        raise argparse.ArgumentTypeError(f"temperature must be above -273.15 C, not {text}")
    return value


def add_energy_options(p: argparse.ArgumentParser) -> None:
    """``--model``, ``--params``, ``--dangles`` and ``-T/--temp`` (defaults resolved by
    :func:`energy_model`, so that giving one without ``--model turner`` is caught)."""
    p.add_argument("--model", choices=["nussinov", "turner"], default=None,
                   help="turner (default): minimum free energy (ViennaRNA's nearest-neighbour "
                        "model, as RNAfold); nussinov: maximum pair weight (--weights, "
                        "--min-loop)")
    p.add_argument("--params", metavar="SET", default=None,
                   help="with --model turner: turner2004 (default), turner1999 or a ViennaRNA "
                        ".par file")
    p.add_argument("--dangles", choices=["0", "1", "2"], default=None,
                   help="with --model turner: dangling-end model as RNAfold's -d (default 2)")
    p.add_argument("-T", "--temp", type=_celsius, metavar="C", default=None,
                   help="with --model turner: temperature in Celsius (default 37)")
    p.add_argument("--mea", nargs="?", type=_gamma, const=1.0, default=None, metavar="GAMMA",
                   help="with --model turner --partition: also the maximum expected accuracy "
                        "structure (RNAfold --MEA; GAMMA default 1)")


def _gamma(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number GAMMA, got {text!r} (put --mea "
                                         "after the input files, or write --mea=1)") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"gamma must be >= 0 and finite, not {text}")
    return value


def energy_model(args: argparse.Namespace):
    """The :class:`~jaxrna.energy.api.EnergyModel` of ``--model turner`` (the default; checked
    against the other options), or None for ``--model nussinov`` (where the energy options are
    errors). Sets ``args.model``.

    >>> from jaxrna.cli import build_parser
    >>> energy_model(build_parser().parse_args(["fold", "--model", "turner", "-T", "30", "x.fa"]))
    EnergyModel(params='turner2004', temperature=30.0, dangles=2)
    >>> energy_model(build_parser().parse_args(["fold", "x.fa"]))
    EnergyModel(params='turner2004', temperature=37.0, dangles=2)
    >>> energy_model(build_parser().parse_args(["fold", "--model", "nussinov", "x.fa"])) is None
    True
    """
    given = [name for name, value in (("--params", args.params), ("--dangles", args.dangles),
                                      ("-T/--temp", args.temp)) if value is not None]
    nussinov = [name for name, value in (("--weights", args.weights is not None),
                                         ("--min-loop", args.min_loop != 3),
                                         ("--temperature", args.temperature is not None))
                if value]
    if args.model is None:
        if nussinov and not given:
            raise InputError(f"{', '.join(nussinov)} belong{'s' if len(nussinov) == 1 else ''} "
                             "to the Nussinov model: add --model nussinov (the default model "
                             "is turner, the energy model)")
        args.model = "turner"
    if args.model != "turner":
        if given or args.mea is not None:
            given += ["--mea"] if args.mea is not None else []
            raise InputError(f"{', '.join(given)} need{'s' if len(given) == 1 else ''} "
                             "--model turner")
        return None
    if args.weights is not None:
        raise InputError("--weights sets Nussinov pair weights; it cannot be used with --model "
                         "turner (the energy model has its own parameters: --params)")
    if args.min_loop != 3:
        raise InputError("--min-loop is fixed at 3 by the energy model; it cannot be changed "
                         "with --model turner")
    if args.temperature is not None:
        raise InputError("--temperature is the Nussinov ensemble's; the energy model's "
                         "temperature is -T/--temp (Celsius)")
    if args.mea is not None and not args.partition:
        raise InputError("--mea needs --partition")
    from jaxrna.energy.api import EnergyModel
    from jaxrna.energy.params import ParamFileError, raw_params

    params = args.params or "turner2004"
    try:
        raw_params(params)
    except ParamFileError as exc:
        raise InputError(str(exc)) from None
    return EnergyModel(params, 37.0 if args.temp is None else args.temp,
                       2 if args.dangles is None else int(args.dangles))


def energy_engine(requested: str) -> str:
    """``vienna`` or ``jax``: which engine folds ``--model turner`` for ``--backend
    requested``, decided without importing JAX where it can be.

    ``--backend auto`` on a machine without a GPU folds with ViennaRNA's MFE on every core
    (:mod:`jaxrna.energy.vienna`: the same energies, no program to compile); ``--backend cpu``
    or ``gpu`` means jaxrna's own (JAX) engine on that backend. ``JAXRNA_ENERGY_ENGINE=vienna``
    or ``jax`` forces one (for comparisons); unset or ``auto``: as above. Without the
    ViennaRNA package, always jaxrna's engine.
    """
    from jaxrna.energy import vienna
    from jaxrna.runtime import gpu_possible

    forced = vienna.engine_choice()
    if forced != "auto":
        return forced if forced == "jax" or vienna.available() else "jax"
    if requested != "auto" or not vienna.available():
        return "jax"
    if not gpu_possible():
        return "vienna"
    from jaxrna.runtime import has_gpu   # a GPU plugin is installed: ask JAX

    return "jax" if has_gpu() else "vienna"


def _announce_vienna(how: str, workers: int) -> None:
    """``-v``: the line :func:`jaxrna.runtime.announce_device` asked for, for ViennaRNA."""
    from jaxrna import runtime

    where = "in this process" if workers <= 1 else f"on up to {workers} processes"
    runtime.announce_host(how, "ViennaRNA's MFE", where)


def _records(args: argparse.Namespace):
    """The input records: ``--sequence`` first, then each FASTA file (read in bulk)."""
    from jaxrna.io import sequence_record
    from jaxrna.io.bulk import iter_batches   # bulk reading: no parser object per record

    if args.sequence is not None:
        yield sequence_record(args.sequence)
    for path in args.fasta:
        for block in iter_batches(path):
            yield from block.records()


#: ``--backend auto`` on a GPU host folds a job (MFE) with ViennaRNA on the host's cores when
#: ViennaRNA's estimate for it (:func:`jaxrna.energy.vienna.mfe_estimate_seconds`) is at most
#: this many seconds, without importing JAX: a warm GPU run of a small job spends 2-3 s
#: starting JAX and the device and loading its program, a first one 8-12 s compiling it.
#: Call S19h (H100 host, 16 cores, byte-compiled wheels; session start -> this rule): 30 x
#: 100-300 nt (estimate 0.1 s) cold 12.47 -> 1.05 s, warm 3.23-3.65 -> 0.92-1.15 s; one 120 nt
#: cold 10.16 -> 0.46 s, warm 2.69-2.72 -> 0.70-0.74 s. At an estimate of 2.0 s (300 x 200-400
#: nt) ViennaRNA's engine took 3.6-4.2 s against the GPU's 2.4-3.1 s warm (S19b): the bound is
#: below.
#: Tried and not kept (S19a): ViennaRNA for jobs up to 9 s while the GPU's programs compiled
#: beside it for the next run: the compiler, sharing the cores, took 8.3 s instead of 5.6, and
#: 1,000 x 50-500 nt took 11.75-12.52 s against 10.32-12.48 on the GPU.
VIENNA_MFE_UP_TO_S = 1.0


def mfe_engine(requested: str, records) -> tuple[str, Iterator, str]:
    """``(engine, records, why)`` for ``fold --model turner`` (MFE) with ``--backend
    requested``: :func:`energy_engine`, except that ``--backend auto`` on a GPU host takes
    ViennaRNA's engine for a job it finishes within :data:`VIENNA_MFE_UP_TO_S`, JAX not
    imported (a first GPU run compiles for seconds). ``records``: the input, returned whole
    (their lengths are read ahead until the estimate passes the bound); ``why``: for ``-v``,
    where that rule chose ViennaRNA.

    >>> mfe_engine("cpu", iter([]))[0]
    'jax'
    """
    from jaxrna.energy import vienna
    from jaxrna.runtime import gpu_possible

    if (requested != "auto" or vienna.engine_choice() != "auto" or not vienna.available()
            or not gpu_possible()):
        return energy_engine(requested), records, ""
    records, lengths = _peek_lengths(records, VIENNA_MFE_UP_TO_S, vienna.mfe_record_seconds)
    estimate = vienna.mfe_estimate_seconds(lengths, vienna.cpu_count())
    if estimate <= VIENNA_MFE_UP_TO_S:
        return "vienna", records, f"a small job: about {estimate:.1f} s on this host's cores"
    return energy_engine(requested), records, ""


def run_turner(args: argparse.Namespace, model, max_bytes: int | None) -> int:
    """Fold every record with the energy model and write them in ``args.format``: with
    ViennaRNA on a machine without a GPU (``--backend auto``, :func:`energy_engine`) or for a
    small job on a GPU host (:func:`mfe_engine`), else with jaxrna's engine."""
    from jaxrna.cli.common import RunSummary
    from jaxrna.formats.fold import WRITERS
    from jaxrna.pipeline import ordered_output
    from jaxrna.progress import progress

    engine, records, why = mfe_engine(args.backend, _records(args))
    bar = progress(None, "fold", quiet=args.quiet)
    summary = RunSummary("folded", "record")
    try:
        if engine == "vienna":
            from jaxrna.energy import vienna

            how = f"--backend {args.backend}" + (
                f", {vienna.ENGINE_ENV}=vienna" if vienna.engine_choice() == "vienna" else
                f", {why}" if why else "")
            _announce_vienna(how, vienna.cpu_count())
            results = vienna.fold_records(records, model, with_pairs=not args.score_only,
                                          max_bytes=max_bytes, on_done=bar.update,
                                          on_error=lambda rec, exc: summary.skip(rec.id, exc))
        else:
            from jaxrna.energy.api import fold_energy_records
            from jaxrna.runtime import enable_compilation_cache, resolve_backend

            enable_compilation_cache()
            backend = resolve_backend(args.backend)
            results = fold_energy_records(records, model, with_pairs=not args.score_only,
                                          max_bytes=max_bytes, on_done=bar.update,
                                          backend=backend,
                                          on_error=lambda rec, exc: summary.skip(rec.id, exc))
        with ordered_output(args.output) as out:
            WRITERS[args.format](summary.count(results), out)
    finally:
        bar.close()
    return summary.finish()


#: ``--backend auto`` on a GPU host computes a ``--partition`` job on the GPU (jaxrna's engine)
#: when ViennaRNA on every core would take longer than this (its estimate,
#: :func:`jaxrna.energy.partition_vienna.estimate_seconds`): a first run of the GPU engine
#: compiles for 10-20 s. On an H100 host (16 cores, calls S15f, S15g): one 2,000 nt 4.4 s warm,
#: 19.7 s cold against ViennaRNA's 41 s; one 4,000 nt 11.7-12.7 s against 311 s; 2,000 x 200
#: nt 16.3 s warm, 27.1 s cold against 22.1 s.
GPU_PARTITION_FROM_S = 25.0


def partition_engine(requested: str, lengths: list[int] | None = None) -> str:
    """The engine (a key of :data:`jaxrna.energy.ensemble.ENGINES`) of ``fold --model turner
    --partition`` for ``--backend requested``: ``--backend cpu`` or ``gpu`` runs jaxrna's JAX
    engine there; ``--backend auto`` ViennaRNA's partition function on every core on a
    machine without a GPU, and on a GPU host for a job of records of ``lengths`` nt that
    ViennaRNA would finish within :data:`GPU_PARTITION_FROM_S`, else the GPU (``lengths``
    None: a job not known yet, as ``jaxrna warmup`` prepares for: the GPU). Without ViennaRNA,
    always jaxrna's engine. ``JAXRNA_ENERGY_ENGINE=vienna|jax`` forces one, as for the MFE.

    >>> partition_engine("auto") in ("vienna", "jax"), partition_engine("cpu")
    (True, 'jax')
    """
    from jaxrna.energy import vienna

    forced = vienna.engine_choice()
    if forced != "auto":
        return forced if forced == "jax" or vienna.available() else "jax"
    if requested != "auto" or not vienna.available():
        return "jax"
    from jaxrna.runtime import gpu_possible

    if not gpu_possible():
        return "vienna"
    if lengths is not None:
        from jaxrna.energy.partition_vienna import estimate_seconds

        if estimate_seconds(lengths, vienna.cpu_count()) <= GPU_PARTITION_FROM_S:
            return "vienna"
    from jaxrna.runtime import has_gpu   # a GPU plugin is installed: ask JAX

    return "jax" if has_gpu() else "vienna"


#: ``--backend auto --partition`` on a GPU host: a job ViennaRNA's estimate puts between this
#: and :data:`GPU_PARTITION_FROM_S` seconds goes to the GPU after all where every program it
#: runs there is stored already (a warm GPU run: 2,000 x 200 nt 15.05-15.85 s against
#: ViennaRNA's engine 19.47-22.80 s, S19q); finding out starts JAX and the device (~2 s, and
#: ViennaRNA's processes are then spawned, not forked), so smaller jobs, and any job where the
#: store holds no executable at all, are not asked.
WARM_GPU_PARTITION_FROM_S = 8.0


def warm_gpu_partition(lengths: list[int], max_bytes: int | None) -> bool:
    """Whether a ``--partition`` job of records of ``lengths`` nt that ViennaRNA would take
    (:func:`partition_engine`) goes to the GPU instead: its estimate is at least
    :data:`WARM_GPU_PARTITION_FROM_S`, JAX sees a GPU, and every program the GPU would run for
    the job is stored (:func:`jaxrna.energy.partition_jax.programs_stored`)."""
    from jaxrna.energy import vienna
    from jaxrna.energy.partition_vienna import estimate_seconds

    if estimate_seconds(lengths, vienna.cpu_count()) < WARM_GPU_PARTITION_FROM_S:
        return False
    if not _store_holds_executables():
        return False
    from jaxrna.runtime import devices, enable_compilation_cache, has_gpu, jax_started_for

    jax_started_for("a look at the store")
    if not has_gpu() or enable_compilation_cache() is None:
        return False
    from jaxrna.energy.partition_jax import programs_stored

    return programs_stored(lengths, devices("gpu")[0], max_bytes)


def _store_holds_executables() -> bool:
    """Whether jaxrna's store of executables holds any (:func:`jaxrna.programs.holds_executables`),
    judged without importing JAX."""
    from jaxrna.programs import holds_executables
    from jaxrna.runtime import cache_dir

    path = cache_dir()
    return path is not None and holds_executables(path)


def _peek_lengths(records, seconds: float, record_seconds=None) -> tuple[Iterator, list[int]]:
    """``(all records, the lengths of those read)``: reads records until ViennaRNA's estimate
    for them (``record_seconds(n)`` a record on one core; default its partition function's)
    passes ``seconds`` on this host's cores, or the input ends."""
    import itertools

    from jaxrna.energy import vienna

    if record_seconds is None:
        from jaxrna.energy.partition_vienna import record_seconds
    records = iter(records)
    read, lengths, total, cores = [], [], 0.0, vienna.cpu_count()
    for rec in records:
        read.append(rec)
        lengths.append(len(rec.sequence))
        t = record_seconds(lengths[-1])
        total += t
        if t > seconds or total / cores > seconds:
            break
    return itertools.chain(read, records), lengths


def run_turner_partition(args: argparse.Namespace, model, max_bytes: int | None) -> int:
    """The ensemble of every record in the energy model (RNAfold -p;
    :func:`jaxrna.energy.ensemble.partition_energy_records`), written in ``args.format``
    (:mod:`jaxrna.formats.fold_energy_partition`), with ``--plot`` heat maps."""
    import logging

    from jaxrna.cli.common import run_ensembles
    from jaxrna.energy import vienna
    from jaxrna.energy.ensemble import partition_energy_records
    from jaxrna.formats.fold_energy_partition import writer_for
    from jaxrna.pipeline import ordered_output
    from jaxrna.runtime import gpu_possible

    if model.dangles == 1:
        logging.getLogger("jaxrna").warning("%s", DANGLES_NOTE)
    records, lengths = _records(args), None
    if args.backend == "auto" and vienna.engine_choice() == "auto" and gpu_possible():
        records, lengths = _peek_lengths(records, GPU_PARTITION_FROM_S)
    engine = partition_engine(args.backend, lengths)
    if engine == "vienna" and lengths is not None and warm_gpu_partition(lengths, max_bytes):
        engine = "jax"
    backend = None
    if engine == "vienna":
        if not vienna.available():
            raise InputError("--model turner --partition needs ViennaRNA (pip install ViennaRNA)")
        from jaxrna import runtime

        runtime.announce_host(f"--backend {args.backend}", "ViennaRNA's partition function",
                              f"on up to {vienna.cpu_count()} processes")
    else:
        from jaxrna.runtime import enable_compilation_cache, resolve_backend

        enable_compilation_cache()
        backend = resolve_backend(args.backend)

    def compute(records, on_done, on_error):
        return partition_energy_records(records, model, mea_gamma=args.mea,
                                        max_bytes=max_bytes, on_done=on_done,
                                        on_error=on_error, engine=engine, backend=backend)

    def write(output, writer, results):
        with ordered_output(output) as out:
            writer(results, out)

    return run_ensembles(args, records, compute, "computed the ensembles of",
                         writer_for(args.format), write)
