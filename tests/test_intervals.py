"""The interval methods (``stats.intervals``) against scipy: the metrics table's percentile and BCa intervals equal
``scipy.stats.bootstrap``'s on the same bootstrap distribution (scipy computing the bias correction and the
jackknife acceleration from the data itself), the t interval equals its formula with scipy's t quantile, and the
leave-one-cluster-out rows equal the metrics of the predictions without that cluster."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import bootstrap, t
from scipy.stats._common import ConfidenceInterval
from scipy.stats._resampling import BootstrapResult

from omnieval.dev.bench_stats import synthetic_dissonance
from omnieval.stats.intervals import intervals
from omnieval.stats.metrics import metrics_table

R = 2_000


def crossmodal_frame(n_items: int = 40, n_clips: int = 8, seed: int = 0) -> pl.DataFrame:
    """One model, one direction (``A->T``), 3 instances per item (some invalid), items in clips (item i in clip
    i mod n_clips): the accuracy is a ratio of sums over items, or over clips."""
    rng = np.random.default_rng(seed)
    ease = rng.normal(0, 1, n_items) + rng.normal(0, 1, n_clips)[np.arange(n_items) % n_clips]
    rows = []
    for i in range(n_items):
        for j in range(3):
            right = rng.random() < 1 / (1 + np.exp(-(0.5 + ease[i])))
            choice = None if rng.random() < 0.1 else ("A" if right else "B")
            rows.append(("m", "zs", "crossmodal", "all", f"x{i:03d}", f"x{i:03d}|{j}", "A->T", "A", choice,
                         f"clip{i % n_clips}"))
    frame = pl.DataFrame(rows, orient="row", schema=["model", "prompt", "protocol", "split", "item_id",
                                                     "instance_id", "condition", "target", "choice", "clip"])
    return frame.with_columns(abstain_label=pl.lit(None, pl.Utf8), confidence=pl.lit(None, pl.Float64),
                              confidence_method=pl.lit(None, pl.Utf8))


def with_values(frame: pl.DataFrame, **kw) -> tuple[pl.DataFrame, dict]:
    """The metrics table and every row's values over [data, resamples (, jackknife)], by (model, metric, key)."""
    seen: dict = {}

    def keep(spec, unit, rows, values):
        for j, row in enumerate(rows):
            seen[(unit.key[0], row.metric, row.key)] = values[j].copy()

    return metrics_table(frame, resamples=R, seed=1, on_unit=keep, **kw), seen


def per_unit(frame: pl.DataFrame, unit: str) -> tuple[np.ndarray, np.ndarray]:
    """Per unit (sorted) the correct and valid answers."""
    g = frame.filter(pl.col("choice").is_not_null()).group_by(unit).agg(
        s=(pl.col("choice") == pl.col("target")).sum(), c=pl.len()).sort(unit)
    return g["s"].to_numpy().astype(float), g["c"].to_numpy().astype(float)


def scipy_interval(data: tuple, distribution: np.ndarray, method: str) -> tuple[float, float]:
    """scipy's interval of the ratio sum(s) / sum(c) over paired (s, c), on our bootstrap distribution."""
    previous = BootstrapResult(confidence_interval=ConfidenceInterval(np.nan, np.nan),
                               bootstrap_distribution=distribution, standard_error=np.nan)
    got = bootstrap(data, lambda s, c, axis=-1: s.sum(axis) / c.sum(axis), paired=True, vectorized=True,
                    n_resamples=0, bootstrap_result=previous, method=method)
    return float(got.confidence_interval.low), float(got.confidence_interval.high)


@pytest.mark.parametrize("unit", ["item", "clip"])
@pytest.mark.parametrize("method", ["percentile", "BCa"])
def test_percentile_and_bca_equal_scipy_on_the_same_resamples(unit, method):
    frame = crossmodal_frame()
    table, values = with_values(frame, cluster=unit, interval=method.lower())
    row = table.filter((pl.col("metric") == "accuracy") & (pl.col("key") == "A->T")).row(0, named=True)
    rows = values[("m", "accuracy", "A->T")]
    s, c = per_unit(frame, "item_id" if unit == "item" else unit)
    assert row["n_clusters"] == len(s) and row["value"] == pytest.approx(s.sum() / c.sum(), abs=1e-12)
    low, high = scipy_interval((s, c), rows[1:1 + R], method)
    assert row["ci_low"] == pytest.approx(low, abs=1e-12) and row["ci_high"] == pytest.approx(high, abs=1e-12)


def test_t_interval_is_the_estimate_plus_minus_t_times_the_corrected_bootstrap_se():
    frame = crossmodal_frame(seed=3)
    table, values = with_values(frame, cluster="clip", interval="t")
    row = table.filter((pl.col("metric") == "accuracy") & (pl.col("key") == "A->T")).row(0, named=True)
    boot = values[("m", "accuracy", "A->T")][1:]
    c = row["n_clusters"]
    half = t.ppf(0.975, c - 1) * np.std(boot, ddof=1) * np.sqrt(c / (c - 1))
    assert c == 8
    assert row["ci_low"] == pytest.approx(row["value"] - half, abs=1e-12)
    assert row["ci_high"] == pytest.approx(row["value"] + half, abs=1e-12)


def test_t_interval_of_a_clustered_mean_is_the_textbook_t_interval_in_expectation():
    """Mean of C equal-size cluster means: the bootstrap variance is (C - 1) / C of s^2 / C, so the corrected
    interval's half-width is t * s / sqrt(C) up to Monte Carlo error (checked with many resamples)."""
    rng = np.random.default_rng(4)
    x = rng.normal(0, 1, 10)
    boot = np.array([x[rng.integers(0, 10, 10)].mean() for _ in range(40_000)])
    values = np.concatenate([[x.mean()], boot])[None, :]
    low, high = intervals(values, len(boot), "t", np.array([10]))
    half = t.ppf(0.975, 9) * np.std(x, ddof=1) / np.sqrt(10)
    assert (high[0] - low[0]) / 2 == pytest.approx(half, rel=0.01)


