"""The alignment formats' text (pair, tsv, json) for many alignments at once, from arrays, and
the pieces the writers of :mod:`jaxrna.formats.align` share with it.

It lives beside the engine (:mod:`jaxrna.align.engine` formats each chunk as it goes) rather
than in :mod:`jaxrna.formats`, which sits above the algorithms (``tests/test_layout.py``).

:class:`AlignedBatch` holds consecutive results of ``jaxrna align`` as arrays (scores, 0-based
coordinates, the ops of every alignment concatenated, the aligned stretches of the two
sequences); :func:`format_batch` turns one into text with whole-array operations (statistics,
CIGARs, aligned rows and match lines are computed for the whole batch; only the lines are
assembled per alignment). The text is byte for byte that of the writers of
:mod:`jaxrna.formats.align` on the same alignments (``tests/test_align_engine.py`` compares
them); those writers stay the reference and the API's path. Batches pickle, so a process pool
can format them (:func:`format_batch` is a module-level function).

>>> from jaxrna.align.api import align
>>> b = AlignedBatch.from_alignments([align("GATTACA", "GATCA", match=1, mismatch=-1,
...                                          gap_open=2, gap_extend=1)])
>>> print(format_batch(b, "tsv"), end="")  # doctest: +NORMALIZE_WHITESPACE
query1	target1	2	1	7	1	5	3=2I2=	71.43
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

#: Op codes of :attr:`AlignedBatch.ops` (as :mod:`jaxrna.kernels.gotoh_defs`).
OP_M, OP_I, OP_D = 0, 1, 2
_GAP = ord("-")

WIDTH = 50
RULE = "#" + "=" * 39


def pct(part: int, whole: int) -> str:
    """``part`` as a percentage of ``whole``, one decimal (``"0.0%"`` of nothing)."""
    return f"{100 * part / whole:.1f}%" if whole else "0.0%"


def parameter_lines(aln) -> list[str]:
    """EMBOSS's parameter lines; the scheme's name stands in the ``Matrix`` line (``NUC.4.4``,
    ``match 2, mismatch -1``, ``edit (...)``): readers such as Biopython's accept no other keys."""
    d = aln.scoring.describe()
    return [f"# Matrix: {aln.scoring.name}", f"# Gap_penalty: {d['gap_open']}",
            f"# Extend_penalty: {d['gap_extend']}"]


def end_gaps_line(scoring) -> str:
    """The pair header's ``# End_gaps: free`` (or ``open O, extend E``) line when end gaps are
    scored apart from inner gaps (EMBOSS writes such settings only in its command line; the
    readers take any ``# Key: value`` line of the header); empty otherwise."""
    text = scoring.end_gaps_text()
    return f"# End_gaps: {text}\n" if text else ""


TSV_COLUMNS = ("query_id", "target_id", "score", "query_start", "query_end", "target_start",
               "target_end", "cigar", "identity")


def number(text: str):
    """A number's text as JSON wants it: an int where it is whole, else a float."""
    v = float(text)
    return int(v) if v == int(v) else v


