"""ViennaRNA as the engine of ``fold --model turner`` on a CPU (:mod:`jaxrna.energy.vienna`)
against jaxrna's JAX engine: the same output, format by format.

The JAX engine folds every case through one program (padded length 512, batches of 8,
:func:`jaxrna.energy.api.fold_batch`), so this file compiles one program. Both engines' results
go through the same writers (:data:`jaxrna.formats.fold.WRITERS`). Energies and structures
are the same, ties between co-optimal structures included (jaxrna's traceback takes
ViennaRNA's choice, ``tests/test_energy_ties.py``): every format is byte-identical.
"""

import io
import json
import os
import random
import subprocess
import sys

import pytest

from compile_count import run_counted
from energy_oracle import random_sequence
from jaxrna.energy import vienna
from jaxrna.energy.api import EnergyFoldResult, EnergyModel, fold_batch
from jaxrna.energy.evaluate import energy_of_structure
from jaxrna.formats.fold import SCORE_ONLY_FORMATS, WRITERS
from jaxrna.io.fasta import Record

#: every configuration folded by both engines (~20 s); the fast subset keeps test_energy_fold
pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EDGES = ["", "A", "GC", "GGC", "GGAC", "GGGAAAC", "NNNNNNNN", "GGGGNAAACCCC", "ggggaaacccc",
         "GGGGTTTTCCCC", "gcgcTTTTgcgcNNacguAAGGCCUUCGGGCC", "RYKMSWBDHVNACGU" * 3,
         "GGGGAAACCCCAUCGAAAGAUU", "CUACGG", "GGGCUACGGCCC", "ACGU" * 100]
CONFIGS = [(p, t, d) for p in ("turner2004", "turner1999") for t in (30.0, 37.0, 55.0)
           for d in (0, 1, 2)]
STATS = {"records": 0}


def cases(seed: str, count: int) -> list[Record]:
    rng = random.Random(seed)
    seqs = []
    for _ in range(count):
        n = rng.choice([rng.randint(1, 40), rng.randint(1, 400)])
        seq = random_sequence(rng, n, "ACGUN" if rng.random() < 0.1 else "ACGU")
        if rng.random() < 0.2:
            seq = seq.lower()
        if rng.random() < 0.2:
            seq = seq.replace("U", "T").replace("u", "t")
        seqs.append(seq)
    return [Record(f"r{k}", s, f"r{k} description {k}") for k, s in enumerate(seqs)]


def jax_results(records, model: EnergyModel, with_pairs: bool = True):
    """The JAX engine's results, as fold_energy_records builds them (one 512 x 8 program)."""
    params = model.load()
    out = []
    for k in range(0, len(records), 8):
        group = records[k:k + 8]
        folded = fold_batch([r.sequence for r in group], params, model.dangles,
                            with_pairs=True, length=512, batch=8)
        for rec, (energy, partner) in zip(group, folded):
            pairs = tuple((i, int(j)) for i, j in enumerate(partner) if j > i)
            out.append(EnergyFoldResult(rec.id, rec.sequence, int(energy), model,
                                        pairs if with_pairs else None, rec.description))
    return out


def written(fmt, results) -> str:
    out = io.StringIO()
    WRITERS[fmt](results, out)
    return out.getvalue()


def same(jax, vie):
    """Check the two engines' results are the same, structures included; return them."""
    for a, b in zip(jax, vie):
        assert (a.id, a.sequence, a.energy, a.model) == (b.id, b.sequence, b.energy, b.model)
        assert a.description == b.description
        assert a.pairs == b.pairs, (a.sequence, a.structure, b.structure)
        STATS["records"] += 1
    assert len(jax) == len(vie)
    return jax


