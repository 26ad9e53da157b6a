"""Sign-flip permutation test against scipy.stats.permutation_test (one sample, permutation_type='samples')."""

from __future__ import annotations

import numba
import numpy as np
from scipy import stats

from omnieval.kernels.permutation import sign_flip_test

U = np.uint64


def scipy_p(d, resamples):
    res = stats.permutation_test((d,), lambda x, axis: x.mean(axis), permutation_type="samples",
                                 n_resamples=resamples, vectorized=True, rng=np.random.default_rng(0))
    return res.pvalue


def test_exact_enumeration_equals_scipy():
    rng = np.random.default_rng(0)
    for n in (3, 8, 12):
        d = np.round(rng.normal(0.2, 1, n), 2)
        mean, p = sign_flip_test(d, 10_000, U(0), U(1))
        assert np.isclose(mean, d.mean())
        assert np.isclose(p, scipy_p(d, 10_000), rtol=1e-9)


def test_random_flips_within_monte_carlo_error_of_scipy():
    rng = np.random.default_rng(1)
    for shift in (0.0, 0.15, 0.3):
        d = rng.normal(shift, 1, 80)
        _, p = sign_flip_test(d, 10_000, U(3), U(2))
        ref = scipy_p(d, 10_000)
        tol = 5 * np.sqrt(2 * max(ref, 1e-3) * (1 - ref) / 10_000) + 2e-4
        assert abs(p - ref) < tol, (shift, p, ref)


def test_all_zero_differences_give_p_one_and_threads_do_not_matter(monkeypatch):
    import omnieval.kernels.bootstrap

    _, p = sign_flip_test(np.zeros(100), 1000, U(0), U(0))
    assert p == 1.0
    d = np.random.default_rng(2).normal(0.1, 1, 200)
    before = numba.get_num_threads()
    results = []
    try:
        for threads, limit in ((1, 0), (2, 0), (2, 10**12)):
            monkeypatch.setattr(omnieval.kernels.bootstrap, "PARALLEL_WORK", limit)
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            results.append(sign_flip_test(d, 5000, U(9), U(9)))
    finally:
        numba.set_num_threads(before)
    assert results[0] == results[1] == results[2]


def test_many_tests_at_once_equal_one_at_a_time():
    """``sign_flip_tests`` (tests spread over threads) gives each test exactly ``sign_flip_test``'s answer,
    random and exact (few items) tests mixed, an empty one NaN."""
    from omnieval.kernels.permutation import sign_flip_tests

    rng = np.random.default_rng(3)
    ds = [rng.normal(0.1 * k, 1, size) for k, size in enumerate((40, 255, 7, 0, 130, 64, 3))]
    # per-item differences of accuracies: few distinct values, many null means tied with the observed one
    ds += [rng.integers(-2, 3, size) / 4 for size in (255, 97)]
    streams = [np.uint64(1000 + j) for j in range(len(ds))]
    got = sign_flip_tests(ds, 3_000, np.uint64(9), streams)
    for d, stream, (estimate, p) in zip(ds, streams, got, strict=True):
        if len(d) == 0:
            assert np.isnan(estimate) and np.isnan(p)
            continue
        want = sign_flip_test(d, 3_000, np.uint64(9), stream)
        assert abs(estimate - want[0]) <= 1e-15 and p == want[1]
