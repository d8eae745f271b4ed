"""Duplex energy of a hit as miRanda 3.3a computes it: the recipe, and the engines that fold it.

miRanda folds one string as a single strand with Vienna RNA 1.x ``fold()`` at 30 C (Turner 1999
parameters, dangles 1): the miRNA written 3'->5' (flanks included, alignment gaps removed), the
linker ``XXXXXXX``, then the target site written 3'->5' (flanks included; '-' past the target
ends kept). ViennaRNA 2.x gets closest by folding that string uppercased, with the linker
replaced by G and forced unpaired ('-' and ambiguity codes fold like N in both versions), with
the Turner 1999 set, 30 C and dangles 1, and one correction: Vienna 1.x (up to 1.7) keeps the
terminal AU/GU penalty at its 37 C value (0.50 kcal/mol) at every temperature, where 2.x
rescales it (0.48 at 30 C). jaxrna loads the 1999 set with that penalty held at 0.50.

The energy is reported as Vienna 1.x returns it, a C ``float`` in kcal/mol, so it prints as
miRanda prints it (``-24.540001``).

Measured agreement with miRanda 3.3a on its example (bantam vs hid 3'UTR, 4 hits, energies
-24.54, -20.03, -14.57, -14.18): identical to the printed 0.01 kcal/mol. Without the terminal
AU correction every hit came out 0.02 kcal/mol lower. Residual differences remain possible
where Vienna 1.x differs in other details (it matches tetraloop bonuses case-sensitively, so
not in the lowercase flanks; it adds the two dangles of a helix end separately); the spec's
survey of thousands of hits with the uncorrected recipe found 97% within 0.05 kcal/mol and a
worst case of about 2 kcal/mol. See ENERGY_TOLERANCE.

Three engines fold that recipe (``jaxrna targets --energy-engine``; the environment variable
``JAXRNA_ENERGY_ENGINE`` sets the default, ``auto``), all to the same integer dcal/mol, so the
output is byte-identical whichever runs:

- ``device``: jaxrna's energy engine (:mod:`jaxrna.energy`: its JAX fill, the linker as
  positions that must stay unpaired), hits folded in large batches on the run's device
  (:class:`DeviceEngine`; what ``auto`` picks on a GPU). With worker processes the hits of
  each block go to the device from the main process (:mod:`jaxrna.targets.output`).
- ``cpu``: the same model vectorised with NumPy over batches of hits
  (:mod:`jaxrna.targets.duplex`, :class:`CpuEngine`; what ``auto`` picks on a CPU).
- ``vienna``: ViennaRNA itself, one hit at a time (:func:`fold_energy`): the reference the
  others are tested against, hit for hit.

Programs compiled (issue 26): the ``device`` engine one per device and run, whatever the hits
(strings padded to :data:`DEVICE_LENGTH`, calls of a fixed row count per device,
:meth:`DeviceEngine.batch_rows`; a last call topped up with empty rows; longer strings go to the
``cpu`` engine); ``cpu`` and ``vienna`` none (NumPy, ViennaRNA).

>>> duplex_string("gtCGAAAGT-TTTACTAGAGTg", "taaaTATCATTATTGATCTCAt", 4, 1)
'gtCGAAAGTTTTACTAGAGTgXXXXXXXtACTCTAGTTATTACTATaaat'
"""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

LINKER = "XXXXXXX"
#: Largest |jaxrna - miRanda| energy difference accepted by the tests (kcal/mol): on miRanda's
#: own example every energy agrees to the printed 0.01 kcal/mol (the float rounding of
#: miRanda's value is the only slack).
ENERGY_TOLERANCE = 0.005


def duplex_string(aln_mirna: str, aln_target: str, left_flank: int, right_flank: int) -> str:
    """The string miRanda folds for a hit, from its displayed alignment.

    ``aln_mirna``/``aln_target`` are the Query (3'->5') and Ref (5'->3') lines; ``left_flank``
    and ``right_flank`` the numbers of unaligned (lowercase) columns at their left and right.
    """
    mirna = aln_mirna.replace("-", "")
    end = len(aln_target) - right_flank
    left, core, right = aln_target[:left_flank], aln_target[left_flank:end], aln_target[end:]
    site = left + core.replace("-", "") + right
    return mirna + LINKER + site[::-1]


