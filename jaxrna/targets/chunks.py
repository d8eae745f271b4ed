"""Split a target FASTA file into chunks for parallel ``jaxrna targets`` runs, then merge the
chunk reports into exactly the report one ``jaxrna targets`` run over the whole file writes
(``jaxrna targets-split`` and ``jaxrna targets-merge``; the Nextflow and Snakemake pipelines'
chunked targets scan).

    jaxrna targets-split --chunk-nt 2000000 --prefix utrs utrs.fa.gz
    jaxrna targets mirnas.fa utrs.chunk000001.fa -o utrs.chunk000001.targets.txt    # each chunk
    jaxrna targets-merge --manifest utrs.chunks.tsv --mirnas mirnas.fa \\
        -o utrs.targets.txt utrs.chunk*.targets.txt

:func:`split` copies every record byte for byte (headers, line breaks, letters) into
``PREFIX.chunkNNNNNN.fa`` files, closing a chunk once it holds ``chunk_nt`` sequence letters
or ``chunk_records`` records, and writes ``PREFIX.chunks.tsv``: one row per chunk (file,
records, letters) in target-file order.

:func:`merge` puts the chunk reports back in miRanda's order. A run is miRNA-major (every target
for the first miRNA, then every target for the second, ...), so a chunk's report holds one slice
of each miRNA's section: the merged report takes, for each miRNA in turn, its slice from chunk
1, chunk 2, ... Formats are recognised from the text: ``miranda`` and ``keyval``, with or
without ``--quiet``, ``tsv`` and ``json``. miRanda's running pair counter (the ``Strand``
column of ``>>`` lines, the pair's number in the run) is renumbered from chunk-local to
whole-run numbers; chunk runs must not use ``--pair-offset``.

Which miRNA a piece of text belongs to: in the verbose miranda/keyval reports, from the report's
structure (every pair has a block); a quiet report's ``>>`` line carries the pair number; hit
lines without a ``>>`` line (a pair whose energies add up to >= 0), tsv rows and json objects
carry the miRNA id only, and are placed by id in miRNA-file order. Where duplicate miRNA ids
leave that placement open (two miRNAs with one id and text that could be either's), merge stops
with an error instead of guessing; run such a job unsplit.

Reports are read line by line, twice (placement, then output), so memory stays small however
large they are. Only the standard library and :mod:`jaxrna.io` are used: no JAX.
"""

from __future__ import annotations

import io
import json
import os
from array import array

from jaxrna.io.atomic import atomic_output
from jaxrna.io.errors import JaxrnaError

RULE = "=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=-=\n"
SCAN_COMPLETE = "Scan Complete\n\n"
TRAILER_HEAD = "Seq1,Seq2,Tot Score,Tot Energy,Max Score,Max Energy,Strand,Len1,Len2,Positions\n"
_BLANKS = b" \t\r\n\v\f"


class MergeError(JaxrnaError):
    """A chunk report that does not fit the manifest or the miRNA file."""


# --------------------------------------------------------------------------- FASTA


def byte_lines(path):
    """The lines (bytes, with their ends) of a plain or gzip file ('-' is standard input),
    read through :class:`jaxrna.io.source.InputSource`: a file that is not what it claims
    (corrupt or truncated gzip, a device, unreadable, changed while read) is one located
    :class:`~jaxrna.io.errors.InputError`."""
    from jaxrna.io.source import InputSource

    with InputSource(path) as src:
        rest, line = b"", 1
        while True:
            block = src.read(line=line)
            if not block:
                break
            parts = (rest + block).split(b"\n")
            rest = parts.pop()
            line += len(parts)
            for part in parts:
                yield part + b"\n"
        if rest:
            yield rest


def fasta_ids(path):
    """Record ids as jaxrna reads them: the header's first blank-separated word."""
    ids = []
    for line in byte_lines(path):
        if line[:1] == b">":
            title = line[1:].strip().decode("utf-8", "replace")
            ids.append(title.split(None, 1)[0] if title else "")
    return ids


# --------------------------------------------------------------------------- split


