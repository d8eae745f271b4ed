"""Writers for miRNA target scans: ``miranda`` (miRanda 3.3a's own text), ``keyval``, ``tsv``, ``json``.

A writer turns one scanned pair into text (:meth:`TargetsWriter.pair_text`) and writes text in
output order (:meth:`TargetsWriter.write`), so a scan may render pairs out of order (per-miRNA
spools) and still write them in miRanda's order. ``miranda`` output is byte-identical to
miRanda 3.3a's minus its banner and settings header; ``keyval`` swaps each hit block for
miRanda's ``-keyval`` line.

>>> import io
>>> from jaxrna.targets.records import Hit, PairResult
>>> hit = Hit(score=167, energy=None, mirna_len=21, row_start=2, row_end=20, col_start=3341,
...           col_end=3359, ref_display_start=3340, ref_display_end=3360,
...           aln_mirna="gtCGAAAGTTTTACTAGAGTg", aln_map="  |:||||| |||||||||: ",
...           aln_target="taGTTTTCACAATGATCTCGg", aln_len=18, matches=15, wobbles=2)
>>> pair = PairResult("bantam", "hid", 21, 3902, 1, [hit])
>>> w = writer_for("tsv", io.StringIO(), no_energy=True)
>>> w.pair_text(pair).rstrip("\\n").split("\\t")[:11]
['bantam', 'hid', '167', 'NA', '2', '19', '3342', '3359', '18', '83.33', '94.44']
"""

from __future__ import annotations

import json
from typing import IO

import numpy as np

from jaxrna.targets.records import Hit, PairResult

RULE = "=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=\n"
#: The energy miRanda counts for each hit when energies are not computed.
NO_ENERGY_VALUE = -1000000.0
FORMATS = ("miranda", "keyval", "tsv", "json")


def mirna_description(record_id: str, description: str) -> str:
    """miRanda's description: the header after the id and the blanks that follow it."""
    rest = description[len(record_id):] if description.startswith(record_id) else ""
    return rest.lstrip(" \t\r")


class TargetsWriter:
    """Base writer: ``begin``, per-miRNA ``mirna_text``, per-pair ``pair_text``, ``end``."""

    #: the format's name (:func:`writer_for` rebuilds the writer from it in worker processes)
    name = ""
    #: True when :meth:`write` writes its text unchanged (rendered text may then be copied
    #: straight into the output file)
    raw_text = True

    def __init__(self, out: IO[str], *, no_energy: bool = False, quiet: bool = False) -> None:
        self.out = out
        self.no_energy = no_energy
        self.quiet = quiet

    def begin(self) -> None:
        pass

    def mirna_text(self, mirna_id: str, description: str, length: int) -> str:
        return ""

    def pair_text(self, pair: PairResult) -> str:
        raise NotImplementedError

    def write(self, text: str) -> None:
        if text:
            self.out.write(text)

    def end(self) -> None:
        pass

    def pairs_need_text(self) -> bool:
        """True when a pair without hits still produces text (miRanda's verbose mode)."""
        return False

    def spec(self) -> tuple:
        """``(format, no_energy, quiet, build)``: enough to rebuild this writer in another
        process as ``build(format, None, no_energy=no_energy, quiet=quiet)`` (``build`` is
        :func:`writer_for`, which pickles by name; format "" for writers it cannot build). The
        scan (:mod:`jaxrna.targets.blocks`) rebuilds writers from it without importing this
        layer above it."""
        return (self.name if type(self) in _BUILT else "", self.no_energy, self.quiet, writer_for)

    #: :meth:`table_text` takes the rows' energies (else it renders only without energies)
    table_energies = False

    def table_text(self, mirna_id: str, mirna_len: int, table, lo: int, hi: int, targets,
                   pair_base: int, energies=None, energy_threshold: float = 0.0) -> str | None:
        """The text of one miRNA's pairs straight from rows ``lo..hi`` of a
        :class:`~jaxrna.targets.select.HitTable` (sorted by target, hits in accepted order;
        ``targets`` has ``ids``, ``descriptions`` and ``text.lengths``; pair ``t`` is number
        ``pair_base + t``), or None when this writer renders only through :meth:`pair_text`."""
        return None


