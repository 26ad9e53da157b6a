"""Clustered bootstrap of cell sums: one pass over items serves every cell (docs/architecture.md, decision 5).

Input is a per-item matrix ``values[item, channel]``: for each cell its per-item sum and its per-item count sit in
two channels, so resampled cell means are ``sums / counts`` of the output. Items (base questions) are the resampling
unit: all instances of an item move together and conditions stay paired.

Two exact ways to draw the same bootstrap distribution:

* index resampling (``resample_sums`` / ``cluster_sums`` / ``resample_counts``): draw ``n`` item indices with
  replacement per resample; cost O(items x channels);
* the pattern shortcut (``pattern_sums``): when per-item outcomes are discrete, the resampled sums depend only on
  how many times each *distinct* per-item row (pattern) is drawn, and those multiplicities are
  Multinomial(n, pattern frequencies). Cost O(patterns x channels + sqrt(items)), whatever the number of items.

Index resampling packs integer channels (correct / abstained / valid counts: the usual case) into 64-bit words,
each channel in a bit field wide enough for its largest possible resampled sum (``n * (max - min)``), so one integer
addition adds several channels at once and no field can carry into the next: the sums are exact integers, equal to
the floating-point sums of the same draws. Non-integer channels (e.g. confidences) are summed in floating point in
item order (``multiplicity * value``), so they are bit-identical whatever the thread count or chunking.

Resample ``r`` uses the counter stream ``stream_key(seed, stream, r)``: any thread count and any chunking of the
resample range give identical numbers. Row order of the output = resample order ``r0 .. r1-1``. Index resampling
draws item ``randbelow(key, j, n)`` for draw j, whichever way the sums are then formed.
"""

from __future__ import annotations

import numpy as np
from numba import get_num_threads, njit, prange

from omnieval.kernels.binomial import (
    binomial_cdf,
    multinomial_inversion,
    multinomial_poissonized,
    poisson_tables,
    poissonized_lambda,
)
from omnieval.kernels.rng import randbelow, stream_key

PARALLEL_WORK = 4_000_000
"""Below this many elementary steps a kernel runs on the calling thread: waking numba's worker threads costs
~0.05 ms on an idle machine but up to ~10 ms on a busy one, more than small jobs take."""

GATHER_WORDS = 4
"""Up to this many packed words per item, sums-only resampling adds the drawn items' words directly (~0.4 ns per
word and draw); with more words it first counts multiplicities and then forms vectorised ``multiplicity x word``
dot products, whose cost grows more slowly with the number of words."""

_EXACT = 2.0 ** 53


def blocks(n_rows: int, work: float) -> int:
    """How many row blocks to spread over numba's threads (1 = run serially on this thread)."""
    return max(1, min(n_rows, 4 * get_num_threads())) if work >= PARALLEL_WORK else 1


@njit(cache=True)
def _add_scaled(acc, w, row):
    """``acc += w * row`` without a temporary (a plain loop numba vectorises)."""
    for c in range(row.shape[0]):
        acc[c] += w * row[c]


@njit(cache=True)
def _draw(key, n, idx, stride):
    """``idx[j] = stride * randbelow(key, j, n)`` as unsigned offsets (a loop LLVM vectorises; unsigned indices
    also spare numba's negative-index check in the gather that follows)."""
    s = np.uint64(stride)
    for j in range(n):
        idx[j] = np.uint64(randbelow(key, j, n)) * s


@njit(cache=True)
def _gather_rows(flat, n, n_words, r0, r1, seed, stream, packed_out):
    """Sums-only rows: packed words of the drawn items added directly, two words per pass over the draws."""
    idx = np.empty(n, dtype=np.uint64)
    one = np.uint64(1)
    for r in range(r0, r1):
        _draw(stream_key(seed, stream, r), n, idx, n_words)
        out = packed_out[r - r0]
        for k0 in range(0, n_words - 1, 2):
            a0 = np.uint64(0)
            a1 = np.uint64(0)
            uk = np.uint64(k0)
            for j in range(n):
                i = idx[j] + uk
                a0 += flat[i]
                a1 += flat[i + one]
            out[k0] = a0
            out[k0 + 1] = a1
        if n_words % 2:
            a0 = np.uint64(0)
            uk = np.uint64(n_words - 1)
            for j in range(n):
                a0 += flat[idx[j] + uk]
            out[n_words - 1] = a0


