"""Substitution matrices read from Biopython's files without importing ``Bio.Align``
(:func:`jaxrna.align.scoring.read_matrix_file`) equal what Biopython loads, for every matrix."""

import os

import numpy as np
import pytest
from Bio.Align import substitution_matrices

from jaxrna.align import scoring

NAMES = substitution_matrices.load()


@pytest.mark.parametrize("name", NAMES)
def test_fast_reader_equals_biopython(name):
    m = substitution_matrices.load(name)
    got = scoring.read_matrix_file(os.path.join(scoring.matrix_directory(), name))
    if got is None:            # a layout the reader leaves to Biopython (codons: tuple alphabet)
        assert not isinstance(m.alphabet, str)
        return
    assert got[0] == m.alphabet
    assert np.array_equal(got[1], np.asarray(m, float))


def test_most_matrices_take_the_fast_reader_and_the_default_does():
    fast = [n for n in NAMES
            if scoring.read_matrix_file(os.path.join(scoring.matrix_directory(), n))]
    assert scoring.DEFAULT_MATRIX in fast and len(fast) >= len(NAMES) - 1


@pytest.mark.parametrize("name", ["NUC.4.4", "EDNAFULL", "blosum62", "PAM250", "SCHNEIDER"])
def test_scoring_is_the_same_either_way(monkeypatch, name):
    """The Scoring built from the fast reader equals the one built from Biopython's object."""
    fast = scoring.from_matrix(name, 10, 0.5) if name != "SCHNEIDER" else None
    monkeypatch.setattr(scoring, "read_matrix_file", lambda path: None)
    if fast is None:
        with pytest.raises(ValueError, match="codons"):
            scoring.from_matrix(name, 10, 0.5)
        return
    slow = scoring.from_matrix(name, 10, 0.5)
    assert fast.alphabet == slow.alphabet and fast.name == slow.name
    assert np.array_equal(fast.matrix, slow.matrix)
    assert (fast.gap_open, fast.gap_extend, fast.scale) == (slow.gap_open, slow.gap_extend,
                                                            slow.scale)


def test_unknown_matrix_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown substitution matrix 'NOPE'"):
        scoring.from_matrix("NOPE")


def test_default_run_does_not_import_bio_align():
    import subprocess
    import sys

    code = ("import sys\nfrom jaxrna.align.scoring import make_scoring\nmake_scoring()\n"
            "assert 'Bio.Align' not in sys.modules\n")
    from conftest import ROOT

    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=ROOT))