def _turner1999_vienna1(RNA) -> str:
    """The Turner 1999 parameter file with the terminal AU penalty held at 0.50 kcal/mol."""
    import os
    import tempfile

    RNA.params_load_RNA_Turner1999()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t99.par")
        RNA.params_save(path)
        with open(path) as fh:
            lines = fh.read().split("\n")
    k = lines.index("# Misc")
    while lines[k + 1].lstrip().startswith("/*"):
        k += 1
    fields = lines[k + 1].split()  # DuplexInit dH TerminalAU dH LXC dH
    fields[3] = fields[2]          # dH = dG: no temperature dependence, as in Vienna 1.x
    lines[k + 1] = "\t" + "\t".join(fields)
    return "\n".join(lines)


@functools.lru_cache(maxsize=1)
def _model():
    try:
        import RNA
    except ImportError as exc:  # pragma: no cover - dependency declared in pyproject
        from jaxrna.io.errors import JaxrnaError

        raise JaxrnaError("the energy step needs the ViennaRNA package (pip install ViennaRNA); "
                          "or run with --no-energy") from exc
    import tempfile

    md = RNA.md()
    md.temperature = 30.0
    md.dangles = 1
    # ViennaRNA keeps one global parameter set: the recipe's is loaded only long enough to
    # take its scaled parameters, then the caller's set is restored (code that folds with
    # ViennaRNA in the same process must not find Turner 1999 there afterwards)
    with tempfile.TemporaryDirectory() as tmp:
        saved = os.path.join(tmp, "saved.par")
        RNA.params_save(saved)
        try:
            RNA.params_load_from_string(_turner1999_vienna1(RNA), "turner1999-vienna1")
            params = RNA.param(md)
        finally:
            RNA.params_load(saved)
    return RNA, md, params


#: Below this many folds a batch is folded in this process; above, in the shared pool of worker
#: processes (:func:`jaxrna.pipeline.worker_pool`: spawned, not forked, as the parent runs JAX).
PARALLEL_MIN = 2000


