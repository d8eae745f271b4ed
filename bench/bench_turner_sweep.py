"""Exactness sweep of the Turner energy engine against ViennaRNA (the oracle).

Random sequences (lengths drawn from the given range, some with N, some with positions forced
unpaired), every dangle model, both bundled parameter sets, several temperatures. For each
sequence: jaxrna's minimum free energy must equal ``RNA.fold_compound(seq, md).mfe()``, and
ViennaRNA's evaluation of jaxrna's structure must equal it too (with dangles 1, where
ViennaRNA's exterior-loop evaluation can exceed the minimum, the structure's minimum over
dangle assignments must equal it; counted apart, see jaxrna/energy/evaluate.py). Prints one
line per configuration and a summary; exit status 1 on any mismatch.

    python bench/bench_turner_sweep.py                       # ~thousands, 1-500 nt
    python bench/bench_turner_sweep.py --count 50 --min-length 500 --max-length 3000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@contextlib.contextmanager
def vienna_params(name: str):
    """Load a bundled set into ViennaRNA for the block, restoring the previous set after."""
    import RNA

    fd, path = tempfile.mkstemp(suffix=".par")
    os.close(fd)
    RNA.params_save(path)
    try:
        {"turner2004": RNA.params_load_RNA_Turner2004,
         "turner1999": RNA.params_load_RNA_Turner1999}[name]()
        yield
    finally:
        RNA.params_load(path)
        os.unlink(path)


def random_case(rng: random.Random, lo: int, hi: int):
    n = rng.randint(lo, hi)
    alphabet = "ACGUN" if rng.random() < 0.1 else "ACGU"
    seq = "".join(rng.choice(alphabet) for _ in range(n))
    unpaired = sorted(rng.sample(range(n), rng.randint(1, max(1, n // 10)))) \
        if n and rng.random() < 0.25 else []
    return seq, unpaired


def vienna_mfe(seq, unpaired, dangles, temperature):
    import RNA

    md = RNA.md()
    md.dangles = dangles
    md.temperature = temperature
    fc = RNA.fold_compound(seq, md)
    for k in unpaired:
        fc.hc_add_up(k + 1)
    structure, mfe = fc.mfe()
    return int(round(mfe * 100)), structure, fc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=150, help="sequences per configuration")
    ap.add_argument("--min-length", type=int, default=1)
    ap.add_argument("--max-length", type=int, default=500)
    ap.add_argument("--temperatures", default="37,20,55")
    ap.add_argument("--seed", type=int, default=2024)
    args = ap.parse_args(argv)

    from jaxrna.batching import bucket_length
    from jaxrna.energy.api import fold_batch
    from jaxrna.energy.evaluate import energy_of_structure
    from jaxrna.energy.params import load_params

    rng = random.Random(args.seed)
    temps = [float(t) for t in args.temperatures.split(",")]
    total = bad = quirk = 0
    same_structure = 0
    t_ours = t_vienna = 0.0
    for name in ("turner2004", "turner1999"):
        with vienna_params(name):
            for temperature in temps:
                params = load_params(name, temperature)
                for dangles in (0, 1, 2):
                    cases = [random_case(rng, args.min_length, args.max_length) for _ in range(args.count)]
                    cases.sort(key=lambda c: bucket_length(len(c[0])))
                    mism = 0
                    k = 0
                    while k < len(cases):
                        b = bucket_length(len(cases[k][0]))
                        size = 8 if b <= 512 else 1
                        group = [c for c in cases[k:k + size] if bucket_length(len(c[0])) == b]
                        k += len(group)
                        t = time.perf_counter()
                        got = fold_batch([c[0] for c in group], params, dangles,
                                         unpaired=[c[1] for c in group], length=b,
                                         batch=8 if b <= 512 else 1)
                        t_ours += time.perf_counter() - t
                        for (seq, up), (energy, partner) in zip(group, got):
                            t = time.perf_counter()
                            want, vs, fc = vienna_mfe(seq, up, dangles, temperature)
                            t_vienna += time.perf_counter() - t
                            structure = "".join("." if x < 0 else "(" if x > i else ")"
                                                for i, x in enumerate(partner))
                            ev = int(round(fc.eval_structure(structure) * 100))
                            total += 1
                            same_structure += structure == vs
                            if energy == want and ev != want and dangles == 1 and \
                                    energy_of_structure(seq, structure, params, 1, vienna_d1=False) == want \
                                    and energy_of_structure(seq, structure, params, 1) == ev:
                                quirk += 1          # ViennaRNA's -d1 exterior-loop evaluation
                                continue
                            if energy != want or ev != want:
                                mism += 1
                                print(f"MISMATCH {name} T={temperature} d{dangles} {seq} "
                                      f"unpaired={up} ours={energy} vienna={want} eval={ev}")
                    bad += mism
                    print(f"{name:10s} T={temperature:5.1f} d{dangles}: {len(cases)} sequences, "
                          f"{mism} mismatches", flush=True)
    print(f"total {total} sequences, {bad} mismatches; identical structures {same_structure}; "
          f"ViennaRNA's -d1 evaluation above the minimum for {quirk} optimal structures; "
          f"jaxrna {t_ours:.1f} s (compiles included), ViennaRNA {t_vienna:.1f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
