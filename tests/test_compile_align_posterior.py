"""Issue 26 for ``jaxrna align --posterior``: a run compiles one program per padded class pair
(powers of two from 64: :func:`jaxrna.align.posterior_classes.batch_class`) present in its input and
mode (global or local), with a fixed row count per class; lengths within the classes, the
scores (the matrix is an argument of one shape), the gap and end gap penalties and the
temperature are traced values and compile nothing new. (Before, the substitution scores were
computed op by op and the rows followed the batch's size: 36 pairs of 30-60 nt compiled 134
programs, 18 s on this CPU.)

Whole processes on the CPU, counted with :func:`compile_count.run_counted`."""

from __future__ import annotations

import json
import random

import pytest

from compile_count import run_counted


def _fasta(path, prefix: str, lengths, seed: int) -> str:
    rng = random.Random(seed)
    path.write_text("".join(f">{prefix}{k}\n{''.join(rng.choice('ACGU') for _ in range(n))}\n"
                            for k, n in enumerate(lengths)))
    return str(path)


def test_a_run_compiles_one_program_per_class_and_other_options_compile_nothing(tmp_path):
    cache = str(tmp_path / "cache")
    q = _fasta(tmp_path / "q.fa", "q", [30, 45, 60, 64, 20, 100], 1)     # classes 64 and 128
    t = _fasta(tmp_path / "t.fa", "t", [50, 33, 61, 40, 10, 120], 2)
    out = tmp_path / "o.json"
    first = run_counted(["align", q, t, "--posterior", "--pairs", "zip", "-f", "json",
                         "-o", str(out)], cache)
    assert first.returncode == 0, first.stderr
    # (64, 64) for the first five pairs, (128, 128) for the last: one program each
    assert first.compiled == 2, first.counts
    got = json.loads(out.read_text())
    assert [(r["query_id"], r["target_id"]) for r in got] == [(f"q{k}", f"t{k}") for k in range(6)]

    # another mix in the same classes, other scores, penalties, end gaps and temperature
    q2 = _fasta(tmp_path / "q2.fa", "a", [12, 63, 5, 99, 70], 3)
    t2 = _fasta(tmp_path / "t2.fa", "b", [40, 17, 64, 65, 128], 4)
    then = run_counted(["align", q2, t2, "--posterior", "--pairs", "zip", "-f", "json",
                        "--match", "2", "--mismatch", "-1", "--gap-open", "3",
                        "--gap-extend", "1", "--temperature", "2.5", "--end-gaps", "free",
                        "-o", str(out)], cache)
    assert then.returncode == 0, then.stderr
    assert then.compiled == 0, then.counts
    assert len(json.loads(out.read_text())) == 5


@pytest.mark.slow  # 8 compilations of the posterior program, and those of the pairs alone
def test_a_wide_mix_is_merged_into_the_budget_with_the_same_results(tmp_path):
    """Nine class pairs (64 to 256 on each side) compile :data:`PROGRAM_BUDGET` (8) programs:
    the cheapest joins put some pairs in a larger class, and their posteriors are those of
    each such pair computed alone in its own class (float32: ln Z within 1e-4, probabilities
    within 1e-5)."""
    from jaxrna.align.partition import posterior_records
    from jaxrna.align.posterior_classes import PROGRAM_BUDGET
    from jaxrna.align.scoring import make_scoring
    from jaxrna.io.fasta import Record

    sizes = [(a, b) for a in (60, 120, 250) for b in (60, 120, 250)]     # 9 class pairs
    q = _fasta(tmp_path / "q.fa", "q", [a for a, _ in sizes], 5)
    t = _fasta(tmp_path / "t.fa", "t", [b for _, b in sizes], 6)
    out = tmp_path / "o.json"
    run = run_counted(["align", q, t, "--posterior", "--pairs", "zip", "-f", "json",
                       "-o", str(out)], str(tmp_path / "cache"))
    assert run.returncode == 0, run.stderr
    assert run.compiled == PROGRAM_BUDGET == 8, run.counts
    got = json.loads(out.read_text())
    seqs = {}
    for path in (q, t):
        lines = open(path).read().split()
        seqs.update({lines[k][1:]: lines[k + 1] for k in range(0, len(lines), 2)})
    import numpy as np

    from jaxrna.align.posterior_classes import batch_class, within_budget

    # the pairs the merge moved to a larger class (their class alone would differ), and one
    # that kept its class as a control: each computed alone (a program per class here)
    own = {(batch_class(a), batch_class(b)): [k] for k, (a, b) in enumerate(sizes)}
    served = {k: c for c, members in within_budget(own, 0, 4).items() for k in members}
    moved = [k for k, (a, b) in enumerate(sizes) if served[k] != (batch_class(a), batch_class(b))]
    assert 1 <= len(moved) < len(sizes)
    kept = next(k for k in range(len(sizes)) if k not in moved)
    for r in [got[k] for k in moved + [kept]]:
        alone = next(posterior_records([(Record(r["query_id"], seqs[r["query_id"]]),
                                         Record(r["target_id"], seqs[r["target_id"]]))],
                                       make_scoring(), "global"))
        assert abs(alone.log_partition - r["log_partition"]) < 1e-4 * max(1, abs(alone.log_partition))
        want = {(i + 1, j + 1): p for (i, j), p in np.ndenumerate(alone.probabilities) if p >= 1e-6}
        have = {(i, j): p for i, j, p in r["match_probabilities"]}
        for key in set(want) | set(have):
            assert abs(want.get(key, 0.0) - have.get(key, 0.0)) < 1e-5, (r["query_id"], key)