def split(path, prefix, chunk_nt=0, chunk_records=0, outdir="."):
    """Write the chunks and the manifest; returns the manifest rows ``(file, records, nt)``.

    A chunk closes once it holds ``chunk_nt`` letters (as jaxrna's own scan chunks do) or
    ``chunk_records`` records (0 = no limit). A file without records becomes one chunk holding
    its text unchanged, so the scan reports the problem as it would for the whole file.
    """
    if chunk_nt < 0 or chunk_records < 0:
        raise ValueError("chunk sizes must be >= 0")
    rows = []
    state = {"fh": None, "name": None, "records": 0, "nt": 0}

    def close():
        if state["fh"] is not None:
            state["fh"].close()
            rows.append((state["name"], state["records"], state["nt"]))
            state.update(fh=None, name=None, records=0, nt=0)

    def start():
        name = f"{prefix}.chunk{len(rows) + 1:06d}.fa"
        state.update(fh=open(os.path.join(outdir, name), "wb"), name=name)

    def full():
        return ((chunk_nt and state["nt"] >= chunk_nt)
                or (chunk_records and state["records"] >= chunk_records))

    try:
        for line in byte_lines(path):
            if line[:1] == b">":
                if state["fh"] is not None and state["records"] and full():
                    close()
                if state["fh"] is None:
                    start()
                state["records"] += 1
            elif state["fh"] is None:
                start()  # text before the first header stays with the first record
            elif state["records"]:
                state["nt"] += len(line.translate(None, _BLANKS))
            state["fh"].write(line)
    except BaseException:  # a bad input: no chunk is left behind
        if state["fh"] is not None:
            state["fh"].close()
            rows.append((state["name"], 0, 0))
        for name, _, _ in rows:
            try:
                os.unlink(os.path.join(outdir, name))
            except OSError:
                pass
        raise
    if state["fh"] is None and not rows:
        start()  # an empty file: one empty chunk, so the scan reports it
    close()
    with open(os.path.join(outdir, f"{prefix}.chunks.tsv"), "w", encoding="utf-8") as out:
        out.write("#file\trecords\tnt\n")
        for name, records, nt in rows:
            out.write(f"{name}\t{records}\t{nt}\n")
    return rows


def read_manifest(path):
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("#") or not line.strip():
                continue
            name, records, nt = line.rstrip("\n").split("\t")
            rows.append((name, int(records), int(nt)))
    if not rows:
        raise MergeError(f"{path}: the manifest lists no chunks")
    return rows


# --------------------------------------------------------------------------- report parsing
#
# A report is read as a stream of units, each a piece of text that belongs to one miRNA: a
# verbose report's miRNA header line and pair blocks, a quiet report's hit blocks and pair
# trailers, a tsv row, a json object. Reports are read twice (placement, then output), line by
# line, so memory stays small however large the reports are.


class Unit:
    """A piece of one chunk's report. ``mirna`` (index in the miRNA file) and ``pair`` (target
    index in the chunk) are known for units that say so; the others carry ``mirna_id``."""

    __slots__ = ("text", "kind", "mirna_id", "target_id", "mirna", "pair", "strand")

    def __init__(self, text, kind, mirna_id=None, target_id=None, mirna=None, pair=None, strand=None):
        self.text = text
        self.kind = kind
        self.mirna_id = mirna_id
        self.target_id = target_id
        self.mirna = mirna
        self.pair = pair
        self.strand = strand

    @property
    def fixed(self):
        return self.mirna is not None


class Source:
    """A chunk report that can be read more than once: a file, or text (for tests)."""

    def __init__(self, name, path=None, text=None):
        self.name = name
        self.path = path
        self.text = text

    def lines(self):
        if self.path is not None:
            with open(self.path, encoding="utf-8", newline="\n") as fh:
                yield from fh
        else:
            yield from io.StringIO(self.text, newline="\n")

    def first_line(self):
        for line in self.lines():
            return line
        return ""


def detect_format(first_line):
    if first_line.startswith("#mirna_id\t"):
        return "tsv"
    if first_line.startswith("["):
        return "json"
    if first_line.startswith("Read Sequence:"):
        return "miranda"
    if first_line:
        return "miranda-quiet"
    raise MergeError("empty report")


def _strand_line(line, where):
    """``(mirna_id, target_id, strand)`` of a ``>>`` line."""
    fields = line.rstrip("\n").split("\t")
    if len(fields) < 10 or not fields[6].isdigit():
        raise MergeError(f"{where}: unreadable '>>' line: {line.rstrip()!r}")
    return fields[0][2:], fields[1], int(fields[6])


