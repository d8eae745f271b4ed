"""Li, Ranka and Sahni's blocked Nussinov fill (seed 001) on one GPU: Pallas kernels over the
packed half-memory table of :mod:`jaxrna.fold.packed`, and a traceback that stays on the GPU.

Schedule for one sequence (``nb`` tiles of ``T`` positions a side):

* block diagonal 0 -- the ``nb`` diagonal tiles, by the plain sweep of :mod:`jaxrna.fold.fill`
  (vmapped over tiles; ``T`` small steps);
* block diagonals ``D = 1 .. nb-1`` -- one ``lax.fori_loop`` step each, two kernels:

  1. **bulk** (:func:`~jaxrna.kernels.fold_fill_pallas.bulk_call`): the splits ``k`` in the tiles
     strictly between ``I`` and ``J = I + D`` as a max-plus product
     ``max_K  N[I, K] (x) N'[K, J]`` -- nearly all of the ``n^3 / 6`` work. The row shift
     ``N'[k, j] = N(k + 1, j)`` costs nothing: each ``k`` loads one column of tile ``(I, K)``
     and row ``k + 1`` of tile ``(K, J)`` (row 0 of ``(K+1, J)`` for the tile's last ``k``), so
     no shifted or transposed copy is stored. To fill the GPU when few tiles are left
     (``nb - D`` small), each tile's ``K`` range is split over ``S`` programs (split-K) whose
     partial maxima go to a small buffer.
  2. **finish** (:func:`~jaxrna.kernels.fold_fill_pallas.finish_call`): one program per tile takes
     the maximum of the partials and completes the tile in ``2T - 1`` steps over its diagonals,
     each step a masked reduction over the tile's own rows/columns and the diagonal tiles
     ``(I, I)``, ``(J, J)``, then a block barrier (the cells of one step feed the next).

The table stays on the GPU; :func:`traceback_device` walks it there (one interval per
``while_loop`` step, split points found by a vectorised search) and only the pairs come back.

The kernels live in :mod:`jaxrna.kernels.fold_fill_pallas` (with :class:`GpuFoldConfig`); this
module schedules them. Entry point: :func:`fold_gpu` (score and pairs of one sequence, exactly
those of the CPU path), with :func:`check_gpu_memory` / :func:`estimate_gpu_bytes` to refuse what
does not fit and :func:`config_for_length` choosing the tile size. On an H200 (BENCHMARKS.md):
16,000 nt fill in 0.22 s, 100,000 nt fill 21.9 s + traceback 3.1 s, 20.2 GB.

Everything also runs on CPU in Pallas' interpret mode (``interpret=True``), which the tests use.

>>> from jaxrna.alphabet import encode
>>> from jaxrna.weights import parse_weights
>>> cfg = GpuFoldConfig(tile=16, block=16, unroll=4)
>>> score, pairs = fold_gpu(encode("GGGAAAUCCGGGAAAUCC" * 2), parse_weights("unit").matrix(), 3,
...                         config=cfg, interpret=True)
>>> score, pairs[:3]
(12, [(1, 35), (2, 34), (5, 33)])
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxrna.fold.blocked import diagonal_tile
from jaxrna.fold.fill import NEG
from jaxrna.fold.packed import cell, n_slots, packed_bytes
from jaxrna.kernels.fold_fill_pallas import GpuFoldConfig, bulk_call, finish_call, work_items

#: Slack for XLA's own buffers, codes, the traceback's stack and the runtime.
_SLACK_BYTES = 1 << 30


#: Measured on an H200 (2026-11-21): 64-nt tiles are faster up to ~25,000 nt (the in-tile
#: finish is cheaper), 128-nt tiles beyond (the bulk kernel runs at its best block shape).
SMALL_CONFIG = GpuFoldConfig(tile=64, block=64, block_n=64, unroll=8, variant="blocked",
                             ru=8, rv=8, asm=True, bulk_warps=1, finish_warps=2,
                             target_programs=528)
LARGE_CONFIG = GpuFoldConfig(tile=128, block=64, block_n=128, unroll=8, variant="blocked",
                             ru=8, rv=8, asm=True, bulk_warps=2, finish_warps=8,
                             target_programs=1320)
LARGE_ABOVE = 24_000
DEFAULT_GPU_CONFIG = LARGE_CONFIG


def config_for_length(length: int) -> GpuFoldConfig:
    """The measured-best configuration for a sequence of ``length`` nt."""
    return SMALL_CONFIG if length <= LARGE_ABOVE else LARGE_CONFIG


def _splits(d, nb, cfg: GpuFoldConfig):
    """Split-K factor S and chunk length (in tiles) for block diagonal ``d`` (traced ints)."""
    nt = nb - d
    per_tile = max(1, cfg.target_programs // cfg.nsub)
    s = jnp.clip((per_tile + nt - 1) // nt, 1, jnp.maximum(d - 1, 1))
    chunk = (d - 1 + s - 1) // s
    return s, chunk


@partial(jax.jit, static_argnames=("config", "interpret", "stages"))
def fill_packed(codes: jax.Array, weights: jax.Array, min_loop=3,
                config: GpuFoldConfig = DEFAULT_GPU_CONFIG, interpret: bool = False,
                stages: str = "all") -> jax.Array:
    """Fill the packed table of one encoded sequence (length a multiple of ``config.tile``;
    pad with code 4). Returns ``tab`` of shape ``(nb (nb + 1) / 2, T, T)`` int32.
    ``min_loop`` is traced (one program for every value).

    ``stages`` is for profiling only: ``"bulk"`` or ``"finish"`` runs just that kernel each
    step (same amount of work, wrong table)."""
    cfg = config
    t = cfg.tile
    n = codes.shape[0]
    if n % t or n == 0:
        raise ValueError(f"sequence length {n} is not a positive multiple of the tile {t}")
    nb = n // t
    codes = codes.astype(jnp.int32)
    weights = jnp.asarray(weights, jnp.int32)
    min_loop = jnp.asarray(min_loop, jnp.int32)
    diag = jax.vmap(lambda c: diagonal_tile(c, weights, min_loop))(codes.reshape(nb, t))
    tab = jnp.full((n_slots(nb), t, t), NEG, jnp.int32).at[:nb].set(diag)
    if nb == 1:
        return tab
    wtab = weights.reshape(-1)

    idle_part = None
    if stages == "finish":
        idle_part = jnp.full((work_items(nb, cfg), t, t), NEG, jnp.int32)

    def step(d, tab):
        s, chunk = _splits(d, nb, cfg)
        params = jnp.stack([d, s, chunk, nb - d, min_loop]).astype(jnp.int32)
        if stages == "finish":
            part = idle_part
        else:
            part = bulk_call(params, tab, nb=nb, cfg=cfg, interpret=interpret)
        if stages == "bulk":
            return tab.at[0, 0, 0].max(part[0, 0, 0])  # keeps the bulk alive; O(1) per step
        return finish_call(params, codes, wtab, part, tab, nb=nb, cfg=cfg, interpret=interpret)

    return jax.lax.fori_loop(1, nb, step, tab)


def packed_score(tab: jax.Array, length: int) -> jax.Array:
    """``N(0, length - 1)`` of a packed table (0 for ``length <= 1``)."""
    if length <= 1:
        return jnp.int32(0)
    nb = int(round((np.sqrt(8 * tab.shape[0] + 1) - 1) / 2))
    return cell(tab, 0, length - 1, nb)


# --------------------------------------------------------------------------------------------
# traceback on the device
# --------------------------------------------------------------------------------------------

@partial(jax.jit, static_argnames=("search",))
def traceback_device(tab: jax.Array, codes: jax.Array, weights: jax.Array, length,
                     min_loop, search: int = 1024) -> tuple[jax.Array, jax.Array]:
    """One optimal structure, found on the device; returns ``(partner, ok)``.

    ``codes`` may be padded (its length fixes the compiled shapes; ``length`` is the true
    length and may vary without recompiling). ``partner[i]`` is the base paired with ``i`` or
    -1 (``len(codes)`` entries); ``ok`` is False if the table was inconsistent. Same
    preferences as :func:`jaxrna.fold.traceback.traceback` (i unpaired, then j unpaired, then
    the pair, then the leftmost split), so the structure is identical.
    """
    nb = int(round((np.sqrt(8 * tab.shape[0] + 1) - 1) / 2))
    return structure_search(partial(cell, tab, nb=nb), codes, weights, length, min_loop, search)


def structure_search(get, codes: jax.Array, weights: jax.Array, length, min_loop: int,
                     search: int = 1024) -> tuple[jax.Array, jax.Array]:
    """The traceback of :func:`traceback_device` on any table layout: ``get(i, j)`` reads
    ``N(i, j)`` (broadcasting over index arrays; 0 for ``j < i``). Traceable (jit, vmap)."""
    size = codes.shape[0]
    n = jnp.asarray(length, jnp.int32)
    codes = codes.astype(jnp.int32)
    weights = jnp.asarray(weights, jnp.int32)
    stack = jnp.zeros((size + 2, 2), jnp.int32).at[0].set(jnp.stack([jnp.int32(0), n - 1]))
    partner = jnp.full((size,), -1, jnp.int32)
    sp0 = (n > 1).astype(jnp.int32)

    def split_search(i, j, v):
        def cond(st):
            k0, k = st
            return (k < 0) & (k0 <= j - 2)

        def body(st):
            k0, _ = st
            ks = k0 + jnp.arange(search, dtype=jnp.int32)
            ok = (ks <= j - 2) & (get(i, ks) + get(ks + 1, j) == v)
            first = jnp.argmax(ok)
            return k0 + search, jnp.where(ok[first], ks[first], -1)

        _, k = jax.lax.while_loop(cond, body, (i + 1, jnp.int32(-1)))
        return k

    def cond(st):
        sp, _, _, ok = st
        return (sp > 0) & ok

    def body(st):
        sp, stack, partner, ok = st
        i, j = stack[sp - 1, 0], stack[sp - 1, 1]
        sp = sp - 1
        v = get(i, j)
        live = (j > i) & (v != 0)
        a_ok = get(i + 1, j) == v
        b_ok = get(i, j - 1) == v
        wgt = weights[codes[jnp.clip(i, 0, size - 1)], codes[jnp.clip(j, 0, size - 1)]]
        p_ok = (wgt > 0) & (j - i > min_loop) & (get(i + 1, j - 1) + wgt == v)
        case_a = live & a_ok
        case_b = live & ~a_ok & b_ok
        case_p = live & ~a_ok & ~b_ok & p_ok
        case_s = live & ~a_ok & ~b_ok & ~p_ok
        k = jax.lax.cond(case_s, split_search, lambda i, j, v: jnp.int32(-1), i, j, v)
        ok = ok & ~(case_s & (k < 0))
        first = jnp.where(case_a, jnp.stack([i + 1, j]),
                          jnp.where(case_b, jnp.stack([i, j - 1]),
                                    jnp.where(case_p, jnp.stack([i + 1, j - 1]),
                                              jnp.stack([k + 1, j]))))
        stack = stack.at[sp].set(jnp.where(live, first, stack[sp]))
        sp = sp + live.astype(jnp.int32)
        stack = stack.at[sp].set(jnp.where(case_s, jnp.stack([i, k]), stack[sp]))
        sp = sp + case_s.astype(jnp.int32)
        pi = jnp.where(case_p, i, size)       # out of range index: dropped
        partner = partner.at[pi].set(j, mode="drop").at[jnp.where(case_p, j, size)].set(
            i, mode="drop")
        return sp, stack, partner, ok

    _, _, partner, ok = jax.lax.while_loop(cond, body, (sp0, stack, partner, jnp.bool_(True)))
    return partner, ok


# --------------------------------------------------------------------------------------------
# memory estimate and the one-call API
# --------------------------------------------------------------------------------------------

def estimate_gpu_bytes(length: int, config: GpuFoldConfig | None = None) -> int:
    """Device memory to fold one ``length``-nt sequence with :func:`fold_gpu`: the packed
    table, the split-K partials, the diagonal-tile sweep and a fixed slack."""
    config = config or config_for_length(length)
    t = config.tile
    nb = -(-max(length, 1) // t)
    table = packed_bytes(length, t)
    partials = work_items(nb, config) * t * t * 4
    diag = nb * 3 * (t + 1) * (2 * t) * 4
    return table + partials + diag + _SLACK_BYTES


def device_memory_limit() -> int:
    """Bytes the default JAX device may allocate (0 if unknown)."""
    from jaxrna.runtime import device_memory_bytes

    return device_memory_bytes()


class GpuMemoryError(MemoryError):
    """A sequence does not fit in the GPU's memory; the message says by how much."""


