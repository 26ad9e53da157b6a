"""Paired permutation test by sign flips of per-item differences (SPEC section 2).

Under the null of exchangeable pairs, each per-item difference ``d_i`` is as likely to be ``-d_i``; the statistic is
the mean difference. Conventions follow ``scipy.stats.permutation_test`` (one sample, ``permutation_type='samples'``)
so the two can be compared: with ``2**n <= n_permutations`` every sign vector is enumerated (exact p); otherwise
random sign vectors with the ``(count + 1) / (n_permutations + 1)`` correction; two-sided ``p = min(1, 2 min(p_less,
p_greater))``. Permutation ``r`` uses counter stream ``(seed, stream, r)``: identical for any thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from kernels.bootstrap import blocks
from kernels.rng import draw64, stream_key


@njit(cache=True)
def _flip_means(d, r0, r1, seed, stream, out):
    n = d.shape[0]
    for r in range(r0, r1):
        key = stream_key(seed, stream, r)
        total = 0.0
        bits = np.uint64(0)
        for i in range(n):
            if i % 64 == 0:
                bits = draw64(key, i // 64)
            if bits & np.uint64(1):
                total -= d[i]
            else:
                total += d[i]
            bits >>= np.uint64(1)
        out[r - r0] = total / n


@njit(cache=True, parallel=True)
def _flip_means_parallel(d, n_permutations, seed, stream, out, n_blocks):
    size = (n_permutations + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        lo = b * size
        hi = min(n_permutations, lo + size)
        if lo < hi:
            _flip_means(d, lo, hi, seed, stream, out[lo:hi])


def _random_flip_means(d, n_permutations, seed, stream):
    out = np.empty(n_permutations)
    n_blocks = blocks(n_permutations, n_permutations * len(d))
    if n_blocks == 1:
        _flip_means(d, 0, n_permutations, seed, stream, out)
    else:
        _flip_means_parallel(d, n_permutations, seed, stream, out, n_blocks)
    return out


@njit(cache=True)
def _exact_flip_means(d):
    n = d.shape[0]
    out = np.empty(1 << n)
    for mask in range(1 << n):
        total = 0.0
        for i in range(n):
            if (mask >> i) & 1:
                total -= d[i]
            else:
                total += d[i]
        out[mask] = total / n
    return out


def sign_flip_test(d, n_permutations, seed, stream):
    """``(mean difference, two-sided p)`` of the sign-flip test on differences ``d`` (NaN p when ``d`` is empty)."""
    d = np.ascontiguousarray(d, dtype=np.float64)
    n = d.shape[0]
    if n == 0:
        return np.nan, np.nan
    observed = d.sum() / n
    exact = n < 63 and (1 << n) <= n_permutations
    null = _exact_flip_means(d) if exact else _random_flip_means(d, n_permutations, seed, stream)
    tol = 1e-12 * max(1.0, np.abs(d).sum() / n)  # sums in another order must still compare equal
    less = int(np.count_nonzero(null <= observed + tol))
    greater = int(np.count_nonzero(null >= observed - tol))
    adjust = 0 if exact else 1
    total = null.shape[0] + adjust
    p = 2.0 * min((less + adjust) / total, (greater + adjust) / total)
    return float(observed), min(p, 1.0)
