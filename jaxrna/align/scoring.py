"""Scoring schemes for pairwise alignment: substitution scores, affine gaps, alphabets.

Every score is kept as an integer in units of ``1/scale`` (the smallest ``scale`` that makes all
values whole, at most 1000), so the dynamic programs run on int32, ties are exact, and scores
print without rounding noise. Gaps are *penalties* ``open`` and ``extend`` (>= 0): a gap of
length L costs ``open + (L - 1) * extend``, i.e. Biopython's ``PairwiseAligner`` with
``open_gap_score = -open`` and ``extend_gap_score = -extend`` (and parasail's convention).

Sequences are encoded into the scheme's alphabet: with ``match``/``mismatch`` scores any letter
is allowed (identical letters match; T and U count as the same letter); with a substitution
matrix every letter must be in the matrix's alphabet (U is read as T for nucleotide matrices
that have T but not U).

>>> s = match_mismatch(2, -1, gap_open=10, gap_extend=0.5)
>>> s.scale, s.gap_open, s.gap_extend, s.pair_score("A", "A"), s.pair_score("A", "G")
(2, 20, 1, 4, -2)
>>> m = from_matrix("BLOSUM62", gap_open=11, gap_extend=1)
>>> m.pair_score("W", "W"), m.name
(11, 'BLOSUM62')
>>> edit = edit_preset()
>>> edit.minimise, edit.pair_score("A", "C"), edit.gap_open
(True, -1, 3)

End gaps (global alignment: a gap before the first or after the last residue of either
sequence) cost what inner gaps cost unless :func:`with_end_gaps` gives them penalties of their
own (EMBOSS needle's ``-endopen``/``-endextend``), or none (``"free"``, needle's default):

>>> f = with_end_gaps(s, "free")
>>> f.separate_end_gaps, f.end_gap_open, f.end_gap_extend, f.describe()["end_gap_open"]
(True, 0, 0, '0')
>>> e = with_end_gaps(s, end_open=5, end_extend=0.25)      # a finer scale: everything x 2
>>> e.scale, e.gap_open, e.end_gap_open, e.end_gap_extend, e.pair_score("A", "A")
(4, 40, 20, 1, 8)
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

# NEG: minus infinity of the kernels, far from int32's minimum, so adding scores to it along a
# path of length < 2**29 / max|score| cannot overflow (see check_range).
from jaxrna.kernels.gotoh_defs import NEG  # noqa: F401
from jaxrna.weights import format_number

#: Every finite score along any path stays within +-LIMIT.
LIMIT = 1 << 29
_MAX_SCALE = 1000
#: EMBOSS names for Biopython's matrices.
MATRIX_ALIASES = {"EDNAFULL": "NUC.4.4", "DNAFULL": "NUC.4.4"}
_EQUALITY_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _fraction(value, what: str) -> Fraction:
    try:
        f = Fraction(str(value)) if not isinstance(value, Fraction) else value
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{what} {value!r} is not a number") from None
    g = f.limit_denominator(_MAX_SCALE)
    if abs(float(g) - float(f)) > 1e-9:
        raise ValueError(f"{what} {value} needs more than 3 decimals")
    return g


def _scale_of(values) -> int:
    scale = math.lcm(*(v.denominator for v in values))
    if scale > _MAX_SCALE:
        raise ValueError(f"scores need a common scale of {scale}; use at most 3 decimals")
    return scale


@dataclass(frozen=True)
class Scoring:
    """An integer scoring scheme (units of ``1/scale``).

    ``matrix[a, b]`` scores query code ``a`` against target code ``b``; ``gap_open`` and
    ``gap_extend`` are penalties (>= 0). ``equality`` marks match/mismatch schemes, for which
    the kernels compare codes instead of looking up the matrix. ``minimise`` marks cost
    presets (edit distance): the programs maximise ``-cost`` and results report the cost.
    """

    alphabet: str
    matrix: np.ndarray = field(repr=False, compare=False)
    gap_open: int
    gap_extend: int
    scale: int = 1
    name: str = "custom"
    equality: bool = False
    minimise: bool = False
    #: Extra letters read as another: {"U": "T"} for nucleotide matrices.
    synonyms: tuple[tuple[str, str], ...] = ()
    #: Penalties of end gaps (global mode: a gap before the first or after the last residue
    #: of either sequence); None: those of inner gaps. Normalised to None when equal to them.
    end_open: int | None = None
    end_extend: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "matrix", np.ascontiguousarray(self.matrix, dtype=np.int32))
        if self.gap_open < 0 or self.gap_extend < 0:
            raise ValueError("gap penalties must be >= 0")
        if (self.end_open is None) != (self.end_extend is None):
            raise ValueError("give both end gap penalties or neither")
        if self.end_open is not None:
            if self.end_open < 0 or self.end_extend < 0:
                raise ValueError("end gap penalties must be >= 0")
            if (self.end_open, self.end_extend) == (self.gap_open, self.gap_extend):
                object.__setattr__(self, "end_open", None)
                object.__setattr__(self, "end_extend", None)

    # -- codes ----------------------------------------------------------------------------
    @property
    def size(self) -> int:
        return len(self.alphabet)

    def table(self) -> np.ndarray:
        """A 256-entry lookup from ASCII byte to code; -1 for letters outside the alphabet."""
        return _lookup_table(self.alphabet, self.synonyms)

    def encode(self, sequence: str) -> np.ndarray:
        """Encode ``sequence`` as int32 codes; raises ``ValueError`` naming the first bad letter."""
        raw = np.frombuffer(sequence.encode("ascii", errors="replace"), dtype=np.uint8)
        codes = self.table()[raw]
        if codes.size and codes.min() < 0:
            pos = int(np.argmax(codes < 0))
            raise ValueError(f"letter {sequence[pos]!r} at position {pos + 1} is not in the "
                             f"alphabet of {self.name} ({self.alphabet})")
        return codes.astype(np.int32)

    def pair_score(self, a: str, b: str) -> int:
        """Integer score of letter ``a`` (query) against ``b`` (target)."""
        t = self.table()
        return int(self.matrix[t[ord(a)], t[ord(b)]])

    # -- scores ---------------------------------------------------------------------------
    @property
    def open_score(self) -> int:
        """The (negative) score added when a gap opens."""
        return -self.gap_open

    @property
    def extend_score(self) -> int:
        return -self.gap_extend

    @property
    def separate_end_gaps(self) -> bool:
        """Whether end gaps are scored apart from inner gaps (the kernels' ``ends`` switch)."""
        return self.end_open is not None

    @property
    def end_gap_open(self) -> int:
        """Penalty of an end gap's first position (``gap_open`` unless set apart)."""
        return self.gap_open if self.end_open is None else self.end_open

    @property
    def end_gap_extend(self) -> int:
        return self.gap_extend if self.end_extend is None else self.end_extend

    @property
    def end_open_score(self) -> int:
        return -self.end_gap_open

    @property
    def end_extend_score(self) -> int:
        return -self.end_gap_extend

    @property
    def free_end_gaps(self) -> bool:
        """End gaps cost nothing (EMBOSS needle's default)."""
        return self.separate_end_gaps and self.end_gap_open == 0 and self.end_gap_extend == 0

    @property
    def match(self) -> int:
        return int(self.matrix[0, 0])

    @property
    def mismatch(self) -> int:
        return int(self.matrix[0, 1]) if self.size > 1 else 0

    def max_abs(self) -> int:
        """The largest absolute score (matrix entry or gap penalty, end gaps' included)."""
        return max(_max_abs(self.matrix.tobytes(), self.gap_open, self.gap_extend),
                   self.end_gap_open, self.end_gap_extend)

    def to_fraction(self, units: int) -> Fraction:
        return Fraction(int(units), self.scale)

    def report(self, units: int) -> Fraction:
        """A score in the user's units: the cost for minimising presets, else the score."""
        f = self.to_fraction(units)
        return -f if self.minimise else f

    def report_text(self, units: int) -> str:
        return format_number(self.report(units))

    def transposed(self) -> "Scoring":
        """The same scheme with query and target swapped (matrix transposed)."""
        return replace(self, matrix=np.ascontiguousarray(self.matrix.T))

    def describe(self) -> dict:
        """Parameters in the user's units (for output headers)."""
        out = {"scoring": self.name}
        if self.equality:
            out["match"] = format_number(Fraction(self.match, self.scale))
            out["mismatch"] = format_number(Fraction(self.mismatch, self.scale))
        out["gap_open"] = format_number(Fraction(self.gap_open, self.scale))
        out["gap_extend"] = format_number(Fraction(self.gap_extend, self.scale))
        if self.separate_end_gaps:
            out["end_gap_open"] = format_number(Fraction(self.end_gap_open, self.scale))
            out["end_gap_extend"] = format_number(Fraction(self.end_gap_extend, self.scale))
        return out

    def end_gaps_text(self) -> str | None:
        """How end gaps are scored, when apart from inner gaps: ``free`` or
        ``open O, extend E`` (user's units); None otherwise."""
        if not self.separate_end_gaps:
            return None
        if self.free_end_gaps:
            return "free"
        d = self.describe()
        return f"open {d['end_gap_open']}, extend {d['end_gap_extend']}"


@functools.lru_cache(maxsize=64)
def _lookup_table(alphabet: str, synonyms: tuple) -> np.ndarray:
    t = np.full(256, -1, dtype=np.int16)
    for code, letter in enumerate(alphabet):
        t[ord(letter)] = code
        t[ord(letter.lower())] = code
    for extra, same in synonyms:
        t[ord(extra)] = t[ord(extra.lower())] = alphabet.index(same)
    t.flags.writeable = False
    return t


@functools.lru_cache(maxsize=64)
def _max_abs(matrix_bytes: bytes, gap_open: int, gap_extend: int) -> int:
    values = np.frombuffer(matrix_bytes, dtype=np.int32)
    return max(int(np.abs(values).max()), gap_open, gap_extend, 1)


def check_range(scoring: Scoring, longest_path: int) -> None:
    """Refuse pairs whose scores could leave the safe int32 range."""
    if (longest_path + 2) * scoring.max_abs() >= LIMIT:
        raise ValueError(
            f"scores of a path of {longest_path} columns could exceed the int32 range with "
            f"these scores (largest |score| {scoring.max_abs()} in units of 1/{scoring.scale}); "
            f"use smaller scores or fewer decimals")


def check_end_gaps(scoring: Scoring, mode: str) -> None:
    """Refuse end gaps scored apart in local mode: a local alignment has no end gaps (it starts
    and ends with an aligned pair), so asking for them can only be a mistake."""
    if mode == "local" and scoring.separate_end_gaps:
        raise ValueError("end gap penalties (free end gaps included) apply to global "
                         "alignments; a local alignment has no end gaps: use --mode global")


def _gaps(gap_open, gap_extend) -> tuple[Fraction, Fraction]:
    o = _fraction(gap_open, "gap open penalty")
    e = _fraction(gap_extend, "gap extend penalty")
    if o < 0 or e < 0:
        raise ValueError("gap penalties are positive costs (a gap of length L costs "
                         "open + (L-1) * extend); got "
                         f"open {format_number(o)}, extend {format_number(e)}")
    return o, e


def match_mismatch(match=1, mismatch=-1, gap_open=2, gap_extend=1, name: str | None = None
                   ) -> Scoring:
    """Identical letters score ``match``, others ``mismatch`` (any letters; T and U the same)."""
    ma = _fraction(match, "match score")
    mi = _fraction(mismatch, "mismatch score")
    o, e = _gaps(gap_open, gap_extend)
    scale = _scale_of([ma, mi, o, e])
    k = len(_EQUALITY_LETTERS)
    mat = np.full((k, k), int(mi * scale), dtype=np.int32)
    np.fill_diagonal(mat, int(ma * scale))
    label = name or f"match {format_number(ma)}, mismatch {format_number(mi)}"
    return Scoring(alphabet=_EQUALITY_LETTERS, matrix=mat, gap_open=int(o * scale),
                   gap_extend=int(e * scale), scale=scale, name=label, equality=True,
                   synonyms=(("U", "T"),))


def matrix_names() -> list[str]:
    from Bio.Align import substitution_matrices

    return sorted(substitution_matrices.load()) + sorted(MATRIX_ALIASES)


def matrix_directory() -> str | None:
    """Where Biopython keeps its substitution matrices (found without importing Biopython;
    None where it is not installed)."""
    import importlib.util

    spec = importlib.util.find_spec("Bio")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "Align",
                        "substitution_matrices", "data")
    return path if os.path.isdir(path) else None


