"""Deterministic synthetic data for the miRNA target benchmark (``bench/bench_targets.py``).

Writes ``mirnas.fa`` (2,000 miRNAs of 20-24 nt) and ``utrs.fa`` (30,000 targets with a
3'UTR-like length distribution: log-normal, mean about 1,200 nt, 30 nt at the shortest and
exactly 22,500 nt at the longest; AU-rich, 29% A and U, 21% C and G; DNA letters, 60 per line)
from a fixed seed, so every machine gets byte-identical files. Smaller sets for quick runs:
``--mirnas 100 --targets 1000`` (the first records of the full set, same lengths and letters).

    python bench/make_targets_data.py                    # -> bench/data/targets/
    python bench/make_targets_data.py --out /tmp/t --mirnas 64 --targets 2000
"""

from __future__ import annotations

import argparse
import hashlib
import os

import numpy as np

SEED = 20261121
N_MIRNAS, N_TARGETS = 2000, 30000
LONGEST = 22500
SHORTEST = 30
#: log-normal parameters giving a mean of about 1,200 nt after clipping
MU, SIGMA = 6.69, 0.9
UTR_COMPOSITION = (0.29, 0.21, 0.21, 0.29)  # A C G T


def mirna_sequences(count: int = N_MIRNAS, seed: int = SEED) -> list[str]:
    rng = np.random.default_rng([seed, 1])
    lengths = rng.integers(20, 25, size=N_MIRNAS)
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)
    out = []
    for n in lengths[:count]:
        out.append(letters[rng.integers(0, 4, size=int(n))].tobytes().decode())
    return out


def target_lengths(count: int = N_TARGETS, seed: int = SEED) -> np.ndarray:
    rng = np.random.default_rng([seed, 2])
    lengths = np.exp(rng.normal(MU, SIGMA, size=N_TARGETS)).astype(np.int64)
    lengths = np.clip(lengths, SHORTEST, LONGEST)
    lengths[int(np.argmax(lengths))] = LONGEST
    return lengths[:count]


def target_sequences(count: int = N_TARGETS, seed: int = SEED):
    """Yield the targets one at a time (the full set is ~36 Mnt)."""
    letters = np.frombuffer(b"ACGT", dtype=np.uint8)
    cum = np.cumsum(UTR_COMPOSITION)
    for k, n in enumerate(target_lengths(count, seed)):
        rng = np.random.default_rng([seed, 3, k])
        codes = np.searchsorted(cum, rng.random(int(n)), side="right").clip(0, 3)
        yield letters[codes].tobytes().decode()


def write_fasta(path: str, records, width: int = 60) -> str:
    h = hashlib.sha256()
    with open(path, "w") as fh:
        for rid, desc, seq in records:
            head = f">{rid} {desc}\n" if desc else f">{rid}\n"
            fh.write(head)
            h.update(head.encode())
            for s in range(0, len(seq), width):
                line = seq[s:s + width] + "\n"
                fh.write(line)
                h.update(line.encode())
    return h.hexdigest()[:16]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "targets"))
    ap.add_argument("--mirnas", type=int, default=N_MIRNAS)
    ap.add_argument("--targets", type=int, default=N_TARGETS)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    mirnas = mirna_sequences(args.mirnas)
    d1 = write_fasta(os.path.join(args.out, "mirnas.fa"),
                     ((f"mir-syn-{k + 1}", f"synthetic miRNA {len(s)} nt", s) for k, s in enumerate(mirnas)))
    lengths = target_lengths(args.targets)
    d2 = write_fasta(os.path.join(args.out, "utrs.fa"),
                     ((f"utr-syn-{k + 1}", f"synthetic 3'UTR {len(s)} nt", s)
                      for k, s in enumerate(target_sequences(args.targets))))
    print(f"{args.out}/mirnas.fa: {len(mirnas)} miRNAs, {sum(map(len, mirnas))} nt (sha256 {d1})")
    print(f"{args.out}/utrs.fa: {len(lengths)} targets, {int(lengths.sum())} nt, mean {lengths.mean():.0f}, "
          f"longest {int(lengths.max())} (sha256 {d2})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