class MirandaWriter(TargetsWriter):
    """miRanda 3.3a's report (``keyval=True``: its ``-keyval`` hit lines)."""

    table_energies = True

    def __init__(self, out: IO[str], *, no_energy: bool = False, quiet: bool = False,
                 keyval: bool = False) -> None:
        super().__init__(out, no_energy=no_energy, quiet=quiet)
        self.keyval = keyval
        self.name = "keyval" if keyval else "miranda"

    def pairs_need_text(self) -> bool:
        return not self.quiet

    def mirna_text(self, mirna_id: str, description: str, length: int) -> str:
        if self.quiet:
            return ""
        return f"Read Sequence:{mirna_id} {mirna_description(mirna_id, description)}({length} nt)\n"

    def hit_text(self, pair: PairResult, hit: Hit) -> str:
        energy = 0.0 if self.no_energy else hit.energy
        if self.keyval:
            return (_KEYVAL % (
                        pair.mirna_id, pair.target_id, hit.score, energy, hit.q_start, hit.q_end,
                        hit.r_start, hit.r_end, hit.aln_len, hit.identity, hit.similarity,
                        hit.aln_mirna, hit.aln_map, hit.aln_target))
        text = ("\n   Forward:\tScore: %f  Q:%d to %d  R:%d to %d Align Len (%d) (%3.2f%%) (%3.2f%%)\n\n"
                % (hit.score, hit.q_start, hit.q_end, hit.r_start, hit.r_end, hit.aln_len,
                   hit.identity, hit.similarity))
        text += ("   Query:    3' %s 5'\n                %s\n   Ref:      5' %s 3'\n\n"
                 % (hit.aln_mirna, hit.aln_map, hit.aln_target))
        if not self.no_energy:
            text += "   Energy:  %f kCal/Mol\n" % energy
        text += "\nScores for this hit:\n"
        text += (">%s\t%s\t%2.2f\t%2.2f\t%d %d\t%d %d\t%d\t%3.2f%%\t%3.2f%%\n\n"
                 % (pair.mirna_id, pair.target_id, hit.score, energy, hit.q_start, hit.q_end,
                    hit.r_start, hit.r_end, hit.aln_len, hit.identity, hit.similarity))
        return text

    def pair_text(self, pair: PairResult) -> str:
        parts = []
        if not self.quiet:
            parts.append(self.pair_header(pair.mirna_id, pair.target_id, pair.target_description,
                                          pair.target_len))
        scan_score = 0.0
        total_score = 0.0
        max_score = 0.0
        max_hit = 0.0
        positions = []
        for hit in pair.hits:
            energy = NO_ENERGY_VALUE if self.no_energy else hit.energy
            scan_score += energy * -1
            positions.append(f" {hit.r_start}")
            if energy < max_hit:
                max_hit = energy
            total_score += hit.score
            if hit.score > max_score:
                max_score = hit.score
            parts.append(self.hit_text(pair, hit))
        if not self.quiet:
            parts.append("Score for this Scan:\n")
        if scan_score > 0.0:
            parts.append("Seq1,Seq2,Tot Score,Tot Energy,Max Score,Max Energy,Strand,Len1,Len2,Positions\n")
            if not self.no_energy:
                parts.append(">>%s\t%s\t%2.2f\t-%2.2f\t%2.2f\t%2.2f\t%d\t%d\t%d\t%s\n" % (
                    pair.mirna_id, pair.target_id, total_score, scan_score, max_score, max_hit,
                    pair.pair_index, pair.mirna_len, pair.target_len, "".join(positions)))
            else:
                parts.append(">>%s\t%s\t%2.2f\t0.0\t%2.2f\t0.0\t%d\t%d\t%d\t%s\n" % (
                    pair.mirna_id, pair.target_id, total_score, max_score,
                    pair.pair_index, pair.mirna_len, pair.target_len, "".join(positions)))
        elif not self.quiet:
            parts.append("No Hits Found above Threshold\n")
        if not self.quiet or scan_score > 0.0:
            parts.append("Complete\n\n")
        return "".join(parts)

    def pair_header(self, mirna_id: str, target_id: str, target_description: str, target_len: int) -> str:
        return (f"Read Sequence:{target_id} {mirna_description(target_id, target_description)}"
                f"({target_len} nt)\n{RULE}Performing Scan: {mirna_id} vs {target_id}\n{RULE}")

    def table_text(self, mirna_id: str, mirna_len: int, table, lo: int, hi: int, targets,
                   pair_base: int, energies: np.ndarray | None = None,
                   energy_threshold: float = 0.0) -> str | None:
        """:meth:`pair_text` for every pair of one miRNA at once, from a hit table: the same
        text, formatted a hit at a time rather than a record at a time. With energies,
        ``energies`` holds each row's (kcal/mol, as folded) and only rows below
        ``energy_threshold`` are hits; without them (None) this writer must be ``no_energy``."""
        if energies is None and not self.no_energy:
            return None
        if energies is not None:
            keep = np.flatnonzero(np.asarray(energies) < energy_threshold) + lo
            energies = np.asarray(energies, np.float64)[keep - lo]
        else:
            keep = slice(lo, hi)
        t = table.t[keep]
        n, i, i0 = table.n[keep], table.i[keep], table.i0[keep]
        aln, matches = table.aln_len[keep], table.matches[keep]
        # percentages formatted once per distinct (count, length); scores are whole numbers,
        # so "%f" and "%2.2f" of a score are its digits and zeros
        fmt = "%f" if self.keyval else "%3.2f"
        identity = _percentages(matches, aln, fmt)
        similarity = _percentages(matches + table.wobbles[keep], aln, fmt)
        q_start, q_end = (n - i + 1).tolist(), (n - i0 + 1).tolist()
        r_start, r_end = table.ref_start[keep].tolist(), table.ref_end[keep].tolist()
        sc = table.score[keep]
        scores, aln = sc.tolist(), aln.tolist()
        tids = [targets.ids[x] for x in t.tolist()]
        if energies is None:
            am, mp, at = table.aln_mirna[lo:hi], table.aln_map[lo:hi], table.aln_target[lo:hi]
            e6 = ["0.000000"] * len(scores)
            e2 = ["0.00"] * len(scores)
            lines = [""] * len(scores)           # no energy line in a hit
        else:
            rows = keep.tolist()
            am, mp, at = ([strings[k] for k in rows] for strings in
                          (table.aln_mirna, table.aln_map, table.aln_target))
            e6 = _formatted(energies, "%f")
            e2 = _formatted(energies, "%2.2f")
            lines = [f"   Energy:  {e} kCal/Mol\n" for e in e6]
        m = mirna_id
        # one f-string per hit (compiled once; ~1.5x faster than a %-template per hit)
        if self.keyval:
            hit_texts = [f"//hit_info\tquery_id={m}\treference_id={tid}\tscore={s}.000000\tenergy={ef}"
                         f"\tquery_start={qs}\tquery_end={qe}\tref_start={rs}\tref_end={re}\taln_length={al}"
                         f"\tidentity={idn}\tsimilarity={sim}\taln_mirna={a}\taln_map={b}\taln_utr={c}\n"
                         for tid, s, qs, qe, rs, re, al, idn, sim, a, b, c, ef
                         in zip(tids, scores, q_start, q_end, r_start, r_end, aln, identity,
                                similarity, am, mp, at, e6)]
        else:
            hit_texts = [f"\n   Forward:\tScore: {s}.000000  Q:{qs} to {qe}  R:{rs} to {re} Align Len "
                         f"({al}) ({idn}%) ({sim}%)\n\n   Query:    3' {a} 5'\n                {b}\n"
                         f"   Ref:      5' {c} 3'\n\n{line}\nScores for this hit:\n"
                         f">{m}\t{tid}\t{s}.00\t{e}\t{qs} {qe}\t{rs} {re}\t{al}\t{idn}%\t{sim}%\n\n"
                         for tid, s, qs, qe, rs, re, al, idn, sim, a, b, c, line, e
                         in zip(tids, scores, q_start, q_end, r_start, r_end, aln, identity,
                                similarity, am, mp, at, lines, e2)]
        heads = np.flatnonzero(np.diff(t, prepend=-1)) if len(t) else np.zeros(0, np.int64)
        ends = np.append(heads[1:], len(t)).tolist()
        totals = np.add.reduceat(sc, heads).tolist() if len(t) else []
        bests = np.maximum.reduceat(sc, heads).tolist() if len(t) else []
        pair_t = t[heads].tolist()
        lengths = targets.text.lengths
        positions = [f" {r}" for r in r_start]
        lead = ("" if self.quiet else "Score for this Scan:\n") + _SCAN_HEADER
        heads = heads.tolist()
        lens = lengths[pair_t].tolist() if pair_t else []
        if energies is None:
            trailers = [f"{lead}>>{m}\t{tids[a]}\t{total}.00\t0.0\t{best}.00\t0.0\t{pair_base + x}\t"
                        f"{mirna_len}\t{ln}\t{''.join(positions[a:b])}\nComplete\n\n"
                        for a, b, x, total, best, ln in zip(heads, ends, pair_t, totals, bests, lens)]
        else:
            trailers = []
            values = energies.tolist()
            for a, b, x, total, best, ln in zip(heads, ends, pair_t, totals, bests, lens):
                scan, low = 0.0, 0.0           # miRanda's running sums, in its order
                for e in values[a:b]:
                    scan += e * -1
                    if e < low:
                        low = e
                if scan > 0.0:
                    trailers.append(f"{lead}>>{m}\t{tids[a]}\t{total}.00\t-{scan:2.2f}\t{best}.00\t"
                                    f"{low:2.2f}\t{pair_base + x}\t{mirna_len}\t{ln}\t"
                                    f"{''.join(positions[a:b])}\nComplete\n\n")
                else:                          # energies summing to 0 or more: no summary
                    trailers.append("" if self.quiet else _NO_HITS)
        parts = []
        if self.quiet:
            for a, b, trailer in zip(heads, ends, trailers):
                parts.extend(hit_texts[a:b])
                parts.append(trailer)
            return "".join(parts)
        pairs = {x: (a, b, trailer) for a, b, x, trailer in zip(heads, ends, pair_t, trailers)}
        for x, (tid, desc) in enumerate(zip(targets.ids, targets.descriptions)):
            parts.append(self.pair_header(mirna_id, tid, desc, int(lengths[x])))
            if x in pairs:
                a, b, trailer = pairs[x]
                parts.extend(hit_texts[a:b])
                parts.append(trailer)
            else:
                parts.append(_NO_HITS)
        return "".join(parts)

    def end(self) -> None:
        self.out.write("Scan Complete\n\n")


