"""miRanda 3.3a scoring: options, pair scores, and the per-row tables of one miRNA.

Everything here follows ``../shared/specs/miranda.md``. The miRNA is reversed before alignment:
row ``r`` (0-based here, row ``r + 1`` of miRanda's matrix) holds miRNA position
``p = n - r`` counted from its 5' end. Positions p = 1, n-1 and n score 0 (all positions when
n <= 3); seed positions p = 2..8 score ``trunc(scale * s)`` and use scaled gap penalties, and a
seed base is never opposite a gap (state c is pinned to -1 in seed rows).

>>> p = ScanParams()
>>> t = row_tables("GUGAGAUCAUUUUGAAAGCUG", p)
>>> t.profile.shape, int(t.seed.sum()), int(t.open[t.seed][0]), int(t.extend[t.seed][0])
((21, 5), 7, -36, -16)
>>> t.profile[-1].tolist(), t.profile[-2].tolist()   # p = 1 and p = 2 (miRNA base U)
([0, 0, 0, 0, 0], [20, -12, 4, -12, -4])
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from jaxrna.alphabet import encode

#: Pair scores (miRNA base, target base); codes A=0 C=1 G=2 U=3, 4 = any ambiguity code.
MATCH, WOBBLE, MISMATCH, MASKED = 5, 1, -3, -1
#: Seed positions (from the miRNA 5' end) scored with ``scale`` and scaled gaps.
SEED_FIRST, SEED_LAST = 2, 8
#: Diagonals within this distance of a better candidate are dropped; spans overlapping an
#: accepted hit by more than this many positions are rejected.
DIAGONAL_SPREAD = 6
SPAN_OVERLAP = 6

_WC = {(0, 3), (3, 0), (1, 2), (2, 1)}
_WOBBLE = {(2, 3), (3, 2)}


def pair_score(q: int, t: int) -> int:
    """Unweighted score of miRNA base code ``q`` against target base code ``t``.

    >>> pair_score(0, 3), pair_score(2, 3), pair_score(0, 0), pair_score(4, 1)
    (5, 1, -3, -1)
    """
    if q == 4 or t == 4:
        return MASKED
    if (q, t) in _WC:
        return MATCH
    if (q, t) in _WOBBLE:
        return WOBBLE
    return MISMATCH


def pair_symbol(q: int, t: int) -> str:
    """The alignment middle-line symbol: ``|`` Watson-Crick, ``:`` wobble, else a space."""
    if q == 4 or t == 4:
        return " "
    if (q, t) in _WC:
        return "|"
    if (q, t) in _WOBBLE:
        return ":"
    return " "


_PAIR_SCORES = np.array([[pair_score(q, t) for t in range(5)] for q in range(5)], np.int32)


def c_trunc(x: float) -> int:
    """C's double -> int conversion (truncation toward zero)."""
    return int(math.trunc(x))


@dataclass(frozen=True)
class ScanParams:
    """miRanda's options, with its defaults.

    ``score_threshold``, ``energy_threshold``, ``gap_open`` and ``gap_extend`` are whole numbers
    (miRanda reads them with ``atoi``); ``scale`` may be fractional. ``no_energy`` skips folding.
    """

    score_threshold: int = 140
    energy_threshold: int = 1
    scale: float = 4.0
    gap_open: int = -9
    gap_extend: int = -4
    strict: bool = False
    no_energy: bool = False

    def __post_init__(self) -> None:
        for name in ("score_threshold", "energy_threshold", "gap_open", "gap_extend"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"{name} must be a whole number, got {value!r}")
        if self.gap_open > 0 or self.gap_extend > 0:
            raise ValueError("gap penalties may not be greater than 0 "
                             f"(gap open {self.gap_open}, gap extend {self.gap_extend})")
        if self.score_threshold < 1:
            raise ValueError(f"score threshold must be at least 1, got {self.score_threshold} "
                             "(miRanda's behaviour below 1 is undefined)")
        if not math.isfinite(self.scale) or abs(self.scale) > 1e5:
            raise ValueError(f"scale must be a finite number of magnitude at most 100000, "
                             f"got {self.scale!r}")

    @property
    def seed_open(self) -> int:
        return c_trunc(self.scale * self.gap_open)

    @property
    def seed_extend(self) -> int:
        return c_trunc(self.scale * self.gap_extend)

    def seed_score(self, score: int) -> int:
        return c_trunc(self.scale * score)

    @property
    def gaps_can_gain(self) -> bool:
        """True when some gap step adds to a score (a negative scale turns seed penalties
        positive): scores are then not bounded by the pair scores alone."""
        return max(self.gap_open, self.gap_extend, self.seed_open, self.seed_extend) > 0


