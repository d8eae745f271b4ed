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
           "PLOT_HINT", "THRESHOLD", "text_of_triples", "triples_text"]


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
               "min_loop": r.min_loop, "log_partition": _log_z(r.log_partition)}
        head = json.dumps(obj)[:-1]
        out.write(("\n  " if first else ",\n  ") + head + ', "pair_probabilities": [')
        out.write(triples_text(r.probabilities, "json"))
        out.write("]}")
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
        out.write(triples_text(r.probabilities, "dotplot"))


# ------------------------------------------------------------------------------------------
# the triples as text, with array operations (a 2,000-nt ensemble has ~750,000 of them)


def _digit_tables() -> tuple[np.ndarray, np.ndarray]:
    """ASCII digits of 0..999: zero-padded to 3, and right-aligned with 0 for leading zeros."""
    k = np.arange(1000)
    pad = np.stack([k // 100, k // 10 % 10, k % 10], axis=1).astype(np.uint8) + 48
    lead = pad.copy()
    lead[k < 100, 0] = 0
    lead[k < 10, 1] = 0
    return pad, lead


_PAD3, _LEAD3 = _digit_tables()


def _digits(x: np.ndarray, width: int) -> np.ndarray:
    """``(len(x), width)`` ASCII digits of non-negative ints below ``10^width``, right-aligned,
    leading positions 0 (dropped later)."""
    x = np.asarray(x, np.int64)
    if width <= 3:
        return _LEAD3[x][:, 3 - width:]
    hi, lo = np.divmod(x, 1000)
    head = np.where((hi > 0)[:, None], _digits(hi, width - 3), 0)
    tail = np.where((hi > 0)[:, None], _PAD3[lo], _LEAD3[lo])
    return np.concatenate([head, tail], axis=1)


def _mantissa(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(m, e)``: ``p`` (positive, finite) rounded to 6 significant digits is ``m * 10^(e-5)``,
    ``100000 <= m < 10^6``, exactly as C's ``%.5e`` rounds (values within float error of a
    rounding tie are done by Python's formatting)."""
    e = np.floor(np.log10(p)).astype(np.int64)
    for _ in range(2):
        s = p * np.power(10.0, 5 - e)
        e = e + (s >= 999999.5) - (s < 99999.5)
    s = p * np.power(10.0, 5 - e)
    m = np.rint(s).astype(np.int64)
    frac = s - np.floor(s)
    doubt = np.flatnonzero((np.abs(frac - 0.5) < 1e-7) | (m < 100000) | (m > 999999))
    for k in doubt.tolist():
        text = f"{float(p[k]):.5e}"
        mant, exp = text.split("e")
        m[k] = int(mant.replace(".", ""))
        e[k] = int(exp)
    return m, e


def _g6(p: np.ndarray, json_float: bool) -> np.ndarray | None:
    """``%.6g`` of each ``p`` in ``[1e-6, 10)`` as a ``(len(p), 11)`` byte matrix (0 =
    nothing); ``json_float`` writes what ``json.dumps(float('%.6g' % p))`` writes (``1.0``,
    not ``1``). None if some value is outside that range."""
    if not len(p):
        return np.zeros((0, 11), np.uint8)
    if not (np.isfinite(p).all() and (p > 0).all()):
        return None
    m, e = _mantissa(p)
    if e.min() < -6 or e.max() > 0:
        return None
    d = _digits(m, 6)                                   # 6 digits, no leading zero (m >= 1e5)
    nz = np.zeros(len(m), np.int64)                     # trailing zeros of m (at most 5)
    for k in range(1, 6):
        nz += (m % 10 ** k == 0)
    out = np.zeros((len(p), 11), np.uint8)
    keep = np.arange(6)[None, :] < (6 - nz)[:, None]    # digits kept after stripping zeros
    for ev in range(-6, 1):
        rows = np.flatnonzero(e == ev)
        if not len(rows):
            continue
        dr, kr, nzr = d[rows], keep[rows], nz[rows]
        block = np.zeros((len(rows), 11), np.uint8)
        if ev >= -4:                                    # fixed: "0.000" ... then the digits
            if ev == 0:
                block[:, 0] = dr[:, 0]
                block[:, 1] = np.where(nzr < 5, 46, 0)  # "." only before kept digits
                block[:, 2:7] = np.where(kr[:, 1:], dr[:, 1:], 0)
                if json_float:
                    whole = nzr == 5
                    block[whole, 1], block[whole, 2] = 46, 48        # "1.0"
            else:
                lead = 1 - ev                           # "0." and -ev - 1 zeros
                block[:, 0], block[:, 1] = 48, 46
                block[:, 2:lead] = 48
                block[:, lead:lead + 6] = np.where(kr, dr, 0)
        else:                                           # exponent: d.ddddde-0X
            block[:, 0] = dr[:, 0]
            block[:, 1] = np.where(nzr < 5, 46, 0)
            block[:, 2:7] = np.where(kr[:, 1:], dr[:, 1:], 0)
            block[:, 7:10] = np.frombuffer(b"e-0", np.uint8)
            block[:, 10] = 48 - ev
        out[rows] = block
    return out


def _triples(P: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    P = np.triu(np.asarray(P, np.float64), 1)
    rows, cols = np.nonzero(P >= threshold)
    return rows + 1, cols + 1, P[rows, cols]


def triples_text(P: np.ndarray, style: str, threshold: float = THRESHOLD) -> str:
    """The pairs ``i < j`` (1-based, row-major) with ``p >= threshold`` as text: ``dotplot``
    lines ``"i j p\\n"`` (``p`` as ``%.6g``) or ``json`` items ``[i, j, p]`` joined by ``, ``
    (``p`` as :func:`json.dumps` writes ``float('%.6g' % p)``). Byte for byte what the
    per-triple formatting writes, built with array operations.

    >>> P = np.zeros((4, 4)); P[0, 3], P[1, 2], P[0, 1] = 0.5, 1.0, 1.5e-5
    >>> triples_text(P, "dotplot")
    '1 2 1.5e-05\\n1 4 0.5\\n2 3 1\\n'
    >>> triples_text(P, "json")
    '[1, 2, 1.5e-05], [1, 4, 0.5], [2, 3, 1.0]'
    """
    return text_of_triples(*_triples(P, threshold), style)


def text_of_triples(i: np.ndarray, j: np.ndarray, p: np.ndarray, style: str) -> str:
    """:func:`triples_text` of given triples (1-based ``i``, ``j``; probabilities ``p``), in
    their order (``jaxrna align --posterior`` writes every ``(i, j)`` of its matrices).

    >>> text_of_triples(np.array([2, 1]), np.array([1, 3]), np.array([0.25, 1.0]), "json")
    '[2, 1, 0.25], [1, 3, 1.0]'
    """
    if not len(p):
        return ""
    g = _g6(p, style == "json")
    if g is None:                                       # outside the fast path's range
        if style == "json":
            return ", ".join(json.dumps([int(a), int(b), _p(c)]) for a, b, c in zip(i, j, p))
        return "".join(f"{a} {b} {c:.6g}\n" for a, b, c in zip(i, j, p))
    width = len(str(int(max(i.max(), j.max()))))
    parts = [_digits(i, width), _digits(j, width), g]
    n = len(p)
    if style == "json":
        cols = [np.full((n, 1), 91, np.uint8), parts[0], np.tile(np.frombuffer(b", ", np.uint8),
                (n, 1)), parts[1], np.tile(np.frombuffer(b", ", np.uint8), (n, 1)), parts[2],
                np.tile(np.frombuffer(b"], ", np.uint8), (n, 1))]
    else:
        space = np.full((n, 1), 32, np.uint8)
        cols = [parts[0], space, parts[1], space, parts[2], np.full((n, 1), 10, np.uint8)]
    flat = np.concatenate(cols, axis=1).ravel()
    text = flat[flat != 0].tobytes().decode("ascii")
    return text[:-2] if style == "json" else text


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