@dataclass
class AlignedBatch:
    """Alignments as arrays, in output order.

    ``units``: scores in the scheme's integer units; coordinates 0-based half-open, a
    ``query_start`` / ``target_start`` of -1 where unknown (local, score only). ``ops`` (None
    when only scores were computed): the op codes of every alignment concatenated (``OP_M``,
    ``OP_I``, ``OP_D``), alignment ``k`` at ``ops[op_offsets[k]:op_offsets[k + 1]]``;
    ``query_seg`` / ``target_seg``: the aligned stretches (``query[start:end]``, normalised
    ASCII letters) concatenated likewise.
    """

    scoring: object
    mode: str
    query_ids: list
    target_ids: list
    units: np.ndarray
    query_start: np.ndarray
    query_end: np.ndarray
    target_start: np.ndarray
    target_end: np.ndarray
    ops: np.ndarray | None = None
    op_offsets: np.ndarray | None = None
    query_seg: np.ndarray | None = None
    query_seg_offsets: np.ndarray | None = None
    target_seg: np.ndarray | None = None
    target_seg_offsets: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.units)

    @classmethod
    def from_alignments(cls, alns) -> "AlignedBatch":
        """A batch of :class:`~jaxrna.align.api.Alignment` objects (all with ops, or all score
        only; one scheme and mode)."""
        alns = list(alns)
        first = alns[0]
        i64 = lambda v: np.array(v, np.int64)  # noqa: E731
        start = lambda v: -1 if v is None else v  # noqa: E731
        out = cls(first.scoring, first.mode, [a.query_id for a in alns],
                  [a.target_id for a in alns], i64([a.score_units for a in alns]),
                  i64([start(a.query_start) for a in alns]), i64([a.query_end for a in alns]),
                  i64([start(a.target_start) for a in alns]), i64([a.target_end for a in alns]))
        if first.ops is not None:
            table = np.zeros(256, np.uint8)
            table[[ord("M"), ord("I"), ord("D")]] = [OP_M, OP_I, OP_D]
            text = "".join(a.ops for a in alns).encode()
            out.ops = table[np.frombuffer(text, np.uint8)]
            out.op_offsets = offsets([len(a.ops) for a in alns])
            qs = [a.query[a.query_start:a.query_end] for a in alns]
            ts = [a.target[a.target_start:a.target_end] for a in alns]
            out.query_seg = np.frombuffer("".join(qs).encode(), np.uint8)
            out.query_seg_offsets = offsets([len(s) for s in qs])
            out.target_seg = np.frombuffer("".join(ts).encode(), np.uint8)
            out.target_seg_offsets = offsets([len(s) for s in ts])
        return out


def _exclusive(flags: np.ndarray) -> np.ndarray:
    """``0`` then the running count of ``flags`` (length ``len(flags) + 1``)."""
    out = np.zeros(len(flags) + 1, np.int64)
    np.cumsum(flags, out=out[1:])
    return out


def ramp(counts: np.ndarray) -> np.ndarray:
    """``0 .. counts[k] - 1`` for every k, concatenated (the align engines' and this module's
    one copy).

    >>> ramp(np.array([3, 0, 2])).tolist()
    [0, 1, 2, 0, 1]
    """
    total = int(counts.sum())
    if not total:
        return np.zeros(0, np.int64)
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


def offsets(lengths) -> np.ndarray:
    """Where each of ``lengths`` starts when laid end to end, and the end (the align engines'
    and this module's one copy).

    >>> offsets(np.array([2, 3])).tolist()
    [0, 2, 5]
    """
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _score_texts(scoring, units: np.ndarray) -> list[str]:
    """``format_number`` of every score in the user's units (once per distinct value)."""
    values, inverse = np.unique(units, return_inverse=True)
    texts = [scoring.report_text(int(v)) for v in values]
    return [texts[k] for k in inverse.reshape(-1).tolist()]


def _score_numbers(scoring, units: np.ndarray) -> list:
    values, inverse = np.unique(units, return_inverse=True)
    nums = []
    for v in values.tolist():
        f = scoring.report(v)
        nums.append(f.numerator if f.denominator == 1 else float(f))
    return [nums[k] for k in inverse.reshape(-1).tolist()]


def _coords(b: AlignedBatch) -> tuple[list, list, list, list]:
    """1-based inclusive coordinates as in :func:`jaxrna.formats.align._coords` (None:
    unknown): all 0 for an empty alignment or when both ends are 0."""
    qe, te = b.query_end, b.target_end
    zero = (qe == 0) & (te == 0)
    if b.ops is not None:
        zero |= np.diff(b.op_offsets) == 0
    qs = np.where(zero, 0, np.where(b.query_start < 0, -1, b.query_start + 1))
    ts = np.where(zero, 0, np.where(b.target_start < 0, -1, b.target_start + 1))
    qe, te = np.where(zero, 0, qe), np.where(zero, 0, te)
    none = lambda a: [None if v < 0 else v for v in a.tolist()]  # noqa: E731
    return none(qs), qe.tolist(), none(ts), te.tolist()