@dataclass(frozen=True)
class RowTables:
    """Per-row tables of one miRNA (row r = miRNA position p = n - r from the 5' end).

    ``profile[r, t]`` is the score against target base code ``t`` (0..4), ``open``/``extend``
    the gap penalties and ``seed`` whether the row is a seed row (state c pinned to -1).
    """

    profile: np.ndarray  # (n, 5) int32
    open: np.ndarray     # (n,) int32
    extend: np.ndarray   # (n,) int32
    seed: np.ndarray     # (n,) bool
    codes: np.ndarray    # (n,) int8, reversed miRNA codes

    @property
    def n(self) -> int:
        return int(self.profile.shape[0])


def row_class(r: int, n: int) -> tuple[bool, bool]:
    """``(scores_zero, is_seed)`` for 0-based row ``r`` of a miRNA of length ``n``."""
    p = n - r
    zero = n <= 3 or p in (1, n - 1, n)
    seed = SEED_FIRST <= p <= SEED_LAST and p != 1
    return zero, seed


@functools.lru_cache(maxsize=256)
def _row_classes(n: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`row_class` of every row of a miRNA of length ``n``: ``(zero, seed)`` (read-only)."""
    classes = [row_class(r, n) for r in range(n)]
    zero = np.array([z for z, _ in classes], dtype=bool)
    seed = np.array([sd for _, sd in classes], dtype=bool)
    zero.flags.writeable = seed.flags.writeable = False
    return zero, seed


@functools.lru_cache(maxsize=64)
def _seed_scores(params: ScanParams) -> np.ndarray:
    """The pair scores of seed rows (scaled, truncated as C does), read-only."""
    scaled = np.array([[params.seed_score(int(v)) for v in row] for row in _PAIR_SCORES], np.int32)
    scaled.flags.writeable = False
    return scaled


def row_tables(mirna: str, params: ScanParams) -> RowTables:
    """Score and gap tables of ``mirna`` (any case; T read as U; ambiguity codes allowed)."""
    n = len(mirna)
    codes = encode(mirna)[::-1].copy()
    zero, seed = _row_classes(n)
    plain = _PAIR_SCORES[codes.astype(np.int64)] if n else np.zeros((0, 5), np.int32)
    scaled = _seed_scores(params)
    profile = np.where(seed[:, None], scaled[codes.astype(np.int64)] if n else plain, plain)
    profile = np.where(zero[:, None], 0, profile).astype(np.int32).reshape(n, 5)
    open_ = np.where(seed, params.seed_open, params.gap_open).astype(np.int32)
    extend = np.where(seed, params.seed_extend, params.gap_extend).astype(np.int32)
    return RowTables(profile, open_, extend, seed.copy(), codes)


def max_gain(tables: RowTables) -> int:
    """An upper bound on any alignment score: the sum of each row's best positive score."""
    return int(np.maximum(tables.profile.max(axis=1), 0).sum())


def gain_bound(n: int, params: ScanParams) -> int:
    """The largest :func:`max_gain` any miRNA of ``n`` nt can have under ``params`` (every
    row at its best pair score: a row of A's holds both the best and the worst pair score).

    >>> gain_bound(21, ScanParams()), max_gain(row_tables("GUGAGAUCAUUUUGAAAGCUG", ScanParams())), gain_bound(23, ScanParams())
    (195, 195, 205)
    """
    return max_gain(row_tables("A" * n, params))


def exact_overlap(n_rows: int, gain: int, params: ScanParams) -> int | None:
    """Columns of overlap after which a window started with a zero boundary is exact.

    A path that enters from the window's first column must cross the overlap with at most
    ``n_rows`` diagonal steps, so with at least ``overlap - n_rows`` horizontal gap steps, each
    costing at least ``|e|`` (e = the largest gap penalty of any row). Such a path scores at most
    ``gain - (overlap - n_rows) * |e|``, which is then below every value a fresh start gives
    (0 for state a, the most negative opening penalty for b and c). The same bound limits how
    far back a traceback can reach. Returns None when gaps are free (no finite overlap).

    >>> exact_overlap(22, 200, ScanParams())
    82
    """
    e = max(params.gap_open, params.gap_extend, params.seed_open, params.seed_extend)
    if e >= 0:
        return None
    floor = min(0, -1, params.gap_open, params.seed_open)
    # need gain - (W - n) * |e| < floor  <=>  W > n + (gain - floor) / |e|
    return n_rows + (gain - floor) // (-e) + 1
