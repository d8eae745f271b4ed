"""Writers for pairwise alignments: pair (EMBOSS-like), tsv and json.

Each writer takes an iterable of :class:`~jaxrna.align.api.Alignment` and a text handle and
streams. ``tsv`` and ``json`` also take score-only results (unknown fields ``*`` / null).
Coordinates are 1-based and inclusive; an empty local alignment has all four at 0.

>>> import io
>>> from jaxrna.align.api import align
>>> out = io.StringIO()
>>> write_tsv([align("GATTACA", "GATCA", match=1, mismatch=-1, gap_open=2, gap_extend=1)], out)
>>> print(out.getvalue(), end="")  # doctest: +NORMALIZE_WHITESPACE
#query_id	target_id	score	query_start	query_end	target_start	target_end	cigar	identity
query1	target1	2	1	7	1	5	3=2I2=	71.43
"""

from __future__ import annotations

import json
from typing import IO, Callable, Iterable

import numpy as np

from jaxrna.align.text import (RULE, TSV_COLUMNS, WIDTH, end_gaps_line, number,
                               parameter_lines, pct)


def identity_text(aln) -> str:
    """Identical columns as a percentage of the alignment length, 2 decimals at most."""
    st = aln.stats()
    if not st["length"]:
        return "0"
    text = f"{100 * st['identical'] / st['length']:.2f}".rstrip("0").rstrip(".")
    return text


def _coords(aln) -> tuple:
    """1-based inclusive (query_start, query_end, target_start, target_end); None = unknown."""
    if aln.ops == "" or (aln.query_end == 0 and aln.target_end == 0):
        return 0, 0, 0, 0
    qs = None if aln.query_start is None else aln.query_start + 1
    ts = None if aln.target_start is None else aln.target_start + 1
    return qs, aln.query_end, ts, aln.target_end


def write_pair(results: Iterable, out: IO[str]) -> None:
    """Blocks in the layout of EMBOSS needle/water's ``pair`` format: parameters, length,
    identity, similarity, gaps and score, then the alignment in rows of 50 columns with ``|``
    identical, ``:`` positive score, ``.`` other pairs. Read back by Biopython's
    ``Bio.Align.parse(path, "emboss")``.

    A row that is all gaps in a block is numbered as EMBOSS numbers it: the next position,
    then the previous end (``13 ---- 12``). The edit preset's ``Score`` is the edit cost (as in
    the tsv and json formats; the header says ``Objective: minimise cost``). An empty local
    alignment (no pair scores above 0), which EMBOSS never writes (water shows its best
    column, even a negative one), is written as one gap-against-gap column (``Length: 1``,
    ``Score: 0``, rows ``1 - 0``): the smallest block that the EMBOSS readers accept, which
    Biopython reads as the empty alignment. One layout Biopython (1.88) misreads, from EMBOSS
    as from jaxrna: a row whose first block holding any of its letters holds exactly one
    (``5 A 5``), which it takes for the reverse strand. Free end gaps (or end gaps with
    penalties of their own) are named in the file's header (``# End_gaps: free``); the
    alignment still spans both sequences, its end gaps written as gap columns, as needle does.
    """
    first = True
    for aln in results:
        if aln.ops is None:
            raise ValueError("the pair format needs alignments, not scores only")
        if first:
            objective = ("# Objective: minimise cost (Score is the cost)\n"
                         if aln.scoring.minimise else "")
            out.write("#" * 40 + "\n# Program: jaxrna align\n"
                      f"# Mode: {aln.mode}\n{end_gaps_line(aln.scoring)}{objective}"
                      "# Align_format: pair\n" + "#" * 40 + "\n\n")
            first = False
        st = aln.stats()
        n = st["length"]
        if not n:  # the empty alignment: one gap-against-gap column
            st = dict(st, length=1, gaps=1)
        shown = st["length"]
        out.write(f"{RULE}\n#\n# Aligned_sequences: 2\n# 1: {aln.query_id}\n# 2: {aln.target_id}\n")
        out.write("\n".join(parameter_lines(aln)) + "\n#\n")
        out.write(f"# Length: {shown}\n"
                  f"# Identity:   {st['identical']:>7}/{shown} ({pct(st['identical'], shown)})\n"
                  f"# Similarity: {st['similar']:>7}/{shown} ({pct(st['similar'], shown)})\n"
                  f"# Gaps:       {st['gaps']:>7}/{shown} ({pct(st['gaps'], shown)})\n"
                  f"# Score: {aln.score_text}\n#\n#\n{RULE}\n\n")
        if n:
            _write_rows(aln, out)
        else:
            qname, tname = aln.query_id[:13], aln.target_id[:13]
            out.write(f"{qname:<13} {1:>6} - {0:>6}\n{'':<13} {'':>6}  \n"
                      f"{tname:<13} {1:>6} - {0:>6}\n\n\n")
    if not first:
        out.write("#" + "-" * 39 + "\n")