def read_matrix_file(path: str) -> tuple[str, np.ndarray] | None:
    """``(alphabet, values)`` of a substitution matrix file in Biopython's plain layout (``#``
    comments, a header row of single letters, a row per letter: the letter, then its scores),
    or None for any other layout (then Biopython's own reader is used). Importing
    ``Bio.Align`` costs ~0.1 s of every ``jaxrna align`` run; this reads the default matrix in
    a millisecond (``tests/test_align_scoring.py`` compares it with Biopython on every
    matrix)."""
    try:
        with open(path) as fh:
            lines = [ln.split() for ln in fh if ln.strip() and not ln.lstrip().startswith("#")]
    except (OSError, UnicodeDecodeError):
        return None
    if not lines:
        return None
    alphabet = lines[0]
    k = len(alphabet)
    if any(len(a) != 1 for a in alphabet) or len(set(alphabet)) != k or len(lines) != k + 1:
        return None
    values = np.empty((k, k))
    for row in lines[1:]:
        if len(row) != k + 1 or row[0] not in alphabet:
            return None
        try:
            values[alphabet.index(row[0])] = [float(v) for v in row[1:]]
        except ValueError:
            return None
    if sorted(r[0] for r in lines[1:]) != sorted(alphabet):
        return None
    return "".join(alphabet), values