def letter_tables(scoring) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per pair of letters (index ``query letter << 8 | target letter``, 65,536 entries, uint8):
    the match line's mark, whether their codes are the same, whether they are similar."""
    codes = np.full(256, -1, np.int64)
    table = scoring.table()
    codes[:len(table)] = table[:256]
    c0 = np.maximum(codes, 0)
    same = codes[:, None] == codes[None, :]
    sub = scoring.matrix[c0[:, None], c0[None, :]]
    similar = (sub >= 0) if scoring.minimise else (sub > 0)
    mark = np.where(same, ord("|"), np.where(sub > 0, ord(":"), ord(".")))
    return tuple(a.astype(np.uint8).reshape(-1) for a in (mark, same, similar))


class _Columns:
    """Per-column and per-alignment quantities of a batch with ops, computed for all at once."""

    def __init__(self, b: AlignedBatch) -> None:
        sc = b.scoring
        ops, off = b.ops, b.op_offsets
        n = len(b)
        self.lengths = np.diff(off)
        pair = np.repeat(np.arange(n), self.lengths)
        is_m, takes_q, takes_t = ops == OP_M, ops != OP_D, ops != OP_I
        # index of the residue each column consumes (or would), inside the pair's stretch
        self.qcum = _exclusive(takes_q)          # residues consumed before each column
        self.tcum = _exclusive(takes_t)
        cq, ct = self.qcum[:-1], self.tcum[:-1]
        starts = off[:-1]
        cq0, ct0 = self.qcum[starts], self.tcum[starts]
        qidx = cq + np.repeat(b.query_seg_offsets[:-1] - cq0, self.lengths)
        tidx = ct + np.repeat(b.target_seg_offsets[:-1] - ct0, self.lengths)
        qlet = b.query_seg[np.clip(qidx, 0, max(len(b.query_seg) - 1, 0))] if len(b.query_seg) \
            else np.zeros(len(ops), np.uint8)
        tlet = b.target_seg[np.clip(tidx, 0, max(len(b.target_seg) - 1, 0))] if len(b.target_seg) \
            else np.zeros(len(ops), np.uint8)
        self.qa = np.where(takes_q, qlet, np.uint8(_GAP))
        self.ta = np.where(takes_t, tlet, np.uint8(_GAP))
        mark_lut, same_lut, sim_lut = letter_tables(sc)
        key = (qlet.astype(np.intp) << 8) | tlet
        same = is_m & same_lut[key].astype(bool)
        similar = is_m & sim_lut[key].astype(bool)
        self.marks = np.where(is_m, mark_lut[key], np.uint8(32))

        def per_pair(flags):                 # how many columns of each alignment hold flags
            return np.diff(_exclusive(flags)[off])

        self.identical = per_pair(same)
        self.similar = per_pair(similar)
        self.matched = per_pair(is_m)
        self.gaps = self.lengths - self.matched
        self.takes_q, self.takes_t = takes_q, takes_t
        self._same, self._ops = same, ops
        self._pair = pair

    @property
    def _letters(self) -> np.ndarray:
        """The CIGAR letter of every column."""
        is_m, ops = self._ops == OP_M, self._ops
        return np.where(is_m, np.where(self._same, ord("="), ord("X")),
                        np.where(ops == OP_I, ord("I"), ord("D"))).astype(np.uint8)

    def cigars(self) -> list[str]:
        """Extended CIGAR of every alignment (``*`` when empty)."""
        letters, pair = self._letters, self._pair
        n = len(self.lengths)
        if not len(letters):
            return ["*"] * n
        change = np.ones(len(letters), bool)
        change[1:] = (letters[1:] != letters[:-1]) | (pair[1:] != pair[:-1])
        starts = np.flatnonzero(change)
        runs = np.diff(np.append(starts, len(letters)))
        ndig = _digit_counts(runs)
        width = ndig + 1
        at = np.concatenate([[0], np.cumsum(width)])
        buf = np.zeros(int(at[-1]), np.uint8)
        _put_digits(buf, at[:-1] + ndig, runs, ndig)
        buf[at[:-1] + ndig] = letters[starts]
        text = buf.tobytes().decode("ascii")
        run_pair = pair[starts]
        first = np.searchsorted(run_pair, np.arange(n))
        last = np.searchsorted(run_pair, np.arange(n), side="right")
        lo, hi = at[first].tolist(), at[last].tolist()
        return [text[a:z] if a < z else "*" for a, z in zip(lo, hi)]

    def identities(self) -> list[str]:
        out = []
        for same, length in zip(self.identical.tolist(), self.lengths.tolist()):
            out.append(f"{100 * same / length:.2f}".rstrip("0").rstrip(".") if length else "0")
        return out


