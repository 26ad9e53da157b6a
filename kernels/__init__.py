"""numba kernels: pure functions over numpy arrays and a seed (no pandas, polars or ray)."""