def check_gpu_memory(length: int, record_id: str = "sequence", max_bytes: int | None = None,
                     config: GpuFoldConfig | None = None) -> int:
    """Refuse, before any allocation, a sequence whose packed table would not fit.

    Returns the estimate in bytes; raises :class:`GpuMemoryError` with the figures otherwise.
    ``max_bytes`` defaults to the device's allocator limit (skipped if unknown).
    """
    config = config or config_for_length(length)
    need = estimate_gpu_bytes(length, config)
    limit = device_memory_limit() if max_bytes is None else max_bytes
    if limit and need > limit:
        t = config.tile
        fit = max_length_for(limit)
        raise GpuMemoryError(
            f"record '{record_id}' ({length} nt) needs about {need / 1e9:.1f} GB of GPU memory "
            f"(packed int32 table of {packed_bytes(length, t) / 1e9:.1f} GB plus work space), "
            f"more than the {limit / 1e9:.1f} GB this GPU allows; the longest sequence that fits "
            f"is about {fit} nt. Split it into domains or use a GPU with more memory "
            f"(XLA_PYTHON_CLIENT_MEM_FRACTION raises JAX's share of the card).")
    return need


def max_length_for(limit: int, config: GpuFoldConfig | None = None) -> int:
    """The longest sequence (to 64 nt) whose estimate fits in ``limit`` bytes."""
    lo, hi = 0, 1 << 22
    while hi - lo > 64:
        mid = (lo + hi) // 2
        if estimate_gpu_bytes(mid, config) <= limit:
            lo = mid
        else:
            hi = mid
    return lo // 64 * 64