def tsv_text(b: AlignedBatch) -> str:
    """The batch's tsv rows (without the header line)."""
    if not len(b):
        return ""
    scores = _score_texts(b.scoring, b.units)
    qs, qe, ts, te = _coords(b)
    star = lambda v: "*" if v is None else str(v)  # noqa: E731
    if b.ops is None:
        cigars = idents = ["*"] * len(b)
    else:
        cols = _Columns(b)
        cigars, idents = cols.cigars(), cols.identities()
    rows = [f"{qid}\t{tid}\t{s}\t{star(a)}\t{c}\t{star(d)}\t{e}\t{g}\t{i}\n"
            for qid, tid, s, a, c, d, e, g, i in zip(b.query_ids, b.target_ids, scores, qs, qe,
                                                     ts, te, cigars, idents)]
    return "".join(rows)


TSV_HEADER = "#" + "\t".join(TSV_COLUMNS) + "\n"


def pair_header(mode: str, scoring) -> str:
    """What :func:`jaxrna.formats.align.write_pair` writes before the first alignment."""
    objective = "# Objective: minimise cost (Score is the cost)\n" if scoring.minimise else ""
    return ("#" * 40 + "\n# Program: jaxrna align\n"
            f"# Mode: {mode}\n{end_gaps_line(scoring)}{objective}# Align_format: pair\n"
            + "#" * 40 + "\n\n")


#: What :func:`jaxrna.formats.align.write_pair` writes after the last alignment.
PAIR_FOOTER = "#" + "-" * 39 + "\n"


class _Holder:
    """Just enough of an alignment for :func:`jaxrna.formats.align.parameter_lines`."""

    def __init__(self, scoring) -> None:
        self.scoring = scoring


