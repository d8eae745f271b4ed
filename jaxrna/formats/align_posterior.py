"""Writers for alignment match posteriors (``jaxrna align --posterior``): JSON, a dot-plot
text and PNG heat maps.

Each text writer takes an iterable of :class:`~jaxrna.align.partition.Posterior` and a text
handle, and streams. Positions are 1-based; every probability ``p >= 1e-6`` is listed,
row-major (query position, then target position).

>>> import io
>>> from jaxrna.align.partition import Posterior
>>> P = np.array([[0.97, 0.02, 0.0], [1e-7, 0.5, 0.25]])
>>> out = io.StringIO()
>>> write_dotplot([Posterior("q1", "t1", "global", 1.0, 2.5, P)], out)
>>> print(out.getvalue(), end="")
# q1 t1 2.5
1 1 0.97
1 2 0.02
2 2 0.5
2 3 0.25
>>> out = io.StringIO()
>>> write_json([Posterior("q1", "t1", "local", 1.0, 2.5, P)], out)
>>> json.loads(out.getvalue())[0]["match_probabilities"]
[[1, 1, 0.97], [1, 2, 0.02], [2, 2, 0.5], [2, 3, 0.25]]
"""

from __future__ import annotations

import json
import logging
from typing import IO, Callable, Iterable, Iterator

import numpy as np

from jaxrna.formats.fold_partition import text_of_triples
from jaxrna.formats.heatmap import pyplot, save_png

#: Probabilities below this are left out of the text outputs.
THRESHOLD = 1e-6

log = logging.getLogger("jaxrna")


def triples(P: np.ndarray, threshold: float = THRESHOLD) -> list[tuple[int, int, float]]:
    """``(i, j, p)`` for every ``P[i - 1, j - 1] >= threshold``, 1-based, row-major.

    >>> triples(np.array([[0.9, 0.0], [1e-7, 0.5]]))
    [(1, 1, 0.9), (2, 2, 0.5)]
    """
    i, j, p = _triples(P, threshold)
    return list(zip(i.tolist(), j.tolist(), p.tolist()))


def _log_z(value: float) -> float:
    return float(f"{value:.10g}")


def write_json(results: Iterable, out: IO[str]) -> None:
    """A JSON list, one object per pair: ``query_id``, ``target_id``, ``mode``,
    ``temperature``, ``query_length``, ``target_length``, ``log_partition`` and
    ``match_probabilities`` as ``[i, j, p]`` triples (``p`` to 6 significant digits)."""
    out.write("[")
    first = True
    for r in results:
        m, n = r.probabilities.shape
        obj = {"query_id": r.query_id, "target_id": r.target_id, "mode": r.mode,
               "temperature": r.temperature, "query_length": m, "target_length": n,
               "log_partition": _log_z(r.log_partition)}
        # what json.dumps writes for the whole object, the triples built with array operations
        head = json.dumps(obj)[:-1]
        out.write(("\n  " if first else ",\n  ") + head + ', "match_probabilities": [')
        out.write(text_of_triples(*_triples(r.probabilities), "json"))
        out.write("]}")
        first = False
    out.write("\n]\n" if not first else "]\n")


def write_dotplot(results: Iterable, out: IO[str]) -> None:
    """Per pair a header ``# QUERY_ID TARGET_ID LOG_PARTITION``, then ``i j p`` lines."""
    for r in results:
        out.write(f"# {r.query_id} {r.target_id} {_log_z(r.log_partition)!r}\n")
        out.write(text_of_triples(*_triples(r.probabilities), "dotplot"))


def _triples(P: np.ndarray, threshold: float = THRESHOLD):
    """:func:`triples` as arrays ``(i, j, p)`` (1-based, row-major; ``p`` as float64, chosen
    by comparing in ``P``'s own type: a float32 matrix's 1e-6 is kept)."""
    P = np.asarray(P)
    rows, cols = np.nonzero(P >= threshold)
    return rows + 1, cols + 1, P[rows, cols].astype(np.float64)


WRITERS: dict[str, Callable[[Iterable, IO[str]], None]] = {
    "json": write_json, "dotplot": write_dotplot,
}


def writer_for(fmt: str) -> Callable[[Iterable, IO[str]], None]:
    """JSON for ``json``; the dot-plot text for every other format."""
    return WRITERS["json" if fmt == "json" else "dotplot"]


# -------------------------------------------------------------------------------------
# PNG heat maps (matplotlib, the optional extra ``plot``)


def write_png(result, path: str) -> None:
    """One pair's match probabilities as a heat map (query down, target across)."""
    plt = pyplot()
    P = result.probabilities
    m, n = P.shape
    side = 6.0
    fig, ax = plt.subplots(figsize=(side * min(2.0, max(0.5, n / max(m, 1))) + 1.2, side))
    image = ax.imshow(P, cmap="Greys", vmin=0.0, vmax=1.0, interpolation="nearest",
                      aspect="auto", extent=(0.5, n + 0.5, m + 0.5, 0.5))
    ax.set_xlabel(f"{result.target_id} (target position)")
    ax.set_ylabel(f"{result.query_id} (query position)")
    ax.set_title(f"match probabilities, {result.mode}, T = {result.temperature:g}, "
                 f"ln Z = {result.log_partition:.6g}", fontsize=9)
    fig.colorbar(image, ax=ax, label="P(query i aligned to target j)")
    save_png(fig, path)


def plotting(results: Iterable, paths: list[str]) -> Iterator:
    """Pass ``results`` through, writing each one's heat map to the next of ``paths``."""
    for r, path in zip(results, paths):
        write_png(r, path)
        log.info("wrote %s", path)
        yield r