_KEYVAL = ("//hit_info\tquery_id=%s\treference_id=%s\tscore=%f\tenergy=%f\tquery_start=%d\t"
           "query_end=%d\tref_start=%d\tref_end=%d\taln_length=%d\tidentity=%f\t"
           "similarity=%f\taln_mirna=%s\taln_map=%s\taln_utr=%s\n")
_NO_HITS = "Score for this Scan:\nNo Hits Found above Threshold\nComplete\n\n"
_SCAN_HEADER = "Seq1,Seq2,Tot Score,Tot Energy,Max Score,Max Energy,Strand,Len1,Len2,Positions\n"


def _formatted(values: np.ndarray, fmt: str) -> list[str]:
    """``fmt % v`` for every value, formatted once per distinct value."""
    if not len(values):
        return []
    uniq, inverse = np.unique(values, return_inverse=True)
    text = [fmt % v for v in uniq.tolist()]
    return [text[k] for k in inverse.reshape(-1).tolist()]


def _percentages(count: np.ndarray, length: np.ndarray, fmt: str) -> list[str]:
    """``fmt % (count / length * 100.0)`` for every row (the same doubles as Python's int
    division), formatted once per distinct value."""
    return _formatted(np.asarray(count, np.int64) / np.asarray(length, np.int64) * 100.0, fmt)


