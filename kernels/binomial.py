"""Exact binomial and multinomial draws from one counter-based uniform each (inversion sampling).

Why: the bootstrap distribution of counts over discrete per-item outcomes is a multinomial over the distinct outcome
patterns (a binomial for one 0/1 cell). Drawing it costs O(patterns) per resample instead of O(items), which is the
whole speed-up of the pattern shortcut; but numba's ``np.random.binomial`` is stateful per thread, so it would break
the "same numbers for any thread count" rule. Inversion turns one uniform from ``kernels.rng`` into one exact draw:

* small mean (``n * min(p, q) < 20``): walk the pmf up from 0 (at most ~mean + a few steps);
* otherwise: walk the pmf outwards from the mode, alternately up and down ("chop-down from the mode"). Inversion is
  exact for any fixed ordering of the support, and this ordering needs only O(sd) steps;
* fixed ``(n, p)`` used many times (a single 0/1 cell): a CDF table and a binary search per draw.

Probabilities come from ``lgamma`` at the mode and the pmf ratio recurrence; rounding moves the distribution by
~1e-12, far below Monte Carlo error.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from kernels.rng import stream_key, uniform

_SMALL_MEAN = 20.0


@njit(cache=True)
def binomial_inversion(u, n, p):
    """The draw X ~ Binomial(n, p) that inverts the uniform ``u`` in [0, 1)."""
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    flip = p > 0.5
    if flip:
        p = 1.0 - p
    q = 1.0 - p
    s = p / q
    if n * p < _SMALL_MEAN:
        r = math.exp(n * math.log1p(-p))  # P(X = 0)
        x = 0
        while u > r and x < n:
            u -= r
            x += 1
            r *= s * (n - x + 1) / x
    else:
        m = int((n + 1) * p)
        if m > n:
            m = n
        pm = math.exp(math.lgamma(n + 1.0) - math.lgamma(m + 1.0) - math.lgamma(n - m + 1.0)
                      + m * math.log(p) + (n - m) * math.log1p(-p))
        u -= pm
        x = m
        lo = m
        hi = m
        plo = pm
        phi = pm
        while u > 0.0:
            moved = False
            if hi < n:
                phi *= s * (n - hi) / (hi + 1.0)
                hi += 1
                u -= phi
                moved = True
                if u <= 0.0:
                    x = hi
                    break
            if lo > 0:
                plo *= lo / ((n - lo + 1.0) * s)
                lo -= 1
                u -= plo
                moved = True
                if u <= 0.0:
                    x = lo
                    break
            if not moved:  # rounding left u > 0 after the whole support: mass ~1e-12, give the mode
                x = m
                break
    return n - x if flip else x


@njit(cache=True)
def binomial_cdf(n, p):
    """CDF table of Binomial(n, p) over 0..n (pmf by recurrence from the mode, normalised by its own sum)."""
    pmf = np.zeros(n + 1)
    if p <= 0.0:
        pmf[0] = 1.0
    elif p >= 1.0:
        pmf[n] = 1.0
    else:
        m = min(int((n + 1) * p), n)
        s = p / (1.0 - p)
        pmf[m] = 1.0  # relative scale; normalised below
        for k in range(m, n):
            pmf[k + 1] = pmf[k] * s * (n - k) / (k + 1.0)
            if pmf[k + 1] < 1e-300:
                break
        for k in range(m, 0, -1):
            pmf[k - 1] = pmf[k] * k / ((n - k + 1.0) * s)
            if pmf[k - 1] < 1e-300:
                break
    cdf = np.cumsum(pmf)
    return cdf / cdf[-1]


@njit(cache=True)
def binomial_from_cdf(u, cdf):
    """Smallest x with cdf[x] > u (exact inversion against a ``binomial_cdf`` table)."""
    x = np.searchsorted(cdf, u, side="right")
    return min(x, cdf.shape[0] - 1)


@njit(cache=True)
def multinomial_inversion(key, counter0, n, counts, first_cdf, out):
    """Multinomial(n, counts / counts.sum()) into ``out`` by conditional binomials, one uniform per category.

    Uniform ``j`` is ``uniform(key, counter0 + j)``. ``counts`` are non-negative integers (the category weights);
    conditional probabilities use integer tail sums, so no probability mass drifts. ``first_cdf``, if non-empty, is
    ``binomial_cdf(n, counts[0] / counts.sum())``: the first (largest) category is then a binary search.
    Order categories by decreasing count for speed (not needed for exactness).
    """
    k = counts.shape[0]
    tail = 0
    for j in range(k):
        tail += counts[j]
    left = n
    for j in range(k - 1):
        if left == 0 or tail <= 0:
            out[j] = 0
        else:
            u = uniform(key, counter0 + j)
            if j == 0 and first_cdf.shape[0] == n + 1:
                x = binomial_from_cdf(u, first_cdf)
            else:
                x = binomial_inversion(u, left, counts[j] / tail)
            out[j] = x
            left -= x
        tail -= counts[j]
    out[k - 1] = left


@njit(cache=True)
def binomial_sample(n, p, size, seed, stream):
    """``size`` independent Binomial(n, p) draws from the counter stream ``(seed, stream, 0)``."""
    key = stream_key(seed, stream, 0)
    out = np.empty(size, dtype=np.int64)
    for i in range(size):
        out[i] = binomial_inversion(uniform(key, i), n, p)
    return out
