"""The peer of ``jaxrna fold --model turner [--partition]``: ViennaRNA's Python API on N processes, end to end.

Reads a FASTA file, folds every record with ``RNA.fold_compound(seq, md).mfe()`` (RNAfold's
model: Turner 2004 unless ``--params turner1999``, ``-d`` dangles, ``-T`` temperature) in a
pool of forked processes (``-j``, default every core) in chunks, results in input order, and
writes RNAfold's layout (``>id``, sequence, ``STRUCTURE (ENERGY)``) to ``-o`` (default
/dev/null). The last stdout line says how many records, how many processes and the seconds
(the process's whole wall time, its start-up and the import of RNA included). ``--partition``:
per record what RNAfold -p computes (``mfe()``, ``exp_params_rescale``, ``pf()``, ``bpp()``,
``centroid()``, ``mean_bp_distance()``), written as the MFE line, ``[ENSEMBLE]`` and the count
of pairs with p >= 1e-6.

    python bench/peer_vienna.py seqs.fa -j 2
    python bench/peer_vienna.py seqs.fa -j 2 --params turner1999 -d 0 -T 30 -o peer.dbn

``--make N LO HI SEED FILE`` writes the benchmark input first: N random ACGU sequences of
LO-HI nt (issue 26: ``--make 100 50 500 26 b100.fa``).
"""

from __future__ import annotations

import time

_T0 = time.perf_counter()

import argparse  # noqa: E402
import multiprocessing  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402

_MD = {}


def read_fasta(path: str) -> list[tuple[str, str]]:
    out, name, cur = [], None, []
    with open(path) as fh:
        for line in fh:
            if line.startswith(">"):
                if name is not None:
                    out.append((name, "".join(cur)))
                name, cur = line[1:].split()[0] if line[1:].split() else "", []
            else:
                cur.append(line.strip())
    if name is not None:
        out.append((name, "".join(cur)))
    return out


def _init(params: str, dangles: int, temperature: float, partition: bool = False) -> None:
    import RNA

    _MD["partition"] = partition
    if params == "turner1999":
        RNA.params_load_RNA_Turner1999()
    md = RNA.md()
    md.dangles = dangles
    md.temperature = temperature
    _MD.update(RNA=RNA, md=md)


def _fold(chunk: list[tuple[str, str]]) -> str:
    RNA, md = _MD["RNA"], _MD["md"]
    out = []
    for name, seq in chunk:
        fc = RNA.fold_compound(seq, md)
        structure, mfe = fc.mfe()
        out.append(f">{name}\n{seq}\n{structure} ({mfe:6.2f})\n")
        if _MD.get("partition"):
            fc.exp_params_rescale(mfe)
            _, ensemble = fc.pf()
            kept = sum(p >= 1e-6 for row in fc.bpp() for p in row)
            centroid, distance = fc.centroid()
            out.append(f"[{ensemble:6.2f}] {centroid} d={distance:.2f} "
                       f"diversity={fc.mean_bp_distance():.2f} pairs={kept}\n")
    return "".join(out)


def make(count: int, lo: int, hi: int, seed: int, path: str) -> None:
    rng = random.Random(seed)
    with open(path, "w") as fh:
        for k in range(count):
            n = rng.randint(lo, hi)
            fh.write(f">s{k + 1}\n" + "".join(rng.choice("ACGU") for _ in range(n)) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("fasta", nargs="?")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--params", default="turner2004", choices=["turner2004", "turner1999"])
    ap.add_argument("-d", "--dangles", type=int, default=2)
    ap.add_argument("-T", "--temp", type=float, default=37.0)
    ap.add_argument("-o", "--output", default=os.devnull)
    ap.add_argument("--chunk", type=int, default=8, help="records per task (default 8)")
    ap.add_argument("--make", nargs=5, metavar=("N", "LO", "HI", "SEED", "FILE"))
    ap.add_argument("--partition", action="store_true",
                    help="also the partition function, probabilities and centroid (RNAfold -p)")
    args = ap.parse_args()
    if args.make:
        n, lo, hi, seed, path = args.make
        make(int(n), int(lo), int(hi), int(seed), path)
        if args.fasta is None:
            return
    records = read_fasta(args.fasta)
    chunks = [records[k:k + args.chunk] for k in range(0, len(records), args.chunk)]
    init = (args.params, args.dangles, args.temp, args.partition)
    if args.jobs <= 1:
        _init(*init)
        parts = [_fold(c) for c in chunks]
    else:
        with multiprocessing.get_context("fork").Pool(args.jobs, _init, init) as pool:
            parts = pool.map(_fold, chunks, chunksize=1)
    with open(args.output, "w") as fh:
        fh.writelines(parts)
    print(f"peer_vienna: {len(records)} records, {args.jobs} processes, "
          f"{time.perf_counter() - _T0:.2f} s")


if __name__ == "__main__":
    main()