TSV_COLUMNS = ("mirna_id", "target_id", "score", "energy", "mirna_start", "mirna_end",
               "target_start", "target_end", "aln_length", "identity", "similarity",
               "aln_mirna", "aln_map", "aln_target")


def hit_fields(pair: PairResult, hit: Hit, no_energy: bool) -> dict:
    """One hit as a flat record with clean 1-based inclusive spans of the aligned region."""
    return {
        "mirna_id": pair.mirna_id, "target_id": pair.target_id, "score": hit.score,
        "energy": None if no_energy else round(hit.energy, 2),
        "mirna_start": hit.mirna_first, "mirna_end": hit.mirna_last,
        "target_start": hit.target_first, "target_end": hit.target_last,
        "aln_length": hit.aln_len, "identity": round(hit.identity, 2),
        "similarity": round(hit.similarity, 2),
        "aln_mirna": hit.aln_mirna, "aln_map": hit.aln_map, "aln_target": hit.aln_target,
    }


class TsvWriter(TargetsWriter):
    """One row per hit, ``#`` header; spans are the aligned region, 1-based inclusive.

    miRNA positions count from its 5' end; alignment strings are miRanda's (miRNA 3'->5' with
    lowercase unaligned ends, target 5'->3'); energy is ``NA`` with ``--no-energy``.
    """

    name = "tsv"

    def begin(self) -> None:
        self.out.write("#" + "\t".join(TSV_COLUMNS) + "\n")

    def pair_text(self, pair: PairResult) -> str:
        rows = []
        for hit in pair.hits:
            f = hit_fields(pair, hit, self.no_energy)
            f["energy"] = "NA" if f["energy"] is None else "%.2f" % f["energy"]
            f["identity"] = "%.2f" % hit.identity
            f["similarity"] = "%.2f" % hit.similarity
            rows.append("\t".join(str(f[c]) for c in TSV_COLUMNS) + "\n")
        return "".join(rows)


