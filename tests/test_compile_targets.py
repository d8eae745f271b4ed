"""Issue 26 for ``jaxrna targets``: the programs a run compiles are few and fixed by its plan
(the chunk's class, the miRNA heights, the option class), never by its data or numeric options.

The bound (:mod:`jaxrna.targets.engine`): one chunk class per run (a run whose first chunk is
full takes the class of the largest chunk it can have), so at most 6 scan programs (lane
packing, tiling, per height -- at most 2 -- a bulk scan and a refill) and, with energies, the
``device`` energy engine's one program (fixed shape; the ``cpu`` and ``vienna`` engines
compile none): at most 7 per run.

Counted in whole processes on the CPU (:mod:`compile_count`): a second run on other files with
other scores, thresholds and scale sharing the cache compiles nothing; a run with miRNAs of
every height up to 32 compiles no more than the documented bound; a run of several chunks whose
later chunk is larger than the first's power of two compiles no more than it either; after
:func:`jaxrna.targets.warmup.warm`, a CLI run on new data compiles nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from compile_count import ROOT, run_counted

#: The bound of :mod:`jaxrna.targets.warmup` (one chunk class): lane packing, tiling, and per
#: height (at most MAX_HEIGHTS per run) a bulk scan and a refill-and-traceback program.
BOUND = 6
#: ... and with the ``device`` energy engine's program.
BOUND_WITH_ENERGIES = BOUND + 1


def _fasta(path, prefix, seqs):
    with open(path, "w") as fh:
        for k, s in enumerate(seqs):
            fh.write(f">{prefix}{k + 1} synthetic\n")
            for i in range(0, len(s), 60):
                fh.write(s[i:i + 60] + "\n")
    return str(path)


def _data(tmp_path, tag, seed, n_mirnas, lengths, total):
    """miRNAs of the given lengths and UTRs of about ``total`` nt (log-normal lengths), each UTR
    with a few planted miRNA sites so there are hits to refill and trace."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("ACGT"))
    mirnas = ["".join(rng.choice(letters, size=int(n))) for n in rng.choice(lengths, size=n_mirnas)]
    comp = str.maketrans("ACGT", "TGCA")
    utrs, size = [], 0
    while size < total:
        n = int(np.clip(np.exp(rng.normal(6.5, 0.8)), 40, 5000))
        n = min(n, total - size) if total - size >= 40 else n
        s = list(rng.choice(letters, size=n))
        m = mirnas[int(rng.integers(len(mirnas)))]
        site = m.translate(comp)[::-1]
        if n > len(site) + 2:
            at = int(rng.integers(0, n - len(site)))
            s[at:at + len(site)] = list(site)
        utrs.append("".join(s))
        size += n
    return (_fasta(tmp_path / f"mir_{tag}.fa", "mir", mirnas),
            _fasta(tmp_path / f"utr_{tag}.fa", "utr", utrs))


def _hits(run) -> int:
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout.count("\n>")


@pytest.mark.slow
def test_second_run_other_files_and_options_compiles_nothing(tmp_path):
    cache = str(tmp_path / "cache")
    m1, u1 = _data(tmp_path, "a", 1, 6, [20, 21, 22, 23, 25], 150_000)
    m2, u2 = _data(tmp_path, "b", 2, 9, [17, 19, 22, 24, 26], 210_000)
    first = run_counted(["targets", m1, u1, "--no-energy"], cache)
    assert _hits(first) > 0
    assert 0 < first.compiled <= BOUND, first.counts
    second = run_counted(["targets", m2, u2, "--no-energy", "-sc", "125", "-en", "-7", "-scale", "3.5",
                          "-go", "-8", "-ge", "-5", "--quiet"], cache)
    assert _hits(second) > 0
    assert second.compiled == 0, second.counts


@pytest.mark.slow
def test_a_run_compiles_at_most_the_bound(tmp_path):
    """miRNAs of every height up to 32 (more heights than a run keeps) and targets of many
    lengths: no more programs than the documented bound."""
    cache = str(tmp_path / "cache")
    m, u = _data(tmp_path, "c", 3, 12, [7, 12, 15, 18, 21, 23, 27, 31], 90_000)
    run = run_counted(["targets", m, u, "--no-energy", "-sc", "100"], cache)
    assert _hits(run) > 0
    assert 0 < run.compiled <= BOUND, run.counts


def test_height_classes_keep_the_tallest_and_the_most_common():
    from jaxrna.targets.engine import MAX_HEIGHTS, height_classes

    got = height_classes([8, 16, 24, 24, 24, 32, 16])
    assert len(set(got.values())) <= MAX_HEIGHTS
    assert got == {8: 24, 16: 24, 24: 24, 32: 32}
    assert all(got[h] >= h for h in got)


