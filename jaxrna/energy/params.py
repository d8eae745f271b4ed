"""Turner nearest-neighbour parameters: ViennaRNA ``.par`` files read into integer tables.

A parameter file (ViennaRNA's format v2.0) holds every table twice, free energies at 37 C and
enthalpies, in dcal/mol. :func:`parse_par` reads one into :class:`RawParams` exactly as
ViennaRNA 2.x reads it (the same sections, the same slicing of multi-dimensional tables into
rows, ``DEF``/``INF``/``NST``/``*``/``x`` tokens, ``/* */`` comments, the derived int22 entries
of non-standard nucleotides); sections a file leaves out keep the Turner 2004 values, as
ViennaRNA keeps its compiled-in defaults. :func:`scale` rescales to a temperature the way
ViennaRNA does, ``G(T) = H - (H - G37) * (T + 273.15) / 310.15`` computed in double precision
and truncated toward zero to an integer, giving :class:`EnergyParams`.

The bundled sets ``turner2004`` (ViennaRNA's default) and ``turner1999`` are the parameter
files compiled into the installed ViennaRNA package, read from its Python module
(``RNA.parameter_set_rna_turner2004``/``..._turner1999``) without changing ViennaRNA's state;
nothing of ViennaRNA is copied into jaxrna. Table layouts follow ViennaRNA's indices: pair
types 1..7 = CG, GC, GU, UG, AU, UA, non-standard (0 unused); nucleotides 0..4 = N, A, C, G, U.

>>> p = load_params("turner2004", temperature=37.0)
>>> int(p.stack[1, 1]), int(p.hairpin[3]), int(p.terminal_au), p.lxc
(-240, 540, 50, 107.856)
>>> q = load_params("turner2004", temperature=20.0)
>>> int(q.stack[1, 1]), int(q.ml_closing)
(-284, 1043)
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass, field, replace

import numpy as np

#: ViennaRNA's "infinity" in dcal/mol (``INF``) and the ``DEF`` token's value.
INF = 10_000_000
DEF = -50
NST = 0
NBPAIRS = 7
MAXLOOP = 30
K0 = 273.15
#: ViennaRNA's loop-length extrapolation constant at 37 C (not read from files).
LXC37 = 107.856

_PAIR = (NBPAIRS + 1,)
#: name -> (shape, shift, post): the rows of a table as ViennaRNA reads them (see _read_table).
_LAYOUT = {
    "stack": ((8, 8), (1, 1), (0, 0)),
    "mismatch": ((8, 5, 5), (1, 0, 0), (0, 0, 0)),
    "dangle": ((8, 5), (1, 0), (0, 0)),
    "int11": ((8, 8, 5, 5), (1, 1, 0, 0), (0, 0, 0, 0)),
    "int21": ((8, 8, 5, 5, 5), (1, 1, 0, 0, 0), (0, 0, 0, 0, 0)),
    "int22": ((8, 8, 5, 5, 5, 5), (1, 1, 1, 1, 1, 1), (1, 1, 0, 0, 0, 0)),
    "loop": ((31,), (0,), (0,)),
}
#: Section name in the file -> (table attribute, layout).
_SECTIONS = {
    "stack": ("stack", "stack"),
    "mismatch_hairpin": ("mismatch_hairpin", "mismatch"),
    "mismatch_internal": ("mismatch_interior", "mismatch"),
    "mismatch_interior": ("mismatch_interior", "mismatch"),
    "mismatch_internal_1n": ("mismatch_interior_1n", "mismatch"),
    "mismatch_interior_1n": ("mismatch_interior_1n", "mismatch"),
    "mismatch_internal_23": ("mismatch_interior_23", "mismatch"),
    "mismatch_interior_23": ("mismatch_interior_23", "mismatch"),
    "mismatch_multi": ("mismatch_multi", "mismatch"),
    "mismatch_exterior": ("mismatch_exterior", "mismatch"),
    "dangle5": ("dangle5", "dangle"),
    "dangle3": ("dangle3", "dangle"),
    "int11": ("int11", "int11"),
    "int21": ("int21", "int21"),
    "int22": ("int22", "int22"),
    "hairpin": ("hairpin", "loop"),
    "bulge": ("bulge", "loop"),
    "internal": ("interior", "loop"),
    "interior": ("interior", "loop"),
}
_TABLES = ("stack", "mismatch_hairpin", "mismatch_interior", "mismatch_interior_1n",
           "mismatch_interior_23", "mismatch_multi", "mismatch_exterior", "dangle5", "dangle3",
           "int11", "int21", "int22", "hairpin", "bulge", "interior")
_SCALARS = ("ml_base", "ml_closing", "ml_intern", "ninio", "duplex_init", "terminal_au")
#: Special hairpin sections: name -> (attribute, loop string length).
_SPECIAL = {"Triloops": ("triloops", 5), "Tetraloops": ("tetraloops", 6),
            "Hexaloops": ("hexaloops", 8)}
BUNDLED = ("turner2004", "turner1999")


class ParamFileError(ValueError):
    """A parameter file that cannot be read (with the line where it failed)."""


@dataclass
class RawParams:
    """A parameter set as read from a file: free energies at 37 C (``dg``) and enthalpies
    (``dh``), each a dict of NumPy int64 tables and scalars, plus the special hairpin loops.

    Special loops are kept as ViennaRNA keeps them: one string of space-terminated entries
    (``"CAACGG CCAAGG ..."``) and parallel lists of energies and enthalpies.
    """

    dg: dict
    dh: dict
    max_ninio: int
    special: dict = field(default_factory=dict)   # attr -> (string, [dG], [dH])
    name: str = "custom"

    def copy(self) -> "RawParams":
        return RawParams({k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in self.dg.items()},
                         {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in self.dh.items()},
                         self.max_ninio, {k: (s, list(g), list(h)) for k, (s, g, h) in self.special.items()},
                         self.name)


@dataclass(frozen=True, eq=False)
class EnergyParams:
    """Integer energy tables (dcal/mol) at one temperature, indexed as ViennaRNA's.

    ``stack[t1, t2]``; ``hairpin/bulge/interior[size]`` (sizes 0..30); ``mismatch_*[t, x, y]``
    (x the 5'-side and y the 3'-side neighbour as ViennaRNA orders them); ``dangle5/3[t, x]``;
    ``int11[t1, t2, x, y]``, ``int21[t1, t2, x, y, z]``, ``int22[t1, t2, w, x, y, z]``;
    scalars ``ml_base`` (per unpaired base), ``ml_closing``, ``ml_intern`` (per branch),
    ``ninio`` and ``max_ninio`` (asymmetry), ``terminal_au``, ``duplex_init``; ``lxc`` (float,
    the loop-length extrapolation factor); special hairpins as strings with energies.
    ``mismatch_multi``/``mismatch_exterior``/``dangle5``/``dangle3`` are clipped to <= 0, as
    ViennaRNA clips them when dangles are used (with dangles 0 they are not used at all).
    """

    name: str
    temperature: float
    stack: np.ndarray
    hairpin: np.ndarray
    bulge: np.ndarray
    interior: np.ndarray
    mismatch_hairpin: np.ndarray
    mismatch_interior: np.ndarray
    mismatch_interior_1n: np.ndarray
    mismatch_interior_23: np.ndarray
    mismatch_multi: np.ndarray
    mismatch_exterior: np.ndarray
    dangle5: np.ndarray
    dangle3: np.ndarray
    int11: np.ndarray
    int21: np.ndarray
    int22: np.ndarray
    ml_base: int
    ml_closing: int
    ml_intern: int
    ninio: int
    max_ninio: int
    terminal_au: int
    duplex_init: int
    lxc: float
    triloops: str
    triloop_energy: tuple
    tetraloops: str
    tetraloop_energy: tuple
    hexaloops: str
    hexaloop_energy: tuple

    def special_hairpins(self, size: int) -> dict[str, int]:
        """``{loop sequence: energy}`` for special hairpins of ``size`` unpaired bases (3, 4
        or 6), as ViennaRNA finds them: the first occurrence of the closing-pair-inclusive
        string in its table string, the energy of the entry at that offset."""
        return dict(_special_lookup(self, size))

    def with_terminal_au(self, value: int) -> "EnergyParams":
        """The same parameters with the terminal AU/GU penalty set to ``value`` dcal/mol."""
        return replace(self, terminal_au=int(value))


# --------------------------------------------------------------------------- reading files

def _strip_comment(line: str, lineno: int) -> str:
    """Remove the first ``/* ... */`` of a line (one comment per line, as ViennaRNA does)."""
    a = line.find("/*")
    if a < 0:
        return line
    b = line.find("*/", a)
    if b < 0:
        raise ParamFileError(f"line {lineno}: unclosed comment in parameter file")
    return line[:a] + line[b + 2:]


class _Reader:
    """Line cursor over a parameter file with ViennaRNA's token rules."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.pos = 0

    def values(self, arr: np.ndarray, start: int, size: int) -> None:
        """Fill ``arr[start:start+size]`` (a flat view) from the next lines, starting on a new
        line and ignoring what is left of the last line used."""
        i = 0
        last = 0
        while i < size:
            if self.pos >= len(self.lines):
                raise ParamFileError("unexpected end of parameter file")
            lineno = self.pos + 1
            line = _strip_comment(self.lines[self.pos], lineno)
            self.pos += 1
            for tok in line.split():
                if i >= size:
                    break
                tok = tok[:15]
                if tok[0] == "*":
                    i += 1
                    continue
                if tok[0] == "x":
                    if i == 0 or last == 0:
                        raise ParamFileError(f"line {lineno}: can't extrapolate ('x') without a "
                                             "previous value")
                    v = int(arr[start + last]) + int(0.5 + LXC37 * math.log(i / last))
                elif tok == "DEF":
                    v = DEF
                elif tok == "INF":
                    v = INF
                elif tok == "NST":
                    v = NST
                else:
                    v = _leading_int(tok)
                    if v is None:
                        raise ParamFileError(f"line {lineno}: can't interpret {tok!r}")
                    last = i
                arr[start + i] = v
                i += 1


