"""Exact binomial and multinomial draws from one counter-based uniform each (inversion sampling).

Why: the bootstrap distribution of counts over discrete per-item outcomes is a multinomial over the distinct outcome
patterns (a binomial for one 0/1 cell). Drawing it costs O(patterns) per resample instead of O(items), which is the
whole speed-up of the pattern shortcut; but numba's ``np.random.binomial`` is stateful per thread, so it would break
the "same numbers for any thread count" rule. Inversion turns one uniform from ``omnieval.kernels.rng`` into one exact
draw:

* small mean (``n * min(p, q) < 20``): walk the pmf up from 0 (at most ~mean + a few steps);
* otherwise: walk the pmf outwards from the mode, alternately up and down ("chop-down from the mode"). Inversion is
  exact for any fixed ordering of the support, and this ordering needs only O(sd) steps;
* fixed ``(n, p)`` used many times (a single 0/1 cell): a CDF table and a binary search per draw.

Probabilities come from ``lgamma`` at the mode and the pmf ratio recurrence; rounding moves the distribution by
~1e-12, far below Monte Carlo error.

Many categories (``multinomial_poissonized``): conditional binomials chain, each draw waits for the previous one and
costs O(its standard deviation), ~60-120 ns each at 10,000 items. Poissonisation removes both: with independent
``Y_j ~ Poisson(lam * p_j)`` and ``T = sum Y_j``, ``Y | T = t`` is Multinomial(t, p) exactly. Adding ``n - t`` more
independent categorical draws (when ``t < n``), or removing ``t - n`` of the ``t`` drawn units uniformly at random
without replacement (when ``t > n``), turns a Multinomial(t, p) into a Multinomial(n, p): the units of a multinomial
are exchangeable i.i.d. draws, so extra i.i.d. draws or a uniformly random subset are i.i.d. draws again. The result
is Multinomial(n, p) for every value of ``t``, hence exactly. The Poisson means are the same for every resample, so
each is drawn by table inversion (CDF + guide table: O(1)); ``lam = n - 1.5 sqrt(n)`` keeps the corrections at
~1.5 sqrt(n) cheap additions (a uniform unit's category from a unit -> category table) and removals rare.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from omnieval.kernels.rng import randbelow, stream_key, uniform

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


POISSON_CUT = 1e-20
"""Poisson tables stop where the pmf falls below this fraction of its mode: the mass left out is ~1e-20, far below
the 2**-53 resolution of the uniforms that invert the tables."""


@njit(cache=True)
def poisson_tables(lams):
    """Inversion tables of Poisson(lam_j) for every mean in ``lams``: ``(lo, off, cdf, guide)``.

    Category j covers the values ``lo[j] .. lo[j] + L_j - 1`` (``L_j = off[j + 1] - off[j]``, the range where the
    pmf is above ``POISSON_CUT`` of its mode); ``cdf[off[j] + x]`` is P(Y <= lo[j] + x) normalised to end at exactly
    1, and ``guide[off[j] + g]`` the smallest x with ``cdf[off[j] + x] > g / L_j`` (Chen-Asau guide table: a draw
    starts there and steps forward ~once).
    """
    k = lams.shape[0]
    lo = np.zeros(k, dtype=np.int64)
    off = np.zeros(k + 1, dtype=np.int64)
    for j in range(k):  # pass 1: the range of each table
        lam = lams[j]
        m = int(lam)
        r = 1.0
        x = m
        while x > 0:
            r *= x / lam
            if r < POISSON_CUT:
                break
            x -= 1
        lo[j] = x
        r = 1.0
        x = m
        while True:
            r *= lam / (x + 1.0)
            if r < POISSON_CUT:
                break
            x += 1
        off[j + 1] = off[j] + (x - lo[j] + 1)
    cdf = np.empty(off[k])
    guide = np.empty(off[k], dtype=np.int64)
    for j in range(k):  # pass 2: pmf relative to the mode, cumulated, normalised; then the guide table
        lam = lams[j]
        m = int(lam)
        a, size = off[j], off[j + 1] - off[j]
        pmf = cdf[a:a + size]
        pmf[m - lo[j]] = 1.0
        for x in range(m, lo[j], -1):
            pmf[x - 1 - lo[j]] = pmf[x - lo[j]] * x / lam
        for x in range(m, lo[j] + size - 1):
            pmf[x + 1 - lo[j]] = pmf[x - lo[j]] * lam / (x + 1.0)
        total = 0.0
        for i in range(size):
            total += pmf[i]
            pmf[i] = total
        for i in range(size):
            pmf[i] /= total
        pmf[size - 1] = 1.0
        x = 0
        for g in range(size):
            while pmf[x] <= g / size:
                x += 1
            guide[a + g] = x
    return lo, off, cdf, guide


@njit(cache=True)
def poisson_from_table(u, j, lo, off, cdf, guide):
    """The draw of table j (``poisson_tables``) that inverts the uniform ``u`` in [0, 1)."""
    a = off[j]
    size = off[j + 1] - a
    g = int(u * size)
    if g >= size:
        g = size - 1
    x = guide[a + g]
    while cdf[a + x] <= u:
        x += 1
    return lo[j] + x


def poissonized_lambda(n):
    """The total Poisson mean used for a Multinomial(n, .) (see the module docstring): ``n - 1.5 sqrt(n)``."""
    return max(0.0, n - 1.5 * np.sqrt(n))


@njit(cache=True)
def multinomial_poissonized(key, n, lo, off, cdf, guide, category_of_unit, out):
    """Multinomial(n, counts / n) into ``out`` by Poissonisation (module docstring).

    The tables are ``poisson_tables(lam * counts / n)``; ``category_of_unit`` has ``n`` entries, category j
    ``counts[j]`` times, so a uniform unit gives category j with probability ``counts[j] / n`` exactly.
    Uniforms: ``uniform(key, j)`` for the Poisson draw of category j, then counters ``k, k + 1, ...``.
    """
    k = out.shape[0]
    total = 0
    for j in range(k):
        x = poisson_from_table(uniform(key, j), j, lo, off, cdf, guide)
        out[j] = x
        total += x
    counter = k
    while total < n:  # n - t more i.i.d. units
        out[category_of_unit[randbelow(key, counter, n)]] += 1
        counter += 1
        total += 1
    while total > n:  # drop t - n of the t units, uniformly without replacement
        t = randbelow(key, counter, total)
        counter += 1
        j = 0
        while t >= out[j]:
            t -= out[j]
            j += 1
        out[j] -= 1
        total -= 1