@pytest.fixture(scope="module")
def folded():
    """Every configuration: (model, records, JAX results, ViennaRNA results)."""
    out = []
    for k, (p, t, d) in enumerate(CONFIGS):
        model = EnergyModel(p, t, d)
        records = cases(f"{p}{t}{d}", 8 if k % 3 else 16)
        if k == 0:
            records = [Record(f"e{k}", s) for k, s in enumerate(EDGES)] + records
        vie = list(vienna.fold_records(records, model, processes=1 + k % 2))
        jax = jax_results(records, model)
        out.append((model, records, jax, vie, same(jax, vie)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_every_format_is_byte_identical_to_the_jax_engine(folded, fmt):
    for model, _, _, vie, want in folded:
        assert written(fmt, vie) == written(fmt, want), (model, fmt)


@pytest.fixture(scope="module")
def score_only(folded):
    """ViennaRNA's score-only results of every other configuration (worker processes), made
    once for the score-only formats."""
    return [list(vienna.fold_records(records, model, with_pairs=False, processes=2))
            for model, records, _, _, _ in folded[::2]]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", SCORE_ONLY_FORMATS)
def test_score_only_is_byte_identical_to_the_jax_engine(folded, score_only, fmt):
    """Without structures there are no ties: the output is byte-identical as it is."""
    for (model, records, jax, _, _), vie in zip(folded[::2], score_only):
        assert all(r.pairs is None for r in vie)
        plain = [EnergyFoldResult(r.id, r.sequence, r.energy, r.model, None, r.description)
                 for r in jax]
        assert written(fmt, vie) == written(fmt, plain), (model, fmt)


def test_every_structure_was_compared(folded):
    assert STATS["records"] == sum(len(records) for _, records, _, _, _ in folded) > 200


def test_parameter_file_and_processes(tmp_path):
    """A .par file is read on top of Turner 2004 as jaxrna reads it, in the caller's process
    (ViennaRNA's global set restored after) and in worker processes alike."""
    import RNA

    from test_energy_params import CUSTOM

    path = tmp_path / "custom.par"
    path.write_text(CUSTOM)
    model = EnergyModel(str(path), 45.0, 2)
    records = cases("par", 24)
    one = list(vienna.fold_records(records, model, processes=1))
    two = list(vienna.fold_records(records, model, processes=2))
    assert one == two
    params = model.load()
    for r in one:
        assert energy_of_structure(r.sequence, r.structure, params, 2) == r.energy
    # the caller's global set is untouched: Turner 2004's hairpin here
    assert RNA.fold_compound("GGGGAAACCCC").mfe()[1] == pytest.approx(-4.5)


def test_streaming_order_errors_and_progress():
    """Results in input order through the pool; a record over the memory limit is reported by
    on_error at its place and left out; on_done counts every folded record."""
    records = cases("order", 60)
    records.insert(30, Record("big", "ACGU" * 300))
    refused, done = [], []
    out = list(vienna.fold_records(records, EnergyModel(), max_bytes=40 << 20, processes=2,
                                   on_done=done.append,
                                   on_error=lambda rec, exc: refused.append((rec.id, str(exc)))))
    assert [r.id for r in out] == [r.id for r in records if r.id != "big"]
    assert refused and refused[0][0] == "big" and "--max-memory" in refused[0][1]
    assert sum(done) == 60
    from jaxrna.io.errors import ResourceError

    with pytest.raises(ResourceError):
        list(vienna.fold_records(records, EnergyModel(), max_bytes=40 << 20, processes=2))


def test_a_job_known_in_full_is_cut_into_tasks_for_every_process(monkeypatch):
    """A job that fits the read-ahead goes to the pool in at least TASKS_PER_WORKER tasks per
    process (so the processes end together), in input order, refusals in place; a job larger
    than the read-ahead keeps the full task sizes."""
    seen = []

    def pool(items, *args):
        for item in items:
            seen.append(item)
        return iter(())
    monkeypatch.setattr(vienna, "_in_pool", pool)
    records = [Record(f"r{k}", "ACGU" * 75) for k in range(100)]          # 300 nt each
    records.insert(40, Record("big", "ACGU" * 300))

    def check(n):
        if n > 1000:
            raise vienna.ResourceError("too long")
    run = vienna.run_tasks(records, check, (64, 4000, 2000), None, None, None, None, None, (),
                           4, None, lambda rec, exc: None)
    list(run)
    tasks = [item[1] for item in seen if item[0] == "task"]
    assert len(tasks) >= vienna.TASKS_PER_WORKER * 4
    assert max(len(t) for t in tasks) <= 101 // 16
    assert [r.id for item in seen for r in (item[1] if item[0] == "task" else [item[1]])] \
        == [r.id for r in records]
    assert [item[0] for item in seen].count("refused") == 1
    seen.clear()
    many = [Record(f"m{k}", "ACGU" * 75) for k in range(2000)]             # 600,000 letters
    list(vienna.run_tasks(many, check, (64, 4000, 2000), None, None, None, None, None, (), 4,
                          None, None))
    assert max(len(item[1]) for item in seen) == 4000 // 300 + 1             # the full size


def test_auto_on_a_cpu_uses_vienna_compiles_nothing_and_imports_no_jax(tmp_path):
    """The CLI with --backend auto: ViennaRNA's engine (-v says so), no program compiled, JAX
    never imported; its output is the library engine's; --backend cpu still runs JAX."""
    records = [r for r in cases("cli", 24) if len(r.sequence) <= 200][:12]
    records.append(Record("big", "GGGAAACCCU" * 40))
    fa = tmp_path / "in.fa"
    fa.write_text("".join(f">{r.id}\n{r.sequence or 'N'}\n" for r in records))
    cache = str(tmp_path / "cache")
    r = run_counted(["fold", "--model", "turner", str(fa), "-v", "--max-memory", "0.01",
                     "-f", "json", "--dangles", "1", "-T", "30"], cache)
    assert r.returncode == 2, r.stderr
    assert "ViennaRNA's MFE" in r.stderr and "without JAX" in r.stderr
    assert "record 'big' skipped" in r.stderr
    assert r.compiled == 0 and r.counts.get("programs", 0) == 0, r.counts
    model = EnergyModel("turner2004", 30.0, 1)
    from jaxrna.io.bulk import iter_batches

    kept = [x for b in iter_batches(str(fa)) for x in b.records() if x.id != "big"]
    want = written("json", vienna.fold_records(kept, model, processes=1))
    assert r.stdout == want
    probe = ("import sys\nfrom jaxrna.cli import main\n"
             f"code = main(['fold', '--model', 'turner', {str(fa)!r}, '-q', '-o', '/dev/null'])\n"
             "print(code, 'jax' in sys.modules)")
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAXRNA_CACHE_DIR=cache,
               PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    p = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert p.stdout.split() == ["0", "False"], (p.stdout, p.stderr)


def test_engine_choice(monkeypatch):
    from jaxrna.cli.fold_energy import energy_engine

    monkeypatch.delenv(vienna.ENGINE_ENV, raising=False)
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")       # no GPU can be present
    assert energy_engine("auto") == "vienna"
    assert energy_engine("cpu") == "jax"
    for value, want in (("jax", "jax"), ("device", "jax"), ("vienna", "vienna"),
                        ("auto", "vienna")):
        monkeypatch.setenv(vienna.ENGINE_ENV, value)
        assert energy_engine("auto") == want
    monkeypatch.setenv(vienna.ENGINE_ENV, "vienna")
    assert energy_engine("cpu") == "vienna"


def test_json_fields_say_the_same_model(folded):
    model, _, _, vie, _ = folded[0]
    obj = json.loads(written("json", vie[:3]))
    assert {o["params"] for o in obj} == {"turner2004"} and obj[0]["dangles"] == model.dangles