def _leading_int(tok: str) -> int | None:
    """``sscanf("%d")`` of a token: an optional sign and the digits that follow."""
    k = 1 if tok[:1] in "+-" else 0
    e = k
    while e < len(tok) and tok[e].isdigit():
        e += 1
    return int(tok[:e]) if e > k else None


def _read_table(reader: _Reader, arr: np.ndarray, layout: str) -> None:
    shape, shift, post = _LAYOUT[layout]
    flat = arr.reshape(-1)
    strides = [int(np.prod(shape[d + 1:])) for d in range(len(shape))]

    def rec(dim: int, base: int) -> None:
        rest_shift, rest_post = shift[dim:], post[dim:]
        if sum(rest_shift) + sum(rest_post) == 0:
            reader.values(flat, base, int(np.prod(shape[dim:])))
            return
        if dim == len(shape) - 1:
            reader.values(flat, base + shift[dim], shape[dim] - shift[dim] - post[dim])
            return
        for k in range(shift[dim], shape[dim] - post[dim]):
            rec(dim + 1, base + k * strides[dim])

    rec(0, 0)


def _update_nst(a: np.ndarray) -> None:
    """ViennaRNA's derivation of int22 entries with non-standard nucleotides (index 0) and the
    non-standard pair type (7): maxima over the standard entries, in ViennaRNA's order."""
    nb = NBPAIRS
    std = range(1, 5)
    for i in range(1, nb):
        for j in range(1, nb):
            for k in std:
                for l in std:
                    for m in std:
                        a[i, j, k, l, m, 0] = max(a[i, j, k, l, m, n] for n in std)
                        a[i, j, k, l, 0, m] = max(a[i, j, k, l, n, m] for n in std)
                        a[i, j, k, 0, l, m] = max(a[i, j, k, n, l, m] for n in std)
                        a[i, j, 0, k, l, m] = max(a[i, j, n, k, l, m] for n in std)
    for i in range(1, nb):
        for j in range(1, nb):
            for k in std:
                for l in std:
                    m1 = max(a[i, j, k, l, m, 0] for m in std)
                    m2 = max(a[i, j, k, m, 0, l] for m in std)
                    m3 = max(a[i, j, m, 0, k, l] for m in std)
                    m4 = max(a[i, j, 0, k, l, m] for m in std)
                    m5 = max(a[i, j, 0, k, m, l] for m in std)
                    m6 = max(a[i, j, k, 0, l, m] for m in std)
                    a[i, j, k, l, 0, 0] = m1
                    a[i, j, k, 0, 0, l] = m2
                    a[i, j, 0, 0, k, l] = m3
                    a[i, j, k, 0, l, 0] = m6
                    a[i, j, 0, k, 0, l] = m5
                    a[i, j, 0, k, l, 0] = m4
    for i in range(1, nb):
        for j in range(1, nb):
            for k in std:
                m1 = max(a[i, j, k, l, 0, 0] for l in std)
                m2 = max(a[i, j, 0, k, l, 0] for l in std)
                m3 = max(a[i, j, 0, 0, k, l] for l in std)
                m4 = max(a[i, j, 0, 0, l, k] for l in std)
                a[i, j, k, 0, 0, 0] = m1
                a[i, j, 0, k, 0, 0] = m2
                a[i, j, 0, 0, k, 0] = m3
                a[i, j, 0, 0, 0, k] = m4
    for i in range(1, nb):
        for j in range(1, nb):
            a[i, j, 0, 0, 0, 0] = max(a[i, j, k, 0, 0, 0] for k in std)
    # non-standard pairs: one, then both
    for i in range(1, nb):
        a[i, nb] = a[i, 1:nb].max(axis=0)
        a[nb, i] = a[1:nb, i].max(axis=0)
    a[nb, nb] = a[nb, 1:nb].max(axis=0)


