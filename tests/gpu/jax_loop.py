"""JAX scenarios of issue 23, no gpumemshim import. Usage: jax_loop.py MODE
  keep   a jitted update called in a loop whose results are kept in a list (40 x 4 MiB)
  clean  the same loop keeping nothing
The allocator is whatever the environment says (XLA_PYTHON_CLIENT_PREALLOCATE / _ALLOCATOR)."""
import sys

import jax
import jax.numpy as jnp

mode = sys.argv[1]


@jax.jit
def update(x, k):
    return jnp.tanh(x * 1.0001 + k)


x = jnp.ones((1024, 1024), dtype=jnp.float32)  # 4 MiB
kept = []
for step in range(40):
    y = update(x, float(step))  # site: jax_update
    y.block_until_ready()
    if mode == "keep":
        kept.append(y)  # site: jax_keep
    x = jnp.tanh(x)
print("done", len(kept), float(jnp.sum(x)))
