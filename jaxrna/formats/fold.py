"""Writers for folding results: dbn, ct, bpseq, tsv and json.

Each writer takes an iterable of :class:`~jaxrna.fold.api.FoldResult` (with pairs, except
``tsv`` and ``json``, which also accept score-only results) and a text handle, and streams.

>>> import io
>>> from jaxrna.fold.api import fold
>>> out = io.StringIO()
>>> write_dbn([fold("GGGAAAUCCC")], out)
>>> print(out.getvalue(), end="")
>seq
GGGAAAUCCC
(((...))). (3)
"""

from __future__ import annotations

import itertools
import json
from typing import IO, Callable, Iterable


def _partners(result) -> list[int]:
    partner = [0] * result.length
    for i, j in result.pairs:
        partner[i], partner[j] = j + 1, i + 1
    return partner


def write_dbn(results: Iterable, out: IO[str]) -> None:
    """``>id``, the sequence, then ``STRUCTURE (score)`` as RNAfold lays it out."""
    for r in results:
        out.write(f">{r.id}\n{r.sequence}\n{r.structure} ({r.score_text})\n")


def _label(result) -> str:
    """``score`` (Nussinov) or ``energy`` (``--model turner``, kcal/mol)."""
    return getattr(result, "score_label", "score")


def write_ct(results: Iterable, out: IO[str]) -> None:
    """Connectivity table: a header ``N  SCORE = s  id`` (``ENERGY = e`` for energies), then
    one line per base (index, base, previous, next, partner or 0, natural numbering)."""
    for r in results:
        n = r.length
        out.write(f"{n:>5}  {_label(r).upper()} = {r.score_text}  {r.id}\n")
        partner = _partners(r)
        for k in range(1, n + 1):
            nxt = k + 1 if k < n else 0
            out.write(f"{k:>5} {r.sequence[k - 1]} {k - 1:>5} {nxt:>5} {partner[k - 1]:>5} {k:>5}\n")


def write_bpseq(results: Iterable, out: IO[str]) -> None:
    """BPSEQ: ``# id`` and ``# score`` comment lines, then ``index base partner`` per base."""
    for r in results:
        out.write(f"# {r.id}\n# {_label(r)} = {r.score_text.strip()}\n")
        partner = _partners(r)
        for k in range(1, r.length + 1):
            out.write(f"{k} {r.sequence[k - 1]} {partner[k - 1]}\n")


def write_tsv(results: Iterable, out: IO[str]) -> None:
    """``#id  length  score  structure`` (tab-separated; ``energy`` for energies); structure
    ``-`` when not traced."""
    results = iter(results)
    first = next(results, None)
    out.write(f"#id\tlength\t{_label(first)}\tstructure\n")
    for r in itertools.chain([first] if first is not None else [], results):
        out.write(f"{r.id}\t{r.length}\t{r.score_text.strip()}\t{r.structure or '-'}\n")


def write_json(results: Iterable, out: IO[str]) -> None:
    """A JSON list, one object per record; pairs are 1-based ``[i, j]``."""
    out.write("[")
    first = True
    for r in results:
        if hasattr(r, "json_fields"):       # energy results describe themselves
            out.write(("\n  " if first else ",\n  ") + json.dumps(r.json_fields()))
            first = False
            continue
        obj = {"id": r.id, "length": r.length, "sequence": r.sequence, "score": r.score,
               "weights": r.weights.describe(), "min_loop": r.min_loop}
        if r.pairs is not None:
            obj["structure"] = r.structure
            obj["pairs"] = [[i + 1, j + 1] for i, j in r.pairs]
        out.write(("\n  " if first else ",\n  ") + json.dumps(obj))
        first = False
    out.write("\n]\n" if not first else "]\n")


WRITERS: dict[str, Callable[[Iterable, IO[str]], None]] = {
    "dbn": write_dbn, "ct": write_ct, "bpseq": write_bpseq, "tsv": write_tsv, "json": write_json,
}
#: Formats that can be written without a traceback.
SCORE_ONLY_FORMATS = ("tsv", "json")