class JsonWriter(TargetsWriter):
    """A JSON array of hit objects (the tsv columns as keys; energy null with --no-energy)."""

    name = "json"
    raw_text = False  # write() joins the objects with commas

    def begin(self) -> None:
        self.out.write("[")
        self._first = True

    def pair_text(self, pair: PairResult) -> str:
        return "".join(json.dumps(hit_fields(pair, hit, self.no_energy)) + "\n" for hit in pair.hits)

    def write(self, text: str) -> None:
        for line in text.splitlines():
            self.out.write(("\n  " if self._first else ",\n  ") + line)
            self._first = False

    def end(self) -> None:
        self.out.write("\n]\n" if not self._first else "]\n")


def writer_for(fmt: str, out: IO[str], *, no_energy: bool = False, quiet: bool = False) -> TargetsWriter:
    """The writer of format ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "miranda":
        return MirandaWriter(out, no_energy=no_energy, quiet=quiet)
    if fmt == "keyval":
        return MirandaWriter(out, no_energy=no_energy, quiet=quiet, keyval=True)
    if fmt == "tsv":
        return TsvWriter(out, no_energy=no_energy, quiet=quiet)
    if fmt == "json":
        return JsonWriter(out, no_energy=no_energy, quiet=quiet)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")


_BUILT = (MirandaWriter, TsvWriter, JsonWriter)
