"""Numerical kernels: pure functions over numbers, numpy arrays and a seed (numba where speed needs it; no pandas,
polars or ray). Installed and imported as ``omnieval.kernels`` (``pyproject.toml`` maps this folder).

numba's on-disk cache (``cache=True``) keys each compiled kernel by its source file's path and modification time,
and records the module's import name inside the entry: were a module renamed without its file changing, an
in-place upgrade would load entries naming the old module and fail. A change of a kernel module's import name is
therefore also a change of its file (the move to ``omnieval.kernels`` changed every module that caches).
"""
