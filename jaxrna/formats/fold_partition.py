"""Writers for base-pair probabilities (``jaxrna fold --partition``): JSON, a dot-plot text and
PNG heat maps.

Each text writer takes an iterable of :class:`~jaxrna.fold.partition.PartitionResult` and a
text handle, and streams. Pairs are 1-based ``i < j``, sorted by ``i`` then ``j``; every
probability ``p >= 1e-6`` is listed (6 significant digits).

>>> import io
>>> from jaxrna.fold.partition import partition
>>> r = partition("GGGAAAUCC", "unit", min_loop=3, id="s1")
>>> out = io.StringIO()
>>> write_dotplot([r], out)
>>> print("".join(out.getvalue().splitlines(True)[:4]), end="")
# s1 9 4.718959286
1 7 0.0242592
1 8 0.156146
1 9 0.467285
>>> obj = json.loads(_json_text([r]))[0]
>>> obj["id"], obj["length"], obj["pair_probabilities"][2]
('s1', 9, [1, 9, 0.467285])
"""

from __future__ import annotations

import io
import json
import logging
from typing import IO, Callable, Iterable, Iterator

import numpy as np

from jaxrna.formats.heatmap import PLOT_HINT, plot_paths, pyplot, save_png

#: Probabilities below this are left out of the text outputs.
THRESHOLD = 1e-6
#: Heat maps of longer sequences are max-pooled to at most this many pixels a side.
PLOT_PIXELS = 1000

log = logging.getLogger("jaxrna")

__all__ = ["write_json", "write_dotplot", "writer_for", "write_png", "plot_paths", "plotting",
           "PLOT_HINT", "THRESHOLD"]


def _p(value: float) -> float:
    return float(f"{value:.6g}")


def _log_z(value: float) -> float:
    return float(f"{value:.10g}")


def write_json(results: Iterable, out: IO[str]) -> None:
    """A JSON list, one object per record: ``id``, ``length``, ``temperature``, ``weights``,
    ``min_loop``, ``log_partition`` and ``pair_probabilities`` as ``[i, j, p]`` triples."""
    out.write("[")
    first = True
    for r in results:
        obj = {"id": r.id, "length": r.length, "temperature": r.temperature,
               "weights": r.weights.describe() if r.weights is not None else None,
               "min_loop": r.min_loop, "log_partition": _log_z(r.log_partition),
               "pair_probabilities": [[i, j, _p(p)] for i, j, p in r.triples(THRESHOLD)]}
        out.write(("\n  " if first else ",\n  ") + json.dumps(obj))
        first = False
    out.write("\n]\n" if not first else "]\n")


def _json_text(results) -> str:
    buf = io.StringIO()
    write_json(results, buf)
    return buf.getvalue()


def write_dotplot(results: Iterable, out: IO[str]) -> None:
    """Per record a header ``# ID LENGTH LOG_PARTITION``, then ``i j p`` lines."""
    for r in results:
        out.write(f"# {r.id} {r.length} {_log_z(r.log_partition)!r}\n")
        out.write("".join(f"{i} {j} {p:.6g}\n" for i, j, p in r.triples(THRESHOLD)))


WRITERS: dict[str, Callable[[Iterable, IO[str]], None]] = {
    "json": write_json, "dotplot": write_dotplot,
}


def writer_for(fmt: str) -> Callable[[Iterable, IO[str]], None]:
    """JSON for ``json``; the dot-plot text for every other format."""
    return WRITERS["json" if fmt == "json" else "dotplot"]


def _pooled(P: np.ndarray, pixels: int) -> tuple[np.ndarray, int]:
    """The symmetric matrix max-pooled by an integer factor to at most ``pixels`` a side."""
    n = P.shape[0]
    full = np.maximum(P, P.T)
    f = max(1, -(-n // pixels))
    if f == 1:
        return full, 1
    m = -(-n // f) * f
    pad = np.zeros((m, m))
    pad[:n, :n] = full
    return pad.reshape(m // f, f, m // f, f).max(axis=(1, 3)), f


def write_png(result, path: str) -> None:
    """One record's pair probabilities as a symmetric heat map (darker = more likely, on a
    square-root colour scale so that weak pairs show)."""
    plt = pyplot()
    n = result.length
    image, f = _pooled(result.probabilities, PLOT_PIXELS)
    fig, ax = plt.subplots(figsize=(7.2, 6.0))
    from matplotlib.colors import PowerNorm

    shown = ax.imshow(image, cmap="Greys", norm=PowerNorm(0.5, vmin=0.0, vmax=1.0),
                      interpolation="nearest", extent=(0.5, n + 0.5, n + 0.5, 0.5))
    ax.set_xlabel("position j")
    ax.set_ylabel("position i")
    pooled = f" (max over {f}x{f} blocks)" if f > 1 else ""
    ax.set_title(f"{result.id}: pair probabilities, T = {result.temperature:g}, "
                 f"ln Z = {result.log_partition:.6g}{pooled}", fontsize=9)
    fig.colorbar(shown, ax=ax, label="P(i pairs with j), square-root scale")
    save_png(fig, path)


def plotting(results: Iterable, paths: dict[str, str]) -> Iterator:
    """Pass ``results`` through, writing each one's heat map to ``paths[result.id]`` (see
    :func:`plot_paths`: ``FILE.png`` for one record, ``FILE_K.png`` for the K-th of several,
    K counting input records, so a record left out leaves its number unused)."""
    for r in results:
        write_png(r, paths[r.id])
        log.info("wrote %s", paths[r.id])
        yield r
