"""Numerical kernels: pure functions over numbers, numpy arrays and a seed (numba where speed needs it; no pandas,
polars or ray)."""
