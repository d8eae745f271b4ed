"""Hot loops behind a backend seam: a pure-JAX path that runs everywhere, Pallas kernels on GPU."""