def _write_rows(aln, out: IO[str]) -> None:
    qa, ta = aln.columns()
    ops, qm, tm = aln.pair_codes()
    pair_marks = np.where(qm == tm, ord("|"), np.where(aln.scoring.matrix[qm, tm] > 0,
                                                       ord(":"), ord(".")))
    marks = np.full(ops.size, ord(" "), np.uint8)
    marks[ops == ord("M")] = pair_marks
    marks = marks.tobytes().decode()
    qpos, tpos = aln.query_start, aln.target_start
    qname, tname = aln.query_id[:13], aln.target_id[:13]
    for s in range(0, len(qa), WIDTH):
        qs, ts = qa[s:s + WIDTH], ta[s:s + WIDTH]
        qn = len(qs) - qs.count("-")
        tn = len(ts) - ts.count("-")
        # a row of gaps only shows the next position, then the previous end (as EMBOSS does)
        out.write(f"{qname:<13} {qpos + 1:>6} {qs} {qpos + qn:>6}\n")
        out.write(f"{'':<13} {'':>6} {marks[s:s + WIDTH]}\n")
        out.write(f"{tname:<13} {tpos + 1:>6} {ts} {tpos + tn:>6}\n\n")
        qpos, tpos = qpos + qn, tpos + tn
    out.write("\n")


def write_tsv(results: Iterable, out: IO[str]) -> None:
    """A ``#`` header line, then one row per pair (``*`` where a score-only run cannot know)."""
    out.write("#" + "\t".join(TSV_COLUMNS) + "\n")
    for aln in results:
        coords = ["*" if c is None else str(c) for c in _coords(aln)]
        if aln.ops is None:
            cigar = ident = "*"
        else:
            cigar, ident = aln.cigar, identity_text(aln)
        out.write("\t".join([aln.query_id, aln.target_id, aln.score_text, *coords, cigar, ident])
                  + "\n")


def write_json(results: Iterable, out: IO[str]) -> None:
    """A JSON list, one object per pair: ids, mode, scoring, score (the cost for the edit
    preset), 1-based coordinates, CIGAR, statistics and the aligned rows."""
    out.write("[")
    first = True
    for aln in results:
        qs, qe, ts, te = _coords(aln)
        obj = {"query_id": aln.query_id, "target_id": aln.target_id, "mode": aln.mode,
               **{k: (number(v) if k != "scoring" else v)
                  for k, v in aln.scoring.describe().items()},
               "objective": "minimise cost" if aln.scoring.minimise else "maximise score",
               "score": aln.score, "query_start": qs, "query_end": qe,
               "target_start": ts, "target_end": te}
        if aln.ops is not None:
            st = aln.stats()
            qa, ta = aln.columns()
            obj.update(cigar=aln.cigar, identity=number(identity_text(aln)), **st,
                       query_aligned=qa, target_aligned=ta)
        out.write(("\n  " if first else ",\n  ") + json.dumps(obj))
        first = False
    out.write("\n]\n" if not first else "]\n")


WRITERS: dict[str, Callable[[Iterable, IO[str]], None]] = {
    "pair": write_pair, "tsv": write_tsv, "json": write_json,
}
#: Formats that can be written without a traceback.
SCORE_ONLY_FORMATS = ("tsv", "json")