def fold_gpu(codes: np.ndarray, weights: np.ndarray, min_loop: int = 3, *,
             with_pairs: bool = True, config: GpuFoldConfig | None = None,
             interpret: bool = False, record_id: str = "sequence",
             max_bytes: int | None = None,
             pad_to: int | None = None) -> tuple[int, list[tuple[int, int]] | None]:
    """Fold one encoded sequence on the GPU: ``(score, pairs)`` in integer weight units.

    ``codes``: int codes (:func:`jaxrna.alphabet.encode`); ``weights``: the 5x5 int pair
    weights (:meth:`jaxrna.weights.WeightSet.matrix`). Pairs are sorted ``(i, j)`` tuples, the
    same structure the CPU path's traceback returns; None when ``with_pairs`` is False. The
    table never leaves the device. Raises :class:`GpuMemoryError` up front if it cannot fit.
    ``config`` None picks :func:`config_for_length`; ``pad_to`` (>= the length) pads the
    sequence further (with code 4, which never pairs: exact), so that sequences of nearby
    lengths share one compiled program.
    """
    codes = np.asarray(codes)
    n = len(codes)
    if n <= 1:
        return 0, ([] if with_pairs else None)
    config = config or config_for_length(max(n, pad_to or 0))
    if not interpret:
        check_gpu_memory(max(n, pad_to or 0), record_id, max_bytes, config)
    t = config.tile
    padded = np.full(-(-max(n, pad_to or 0) // t) * t, 4, dtype=np.int32)
    padded[:n] = codes
    wm = np.asarray(weights, np.int32)
    length = np.asarray(n, np.int32)
    out = _packed_call(padded, wm, length, min_loop, config, interpret, with_pairs)
    from jaxrna import stages

    with stages.stage("device"):
        out = jax.device_get(out)
    score = int(out[0])
    if not with_pairs:
        return score, None
    partner, ok = np.asarray(out[1])[:n], out[2]
    if not bool(ok):
        raise AssertionError("GPU table inconsistent during traceback")
    idx = np.flatnonzero(partner > np.arange(n))
    return score, [(int(i), int(partner[i])) for i in idx]


def _packed_program(codes, wm, length, min_loop, *, config: GpuFoldConfig, interpret: bool,
                    with_pairs: bool, walk: str, fill: str = "pallas"):
    """Fill, score and (with pairs) traceback of one padded sequence as one program
    (``length`` and ``min_loop`` traced). ``fill="xla"``: the pure-JAX path (the tiled fill of
    :func:`jaxrna.fold.blocked.blocked_fill` and the XLA walk over it; same score and pairs)."""
    from jaxrna.fold.walk import tile_cell, traceback_packed_kernel

    if fill == "xla":
        from jaxrna.fold.blocked import blocked_fill_traced

        tiles = blocked_fill_traced(codes, wm, min_loop, config.tile, maxplus="xla")[None]
        get = partial(tile_cell, tiles, 0)
        score = jnp.where(length > 1, get(0, length - 1), 0)
        if not with_pairs:
            return (score,)
        partner, ok = structure_search(get, codes, wm, length, min_loop)
        return score, partner, ok
    tab = fill_packed(codes, wm, min_loop, config, interpret)
    nb = codes.shape[0] // config.tile
    score = jnp.where(length > 1, cell(tab, 0, length - 1, nb), 0)
    if not with_pairs:
        return (score,)
    if walk == "kernel":
        partner, ok = traceback_packed_kernel(tab, codes, wm, length, min_loop,
                                              interpret=interpret)
    else:
        partner, ok = traceback_device(tab, codes, wm, length, min_loop)
    return score, partner, ok


_packed_jit = jax.jit(_packed_program, static_argnames=("config", "interpret", "with_pairs",
                                                        "walk", "fill"))


def _packed_call(codes: np.ndarray, wm: np.ndarray, length: np.ndarray, min_loop: int,
                 config: GpuFoldConfig, interpret: bool, with_pairs: bool):
    """Launch :func:`_packed_program` on JAX's default device through the stored executables
    (:mod:`jaxrna.programs`). On a GPU the traceback is the one-kernel walk
    (:func:`jaxrna.fold.walk.traceback_packed_kernel`: one launch for the whole structure);
    in interpret mode, or with ``JAXRNA_FOLD_WALK=xla``, the XLA walk of
    :func:`traceback_device`. A Pallas kernel that does not build falls back to its pure-JAX
    path (:mod:`jaxrna.kernels.fallback`): the walk kernel to the XLA walk, the fill kernels
    to the pure-JAX fill (``fill="xla"``)."""
    import os

    from jaxrna import programs
    from jaxrna.kernels.fallback import compile_or_fallback

    device = programs.default_device()
    args = (codes, wm, length, np.asarray(min_loop, np.int32))
    static = dict(config=config, interpret=interpret, with_pairs=with_pairs, walk="xla")

    def compiled(**choice):
        return programs.program("fold.packed", _packed_jit, args, dict(static, **choice), device)

    def packed_fill():
        if with_pairs and not interpret and os.environ.get("JAXRNA_FOLD_WALK", "kernel") != "xla":
            return compile_or_fallback("fold.walk", lambda: compiled(walk="kernel"), compiled)
        return compiled()

    run = compile_or_fallback("fold.packed_fill", packed_fill, lambda: compiled(fill="xla"))
    return run(*jax.device_put(args, device))