def _load_matrix(name: str) -> tuple[str, str, np.ndarray]:
    """``(real name, alphabet, values)`` of a Biopython matrix by name (any case, aliases)."""
    directory = matrix_directory()
    key = MATRIX_ALIASES.get(name.upper(), name).upper()
    if directory is not None:
        known = {n.upper(): n for n in os.listdir(directory)}
        if key in known:
            got = read_matrix_file(os.path.join(directory, known[key]))
            if got is not None:
                return known[key], got[0], got[1]
    from Bio.Align import substitution_matrices

    known = {n.upper(): n for n in substitution_matrices.load()}
    if key not in known:
        raise ValueError(f"unknown substitution matrix {name!r}; "
                         f"known: {', '.join(matrix_names())}")
    real = known[key]
    m = substitution_matrices.load(real)
    alphabet = m.alphabet
    if not isinstance(alphabet, str) or any(len(a) != 1 for a in alphabet):
        raise ValueError(f"matrix {real} scores codons, not single letters; it cannot be used here")
    return real, alphabet, np.asarray(m, dtype=float)


def from_matrix(name: str, gap_open=10, gap_extend=0.5) -> Scoring:
    """A Biopython substitution matrix by name (e.g. ``NUC.4.4``/``EDNAFULL``, ``BLOSUM62``)."""
    real, alphabet, values = _load_matrix(name)
    o, e = _gaps(gap_open, gap_extend)
    # sorted(set(...)), not np.unique: that imports numpy.ma (~10 ms of every align run)
    fracs = [_fraction(v, f"matrix {real} value") for v in sorted(set(values.ravel().tolist()))]
    scale = _scale_of(fracs + [o, e])
    ints = np.rint(values * scale).astype(np.int64)
    if np.abs(ints - values * scale).max() > 1e-6:
        raise ValueError(f"matrix {real} values are not multiples of 1/{scale}")
    nucleotide = set(alphabet.upper()) <= set("ACGTURYSWKMBDHVNX")
    synonyms = (("U", "T"),) if nucleotide and "T" in alphabet and "U" not in alphabet else ()
    return Scoring(alphabet=alphabet.upper(), matrix=ints.astype(np.int32),
                   gap_open=int(o * scale), gap_extend=int(e * scale), scale=scale, name=real,
                   equality=False, synonyms=synonyms)


