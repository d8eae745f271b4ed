"""miRNA target scanning that reproduces miRanda 3.3a: the library entry points.

:func:`scan_targets` returns every (miRNA, target) pair's accepted hits in miRanda's order
(miRNA-major: every target for the first miRNA, then the second, ...). :func:`write_scan` streams
a target file of any size chunk by chunk and writes a report (``miranda``, ``keyval``, ``tsv``
or ``json``): hit selection and text run in worker processes, block by block, and are written in
miRanda's order (:mod:`jaxrna.targets.output`), so the output never depends on chunking,
batching, devices or workers.

>>> from jaxrna.targets import scan_targets
>>> res = scan_targets(["GTGAGATCATTTTGAAAGCTG"], ["TAGTTTTCACAATGATCTCGG"], no_energy=True)
>>> [(r.mirna_id, r.target_id, [h.score for h in r.hits]) for r in res]
[('mirna1', 'target1', [167])]
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from dataclasses import replace
from typing import Iterable, Iterator

import numpy as np

from jaxrna.io import cleanup
from jaxrna.io.errors import InputError, OutputError
from jaxrna.io.fasta import Record
from jaxrna.io.source import copy_to, is_stream
from jaxrna.stages import stage, staged
from jaxrna.targets.engine import Engine, make_target, prepare_query
from jaxrna.targets.records import PairResult
from jaxrna.targets.scoring import ScanParams
from jaxrna.targets.sequences import LETTERS, count_records, read_bulk_once, read_records

log = logging.getLogger("jaxrna")

#: miRanda's accepted sequence letters (IUPAC codes and X, any case).
MIRANDA_LETTERS = frozenset("ACGTURYSWKMBDHVNX")
#: Target nucleotides per chunk (the unit of streaming and of the bulk scan).
DEFAULT_CHUNK_NT = 64_000_000
#: miRNAs per host job (hit selection and text in a worker process)
JOB_MIRNAS = 2
#: Scans of fewer cells (miRNA nt x target nt of the first chunk) select hits in this process
#: unless energies are folded (starting the worker processes would cost more than it saves)
POOL_MIN_CELLS = 10**10


def check_letters(record: Record) -> Record:
    """Refuse letters miRanda refuses (it accepts IUPAC nucleotide codes and X)."""
    bad = set(record.sequence) - set(LETTERS)
    if bad:
        ch = min(bad)
        pos = record.sequence.index(ch) + 1
        raise InputError(f"character {ch!r} at sequence position {pos} is not an IUPAC nucleotide code",
                         path=record.source, line=record.line, record=record.id)
    return record


def _as_records(items, prefix: str) -> list[Record]:
    out = []
    for k, item in enumerate(items):
        if isinstance(item, Record):
            out.append(check_letters(item))
        elif isinstance(item, tuple):
            rid, seq = item
            out.append(check_letters(Record(id=rid, sequence=seq.upper(), description=rid)))
        else:
            rid = f"{prefix}{k + 1}"
            out.append(check_letters(Record(id=rid, sequence=str(item).upper(), description=rid)))
    return out


def _params(params: ScanParams | None, options: dict) -> ScanParams:
    params = params or ScanParams()
    return replace(params, **options) if options else params


def energy_for(params: ScanParams, engine: Engine, energy_engine: str | None):
    """The run's energy engine (:func:`jaxrna.targets.energy.make_engine`), None without energies."""
    if params.no_energy:
        return None
    from jaxrna.targets.energy import make_engine

    return make_engine(energy_engine, engine.devices[0].platform, engine.devices)


