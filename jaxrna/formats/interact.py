"""Writers for RNA-RNA interaction results: tsv, dbn and json, plus the all-windows table.

Each writer takes an iterable of :class:`~jaxrna.interact.results.InteractResult` and a text
handle, and streams. Positions are 1-based on each strand read 5'->3'. In structures,
intramolecular pairs are ``()`` and an intermolecular pair is ``[`` on strand 1 and ``]`` on
strand 2 (the joint structure ``s1&s2`` reads as one dot-bracket of the two strands joined).
When a window was asked for, every column refers to the best window (``start``/``end``).

>>> import io
>>> from jaxrna.interact.api import interact
>>> r = interact("UCGCUGCU", "GUCGGA")
>>> out = io.StringIO()
>>> write_dbn([r], out)
>>> print(out.getvalue(), end="")
>seq1&seq2 S1=3 S2=1
UCGCUGCU&GUCGGA
.[([.[)[&](]]]) (14.5)
"""

from __future__ import annotations

import json
from typing import IO, Callable, Iterable

from jaxrna.interact.pairs import pair_weight_of

TSV_HEADER = "#id1\tid2\tscore\ts1_score\ts2_score\tstructure\tstart1\tend1\tstart2\tend2\n"


def _windows_text(r) -> str:
    return (f" window1={r.window1[0] + 1}-{r.window1[1] + 1}"
            f" window2={r.window2[0] + 1}-{r.window2[1] + 1}") if r.windowed else ""


def write_tsv(results: Iterable, out: IO[str]) -> None:
    """One line per pair: ids, the score, S1 and S2 of the (windowed) strands, the joint
    structure (``-`` without a traceback) and the window's 1-based coordinates."""
    out.write(TSV_HEADER)
    for r in results:
        out.write(f"{r.id1}\t{r.id2}\t{r.score_text}\t{r.text(r.s1_units)}\t{r.text(r.s2_units)}\t"
                  f"{r.dotbracket or '-'}\t{r.window1[0] + 1}\t{r.window1[1] + 1}\t"
                  f"{r.window2[0] + 1}\t{r.window2[1] + 1}\n")


def write_dbn(results: Iterable, out: IO[str]) -> None:
    """``>id1&id2 S1=.. S2=..`` (and the windows), ``seq1&seq2``, ``struct1&struct2 (score)``."""
    for r in results:
        out.write(f">{r.id1}&{r.id2} S1={r.text(r.s1_units)} S2={r.text(r.s2_units)}"
                  f"{_windows_text(r)}\n{r.subsequence1}&{r.subsequence2}\n"
                  f"{r.dotbracket} ({r.score_text})\n")


def _pair_json(r, p) -> dict:
    w = pair_weight_of(p, r.sequence1, r.sequence2, r.weights)
    return {"kind": p.kind, "i": p.i + 1, "j": p.j + 1, "weight": r.value(w)}


def write_json(results: Iterable, out: IO[str]) -> None:
    """A JSON list, one object per pair. ``pairs`` (with a traceback) lists ``kind``
    (``intra1``: i, j on strand 1; ``intra2``: i, j on strand 2; ``inter``: i on strand 1,
    j on strand 2), 1-based positions and the pair's weight."""
    out.write("[")
    first = True
    for r in results:
        obj = {"id1": r.id1, "id2": r.id2, "length1": len(r.sequence1),
               "length2": len(r.sequence2), "score": r.score, "s1_score": r.s1_score,
               "s2_score": r.s2_score, "weights": r.weights.describe(),
               "window1": [r.window1[0] + 1, r.window1[1] + 1],
               "window2": [r.window2[0] + 1, r.window2[1] + 1],
               "sequence1": r.subsequence1, "sequence2": r.subsequence2}
        if r.pairs is not None:
            obj["structure"] = r.dotbracket
            obj["pairs"] = [_pair_json(r, p) for p in r.pairs]
        out.write(("\n  " if first else ",\n  ") + json.dumps(obj))
        first = False
    out.write("\n]\n" if not first else "]\n")


def write_windows_header(out: IO[str]) -> None:
    out.write("#id1\tid2\tstart1\tend1\tstart2\tend2\tscore\n")


def write_window_rows(r, out: IO[str]) -> None:
    """One result's windows (computed with ``keep_windows``), by strand-1 then strand-2 start."""
    l1 = r.window1[1] - r.window1[0] + 1
    l2 = r.window2[1] - r.window2[0] + 1
    for a in range(r.windows.shape[0]):
        head = f"{r.id1}\t{r.id2}\t{a + 1}\t{a + l1}\t"
        out.write("".join(f"{head}{b + 1}\t{b + l2}\t{r.text(v)}\n"
                          for b, v in enumerate(r.windows[a])))


def write_windows(results: Iterable, out: IO[str]) -> None:
    """Every window's score: ``#id1 id2 start1 end1 start2 end2 score``, 1-based."""
    write_windows_header(out)
    for r in results:
        write_window_rows(r, out)


WRITERS: dict[str, Callable[[Iterable, IO[str]], None]] = {
    "tsv": write_tsv, "dbn": write_dbn, "json": write_json,
}
#: Formats that can be written without a traceback.
SCORE_ONLY_FORMATS = ("tsv", "json")