@njit(cache=True, parallel=True)
def _gather_rows_parallel(flat, n, n_words, r0, r1, seed, stream, packed_out, n_blocks):
    size = (r1 - r0 + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        lo = r0 + b * size
        hi = min(r1, lo + size)
        if lo < hi:
            _gather_rows(flat, n, n_words, lo, hi, seed, stream, packed_out[lo - r0:hi - r0])


@njit(cache=True)
def _float_sums(w, dense, indptr, indices, data, skip_zero, out):
    """``out = w @ [dense | CSR]`` summed in item order (the order of ``weighted_sums``, so bit-identical to it).

    Dense channels go four at a time with the accumulators in registers and no branch: a zero weight adds an exact
    zero, which leaves a finite sum unchanged (``skip_zero`` keeps the branch for data with infinities or NaN,
    where ``0 * inf`` is not zero). ``dense`` has a multiple of four columns (zero-padded by the caller).
    """
    n, width = dense.shape
    for c0 in range(0, width, 4):
        a0 = 0.0
        a1 = 0.0
        a2 = 0.0
        a3 = 0.0
        for i in range(n):
            wi = w[i]
            if skip_zero and wi == 0:
                continue
            a0 += wi * dense[i, c0]
            a1 += wi * dense[i, c0 + 1]
            a2 += wi * dense[i, c0 + 2]
            a3 += wi * dense[i, c0 + 3]
        out[c0] = a0
        out[c0 + 1] = a1
        out[c0 + 2] = a2
        out[c0 + 3] = a3
    for i in range(n):
        wi = w[i]
        if wi != 0:
            for t in range(indptr[i], indptr[i + 1]):
                out[width + indices[t]] += wi * data[t]


@njit(cache=True)
def _weight_rows(words_t, dense, indptr, indices, data, skip_zero, r0, r1, seed, stream, w_out, packed_out,
                 sums_out):
    """Rows ``r0 .. r1-1`` through item multiplicities: into ``w_out`` (or a scratch row when ``w_out`` has no
    rows), packed words as ``sum_i w_i * word_i``, float channels (dense then CSR) in item order."""
    n = dense.shape[0]
    idx = np.empty(n, dtype=np.uint64)
    scratch = np.zeros(n, dtype=np.int32)
    wu = np.zeros(n, dtype=np.uint64)
    keep = w_out.shape[0] > 0
    floats = dense.shape[1] > 0 or indices.shape[0] > 0
    for r in range(r0, r1):
        _draw(stream_key(seed, stream, r), n, idx, 1)
        w = w_out[r - r0] if keep else scratch
        if not keep:
            w[:] = 0
        for j in range(n):
            w[idx[j]] += 1
        if words_t.shape[0] > 0:
            for i in range(n):
                wu[i] = np.uint64(w[i])
            out = packed_out[r - r0]
            for k in range(words_t.shape[0]):
                col = words_t[k]
                a = np.uint64(0)
                for i in range(n):
                    a += wu[i] * col[i]
                out[k] = a
        if floats:
            _float_sums(w, dense, indptr, indices, data, skip_zero, sums_out[r - r0])


@njit(cache=True, parallel=True)
def _weight_rows_parallel(words_t, dense, indptr, indices, data, skip_zero, r0, r1, seed, stream, w_out, packed_out,
                          sums_out, n_blocks):
    size = (r1 - r0 + n_blocks - 1) // n_blocks
    keep = w_out.shape[0] > 0
    for b in prange(n_blocks):
        lo = r0 + b * size
        hi = min(r1, lo + size)
        if lo < hi:
            _weight_rows(words_t, dense, indptr, indices, data, skip_zero, lo, hi, seed, stream,
                         w_out[lo - r0:hi - r0] if keep else w_out, packed_out[lo - r0:hi - r0],
                         sums_out[lo - r0:hi - r0])


def pack_channels(values: np.ndarray):
    """Which channels of ``values`` (items x channels) go into packed words, and how.

    A channel is packed when all its values are integers and ``n * (max - min) < 2**53`` (so float sums of it are
    exact too); it is stored as ``value - min`` in a bit field of ``bit_length(n * (max - min))`` bits, fields never
    straddling words. Returns ``(packed_mask, words[item, word] (uint64), field_word, field_shift, field_bits,
    field_min)`` with one field per packed channel, in channel order.
    """
    n, n_cols = values.shape
    packed = np.zeros(n_cols, dtype=bool)
    if n == 0 or n_cols == 0:
        return packed, np.zeros((n, 0), np.uint64), *(np.zeros(0, np.int64) for _ in range(3)), np.zeros(0)
    low = values.min(axis=0)
    high = values.max(axis=0)
    integer = np.all(values == np.round(values), axis=0) & np.isfinite(low) & np.isfinite(high)
    spans = np.where(integer, high - low, np.inf)
    packed = integer & (spans * n < _EXACT) & (np.maximum(np.abs(low), np.abs(high)) * n < _EXACT)
    cols = np.nonzero(packed)[0]
    word = np.zeros(len(cols), np.int64)
    shift = np.zeros(len(cols), np.int64)
    bits = np.zeros(len(cols), np.int64)
    w, used = 0, 0
    for f, c in enumerate(cols):
        b = int(n * int(spans[c])).bit_length()  # constant channels take no bits (their sum is n * min)
        if b == 0:
            continue
        if used + b > 64:
            w, used = w + 1, 0
        word[f], shift[f], bits[f] = w, used, b
        used += b
    n_words = w + 1 if used else 0
    words = np.zeros((n, n_words), dtype=np.uint64)
    for f, c in enumerate(cols):
        if bits[f]:
            words[:, word[f]] |= (values[:, c] - low[c]).astype(np.uint64) << np.uint64(shift[f])
    return packed, words, word, shift, bits, low[cols].astype(np.float64)


@njit(cache=True)
def _unpack(packed_sums, n, field_channel, field_word, field_shift, field_bits, field_min, out_t):
    """Channel sums from packed word sums: ``out_t[channel, r] = field of the word sum + n * min``."""
    for f in range(field_channel.shape[0]):
        row = out_t[field_channel[f]]
        base = n * field_min[f]
        if field_bits[f] == 0:
            row[:] = base
            continue
        w = field_word[f]
        sh = np.uint64(field_shift[f])
        mask = (np.uint64(1) << np.uint64(field_bits[f])) - np.uint64(1)
        for r in range(packed_sums.shape[0]):
            row[r] = float((packed_sums[r, w] >> sh) & mask) + base


def _index_sums(dense, r0, r1, seed, stream, csr, keep_weights):
    """``(W or None, sums_t)`` with the channel sums channel-major (``sums_t[channel, r]``), dense then CSR."""
    n = dense.shape[0]
    if csr is None:
        csr = (np.zeros(n + 1, np.int64), np.zeros(0, np.int64), np.zeros(0), 0)
    indptr, indices, data, n_sparse = csr
    mask, words, field_word, field_shift, field_bits, field_min = pack_channels(dense)
    n_words = words.shape[1]
    n_floats = int((~mask).sum())
    floats = np.zeros((n, -(-n_floats // 4) * 4))  # zero-padded to whole groups of four (``_float_sums``)
    floats[:, :n_floats] = dense[:, ~mask]
    skip_zero = not (np.isfinite(floats).all() and np.isfinite(data).all())
    rows = r1 - r0
    packed_out = np.zeros((rows, n_words), dtype=np.uint64)
    float_sums = np.zeros((rows, floats.shape[1] + n_sparse))
    w = np.zeros((rows if keep_weights else 0, n), dtype=np.int32)
    if not keep_weights and n_floats == 0 and len(data) == 0 and n_words <= GATHER_WORDS:
        work = rows * n * (1.0 + 0.5 * n_words)
        n_blocks = blocks(rows, work)
        flat = np.ascontiguousarray(words).reshape(-1)
        if n_blocks == 1:
            _gather_rows(flat, n, n_words, r0, r1, seed, stream, packed_out)
        else:
            _gather_rows_parallel(flat, n, n_words, r0, r1, seed, stream, packed_out, n_blocks)
    else:
        work = rows * (3.0 * n + 0.2 * n * n_words + 0.6 * n * floats.shape[1] + 0.6 * len(data))
        n_blocks = blocks(rows, work)
        args = (np.ascontiguousarray(words.T), floats, indptr, indices, data, skip_zero, r0, r1, seed, stream, w,
                packed_out, float_sums)
        if n_blocks == 1:
            _weight_rows(*args)
        else:
            _weight_rows_parallel(*args, n_blocks)
    sums_t = np.empty((dense.shape[1] + n_sparse, rows))
    _unpack(packed_out, n, np.nonzero(mask)[0], field_word, field_shift, field_bits, field_min, sums_t)
    if n_floats or n_sparse:
        float_t = float_sums.T
        sums_t[np.nonzero(~mask)[0]] = float_t[:n_floats]
        sums_t[dense.shape[1]:] = float_t[floats.shape[1]:]
    return (w if keep_weights else None), sums_t


def resample_sums(dense, r0, r1, seed, stream, csr=None):
    """Index resampling of resamples ``r0 .. r1-1``: ``(W, sums)`` with item multiplicities ``W[r, item]`` (each
    row sums to the number of items) and the resampled channel sums ``W @ [dense | sparse]``.

    ``dense`` is items x channels; ``csr = (indptr, indices, data, n_cols)`` optionally adds channels that few
    items touch (e.g. one cell per anchor), which then cost nothing for the other items. Integer channels are
    exact; float channels are summed in item order, so sums are bit-identical whatever the thread count or chunking.
    ``sums`` is Fortran-ordered: each channel's resamples are contiguous, as the metric functions read them.
    """
    w, sums_t = _index_sums(np.asarray(dense, dtype=np.float64), r0, r1, seed, stream, csr, True)
    return w, sums_t.T


def resample_counts(n_items, r0, r1, seed, stream):
    """Item multiplicities ``W[r - r0, i]`` of resamples ``r0 .. r1-1`` (each row sums to ``n_items``)."""
    return resample_sums(np.zeros((n_items, 0)), r0, r1, seed, stream)[0]


def cluster_sums(values, r0, r1, seed, stream, csr=None):
    """Resampled channel sums of resamples ``r0 .. r1-1`` by index resampling (items x channels in), without
    materialising the multiplicity matrix: the same numbers as ``resample_sums(...)[1]`` (also Fortran-ordered)."""
    return _index_sums(np.asarray(values, dtype=np.float64), r0, r1, seed, stream, csr, False)[1].T


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
def _pattern_rows(pats, c, first, n, lo, off, cdf, guide, unit_category, r0, r1, seed, stream, out):
    m = np.zeros(c.shape[0], dtype=np.int64)
    poisson = off.shape[0] > 0
    for r in range(r0, r1):
        key = stream_key(seed, stream, r)
        if poisson:
            multinomial_poissonized(key, n, lo, off, cdf, guide, unit_category, m)
        else:
            multinomial_inversion(key, 0, n, c, first, m)
        row = r - r0
        for p in range(c.shape[0]):
            x = m[p]
            if x != 0:
                for ch in range(pats.shape[1]):
                    out[row, ch] += x * pats[p, ch]


@njit(cache=True, parallel=True)
def _pattern_rows_parallel(pats, c, first, n, lo, off, cdf, guide, unit_category, r0, r1, seed, stream, out,
                           n_blocks):
    size = (r1 - r0 + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        lo_r = r0 + b * size
        hi_r = min(r1, lo_r + size)
        if lo_r < hi_r:
            _pattern_rows(pats, c, first, n, lo, off, cdf, guide, unit_category, lo_r, hi_r, seed, stream,
                          out[lo_r - r0:hi_r - r0])


def pattern_sums(patterns, counts, r0, r1, seed, stream):
    """Resampled channel sums by the pattern shortcut.

    ``patterns[p]`` is a distinct per-item row and ``counts[p]`` how many items have it (``n = counts.sum()``).
    Each resample draws pattern multiplicities ~ Multinomial(n, counts / n) and returns ``multiplicities @ patterns``:
    the same distribution as ``cluster_sums`` on the expanded items. Two patterns: one binomial from a CDF table;
    more: Poissonisation with table inversion and ~1.5 sqrt(n) unit-level corrections (``omnieval.kernels.binomial``),
    which needs neither a chain of dependent draws nor work that grows with their spread.
    """
    order = np.argsort(-np.asarray(counts), kind="stable")
    c = np.ascontiguousarray(np.asarray(counts, dtype=np.int64)[order])
    pats = np.ascontiguousarray(np.asarray(patterns, dtype=np.float64)[order])
    n = int(c.sum())
    lo, off, cdf, guide = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)
    first = np.zeros(0)
    unit_category = np.zeros(0, np.int64)
    if len(c) > 2:
        lo, off, cdf, guide = poisson_tables(poissonized_lambda(n) * c / n)
        unit_category = np.repeat(np.arange(len(c), dtype=np.int64), c)
    elif len(c) == 2:
        first = binomial_cdf(n, c[0] / n)
    out = np.zeros((r1 - r0, pats.shape[1]))
    work = (r1 - r0) * (len(c) * (8 + pats.shape[1]) + (4 * np.sqrt(n) if len(c) > 2 else 0))
    n_blocks = blocks(r1 - r0, work)
    args = (pats, c, first, n, lo, off, cdf, guide, unit_category, r0, r1, seed, stream, out)
    if n_blocks == 1:
        _pattern_rows(*args)
    else:
        _pattern_rows_parallel(*args, n_blocks)
    return out


@njit(cache=True)
def _select(x, lo, hi, k):
    """Reorder ``x[lo:hi]`` so that ``x[k]`` is its (k - lo)-th smallest, smaller-or-equal values before it and
    greater-or-equal after it (quickselect, median-of-three pivots, in place)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        a, b, c = x[lo], x[mid], x[hi - 1]
        pivot = max(min(a, b), min(max(a, b), c))
        i, j = lo, hi - 1
        while i <= j:
            while x[i] < pivot:
                i += 1
            while x[j] > pivot:
                j -= 1
            if i <= j:
                x[i], x[j] = x[j], x[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j + 1
        elif k >= i:
            lo = i
        else:
            return


@njit(cache=True)
def _interval_rows(samples, q_low, q_high, k0, k1, low, high):
    """Quantiles ``q_low <= q_high`` of rows ``k0 .. k1-1`` of ``samples[metric, resample]`` (NaN dropped), with
    numpy's default linear interpolation ``x[i] + (pos - i) (x[i + 1] - x[i])``: one copy and two selections per
    row, the second one inside the part left of the first."""
    buf = np.empty(samples.shape[1])
    for k in range(k0, k1):
        m = 0
        for v in samples[k]:
            if not np.isnan(v):
                buf[m] = v
                m += 1
        if m == 0:
            continue
        x = buf[:m]
        pos_h = q_high * (m - 1)
        ih = min(int(np.floor(pos_h)), m - 1)
        _select(x, 0, m, ih)
        next_h = x[ih]
        if ih + 1 < m:
            next_h = x[ih + 1:].min()
        pos_l = q_low * (m - 1)
        il = min(int(np.floor(pos_l)), ih)
        _select(x, 0, ih + 1, il)
        next_l = next_h if il == ih else x[il + 1:ih + 1].min()
        low[k] = x[il] if (il + 1 >= m or pos_l == il) else x[il] + (pos_l - il) * (next_l - x[il])
        high[k] = x[ih] if (ih + 1 >= m or pos_h == ih) else x[ih] + (pos_h - ih) * (next_h - x[ih])


@njit(cache=True, parallel=True)
def _interval_rows_parallel(samples, q_low, q_high, low, high, n_blocks):
    n_rows = samples.shape[0]
    size = (n_rows + n_blocks - 1) // n_blocks
    for b in prange(n_blocks):
        lo = b * size
        hi = min(n_rows, lo + size)
        if lo < hi:
            _interval_rows(samples, q_low, q_high, lo, hi, low, high)


def percentile_interval(samples, q_low, q_high):
    """Percentile interval of each column of ``samples[resample, metric]`` (quantiles in [0, 1], low <= high).

    NaN resamples (a metric undefined on that resample, e.g. an empty cell) are dropped; a column with none left
    gives NaN. Linear interpolation between order statistics, as ``numpy.percentile`` does by default. Columns are
    read as rows of ``samples.T``: when each column is contiguous in memory (a Fortran-ordered array, or the
    transpose of a metric x resample array) no transposing copy is made.
    """
    by_metric = np.asarray(samples, dtype=np.float64).T
    if by_metric.ndim != 2 or by_metric.strides[1] != by_metric.itemsize:  # rows must be contiguous
        by_metric = np.ascontiguousarray(by_metric)
    n_cols = by_metric.shape[0]
    low = np.full(n_cols, np.nan)
    high = np.full(n_cols, np.nan)
    n_blocks = blocks(n_cols, 20.0 * by_metric.size)
    if n_blocks == 1:
        _interval_rows(by_metric, q_low, q_high, 0, n_cols, low, high)
    else:
        _interval_rows_parallel(by_metric, q_low, q_high, low, high, n_blocks)
    return low, high
