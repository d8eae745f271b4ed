"""Sequence design by gradients of the expected partition function (dangles 0 or 2).

A probabilistic sequence ``q = softmax(logits)`` (``n x 4``, rows A, C, G, U) is pushed
toward a target structure by gradient ascent on the target's log-probability in the expected
ensemble, ``ln E[w(target)] - ln E[Z]`` (:mod:`jaxrna.energy.partition_expected`).
``E[w(target)]``, the expected Boltzmann weight of the one structure, is the expected
partition function of the ensemble restricted to the target's pairs (every other pair
forbidden) with each target pair given a log-weight ``BIG``: structures missing a target pair
are ``e^-BIG`` (``BIG = 1000``) times lighter, so ``ln E[Z_restricted] - K BIG`` is ``ln
E[w(target)]`` to float64 precision. For a one-hot ``q`` it is ViennaRNA's
``fc.pr_structure(target)`` (``-d0`` or ``-d2``, as ``dangles``; 1 and 3 are computed as 2,
as ViennaRNA's partition function does).

>>> seq, history = design("((((....))))", steps=8, seed=1)
>>> len(seq), history[-1] > history[0]
(12, True)

``design(target, dangles=2)`` designs in the dangles-2 model (tested in
``tests/test_energy_partition_expected.py``; its program takes about a minute to compile on
a CPU).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.energy.evaluate import pair_table
from jaxrna.energy.partition import length_class, pf_dangles, x64
from jaxrna.energy.partition_expected import expected_log_z

#: Log-weight given to each target pair (see the module).
BIG = 1000.0
#: Log-weight of the pairs the target does not hold (forbidden).
FORBID = -1.0e6


def pairs_of(structure: str) -> list[tuple[int, int]]:
    """The pairs (i, j) of a dot-bracket structure (0-based, sorted; ``ValueError`` if
    unbalanced, or for a letter other than ``(``, ``)`` and ``.``: a design target states
    every position)."""
    bad = next((k for k, c in enumerate(structure) if c not in "()."), None)
    if bad is not None:
        raise ValueError(f"unexpected {structure[bad]!r} at position {bad + 1}")
    return [(i, j) for i, j in enumerate(pair_table(structure)) if j > i]


def target_bonus(structure: str, length: int) -> tuple[np.ndarray, int]:
    """``(pair_bonus, K)``: ``BIG`` on the target's K pairs, ``FORBID`` elsewhere."""
    bonus = np.full((length, length), FORBID)
    pairs = pairs_of(structure)
    for i, j in pairs:
        bonus[i, j] = BIG
    return bonus, len(pairs)


def log_target_probability(q, structure: str, params="turner2004", temperature: float = 37.0,
                           length: int | None = None, dangles: int = 0):
    """``ln E[w(target)] - ln E[Z]`` of ``q`` (a JAX scalar, differentiable in ``q``; use
    under :func:`jaxrna.energy.partition.x64`; ``dangles`` 0 or 2, a Python int)."""
    if np.shape(q)[0] != len(structure):
        raise ValueError(f"{np.shape(q)[0]} positions against a structure of {len(structure)}")
    length = length or length_class(len(structure))
    bonus, k = target_bonus(structure, length)
    restricted = expected_log_z(q, params, temperature, length, pair_bonus=bonus, dangles=dangles)
    return restricted - k * BIG - expected_log_z(q, params, temperature, length, dangles=dangles)


@functools.lru_cache(maxsize=16)
def _step(structure, params, temperature, length, dangles):
    def objective(logits):
        return log_target_probability(jax.nn.softmax(logits, axis=-1), structure, params,
                                      temperature, length, dangles)
    return jax.value_and_grad(objective)


def design(structure: str, steps: int = 30, rate: float = 1.0, seed: int = 0,
           params="turner2004", temperature: float = 37.0, dangles: int = 0):
    """Gradient ascent on the logits of a probabilistic sequence from random ones:
    returns ``(sequence, history)``, the most probable letters at the end and the
    objective (:func:`log_target_probability`) before each step and at the end. ``dangles``:
    the dangle model, 0 or 2 (1 and 3 as 2)."""
    length = length_class(len(structure))
    rng = np.random.default_rng(seed)
    with x64():
        logits = jnp.asarray(rng.normal(0.0, 0.1, (len(structure), 4)))
        step = _step(structure, params, float(temperature), length, pf_dangles(dangles))
        history = []
        for _ in range(steps):
            value, grad = step(logits)
            history.append(float(value))
            logits = logits + rate * grad / (jnp.sqrt(jnp.mean(grad ** 2)) + 1e-12)
        history.append(float(step(logits)[0]))
        letters = np.asarray(jnp.argmax(logits, axis=-1))
    return "".join("ACGU"[k] for k in letters), history
