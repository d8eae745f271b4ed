"""High-level folding: strings or records in, :class:`FoldResult` objects out, in input order.

>>> r = fold("GGGAAAUCCC")
>>> r.structure, r.score
('(((...))).', 3)
>>> [x.score for x in fold(["GGGAAAUCC", "GCGCAAAGCGC"], weights="bpmax")]
[7.5, 12]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from typing import Iterable, Iterator, Sequence

import jax
import numpy as np

from jaxrna.alphabet import encode, encode_batch
from jaxrna.batching import batch_size_bucket, bucket_length, plan_batches
from jaxrna.fold.blocked import blocked_fill, dense_table
from jaxrna.fold.traceback import pairs_to_dotbracket, traceback
from jaxrna.io.errors import ResourceError
from jaxrna.io.fasta import Record
from jaxrna.runtime import human_bytes, memory_bytes
from jaxrna.weights import ScoredResult, WeightSet, parse_weights

TILE = 64
#: Bytes per padded position squared: device tiles and row-shifted copy (2 x 4 B, plus group
#: padding), the host copy and the dense table used by the traceback.
BYTES_PER_CELL = 20
#: Below this many sequences in a bucket, keep the batch exact (no power-of-two padding).
_MIN_BATCH_PAD = 2
#: On a GPU, longer sequences are folded one at a time by the packed Pallas schedule
#: (:mod:`jaxrna.fold.gpu`), whose table and traceback stay on the device.
GPU_PACKED_ABOVE = 4096


@dataclass(frozen=True)
class FoldResult(ScoredResult):
    """One folded sequence: pairs are 0-based ``(i, j)`` with ``i < j``."""

    id: str
    sequence: str
    score_units: int
    weights: WeightSet
    min_loop: int
    pairs: tuple[tuple[int, int], ...] | None = None
    description: str = field(default="", compare=False)

    @property
    def length(self) -> int:
        return len(self.sequence)

    @property
    def score_fraction(self) -> Fraction:
        return self.weights.to_fraction(self.score_units)

    @property
    def structure(self) -> str | None:
        return None if self.pairs is None else pairs_to_dotbracket(list(self.pairs), self.length)


def estimate_bytes(length: int) -> int:
    """Memory needed to fold (with traceback) one sequence of ``length`` nt on the CPU path."""
    n = bucket_length(length)
    return BYTES_PER_CELL * n * n


def check_memory(length: int, record_id: str, max_bytes: int | None = None) -> None:
    """Refuse up front a sequence whose table would not fit, with an estimate and advice."""
    limit = max_bytes if max_bytes is not None else int(0.8 * memory_bytes())
    need = estimate_bytes(length)
    if limit and need > limit:
        raise ResourceError(
            f"{length} nt need about {human_bytes(need)} to fold, more than the "
            f"{human_bytes(limit)} allowed; fold it on a GPU with more memory (--backend gpu), "
            f"split it into domains, or raise --max-memory")


@partial(jax.jit, static_argnames=("min_loop", "tile"))
def _batched_fill(codes, weights, min_loop, tile):
    return jax.vmap(lambda c: blocked_fill(c, weights, min_loop=min_loop, tile=tile))(codes)


def _fill(codes: np.ndarray, weights: WeightSet, min_loop: int, one_at_a_time: bool):
    """Tiled tables of a padded batch: one vmapped program, or one call per sequence.

    On a CPU, XLA runs the tile schedule of one sequence several times faster than the same
    schedule vmapped over a batch (the batched in-tile gathers dominate), so there batches of
    non-trivial length are folded one sequence per call of the same compiled program.
    """
    if one_at_a_time:
        return [blocked_fill(c, weights.matrix(), min_loop=min_loop, tile=TILE) for c in codes]
    return _batched_fill(codes, weights.matrix(), min_loop, TILE)


def _fold_batch(seqs: list[str], weights: WeightSet, min_loop: int, with_pairs: bool,
                backend: str = "cpu"):
    padded = bucket_length(max(len(s) for s in seqs), TILE)
    one_at_a_time = backend == "cpu" and padded > TILE
    rows = len(seqs) if (len(seqs) < _MIN_BATCH_PAD or one_at_a_time) else batch_size_bucket(len(seqs))
    codes, lengths = encode_batch(seqs + [""] * (rows - len(seqs)), padded)
    tiles = _fill(codes, weights, min_loop, one_at_a_time)
    t = TILE
    if not with_pairs:
        last = np.maximum(lengths[:len(seqs)] - 1, 0)
        scores = [tiles[b][0, last[b] // t, 0, last[b] % t] for b in range(len(seqs))]
        return [(int(s) if n > 1 else 0, None) for s, n in zip(jax.device_get(scores), lengths)]
    host = [np.asarray(x) for x in tiles]
    out = []
    wm = weights.matrix()
    for b, seq in enumerate(seqs):
        n = len(seq)
        if n <= 1:
            out.append((0, ()))
            continue
        table = dense_table(host[b], n)
        pairs = traceback(table, encode(seq), wm, min_loop)
        out.append((int(table[0, n - 1]), tuple(pairs)))
    return out


def fold_records(records: Iterable[Record], weights: WeightSet | str = "unit", min_loop: int = 3,
                 with_pairs: bool = True, chunk: int = 2048, max_bytes: int | None = None,
                 batch_budget: int = 1 << 30, on_done=None,
                 backend: str = "cpu", on_error=None) -> Iterator[FoldResult]:
    """Fold a stream of records, yielding results in input order.

    Records are read ``chunk`` at a time, grouped by padded length and folded in batches of
    at most ``batch_budget`` bytes; ``on_done(k)`` is called as ``k`` more records finish.
    ``backend`` is a JAX platform name (``"cpu"`` or ``"gpu"``) to compute on. A record that
    cannot be folded (too large) raises :class:`ResourceError`, or, when ``on_error(record,
    error)`` is given, is reported to it and skipped.
    """
    if isinstance(weights, str):
        weights = parse_weights(weights)
    if min_loop < 0:
        raise ValueError("min_loop must be >= 0")
    buffer: list[Record] = []

    def flush() -> Iterator[FoldResult]:
        lengths = [len(r) for r in buffer]
        results: dict[int, tuple] = {}
        for batch in plan_batches(lengths, bytes_per_item=lambda n: BYTES_PER_CELL * n * n,
                                  budget=batch_budget, base=TILE):
            with jax.default_device(jax.devices(backend)[0]):
                done = _fold_batch([buffer[i].sequence for i in batch], weights, min_loop,
                                   with_pairs, backend)
            results.update(zip(batch, done))
            if on_done:
                on_done(len(batch))
        for i, rec in enumerate(buffer):
            score, pairs = results[i]
            yield FoldResult(id=rec.id, sequence=rec.sequence, score_units=score,
                             weights=weights, min_loop=min_loop, pairs=pairs,
                             description=rec.description)

    for rec in records:
        packed = backend == "gpu" and len(rec) > GPU_PACKED_ABOVE
        try:
            if packed:
                result = _fold_gpu_packed(rec, weights, min_loop, with_pairs, max_bytes)
            else:
                check_memory(len(rec), rec.id, max_bytes)
        except ResourceError as exc:
            if on_error is None:
                raise
            on_error(rec, exc)
            continue
        if packed:
            yield from flush()                 # keep input order
            buffer = []
            if on_done:
                on_done(1)
            yield result
            continue
        buffer.append(rec)
        if len(buffer) >= chunk:
            yield from flush()
            buffer = []
    if buffer:
        yield from flush()


def _fold_gpu_packed(rec: Record, weights: WeightSet, min_loop: int, with_pairs: bool,
                     max_bytes: int | None) -> FoldResult:
    """One long sequence through the packed GPU schedule (memory checked up front)."""
    from jaxrna.fold.gpu import GpuMemoryError, fold_gpu

    try:
        with jax.default_device(jax.devices("gpu")[0]):
            score, pairs = fold_gpu(encode(rec.sequence), weights.matrix(), min_loop,
                                    with_pairs=with_pairs, record_id=rec.id, max_bytes=max_bytes,
                                    pad_to=bucket_length(len(rec), TILE))
    except GpuMemoryError as exc:
        raise ResourceError(str(exc)) from None
    return FoldResult(id=rec.id, sequence=rec.sequence, score_units=score, weights=weights,
                      min_loop=min_loop, pairs=None if pairs is None else tuple(pairs),
                      description=rec.description)


def fold(sequences: str | Sequence[str], weights: WeightSet | str = "unit", min_loop: int = 3,
         with_pairs: bool = True, backend: str = "auto") -> FoldResult | list[FoldResult]:
    """Fold one sequence (returns a :class:`FoldResult`) or a list (returns a list).

    Sequences are strings over ACGU (T read as U; other IUPAC codes never pair).
    ``weights``: ``"unit"``, ``"bpmax"``, ``"integer"``, ``"GC=3,AU=2,GU=1"`` or a
    :class:`~jaxrna.weights.WeightSet`. A pair (i, j) needs ``j - i > min_loop``.
    ``backend``: ``"auto"`` (the GPU when JAX sees one), ``"cpu"`` or ``"gpu"``.
    """
    from jaxrna.runtime import resolve_backend

    single = isinstance(sequences, str)
    seqs = [sequences] if single else list(sequences)
    recs = [Record(id=f"seq{i + 1}" if not single else "seq", sequence=s.upper().replace("T", "U"))
            for i, s in enumerate(seqs)]
    results = list(fold_records(recs, weights, min_loop, with_pairs=with_pairs,
                                backend=resolve_backend(backend)))
    return results[0] if single else results