def _read_special(reader: _Reader, length: int) -> tuple[str, list[int], list[int]]:
    """Special hairpin lines ``SEQ dG dH`` until the first line that is not one (which is then
    read again as an ordinary line); the entries joined as ViennaRNA joins them."""
    text, dg, dh = [], [], []
    while reader.pos < len(reader.lines) and len(dg) < 40:
        parts = reader.lines[reader.pos].split()
        reader.pos += 1
        ok = (len(parts) >= 3 and _leading_int(parts[1]) is not None
              and _leading_int(parts[2]) is not None)
        if ok and len(parts[0]) != length:
            raise ParamFileError(f"line {reader.pos}: special hairpin {parts[0]!r} is not "
                                 f"{length} letters long")
        if not ok:
            # ViennaRNA appends a separator for the failed line too
            text.append((parts[0][:length] if parts else "") + " ")
            reader.pos -= 1
            break
        text.append(parts[0][:length] + " ")
        dg.append(_leading_int(parts[1]))
        dh.append(_leading_int(parts[2]))
    return "".join(text), dg, dh


def parse_par(text: str, base: RawParams | None = None, name: str = "custom") -> RawParams:
    """Read a ViennaRNA v2.0 parameter file (its text) on top of ``base`` (default: Turner 2004).

    >>> raw = parse_par("## RNAfold parameter file v2.0\\n# NINIO\\n 70 300 250\\n")
    >>> raw.dg["ninio"], raw.dh["ninio"], raw.max_ninio, int(raw.dg["stack"][1, 1])
    (70, 300, 250, -240)
    """
    raw = (base if base is not None else _raw_bundled("turner2004")).copy()
    raw.name = name
    lines = text.split("\n")
    reader = _Reader(lines)
    reader.pos = 1  # the header line, checked by ViennaRNA only for a warning
    while reader.pos < len(lines):
        line = lines[reader.pos]
        reader.pos += 1
        if not line.startswith("#"):
            continue
        words = line[1:].split()
        if not words:
            continue
        ident = words[0][:255]
        enthalpy = ident.endswith("_enthalpies")
        key = ident[: -len("_enthalpies")] if enthalpy else ident
        target = raw.dh if enthalpy else raw.dg
        if key in _SECTIONS:
            attr, layout = _SECTIONS[key]
            arr = target[attr]
            _read_table(reader, arr, layout)
            if attr == "int22":
                _update_nst(arr)
        elif ident == "ML_params":
            v = np.zeros(6, dtype=np.int64)
            reader.values(v, 0, 6)
            raw.dg["ml_base"], raw.dh["ml_base"] = int(v[0]), int(v[1])
            raw.dg["ml_closing"], raw.dh["ml_closing"] = int(v[2]), int(v[3])
            raw.dg["ml_intern"], raw.dh["ml_intern"] = int(v[4]), int(v[5])
        elif ident == "NINIO":
            v = np.zeros(3, dtype=np.int64)
            reader.values(v, 0, 3)
            raw.dg["ninio"], raw.dh["ninio"], raw.max_ninio = int(v[0]), int(v[1]), int(v[2])
        elif ident == "Misc":
            v = np.zeros(4, dtype=np.int64)
            reader.values(v, 0, 4)
            raw.dg["duplex_init"], raw.dh["duplex_init"] = int(v[0]), int(v[1])
            raw.dg["terminal_au"], raw.dh["terminal_au"] = int(v[2]), int(v[3])
        elif ident in _SPECIAL:
            attr, length = _SPECIAL[ident]
            raw.special[attr] = _read_special(reader, length)
        # "END" and unknown sections are ignored, as ViennaRNA ignores them (it only warns)
    return raw


