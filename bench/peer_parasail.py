"""The peer of ``jaxrna align`` in bench/bench_cli.py: parasail on every core, end to end.

Reads the two FASTA files, aligns the pairs (the i-th with the i-th, or all against all) in a
pool of forked processes (one per core, each on a slice of the pairs), and writes one tsv line
per pair (score, and for alignments the end positions and CIGAR) to ``-o`` (default
/dev/null). Scores are jaxrna's defaults doubled to integers (NUC.4.4 on ACGU: match 10,
mismatch -8; gap open 20, extend 1: parasail charges open + (L - 1) * extend for a gap of
length L, as jaxrna does), so score / 2 equals jaxrna's score. The last stdout line summarises
the run (pairs, cells, seconds, GCUPS).

    python bench/peer_parasail.py q.fa t.fa --pairs zip --score-only
    python bench/peer_parasail.py q.fa t.fa --mode local
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time

import parasail

_Q: list[str] = []
_T: list[str] = []
_PAIRS: list[tuple[int, int]] = []
_OPTS: dict = {}


def read_fasta(path: str) -> list[str]:
    seqs, cur = [], []
    with open(path) as fh:
        for line in fh:
            if line.startswith(">"):
                if cur:
                    seqs.append("".join(cur))
                cur = []
            else:
                cur.append(line.strip().upper().replace("U", "T"))
    if cur:
        seqs.append("".join(cur))
    return seqs


def _work(bounds: tuple[int, int]) -> list[str]:
    matrix = parasail.matrix_create("ACGT", 10, -8)
    local, score_only = _OPTS["local"], _OPTS["score_only"]
    if score_only:
        fn = parasail.sw_striped_16 if local else parasail.nw_striped_16
    else:
        fn = parasail.sw_trace_striped_16 if local else parasail.nw_trace_striped_16
    out = []
    for k in range(*bounds):
        qi, ti = _PAIRS[k]
        r = fn(_Q[qi], _T[ti], 20, 1, matrix)
        if score_only:
            out.append(f"{qi}\t{ti}\t{r.score}")
        else:
            out.append(f"{qi}\t{ti}\t{r.score}\t{r.end_query}\t{r.end_ref}\t"
                       f"{r.cigar.decode.decode() if isinstance(r.cigar.decode, bytes) else r.cigar.decode}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("queries")
    ap.add_argument("targets")
    ap.add_argument("--pairs", choices=["all", "zip"], default="all")
    ap.add_argument("--mode", choices=["global", "local"], default="global")
    ap.add_argument("--score-only", action="store_true")
    ap.add_argument("-o", "--output", default=os.devnull)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    args = ap.parse_args()
    start = time.perf_counter()
    global _Q, _T, _PAIRS
    _Q, _T = read_fasta(args.queries), read_fasta(args.targets)
    if args.pairs == "zip":
        _PAIRS = [(k, k) for k in range(min(len(_Q), len(_T)))]
    else:
        _PAIRS = [(i, j) for i in range(len(_Q)) for j in range(len(_T))]
    _OPTS.update(local=args.mode == "local", score_only=args.score_only)
    n = len(_PAIRS)
    step = max(1, -(-n // (args.workers * 8)))
    slices = [(s, min(n, s + step)) for s in range(0, n, step)]
    with multiprocessing.get_context("fork").Pool(args.workers) as pool, \
            open(args.output, "w") as out:
        for lines in pool.imap(_work, slices):
            out.write("\n".join(lines) + "\n")
    wall = time.perf_counter() - start
    cells = sum(len(_Q[i]) * len(_T[j]) for i, j in _PAIRS)
    print(f"parasail {args.mode} {'score-only' if args.score_only else 'with alignments'}: "
          f"{n} pairs, {cells:.3g} cells, {args.workers} processes, {wall:.2f} s, "
          f"{cells / wall / 1e9:.1f} GCUPS")


if __name__ == "__main__":
    main()
