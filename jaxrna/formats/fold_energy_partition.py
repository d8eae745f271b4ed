"""Writers for the energy model's ensembles (``jaxrna fold --model turner --partition``): dbn in
RNAfold -p's layout, JSON, and the dot-plot text (PNG heat maps: :mod:`jaxrna.formats.fold_partition`).

Each writer takes an iterable of :class:`~jaxrna.energy.ensemble.EnergyPartitionResult` and a
text handle, and streams.

``dbn``, per record as RNAfold -p (and ``--MEA``) prints it to a file or pipe::

    >ID
    SEQUENCE
    MFE_STRUCTURE (MFE)
    PAIR_SYMBOLS [ENSEMBLE_ENERGY]
    CENTROID {ENERGY d=DISTANCE}
    MEA_STRUCTURE {ENERGY MEA=MEA}                  (with --mea)
     frequency of mfe structure in ensemble F; ensemble diversity D

energies as ``%6.2f`` (the ensemble energy as RNAfold's single-precision value), ``F`` as
``%g`` and ``D`` as ``%-6.2f``. ``json``: a list with one object per record, the keys ``id``,
``length``, ``sequence``, ``energy`` (kcal/mol, two decimals), ``structure``,
``ensemble_energy`` (kcal/mol, full precision), ``pair_probabilities`` (``[i, j, p]``, 1-based,
``i < j``, every ``p >= 1e-6``, ``p`` to 6 significant digits), ``centroid``,
``centroid_distance``, ``mfe_frequency``, ``ensemble_diversity`` and, with ``--mea``,
``mea_structure`` and ``mea``. The dot-plot text (every other format): per record
``# ID LENGTH ENSEMBLE_ENERGY``, then ``i j p`` lines as for the Nussinov ensemble.

>>> import io
>>> from jaxrna.energy.ensemble import partition_energy_records
>>> from jaxrna.io.fasta import Record
>>> rs = list(partition_energy_records([Record("s1", "GGGGAAACCCC")], processes=1))
>>> out = io.StringIO()
>>> write_dbn(rs, out)
>>> print(out.getvalue(), end="")
>s1
GGGGAAACCCC
((((...)))) ( -4.50)
((({...)))} [ -4.87]
((((...)))) { -4.50 d=2.98}
 frequency of mfe structure in ensemble 0.545595; ensemble diversity 3.53  
"""

from __future__ import annotations

import json
from typing import IO, Callable, Iterable

import numpy as np

from jaxrna.formats.fold_partition import plot_paths, plotting, triples_text

__all__ = ["write_dbn", "write_json", "write_dotplot", "writer_for", "plot_paths", "plotting"]


def _single(value: float) -> float:
    """``value`` as the C float ViennaRNA returns it (what RNAfold formats)."""
    return float(np.float32(value))


def write_dbn(results: Iterable, out: IO[str]) -> None:
    """RNAfold -p's layout (see the module's docstring)."""
    for r in results:
        lines = [f">{r.id}", r.sequence, f"{r.structure} ({r.energy / 100:6.2f})",
                 f"{r.ensemble_symbols} [{_single(r.ensemble_energy):6.2f}]",
                 f"{r.centroid} {{{r.centroid_energy:6.2f} d={r.centroid_distance:.2f}}}"]
        if r.mea_structure is not None:
            lines.append(f"{r.mea_structure} {{{r.mea_energy:6.2f} MEA={r.mea:.2f}}}")
        lines.append(" frequency of mfe structure in ensemble %g; ensemble diversity %-6.2f"
                     % (r.mfe_frequency, r.ensemble_diversity))
        out.write("\n".join(lines) + "\n")


def _head(r) -> dict:
    return {"id": r.id, "length": r.length, "sequence": r.sequence,
            "energy": round(r.energy / 100, 2), "structure": r.structure,
            "ensemble_energy": float(r.ensemble_energy)}


def _tail(r) -> dict:
    obj = {"centroid": r.centroid, "centroid_distance": float(r.centroid_distance),
           "mfe_frequency": float(r.mfe_frequency),
           "ensemble_diversity": float(r.ensemble_diversity)}
    if r.mea_structure is not None:
        obj.update(mea_structure=r.mea_structure, mea=float(r.mea))
    return obj


def write_json(results: Iterable, out: IO[str]) -> None:
    """A JSON list, one object per record (keys in the module's docstring)."""
    out.write("[")
    first = True
    for r in results:
        head = json.dumps(_head(r))[:-1]
        tail = json.dumps(_tail(r))[1:]
        out.write(("\n  " if first else ",\n  ") + head + ', "pair_probabilities": [')
        out.write(triples_text(r.probabilities, "json"))
        out.write("], " + tail)
        first = False
    out.write("\n]\n" if not first else "]\n")


def write_dotplot(results: Iterable, out: IO[str]) -> None:
    """Per record ``# ID LENGTH ENSEMBLE_ENERGY`` (kcal/mol, full precision), then ``i j p``."""
    for r in results:
        out.write(f"# {r.id} {r.length} {float(r.ensemble_energy)!r}\n")
        out.write(triples_text(r.probabilities, "dotplot"))


WRITERS: dict[str, Callable[[Iterable, IO[str]], None]] = {
    "dbn": write_dbn, "json": write_json, "dotplot": write_dotplot,
}


def writer_for(fmt: str) -> Callable[[Iterable, IO[str]], None]:
    """RNAfold -p's layout for ``dbn``, JSON for ``json``, the dot-plot text for the others."""
    return WRITERS.get(fmt, write_dotplot)
