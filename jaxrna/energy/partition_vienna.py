"""ViennaRNA's partition function as the CPU engine of ``jaxrna fold --model turner --partition``.

Per record, as RNAfold -p computes it: ``RNA.fold_compound(seq, md)`` with the model details
of :mod:`jaxrna.energy.vienna` (the parameter set, temperature, dangle model; unpaired
positions as ``hc_add_up``), ``mfe()``, ``exp_params_rescale(mfe)``, ``pf()``, ``bpp()``,
``centroid()``, ``pr_energy()``, ``mean_bp_distance()`` and, with a gamma, ``MEA(gamma)``;
the centroid's and MEA structure's energies by ``eval_structure``. With dangles 1 the MFE is
that of dangles 1 and the partition function that of dangles 2 (ViennaRNA's has no dangles 1):
the MFE used to scale it and the MFE frequency are the MFE structure's energy under dangles 2,
as RNAfold -p -d1 does. The ensemble free energy is taken at double precision from the
partition function itself (``pf()`` returns it as a C float).

Records run on every core in a process pool (small jobs in this process), in input order, as
:func:`jaxrna.energy.vienna.fold_records` does, ViennaRNA's global parameter set handled the
same way (loaded once per worker; in this process around each task, the caller's set
restored: :func:`jaxrna.energy.vienna.global_set`).

>>> from jaxrna.io.fasta import Record
>>> r = next(partition_records([Record("a", "GGGGAAACCCC")], EnergyModel(), processes=1))
>>> r.structure, r.centroid, round(r.mfe_frequency, 4), round(r.ensemble_diversity, 4)
('((((...))))', '((((...))))', 0.5456, 3.5347)
"""

from __future__ import annotations

import math
from typing import Iterable, Iterator

import numpy as np

from jaxrna.energy import vienna
from jaxrna.energy.api import EnergyModel, memory_limit
from jaxrna.energy.ensemble import PF_DANGLES, THRESHOLD, EnergyPartitionResult
from jaxrna.io.errors import ResourceError
from jaxrna.io.fasta import Record

#: Bytes per nucleotide squared that one record needs here: ViennaRNA's MFE and partition
#: matrices and the probability matrix read back into Python (~70 n^2).
BYTES_PER_CELL = 72
#: A task of the pool: at most this many records or letters (the work is cubic: small tasks).
TASK_RECORDS = 16
TASK_LETTERS = 2000
#: Below this many letters in all a job runs in this process (no pool to start).
INPROCESS_LETTERS = 1000
#: One record of n nt takes about ``PF_SECONDS * n ** 2.5`` s here on one core of an H100 host
#: (RNAfold -p's computations: 200 nt ~0.18 s a record on 16 processes, 2,000 nt 41-45 s,
#: 3,000 nt 133 s, 4,000 nt 311 s; fifteenth session, calls S15b, S15f, S15g).
PF_SECONDS = 2.6e-7


def record_seconds(length: int) -> float:
    """About how long one core takes for one record of ``length`` nt (:data:`PF_SECONDS`)."""
    return PF_SECONDS * float(length) ** 2.5


def estimate_seconds(lengths: Iterable[int], cores: int) -> float:
    """About how long this engine takes for records of ``lengths`` nt on ``cores`` processes:
    the records' total over the cores, or the longest record's alone (one core computes it).

    >>> round(estimate_seconds([2000], 16), 1), round(estimate_seconds([200] * 2000, 16), 1)
    (46.5, 18.4)
    """
    return vienna.pool_seconds([record_seconds(n) for n in lengths], cores)


def estimate_bytes(length: int) -> int:
    """Memory one record of ``length`` nt needs (see :data:`BYTES_PER_CELL`)."""
    return BYTES_PER_CELL * (length + 1) * (length + 1)


def check_memory(length: int, max_bytes: int | None) -> None:
    from jaxrna.runtime import human_bytes

    need = estimate_bytes(length)
    if max_bytes and need > max_bytes:
        raise ResourceError(
            f"{length} nt need about {human_bytes(need)} for the energy model's partition "
            f"function, more than the {human_bytes(max_bytes)} allowed; use a machine with more "
            "memory or raise --max-memory")


# --------------------------------------------------------------------------- the model

_STATE: dict = {}   # this process: ViennaRNA, model details per dangles, the set (None: global)


def _setup(model: EnergyModel, own_set: bool) -> None:
    """Model details for the model's dangles and for the partition function's
    (:data:`~jaxrna.energy.ensemble.PF_DANGLES`); ``own_set`` (a worker of our pool) loads the
    set globally once, otherwise each task loads it around its work
    (:func:`jaxrna.energy.vienna.global_set`)."""
    import RNA

    params = vienna.set_name(model.params)
    key = (params, model.temperature, model.dangles, own_set)
    if _STATE.get("key") == key:
        return
    dangles = sorted({model.dangles, PF_DANGLES[model.dangles]})
    mds = {d: vienna.model_details(RNA, EnergyModel(model.params, model.temperature, d))
           for d in dangles}
    if own_set:
        vienna.load_set(RNA, params)
    _STATE.update(key=key, RNA=RNA, mds=mds, dangles=model.dangles,
                  params=None if own_set else params)


