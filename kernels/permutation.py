"""Paired permutation test by sign flips of per-item differences (docs/reference.md, Statistics common to
all protocols).

Under the null of exchangeable pairs, each per-item difference ``d_i`` is as likely to be ``-d_i``; the statistic is
the mean difference. Conventions follow ``scipy.stats.permutation_test`` (one sample, ``permutation_type='samples'``)
so the two can be compared: with ``2**n <= n_permutations`` every sign vector is enumerated (exact p); otherwise
random sign vectors with the ``(count + 1) / (n_permutations + 1)`` correction; two-sided ``p = min(1, 2 min(p_less,
p_greater))``. Permutation ``r`` uses counter stream ``(seed, stream, r)``: identical for any thread count.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from omnieval.kernels.bootstrap import blocks
from omnieval.kernels.rng import draw64, stream_key


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


@njit(cache=True)
def _byte_table(d, lo, n):
    """``table[g, mask]`` = the signed sum of items ``8g .. 8g + 7`` of ``d[lo:lo + n]`` when bit j of ``mask``
    flips item ``8g + j`` (items past ``n`` count as 0): one lookup replaces eight flips."""
    groups = (n + 7) // 8
    table = np.zeros((groups, 256))
    for g in range(groups):
        for mask in range(256):
            total = 0.0
            for j in range(8):
                i = 8 * g + j
                if i < n:
                    total += -d[lo + i] if (mask >> j) & 1 else d[lo + i]
            table[g, mask] = total
    return table


@njit(cache=True, parallel=True)
def _flip_counts_many(d, starts, n_permutations, seed, streams, observed, tol, less, greater):
    """Per test t (differences ``d[starts[t]:starts[t + 1]]``, stream ``streams[t]``): how many random sign-flip
    means are <= and >= the observed one. The same sign vectors as ``_flip_means`` (bit i of word i // 64 flips
    item i), summed eight items at a time from ``_byte_table``; the tests are spread over the threads."""
    for t in prange(starts.shape[0] - 1):
        lo = starts[t]
        n = starts[t + 1] - lo
        table = _byte_table(d, lo, n)
        groups = table.shape[0]
        count_less = 0
        count_greater = 0
        for r in range(n_permutations):
            key = stream_key(seed, streams[t], r)
            total = 0.0
            bits = np.uint64(0)
            for g in range(groups):
                if g % 8 == 0:
                    bits = draw64(key, g // 8)
                total += table[g, np.int64(bits & np.uint64(255))]
                bits >>= np.uint64(8)
            mean = total / n
            if mean <= observed[t] + tol[t]:
                count_less += 1
            if mean >= observed[t] - tol[t]:
                count_greater += 1
        less[t] = count_less
        greater[t] = count_greater


def sign_flip_tests(ds, n_permutations, seed, streams):
    """``sign_flip_test`` on many difference vectors at once (``ds[j]`` with stream ``streams[j]``): the same sign
    vectors, so the same ``(mean difference, p)`` for each (sums in another order, within the comparison tolerance),
    with the random-sign tests spread over the threads and eight flips per table lookup (~8x fewer additions)."""
    out = [(np.nan, np.nan)] * len(ds)
    batch = []
    for j, d in enumerate(ds):
        d = np.ascontiguousarray(d, dtype=np.float64)
        n = d.shape[0]
        if n == 0:
            continue
        if n < 63 and (1 << n) <= n_permutations:
            out[j] = sign_flip_test(d, n_permutations, seed, streams[j])
        else:
            batch.append((j, d))
    if batch:
        flat = np.concatenate([d for _, d in batch])
        starts = np.zeros(len(batch) + 1, dtype=np.int64)
        starts[1:] = np.cumsum([len(d) for _, d in batch])
        observed = np.array([d.sum() / len(d) for _, d in batch])
        tol = np.array([1e-12 * max(1.0, np.abs(d).sum() / len(d)) for _, d in batch])
        keys = np.array([np.uint64(streams[j]) for j, _ in batch], dtype=np.uint64)
        less = np.zeros(len(batch), dtype=np.int64)
        greater = np.zeros(len(batch), dtype=np.int64)
        _flip_counts_many(flat, starts, n_permutations, np.uint64(seed), keys, observed, tol, less, greater)
        total = n_permutations + 1
        for b, (j, _) in enumerate(batch):
            p = 2.0 * min((less[b] + 1) / total, (greater[b] + 1) / total)
            out[j] = (float(observed[b]), min(p, 1.0))
    return out
