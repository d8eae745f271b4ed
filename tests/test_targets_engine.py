"""The fast engine (lanes, bulk scan, segment refills, hit selection) against the slow plain
reference implementation of the spec, on thousands of random and planted-site pairs, edge
cases and every option."""

import numpy as np
import pytest

from jaxrna.targets import reference
from jaxrna.targets.engine import Engine, make_target, prepare_query
from jaxrna.targets.scan import fill_segments, scan_lanes, unpack_track
from jaxrna.targets.scoring import ScanParams, exact_overlap, max_gain, row_tables

COMPLEMENT = {"A": "U", "C": "G", "G": "C", "U": "A", "T": "A", "N": "N"}


def random_seq(rng, n, ambiguity=0.03, dna=False):
    letters = np.array(list("ACGTN" if dna else "ACGUN"))
    seq = "".join(letters[rng.choice(5, size=n, p=[.29 - ambiguity / 2, .21, .21, .29 - ambiguity / 2, ambiguity])])
    if rng.random() < 0.2 and n:
        k = int(rng.integers(0, n))
        seq = seq[:k] + str(rng.choice(list("RYSWKMBDHVX"))) + seq[k + 1:]
    if rng.random() < 0.3:
        seq = seq.lower()
    return seq


def site_for(mirna, rng, mutations=1):
    """A target site pairing with the miRNA (reverse complement), with a few changes."""
    site = [COMPLEMENT.get(c.upper(), "N") for c in reversed(mirna)]
    for _ in range(mutations):
        k = int(rng.integers(0, len(site)))
        site[k] = str(rng.choice(list("ACGU")))
    if rng.random() < 0.3:  # a bulge or a deletion
        k = int(rng.integers(1, len(site)))
        site = site[:k] + [str(rng.choice(list("ACGU")))] + site[k:] if rng.random() < 0.5 else site[:k] + site[k + 1:]
    return "".join(site)


def make_cases(seed, n_mirnas, n_targets, max_len, plant=0.6, short=True):
    rng = np.random.default_rng(seed)
    lengths = ([4, 5, 7, 8, 9, 12, 30] if short else [18, 30]) + list(rng.integers(4 if short else 16, 31, size=n_mirnas))
    mirnas = [random_seq(rng, int(n), dna=bool(rng.random() < 0.5)) for n in lengths[:n_mirnas]]
    targets = []
    for k in range(n_targets):
        n = int(rng.integers(1, max_len))
        seq = random_seq(rng, n, dna=bool(rng.random() < 0.5))
        if rng.random() < plant:
            for _ in range(int(rng.integers(1, 4))):
                site = site_for(mirnas[int(rng.integers(0, len(mirnas)))], rng, int(rng.integers(0, 3)))
                where = rng.choice(["start", "end", "any"])
                pos = 0 if where == "start" else len(seq) if where == "end" else int(rng.integers(0, len(seq) + 1))
                seq = seq[:pos] + site + seq[pos:]
        targets.append(seq)
    if short:  # targets shorter than most miRNAs
        targets[:3] = [random_seq(rng, n) for n in (1, 3, 6)]
    return mirnas, targets


def run_fast(mirnas, targets, params, lane_columns=None, energy=None):
    engine = Engine(params, energy=energy, lane_columns=lane_columns)
    queries = [prepare_query(f"m{k}", "", s.upper(), params) for k, s in enumerate(mirnas)]
    tg = [make_target(f"t{k}", "", s.upper()) for k, s in enumerate(targets)]
    return engine.scan_chunk(queries, tg)


def compare(mirnas, targets, params, lane_columns=None, energy=None):
    found = run_fast(mirnas, targets, params, lane_columns, energy)
    n_hits = 0
    for k, q in enumerate(mirnas):
        for t, tg in enumerate(targets):
            expected = reference.scan_pair(q.upper(), tg.upper(), params, energy=energy)
            got = found.get((k, t), [])
            assert got == expected, (k, t, q, tg, params)
            n_hits += len(expected)
    return n_hits


