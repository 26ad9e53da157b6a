"""``omnieval.kernels.rng``: counter-based random numbers for the statistics kernels (SplitMix64).

Why counter-based: every random draw is a pure function of ``(seed, stream, index, counter)``. A resample (or a
permutation) is identified by its index, not by the thread that happens to compute it, so results are identical for
1 or 64 numba threads, and a run cut into chunks of resamples gives the same numbers as one big run. ``stream``
separates independent uses (one per bootstrap unit or test), chosen by the caller from stable names.

Why SplitMix64: one multiply-xorshift mix per 64-bit output (~6.5 G integers/s per core here), no state to carry
between threads; numba's ``np.random`` is stateful per thread and ~50x slower. Everything is cast to ``uint64``
before mixing: numba promotes ``int64 op uint64`` to float64, and a signed seed silently breaks the hash.
"""

from __future__ import annotations

import numpy as np
from numba import njit

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_S11 = np.uint64(11)
_TWO_M53 = 1.0 / 9007199254740992.0  # 2**-53


@njit(cache=True)
def mix64(z):
    """SplitMix64 finaliser: a bijective avalanche of one uint64."""
    z = np.uint64(z)
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


@njit(cache=True)
def stream_key(seed, stream, index):
    """The key of one counter stream: ``(seed, stream, index)`` -> uint64 (index = resample or permutation)."""
    h = mix64(np.uint64(seed) ^ np.uint64(0x5851F42D4C957F2D))
    h = mix64(h ^ np.uint64(stream))
    return mix64(h + GOLDEN * (np.uint64(index) + np.uint64(1)))


@njit(cache=True)
def draw64(key, counter):
    """The ``counter``-th uint64 of the stream ``key`` (SplitMix64 output number ``counter``)."""
    return mix64(key + GOLDEN * (np.uint64(counter) + np.uint64(1)))


@njit(cache=True)
def uniform(key, counter):
    """A float64 in [0, 1) with 53 random bits."""
    return float(draw64(key, counter) >> _S11) * _TWO_M53


@njit(cache=True)
def randbelow(key, counter, n):
    """An integer in [0, n) (n < 2**53; bias below 2**-53 relative, far under any Monte Carlo error)."""
    i = np.int64(uniform(key, counter) * n)
    return i if i < n else n - 1