def _renumber(text, new):
    """``text`` with the Strand field of its ``>>`` line set to ``new``."""
    out = []
    for line in text.splitlines(keepends=True):
        if line.startswith(">>"):
            fields = line.split("\t")
            fields[6] = str(new)
            line = "\t".join(fields)
        out.append(line)
    return "".join(out)


def _end_check(tail, where):
    if tail != ["Scan Complete\n", "\n"]:
        raise MergeError(f"{where}: the report does not end with 'Scan Complete' (truncated?)")


def units_verbose(lines, n_mirnas, n_targets, where):
    """A miranda/keyval report without ``--quiet``: per miRNA a header line, then one block per
    target (``Read Sequence:``, a rule, ``Performing Scan``, ...)."""
    piece, p = [], 0

    def finish(piece, p):
        i, j = divmod(p, n_targets + 1)
        if i >= n_mirnas:
            raise MergeError(f"{where}: more sections than {n_mirnas} miRNAs x ({n_targets} targets + 1); "
                             "was it scanned with this miRNA file and this chunk?")
        if j == 0:
            if len(piece) != 1:
                raise MergeError(f"{where}: {piece[1].rstrip()!r} where the next miRNA header was expected "
                                 f"after {n_targets} targets; was it scanned with this miRNA file and this chunk?")
            return Unit(piece[0], "header", mirna=i)
        if len(piece) < 3 or piece[1] != RULE:
            raise MergeError(f"{where}: malformed pair block at {piece[0].rstrip()!r}")
        unit = Unit("".join(piece), "pair", mirna=i, pair=j - 1)
        for line in piece:
            if line.startswith(">>"):
                unit.strand = _strand_line(line, where)[2]
        return unit

    for line in lines:
        if line.startswith("Read Sequence:") and piece:
            yield finish(piece, p)
            piece, p = [], p + 1
        piece.append(line)
    _end_check(piece[-2:], where)
    piece = piece[:-2]
    if piece:
        yield finish(piece, p)
        p += 1
    if p != n_mirnas * (n_targets + 1):
        raise MergeError(f"{where}: {p} sections where {n_mirnas} miRNAs x ({n_targets} targets + 1) were "
                         "expected; was it scanned with this miRNA file and this chunk?")


def units_quiet(lines, n_targets, where):
    """A miranda/keyval report with ``--quiet``: hit blocks, and after a pair's hits the
    ``Seq1,...``/``>>``/``Complete`` trailer when its energies add up to < 0. Hits right before a
    trailer with the same miRNA and target ids are that pair's hits; other hits carry ids only."""
    pending = []   # hit units since the last trailer
    buf = []
    expect_blank = None
    for line in lines:
        buf.append(line)
        if expect_blank is not None:
            if line != "\n":
                raise MergeError(f"{where}: malformed report near {buf[0].rstrip()!r}")
            kind, ids = expect_blank
            expect_blank = None
            if kind == "hit":
                pending.append(Unit("".join(buf), "hit", *ids))
            else:
                if len(buf) != 4 or buf[0] != TRAILER_HEAD or not buf[1].startswith(">>"):
                    raise MergeError(f"{where}: malformed pair trailer near {buf[0].rstrip()!r}")
                mid, tid, strand = _strand_line(buf[1], where)
                if not 1 <= strand:
                    raise MergeError(f"{where}: pair number {strand} is out of range")
                i, j = divmod(strand - 1, n_targets)
                v = len(pending)
                while v > 0 and (pending[v - 1].mirna_id, pending[v - 1].target_id) == (mid, tid):
                    v -= 1
                for unit in pending[v:]:
                    unit.mirna, unit.pair = i, j
                yield from pending
                pending = []
                yield Unit("".join(buf), "trailer", mid, tid, mirna=i, pair=j, strand=strand)
            buf = []
        elif line.startswith("//hit_info\t"):
            fields = dict(f.split("=", 1) for f in line.rstrip("\n").split("\t")[1:] if "=" in f)
            pending.append(Unit("".join(buf), "hit", fields.get("query_id"), fields.get("reference_id")))
            buf = []
        elif line.startswith(">") and not line.startswith(">>"):
            fields = line[1:].split("\t")
            expect_blank = ("hit", (fields[0], fields[1] if len(fields) > 1 else None))
        elif line == "Complete\n":
            expect_blank = ("trailer", None)
    _end_check(buf, where)
    yield from pending


