"""Clustered bootstrap of cell sums: one pass over items serves every cell (DESIGN decision 5).

Input is a per-item matrix ``values[item, channel]``: for each cell its per-item sum and its per-item count sit in
two channels, so resampled cell means are ``sums / counts`` of the output. Items (base questions) are the resampling
unit: all instances of an item move together and conditions stay paired.

Two exact ways to draw the same bootstrap distribution:

* index resampling (``resample_counts`` / ``cluster_sums`` / ``weighted_sums``): draw ``n`` item indices with
  replacement per resample; cost O(items x channels);
* the pattern shortcut (``pattern_sums``): when per-item outcomes are discrete, the resampled sums depend only on
  how many times each *distinct* per-item row (pattern) is drawn, and those multiplicities are
  Multinomial(n, pattern frequencies). Cost O(patterns x channels), independent of the number of items.

Resample ``r`` uses the counter stream ``stream_key(seed, stream, r)``: any thread count and any chunking of the
resample range give identical numbers. Row order of the output = resample order ``r0 .. r1-1``.
"""

from __future__ import annotations

import numpy as np
from numba import get_num_threads, njit, prange

from kernels.binomial import binomial_cdf, multinomial_inversion
from kernels.rng import randbelow, stream_key

PARALLEL_WORK = 4_000_000
"""Below this many elementary steps a kernel runs on the calling thread: waking numba's worker threads costs
~0.05 ms on an idle machine but up to ~10 ms on a busy one, more than small jobs take."""


def blocks(n_rows: int, work: float) -> int:
    """How many row blocks to spread over numba's threads (1 = run serially on this thread)."""
    return max(1, min(n_rows, 4 * get_num_threads())) if work >= PARALLEL_WORK else 1


@njit(cache=True)
def _add_scaled(acc, w, row):
    """``acc += w * row`` without a temporary (a plain loop numba vectorises)."""
    for c in range(row.shape[0]):
        acc[c] += w * row[c]


@njit(cache=True)
def _resample_rows(dense, indptr, indices, data, r0, r1, seed, stream, w_out, sums_out):
    """Rows ``r0 .. r1-1``: item multiplicities into ``w_out`` and channel sums (dense then CSR) into ``sums_out``."""
    n = w_out.shape[1]
    n_dense = dense.shape[1]
    for r in range(r0, r1):
        key = stream_key(seed, stream, r)
        w = w_out[r - r0]
        for j in range(n):
            w[randbelow(key, j, n)] += 1
        acc = sums_out[r - r0]
        for i in range(n):
            if w[i] != 0:
                _add_scaled(acc[:n_dense], w[i], dense[i])
                for j in range(indptr[i], indptr[i + 1]):
                    acc[n_dense + indices[j]] += w[i] * data[j]