def scan_targets(mirnas, targets, params: ScanParams | None = None, *, chunk_nt: int = DEFAULT_CHUNK_NT,
                 pair_offset: int = 0, only_hits: bool = False, energy_engine: str | None = None,
                 **options) -> list[PairResult]:
    """Scan every miRNA against every target; one :class:`PairResult` per pair, miRNA-major.

    ``mirnas``/``targets``: a FASTA path, or a sequence of strings, ``(id, sequence)`` tuples
    or :class:`~jaxrna.io.fasta.Record` objects. Options are :class:`ScanParams` fields
    (``score_threshold``, ``energy_threshold``, ``scale``, ``gap_open``, ``gap_extend``,
    ``strict``, ``no_energy``). ``only_hits`` leaves out pairs without hits.
    ``energy_engine``: ``auto`` (default, or ``JAXRNA_ENERGY_ENGINE``), ``device``, ``cpu`` or
    ``vienna`` (:mod:`jaxrna.targets.energy`; the energies are the same).
    """
    params = _params(params, options)
    mirna_records = list(read_records(mirnas)) if isinstance(mirnas, (str, os.PathLike)) \
        else _as_records(mirnas, "mirna")
    target_iter = read_records(targets) if isinstance(targets, (str, os.PathLike)) \
        else iter(_as_records(targets, "target"))
    engine = Engine(params)
    engine.energy = energy_for(params, engine, energy_engine)
    queries = [prepare_query(r.id, r.description, r.sequence, params) for r in mirna_records]
    found = {}
    meta = []
    for c, (chunk, last) in enumerate(_chunks_and_last(target_iter, chunk_nt)):
        if c == 0 and not last:     # one chunk class for the run (issue 26)
            engine.expect_chunks(chunk_nt, max(len(r) for r in chunk))
        base = len(meta)
        meta.extend((r.id, r.description, len(r)) for r in chunk)
        hits = engine.scan_chunk(queries, [make_target(r.id, r.description, r.sequence) for r in chunk])
        for (k, t), h in hits.items():
            found[(k, base + t)] = h
    results = []
    for k, q in enumerate(mirna_records):
        for t, (tid, tdesc, tlen) in enumerate(meta):
            h = found.get((k, t), [])
            if only_hits and not h:
                continue
            results.append(PairResult(q.id, tid, len(q), tlen, pair_offset + k * len(meta) + t + 1, h,
                                      q.description, tdesc))
    return results


def write_scan(mirnas_path: str, targets_path: str, writer, params: ScanParams, *,
               chunk_nt: int = DEFAULT_CHUNK_NT, pair_offset: int = 0, progress=None,
               engine_options: dict | None = None, host_workers: int | None = None,
               energy_engine: str | None = None) -> dict:
    """Scan two FASTA files and write the report through ``writer``
    (:class:`~jaxrna.formats.miranda.TargetsWriter`). Returns run statistics.
    ``energy_engine``: as for :func:`scan_targets`.
    ``engine_options`` go to :class:`~jaxrna.targets.engine.Engine` (kernel, devices, ...);
    ``host_workers``: processes for hit selection and text (default: every core but one on
    machines with 4 or more, for scans of at least :data:`POOL_MIN_CELLS` cells or with
    energies; else none: all in this process)."""
    with stage("read"):
        mirna_records = list(read_records(mirnas_path))
    with stage("encode"):
        queries = [prepare_query(r.id, r.description, r.sequence, params) for r in mirna_records]
    tmp_input = None
    given = targets_path
    try:
        if is_stream(targets_path) and len(queries) > 1:  # stdin or a FIFO: read it twice
            tmp_input = tempfile.NamedTemporaryFile(prefix="jaxrna-targets-", suffix=".fa", delete=False)
            cleanup.register(tmp_input.name)
            try:
                copy_to(targets_path, tmp_input)
                tmp_input.close()
            except OSError as exc:
                raise OutputError(f"cannot copy {'standard input' if given == '-' else given} "
                                  f"there: {exc.strerror or exc}",
                                  path=os.path.dirname(tmp_input.name)) from None
            targets_path = tmp_input.name
        countable = len(queries) > 1 and not is_stream(targets_path)
        return _write_scan(mirna_records, queries, targets_path, countable, writer, params,
                           chunk_nt, pair_offset, progress, engine_options or {}, host_workers,
                           energy_engine)
    except InputError as exc:  # name the file given, not the copy
        if tmp_input is None or exc.path != tmp_input.name:
            raise
        raise InputError(exc.message, path=given, line=exc.line, record=exc.record) from None
    finally:
        if tmp_input is not None:
            tmp_input.close()
            cleanup.remove(tmp_input.name)
            cleanup.unregister(tmp_input.name)


