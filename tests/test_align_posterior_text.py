"""``jaxrna align --posterior``'s JSON and dot-plot text, built with array operations
(:func:`jaxrna.formats.fold_partition.text_of_triples`), byte for byte what formatting each
triple with Python writes (the reference below: ``json.dumps`` of the whole object, ``%.6g``),
on random float64 and float32 matrices with ties, ones, values at the threshold and empty
pairs."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from jaxrna.align.partition import Posterior
from jaxrna.formats import align_posterior as ap


def _reference_triples(P):
    """Every ``(i, j, p)`` with ``p >= 1e-6`` (compared in ``P``'s own type), 1-based,
    row-major."""
    P = np.asarray(P)
    rows, cols = np.nonzero(P >= 1e-6)
    return [(int(i) + 1, int(j) + 1, float(P[i, j])) for i, j in zip(rows, cols)]


def _reference_json(results, out):
    out.write("[")
    first = True
    for r in results:
        m, n = r.probabilities.shape
        obj = {"query_id": r.query_id, "target_id": r.target_id, "mode": r.mode,
               "temperature": r.temperature, "query_length": m, "target_length": n,
               "log_partition": float(f"{r.log_partition:.10g}"),
               "match_probabilities": [[i, j, float(f"{p:.6g}")]
                                       for i, j, p in _reference_triples(r.probabilities)]}
        out.write(("\n  " if first else ",\n  ") + json.dumps(obj))
        first = False
    out.write("\n]\n" if not first else "]\n")


def _reference_dotplot(results, out):
    for r in results:
        out.write(f"# {r.query_id} {r.target_id} {float(f'{r.log_partition:.10g}')!r}\n")
        out.write("".join(f"{i} {j} {p:.6g}\n" for i, j, p in _reference_triples(r.probabilities)))


def _results(seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(25):
        m, n = rng.integers(1, 130, 2)
        P = rng.random((m, n)) ** rng.integers(1, 12)
        P[rng.random((m, n)) < 0.1] = 1.0
        P[rng.random((m, n)) < 0.05] = 1e-6              # at the threshold: kept
        P[rng.random((m, n)) < 0.05] = 9.999995e-7       # just below: left out
        P[rng.random((m, n)) < 0.05] = 0.1234565         # a rounding tie at 6 digits
        if k % 2:                                        # as the engine gives them
            P = P.astype(np.float32)
            P[rng.random((m, n)) < 0.05] = np.float32(1e-6)     # below 1e-6 in float64: kept
        out.append(Posterior(f"q{k}", f"t{k}", "global", 1.0, float(rng.normal() * 100), P))
    out.append(Posterior("empty", "pair", "local", 2.0, 0.0, np.zeros((0, 0))))
    return out


@pytest.mark.parametrize("writer, reference", [(ap.write_json, _reference_json),
                                               (ap.write_dotplot, _reference_dotplot)])
def test_array_text_is_the_per_triple_text(writer, reference):
    for seed in (1, 2):
        results = _results(seed)
        fast, slow = io.StringIO(), io.StringIO()
        writer(results, fast)
        reference(results, slow)
        assert fast.getvalue() == slow.getvalue()
    assert len(fast.getvalue()) > 100_000          # the matrices gave many triples
    empty_fast, empty_slow = io.StringIO(), io.StringIO()
    writer([], empty_fast)
    reference([], empty_slow)
    assert empty_fast.getvalue() == empty_slow.getvalue()