# --------------------------------------------------------------------------- bundled sets

def _empty_raw() -> RawParams:
    dg, dh = {}, {}
    for attr in _TABLES:
        layout = next(lay for (a, lay) in _SECTIONS.values() if a == attr)
        shape = _LAYOUT[layout][0]
        # pair type 0 never occurs; ViennaRNA's compiled-in tables hold INF there
        dg[attr] = np.full(shape, INF, dtype=np.int64)
        dh[attr] = np.full(shape, INF, dtype=np.int64)
    for s in _SCALARS:
        dg[s] = dh[s] = 0
    return RawParams(dg, dh, 0, {a: ("", [], []) for a, _ in _SPECIAL.values()})


def _bundled_text(name: str) -> str:
    try:
        import RNA
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ParamFileError("the bundled parameter sets come from the ViennaRNA package "
                             "(pip install ViennaRNA); or give a .par file") from exc
    return {"turner2004": RNA.parameter_set_rna_turner2004,
            "turner1999": RNA.parameter_set_rna_turner1999}[name]


@functools.lru_cache(maxsize=None)
def _raw_bundled(name: str) -> RawParams:
    return parse_par(_bundled_text(name), base=_empty_raw(), name=name)


@functools.lru_cache(maxsize=None)
def _raw_file(path: str, mtime: float) -> RawParams:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except OSError as exc:
        raise ParamFileError(f"{path}: cannot read parameter file ({exc.strerror})") from None
    try:
        return parse_par(text, name=os.path.basename(path))
    except ParamFileError as exc:
        raise ParamFileError(f"{path}: {exc}") from None