@pytest.mark.slow
def test_after_warm_a_cli_run_on_new_data_compiles_nothing(tmp_path):
    cache = str(tmp_path / "cache")
    env = dict(os.environ, JAXRNA_CACHE_DIR=cache, JAX_PLATFORMS="cpu",
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    code = ("from jaxrna.targets.warmup import warm; "
            "print(warm('cpu', max_length=10000, target_nt=65536, mirna_length=24))")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout.split()[-1]) > 0
    m, u = _data(tmp_path, "d", 4, 7, [16, 19, 21, 22, 24], 50_000)
    run = run_counted(["targets", m, u, "--no-energy", "-sc", "130", "-scale", "4.5"], cache)
    assert _hits(run) > 0
    assert run.compiled == 0, run.counts


def _growing_chunks(tmp_path, tag, seed):
    """miRNAs and a target file that ``--chunk-nt 65536`` cuts into a first chunk of exactly
    65,536 nt (class 65,536), a second one closed by a 10,000-nt record (71,440 nt: class
    131,072) and a short last one; planted sites in every chunk."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("ACGT"))
    mirnas = ["".join(rng.choice(letters, size=n)) for n in (15, 22, 23)]    # 2 heights
    comp = str.maketrans("ACGT", "TGCA")
    lengths = [4096] * 16 + [4096] * 15 + [10_000] + [3000] * 3
    utrs = []
    for k, n in enumerate(lengths):
        s = list(rng.choice(letters, size=n))
        site = mirnas[k % 3].translate(comp)[::-1]
        at = int(rng.integers(0, n - len(site)))
        s[at:at + len(site)] = list(site)
        utrs.append("".join(s))
    return (_fasta(tmp_path / f"mir_{tag}.fa", "mir", mirnas),
            _fasta(tmp_path / f"utr_{tag}.fa", "utr", utrs))


def test_a_full_first_chunk_takes_the_class_of_the_largest_chunk():
    """Planner level: the classes of the chunks of a run (as :class:`Engine` sizes them), for
    chunkings whose later chunks outgrow the first's power of two: one class per run."""
    import random

    from jaxrna.targets.api import _chunks_and_last
    from jaxrna.targets.engine import Engine, make_target
    from jaxrna.targets.lanes import Chunk
    from jaxrna.targets.scoring import ScanParams

    rng = random.Random("chunks")
    for chunk_nt in (65_536, 130_000, 262_144, 1_000_000):
        for _ in range(20):
            lengths = [rng.choice([rng.randint(40, 3000), rng.randint(3000, 10_240)])
                       for _ in range(rng.randint(1, 400))]
            records = [make_target(f"t{k}", "", "A" * n) for k, n in enumerate(lengths)]
            engine = Engine(ScanParams(no_energy=True))
            classes = set()
            for c, (chunk, last) in enumerate(_chunks_and_last(iter(records), chunk_nt)):
                if c == 0 and not last:
                    engine.expect_chunks(chunk_nt, max(len(t.sequence) for t in chunk))
                got = Chunk(chunk, 40, min_class=engine._class_floor)
                if not got.lane_of_target:
                    engine._class_floor = max(engine._class_floor, got.size_class)
                classes.add(got.size_class)
            assert len(classes) == 1, (chunk_nt, lengths)


@pytest.mark.slow
def test_a_run_whose_later_chunk_outgrows_the_first_class_keeps_the_bound(tmp_path):
    """Before the first chunk took the largest chunk's class, this run met two classes (65,536
    then 131,072) and compiled both sets (12 scan programs: 2 heights)."""
    cache = str(tmp_path / "cache")
    m, u = _growing_chunks(tmp_path, "g", 7)
    run = run_counted(["targets", m, u, "--no-energy", "--chunk-nt", "65536"], cache)
    assert _hits(run) > 0
    assert 0 < run.compiled <= BOUND, run.counts
    # with energies by the device engine: one program more at most (before: 13). The same
    # cache: the scan programs are the first run's, loaded, and only the energy program is
    # compiled (a cache of its own compiled the six scan programs again, CI time)
    again = run_counted(["targets", m, u, "--energy-engine", "device", "--chunk-nt", "65536"],
                        cache)
    assert _hits(again) > 0
    assert again.compiled == 1, again.counts
    assert again.compiled + again.loaded <= BOUND_WITH_ENERGIES, again.counts
