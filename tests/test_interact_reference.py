"""BPMax oracles: the plain reference DP and the exhaustive enumeration of valid joint structures
(../shared/specs/bpmax.md), checked against the spec's test vectors and each other."""

import random

import pytest

from jaxrna.interact.brute import check_joint, enumerate_best
from jaxrna.interact.pairs import Pair, joint_weight
from jaxrna.interact.reference import reference_tables, reference_windows
from jaxrna.weights import parse_weights

# name, strand 1, strand 2, {weights: (S1, S2, F)} -- the spec's table (F only for unit)
VECTORS = [
    ("tv1", "UCGCUGCU", "GUCGGA", {"bpmax": (3, 1, 14.5), "integer": (3, 2, 15), "unit": (None, None, 6)}),
    ("tv2", "CUCCUAGUUACG", "UGGCGUUGCU", {"bpmax": (7, 7.5, 20), "integer": (8, 7, 22), "unit": (None, None, 8)}),
    ("tv3", "CCACAGGUAGCCUGCC", "GUCGUGGUCCGCAACACUCG",
     {"bpmax": (10, 14.5, 35), "integer": (11, 15, 40), "unit": (None, None, 15)}),
    ("tv4", "CACGCUGUUUCAGGGCGAUCCUCCG", "GAUAACACCACCUCCACA",
     {"bpmax": (20.5, 5, 32), "integer": (22, 7, 40), "unit": (None, None, 16)}),
    ("t1", "GGGAAAUCC", "GGAUUUCCC", {"bpmax": (7.5, 6, 19)}),
    ("t2", "ACGU", "ACGU", {"bpmax": (0, 0, 8)}),
]
CASES = [(name, s1, s2, wname, exp) for name, s1, s2, table in VECTORS for wname, exp in table.items()]

#: The spec's optimal structure of tv1 (default weights, 0-based, strand 2 read 5'->3').
TV1_STRUCTURE = [Pair("inter", 1, 4), Pair("inter", 3, 3), Pair("inter", 5, 2), Pair("inter", 7, 0),
                 Pair("intra1", 2, 6), Pair("intra2", 1, 5)]


def random_strand(rng, n):
    return "".join(rng.choice("ACGU") for _ in range(n))


@pytest.mark.parametrize("name,s1,s2,wname,exp", CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_reference_matches_spec_vectors(name, s1, s2, wname, exp):
    w = parse_weights(wname)
    F, S1, S2 = reference_tables(s1, s2, w)
    s1_exp, s2_exp, f_exp = exp
    assert F[0][len(s1) - 1][0][len(s2) - 1] / w.scale == f_exp
    if s1_exp is not None:
        assert (S1[0][len(s1) - 1] / w.scale, S2[0][len(s2) - 1] / w.scale) == (s1_exp, s2_exp)


def test_spec_tv1_structure_is_valid_and_optimal():
    w = parse_weights("bpmax")
    check_joint(TV1_STRUCTURE, "UCGCUGCU", "GUCGGA", w)
    assert joint_weight(TV1_STRUCTURE, "UCGCUGCU", "GUCGGA", w) == 29     # 14.5 in half units


GC10 = "GCGCGCGCGC"      # G-C pairs between any even and any odd position


@pytest.mark.parametrize("pairs,message", [
    ([Pair("inter", 0, 1), Pair("intra1", 0, 5)], "two pairs"),                       # rule 1
    ([Pair("intra1", 0, 5), Pair("intra1", 2, 9)], "cross"),                          # rule 2
    ([Pair("inter", 1, 2), Pair("inter", 3, 4)], "antiparallel"),                     # rule 3
    ([Pair("intra1", 0, 3)], "enclose"),                                              # hairpin >= 3
    ([Pair("inter", 0, 0)], "not an allowed"),                                        # G-G
])
def test_check_joint_rejects(pairs, message):
    w = parse_weights("unit")
    with pytest.raises(ValueError, match=message):
        check_joint(pairs, GC10, GC10, w)


def test_check_joint_rejects_zigzag():
    # arcs (1, 8) on strand 1 and (0, 5) on strand 2 share the inter pair (4, 3); (2, 7) is
    # inside the first arc only and (10, 1) inside the second only: a zigzag
    s1, s2 = GC10 + "G", GC10
    w = parse_weights("unit")
    valid = [Pair("intra1", 1, 8), Pair("intra2", 0, 5), Pair("inter", 2, 7), Pair("inter", 4, 3)]
    check_joint(valid, s1, s2, w)
    with pytest.raises(ValueError, match="zigzag"):
        check_joint(valid + [Pair("inter", 10, 1)], s1, s2, w)


def test_brute_force_equals_reference_small():
    rng = random.Random(6)
    for case in range(300):
        w = parse_weights(("bpmax", "integer", "unit")[case % 3])
        s1 = random_strand(rng, rng.randint(1, 7))
        s2 = random_strand(rng, rng.randint(1, 7))
        F, _, _ = reference_tables(s1, s2, w)
        assert enumerate_best(s1, s2, w)[0] == F[0][len(s1) - 1][0][len(s2) - 1], (s1, s2)


def test_brute_force_equals_reference_9nt():
    rng = random.Random(9)
    for case in range(6):
        w = parse_weights(("bpmax", "integer", "unit")[case % 3])
        s1, s2 = random_strand(rng, 9), random_strand(rng, 9)
        F, _, _ = reference_tables(s1, s2, w)
        assert enumerate_best(s1, s2, w)[0] == F[0][8][0][8], (s1, s2)


def test_brute_force_spec_vectors():
    for name, s1, s2, table in VECTORS:
        if len(s1) <= 9 and len(s2) <= 9:
            w = parse_weights("bpmax")
            assert enumerate_best(s1, s2, w)[0] / w.scale == table["bpmax"][2], name


def test_windowed_reference_cells_equal_unwindowed():
    rng = random.Random(3)
    w = parse_weights("integer")
    for _ in range(4):
        s1, s2 = random_strand(rng, rng.randint(5, 12)), random_strand(rng, rng.randint(5, 12))
        full, _, _ = reference_tables(s1, s2, w)
        w1, w2 = rng.randint(0, 6), rng.randint(0, 6)
        win, _, _ = reference_tables(s1, s2, w, w1, w2)
        for i1 in range(len(s1)):
            for j1 in range(i1, min(len(s1), i1 + w1 + 1)):
                for i2 in range(len(s2)):
                    for j2 in range(i2, min(len(s2), i2 + w2 + 1)):
                        assert win[i1][j1][i2][j2] == full[i1][j1][i2][j2]


def test_reference_tv3_best_window():
    w = parse_weights("bpmax")
    s1, s2 = "CCACAGGUAGCCUGCC", "GUCGUGGUCCGCAACACUCG"
    windows = reference_windows(s1, s2, w, 8, 8)
    best = max(windows.values())
    assert best / w.scale == 17.5
    # s1[8..15] x s2[0..7]: t = s2 reversed, so s2[0..7] starts at i2 = 20 - 8 = 12 on t
    assert windows[(8, 12)] == best