@njit(cache=True, parallel=True)
def _resample_rows_parallel(dense, indptr, indices, data, r0, r1, seed, stream, w_out, sums_out, n_blocks):
    size = (r1 - r0 + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        lo = r0 + b * size
        hi = min(r1, lo + size)
        if lo < hi:
            _resample_rows(dense, indptr, indices, data, lo, hi, seed, stream, w_out[lo - r0:hi - r0],
                           sums_out[lo - r0:hi - r0])


def resample_sums(dense, r0, r1, seed, stream, csr=None):
    """Index resampling of resamples ``r0 .. r1-1``: ``(W, sums)`` with item multiplicities ``W[r, item]`` (each
    row sums to the number of items) and the resampled channel sums ``W @ [dense | sparse]``.

    ``dense`` is items x channels; ``csr = (indptr, indices, data, n_cols)`` optionally adds channels that few
    items touch (e.g. one cell per anchor), which then cost nothing for the other items. Sums run in item order,
    so they are bit-identical whatever the thread count or chunking.
    """
    n = dense.shape[0]
    if csr is None:
        csr = (np.zeros(n + 1, np.int64), np.zeros(0, np.int64), np.zeros(0), 0)
    indptr, indices, data, n_sparse = csr
    w = np.zeros((r1 - r0, n), dtype=np.int32)
    sums = np.zeros((r1 - r0, dense.shape[1] + n_sparse))
    work = (r1 - r0) * (3 * n + 0.6 * n * dense.shape[1] + 0.6 * len(data))
    n_blocks = blocks(r1 - r0, work)
    if n_blocks == 1:
        _resample_rows(dense, indptr, indices, data, r0, r1, seed, stream, w, sums)
    else:
        _resample_rows_parallel(dense, indptr, indices, data, r0, r1, seed, stream, w, sums, n_blocks)
    return w, sums


def resample_counts(n_items, r0, r1, seed, stream):
    """Item multiplicities ``W[r - r0, i]`` of resamples ``r0 .. r1-1`` (each row sums to ``n_items``)."""
    return resample_sums(np.zeros((n_items, 0)), r0, r1, seed, stream)[0]


def cluster_sums(values, r0, r1, seed, stream):
    """Resampled channel sums of resamples ``r0 .. r1-1`` by index resampling (items x channels in)."""
    return resample_sums(np.ascontiguousarray(values, dtype=np.float64), r0, r1, seed, stream)[1]


@njit(cache=True)
def weighted_sums(weights, values):
    """``weights @ values`` row by row in a fixed item order (deterministic sums; zero weights skipped)."""
    out = np.zeros((weights.shape[0], values.shape[1]))
    for r in range(weights.shape[0]):
        for i in range(values.shape[0]):
            if weights[r, i] != 0:
                _add_scaled(out[r], weights[r, i], values[i])
    return out


@njit(cache=True)
def _pattern_rows(pats, c, first, n, r0, r1, seed, stream, out):
    m = np.zeros(c.shape[0], dtype=np.int64)
    for r in range(r0, r1):
        key = stream_key(seed, stream, r)
        multinomial_inversion(key, 0, n, c, first, m)
        for p in range(c.shape[0]):
            if m[p] != 0:
                _add_scaled(out[r - r0], m[p], pats[p])


@njit(cache=True, parallel=True)
def _pattern_rows_parallel(pats, c, first, n, r0, r1, seed, stream, out, n_blocks):
    size = (r1 - r0 + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        lo = r0 + b * size
        hi = min(r1, lo + size)
        if lo < hi:
            _pattern_rows(pats, c, first, n, lo, hi, seed, stream, out[lo - r0:hi - r0])


def pattern_sums(patterns, counts, r0, r1, seed, stream):
    """Resampled channel sums by the pattern shortcut.

    ``patterns[p]`` is a distinct per-item row and ``counts[p]`` how many items have it (``n = counts.sum()``).
    Each resample draws pattern multiplicities ~ Multinomial(n, counts / n) and returns ``multiplicities @ patterns``:
    the same distribution as ``cluster_sums`` on the expanded items, at O(patterns) per resample.
    """
    order = np.argsort(-np.asarray(counts), kind="stable")
    c = np.ascontiguousarray(np.asarray(counts, dtype=np.int64)[order])
    pats = np.ascontiguousarray(np.asarray(patterns, dtype=np.float64)[order])
    n = int(c.sum())
    first = binomial_cdf(n, c[0] / n) if len(c) > 1 else np.zeros(0)
    out = np.zeros((r1 - r0, pats.shape[1]))
    n_blocks = blocks(r1 - r0, (r1 - r0) * len(c) * (60 + pats.shape[1]))
    if n_blocks == 1:
        _pattern_rows(pats, c, first, n, r0, r1, seed, stream, out)
    else:
        _pattern_rows_parallel(pats, c, first, n, r0, r1, seed, stream, out, n_blocks)
    return out


@njit(cache=True)
def _quantile(x, q):
    """Linear-interpolated quantile of ``x`` (as ``numpy.percentile``), by selection: O(len(x)), reorders ``x``."""
    m = x.shape[0]
    pos = q * (m - 1)
    i = min(int(np.floor(pos)), m - 1)
    part = np.partition(x, i)
    lo = part[i]
    if i + 1 >= m or pos == i:
        return lo
    return lo + (pos - i) * (part[i + 1:].min() - lo)


@njit(cache=True)
def _percentile_columns(samples, q_low, q_high, k0, k1, low, high):
    for k in range(k0, k1):
        col = samples[:, k]
        x = col[~np.isnan(col)]
        if x.shape[0] == 0:
            continue
        low[k] = _quantile(x, q_low)
        high[k] = _quantile(x, q_high)


@njit(cache=True, parallel=True)
def _percentile_columns_parallel(samples, q_low, q_high, low, high, n_blocks):
    n_cols = samples.shape[1]
    size = (n_cols + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        lo = b * size
        hi = min(n_cols, lo + size)
        if lo < hi:
            _percentile_columns(samples, q_low, q_high, lo, hi, low, high)


def percentile_interval(samples, q_low, q_high):
    """Percentile interval of each column of ``samples[resample, metric]`` (quantiles in [0, 1]).

    NaN resamples (a metric undefined on that resample, e.g. an empty cell) are dropped; a column with none left
    gives NaN. Linear interpolation between order statistics, as ``numpy.percentile`` does by default.
    """
    samples = np.asarray(samples, dtype=np.float64)
    n_cols = samples.shape[1]
    low = np.full(n_cols, np.nan)
    high = np.full(n_cols, np.nan)
    n_blocks = blocks(n_cols, 20.0 * samples.size)
    if n_blocks == 1:
        _percentile_columns(samples, q_low, q_high, 0, n_cols, low, high)
    else:
        _percentile_columns_parallel(samples, q_low, q_high, low, high, n_blocks)
    return low, high