def units_tsv(lines, where):
    lines = iter(lines)
    header = next(lines, "")
    if not header.startswith("#"):
        raise MergeError(f"{where}: no tsv header")
    yield Unit(header, "head")
    for line in lines:
        yield Unit(line, "row", line.split("\t", 1)[0])


def units_json(lines, where):
    lines = iter(lines)
    first = next(lines, "")
    if first == "[]\n":
        if next(lines, None) is not None:
            raise MergeError(f"{where}: text after an empty json array")
        return
    if first != "[\n":
        raise MergeError(f"{where}: not a jaxrna json report")
    prev = None
    for line in lines:
        if prev is not None:
            if prev.endswith(",\n"):
                item = prev[2:-2]
            elif line == "]\n":
                item = prev[2:-1]
            else:
                raise MergeError(f"{where}: malformed json line {prev[:60]!r}")
            yield Unit(item, "object", json.loads(item)["mirna_id"])
        prev = line
    if prev != "]\n":
        raise MergeError(f"{where}: the json report does not end with ']' (truncated?)")


def chunk_units(fmt, source, n_mirnas, n_targets):
    where = source.name
    if fmt == "miranda":
        return units_verbose(source.lines(), n_mirnas, n_targets, where)
    if fmt == "miranda-quiet":
        return units_quiet(source.lines(), n_targets, where)
    if fmt == "tsv":
        return units_tsv(source.lines(), where)
    return units_json(source.lines(), where)


def place(units, mirna_ids, n_targets, where):
    """The miRNA index of every unit of one chunk's report, in order (an array of ints), and the
    tsv header if any. Units without a known place go to the index of their id in miRNA-file
    order, never before an earlier unit's nor after a later one's; if that leaves a choice
    (duplicate ids), it is an error."""
    positions = {}
    for i, mid in enumerate(mirna_ids):
        positions.setdefault(mid, []).append(i)
    n_mirnas = len(mirna_ids)
    fixed = array("b")
    value = array("q")     # the miRNA index, or for unplaced units the index of their id
    keys = {}
    head = None
    for unit in units:
        if unit.kind == "head":
            head = unit.text
            continue
        if unit.fixed:
            if unit.strand is not None and unit.strand != unit.mirna * n_targets + unit.pair + 1:
                raise MergeError(f"{where}: pair number {unit.strand} where {unit.mirna * n_targets + unit.pair + 1} "
                                 "was expected (was --pair-offset used?)")
            if not unit.mirna < n_mirnas or (unit.mirna_id is not None and mirna_ids[unit.mirna] != unit.mirna_id):
                raise MergeError(f"{where}: pair number {unit.strand} does not fit {n_mirnas} miRNAs x "
                                 f"{n_targets} targets; was it scanned with this miRNA file and this chunk, "
                                 "without --pair-offset?")
            fixed.append(1)
            value.append(unit.mirna)
        else:
            if unit.mirna_id not in positions:
                raise MergeError(f"{where}: miRNA id {unit.mirna_id!r} is not in the miRNA file")
            fixed.append(0)
            value.append(keys.setdefault(unit.mirna_id, len(keys)))
    ids = list(keys)
    n = len(value)
    lo = array("q", bytes(8 * n))
    floor = 0
    for u in range(n):
        if fixed[u]:
            if value[u] < floor:
                raise MergeError(f"{where}: text out of miRNA order")
            lo[u] = floor = value[u]
            continue
        cands = [i for i in positions[ids[value[u]]] if i >= floor]
        if not cands:
            raise MergeError(f"{where}: miRNA id {ids[value[u]]!r} out of miRNA-file order")
        lo[u] = floor = cands[0]
    ceil = n_mirnas - 1
    for u in range(n - 1, -1, -1):
        if fixed[u]:
            ceil = value[u]
            continue
        cands = [i for i in positions[ids[value[u]]] if i <= ceil]
        if not cands or cands[-1] != lo[u]:
            raise MergeError(f"{where}: miRNA id {ids[value[u]]!r} occurs more than once in the miRNA file "
                             "and this text could belong to either; run this job without splitting, or give "
                             "the miRNAs distinct ids")
        ceil = lo[u]
    return lo, head


# --------------------------------------------------------------------------- merge