def test_no_t_interval_below_two_clusters_and_nan_resamples_left_out():
    values = np.array([[0.5, np.nan, 0.4, 0.6, np.nan, 0.5], [0.5, 0.4, 0.6, 0.5, 0.45, 0.55]])
    low, high = intervals(values, 5, "t", np.array([5, 1]))
    boot = np.array([0.4, 0.6, 0.5])
    half = t.ppf(0.975, 4) * np.std(boot, ddof=1) * np.sqrt(5 / 4)
    assert low[0] == pytest.approx(0.5 - half) and high[0] == pytest.approx(0.5 + half)
    assert np.isnan(low[1]) and np.isnan(high[1])


def test_jackknife_rows_are_the_metrics_without_each_cluster():
    """Every metric's leave-one-out row (BCa's acceleration reads them) equals the metric computed on the
    predictions without that anchor: Shapley values, ACE, ECE and accuracy alike."""
    frame = synthetic_dissonance(n_models=1, prompts=("zs",), splits=("s",), n_items=40, n_anchors=6, seed=2)
    _, values = with_values(frame, cluster="anchor", interval="bca")
    anchors = sorted(frame["anchor"].unique().to_list())
    for i in (0, 3, 5):
        without = metrics_table(frame.filter(pl.col("anchor") != anchors[i]), resamples=1, seed=0, cluster="anchor")
        for metric, key in (("shapley", "video"), ("ace", ""), ("ece", ""), ("accuracy", "C011"),
                            ("rc_auc", ""), ("accuracy_k", "2")):
            want = without.filter((pl.col("metric") == metric) & (pl.col("key") == key))["value"][0]
            assert values[("model00", metric, key)][1 + R + i] == pytest.approx(want, abs=1e-12), (metric, key, i)


@pytest.mark.parametrize("method", ["t", "BCa"])
def test_paired_difference_intervals_over_anchors(method):
    """A paired difference's interval reads the two units' resamples (same anchors drawn) and, for BCa, their
    jackknife rows: equal to scipy's on the per-anchor sums of both models, and to the t formula."""
    from omnieval.stats.paired import metrics_and_paired

    frame = synthetic_dissonance(n_models=2, prompts=("zs",), splits=("s",), n_items=48, n_anchors=9, seed=6)
    _, values = with_values(frame, cluster="anchor", interval=method.lower())
    _, paired = metrics_and_paired(frame, resamples=R, seed=1, permutations=100, cluster="anchor",
                                   interval=method.lower())
    row = paired.filter((pl.col("metric") == "accuracy") & (pl.col("key") == "C100")).row(0, named=True)
    diff = values[("model00", "accuracy", "C100")] - values[("model01", "accuracy", "C100")]
    assert row["n_clusters"] == 9 and row["estimate"] == pytest.approx(diff[0], abs=1e-12)
    if method == "t":
        half = t.ppf(0.975, 8) * np.std(diff[1:1 + R], ddof=1) * np.sqrt(9 / 8)
        want = (diff[0] - half, diff[0] + half)
    else:
        sides = [per_unit(frame.filter((pl.col("model") == m) & (pl.col("condition") == "C100")), "anchor")
                 for m in ("model00", "model01")]
        previous = BootstrapResult(confidence_interval=ConfidenceInterval(np.nan, np.nan),
                                   bootstrap_distribution=diff[1:1 + R], standard_error=np.nan)
        got = bootstrap((*sides[0], *sides[1]), lambda s, c, u, v, axis=-1: s.sum(axis) / c.sum(axis)
                        - u.sum(axis) / v.sum(axis), paired=True, vectorized=True, n_resamples=0,
                        bootstrap_result=previous, method="BCa").confidence_interval
        want = (got.low, got.high)
    assert row["ci_low"] == pytest.approx(want[0], abs=1e-12) and row["ci_high"] == pytest.approx(want[1], abs=1e-12)


def test_t_interval_of_a_table_larger_than_a_block_matches_a_row_by_row_loop():
    """Rows are done a block at a time: a block with NaN resamples next to blocks without gives every row its own
    interval (checked against scipy's t quantile and numpy's sd, row by row)."""
    rng = np.random.default_rng(11)
    n_rows, n_resamples = 3_000, 99  # several blocks of rows
    values = rng.normal(0.5, 0.1, (n_rows, n_resamples + 1)) * rng.random((n_rows, 1))
    values[1500:1510, 1:][rng.random((10, n_resamples)) < 0.3] = np.nan  # one block only
    values[2990, 1:] = np.nan  # no resample defined
    clusters = rng.integers(1, 60, n_rows)
    low, high = intervals(values, n_resamples, "t", clusters)
    for m in range(n_rows):
        boot = values[m, 1:][np.isfinite(values[m, 1:])]
        if clusters[m] < 2 or len(boot) < 2:
            assert np.isnan(low[m]) and np.isnan(high[m]), m
            continue
        c = clusters[m]
        half = t.ppf(0.975, c - 1) * np.std(boot, ddof=1) * np.sqrt(c / (c - 1))
        assert low[m] == pytest.approx(values[m, 0] - half, rel=1e-12, abs=1e-13), m
        assert high[m] == pytest.approx(values[m, 0] + half, rel=1e-12, abs=1e-13), m