def raw_params(source: str | RawParams) -> RawParams:
    """``turner2004``, ``turner1999``, a path to a ``.par`` file, or :class:`RawParams`."""
    if isinstance(source, RawParams):
        return source
    key = source.lower()
    if key in BUNDLED:
        return _raw_bundled(key)
    if not os.path.exists(source):
        raise ParamFileError(f"{source}: no such parameter file (or give turner2004 or turner1999)")
    return _raw_file(os.path.abspath(source), os.path.getmtime(source))


# --------------------------------------------------------------------------- temperature

def _rescale(dg, dh, tempf: float):
    """ViennaRNA's ``RESCALE_dG``: ``dH - (dH - dG) * tempf`` in double precision, truncated
    toward zero (the C conversion to int)."""
    if isinstance(dg, np.ndarray):
        v = dh.astype(np.float64) - (dh - dg).astype(np.float64) * tempf
        return np.trunc(v).astype(np.int64)
    return int(float(dh) - float(dh - dg) * tempf)


def scale(raw: RawParams, temperature: float = 37.0) -> EnergyParams:
    """Rescale raw parameters to ``temperature`` (Celsius) as ViennaRNA 2.x does."""
    tempf = (temperature + K0) / (37.0 + K0)
    t = {a: _rescale(raw.dg[a], raw.dh[a], tempf) for a in _TABLES}
    s = {a: _rescale(raw.dg[a], raw.dh[a], tempf) for a in _SCALARS}
    for a in ("mismatch_multi", "mismatch_exterior", "dangle5", "dangle3"):
        t[a] = np.minimum(t[a], 0)
    spec = {}
    for attr, _ in _SPECIAL.values():
        string, dg, dh = raw.special.get(attr, ("", [], []))
        spec[attr] = string
        spec[attr[:-1] + "_energy"] = tuple(_rescale(g, h, tempf) for g, h in zip(dg, dh))
    arrays = {a: np.ascontiguousarray(v.astype(np.int32)) for a, v in t.items()}
    return EnergyParams(name=raw.name, temperature=float(temperature), **arrays,
                        ml_base=s["ml_base"], ml_closing=s["ml_closing"], ml_intern=s["ml_intern"],
                        ninio=s["ninio"], max_ninio=int(raw.max_ninio),
                        terminal_au=s["terminal_au"], duplex_init=s["duplex_init"],
                        lxc=LXC37 * tempf, **spec)


