"""Bootstrap kernels against independent references: scipy.stats.bootstrap, exact distributions, index resampling.

Every random check uses fixed seeds (deterministic) and a tolerance of several Monte Carlo standard errors.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
from scipy import stats

from omnieval.kernels.binomial import binomial_cdf, binomial_from_cdf, binomial_sample
from omnieval.kernels.bootstrap import (
    cluster_sums,
    pattern_sums,
    percentile_interval,
    resample_counts,
    resample_sums,
    weighted_sums,
)

U = np.uint64


def _chi2_gof(observed_values: np.ndarray, probs: dict[int, float]) -> float:
    """p-value of a chi-square goodness of fit, support merged so every bin expects >= 5."""
    size = len(observed_values)
    keys = sorted(probs)
    bins, exp, obs = [], [], []
    acc_p, acc_o = 0.0, 0
    counts = {k: 0 for k in keys}
    for v in observed_values:
        counts[int(v)] += 1
    for k in keys:
        acc_p += probs[k]
        acc_o += counts[k]
        if acc_p * size >= 5:
            exp.append(acc_p * size)
            obs.append(acc_o)
            bins.append(k)
            acc_p, acc_o = 0.0, 0
    exp[-1] += acc_p * size
    obs[-1] += acc_o
    exp = np.array(exp) * (sum(obs) / sum(exp))
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.parametrize("n,p", [(7, 0.3), (40, 0.02), (200, 0.5), (5000, 0.71), (60828, 0.93), (300, 0.999)])
def test_binomial_draws_follow_the_binomial_law(n, p):
    draws = binomial_sample(n, p, 20_000, U(11), U(n))
    support = range(max(0, int(n * p - 12 * math.sqrt(n * p * (1 - p)) - 30)),
                    min(n, int(n * p + 12 * math.sqrt(n * p * (1 - p)) + 30)) + 1)
    assert draws.min() >= support.start and draws.max() <= support.stop - 1
    probs = {k: stats.binom.pmf(k, n, p) for k in support}
    assert _chi2_gof(draws, probs) > 1e-3


def test_binomial_cdf_table_matches_scipy():
    cdf = binomial_cdf(1000, 0.37)
    assert np.allclose(cdf, stats.binom.cdf(np.arange(1001), 1000, 0.37), atol=1e-12)
    assert binomial_from_cdf(0.0, cdf) == np.searchsorted(cdf, 0.0, side="right")
    assert binomial_from_cdf(0.999999999999, cdf) <= 1000


def test_cluster_sums_equal_weights_times_values_and_are_chunk_invariant():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(37, 5))
    whole = cluster_sums(values, 0, 300, U(5), U(9))
    w = resample_counts(37, 0, 300, U(5), U(9))
    assert (w.sum(axis=1) == 37).all()
    assert np.array_equal(whole, weighted_sums(w, values))
    assert np.allclose(whole, w @ values)
    parts = np.vstack([cluster_sums(values, 0, 120, U(5), U(9)), cluster_sums(values, 120, 300, U(5), U(9))])
    big = cluster_sums(values, 0, 20_000, U(5), U(9))  # large enough to run on numba's threads
    assert np.array_equal(big[:300], whole)
    assert np.array_equal(whole, parts)
    assert not np.array_equal(whole, cluster_sums(values, 0, 300, U(6), U(9)))  # the seed matters


def test_sparse_weighted_sums_equal_dense():
    rng = np.random.default_rng(1)
    values = rng.normal(size=(50, 7)) * (rng.random((50, 7)) < 0.1)
    items, cols = np.nonzero(values)
    indptr = np.searchsorted(items, np.arange(51)).astype(np.int64)
    dense = np.ascontiguousarray(values[:, :2])
    w, sums = resample_sums(dense, 0, 100, U(0), U(1), (indptr, cols.astype(np.int64), values[items, cols].copy(), 7))
    assert np.array_equal(w, resample_counts(50, 0, 100, U(0), U(1)))
    assert np.allclose(sums, w @ np.hstack([dense, values]))


def test_same_numbers_for_one_and_two_threads_and_serially(monkeypatch):
    import omnieval.kernels.bootstrap

    rng = np.random.default_rng(2)
    values = rng.normal(size=(64, 4))
    pats, cnt = np.unique((rng.random((300, 2)) < 0.5).astype(float), axis=0, return_counts=True)
    before = numba.get_num_threads()
    out = {}
    try:
        for threads, limit in ((1, 0), (2, 0), (2, 10**12)):  # limit 0: always numba's threads; huge: serial
            monkeypatch.setattr(omnieval.kernels.bootstrap, "PARALLEL_WORK", limit)
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            out[threads, limit] = (cluster_sums(values, 0, 500, U(3), U(4)), resample_counts(64, 0, 500, U(3), U(4)),
                                   pattern_sums(pats, cnt.astype(np.int64), 0, 500, U(3), U(4)))
    finally:
        numba.set_num_threads(before)
    for other in ((2, 0), (2, 10**12)):
        for a, b in zip(out[1, 0], out[other]):
            assert np.array_equal(a, b)


def test_pattern_shortcut_is_exactly_multinomial_on_a_tiny_case():
    # 5 items, patterns (1,0) x2, (0,1) x3: the resampled first channel is Binomial(5, 2/5), second = 5 - first.
    values = np.array([[1.0, 0.0]] * 2 + [[0.0, 1.0]] * 3)
    pats, cnt = np.unique(values, axis=0, return_counts=True)
    out = pattern_sums(pats, cnt.astype(np.int64), 0, 20_000, U(1), U(2))
    assert np.array_equal(out.sum(axis=1), np.full(20_000, 5.0))
    assert _chi2_gof(out[:, 0], {k: stats.binom.pmf(k, 5, 0.4) for k in range(6)}) > 1e-3


def test_pattern_shortcut_matches_index_resampling_in_distribution():
    """Same data, two exact methods: compare marginal and joint bootstrap distributions (two-sample tests)."""
    rng = np.random.default_rng(3)
    ease = rng.normal(size=(400, 1))
    values = (rng.random((400, 3)) < 1 / (1 + np.exp(-(ease + [0.5, 0.0, -1.0])))).astype(float)
    pats, cnt = np.unique(values, axis=0, return_counts=True)
    assert len(pats) <= 8
    short = pattern_sums(pats, cnt.astype(np.int64), 0, 20_000, U(7), U(1))
    plain = cluster_sums(values, 0, 20_000, U(8), U(1))
    for col in range(3):
        assert stats.ks_2samp(short[:, col], plain[:, col]).pvalue > 1e-3
    joint_short = short[:, 0] - short[:, 2]
    joint_plain = plain[:, 0] - plain[:, 2]
    assert stats.ks_2samp(joint_short, joint_plain).pvalue > 1e-3
    assert abs(np.corrcoef(short[:, 0], short[:, 2])[0, 1] - np.corrcoef(plain[:, 0], plain[:, 2])[0, 1]) < 0.05
    # A resampler that ignored the pairing of channels (independent binomials) would be caught here:
    independent = np.column_stack([rng.binomial(400, values[:, c].mean(), 20_000) for c in range(3)])
    assert stats.ks_2samp(independent[:, 0] - independent[:, 2], joint_plain).pvalue < 1e-3


def test_clustered_percentile_interval_matches_scipy_bootstrap():
    """Ratio of per-item sums (items = clusters of 1..6 correlated instances) vs scipy's paired bootstrap."""
    rng = np.random.default_rng(4)
    n_items, resamples = 90, 10_000
    size = rng.integers(1, 7, n_items)
    p_item = rng.beta(2, 1.5, n_items)
    sums = rng.binomial(size, p_item).astype(float)
    counts = size.astype(float)
    out = cluster_sums(np.column_stack([sums, counts]), 0, resamples, U(0), U(42))
    ratio = out[:, 0] / out[:, 1]
    low, high = percentile_interval(ratio[:, None].copy(), 0.025, 0.975)
    ref = stats.bootstrap((sums, counts), lambda s, c, axis=-1: s.sum(axis) / c.sum(axis), paired=True,
                          vectorized=True, n_resamples=resamples, method="percentile", rng=np.random.default_rng(1))
    se = ratio.std()
    assert abs(low[0] - ref.confidence_interval.low) < 0.25 * se
    assert abs(high[0] - ref.confidence_interval.high) < 0.25 * se
    assert abs(se - ref.standard_error) < 0.05 * se


