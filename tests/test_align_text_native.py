"""The pair format's blocks in C (:mod:`jaxrna.align.text_native`) against the numpy path and
the per-alignment writer (``jaxrna.formats.align.WRITERS["pair"]``)."""

import io
import random
import re
from dataclasses import replace

import numpy as np
import pytest

from jaxrna.align import text, text_native
from jaxrna.align.api import Alignment
from jaxrna.align.reference import gotoh
from jaxrna.align.scoring import edit_preset, make_scoring
from jaxrna.formats.align import WRITERS
from jaxrna.native import compiler_available

needs_cc = pytest.mark.skipif(not compiler_available(), reason="no C compiler")


def _alignments(rng, local, scoring, count, letters="ACGUN"):
    out = []
    for k in range(count):
        a = "".join(rng.choice(letters) for _ in range(rng.randint(1, 180)))
        b = "".join(rng.choice(letters) for _ in range(rng.randint(1, 180)))
        r = gotoh(a, b, scoring, local=local)
        start, tstart = (r.query_start, r.target_start) if local and r.score > 0 else (0, 0)
        out.append(Alignment(f"q{k}_{'x' * rng.randint(0, 20)}", f"t{k}", r.score,
                             "local" if local else "global", start, r.query_end, tstart,
                             r.target_end, r.ops, a, b, scoring))
    return out


def _numpy_path(monkeypatch):
    monkeypatch.setattr(text_native, "_LIB", [None])


@needs_cc
def test_c_blocks_equal_numpy_and_the_writer(monkeypatch):
    """Random local and global alignments (unknown letters, empty local alignments, blocks
    ending anywhere in a row, names longer than the 13 shown), three scoring schemes (one a
    cost to minimise): the C path, the numpy path and the writer give the same text."""
    rng = random.Random(41)
    assert text_native.library() is not None
    for local, scoring in [(True, make_scoring(1, -1, None, 1, 0.5)), (False, make_scoring()),
                           (False, edit_preset()), (True, make_scoring(2, -3, None, 5, 2))]:
        alns = _alignments(rng, local, scoring, 40)
        ref = io.StringIO()
        WRITERS["pair"](alns, ref)
        head, tail = text.file_parts("pair", alns[0].mode, scoring, len(alns))
        b = text.AlignedBatch.from_alignments(alns)
        fast = text.pair_text(b)
        with monkeypatch.context() as m:
            _numpy_path(m)
            slow = text.pair_text(b)
        assert fast == slow
        assert head + fast + tail == ref.getvalue(), (local, scoring.name)
        assert fast.count("\n") > 40 * 20


@needs_cc
def test_c_blocks_with_wide_positions_and_the_fallbacks(monkeypatch):
    """Positions of seven digits widen the number fields in both paths alike; a negative
    position, or a name that is not ASCII, takes the numpy path (C declines: None)."""
    rng = random.Random(42)
    scoring = make_scoring(1, -1, None, 1, 0.5)
    b = text.AlignedBatch.from_alignments(_alignments(rng, True, scoring, 12))
    wide = replace(b, query_start=b.query_start + 999_990, target_start=b.target_start + 5)
    fast = text.pair_text(wide)
    with monkeypatch.context() as m:
        _numpy_path(m)
        assert text.pair_text(wide) == fast
    assert re.search(r" 100\d{4} [ACGUN-]", fast)     # a seven-digit field before a row
    args = (b.ops, b.op_offsets, b.query_seg, b.query_seg_offsets, b.target_seg,
            b.target_seg_offsets)
    names = [b"n" * 14] * len(b)
    tables = text.letter_tables(scoring)
    negative = b.query_start.copy()
    negative[3] = -5
    assert text_native.pair_blocks(*args, negative, b.target_start, names, names,
                                   *tables) is None
    got = text_native.pair_blocks(*args, b.query_start, b.target_start, names, names, *tables)
    assert got is not None and len(got[1]) == len(b) + 1
    odd = replace(b, query_ids=["ärger"] + b.query_ids[1:])
    assert text._native_blocks(odd) is None
    with monkeypatch.context() as m:
        _numpy_path(m)
        assert text.pair_text(odd) == text.pair_text(odd)


def test_width_is_the_formats():
    assert text_native.WIDTH == text.WIDTH
