"""The targets pipeline's chunk-and-merge path (``jaxrna targets-split``, ``jaxrna targets``
per chunk, ``jaxrna targets-merge``; library code :mod:`jaxrna.targets.chunks`): splitting a
target file, scanning the chunks and merging their reports gives, byte for byte, the report of
one ``jaxrna targets`` run.

Inputs: ``test-data/miranda`` (bantam x hid 3'UTR) and ``workflows/assets/test`` (derived from it:
the hid 3'UTR cut into overlapping pieces, its reverse complement and a 4-nt record as targets;
bantam, three more miRNAs and a point mutant of bantam under bantam's id as miRNAs).
"""

import gzip
import io
import os
import random

import pytest

from jaxrna.cli import main as jaxrna_main
from jaxrna.formats.miranda import writer_for
from jaxrna.targets import chunks
from jaxrna.targets.records import Hit, PairResult
from test_nextflow_groovy import (ROOT, WORKFLOWS, Task, jax_cache, module_process,  # noqa: F401
                                  pipeline_params, task_ext, tool_env)

MIRANDA = os.path.join(ROOT, "test-data", "miranda")
ASSETS = os.path.join(WORKFLOWS, "assets", "test")


def scan(mirnas, targets, args, out):
    """One `jaxrna targets` run through the command line's own entry point (in-process)."""
    code = jaxrna_main(["targets", mirnas, targets, *args, "--output", str(out)])
    assert code == 0
    with open(out, encoding="utf-8", newline="") as fh:
        return fh.read()


def split_scan_merge(tmp_path, mirnas, targets, args, **split):
    single = scan(mirnas, targets, args, tmp_path / "single.out")
    rows = chunks.split(targets, "utrs", outdir=str(tmp_path), **split)
    reports = [scan(mirnas, str(tmp_path / name), args, tmp_path / f"{name}.out") for name, _, _ in rows]
    merged = chunks.merge_texts(reports, [r for _, r, _ in rows], chunks.fasta_ids(mirnas))
    return single, merged, rows


FORMATS = {
    "miranda": [],
    "miranda-quiet": ["--quiet"],
    "keyval": ["-f", "keyval"],
    "keyval-quiet": ["-f", "keyval", "--quiet"],
    "tsv": ["-f", "tsv"],
    "json": ["-f", "json"],
    "noenergy-quiet": ["--no-energy", "--quiet"],
    "strict-en": ["-strict", "-en", "-15"],
}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_merge_equals_single_run(name, tmp_path):
    args = ["-sc", "120", *FORMATS[name]]
    single, merged, rows = split_scan_merge(tmp_path, os.path.join(ASSETS, "mirnas.fa"),
                                            os.path.join(ASSETS, "utrs.fa"), args, chunk_nt=1200)
    assert len(rows) == 5 and sum(r for _, r, _ in rows) == 9
    assert merged == single
    if name.startswith(("miranda", "keyval", "noenergy")):
        assert single.count(">>") >= 5  # hits in several chunks and several miRNAs


def test_miranda_test_data(tmp_path):
    """test-data/miranda itself: one target record, so one chunk; default and quiet reports."""
    for args in ([], ["-quiet"], ["-sc", "100", "-keyval"]):
        single, merged, rows = split_scan_merge(tmp_path, os.path.join(MIRANDA, "bantam_stRNA.fasta"),
                                                os.path.join(MIRANDA, "hid_UTR.fasta"), args, chunk_nt=1000)
        assert len(rows) == 1 and merged == single
        assert ("Forward:" in single) or ("//hit_info" in single)


def test_one_record_per_chunk_and_gzip(tmp_path):
    gz = tmp_path / "utrs.fa.gz"
    with open(os.path.join(ASSETS, "utrs.fa"), "rb") as src, gzip.open(gz, "wb") as dst:
        dst.write(src.read())
    single, merged, rows = split_scan_merge(tmp_path, os.path.join(ASSETS, "mirnas.fa"), str(gz),
                                            ["-sc", "120", "--quiet"], chunk_records=1)
    assert [r for _, r, _ in rows] == [1] * 9 and merged == single


# --------------------------------------------------------------------------- split