def _worker_init(model: EnergyModel) -> None:
    from jaxrna.io.cleanup import ignore_interrupts

    ignore_interrupts()
    _setup(model, own_set=True)


def _compound(RNA, seq: str, dangles: int, options=None):
    md = _STATE["mds"][dangles]
    return RNA.fold_compound(seq, md) if options is None else RNA.fold_compound(seq, md, options)


def _empty(gamma) -> tuple:
    none = np.zeros(0, np.int32)
    return (0, "", 0.0, "", none, none, np.zeros(0), "", 0.0, 0.0, 1.0, 0.0,
            *(("", 0.0, 0.0) if gamma is not None else (None, None, None)))


def _one(seq: str, up, gamma: float | None) -> tuple:
    """One record's ensemble, as the fields of :class:`EnergyPartitionResult` from ``energy``
    to ``mea_energy``."""
    RNA, dangles = _STATE["RNA"], _STATE["dangles"]
    n = len(seq)
    if not n:
        return _empty(gamma)
    fc = _compound(RNA, seq, dangles)
    for k in up:
        fc.hc_add_up(int(k) + 1)
    structure, mfe = fc.mfe()
    min_en = mfe
    pf_dangles = PF_DANGLES[dangles]
    if pf_dangles != dangles:            # as RNAfold -p: the MFE structure under dangles 2
        ev = _compound(RNA, seq, pf_dangles, RNA.OPTION_EVAL_ONLY)
        min_en = ev.eval_structure(structure)
    fc.exp_params_rescale(min_en)
    symbols, ensemble = fc.pf()
    q = fc.exp_matrices.q1k[n]
    exact = (-math.log(q) - n * math.log(fc.exp_params.pf_scale)) * fc.exp_params.kT / 1000
    if math.isfinite(exact) and abs(exact - ensemble) < 1e-3:
        ensemble = exact
    P = np.asarray(fc.bpp(), np.float64)[1:, 1:]
    i, j, p = EnergyPartitionResult.sparse(P, THRESHOLD)
    centroid, distance = fc.centroid()
    centroid_energy = fc.eval_structure(centroid)
    frequency = fc.pr_energy(min_en)
    diversity = fc.mean_bp_distance()
    mea = (None, None, None)
    if gamma is not None:
        mea_structure, mea_value = fc.MEA(gamma)
        mea = (mea_structure, mea_value, fc.eval_structure(mea_structure))
    return (int(round(mfe * 100)), structure, float(ensemble), symbols, i, j, p, centroid,
            float(distance), float(centroid_energy), float(frequency), float(diversity), *mea)


def _run(sequences: list[str], unpaired: list, gamma: float | None) -> list[tuple]:
    with vienna.global_set(_STATE["params"]):
        return [_one(seq, up, gamma) for seq, up in zip(sequences, unpaired)]


# --------------------------------------------------------------------------- the records

_FIELDS = ("energy", "structure", "ensemble_energy", "ensemble_symbols", "pair_i", "pair_j",
           "pair_p", "centroid", "centroid_distance", "centroid_energy", "mfe_frequency",
           "ensemble_diversity", "mea_structure", "mea", "mea_energy")


def _results(task: list[Record], computed: list[tuple], model: EnergyModel, gamma):
    for rec, values in zip(task, computed):
        yield EnergyPartitionResult(id=rec.id, sequence=rec.sequence, model=model,
                                    mea_gamma=gamma, description=rec.description,
                                    **dict(zip(_FIELDS, values)))


def partition_records(records: Iterable[Record], model: EnergyModel | None = None,
                      mea_gamma: float | None = None, max_bytes: int | None = None,
                      on_done=None, on_error=None, unpaired: dict | None = None,
                      processes: int | None = None) -> Iterator[EnergyPartitionResult]:
    """:func:`jaxrna.energy.ensemble.partition_energy_records` with ViennaRNA: records on
    ``processes`` worker processes (default every core this process may use; a job under
    :data:`INPROCESS_LETTERS` letters, or one process: in this process), results in input order
    as they come, a few tasks per process in flight."""
    model = model or EnergyModel()
    max_bytes = memory_limit(max_bytes)
    return vienna.run_tasks(
        records, lambda n: check_memory(n, max_bytes),
        (TASK_RECORDS, TASK_LETTERS, INPROCESS_LETTERS),
        lambda task: _run(*vienna.task_args(task, unpaired, mea_gamma)),
        lambda task: (_run, vienna.task_args(task, unpaired, mea_gamma)),
        lambda task, computed: _results(task, computed, model, mea_gamma),
        lambda: _setup(model, own_set=False), _worker_init, (model,),
        processes if processes is not None else vienna.cpu_count(), on_done, on_error)