def merge_sources(sources, counts, mirna_ids, out):
    """Write the whole-run report of the chunk reports ``sources`` (in chunk order, with
    ``counts`` target records each) for miRNAs ``mirna_ids`` (in file order) to ``out``."""
    if len(sources) != len(counts):
        raise MergeError(f"{len(sources)} reports for {len(counts)} chunks")
    n_mirnas = len(mirna_ids)
    total = sum(counts)
    before = [sum(counts[:k]) for k in range(len(counts))]
    formats = {detect_format(source.first_line()) for source in sources}
    if len(formats) != 1:
        raise MergeError("the chunk reports are not all of one format")
    fmt = formats.pop()
    # pass 1: where every unit goes
    places, head = [], None
    for k, source in enumerate(sources):
        assign, h = place(chunk_units(fmt, source, n_mirnas, counts[k]), mirna_ids, counts[k], source.name)
        if k and h != head:
            raise MergeError(f"{source.name}: tsv header differs from the first chunk's")
        places.append(assign)
        head = h
    # pass 2: miRNA by miRNA, each chunk's slice in chunk order
    streams = [chunk_units(fmt, source, n_mirnas, counts[k]) for k, source in enumerate(sources)]
    if fmt == "tsv":
        for stream in streams:
            next(stream)  # the header
        out.write(head)
    if fmt == "json":
        out.write("[")
    first_item = True
    lookahead = [None] * len(sources)
    cursor = [0] * len(sources)
    for i in range(n_mirnas):
        header = None
        for k, stream in enumerate(streams):
            while True:
                unit = lookahead[k] if lookahead[k] is not None else next(stream, None)
                if unit is None:
                    break
                if places[k][cursor[k]] != i:
                    lookahead[k] = unit
                    break
                lookahead[k] = None
                cursor[k] += 1
                if unit.kind == "header":
                    if header is None:
                        header = unit.text
                        out.write(unit.text)
                    elif unit.text != header:
                        raise MergeError(f"{sources[k].name}: miRNA header differs from the first chunk's")
                    continue
                text = unit.text
                if unit.strand is not None:
                    text = _renumber(text, unit.mirna * total + before[k] + unit.pair + 1)
                if fmt == "json":
                    out.write(("\n  " if first_item else ",\n  ") + text)
                    first_item = False
                else:
                    out.write(text)
    for k, stream in enumerate(streams):
        if lookahead[k] is not None or next(stream, None) is not None:
            raise MergeError(f"{sources[k].name}: text left over after the last miRNA")
    if fmt in ("miranda", "miranda-quiet"):
        out.write(SCAN_COMPLETE)
    elif fmt == "json":
        out.write("]\n" if first_item else "\n]\n")


def merge_texts(reports, counts, mirna_ids):
    """:func:`merge_sources` on report texts; returns the merged text."""
    out = io.StringIO()
    merge_sources([Source(f"chunk {k + 1}", text=text) for k, text in enumerate(reports)], counts,
                  mirna_ids, out)
    return out.getvalue()


def match_reports(manifest, report_paths):
    """The report of each manifest chunk, in manifest order: the report whose file name starts
    with the chunk file's name less ``.fa``, followed by a dot."""
    chunks = [name[:-3] if name.endswith(".fa") else name for name, _, _ in manifest]
    found = {}
    for path in report_paths:
        base = os.path.basename(path)
        owners = [c for c in chunks if base.startswith(c + ".")]
        if len(owners) != 1:
            raise MergeError(f"{path}: matches {len(owners)} chunks of the manifest")
        if owners[0] in found:
            raise MergeError(f"two reports for chunk {owners[0]}: {found[owners[0]]} and {path}")
        found[owners[0]] = path
    missing = [c for c in chunks if c not in found]
    if missing:
        raise MergeError(f"no report for chunk(s) {', '.join(missing)}")
    return [found[c] for c in chunks]


def merge(manifest_path, mirnas_path, report_paths, output):
    """Merge the chunk reports ``report_paths`` (any order) of the chunks listed in the manifest
    into ``output`` (written atomically; None or '-': standard output)."""
    manifest = read_manifest(manifest_path)
    paths = match_reports(manifest, report_paths)
    sources = [Source(path, path=path) for path in paths]
    counts = [records for _, records, _ in manifest]
    ids = fasta_ids(mirnas_path)
    with atomic_output(output, "wb") as raw:
        out = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        try:
            merge_sources(sources, counts, ids, out)
            out.flush()
        finally:
            out.detach()