def test_fill_matches_reference_matrices():
    """Every cell's best score and all four traceback codes, padded rows and all."""
    rng = np.random.default_rng(7)
    params = ScanParams(score_threshold=30)
    for _ in range(12):
        q = random_seq(rng, int(rng.integers(1, 31))).upper()
        t = random_seq(rng, int(rng.integers(1, 120))).upper()
        query = prepare_query("q", "", q, params)
        h = query.height + 4  # extra top padding must not change anything
        prof, go, ge, sd = query.tables_at(h)
        lanes = np.full((128, 1), 4, np.int8)
        lanes[:len(t), 0] = make_target("t", "", t).codes
        best, code = fill_segments(prof[:, :, None], go[:, None], ge[:, None], sd[:, None], lanes,
                                   threshold=params.score_threshold)
        best = np.asarray(best)[:len(t), h - len(q):, 0].T
        tracks = unpack_track(np.asarray(code)[:len(t), h - len(q):, 0].T)
        rb, rt, _ = reference.fill(q, t, params)
        assert np.array_equal(best, np.array(rb)[1:, 1:])
        for k in range(4):
            assert np.array_equal(tracks[k], np.array(rt[k])[1:, 1:])


def test_bulk_scan_column_flags():
    rng = np.random.default_rng(3)
    params = ScanParams(score_threshold=40)
    for _ in range(4):
        q = random_seq(rng, int(rng.integers(8, 25))).upper()
        t = random_seq(rng, 300).upper()
        query = prepare_query("q", "", q, params)
        lanes = np.full((320, 1), 4, np.int8)
        lanes[:300, 0] = make_target("t", "", t).codes
        lanes[0, 0] |= 8
        col = np.asarray(scan_lanes(query.profile, query.gap_open, query.gap_extend, query.seed,
                                    lanes, threshold=params.score_threshold))[:300, 0]
        expected = np.zeros(300, bool)
        for s, i, j in reference.fill(q, t, params)[2]:
            expected[j - 1] = True
        assert np.array_equal(col, expected) and expected.any()


@pytest.mark.slow
def test_thousands_of_pairs_default_options():
    """3,000 pairs, miRNAs of 4-30 nt, N/IUPAC/lowercase/T, sites at both ends, targets shorter
    than the miRNA, short lanes so sites cross lane boundaries."""
    mirnas, targets = make_cases(11, 30, 100, 120)
    assert any(len(t) < 8 for t in targets)
    n = compare(mirnas, targets, ScanParams(no_energy=True), lane_columns=61)
    assert n > 30


@pytest.mark.slow
def test_many_hits_low_threshold():
    mirnas, targets = make_cases(12, 12, 60, 200)
    n = compare(mirnas, targets, ScanParams(score_threshold=70, no_energy=True), lane_columns=61)
    assert n > 300


OPTION_SETS = [
    dict(score_threshold=90, scale=2.5),
    dict(score_threshold=60, scale=0.0),
    dict(score_threshold=80, scale=-1.5),
    dict(score_threshold=90, gap_open=-2, gap_extend=-8),
    dict(score_threshold=100, gap_open=-20, gap_extend=-1),
    dict(score_threshold=110, gap_open=0, gap_extend=-3),
    dict(score_threshold=100, gap_open=0, gap_extend=0),      # free gaps: no finite overlap
    dict(score_threshold=120, strict=True),
    dict(score_threshold=140, strict=True, scale=6.0),
]


@pytest.mark.slow
@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_every_option(options):
    mirnas, targets = make_cases(sum(map(ord, str(options))), 6, 24, 220, short=False)
    n = compare(mirnas, targets, ScanParams(no_energy=True, **options), lane_columns=61)
    assert n >= 5


