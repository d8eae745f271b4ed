"""One block of miRNAs against one chunk of targets, as a host job: traced candidates in, the
block's report text out.

:class:`BlockJob` carries what a job needs (the chunk's ids and letters, the miRNAs, their
traced candidates, the writer's spec); :func:`render_block` selects the hits
(:mod:`jaxrna.targets.select`), folds their energies and renders each miRNA's text;
:func:`run_block` writes it to the job's file and :func:`fold_inputs_block` gives a job's hits
as the device energy engine folds them. Jobs pickle: they run in worker processes
(:mod:`jaxrna.targets.output`), which import this module and never JAX.

>>> import io
>>> from jaxrna.formats.miranda import writer_for
>>> from jaxrna.targets.select import TargetText, Traced
>>> chunk = ChunkInfo(["t1"], ["t1"], TargetText.from_sequences(["AAAA"]), seen=0, total=1)
>>> tr = Traced.from_moves(q=[0], t=[0], i=[4], j=[4], score=[20], moves=[[1, 1, 1, 1]])
>>> job = BlockJob(chunk, [0], ["m1"], ["m1"], ["UUUU"], tr,
...                writer_for("miranda", None, no_energy=True, quiet=True).spec(), 0, True)
>>> texts, hits = render_block(job)
>>> print(texts[0].splitlines()[1])
   Forward:	Score: 20.000000  Q:1 to 5  R:1 to 4 Align Len (4) (100.00%) (100.00%)
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field

import numpy as np

from jaxrna.targets.records import PairResult
from jaxrna.targets.scoring import ScanParams
from jaxrna.targets.select import RowsRef, TargetText, Traced, accepted_hits, select


@dataclass
class ChunkInfo:
    """What the report of one chunk of targets needs (ids, descriptions, letters)."""

    ids: list[str]
    descriptions: list[str]
    text: TargetText
    seen: int    # targets before this chunk
    total: int   # targets in the whole file (miRanda's running pair counter)


@dataclass
class BlockJob:
    """One block of miRNAs against one chunk: traced candidates in, report text out."""

    chunk: ChunkInfo | str           # or the path of a pickled ChunkInfo (worker processes)
    ks: list[int]                    # the miRNAs' indices in the run
    ids: list[str]
    descriptions: list[str]
    sequences: list[str]
    traced: Traced | RowsRef         # q indexes ks (RowsRef: in a file, for worker processes)
    writer: object                   # TargetsWriter.spec(), or (in this process) a writer
    pair_offset: int
    first_chunk: bool                # start each miRNA's text with its own header
    params: ScanParams = field(default_factory=ScanParams)
    energy: object = None            # an energy engine (or function), None with --no-energy
    out_path: str | None = None
    encoding: str = "utf-8"
    energies: object = None          # the block's hit energies, folded elsewhere (kcal/mol)


_CHUNKS: dict[str, ChunkInfo] = {}


def _chunk_of(job: BlockJob) -> ChunkInfo:
    if isinstance(job.chunk, ChunkInfo):
        return job.chunk
    if job.chunk not in _CHUNKS:
        _CHUNKS.clear()  # one chunk at a time
        with open(job.chunk, "rb") as fh:
            _CHUNKS[job.chunk] = pickle.load(fh)
    return _CHUNKS[job.chunk]


def render_block(job: BlockJob) -> tuple[list[str], list[int]]:
    """The report text and the number of accepted hits of each miRNA of a block, in order."""
    chunk = _chunk_of(job)
    if isinstance(job.writer, tuple):  # a writer's spec(), rebuilt here (a worker process)
        fmt, no_energy, quiet, build = job.writer
        writer = build(fmt, None, no_energy=no_energy, quiet=quiet)
    else:  # a writer object (rendering in this process)
        writer = job.writer
    table = _table(job, chunk)
    bounds = table.q.searchsorted(range(len(job.ks) + 1)).tolist() if len(table) else [0] * (len(job.ks) + 1)
    energies = None                  # each table row's energy, for a writer that takes them
    if not job.params.no_energy and getattr(writer, "table_energies", False):
        energies = job.energies
        if energies is None:
            from jaxrna.targets.energy import fold_energies
            from jaxrna.targets.select import fold_strings

            energies = fold_energies(fold_strings(table), job.energy)
        energies = np.asarray(energies, np.float64)
        if len(energies) != len(table):
            raise AssertionError(f"{len(energies)} energies for {len(table)} hits (a bug)")
    threshold = job.params.energy_threshold
    per_q = None
    texts, hits = [], []
    for x, k in enumerate(job.ks):
        n = len(job.sequences[x])
        head = writer.mirna_text(job.ids[x], job.descriptions[x], n) if job.first_chunk else ""
        pair_base = job.pair_offset + k * chunk.total + chunk.seen + 1
        lo, hi = bounds[x], bounds[x + 1]
        mine = None if energies is None else energies[lo:hi]
        text = writer.table_text(job.ids[x], n, table, lo, hi, chunk, pair_base, energies=mine,
                                 energy_threshold=threshold)
        if text is not None:
            hits.append(hi - lo if mine is None else int((mine < threshold).sum()))
        else:  # a format rendered a record at a time (tsv, json)
            if per_q is None:
                per_q = {}
                for (q, t), h in accepted_hits(table, job.params, job.energy, job.energies).items():
                    per_q.setdefault(q, {})[t] = h
            found = per_q.get(x, {})
            hits.append(sum(len(h) for h in found.values()))
            wanted = range(len(chunk.ids)) if writer.pairs_need_text() else sorted(found)
            text = "".join(writer.pair_text(PairResult(
                job.ids[x], chunk.ids[t], n, int(chunk.text.lengths[t]), pair_base + t,
                found.get(t, []), job.descriptions[x], chunk.descriptions[t])) for t in wanted)
        texts.append(head + text)
    return texts, hits


def _table(job: BlockJob, chunk: ChunkInfo):
    """The block's accepted hits before the energy filter (:func:`~jaxrna.targets.select.select`)."""
    traced = job.traced.load() if isinstance(job.traced, RowsRef) else job.traced
    return select(traced, job.sequences, chunk.text, job.params.strict)


def fold_inputs_block(job: BlockJob) -> tuple:
    """A block's hits as the device folds them (in a worker process): ``(FoldInputs of the
    distinct fold strings, their special hairpins, each hit's index among them, (start, end,
    CPU seconds))``."""
    from jaxrna.targets.energy import unique_strings, encode, special_hairpins
    from jaxrna.targets.select import fold_strings

    start, cpu = time.perf_counter(), time.process_time()
    uniq, where = unique_strings(fold_strings(_table(job, _chunk_of(job))))
    inputs = encode(uniq)
    special = special_hairpins(inputs)
    return inputs, special, where, (start, time.perf_counter(), time.process_time() - cpu)


def run_block(job: BlockJob) -> tuple[str, list[int], list[int], tuple[float, float, float]]:
    """Render a block into ``job.out_path``: ``(path, bytes per miRNA, hits per miRNA, (start,
    end, CPU seconds))``."""
    start, cpu = time.perf_counter(), time.process_time()
    texts, hits = render_block(job)
    sizes = []
    with open(job.out_path, "wb") as fh:
        for text in texts:
            data = text.encode(job.encoding)
            sizes.append(len(data))
            fh.write(data)
    return job.out_path, sizes, hits, (start, time.perf_counter(), time.process_time() - cpu)
