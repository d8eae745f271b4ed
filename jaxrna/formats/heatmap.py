"""PNG heat maps of probability matrices: matplotlib (the optional extra ``plot``), file names
for several records, and an atomic save.

>>> plot_paths("dot.png", 2)
['dot_1.png', 'dot_2.png']
>>> plot_paths("dot.png", 1)
['dot.png']
"""

from __future__ import annotations

import os

PLOT_HINT = "pip install 'jaxrna[plot]' (or pip install matplotlib)"


def pyplot():
    """matplotlib's pyplot on the non-interactive Agg backend; ``ImportError`` with the
    install hint when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        raise ImportError(f"--plot needs matplotlib, which is not installed: {PLOT_HINT}") \
            from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_paths(path: str, count: int) -> list[str]:
    """``path`` for one record; ``STEM_K.SUFFIX`` (K = 1, 2, ...) for several."""
    if count == 1:
        return [path]
    stem, suffix = os.path.splitext(path)
    return [f"{stem}_{k}{suffix or '.png'}" for k in range(1, count + 1)]


def save_png(fig, path: str) -> None:
    """Write ``fig`` to ``path`` atomically (temporary file, then rename) and close it."""
    from jaxrna.io import atomic_output

    plt = pyplot()
    fig.tight_layout()
    with atomic_output(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=100)
    plt.close(fig)
