"""Plot fill time against sequence length: jaxrna on an H200 against seed 001's Table 2.

    python3 bench/plot_fold.py bench/results/fold_gpu_h200.json [-o bench/fold_gpu_h200.png]

The JSON is what ``bench/bench_fold_gpu.py --json`` writes.
"""

from __future__ import annotations

import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

#: Seed 001 (Li, Ranka, Sahni 2014), Table 2: seconds on an NVIDIA Tesla C2050.
OURS1 = {2000: 0.1, 6000: 0.6, 10000: 1.9, 14000: 4.5, 18000: 8.8, 22000: 15.1, 26000: 23.9}
OURS2 = {2000: 0.1, 6000: 0.7, 10000: 2.2, 14000: 5.1, 18000: 9.9, 22000: 16.9, 26000: 26.7,
         37000: 71.5}
CHANG = {2000: 0.3, 6000: 4.0, 10000: 16.4, 14000: 43.0, 18000: 89.5, 22000: 161.7, 26000: 266.3}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json")
    ap.add_argument("-o", "--output", default="bench/fold_gpu_h200.png")
    args = ap.parse_args(argv)
    data = json.load(open(args.json))
    rows = [r for r in data["rows"] if "fill_s" in r]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for table, label, style in ((CHANG, "Chang et al. 2010 [seed 001 ref. 12], C2050", "s:"),
                                (OURS1, "Li, Ranka, Sahni Ours1 (full table), C2050", "o--"),
                                (OURS2, "Li, Ranka, Sahni Ours2 (packed), C2050", "^--")):
        ax.plot(list(table), list(table.values()), style, color="grey", alpha=0.8, label=label)
    ns = [r["n"] for r in rows]
    ax.plot(ns, [r["fill_s"] for r in rows], "o-", color="C0", lw=2,
            label="jaxrna fill (packed table), H200")
    tb = [r for r in rows if "traceback_s" in r]
    if tb:
        ax.plot([r["n"] for r in tb], [r["fill_s"] + r["traceback_s"] for r in tb], "D",
                color="C3", label="jaxrna fill + traceback, H200")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("sequence length n (nt)")
    ax.set_ylabel("seconds")
    ceiling = data.get("ceiling_int32")
    title = "Nussinov folding on one GPU"
    if ceiling:
        best = max(r["split_ops_per_s"] for r in rows)
        title += f" (best {best / 1e12:.1f} T split ops/s = {100 * best / ceiling:.0f}% of int32 ceiling)"
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.text(0.99, 0.01, f"{data.get('device_kind') or data.get('device', '')}, jax {data.get('jax', '')}, "
             f"{data.get('date', '')}", ha="right", fontsize=7, color="grey")
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print("wrote", args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
