"""Base-pair weight sets (GC, AU, GU) in exact integer arithmetic.

Weights may be half-integers or any decimal: they are scaled by the smallest integer ``scale``
that makes all three whole, the dynamic programs run on integers, and scores are divided by
``scale`` only for output.

>>> w = parse_weights("bpmax")
>>> (w.gc, w.au, w.gu, w.scale)
(6, 2, 3, 2)
>>> w.to_float(29)
14.5
>>> int(parse_weights("GC=3,AU=2,GU=1").matrix()[2, 1])
3
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from jaxrna.alphabet import A, C, G, U

NAMED_WEIGHTS = {
    "unit": {"GC": Fraction(1), "AU": Fraction(1), "GU": Fraction(1)},
    "bpmax": {"GC": Fraction(3), "AU": Fraction(1), "GU": Fraction(3, 2)},
    "integer": {"GC": Fraction(3), "AU": Fraction(2), "GU": Fraction(1)},
}
_MAX_SCALE = 1000


@dataclass(frozen=True)
class WeightSet:
    """Integer pair weights ``gc``, ``au``, ``gu`` in units of ``1/scale``."""

    gc: int
    au: int
    gu: int
    scale: int = 1
    name: str = "custom"

    def matrix(self) -> np.ndarray:
        """A symmetric 5x5 int32 table indexed by nucleotide codes; 0 means "cannot pair"."""
        m = np.zeros((5, 5), dtype=np.int32)
        for x, y, v in ((G, C, self.gc), (A, U, self.au), (G, U, self.gu)):
            m[x, y] = m[y, x] = v
        return m

    def to_float(self, score: int) -> float:
        """Convert an integer score back to the user's units."""
        return int(score) / self.scale

    def to_fraction(self, score: int) -> Fraction:
        return Fraction(int(score), self.scale)

    def describe(self) -> str:
        f = lambda v: format_number(Fraction(v, self.scale))  # noqa: E731
        return f"GC={f(self.gc)},AU={f(self.au)},GU={f(self.gu)}"


def format_number(value: Fraction | float | int) -> str:
    """Print a score without a trailing ``.0``: 14 -> ``14``, 14.5 -> ``14.5``.

    >>> format_number(Fraction(29, 2)), format_number(14.0), format_number(Fraction(1, 3))
    ('14.5', '14', '0.333333')
    """
    v = Fraction(value) if not isinstance(value, Fraction) else value
    if v.denominator == 1:
        return str(v.numerator)
    text = f"{float(v):.6f}".rstrip("0").rstrip(".")
    return text


def user_number(value: Fraction) -> int | float:
    """An exact score in the user's units: an int when whole, else a float.

    >>> user_number(Fraction(29, 2)), user_number(Fraction(14))
    (14.5, 14)
    """
    return value.numerator if value.denominator == 1 else float(value)


class ScoredResult:
    """Mixin for results with an exact ``score_fraction``: ``score`` and ``score_text``."""

    score_fraction: Fraction

    @property
    def score(self) -> int | float:
        """The score in the user's units (an int when whole)."""
        return user_number(self.score_fraction)

    @property
    def score_text(self) -> str:
        """The score as printed: no trailing ``.0``."""
        return format_number(self.score_fraction)


def parse_weights(spec: str) -> WeightSet:
    """Parse ``unit``, ``bpmax``, ``integer`` or an explicit ``GC=3,AU=2,GU=1``.

    Raises ``ValueError`` with a readable message for anything else.
    """
    spec = spec.strip()
    if spec.lower() in NAMED_WEIGHTS:
        values, name = NAMED_WEIGHTS[spec.lower()], spec.lower()
    else:
        values, name = {}, "custom"
        for part in spec.split(","):
            key, sep, val = part.partition("=")
            key = key.strip().upper()
            key = {"CG": "GC", "UA": "AU", "UG": "GU"}.get(key, key)
            if not sep or key not in ("GC", "AU", "GU"):
                raise ValueError(f"weights must be unit, bpmax, integer or GC=x,AU=y,GU=z; got {spec!r}")
            if key in values:
                raise ValueError(f"weight {key} given twice in {spec!r}")
            try:
                frac = Fraction(val.strip())
            except (ValueError, ZeroDivisionError):
                raise ValueError(f"weight {key}={val.strip()!r} is not a number") from None
            if frac <= 0:
                raise ValueError(f"weight {key} must be positive, got {val.strip()}")
            values[key] = frac
        missing = {"GC", "AU", "GU"} - set(values)
        if missing:
            raise ValueError(f"weights {spec!r} lack {', '.join(sorted(missing))}")
    scale = math.lcm(*(v.denominator for v in values.values()))
    if scale > _MAX_SCALE:
        raise ValueError(f"weights {spec!r} need a scale of {scale}; use at most 3 decimals")
    ints = {k: int(v * scale) for k, v in values.items()}
    return WeightSet(gc=ints["GC"], au=ints["AU"], gu=ints["GU"], scale=scale, name=name)
