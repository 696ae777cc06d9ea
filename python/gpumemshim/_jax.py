"""What JAX's allocator is in this process, for the analyzer (zero code change).

JAX chooses its GPU allocator from the environment when its backend starts: by default one pool
of 75 % of the device, taken at start (XLA_PYTHON_CLIENT_PREALLOCATE, _MEM_FRACTION); a pool that
grows on demand (PREALLOCATE=false); or a cudaMalloc per buffer (XLA_PYTHON_CLIENT_ALLOCATOR=
platform). Only the last shows each array to a CUDA-level trace. Once ``jax`` is imported, the
choice is written into the trace as attributes (``jax.version``, ``jax.preallocate``,
``jax.allocator``, ``jax.mem_fraction``), so the report says which mode it saw and what that
mode can and cannot show. Never raises into the program.
"""

import os


def record_allocator(jax_module):
    import gpumemshim

    env = os.environ
    gpumemshim._attribute("jax.version", getattr(jax_module, "__version__", "?"))
    gpumemshim._attribute("jax.preallocate", env.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true").strip().lower())
    gpumemshim._attribute("jax.allocator", env.get("XLA_PYTHON_CLIENT_ALLOCATOR", "default").strip().lower())
    gpumemshim._attribute("jax.mem_fraction", env.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75").strip())