def edit_preset() -> Scoring:
    """Seed 002's edit distance: indel 3, substitution 1, match 0, minimised.

    Implemented as maximising the negated costs (match 0, mismatch -1, linear gaps of 3);
    results report the cost.
    """
    s = match_mismatch(0, -1, gap_open=3, gap_extend=3,
                       name="edit (indel 3, substitution 1, match 0)")
    return replace(s, minimise=True)


PRESETS = {"edit": edit_preset}
END_GAPS = ("penalized", "free")


def with_end_gaps(scoring: Scoring, end_gaps: str = "penalized", end_open=None,
                  end_extend=None) -> Scoring:
    """``scoring`` with its end gaps scored as asked: ``"free"`` (they cost nothing), or
    ``"penalized"`` with penalties ``end_open`` / ``end_extend`` in the user's units (each
    defaulting to the inner gap's). The integer scale grows when the end penalties need it
    (all values multiplied alike)."""
    if end_gaps not in END_GAPS:
        raise ValueError(f"end gaps must be one of {', '.join(END_GAPS)}, not {end_gaps!r}")
    if end_gaps == "free":
        if end_open is not None or end_extend is not None:
            raise ValueError("free end gaps cost nothing; drop --end-open/--end-extend")
        return replace(scoring, end_open=0, end_extend=0)
    if end_open is None and end_extend is None:
        return scoring
    current = (Fraction(scoring.end_gap_open, scoring.scale),
               Fraction(scoring.end_gap_extend, scoring.scale))
    o = current[0] if end_open is None else _fraction(end_open, "end gap open penalty")
    e = current[1] if end_extend is None else _fraction(end_extend, "end gap extend penalty")
    if o < 0 or e < 0:
        raise ValueError("end gap penalties are positive costs (an end gap of length L costs "
                         "end_open + (L-1) * end_extend); got "
                         f"open {format_number(o)}, extend {format_number(e)}")
    scale = math.lcm(scoring.scale, _scale_of([o, e]))
    if scale > _MAX_SCALE:
        raise ValueError(f"scores need a common scale of {scale}; use at most 3 decimals")
    k = scale // scoring.scale
    return replace(scoring, matrix=scoring.matrix * k, gap_open=scoring.gap_open * k,
                   gap_extend=scoring.gap_extend * k, scale=scale, end_open=int(o * scale),
                   end_extend=int(e * scale))

