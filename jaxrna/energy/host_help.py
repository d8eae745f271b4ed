"""The host's cores fold a cold GPU run's cheap batches with ViennaRNA while programs compile.

A first run on a GPU host waits for its programs to compile (about 8-10 s each, side by side:
:mod:`jaxrna.compile_workers`); the device then runs every batch after its program is ready.
ViennaRNA gives the same structures and energies (the engines are compared byte for byte in
``tests/test_energy_vienna_engine.py`` and ``tests/test_energy_host_help.py``), and folding a
batch of short sequences with it on the host's cores costs less than that wait. So, where a
batch's program is neither in this process nor in the store when the run plans a chunk, and
ViennaRNA on the cores left beside the compile workers is estimated to fold it within
:data:`HOST_SECONDS` (the cheapest such batches first, all of them together within that
time), the host folds it, beside the device's work, and the device runs the others. The
programs of the batches the host took still compile and are stored (the run waits for them:
a later run finds every program ready and runs everything on the device, as before).

Used by :func:`jaxrna.energy.api.fold_energy_records` on a GPU (``host_help=None``) on hosts
with at least :data:`MIN_CORES` cores when ViennaRNA is installed and ``JAXRNA_ENERGY_ENGINE``
does not force jaxrna's engine.

>>> round(vienna_seconds(200) * 1e3)              # one 200-nt sequence on one core, ms
30
>>> plan = [(128, 8, [0, 1]), (512, 8, [2])]        # (class, rows, members)
>>> choose(plan, [100, 120, 500], lambda b: False, 2, 0.1)   # the 500 nt: 0.26 s / 2 > 0.1
[0]
>>> choose(plan, [100, 120, 500], lambda b: b[0] == 128, 2, 1.0)   # class 128 ready
[1]
"""

from __future__ import annotations

import threading
from typing import Callable, Sequence

#: The host takes cold batches it is estimated to fold within this many seconds, together
#: (about what a cold program's compilation takes: the device would wait as long).
HOST_SECONDS = 6.0
#: Hosts with fewer cores keep them for compiling.
MIN_CORES = 8


def vienna_seconds(n: int) -> float:
    """ViennaRNA's MFE and structure of an ``n``-nt sequence on one core, seconds: measured on
    the development VM (2026-11-26: 100 nt 5.8 ms, 200 nt 30 ms, 400 nt 149 ms, 800 nt
    0.80 s), about ``0.75 us * n^2 * (n / 200)^0.35``; a GPU host's cores are faster."""
    n = max(int(n), 1)
    return 0.75e-6 * n * n * (n / 200.0) ** 0.35


def choose(plan: Sequence[tuple], lengths: Sequence[int], ready: Callable[[tuple], bool],
           processes: int, budget: float = HOST_SECONDS) -> list[int]:
    """Indices of the batches of ``plan`` (``(class, rows, members)``) the host folds: those
    whose program is not ``ready``, cheapest first, while their estimated ViennaRNA time on
    ``processes`` processes stays within ``budget`` seconds."""
    cold = [(sum(vienna_seconds(lengths[k]) for k in members), i)
            for i, (padded, rows, members) in enumerate(plan) if not ready(plan[i])]
    chosen, total = [], 0.0
    for cost, i in sorted(cold):
        if (total + cost) / max(1, processes) > budget:
            break
        chosen.append(i)
        total += cost
    return sorted(chosen)


def host_processes() -> int:
    """ViennaRNA processes beside the compile workers (0: no help on this host)."""
    from jaxrna.compile_workers import workers
    from jaxrna.energy import vienna

    cores = vienna.cpu_count()
    if cores < MIN_CORES or not vienna.available() or vienna.engine_choice() == "jax":
        return 0
    return max(1, cores - workers() - 1)


class HostFold(threading.Thread):
    """ViennaRNA folding ``records`` (in order) on ``processes`` processes in the background;
    :meth:`results` waits and returns ``(energy, pairs)`` per record, or raises what failed."""

    def __init__(self, records: list, model, with_pairs: bool, unpaired: dict | None,
                 processes: int, on_done=None) -> None:
        super().__init__(name="jaxrna-host-fold", daemon=True)
        self.args = (records, model, with_pairs, unpaired, processes, on_done)
        self.out: list[tuple] = []
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        from jaxrna.energy import vienna

        records, model, with_pairs, unpaired, processes, on_done = self.args
        try:
            self.out = [(r.energy, r.pairs) for r in vienna.fold_records(
                records, model, with_pairs=with_pairs, on_done=on_done, unpaired=unpaired,
                processes=processes)]
        except BaseException as exc:  # noqa: BLE001 - raised again by results()
            self.error = exc

    def results(self) -> list[tuple]:
        self.join()
        if self.error is not None:
            raise self.error
        return self.out
