"""Benjamini-Hochberg within families (``stats.multiple_testing.bh_within``, used by ``paired`` and
``significance``) against ``scipy.stats.false_discovery_control``, statsmodels' ``fdr_bh`` (bit for bit) and hand
arithmetic; the exact McNemar of
``significance`` against the binomial test on the discordant pairs."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import binomtest, false_discovery_control

from omnieval.stats.multiple_testing import benjamini_hochberg, bh_within
from omnieval.stats.significance import exact_mcnemar


def test_bh_of_one_family_by_hand():
    # sorted 0.01, 0.03, 0.04, 0.20; p * 4 / rank = 0.04, 0.0667, 0.0533, 0.20; running minimum from the top
    table = pl.DataFrame({"family": ["f"] * 4, "p_value": [0.01, 0.04, 0.03, 0.20]})
    got = bh_within(table, pl.col("family"))["p_adjusted"].to_list()
    assert got == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.20], abs=1e-15)


def test_bh_within_families_matches_scipy_and_leaves_missing_p_out():
    rng = np.random.default_rng(3)
    families = rng.choice(["a", "b", "c"], size=60)
    p = rng.uniform(0, 1, 60) ** 3
    p[[4, 17]] = np.nan  # a test that could not be computed: no part in the adjustment, null after it
    table = pl.DataFrame({"family": families, "p_value": p}).with_columns(
        p_value=pl.when(pl.int_range(pl.len()) == 30).then(None).otherwise(pl.col("p_value")))
    p[30] = np.nan
    got = bh_within(table, pl.col("family"))
    assert got["family"].to_list() == families.tolist()  # rows keep their order
    adjusted = got["p_adjusted"].to_numpy()
    for name in ("a", "b", "c"):
        rows = np.flatnonzero((families == name) & np.isfinite(p))
        assert np.allclose(adjusted[rows], false_discovery_control(p[rows], method="bh"), rtol=1e-12, atol=0)
    assert got["p_adjusted"].is_null().to_numpy()[[4, 17, 30]].all()
    assert got["p_adjusted"].null_count() == 3


def test_bh_is_statsmodels_fdr_bh_bit_for_bit():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(11)
    for n in (1, 2, 7, 100, 1_001):
        p = rng.uniform(0, 1, n) ** 4
        p[rng.random(n) < 0.2] = p[0]  # ties, the sort may leave them in any order
        p[rng.random(n) < 0.05] = 1.0
        assert np.array_equal(benjamini_hochberg(p), multipletests(p, method="fdr_bh")[1])


def test_exact_mcnemar_is_the_binomial_test_of_the_discordant_answers():
    rng = np.random.default_rng(5)
    x = rng.random(80) < 0.7
    y = rng.random(80) < 0.5
    only_x, only_y = int(np.sum(x & ~y)), int(np.sum(~x & y))
    statistic, p = exact_mcnemar(x, y)
    assert p == pytest.approx(binomtest(only_x, only_x + only_y, 0.5).pvalue, rel=1e-12)
    assert statistic == min(only_x, only_y)
    assert exact_mcnemar(x.astype(int), y.astype(int)) == (statistic, p)  # 0/1 reads as right/wrong too