def test_split_copies_records_byte_for_byte(tmp_path):
    text = ("\n>u1 first record\r\nACGU\r\nAC GU\r\n>u2\nAAAA\nCCCC\nGG\n>u3 x\nA\n>u4\nACGUACGUAC\n")
    src = tmp_path / "t.fa"
    src.write_bytes(text.encode())
    rows = chunks.split(str(src), "p", chunk_nt=8, outdir=str(tmp_path))
    assert [(r, n) for _, r, n in rows] == [(1, 8), (1, 10), (2, 11)]  # closes at >= 8 letters
    joined = b"".join((tmp_path / name).read_bytes() for name, _, _ in rows)
    assert joined == text.encode()
    manifest = (tmp_path / "p.chunks.tsv").read_text().splitlines()
    assert manifest == ["#file\trecords\tnt", "p.chunk000001.fa\t1\t8", "p.chunk000002.fa\t1\t10",
                        "p.chunk000003.fa\t2\t11"]
    rows = chunks.split(str(src), "q", chunk_records=3, outdir=str(tmp_path))
    assert [r for _, r, _ in rows] == [3, 1]


def test_split_of_an_empty_file_keeps_its_text(tmp_path):
    src = tmp_path / "empty.fa"
    src.write_text("")
    rows = chunks.split(str(src), "e", chunk_nt=5, outdir=str(tmp_path))
    assert rows == [("e.chunk000001.fa", 0, 0)]


# --------------------------------------------------------------------------- merge, synthetic


def _hit(energy, k):
    return Hit(score=150 + k, energy=energy, mirna_len=21, row_start=2, row_end=20, col_start=10 + k,
               col_end=28 + k, ref_display_start=9 + k, ref_display_end=29 + k,
               aln_mirna="gtCGAAAGTTTTACTAGAGTg", aln_map="  |:||||| |||||||||: ",
               aln_target="taGTTTTCACAATGATCTCGg", aln_len=18, matches=15, wobbles=2)


def render(fmt, quiet, no_energy, mirnas, targets, hits):
    """A report as `jaxrna targets` writes it (miRNA-major, pairs numbered from 1)."""
    out = io.StringIO()
    w = writer_for(fmt, out, no_energy=no_energy, quiet=quiet)
    w.begin()
    for i, mid in enumerate(mirnas):
        w.write(w.mirna_text(mid, f"{mid} desc", 21))
        for j, tid in enumerate(targets):
            h = hits.get((i, j))
            if h is None and not w.pairs_need_text():
                continue
            w.write(w.pair_text(PairResult(mid, tid, 21, 100, i * len(targets) + j + 1, h or [],
                                           f"{mid} desc", f"{tid} d")))
    w.end()
    return out.getvalue()


def merge_synthetic(fmt, quiet, mirnas, targets, hits, sizes, no_energy=False):
    single = render(fmt, quiet, no_energy, mirnas, targets, hits)
    reports, start = [], 0
    for n in sizes:
        part = {(i, j - start): h for (i, j), h in hits.items() if start <= j < start + n}
        reports.append(render(fmt, quiet, no_energy, mirnas, targets[start:start + n], part))
        start += n
    return single, chunks.merge_texts(reports, sizes, mirnas)


CASES = [(fmt, quiet) for fmt in ("miranda", "keyval") for quiet in (False, True)] + [("tsv", False), ("json", False)]


@pytest.mark.parametrize("fmt,quiet", CASES)
def test_hits_without_a_trailer_and_random_layouts(fmt, quiet):
    """Pairs whose energies add up to >= 0 print hits but no '>>' line; random hit layouts."""
    rng = random.Random(7)
    mirnas = ["m1", "m2", "m3", "m4"]
    targets = [f"t{j}" for j in range(11)]
    for trial in range(20):
        hits = {}
        for i in range(len(mirnas)):
            for j in range(len(targets)):
                if rng.random() < 0.3:
                    hits[(i, j)] = [_hit(rng.choice([-20.5, -3.25, 0.0, 0.5]), k) for k in range(rng.randint(1, 3))]
        cuts = sorted(rng.sample(range(1, len(targets)), rng.randint(0, 4)))
        sizes = [b - a for a, b in zip([0] + cuts, cuts + [len(targets)])]
        single, merged = merge_synthetic(fmt, quiet, mirnas, targets, hits, sizes)
        assert merged == single, (trial, sizes)


def test_duplicate_mirna_ids_placed_by_pair_number():
    mirnas = ["a", "b", "a"]
    targets = ["t0", "t1", "t2", "t3"]
    hits = {(0, 1): [_hit(-10.0, 0)], (2, 3): [_hit(-9.0, 1)], (1, 0): [_hit(-8.0, 2)]}
    for fmt, quiet in CASES[:4]:
        single, merged = merge_synthetic(fmt, quiet, mirnas, targets, hits, [2, 2])
        assert merged == single