#: Defaults of ``jaxrna align`` (EMBOSS needle/water's: EDNAFULL, open 10, extend 0.5).
DEFAULT_MATRIX = "NUC.4.4"
DEFAULT_GAP_OPEN = 10
DEFAULT_GAP_EXTEND = 0.5


def make_scoring(match=None, mismatch=None, matrix: str | None = None, gap_open=None,
                 gap_extend=None, preset: str | None = None, end_gaps: str = "penalized",
                 end_open=None, end_extend=None) -> Scoring:
    """The scheme the options describe: a ``preset``, ``match``/``mismatch`` scores, or a
    ``matrix`` (default NUC.4.4); gap penalties default to 10 and 0.5; end gaps as
    :func:`with_end_gaps` (not with a preset: free end gaps would make every edit cost 0).

    >>> d = make_scoring(match=2).describe()
    >>> d["scoring"], d["gap_open"], d["gap_extend"]
    ('match 2, mismatch -1', '10', '0.5')
    >>> make_scoring(preset="edit", matrix="BLOSUM62")
    Traceback (most recent call last):
    ...
    ValueError: preset 'edit' fixes all scores; drop --matrix
    """
    if preset is not None:
        given = [n for n, v in (("--match", match), ("--mismatch", mismatch), ("--matrix", matrix),
                                ("--gap-open", gap_open), ("--gap-extend", gap_extend))
                 if v is not None]
        if preset not in PRESETS:
            raise ValueError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
        given += [n for n, v in (("--end-open", end_open), ("--end-extend", end_extend))
                  if v is not None]
        if given:
            raise ValueError(f"preset {preset!r} fixes all scores; drop {', '.join(given)}")
        if end_gaps != "penalized":
            raise ValueError(f"preset {preset!r} is a cost with nothing to gain: with free end "
                             "gaps the alignment of gaps only costs 0 for every pair; drop "
                             "--end-gaps free")
        return PRESETS[preset]()
    o = DEFAULT_GAP_OPEN if gap_open is None else gap_open
    e = DEFAULT_GAP_EXTEND if gap_extend is None else gap_extend
    if match is not None or mismatch is not None:
        if matrix is not None:
            raise ValueError("give either --match/--mismatch or --matrix, not both")
        base = match_mismatch(1 if match is None else match, -1 if mismatch is None else mismatch,
                              o, e)
    else:
        base = from_matrix(matrix or DEFAULT_MATRIX, o, e)
    return with_end_gaps(base, end_gaps, end_open, end_extend)