@pytest.mark.slow
def test_energy_filter_and_order():
    """With energies (a stand-in folding function, deterministic per string), the energy
    threshold and the overlap bookkeeping of rejected hits behave as in the reference."""
    def fake_energy(s):
        return float(np.float32(-(sum(map(ord, s)) % 4000) / 100.0))

    mirnas, targets = make_cases(5, 6, 20, 200, plant=0.9, short=False)
    n1 = compare(mirnas, targets, ScanParams(score_threshold=90, energy_threshold=-15), lane_columns=61,
                 energy=fake_energy)
    n2 = compare(mirnas, targets, ScanParams(score_threshold=90, energy_threshold=1, strict=True),
                 energy=fake_energy)
    assert n1 >= 5 and n2 >= 1


def test_real_energies_planted():
    from jaxrna.targets.energy import fold_energy

    mirnas, targets = make_cases(21, 3, 6, 120, plant=1.0, short=False)
    assert compare(mirnas, targets, ScanParams(energy_threshold=-10), energy=fold_energy) >= 3


@pytest.mark.slow
def test_tiny_inputs():
    params = ScanParams(score_threshold=20, no_energy=True)
    mirnas = ["A", "AC", "ACG", "ACGU", "GUGAGAUCAUUUUGAAAGCUG"]
    targets = ["U", "UU", "CGU", "ACGU", "CAGCUUUCAAAAUGAUCUCAC"]
    compare(mirnas, targets, params)


def test_overlap_bound():
    params = ScanParams()
    t = row_tables("GUGAGAUCAUUUUGAAAGCUG", params)
    assert exact_overlap(t.n, max_gain(t), params) == 21 + (max_gain(t) + 36) // 4 + 1
    assert exact_overlap(21, 100, ScanParams(gap_open=0, gap_extend=0)) is None


@pytest.mark.slow
def test_small_batches_overflow_and_part_widths():
    """Many small refill launches: candidates overflow their room (a second launch with room for
    all) and launches' rows come back with different numbers of move words."""
    mirnas, targets = make_cases(21, 6, 40, 160)
    params = ScanParams(score_threshold=60, no_energy=True)
    queries = [prepare_query(f"m{k}", "", s.upper(), params) for k, s in enumerate(mirnas)]
    tg = [make_target(f"t{k}", "", s.upper()) for k, s in enumerate(targets)]
    found = Engine(params, lane_columns=37, lane_batch=128).scan_chunk(queries, tg)
    assert found == Engine(params, lane_columns=37).scan_chunk(queries, tg)
    n = 0
    for k, q in enumerate(mirnas):
        for t, s in enumerate(targets):
            expected = reference.scan_pair(q.upper(), s.upper(), params)
            assert found.get((k, t), []) == expected, (k, t)
            n += len(expected)
    assert n > 100


def test_concat_pads_move_words():
    from jaxrna.targets.engine import _concat

    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    b = np.full((1, 4), 7, np.int32)
    out = _concat([a, b])
    assert out.tolist() == [[0, 1, 2, 0], [3, 4, 5, 0], [7, 7, 7, 7]]


@pytest.mark.slow
def test_device_side_traceback_check_refuses_broken_tracebacks(monkeypatch):
    """trace_candidates counts tracebacks that reach their step bound (or leave the exact part
    of a segment) and the engine refuses such a result rather than reporting it. With the
    pure-JAX scan (the check is the engine's, after either kernel; Pallas in interpret mode
    took 32 CPU-seconds here against 7, CI time)."""
    import pytest

    from jaxrna.targets import engine as eng
    from jaxrna.targets import extract

    params = ScanParams(no_energy=True)
    q = eng.prepare_query("m", "", "GUGAGAUCAUUUUGAAAGCUG", params)
    targets = [eng.make_target("t", "", "ACGUACGUAC" * 20 + "UAGUUUUCACAAUGAUCUCGG" + "ACGUACGUAC" * 20)]
    found = eng.Engine(params, kernel="xla").scan_chunk([q], targets)
    assert [h.score for h in found[(0, 0)]] == [167]
    real = extract.trace_candidates

    def short(*args, **kwargs):  # a bound of 3 moves: the 18-move traceback breaks it
        args = list(args)
        args[9] = 3
        return real(*args, **kwargs)

    monkeypatch.setattr(extract, "trace_candidates", short)
    with pytest.raises(AssertionError, match="tracebacks"):  # (profile: the stages one by one)
        eng.Engine(params, kernel="xla", profile=True).scan_chunk([q], targets)


