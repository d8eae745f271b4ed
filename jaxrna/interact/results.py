"""What ``jaxrna interact`` computes for one pair (:class:`InteractResult`), built the same way
from either engine's output (:func:`result_of`: the device engine, :mod:`jaxrna.interact.api`;
the host engine, :mod:`jaxrna.interact.host_engine`).

>>> from jaxrna.weights import parse_weights
>>> r = InteractResult("a", "b", "GGGAAAUCC", "GGAUUUCCC", parse_weights("bpmax"), 38, 15, 12,
...                    (0, 8), (0, 8))
>>> r.score, r.s1_score, r.s2_score, r.score_text
(19, 7.5, 6, '19')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from jaxrna.interact.pairs import Pair
from jaxrna.interact.traceback import to_original, traceback
from jaxrna.stages import stage
from jaxrna.weights import WeightSet, format_number, user_number


@dataclass(frozen=True)
class InteractResult:
    """One interaction. Coordinates are 0-based on each strand read 5'->3'; ``window1`` and
    ``window2`` are the (inclusive) ranges the score, S1, S2 and the structure refer to (the
    whole strands when no window was asked for). ``pairs`` is None without a traceback;
    ``windows[a, b]`` (integer units), when asked for, is the score of the window starting at
    ``a`` on strand 1 and ``b`` on strand 2."""

    id1: str
    id2: str
    sequence1: str
    sequence2: str
    weights: WeightSet
    score_units: int
    s1_units: int
    s2_units: int
    window1: tuple[int, int]
    window2: tuple[int, int]
    windowed: bool = False
    pairs: tuple[Pair, ...] | None = None
    windows: np.ndarray | None = field(default=None, compare=False, repr=False)

    def value(self, units: int):
        """A score in integer units in the user's units (an int when whole)."""
        return user_number(Fraction(int(units), self.weights.scale))

    @property
    def score(self):
        """The score in the user's units (an int when whole)."""
        return self.value(self.score_units)

    @property
    def s1_score(self):
        return self.value(self.s1_units)

    @property
    def s2_score(self):
        return self.value(self.s2_units)

    def text(self, units: int) -> str:
        """A score in integer units as text without a trailing ``.0``."""
        return format_number(Fraction(int(units), self.weights.scale))

    @property
    def score_text(self) -> str:
        return self.text(self.score_units)

    @property
    def subsequence1(self) -> str:
        return self.sequence1[self.window1[0]:self.window1[1] + 1]

    @property
    def subsequence2(self) -> str:
        return self.sequence2[self.window2[0]:self.window2[1] + 1]

    @property
    def structures(self) -> tuple[str, str] | None:
        """Dot-brackets of the two windows: ``()`` intramolecular, ``[`` on strand 1 and ``]``
        on strand 2 for intermolecular pairs."""
        if self.pairs is None:
            return None
        a0, b0 = self.window1[0], self.window2[0]
        s1 = ["."] * (self.window1[1] - a0 + 1)
        s2 = ["."] * (self.window2[1] - b0 + 1)
        for p in self.pairs:
            if p.kind == "intra1":
                s1[p.i - a0], s1[p.j - a0] = "(", ")"
            elif p.kind == "intra2":
                s2[p.i - b0], s2[p.j - b0] = "(", ")"
            else:
                s1[p.i - a0], s2[p.j - b0] = "[", "]"
        return "".join(s1), "".join(s2)

    @property
    def dotbracket(self) -> str | None:
        """The joint structure ``s1&s2``."""
        st = self.structures
        return None if st is None else f"{st[0]}&{st[1]}"


def result_of(prob, weights: WeightSet, score: int, o0: int, q0: int, s_o: int,
              s_i: int, windows: np.ndarray | None, box) -> InteractResult:
    """The :class:`InteractResult` of a problem (:class:`jaxrna.interact.api.Problem`) from
    what either engine computed: the best window's score and start
    ``(o0, q0)`` (internal orientation), its single-strand scores, the window scores by
    start (``count_outer x count_inner``, when kept) and the traceback's view of the best
    window's tables (``box``: :class:`~jaxrna.interact.windows.Box` or
    :class:`~jaxrna.interact.host_fill.HostBox`; None: no structure)."""
    p = prob.plan
    n1, n2 = len(prob.rec1), len(prob.rec2)
    l1, l2 = (p.l_outer, p.l_inner) if prob.outer_is_1 else (p.l_inner, p.l_outer)
    # strand-1 start a and strand-2 start b (5'->3'); the inner/outer start on the reversed
    # strand 2 is the strand-2 start n2 - L2 - start
    a, b2 = (o0, n2 - l2 - q0) if prob.outer_is_1 else (q0, n2 - l2 - o0)
    s1u, s2u = (s_o, s_i) if prob.outer_is_1 else (s_i, s_o)
    if windows is not None:
        # windows[a, b]: strand-1 start a, strand-2 start b
        windows = (windows[:, ::-1] if prob.outer_is_1 else windows[::-1, :].T).astype(np.int64)
    pairs = None
    if box is not None:
        with stage("traceback"):
            local = traceback(box, weights.matrix())
            pairs = tuple(to_original(local, prob.outer_is_1, o0, q0, n2))
    return InteractResult(
        id1=prob.rec1.id, id2=prob.rec2.id, sequence1=prob.rec1.sequence,
        sequence2=prob.rec2.sequence, weights=weights, score_units=score,
        s1_units=s1u, s2_units=s2u, window1=(a, a + l1 - 1), window2=(b2, b2 + l2 - 1),
        windowed=l1 < n1 or l2 < n2, pairs=pairs, windows=windows)


__all__ = ["InteractResult", "result_of"]
