"""The energy model's ensembles (``jaxrna fold --model turner --partition``): one result type and
one entry point, whatever engine computes them.

:func:`partition_energy_records` takes records and an :class:`~jaxrna.energy.api.EnergyModel`
and yields, per record in input order, an :class:`EnergyPartitionResult` with what ``RNAfold
-p`` prints: the minimum free energy and its structure, the ensemble free energy, the base-pair
probabilities, the centroid structure and its distance, the MFE structure's frequency in the
ensemble, the ensemble diversity and, with ``mea_gamma``, the MEA structure (``RNAfold --MEA``).
Two engines (:data:`ENGINES`) take the same arguments and yield the same results: ViennaRNA
on every core (:mod:`jaxrna.energy.partition_vienna`, the CPU's) and jaxrna's own JAX engine
(:mod:`jaxrna.energy.partition_jax`, the GPU's; results built with
:meth:`EnergyPartitionResult.from_matrix` from a dense probability matrix).

As ViennaRNA's partition function, dangles 1 is computed as dangles 2 (:data:`PF_DANGLES`); the
MFE structure and the energies of the MFE, centroid and MEA structures are those of the model's
own dangles, as RNAfold -p -d1 prints them.

>>> from jaxrna.io.fasta import Record
>>> r = next(partition_energy_records([Record("a", "GGGGAAACCCC")], processes=1))
>>> r.structure, r.energy, round(r.ensemble_energy, 4), r.centroid
('((((...))))', -450, -4.8734, '((((...))))')
>>> [(i, j, round(p, 4)) for i, j, p in r.pair_triples() if p > 0.5]
[(1, 11, 0.5643), (2, 10, 0.5775), (3, 9, 0.5773), (4, 8, 0.5588)]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import numpy as np

from jaxrna.energy.api import EnergyModel
from jaxrna.io.fasta import Record

#: Pair probabilities below this are not kept (nor written).
THRESHOLD = 1e-6
#: The dangle model the partition function uses for each ``--dangles``: ViennaRNA's partition
#: function has no dangles 1 (nor 3); it computes them as dangles 2.
PF_DANGLES = {0: 0, 1: 2, 2: 2}
#: Engines: name -> ``module:function`` with :func:`partition_energy_records`'s signature.
ENGINES = {"vienna": "jaxrna.energy.partition_vienna:partition_records",
           "jax": "jaxrna.energy.partition_jax:partition_records"}


@dataclass(frozen=True)
class EnergyPartitionResult:
    """One record's ensemble in the energy model.

    ``energy``: the minimum free energy in integer dcal/mol (as
    :class:`~jaxrna.energy.api.EnergyFoldResult`); ``ensemble_energy``: the ensemble free energy
    in kcal/mol at full (double) precision; ``pair_i``, ``pair_j`` (1-based, ``i < j``, in order
    of ``i`` then ``j``) and ``pair_p``: every pair probability ``>= THRESHOLD``;
    ``ensemble_symbols``: RNAfold's pair-probability symbol string (the string ``pf()``
    returns); ``centroid_energy``, ``mea_energy``: those structures' free energies in kcal/mol
    (as RNAfold prints them); ``mea_*`` None without ``--mea``.
    """

    id: str
    sequence: str
    model: EnergyModel
    energy: int
    structure: str
    ensemble_energy: float
    ensemble_symbols: str
    pair_i: np.ndarray
    pair_j: np.ndarray
    pair_p: np.ndarray
    centroid: str
    centroid_distance: float
    centroid_energy: float
    mfe_frequency: float
    ensemble_diversity: float
    mea_structure: str | None = None
    mea: float | None = None
    mea_energy: float | None = None
    mea_gamma: float | None = None
    description: str = field(default="", compare=False)

    @property
    def length(self) -> int:
        return len(self.sequence)

    @property
    def temperature(self) -> float:
        """Celsius (the heat map's title)."""
        return self.model.temperature

    @property
    def kT(self) -> float:
        """kT in kcal/mol at the model's temperature."""
        return kT_of(self.model.temperature)

    @property
    def log_partition(self) -> float:
        """ln Z = -G / kT."""
        return log_partition(self.ensemble_energy, self.model.temperature)

    @property
    def probabilities(self) -> np.ndarray:
        """The ``n x n`` matrix of the kept pair probabilities (upper triangle, 0-based)."""
        P = np.zeros((self.length, self.length))
        P[self.pair_i - 1, self.pair_j - 1] = self.pair_p
        return P

    def pair_triples(self):
        """``(i, j, p)`` per kept pair, 1-based."""
        return zip(self.pair_i.tolist(), self.pair_j.tolist(), self.pair_p.tolist())

    @staticmethod
    def sparse(P: np.ndarray, threshold: float = THRESHOLD):
        """``(pair_i, pair_j, pair_p)`` of a dense matrix (its upper triangle, 0-based rows and
        columns), every ``p >= threshold``, 1-based."""
        P = np.triu(np.asarray(P, np.float64), 1)
        rows, cols = np.nonzero(P >= threshold)
        return (rows + 1).astype(np.int32), (cols + 1).astype(np.int32), P[rows, cols]

    @classmethod
    def from_matrix(cls, P: np.ndarray, **fields) -> "EnergyPartitionResult":
        """A result from a dense pair-probability matrix (a JAX engine's output)."""
        i, j, p = cls.sparse(P)
        return cls(pair_i=i, pair_j=j, pair_p=p, **fields)


def partition_energy_records(records: Iterable[Record], model: EnergyModel | None = None,
                             mea_gamma: float | None = None, max_bytes: int | None = None,
                             on_done=None, on_error=None, unpaired: dict | None = None,
                             processes: int | None = None, engine: str = "vienna",
                             backend: str | None = None) -> Iterator[EnergyPartitionResult]:
    """Ensembles of a stream of records in ``model``, in input order.

    ``mea_gamma``: also the MEA structure with this gamma (RNAfold ``--MEA``; None: not);
    ``max_bytes``: a record needing more memory raises
    :class:`~jaxrna.io.errors.ResourceError` or, with ``on_error(record, error)``, is skipped;
    ``on_done(k)`` reports progress; ``unpaired``: ``{record id: 0-based positions that must
    not pair}``; ``processes``: worker processes of a CPU engine (default: every core);
    ``engine``: a key of :data:`ENGINES`; ``backend``: the JAX backend of the JAX engine
    (``cpu`` or ``gpu``; None: JAX's default).
    """
    import importlib

    try:
        where = ENGINES[engine]
    except KeyError:
        raise ValueError(f"unknown partition engine {engine!r} (known: {', '.join(ENGINES)})") \
            from None
    module, name = where.split(":")
    run = getattr(importlib.import_module(module), name)
    extra = {"backend": backend} if backend is not None and engine == "jax" else {}
    return run(records, model or EnergyModel(), mea_gamma=mea_gamma, max_bytes=max_bytes,
               on_done=on_done, on_error=on_error, unpaired=unpaired, processes=processes,
               **extra)


def kT_of(temperature: float) -> float:
    """kT in kcal/mol (ViennaRNA's gas constant).

    >>> round(kT_of(37.0), 6)
    0.616321
    """
    from jaxrna.energy.boltzmann import kt

    return kt(temperature)


def log_partition(ensemble_energy: float, temperature: float) -> float:
    """ln Z from the ensemble free energy (kcal/mol) at ``temperature`` (Celsius)."""
    return -ensemble_energy / kT_of(temperature) if math.isfinite(ensemble_energy) else math.nan