def _chunks_and_last(records: Iterable[Record], chunk_nt: int) -> Iterator[tuple[list[Record], bool]]:
    """Chunks of ``records``, each closed by the record that brings it to ``chunk_nt``
    nucleotides, with whether it is the last (one record read ahead)."""
    it = iter(records)
    chunk, size = [], 0
    ahead = next(it, None)
    while ahead is not None:
        rec, ahead = ahead, None
        chunk.append(rec)
        size += len(rec)
        ahead = next(it, None)
        if size >= chunk_nt and ahead is not None:
            yield chunk, False
            chunk, size = [], 0
    if chunk:
        yield chunk, True


def _target_chunks(path: str, chunk_nt: int):
    """``(ids, descriptions, TargetText, last, records in the file or None)`` per chunk of at
    least ``chunk_nt`` nucleotides (the record that reaches it ends the chunk): read in bulk
    where the file allows (:func:`~jaxrna.targets.sequences.read_bulk`, or what a
    :func:`~jaxrna.targets.sequences.read_ahead` of it has read), else streamed."""
    from jaxrna.targets.select import TargetText

    bulk = read_bulk_once(path)
    if bulk is None:
        for records, last in _chunks_and_last(read_records(path), chunk_nt):
            yield ([r.id for r in records], [r.description for r in records],
                   TargetText.from_sequences([r.sequence for r in records]), last, None)
        return
    ids, descriptions, letters, lengths = bulk
    cum = np.cumsum(lengths)
    first = 0
    while first < len(ids):
        done = int(cum[first - 1]) if first else 0
        end = min(int(np.searchsorted(cum, done + chunk_nt, side="left")) + 1, len(ids))
        yield (ids[first:end], descriptions[first:end],
               TargetText.from_lengths(letters[done:int(cum[end - 1])], lengths[first:end]),
               end == len(ids), len(ids))
        first = end


def _job_parts(ks: list[int], bi: int, n_blocks: int, engine: Engine) -> list[list[int]]:
    """Block ``bi``'s host jobs: :data:`JOB_MIRNAS` miRNAs each, one each in the blocks the
    device threads finish last (the report's tail after the devices is one short job)."""
    size = 1 if bi >= n_blocks - len(engine.devices) * engine.threads_per_device else JOB_MIRNAS
    return [ks[s:s + size] for s in range(0, len(ks), size)]