@functools.lru_cache(maxsize=64)
def _cached(source: str, temperature: float) -> EnergyParams:
    return scale(raw_params(source), temperature)


def load_params(source: str | RawParams = "turner2004", temperature: float = 37.0) -> EnergyParams:
    """Energy tables for ``source`` (``turner2004``, ``turner1999``, a ``.par`` path or
    :class:`RawParams`) at ``temperature`` degrees Celsius."""
    if isinstance(source, RawParams):
        return scale(source, temperature)
    if source.lower() not in BUNDLED and os.path.exists(source):
        source = os.path.abspath(source)
    return _cached(source if source.lower() not in BUNDLED else source.lower(), float(temperature))


# --------------------------------------------------------------------------- special hairpins

_SPECIAL_BY_SIZE = {3: ("triloops", "triloop_energy", 5, 6), 4: ("tetraloops", "tetraloop_energy", 6, 7),
                    6: ("hexaloops", "hexaloop_energy", 8, 9)}


@functools.lru_cache(maxsize=256)
def _special_lookup(p: EnergyParams, size: int) -> dict[str, int]:
    attr, eattr, width, stride = _SPECIAL_BY_SIZE[size]
    string, energies = getattr(p, attr), getattr(p, eattr)
    out: dict[str, int] = {}
    # strstr semantics for a query of `width` letters (no spaces): the first offset where the
    # string holds it; the energy of the entry at offset // stride
    for pos in range(len(string) - width + 1):
        key = string[pos:pos + width]
        if " " in key or key in out:
            continue
        k = pos // stride
        out[key] = energies[k] if k < len(energies) else 0   # int, or float (boltzmann)
    return out