def test_percentile_interval_matches_numpy_and_drops_nan():
    rng = np.random.default_rng(5)
    samples = rng.normal(size=(1001, 6))
    samples[::5, 2] = np.nan
    samples[:, 5] = np.nan
    low, high = percentile_interval(samples, 0.025, 0.975)
    ref_low, ref_high = np.nanpercentile(samples[:, :5], [2.5, 97.5], axis=0)
    assert np.allclose(low[:5], ref_low) and np.allclose(high[:5], ref_high)
    assert np.isnan(low[5]) and np.isnan(high[5])


def test_poissonised_multinomial_is_exactly_multinomial():
    """Three categories with counts (3, 2, 1), n = 6: the joint law of the draws against scipy's multinomial pmf,
    over every outcome (a chi-square test on the 28 joint outcomes), for both correction directions (t < n, t > n)."""
    from numba import njit

    from omnieval.kernels.binomial import multinomial_poissonized, poisson_tables, poissonized_lambda
    from omnieval.kernels.rng import stream_key

    counts = np.array([3, 2, 1], dtype=np.int64)
    n = int(counts.sum())
    lo, off, cdf, guide = poisson_tables(poissonized_lambda(n) * counts / n)
    unit_category = np.repeat(np.arange(3, dtype=np.int64), counts)

    @njit
    def draws(size):
        out = np.zeros((size, 3), dtype=np.int64)
        for r in range(size):
            multinomial_poissonized(stream_key(U(11), U(5), r), n, lo, off, cdf, guide, unit_category, out[r])
        return out

    size = 60_000
    out = draws(size)
    assert np.all(out.sum(axis=1) == n)
    outcomes = [(a, b, n - a - b) for a in range(n + 1) for b in range(n + 1 - a)]
    law = stats.multinomial(n, counts / n)
    observed = {o: 0 for o in outcomes}
    for row in map(tuple, out):
        observed[row] += 1
    expected = np.array([law.pmf(o) * size for o in outcomes])
    obs = np.array([observed[o] for o in outcomes])
    big = expected >= 5
    obs_b = np.append(obs[big], obs[~big].sum())
    exp_b = np.append(expected[big], expected[~big].sum())
    assert stats.chisquare(obs_b, exp_b * obs_b.sum() / exp_b.sum()).pvalue > 1e-3
    # The same test has the power to reject a slightly wrong law (frequencies 0.45/0.35/0.2 instead of 1/2, 1/3, 1/6).
    wrong = np.array([stats.multinomial(n, [0.45, 0.35, 0.2]).pmf(o) * size for o in outcomes])
    wrong_b = np.append(wrong[big], wrong[~big].sum())
    assert stats.chisquare(obs_b, wrong_b * obs_b.sum() / wrong_b.sum()).pvalue < 1e-3
