"""Warm time of :func:`jaxrna.fold.partition.partition` (what ``jaxrna fold --model nussinov
--partition`` runs per record) for single random sequences, on JAX's default device.

For each length: one random ACGU sequence (fixed seed), unit weights, min loop 3, T = 1,
float64; the first call (compile or cache load) timed apart, then the best of ``--repeats``
calls in the same process. It only calls the public string API, so the same script times any
jaxrna tree (``PYTHONPATH=that_tree``): run it for two trees on the same warm machine to
compare them (issue 26: warm runs no more than 10% slower)::

    PYTHONPATH=. python bench/bench_partition_warm.py --lengths 100 300 700 2000
    PYTHONPATH=/path/to/other/tree python bench/bench_partition_warm.py --lengths 100 300
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[100, 300, 700, 2000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", metavar="FILE", help="write the rows as JSON")
    args = ap.parse_args(argv)

    import jax

    import jaxrna
    from jaxrna.fold import partition as pt

    rng = random.Random(1)
    rows = []
    print(f"# {jaxrna.__file__} on {jax.devices()[0]}", file=sys.stderr)
    print("length\tfirst_s\twarm_s\tlog_partition")
    for n in args.lengths:
        seq = "".join(rng.choice("ACGU") for _ in range(n))
        start = time.perf_counter()
        r = pt.partition(seq)
        first = time.perf_counter() - start
        warm = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            r = pt.partition(seq)
            warm.append(time.perf_counter() - start)
        rows.append(dict(length=n, first_s=first, warm_s=min(warm),
                         log_partition=r.log_partition))
        print(f"{n}\t{first:.2f}\t{min(warm):.4f}\t{r.log_partition:.10f}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(tree=jaxrna.__file__, device=str(jax.devices()[0]), rows=rows), fh,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
