"""miRNAs and targets as the scan takes them: a miRNA's row tables padded to its height, and
the sizes that follow from the options and the run's tallest miRNA (the exact lane overlap
bound, the refill lead, the value type). See :mod:`jaxrna.targets.engine`.

>>> from jaxrna.targets.scoring import ScanParams
>>> q = prepare_query("m", "", "GUGAGAUCAUUUUGAAAGCUG", ScanParams())
>>> q.n, q.height, q.pad, q.profile.shape
(21, 24, 3, (5, 24, 1))
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax.numpy as jnp
import numpy as np

from jaxrna.alphabet import encode
from jaxrna.targets.scan import WORD
from jaxrna.targets.scoring import (RowTables, ScanParams, exact_overlap, gain_bound, max_gain,
                                    row_tables)
from jaxrna.targets.sizes import ROW_STEP, SEGMENT_MIN, bucket, round_up


@dataclass
class Query:
    """One miRNA prepared for scanning (row tables padded at the top to ``height`` rows)."""

    id: str
    description: str
    sequence: str                  # as read (case and T/U kept for display)
    tables: RowTables
    height: int
    gain: int
    overlap: int | None            # exact lane overlap in columns (None: gaps are free)
    profile: np.ndarray = field(repr=False)   # (5, height, 1)
    gap_open: np.ndarray = field(repr=False)  # (height, 1)
    gap_extend: np.ndarray = field(repr=False)
    seed: np.ndarray = field(repr=False)

    @property
    def n(self) -> int:
        return len(self.sequence)

    @property
    def pad(self) -> int:
        return self.height - self.n

    def tables_at(self, height: int):
        """(profile (5, height), gap_open, gap_extend, seed (height,)) padded at the top."""
        extra = height - self.height
        profile = np.concatenate([np.full((5, extra), -(self.gain + 1), np.int32), self.profile[:, :, 0]], axis=1)
        zeros = np.zeros(extra, np.int32)
        return (profile, np.concatenate([zeros, self.gap_open[:, 0]]),
                np.concatenate([zeros, self.gap_extend[:, 0]]),
                np.concatenate([np.zeros(extra, bool), self.seed[:, 0]]))


def prepare_query(id: str, description: str, sequence: str, params: ScanParams) -> Query:
    tables = row_tables(sequence, params)
    n = tables.n
    height = round_up(max(n, 1), ROW_STEP)
    gain = max_gain(tables)
    pad = height - n
    profile = np.full((5, height, 1), -(gain + 1), dtype=np.int32)
    profile[:, pad:, 0] = tables.profile.T
    gap_open = np.zeros((height, 1), np.int32)
    gap_extend = np.zeros((height, 1), np.int32)
    seed = np.zeros((height, 1), bool)
    gap_open[pad:, 0] = tables.open
    gap_extend[pad:, 0] = tables.extend
    seed[pad:, 0] = tables.seed
    overlap = exact_overlap(n, gain, params)
    return Query(id, description, sequence, tables, height, gain, overlap,
                 profile, gap_open, gap_extend, seed)


def overlap_bound(height: int, params: ScanParams) -> int | None:
    """The largest exact overlap W of any miRNA up to ``height`` nt under ``params`` (None:
    gaps are free): the run's lead and lane room follow from it, so they are fixed by the
    options and the run's tallest height, whatever the miRNAs' letters."""
    return exact_overlap(height, gain_bound(height, params), params)


def lead_for(height: int, params: ScanParams) -> int:
    """Columns refilled before a tile (at least 2 W, W = :func:`overlap_bound`): a power of two
    less one word, so a segment is a power of two long."""
    return bucket(2 * overlap_bound(height, params) + WORD, SEGMENT_MIN) - WORD


def value_dtype(queries: list[Query], params: ScanParams):
    """int16 when every value the fill can reach fits comfortably, else int32 (judged by the
    bound for the tallest miRNA's height: the same for every run of that option class)."""
    if not queries:
        return jnp.int16
    if params.gaps_can_gain:
        return jnp.int32
    gain = gain_bound(max(q.height for q in queries), params)
    low = -(gain + 1)  # padding rows' scores (the lowest of any profile)
    gaps = (max(abs(params.gap_open), abs(params.seed_open))
            + max(abs(params.gap_extend), abs(params.seed_extend)))
    bound = 2 * gain + abs(low) + 2 * gaps + 2
    return jnp.int16 if bound < 30000 else jnp.int32


@dataclass
class Target:
    id: str
    description: str
    sequence: str

    def __len__(self) -> int:
        return len(self.sequence)

    @property
    def codes(self) -> np.ndarray:
        return encode(self.sequence)


def make_target(id: str, description: str, sequence: str) -> Target:
    return Target(id, description, sequence)