def _write_scan(mirna_records, queries, targets_path, countable, writer, params, chunk_nt,
                pair_offset, progress, engine_options, host_workers, energy_engine=None) -> dict:
    """The scan of :func:`write_scan`. miRanda's pair counter needs the number of targets: the
    first chunk gives it when it is the only one, else the file is counted first
    (``countable``: it can be read twice)."""
    from jaxrna.pipeline import default_workers
    from jaxrna.targets.blocks import BlockJob, ChunkInfo
    from jaxrna.targets.output import OrderedReport

    engine = Engine(params, **engine_options)
    engine.energy = energy_for(params, engine, energy_engine)
    spec = writer.spec()
    workers = default_workers() if host_workers is None else host_workers
    if not spec[0]:
        workers = 0  # a writer the workers cannot rebuild: render here
    # host jobs of a few miRNAs each (a short tail once the devices are done)
    blocks = engine.blocks(len(queries))
    jobs = [part for bi, ks in enumerate(blocks) for part in _job_parts(ks, bi, len(blocks), engine)]
    report = None
    writer.begin()
    stats = {"mirnas": len(queries), "targets": 0, "pairs": 0, "hits": 0, "cells": 0,
             "target_nt": 0}
    mirna_nt = sum(q.n for q in queries)
    n_targets = None
    clock = time.perf_counter
    marks = {"start": clock()}
    engine.timeline.mark("start", at=marks["start"])
    try:
        seen = 0
        last = False
        for c, (ids, descriptions, targets, last, known) in enumerate(
                staged("read", _target_chunks(targets_path, chunk_nt))):
            if c == 0:
                n_targets = known if known is not None else len(targets) if last else \
                    count_records(targets_path) if countable else None
                if progress is not None and n_targets is not None:
                    progress.total = len(queries) * n_targets
            if c == 0 and not last:     # one chunk class for the run (issue 26)
                engine.expect_chunks(chunk_nt, int(targets.lengths.max()))
            total = n_targets if n_targets is not None else seen + len(targets)
            engine.timeline.mark("targets read", c)
            if report is None:  # worker processes pay off for large scans only
                small = (host_workers is None and params.no_energy
                         and mirna_nt * int(targets.lengths.sum()) < POOL_MIN_CELLS)
                report = OrderedReport(writer, jobs, 0 if small else workers, timeline=engine.timeline,
                                       energy=engine.energy)
                if report.pool is not None:  # workers read the candidates from files
                    engine.spill_dir = report.tmp.name
            info = ChunkInfo(ids, descriptions, targets, seen, total)
            shared = report.chunk_path(c, info)
            marks.setdefault("first chunk ready", clock())
            engine.timeline.mark("chunk ready", c)
            ji = 0
            for bi, (ks, traced) in enumerate(
                    staged("device", engine.iter_traced(queries, targets, progress=progress))):
                t0 = clock()
                report.hold(traced)          # its file stays until every part is handed out
                try:
                    for part in _job_parts(ks, bi, len(blocks), engine):
                        s = part[0] - ks[0]
                        sub = traced.part(s, s + len(part))  # the candidates come by miRNA
                        job = BlockJob(shared, part, [mirna_records[k].id for k in part],
                                       [mirna_records[k].description for k in part],
                                       [queries[k].sequence for k in part], sub,
                                       spec if spec[0] else writer, pair_offset, c == 0, params,
                                       engine.energy)
                        report.submit(c, ji, job, last)
                        ji += 1
                finally:
                    report.release(traced)
                engine.timings["select"] += clock() - t0
            chunk_total = int(targets.lengths.sum())
            seen += len(targets)
            stats["targets"] = seen
            stats["target_nt"] += chunk_total
            stats["cells"] += mirna_nt * chunk_total
        if n_targets is not None and n_targets != seen:  # pragma: no cover - file changed under us
            raise InputError(f"the target file changed while it was read ({n_targets} then {seen} records)",
                             path=targets_path)
        if report is None:  # no targets at all
            report = OrderedReport(writer, jobs, 0)
            report.last_chunk = -1
        t0 = clock()
        marks["devices done"] = clock()
        engine.timeline.mark("devices done")
        with stage("format"):        # the host jobs still running
            report.flush(wait=True)
        engine.timings["select"] += clock() - t0
        writer.end()
        engine.timeline.mark("end")
    finally:
        if report is not None:
            report.close()
    stats["hits"] = report.hits
    stats["pairs"] = stats["mirnas"] * stats["targets"]
    stats["timings"] = dict(engine.timings)
    stats["samples"] = {k: list(v) for k, v in engine.samples.items()}
    stats["timings"]["setup"] = marks.get("first chunk ready", marks["start"]) - marks["start"]
    stats["timings"]["tail"] = clock() - marks.get("devices done", clock())
    stats["energy_engine"] = getattr(engine.energy, "name", None)
    if report.energies is not None:
        stats["energy"] = dict(report.energies.stats)
    return stats