def test_ambiguous_duplicate_ids_are_an_error_not_a_guess():
    mirnas = ["a", "b", "a"]
    targets = ["t0", "t1", "t2", "t3"]
    hits = {(0, 1): [_hit(-10.0, 0)], (2, 3): [_hit(-9.0, 1)]}
    with pytest.raises(chunks.MergeError, match="occurs more than once"):
        merge_synthetic("tsv", False, mirnas, targets, hits, [2, 2])
    # an unambiguous layout with the same ids merges fine
    hits[(1, 1)] = [_hit(-7.0, 2)]
    hits[(1, 3)] = [_hit(-7.0, 3)]
    single, merged = merge_synthetic("tsv", False, mirnas, targets, hits, [2, 2])
    assert merged == single


def test_mismatched_inputs_are_reported():
    mirnas, targets = ["m1", "m2"], ["t0", "t1", "t2"]
    hits = {(0, 0): [_hit(-10.0, 0)], (1, 2): [_hit(-9.0, 1)]}
    reports = [render("miranda", False, False, mirnas, targets[:2], {(0, 0): hits[(0, 0)]}),
               render("miranda", False, False, mirnas, targets[2:], {(1, 0): hits[(1, 2)]})]
    with pytest.raises(chunks.MergeError, match="scanned with this miRNA file and this chunk"):
        chunks.merge_texts(reports, [1, 2], mirnas)          # wrong chunk sizes
    with pytest.raises(chunks.MergeError, match="one format"):
        chunks.merge_texts([reports[0], render("tsv", False, False, mirnas, targets[2:], {})], [2, 1], mirnas)
    with pytest.raises(chunks.MergeError, match="truncated"):
        chunks.merge_texts([reports[0][:-5], reports[1]], [2, 1], mirnas)
    # chunk reports scanned with --pair-offset (the counter would be wrong after the merge)
    for quiet in (False, True):
        report = render("miranda", quiet, False, mirnas, targets[2:], {(1, 0): hits[(1, 2)]})
        shifted = report.replace("\t2\t21\t100\t", "\t3\t21\t100\t")
        assert shifted != report
        with pytest.raises(chunks.MergeError, match="pair-offset"):
            chunks.merge_texts([render("miranda", quiet, False, mirnas, targets[:2], {(0, 0): hits[(0, 0)]}),
                                shifted], [2, 1], mirnas)
    with pytest.raises(chunks.MergeError, match="truncated"):
        chunks.merge_texts([render("json", False, False, mirnas, targets[:2], {(0, 0): hits[(0, 0)]})[:-2],
                            render("json", False, False, mirnas, targets[2:], {})], [2, 1], mirnas)


