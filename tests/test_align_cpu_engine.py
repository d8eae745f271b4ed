"""The CPU engine of ``jaxrna align`` (parasail's values, our traceback; issue 27): its compiled
walk (:mod:`jaxrna.align.hostwalk`) gives the numpy walk's alignments, and whole runs through it
write the device (JAX) engine's bytes on a mixed job: global, local and free end gaps, with and
without alignments, every format."""

import io
import os
import random

import numpy as np
import pytest

from jaxrna.align import engine, hostwalk
from jaxrna.align.scoring import make_scoring
from jaxrna.io.bulk import read_batch

pytest.importorskip("parasail")


@pytest.fixture
def numpy_walk():
    """Run the test body with the numpy walk (the compiled one restored after)."""
    saved = list(hostwalk._LIB)
    hostwalk._LIB[:] = [None]
    yield
    hostwalk._LIB[:] = saved


def _pairs(rng, alphabet, count, lo, hi):
    word = lambda: "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))  # noqa: E731
    return [(word(), word()) for _ in range(count)]


def _align_all(scoring, local, pairs):
    from jaxrna.align.host import HostEngine, code_text

    eng = HostEngine(scoring, local)
    codes = [(scoring.encode(a), scoring.encode(b)) for a, b in pairs]
    rows = [code_text(a) for a, _ in codes]
    cols = [code_text(b) for _, b in codes]
    rc = np.concatenate([a for a, _ in codes])
    cc = np.concatenate([b for _, b in codes])
    r0 = np.concatenate([[0], np.cumsum([len(a) for a, _ in codes])[:-1]])
    c0 = np.concatenate([[0], np.cumsum([len(b) for _, b in codes])[:-1]])
    swap = np.array([k % 3 == 0 for k in range(len(pairs))])
    return eng.align(rows, cols, swap, rc, r0, cc, c0)


SCHEMES = [("local", make_scoring(1, -1, None, 1, 1)), ("local", make_scoring(2, -3, None, 5, 2)),
           ("global", make_scoring(1, -1, None, 2, 1)), ("global", make_scoring()),
           ("global", make_scoring(1, -1, None, 2, 1, end_gaps="free"))]


def test_compiled_walk_is_built():
    """With a C compiler here the walk is compiled (without one the NumPy walk runs, and the
    tests below compare it with itself)."""
    import shutil

    if shutil.which(os.environ.get("CC") or "cc") is None:
        pytest.skip("no C compiler on this machine: the NumPy walk runs")
    assert hostwalk.library() is not None


@pytest.mark.parametrize("mode,scoring", SCHEMES)
def test_compiled_walk_equals_numpy_walk(mode, scoring, request):
    """Tie-heavy pairs (two letters, unit scores), some swapped, empty local alignments: the
    compiled walk's scores, ends, starts and ops are the numpy walk's. (Local, the compiled
    walk reads parasail's tables by columns and takes their end cell from parasail; the numpy
    walk searches row-major tables for the first best cell: the two ends agree.)"""
    rng = random.Random(27)
    pairs = _pairs(rng, "AC", 120, 1, 40) + [("AAAA", "CCCC"), ("A", "C")]
    local = mode == "local"
    fast = _align_all(scoring, local, pairs)
    request.getfixturevalue("numpy_walk")
    slow = _align_all(scoring, local, pairs)
    for a, b in zip(fast, slow):
        np.testing.assert_array_equal(a, b)


def _write(path, rng, count, lo, hi, alphabet):
    with open(path, "w") as fh:
        for k in range(count):
            seq = "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, hi)))
            fh.write(f">r{k} d\n{seq[:37]}\n{seq[37:]}\n" if len(seq) > 37 else f">r{k}\n{seq}\n")
    return str(path)


def test_host_engine_writes_the_device_engines_bytes(tmp_path):
    """A mixed job through both engines (``engine="host"``: parasail and the compiled walk;
    ``engine="device"``: JAX on the CPU): the same bytes for every case."""
    rng = random.Random(2027)
    q = _write(tmp_path / "q.fa", rng, 5, 33, 48, "ACGU")      # one length bucket: few programs
    t = _write(tmp_path / "t.fa", rng, 4, 33, 48, "ACGU")
    z = _write(tmp_path / "z.fa", rng, 5, 33, 48, "ACGU")
    cases = [("global", make_scoring(), False, "pair", t),
             ("local", make_scoring(2, -3, None, 5, 2), False, "tsv", t),
             ("local", make_scoring(1, -1, None, 1, 1), False, "json", z),
             ("global", make_scoring(1, -1, None, 2, 1, end_gaps="free"), False, "pair", t),
             ("global", make_scoring(2, -3, None, 5, 2), True, "tsv", z),
             ("local", make_scoring(2, -3, None, 5, 2), True, "json", t)]
    for mode, scoring, score_only, fmt, targets in cases:
        texts = []
        for name in ("host", "device"):
            job = engine.Job(read_batch(q, "letters"), read_batch(targets, "letters"), scoring,
                             mode == "local", targets == z, score_only)
            out = io.StringIO()
            engine.run(job, fmt, out, backend="cpu", engine=name)
            texts.append(out.getvalue())
        assert texts[0] == texts[1], (mode, scoring.name, score_only, fmt)
        assert texts[0].count("\n") > 5