def pair_text(b: AlignedBatch) -> str:
    """The batch's alignments in the pair format (without the file's header and footer)."""
    if b.ops is None:
        raise ValueError("the pair format needs alignments, not scores only")
    if not len(b):
        return ""
    params = "\n".join(parameter_lines(_Holder(b.scoring))) + "\n#\n"
    scores = _score_texts(b.scoring, b.units)
    native = _native_blocks(b)
    if native is not None:
        text, at, identical, similar, matched = native
        lengths = np.diff(b.op_offsets)
        return _pair_records(b, scores, params, lengths, identical, similar, lengths - matched,
                             lambda k: text[at[k]:at[k + 1]])
    cols = _Columns(b)
    # the blocks of WIDTH columns of every alignment, and the residue numbers around them
    off = b.op_offsets
    lengths = cols.lengths
    nblocks = -(-lengths // WIDTH)
    owner = np.repeat(np.arange(len(b)), nblocks)
    bs = off[:-1][owner] + ramp(nblocks) * WIDTH
    be = np.minimum(bs + WIDTH, off[1:][owner])
    qcum, tcum = cols.qcum, cols.tcum               # residues consumed before each column
    qshift = (b.query_start - qcum[off[:-1]])[owner]
    tshift = (b.target_start - tcum[off[:-1]])[owner]
    q1, q2 = qshift + qcum[bs] + 1, qshift + qcum[be]
    t1, t2 = tshift + tcum[bs] + 1, tshift + tcum[be]
    first = np.concatenate([[0], np.cumsum(nblocks)]).tolist()
    blocks = _block_text(b, cols, owner, bs, be, (q1, q2, t1, t2))
    return _pair_records(b, scores, params, lengths, cols.identical, cols.similar, cols.gaps,
                         lambda k: blocks(first[k], first[k + 1]))


def _native_blocks(b: AlignedBatch):
    """:func:`jaxrna.align.text_native.pair_blocks` of the batch (its blocks as text, their
    offsets, the counts), or None where names are not ASCII or the C path does not apply."""
    from jaxrna.align.text_native import pair_blocks

    qnames = [f"{qid[:13]:<13} " for qid in b.query_ids]
    tnames = [f"{tid[:13]:<13} " for tid in b.target_ids]
    if not (all(map(str.isascii, qnames)) and all(map(str.isascii, tnames))):
        return None
    got = pair_blocks(b.ops, b.op_offsets, b.query_seg, b.query_seg_offsets, b.target_seg,
                      b.target_seg_offsets, b.query_start, b.target_start,
                      [n.encode("ascii") for n in qnames], [n.encode("ascii") for n in tnames],
                      *letter_tables(b.scoring))
    if got is None:
        return None
    text, at, identical, similar, matched = got
    return text.decode("ascii"), at.tolist(), identical, similar, matched


def _pair_records(b: AlignedBatch, scores: list, params: str, lengths, identical, similar,
                  gap_counts, blocks) -> str:
    """Each alignment's header and (``blocks(k)``: alignment k's blocks) its blocks."""
    out: list[str] = []
    for k, (qid, tid, score, n, ident, sim, gaps) in enumerate(zip(
            b.query_ids, b.target_ids, scores, lengths.tolist(), identical.tolist(),
            similar.tolist(), gap_counts.tolist())):
        shown, gshown = (n, gaps) if n else (1, 1)
        out.append(f"{RULE}\n#\n# Aligned_sequences: 2\n# 1: {qid}\n# 2: {tid}\n{params}"
                   f"# Length: {shown}\n"
                   f"# Identity:   {ident:>7}/{shown} ({pct(ident, shown)})\n"
                   f"# Similarity: {sim:>7}/{shown} ({pct(sim, shown)})\n"
                   f"# Gaps:       {gshown:>7}/{shown} ({pct(gshown, shown)})\n"
                   f"# Score: {score}\n#\n#\n{RULE}\n\n")
        if not n:
            blank = f"{'':<13} {'':>6} "
            out.append(f"{qid[:13]:<13} {1:>6} - {0:>6}\n{blank} \n"
                       f"{tid[:13]:<13} {1:>6} - {0:>6}\n\n\n")
            continue
        out.append(blocks(k))
        out.append("\n")
    return "".join(out)


def _block_text(b: AlignedBatch, cols: _Columns, owner, bs, be, numbers):
    """The pair format's blocks (the query's row, the match line, the target's row, a blank
    line; WIDTH columns each): a function giving the text of blocks ``x .. y - 1``. Built for
    all blocks at once as bytes where every name is ASCII and no number negative (the common
    case), else line by line."""
    q1, q2, t1, t2 = numbers
    qnames = [f"{qid[:13]:<13} " for qid in b.query_ids]
    tnames = [f"{tid[:13]:<13} " for tid in b.target_ids]
    qa, ta, marks = cols.qa, cols.ta, cols.marks
    if all(map(str.isascii, qnames)) and all(map(str.isascii, tnames)) and \
            all(int(v.min(initial=0)) >= 0 for v in numbers):
        span = be - bs
        qn, qo = _ragged([s.encode("ascii") for s in qnames], owner)
        tn, to = _ragged([s.encode("ascii") for s in tnames], owner)
        text, at = _records(len(bs), [
            (qn, qo, 14), _numbers(q1), b" ", (qa, bs, span), b" ", _numbers(q2),
            b"\n" + b" " * 21, (marks, bs, span), b"\n", (tn, to, 14), _numbers(t1), b" ",
            (ta, bs, span), b" ", _numbers(t2), b"\n\n"])
        text = text.tobytes().decode("ascii")
        at = at.tolist()
        return lambda x, y: text[at[x]:at[y]]
    qa, ta, marks = (a.tobytes().decode("ascii") for a in (qa, ta, marks))
    q1, q2, t1, t2, bs, be = (v.tolist() for v in (q1, q2, t1, t2, bs, be))
    owner = owner.tolist()
    blank = " " * 21
    return lambda x, y: "".join(
        f"{qnames[owner[i]]}{q1[i]:>6} {qa[bs[i]:be[i]]} {q2[i]:>6}\n"
        f"{blank}{marks[bs[i]:be[i]]}\n"
        f"{tnames[owner[i]]}{t1[i]:>6} {ta[bs[i]:be[i]]} {t2[i]:>6}\n\n" for i in range(x, y))


def _ragged(texts: list[bytes], owner: np.ndarray):
    """``texts[owner[x]]`` for every x as a field of :func:`_records`: all the texts' bytes,
    where each of ``owner`` starts, and a length (every text has the same length)."""
    flat = np.frombuffer(b"".join(texts), np.uint8)
    return flat, owner * (len(texts[0]) if texts else 0)


def _numbers(values: np.ndarray, width: int = 6):
    """Decimal text of non-negative integers, right-aligned in ``width`` characters (wider
    where a number needs it), as a field of :func:`_records`.

    >>> flat, starts, lengths = _numbers(np.array([7, 1234567, 0]))
    >>> [flat[a:a + n].tobytes().decode() for a, n in zip(starts, lengths)]
    ['     7', '1234567', '     0']
    """
    values = np.asarray(values, np.int64)
    if len(values) and values.min() < 0:
        raise ValueError("negative position")
    ndig = _digit_counts(values)
    lengths = np.maximum(ndig, width)
    starts = offsets(lengths)
    flat = np.full(int(starts[-1]), ord(" "), np.uint8)
    _put_digits(flat, starts[1:], values, ndig)
    return flat, starts[:-1], lengths


def _digit_counts(values: np.ndarray) -> np.ndarray:
    """Decimal digits of each non-negative integer (1 for 0).

    >>> _digit_counts(np.array([0, 9, 10, 12345])).tolist()
    [1, 1, 2, 5]
    """
    ndig = np.ones(len(values), np.int64)
    for p in range(1, 19):
        big = values >= 10 ** p
        if not big.any():
            break
        ndig += big
    return ndig


def _put_digits(buf: np.ndarray, ends: np.ndarray, values: np.ndarray, ndig: np.ndarray) -> None:
    """Write each of ``values`` (``ndig`` digits) in ASCII into ``buf``, its last digit just
    before ``ends``."""
    for d in range(int(ndig.max(initial=1))):
        has = ndig > d
        buf[(ends - 1 - d)[has]] = ord("0") + (values[has] // 10 ** d) % 10


def _records(n: int, fields: list) -> tuple[np.ndarray, np.ndarray]:
    """``n`` records, each the concatenation of ``fields`` (bytes, the same in every record,
    or ``(flat, starts, lengths)``: record x holds ``flat[starts[x]:][:lengths[x]]``, lengths
    an array or one number), as one byte array and the records' offsets in it.

    >>> text, at = _records(2, [b"<", (np.frombuffer(b"abcd", np.uint8), np.array([0, 1]),
    ...                                  np.array([1, 3])), b">"])
    >>> text.tobytes(), at.tolist()
    (b'<a><bcd>', [0, 3, 8])
    """
    per = np.zeros(n, np.int64)
    for f in fields:
        per += len(f) if isinstance(f, bytes) else f[2]
    at = offsets(per)
    buf = np.empty(int(at[-1]), np.uint8)
    pos = at[:-1].copy()
    for f in fields:
        if isinstance(f, bytes):
            buf[pos[:, None] + np.arange(len(f))] = np.frombuffer(f, np.uint8)
            pos += len(f)
            continue
        flat, starts, lengths = f
        lengths = np.broadcast_to(np.asarray(lengths, np.int64), (n,))
        r = ramp(lengths)
        buf[np.repeat(pos, lengths) + r] = flat[np.repeat(starts, lengths) + r]
        pos += lengths
    return buf, at


def json_text(b: AlignedBatch, first: bool) -> str:
    """The batch's objects of the json format: each preceded by ``"\\n  "`` (the file's first)
    or ``",\\n  "`` (without the enclosing brackets)."""
    if not len(b):
        return ""
    sc = b.scoring
    params = {k: (number(v) if k != "scoring" else v) for k, v in sc.describe().items()}
    objective = "minimise cost" if sc.minimise else "maximise score"
    scores = _score_numbers(sc, b.units)
    qs, qe, ts, te = _coords(b)
    extra = None
    if b.ops is not None:
        cols = _Columns(b)
        cigars, idents = cols.cigars(), cols.identities()
        qa = cols.qa.tobytes().decode("ascii")
        ta = cols.ta.tobytes().decode("ascii")
        off = b.op_offsets.tolist()
        extra = (cigars, idents, cols.lengths.tolist(), cols.identical.tolist(),
                 cols.similar.tolist(), cols.gaps.tolist())
    out = []
    for k in range(len(b)):
        obj = {"query_id": b.query_ids[k], "target_id": b.target_ids[k], "mode": b.mode,
               **params, "objective": objective, "score": scores[k], "query_start": qs[k],
               "query_end": qe[k], "target_start": ts[k], "target_end": te[k]}
        if extra is not None:
            cigar, ident, n, same, sim, gaps = (x[k] for x in extra)
            obj.update(cigar=cigar, identity=number(ident), length=n, identical=same,
                       similar=sim, gaps=gaps, query_aligned=qa[off[k]:off[k + 1]],
                       target_aligned=ta[off[k]:off[k + 1]])
        out.append(("\n  " if first and k == 0 else ",\n  ") + json.dumps(obj))
    return "".join(out)


def format_batch(b: AlignedBatch, fmt: str, first: bool = False) -> str:
    """The text of ``b`` in format ``fmt`` (``pair``, ``tsv`` or ``json``) without the file's
    header and footer (see :func:`file_parts`); ``first``: ``b`` starts the file (json)."""
    if fmt == "tsv":
        return tsv_text(b)
    if fmt == "pair":
        return pair_text(b)
    if fmt == "json":
        return json_text(b, first)
    raise ValueError(f"unknown format {fmt!r}")


def file_parts(fmt: str, mode: str, scoring, count: int) -> tuple[str, str]:
    """The text before the first and after the last batch of a file of ``count`` alignments."""
    if fmt == "tsv":
        return TSV_HEADER, ""
    if fmt == "pair":
        return (pair_header(mode, scoring), PAIR_FOOTER) if count else ("", "")
    if fmt == "json":
        return "[", "\n]\n" if count else "]\n"
    raise ValueError(f"unknown format {fmt!r}")


__all__ = ["AlignedBatch", "format_batch", "file_parts", "tsv_text", "pair_text", "json_text",
           "pair_header", "PAIR_FOOTER", "TSV_HEADER"]