def test_merge_command_line_matches_reports_by_name(tmp_path, capsys):
    mirnas, targets = ["m1", "m2"], ["t0", "t1", "t2"]
    hits = {(0, 0): [_hit(-10.0, 0)], (1, 2): [_hit(-9.0, 1)]}
    (tmp_path / "m.fa").write_text(">m1\nACGU\n>m2\nACGU\n")
    (tmp_path / "x.chunks.tsv").write_text("#file\trecords\tnt\nx.chunk000001.fa\t2\t8\nx.chunk000002.fa\t1\t4\n")
    (tmp_path / "x.chunk000001.targets.txt").write_text(
        render("miranda", True, False, mirnas, targets[:2], {(0, 0): hits[(0, 0)]}))
    (tmp_path / "x.chunk000002.targets.txt").write_text(
        render("miranda", True, False, mirnas, targets[2:], {(1, 0): hits[(1, 2)]}))
    out = tmp_path / "merged.txt"
    argv = ["targets-merge", "--manifest", str(tmp_path / "x.chunks.tsv"), "--mirnas", str(tmp_path / "m.fa"),
            "-o", str(out), str(tmp_path / "x.chunk000002.targets.txt"), str(tmp_path / "x.chunk000001.targets.txt")]
    assert jaxrna_main(argv) == 0
    assert out.read_text() == render("miranda", True, False, mirnas, targets, hits)
    capsys.readouterr()
    assert jaxrna_main(argv[:5] + argv[7:]) == 0        # standard output
    assert capsys.readouterr().out == out.read_text()
    assert jaxrna_main(argv[:-1]) == 2
    assert "jaxrna: error: no report for chunk(s) x.chunk000001" in capsys.readouterr().err
    assert jaxrna_main(argv[:-1] + [str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt: matches 0 chunks" in capsys.readouterr().err


def test_split_command_line_equals_the_library(tmp_path, capsys):
    """`jaxrna targets-split` writes what :func:`chunks.split` writes, and reports the count."""
    src = os.path.join(ASSETS, "utrs.fa")
    (tmp_path / "cli").mkdir()
    (tmp_path / "lib").mkdir()
    argv = ["targets-split", "--chunk-nt", "1200", "--chunk-records", "3", "--prefix", "u",
            "--outdir", str(tmp_path / "cli"), src]
    assert jaxrna_main(argv) == 0
    assert "9 records in 5 chunk(s)" in capsys.readouterr().err
    rows = chunks.split(src, "u", chunk_nt=1200, chunk_records=3, outdir=str(tmp_path / "lib"))
    names = sorted(os.listdir(tmp_path / "lib"))
    assert names == sorted(os.listdir(tmp_path / "cli")) and len(names) == len(rows) + 1
    for name in names:
        assert (tmp_path / "cli" / name).read_bytes() == (tmp_path / "lib" / name).read_bytes()
    assert jaxrna_main(["targets-split", "--prefix", "u", str(tmp_path / "none.fa")]) == 2
    assert "none.fa: no such file" in capsys.readouterr().err    # as every subcommand says it
    assert jaxrna_main(["targets-split", "--prefix", "a/b", src]) == 2


def test_split_of_a_bad_input_is_one_located_line_and_leaves_no_chunk(tmp_path, capsys):
    """targets-split reads through jaxrna's input layer: gzip that breaks after some records
    (or a device) is one located error, exit 2, and the chunks already written are removed."""
    import gzip
    import random

    body = "".join(f">t{k}\n{''.join(random.Random(k).choice('ACGU') for _ in range(300))}\n"
                   for k in range(200)).encode()
    broken = tmp_path / "utrs.fa.gz"
    whole = gzip.compress(body)
    broken.write_bytes(whole[:len(whole) // 2])            # truncated gzip
    out = tmp_path / "out"
    out.mkdir()
    argv = ["targets-split", "--chunk-records", "5", "--prefix", "u", "--outdir", str(out)]
    assert jaxrna_main(argv + [str(broken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"jaxrna: error: {broken}") and "gzip" in err
    assert "Traceback" not in err and os.listdir(out) == []
    assert jaxrna_main(argv + ["/dev/zero"]) == 2
    assert "/dev/zero" in capsys.readouterr().err and os.listdir(out) == []


# --------------------------------------------------------------------------- the pipeline's processes


@pytest.mark.slow
def test_pipeline_processes_split_scan_merge(tmp_path, jax_cache):
    """The TARGETS workflow's chunked path, task by task: JAXRNA_TARGETS_SPLIT, one
    JAXRNA_TARGETS per chunk (meta.chunk naming the report, as main.nf sets it), then
    JAXRNA_TARGETS_MERGE with the reports in arbitrary order; against an unsplit JAXRNA_TARGETS."""
    env = tool_env(str(tmp_path / "bin"))
    env["JAXRNA_CACHE_DIR"] = jax_cache
    params = pipeline_params("test", targets_chunk_nt=3000)
    mirnas, targets = params["mirnas"], params["targets"]
    meta = {"id": "utrs"}

    def task(module, inputs, meta, name):
        proc = module_process(module)
        ext = task_ext("JAXRNA_" + module.upper(), params, meta)
        t = Task(proc, "script", str(tmp_path / name), inputs, meta, ext, env)
        assert t.result.returncode == 0, t.result.stderr[-3000:]
        return t, t.outputs()

    split, out = task("targets_split", {"targets": targets}, meta, "split")
    assert len(out["chunks"]) == 2 and out["manifest"] == ["utrs.chunks.tsv"]
    reports = []
    for chunk in out["chunks"]:
        chunk_meta = dict(meta, chunk=chunk[: -len(".fa")])   # chunk.baseName
        t, o = task("targets", {"mirnas": mirnas, "targets": os.path.join(split.workdir, chunk)},
                    chunk_meta, chunk)
        (report,) = o["targets"]
        assert report == chunk_meta["chunk"] + ".targets.txt"
        reports.append((f"chunks/{report}", os.path.join(t.workdir, report)))
    merged, o = task("targets_merge", {"reports": reports[::-1],
                                       "manifest": os.path.join(split.workdir, "utrs.chunks.tsv"),
                                       "mirnas": mirnas}, meta, "merge")
    assert o["targets"] == ["utrs.targets.txt"]
    unsplit, u = task("targets", {"mirnas": mirnas, "targets": targets}, meta, "unsplit")
    with open(os.path.join(merged.workdir, "utrs.targets.txt"), "rb") as a, \
            open(os.path.join(unsplit.workdir, u["targets"][0]), "rb") as b:
        assert a.read() == b.read()