@pytest.mark.parametrize("kernel", ["xla", "pallas"])
def test_device_packed_lanes_and_stream_equal_the_host_packing(kernel):
    """The devices pack their lanes and refill stream from the letters (_pack_lanes); they
    equal the host's Chunk.lanes_t (transposed, padded with inert filler) and stream."""
    import jax

    from jaxrna.targets.engine import WORD, Chunk, ChunkRun, round_up

    rng = np.random.default_rng(7)
    params = ScanParams(no_energy=True)
    q = prepare_query("m", "", "GUGAGAUCAUUUUGAAAGCUG", params)
    for trial, lane_columns in enumerate((None, 61, 128, None)):
        seqs = ["".join(rng.choice(list("ACGUNRacgu"), size=int(rng.integers(1, 300))))
                for _ in range(int(rng.integers(1, 30)))]
        chunk = Chunk([make_target(f"t{k}", "", s) for k, s in enumerate(seqs)], q.overlap,
                      lane_columns=lane_columns)
        run = ChunkRun(Engine(params, kernel=kernel, interpret=True), [q], chunk, [True])
        dev = run._put(jax.devices()[0])
        rows, lanes = np.asarray(dev.lanes).shape
        assert rows == round_up(chunk.rows_out, WORD) >= chunk.rows and lanes >= chunk.n_lanes
        want = np.full((rows, lanes), 4 | 8, np.int8)
        want[:chunk.rows, :chunk.n_lanes] = chunk.lanes_t.T
        assert np.array_equal(np.asarray(dev.lanes), want), trial
        stream, starts = run._host_arrays()
        assert np.array_equal(np.asarray(dev.stream), stream), trial
        assert np.array_equal(np.asarray(dev.starts), starts), trial


@pytest.mark.slow
@pytest.mark.parametrize("pallas", [False, True])
def test_bulk_scan_word_bound_is_a_runtime_value(pallas):
    """The bulk scans walk the first ``n_words`` words only (a traced bound: one program for
    every lane length of a class): those words equal a scan of the whole array."""
    from jaxrna.kernels.miranda_fill import scan_lanes_packed
    from jaxrna.targets.scan import scan_lanes_words

    rng = np.random.default_rng(11)
    params = ScanParams(score_threshold=60, no_energy=True)
    q = prepare_query("m", "", "GUGAGAUCAUUUUGAAAGCUG", params)
    lanes = rng.integers(0, 4, size=(160, 128)).astype(np.int8)
    lanes[rng.random(lanes.shape) < 0.01] |= 8
    full = np.asarray(scan_lanes_words(q.profile, q.gap_open, q.gap_extend, q.seed, lanes,
                                       threshold=params.score_threshold))
    assert full[:3].any()
    for n_words in (np.int32(3), np.int32(5)):
        if pallas:
            tabs = [t[None] for t in q.tables_at(q.height)]
            got = np.asarray(scan_lanes_packed(*tabs, lanes, params.score_threshold, n_words,
                                               interpret=True))[0]
        else:
            got = np.asarray(scan_lanes_words(q.profile, q.gap_open, q.gap_extend, q.seed, lanes,
                                              threshold=params.score_threshold, n_words=n_words))
            assert not got[int(n_words):].any()
        assert np.array_equal(got[:int(n_words)], full[:int(n_words)])
