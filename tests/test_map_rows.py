"""``jaxrna.batching.map_rows``: ``jax.vmap`` over a batch's rows, a batch of one row run
without ``vmap`` -- the same values either way, loops and pytrees included."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxrna.batching import map_rows


def _walk(x, k, table):
    """A loop whose trip count depends on the row (batched under vmap), a pytree out."""
    def body(c):
        i, acc = c
        return i + 1, acc + table[i % table.shape[0]] * x[i % x.shape[0]]

    n, acc = jax.lax.while_loop(lambda c: c[0] < x[0] % 5 + k, body, (jnp.int32(0), jnp.int32(0)))
    return {"n": n, "acc": acc, "row": x * k}


@pytest.mark.parametrize("rows", [1, 3])
def test_rows_equal_vmap(rows):
    rng = np.random.default_rng(rows)
    x = jnp.asarray(rng.integers(0, 50, (rows, 6)), jnp.int32)
    table = jnp.asarray(rng.integers(-9, 9, 7), jnp.int32)
    want = jax.vmap(_walk, in_axes=(0, None, None))(x, 3, table)
    got = jax.jit(map_rows(_walk, in_axes=(0, None, None)))(x, 3, table)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert np.array_equal(np.asarray(g), np.asarray(w))


def test_one_row_is_traced_without_vmap():
    """The one-row program holds no batched loop: its jaxpr's while has no batch axis."""
    x = jnp.zeros((1, 6), jnp.int32)
    table = jnp.ones(7, jnp.int32)
    one = jax.make_jaxpr(map_rows(_walk, in_axes=(0, None, None)))(x, 3, table)
    two = jax.make_jaxpr(map_rows(_walk, in_axes=(0, None, None)))(jnp.zeros((2, 6), jnp.int32),
                                                                   3, table)
    loop = [e for e in one.eqns if e.primitive.name == "while"][0]
    assert all(v.aval.shape == () for v in loop.outvars)
    loop2 = [e for e in two.eqns if e.primitive.name == "while"][0]
    assert any(v.aval.shape == (2,) for v in loop2.outvars)


def test_only_leading_or_no_axis():
    with pytest.raises(ValueError, match="in_axes of 0 or None"):
        map_rows(lambda x: x, in_axes=1)(jnp.zeros((1, 2)))
