"""The lane layout of miRanda's bulk scan, shared by its pure-JAX path
(:mod:`jaxrna.targets.scan`), its Pallas kernels (:mod:`jaxrna.kernels.miranda_fill`) and its
compiled host scan (:mod:`jaxrna.targets.host_scan`): a target stream is a sequence of lane
codes (base 0..4, plus :data:`RESET` where a new target starts), the seed rows are the
:data:`SEED_SPAN` rows above the last, and flags are packed :data:`WORD` columns to a word.

>>> (2 | RESET) & RESET == RESET, SEED_SPAN, WORD
(True, 7, 32)
"""

#: Bit flag on a lane code: this column is the first base of a new target.
RESET = 8
#: Seed positions 2..8: the rows pinned to c = -1, just above the last row.
SEED_SPAN = 7
#: Columns packed per output (flag) word.
WORD = 32