def fold_energies(fold_strings: list[str], energy=None) -> list[float]:
    """:func:`fold_energy` of many strings (or ``energy`` of each, when another function is
    given, or ``energy.energies(fold_strings)`` for an engine); large batches of ViennaRNA folds
    go to the worker processes (:func:`jaxrna.pipeline.map_ordered`, one per core but one, on
    machines of 4 cores or more; not from a worker process), with the results in input order."""
    from jaxrna.pipeline import default_workers, map_ordered

    if energy is None:
        energy = fold_energy
    if hasattr(energy, "energies"):  # an engine
        return energy.energies(fold_strings)
    if energy is not fold_energy or len(fold_strings) < PARALLEL_MIN or in_worker():
        return [energy(s) for s in fold_strings]
    workers = default_workers()
    if not workers:
        return [energy(s) for s in fold_strings]
    size = max(64, len(fold_strings) // 256)
    parts = [fold_strings[k:k + size] for k in range(0, len(fold_strings), size)]
    try:
        return [e for part in map_ordered(fold_many, parts, workers) for e in part]
    except Exception:  # no worker processes here (e.g. a restricted sandbox): fold in-process
        return [fold_energy(s) for s in fold_strings]


def fold_many(fold_strings: list[str]) -> list[float]:
    """:func:`fold_energy` of each string (one job of the worker processes)."""
    return [fold_energy(s) for s in fold_strings]


def fold_energy(fold_string: str) -> float:
    """Minimum free energy (kcal/mol) of miRanda's fold string, as a C float widened to double."""
    RNA, md, params = _model()
    s = fold_string.upper()
    linker = s.find(LINKER)
    s = s.replace("X", "G").replace("-", "N")
    fc = RNA.fold_compound(s, md)
    fc.params_subst(params)
    if linker >= 0:
        for k in range(linker, linker + len(LINKER)):
            fc.hc_add_up(k + 1)
    _, mfe = fc.mfe()
    dcal = int(round(mfe * 100.0))
    return float(np.float32(dcal / 100.0))


# ------------------------------------------------------------------------------------------
# the recipe as arrays, and the engines

#: ``--energy-engine`` values (``auto``: ``device`` on a GPU, ``cpu`` on a CPU).
ENGINES = ("auto", "device", "cpu", "vienna")
#: Environment variable giving the default engine (tests, pipelines).
ENGINE_ENV = "JAXRNA_ENERGY_ENGINE"
#: The recipe's model: parameter set, temperature (C), dangles; the terminal AU/GU penalty is
#: held at its 37 C value (:func:`recipe_params`).
PARAMS, TEMPERATURE, DANGLES = "turner1999", 30.0, 1


def in_worker() -> bool:
    """Whether this is a worker process (spawned by a pool), where work stays single-threaded."""
    import multiprocessing

    return multiprocessing.parent_process() is not None


def engine_name(requested: str | None, backend: str) -> str:
    """The engine for ``--energy-engine`` (None: the environment's default) on ``backend``."""
    from jaxrna.io.errors import InputError

    value = requested if requested is not None else (os.environ.get(ENGINE_ENV) or "auto")
    value = value.strip().lower()
    if value not in ENGINES:
        source = "--energy-engine" if requested is not None else ENGINE_ENV
        raise InputError(f"{source} must be one of {', '.join(ENGINES)}, not {value!r}")
    if value == "auto":
        return "cpu" if backend == "cpu" else "device"
    return value


def make_engine(requested: str | None, backend: str = "cpu", devices=None):
    """The energy engine object for a run (see :func:`engine_name`)."""
    name = engine_name(requested, backend)
    if name == "vienna":
        return ViennaEngine()
    if name == "cpu":
        return CpuEngine()
    return DeviceEngine(devices)


@functools.lru_cache(maxsize=1)
def recipe_params():
    """Turner 1999 at 30 C with the terminal AU/GU penalty at its 37 C value (Vienna 1.x)."""
    from jaxrna.energy.params import load_params

    return load_params(PARAMS, TEMPERATURE).with_terminal_au(load_params(PARAMS, 37.0).terminal_au)


def kcal(dcal) -> np.ndarray:
    """Energies in dcal/mol as Vienna 1.x returns them: C floats in kcal/mol (as doubles)."""
    return (np.asarray(dcal, np.float64) / 100.0).astype(np.float32).astype(np.float64)


#: Letters as the recipe folds them: uppercase, the linker's X as G, '-' as N.
_NORMALIZE = np.arange(256, dtype=np.uint8)
_NORMALIZE[ord("a"):ord("z") + 1] -= 32
_NORMALIZE[[ord("X"), ord("x")]] = ord("G")
_NORMALIZE[ord("-")] = ord("N")


@dataclass
class FoldInputs:
    """Fold strings as arrays: ``letters`` (K, L) uint8 (uppercase, linker as G, '-' as N, 0
    past each string's end), ``lengths`` (K,), ``linker`` (K,) the linker's first position
    (-1: none), the 7 positions that must stay unpaired."""

    letters: np.ndarray
    lengths: np.ndarray
    linker: np.ndarray

    def __len__(self) -> int:
        return len(self.lengths)

    def allowed(self) -> np.ndarray:
        """(K, L) bool: positions that may pair."""
        pos = np.arange(self.letters.shape[1])[None, :]
        link = self.linker[:, None]
        return (pos < self.lengths[:, None]) & ~((link >= 0) & (pos >= link) & (pos < link + len(LINKER)))

    def take(self, idx, width: int | None = None) -> "FoldInputs":
        letters = self.letters[idx]
        if width is not None:
            out = np.zeros((len(letters), width), np.uint8)
            keep = min(width, letters.shape[1])
            out[:, :keep] = letters[:, :keep]
            letters = out
        return FoldInputs(letters, self.lengths[idx], self.linker[idx])

    @staticmethod
    def concat(parts: list["FoldInputs"]) -> "FoldInputs":
        width = max((p.letters.shape[1] for p in parts), default=1)
        return FoldInputs(np.concatenate([p.take(slice(None), width).letters for p in parts])
                          if parts else np.zeros((0, 1), np.uint8),
                          np.concatenate([p.lengths for p in parts]) if parts else np.zeros(0, np.int32),
                          np.concatenate([p.linker for p in parts]) if parts else np.zeros(0, np.int32))


def encode(fold_strings: Sequence[str]) -> FoldInputs:
    """The recipe's view of fold strings (see :func:`fold_energy`), as arrays.

    >>> x = encode(["acgXXXXXXXu-", "GU"])
    >>> [bytes(row).rstrip(b"\\0").decode() for row in x.letters], x.lengths.tolist(), x.linker.tolist()
    (['ACGGGGGGGGUN', 'GU'], [12, 2], [3, -1])
    """
    count = len(fold_strings)
    lengths = np.fromiter(map(len, fold_strings), np.int32, count)
    width = max(int(lengths.max(initial=0)), 1)
    letters = np.zeros((count, width), np.uint8)
    if count:
        data = np.frombuffer("".join(fold_strings).encode("latin-1", "replace"), np.uint8)
        letters[np.arange(width)[None, :] < lengths[:, None]] = _NORMALIZE[data]
    linker = np.fromiter((s.upper().find(LINKER) for s in fold_strings), np.int32, count)
    return FoldInputs(letters, lengths, linker)


def unique_strings(fold_strings: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct strings (first-seen order) and each string's index among them."""
    index: dict[str, int] = {}
    where = np.fromiter((index.setdefault(s, len(index)) for s in fold_strings), np.int64,
                        len(fold_strings))
    return list(index), where


class ViennaEngine:
    """ViennaRNA, a string at a time (:func:`fold_energy`): the reference."""

    name = "vienna"

    def energies(self, fold_strings: Sequence[str]) -> list[float]:
        return fold_energies(list(fold_strings))


class CpuEngine:
    """jaxrna's energy model vectorised with NumPy over batches of hits
    (:class:`jaxrna.targets.duplex.DuplexFolder`), on ``threads`` threads (default: every core
    of this process, one in a worker process)."""

    name = "cpu"

    def __init__(self, threads: int | None = None):
        self.threads = threads

    def energies(self, fold_strings: Sequence[str]) -> list[float]:
        uniq, where = unique_strings(fold_strings)
        return kcal(self.fold(encode(uniq)))[where].tolist()

    def fold(self, inputs: FoldInputs) -> np.ndarray:
        """Energies (dcal/mol) of encoded fold strings."""
        from jaxrna.pipeline import cores

        folder = _cpu_folder()
        out = np.zeros(len(inputs), np.int32)
        if not len(inputs):
            return out
        order = np.argsort(inputs.lengths, kind="stable")
        parts = [order[k:k + folder.batch] for k in range(0, len(order), folder.batch)]
        threads = self.threads or (1 if in_worker() else cores())
        allowed = inputs.allowed()

        def run(part):
            width = max(int(inputs.lengths[part].max()), 1)
            return folder.fold(inputs.letters[part, :width], inputs.lengths[part], allowed[part, :width])

        if threads > 1 and len(parts) > 1:
            import concurrent.futures

            with concurrent.futures.ThreadPoolExecutor(min(threads, len(parts))) as pool:
                results = list(pool.map(run, parts))
        else:
            results = [run(part) for part in parts]
        for part, res in zip(parts, results):
            out[part] = res
        return out


@functools.lru_cache(maxsize=1)
def _cpu_folder():
    from jaxrna.targets.duplex import DuplexFolder

    return DuplexFolder(recipe_params())


#: Fold strings per device call on a GPU (one compiled shape; the program needs about 0.45 MB
#: per string of 64 nt, and two calls can be in flight): the largest of these whose two calls
#: fit in 60% of the memory JAX may use on the device (the scan needs the rest); ``JAXRNA_TARGETS_ENERGY_BATCH`` overrides it. On an
#: H200 65,536 strings a call fold 1.5x faster than 16,384 (292k against 195k folds/s,
#: ``BENCHMARKS.md``).
DEVICE_BATCHES = (65536, 32768, 16384)
DEVICE_BATCH = DEVICE_BATCHES[-1]
#: Device memory per string of a call (bytes), for the choice above.
DEVICE_BYTES_PER_STRING = 460_000
#: ... and on a CPU (tests; ``cpu`` is the engine for CPUs).
DEVICE_BATCH_CPU = 32
#: The device folds strings up to this length (all of a miRNA of up to 28 nt with few bulges);
#: the rare longer ones are folded by the ``cpu`` engine in the same call, rather than compile a
#: second program for a handful of strings.
DEVICE_LENGTH = 64
#: Special hairpin energies sent to the device as int16; this value marks "not special".
_NOT_SPECIAL = np.int16(32767)


class DeviceEngine:
    """jaxrna's energy engine (:func:`jaxrna.energy.fill.fill`, ``vmap``-ped) on a JAX device:
    hits in batches of :data:`DEVICE_BATCH` strings padded to 64 nt. Inputs are built
    on the host as arrays (:func:`encode`, :func:`special_hairpins`; a worker process can
    build them) and expanded to the engine's layout on the device."""

    name = "device"

    def __init__(self, devices=None, batch: int | None = None):
        self.devices = list(devices) if devices else None
        self.batch = batch

    def __getstate__(self):  # devices stay in the process that runs them
        return {"devices": None, "batch": self.batch}

    def energies(self, fold_strings: Sequence[str]) -> list[float]:
        uniq, where = unique_strings(fold_strings)
        inputs = encode(uniq)
        return kcal(self.fold(inputs, special_hairpins(inputs)))[where].tolist()

    def batch_rows(self, platform: str, device=None) -> int:
        """Strings per device call on ``platform`` (see :data:`DEVICE_BATCHES`)."""
        if self.batch:
            return self.batch
        if platform == "cpu":
            return DEVICE_BATCH_CPU
        if os.environ.get("JAXRNA_TARGETS_ENERGY_BATCH"):
            return int(os.environ["JAXRNA_TARGETS_ENERGY_BATCH"])
        return gpu_batch(device)

    def fold(self, inputs: FoldInputs, special: tuple | None = None, device=None) -> np.ndarray:
        """Energies (dcal/mol) of encoded fold strings with their special hairpins (see
        :func:`special_hairpins`), on ``device`` (default: the first of :attr:`devices`, or
        JAX's default device); strings longer than :data:`DEVICE_LENGTH` on the CPU."""
        import jax

        out = np.zeros(len(inputs), np.int32)
        if not len(inputs):
            return out
        if special is None:
            special = special_hairpins(inputs)
        if device is None:
            device = self.devices[0] if self.devices else jax.devices()[0]
        rows = np.flatnonzero(inputs.lengths <= DEVICE_LENGTH)
        size = self.batch_rows(device.platform, device)
        pending = []
        with jax.default_device(device):
            for k in range(0, len(rows), size):
                part = rows[k:k + size]
                pending.append((part, self._launch(inputs, special, part, DEVICE_LENGTH, size,
                                                   device.platform)))
            longer = np.flatnonzero(inputs.lengths > DEVICE_LENGTH)
            if len(longer):  # while the device works
                out[longer] = CpuEngine(threads=1).fold(inputs.take(longer))
            for part, result in pending:
                out[part] = np.asarray(result)[:len(part)]
        return out

    def _launch(self, inputs: FoldInputs, special: tuple, part: np.ndarray, length: int, size: int,
                platform: str = "cpu"):
        """Start one device call (asynchronous): ``part``'s strings padded to ``length`` and
        to ``size`` rows."""
        program, args = self.call(inputs, special, part, length, size, platform)
        return program(*args)

    def call(self, inputs: FoldInputs, special: tuple, part: np.ndarray, length: int, size: int,
             platform: str = "cpu") -> tuple:
        """The device program for ``platform`` and its arguments (host arrays) for ``part``'s
        strings padded to ``length`` and to ``size`` rows (``bench/bench_turner.py`` times
        the program alone with them)."""
        from jaxrna.targets.duplex import CODES

        codes = np.zeros((size, length), np.int8)
        width = min(length, inputs.letters.shape[1])
        codes[:len(part), :width] = CODES[inputs.letters[part, :width]]
        n = np.zeros(size, np.int32)
        n[:len(part)] = inputs.lengths[part]
        linker = np.full(size, -1, np.int32)
        linker[:len(part)] = inputs.linker[part]
        sp = np.full((size, 3, length), _NOT_SPECIAL, np.int16)
        rows, kinds, pos, energy = special
        local = np.full(len(inputs), -1, np.int64)
        local[part] = np.arange(len(part))
        pick = local[rows] >= 0
        sp[local[rows[pick]], kinds[pick], pos[pick]] = energy[pick]
        program, dp = device_program(length, platform)
        return program, (codes, n, linker, sp, dp, np.int32(n.max()))


def gpu_batch(device=None) -> int:
    """The largest of :data:`DEVICE_BATCHES` whose two calls fit in 60% of the memory JAX may
    use on ``device`` (default: JAX's first device); :data:`DEVICE_BATCH` when it does not say."""
    from jaxrna.runtime import device_memory_bytes

    limit = device_memory_bytes(device)
    for rows in DEVICE_BATCHES:
        if 2 * rows * DEVICE_BYTES_PER_STRING <= 0.6 * limit:
            return rows
    return DEVICE_BATCH


def special_hairpins(inputs: FoldInputs) -> tuple:
    """The special hairpin loops (tri-, tetra-, hexaloops of the parameter set, matched on the
    letters) of encoded fold strings, sparse: arrays ``(string, kind, first position,
    energy)``, kind 0, 1, 2 for loops of 3, 4, 6 unpaired bases."""
    return _cpu_folder().special_sparse(inputs.letters, inputs.lengths)


_PROGRAM_LOCK = threading.Lock()


def device_program(length: int, platform: str = "cpu", probe: bool = True):
    """The batch program (energies only) for devices of ``platform`` and the parameters for
    ``length``, made once (device threads ask for it at the same time). ``probe``: whether a
    Pallas interior takes a tiny kernel's build first (the run's own engine does; a compile
    worker started early does not: a failed build there leaves the program to the run)."""
    from jaxrna.energy.api import interior_for

    with _PROGRAM_LOCK:     # (Pallas that does not build with this JAX: the pure-JAX gather)
        return _make_device_program(length, interior_for(platform, length, probe=probe))


def _fold_batch(codes, n, linker, special, dp, stop, length: int, interior: str = "jax"):
    """Energies of a batch of encoded fold strings padded to ``length`` (the device program,
    kept by :mod:`jaxrna.programs`: a warm GPU run loads it instead of tracing it)."""
    import jax
    import jax.numpy as jnp

    from jaxrna.energy.fill import SEQ_LEFT, fill, seq_pad
    from jaxrna.energy.params import INF
    from jaxrna.energy.terms import COL_PAD

    total = seq_pad(length)
    span = len(LINKER)

    def one(codes, n, linker, special, dp, stop):
        pos = jnp.arange(length, dtype=jnp.int32)
        s = jnp.zeros(total, jnp.int32).at[SEQ_LEFT:SEQ_LEFT + length].set(codes.astype(jnp.int32))
        free = (pos < n) & ~((linker >= 0) & (pos >= linker) & (pos < linker + span))
        allowed = jnp.zeros(total, bool).at[SEQ_LEFT:SEQ_LEFT + length].set(free)
        sp = jnp.where(special == _NOT_SPECIAL, INF, special.astype(jnp.int32))
        sp = jnp.concatenate([sp, jnp.full((3, COL_PAD), INF, jnp.int32)], axis=1)
        # keywords: the engine's own argument order has changed before
        return fill(s, allowed, sp, n, dp, stop=stop, dangles=DANGLES, interior=interior)["F"][n]

    return jax.vmap(one, in_axes=(0, 0, 0, 0, None, None))(codes, n, linker, special, dp, stop)


def fold_batch_jitted():
    """The batch program's ``jax.jit`` function (what a compile worker lowers:
    :mod:`jaxrna.compile_workers`, :mod:`jaxrna.targets.prefetch`)."""
    import jax

    return jax.jit(_fold_batch, static_argnames=("length", "interior"))


@functools.lru_cache(maxsize=None)
def _make_device_program(length: int, interior: str = "jax"):
    from jaxrna.energy.terms import device_params
    from jaxrna.programs import stored_jit

    program = stored_jit("targets.energy.fold_batch",
                         static_argnames=("length", "interior"))(_fold_batch)
    return (functools.partial(program, length=length, interior=interior),
            device_params(recipe_params(), length))