def test_forked_processes_serve_every_chunk_of_a_run(tmp_path):
    """Several chunks of one run through the host engine's forked processes (started at the
    first chunk, kept for the next ones, stopped at the end; each chunk in parts, formatted
    in the process that computed them, their text handed back in files: read back into a
    stream without a descriptor, copied by ``sendfile`` into a file, the files removed after
    the run, or through the pipe where they cannot be written) write the bytes of one process computing everything,
    and those of each chunk computed whole and formatted here (``HostRunner.run``), in every
    format; after the run no forked process is left. In a fresh interpreter: the engine forks
    only where JAX is not running (this test process has it)."""
    import subprocess
    import sys

    rng = random.Random(99)
    q = _write(tmp_path / "q.fa", rng, 30, 20, 60, "ACGU")
    t = _write(tmp_path / "t.fa", rng, 40, 20, 60, "ACGU")
    script = f"""
import io, multiprocessing, os, sys, tempfile
from jaxrna import pipeline
from jaxrna.io import atomic_output
from jaxrna.align import engine, host_runner, parasail_memory
from jaxrna.align.scoring import make_scoring
from jaxrna.io.bulk import read_batch
engine.CHUNK_ALIGN = 600                                # 1,200 pairs: two chunks
real, pools = host_runner.HostRunner._processes, []
def counted(self):
    pool = real(self)
    if pool not in pools:
        pools.append(pool)
    return pool
host_runner.HostRunner._processes = counted
def job():
    return engine.Job(read_batch({q!r}, "letters"), read_batch({t!r}, "letters"),
                      make_scoring(2, -3, None, 5, 2), True, False, False)
texts = {{}}
for threads in (1, 2):
    pipeline.cores = lambda: threads
    for fmt in ("tsv", "pair", "json"):
        out = io.StringIO()
        engine.run(job(), fmt, out, backend="cpu", engine="host", workers=0)
        texts.setdefault(fmt, []).append(out.getvalue())
    print(threads, len(pools), len(multiprocessing.active_children()))
tempfile.tempdir = {str(tmp_path / "spool")!r}          # the processes' text files go here
os.makedirs(tempfile.tempdir)
for fmt in ("tsv", "pair", "json"):                     # into a file: copied by sendfile
    with atomic_output({str(tmp_path / "out.txt")!r}) as fh:
        engine.run(job(), fmt, fh, backend="cpu", engine="host", workers=0)
    texts[fmt].append(open({str(tmp_path / "out.txt")!r}).read())
print(len(pools), os.listdir(tempfile.tempdir))
def full(*args):                                        # no room for the files: the pipe
    raise OSError(28, "No space left on device")
host_runner.spool = full
with atomic_output({str(tmp_path / "out.txt")!r}) as fh:
    engine.run(job(), "pair", fh, backend="cpu", engine="host", workers=0)
texts["pair"].append(open({str(tmp_path / "out.txt")!r}).read())
for fmt in ("tsv", "pair", "json"):                     # whole chunks, formatted here
    j = job()
    runner = host_runner.HostRunner(j, 1)
    whole = []
    for s in range(0, j.n_pairs, 600):
        c = runner.run(s, *j.pairs(s, min(j.n_pairs, s + 600)))
        whole.append(engine.format_batch(engine.to_aligned(j, c), fmt, s == 0))
    head, tail = engine.file_parts(fmt, j.mode, j.scoring, j.n_pairs)
    texts[fmt].append(head + "".join(whole) + tail)
print(" ".join("same" if len(set(v)) == 1 else "differ" for v in texts.values()),
      texts["tsv"][0].count(chr(10)), "jax" in sys.modules, parasail_memory.keep_freed_memory())
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.split("\n")
    assert lines[0] == "1 0 0"                # one thread: no processes
    assert lines[1] == "2 3 0"                # two: a pool a run (three) for both its chunks,
    #                                           stopped after it
    assert lines[2] == "6 []"                 # three runs more, their text files all removed
    #                                           (and one whose files could not be written)
    assert lines[3].split()[:5] == ["same", "same", "same", str(30 * 40 + 1), "False"]
    import platform

    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert lines[3].split()[5] == str(glibc)  # the heap setting took where the C library can
