"""The resampling unit as a choice (``stats.clusters``): intervals, paired differences, permutation tests and power
resampled by anchor, checked against plain numpy loops over anchors and scipy; refusals of units that split a
question; what metrics.json, the report and a sweep record."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from omnieval.core.schema import InputError
from omnieval.dev.bench_stats import synthetic_dissonance
from omnieval.stats.clusters import parse_cluster_option, with_clusters
from omnieval.stats.paired import metrics_and_paired
from omnieval.stats.read import prepare

R = 4_000
N_ANCHORS = 12


def anchored(seed: int = 5, n_items: int = 60, n_anchors: int = N_ANCHORS, effect: float = 1.0) -> pl.DataFrame:
    """Two models on ``n_items`` dissonance questions in ``n_anchors`` anchors (question i in anchor i mod n), every
    question's rows moved toward right or wrong by its anchor (an anchor effect both models share)."""
    frame = synthetic_dissonance(n_models=2, prompts=("zs",), splits=("s",), n_items=n_items, n_anchors=n_anchors,
                                 seed=seed)
    rng = np.random.default_rng(seed + 1)
    anchors = sorted(frame["anchor"].unique().to_list())
    shift = dict(zip(anchors, rng.normal(0, effect, len(anchors)), strict=True))
    u = pl.Series(rng.random(len(frame)))
    # an easy anchor turns some wrong answers right, a hard one some right answers wrong (probability |shift| / 3)
    p = frame["anchor"].replace_strict(shift, return_dtype=pl.Float64)
    flip = (u < p.abs() / 3)
    choice = pl.when(flip & (p > 0) & pl.col("choice").is_not_null()).then(pl.col("target")) \
        .when(flip & (p < 0) & (pl.col("choice") == pl.col("target"))) \
        .then(pl.when(pl.col("target") == "A").then(pl.lit("B")).otherwise(pl.lit("A"))) \
        .otherwise(pl.col("choice"))
    return frame.with_columns(choice.alias("choice"))


def per_anchor(frame: pl.DataFrame, model: str, condition: str) -> tuple[np.ndarray, np.ndarray]:
    """Per anchor (sorted) the correct and valid answers of ``model`` in ``condition``."""
    sel = frame.filter((pl.col("model") == model) & (pl.col("condition") == condition)
                       & pl.col("choice").is_not_null())
    g = sel.group_by("anchor").agg(s=(pl.col("choice") == pl.col("target")).sum(), c=pl.len()).sort("anchor")
    return g["s"].to_numpy().astype(float), g["c"].to_numpy().astype(float)


def numpy_anchor_bootstrap(sides, rng, resamples=R) -> np.ndarray:
    """A plain cluster bootstrap over anchors: draw anchors with replacement, accuracy of each side (ratio of
    summed correct to summed valid answers), and their difference where two sides are given."""
    n = len(sides[0][0])
    out = np.empty(resamples)
    for r in range(resamples):
        idx = rng.integers(0, n, n)
        acc = [s[idx].sum() / c[idx].sum() for s, c in sides]
        out[r] = acc[0] if len(acc) == 1 else acc[0] - acc[1]
    return out


@pytest.fixture(scope="module")
def study():
    frame = anchored()
    metrics, paired = metrics_and_paired(frame, resamples=R, seed=3, permutations=2_000, cluster="anchor",
                                         interval="percentile")
    return frame, metrics, paired


def test_accuracy_interval_resamples_anchors_as_a_numpy_loop_does(study):
    frame, metrics, _ = study
    row = metrics.filter((pl.col("model") == "model00") & (pl.col("metric") == "accuracy")
                         & (pl.col("key") == "C101")).row(0, named=True)
    s, c = per_anchor(frame, "model00", "C101")
    assert row["value"] == pytest.approx(s.sum() / c.sum(), abs=1e-12)
    lo, hi = np.percentile(numpy_anchor_bootstrap([(s, c)], np.random.default_rng(0)), [2.5, 97.5])
    assert row["ci_low"] == pytest.approx(lo, abs=0.012) and row["ci_high"] == pytest.approx(hi, abs=0.012)
    answered = frame.filter((pl.col("model") == "model00") & (pl.col("condition") == "C101")
                            & pl.col("choice").is_not_null())
    assert row["n_items"] == answered["item_id"].n_unique() and row["n_clusters"] == N_ANCHORS
    # the same predictions resampled by question give a different, narrower interval here (anchors differ)
    by_item = metrics_and_paired(frame, resamples=R, seed=3, permutations=200, cluster="item",
                                 interval="percentile")[0]
    item_row = by_item.filter((pl.col("model") == "model00") & (pl.col("metric") == "accuracy")
                              & (pl.col("key") == "C101")).row(0, named=True)
    assert item_row["value"] == row["value"] and item_row["n_clusters"] == item_row["n_items"] == row["n_items"]
    assert item_row["ci_high"] - item_row["ci_low"] < row["ci_high"] - row["ci_low"]


def test_anchor_accuracy_rests_on_its_one_anchor(study):
    frame, metrics, _ = study
    rows = metrics.filter((pl.col("model") == "model00") & (pl.col("metric") == "anchor_accuracy")).sort("key")
    assert len(rows) == N_ANCHORS and set(rows["n_clusters"].to_list()) == {1}
    answered = frame.filter((pl.col("model") == "model00") & (pl.col("condition") == "C000")
                            & pl.col("choice").is_not_null()).group_by("anchor").agg(pl.col("item_id").n_unique())
    assert rows["n_items"].to_list() == answered.sort("anchor")["item_id"].to_list()


def test_paired_difference_and_its_permutation_test_are_over_anchors(study):
    frame, _, paired = study
    row = paired.filter((pl.col("comparison") == "models") & (pl.col("metric") == "accuracy")
                        & (pl.col("key") == "C101")).row(0, named=True)
    sides = [per_anchor(frame, m, "C101") for m in ("model00", "model01")]
    want = sides[0][0].sum() / sides[0][1].sum() - sides[1][0].sum() / sides[1][1].sum()
    assert row["estimate"] == pytest.approx(want, abs=1e-12)
    lo, hi = np.percentile(numpy_anchor_bootstrap(sides, np.random.default_rng(1)), [2.5, 97.5])
    assert row["ci_low"] == pytest.approx(lo, abs=0.012) and row["ci_high"] == pytest.approx(hi, abs=0.012)
    assert row["n_clusters"] == N_ANCHORS and row["p_method"] == "permutation"
    # the sign-flip test flips whole anchors: per anchor the mean over its rows of a's minus b's correctness
    from scipy.stats import permutation_test

    x, y = (s / c for s, c in sides)
    ref = permutation_test((x - y,), np.mean, permutation_type="samples", n_resamples=2_000,
                           rng=np.random.default_rng(2)).pvalue
    assert row["p_value"] == pytest.approx(ref, abs=0.05)
    assert row["item_corr"] == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)


def test_model_permutation_test_of_omnieval_stats_flips_anchors():
    from scipy.stats import permutation_test

    from omnieval.stats.significance import stats_table

    frame = anchored(seed=8)
    tests = stats_table(frame, permutations=4_000, seed=0, cluster="anchor")
    row = tests.filter((pl.col("test") == "permutation_models") & (pl.col("comparison") == "all")).row(0, named=True)
    valid = frame.filter(pl.col("choice").is_not_null()).with_columns(
        c=(pl.col("choice") == pl.col("target")).cast(pl.Float64))
    # the test's per-unit difference: per anchor, the mean over its (item, condition) pairs both models answered
    wide = valid.pivot("model", index=["anchor", "item_id", "condition"], values="c").drop_nulls()
    d = wide.group_by("anchor").agg((pl.col("model00") - pl.col("model01")).mean()).sort("anchor")["model00"]
    d = d.to_numpy()
    assert row["n"] == N_ANCHORS and row["estimate"] == pytest.approx(d.mean(), abs=1e-12)
    ref = permutation_test((d,), np.mean, permutation_type="samples", n_resamples=4_000,
                           rng=np.random.default_rng(3)).pvalue
    assert row["p_value"] == pytest.approx(ref, abs=0.04)


def test_power_counts_anchors_as_the_units():
    from omnieval.stats.power import power_table, z_sum

    frame = anchored(seed=9)
    table = power_table(frame, cluster="anchor", effect=0.1)
    row = table.filter(pl.col("key") == "C000").row(0, named=True)
    sides = [per_anchor(frame, m, "C000") for m in ("model00", "model01")]
    z = [(s - s.sum() / c.sum() * c) / c.mean() for s, c in sides]  # linearised ratio per anchor
    sd_diff = np.std(z[0] - z[1], ddof=1)
    assert row["n_clusters"] == N_ANCHORS and row["n_items"] == 60
    assert row["sd_diff"] == pytest.approx(sd_diff, rel=1e-9)
    assert row["mde"] == pytest.approx(z_sum() * sd_diff / np.sqrt(N_ANCHORS), rel=1e-9)
    clusters = int(np.ceil((z_sum() * sd_diff / 0.1) ** 2))
    assert row["clusters_needed"] == clusters and row["items_needed"] == int(np.ceil(clusters * 60 / N_ANCHORS))


def test_a_null_anchor_makes_its_question_a_unit_of_its_own():
    frame = anchored(seed=10)
    loose = frame.with_columns(anchor=pl.when(pl.col("item_id").is_in(["q0", "q1", "q2"])).then(None)
                               .otherwise(pl.col("anchor")))
    metrics, _ = metrics_and_paired(loose, resamples=200, seed=0, permutations=100, cluster="anchor")
    row = metrics.filter((pl.col("model") == "model00") & (pl.col("metric") == "accuracy")
                         & (pl.col("key") == "C000")).row(0, named=True)
    # q0, q1, q2 belonged to anchors 0, 1, 2, which keep their other questions: three clusters more
    assert row["n_clusters"] == N_ANCHORS + 3


def test_units_that_split_a_question_or_do_not_exist_are_refused():
    frame = prepare(anchored(seed=11))
    with pytest.raises(InputError, match="question 'q0' has rows in two units"):
        with_clusters(frame, "condition")
    with pytest.raises(InputError, match="'media_clip': the column is absent"):
        with_clusters(frame, "media_clip")
    with pytest.raises(InputError, match="the column is empty"):
        with_clusters(frame.with_columns(anchor=pl.lit(None, pl.Utf8)), "anchor")
    # rows of one question in two anchors (a model whose file says otherwise) are refused as well
    bad = frame.with_columns(anchor=pl.when((pl.col("model") == "model01") & (pl.col("item_id") == "q5"))
                             .then(pl.lit("elsewhere")).otherwise(pl.col("anchor")))
    with pytest.raises(InputError, match="question 'q5'"):
        with_clusters(bad, "anchor")


def test_the_cluster_option_per_protocol_and_for_all():
    assert parse_cluster_option(None) is None and parse_cluster_option([]) is None
    assert parse_cluster_option(["anchor"]) == "anchor"
    assert parse_cluster_option(["dissonance=anchor", "crossmodal=item"]) == {"dissonance": "anchor",
                                                                              "crossmodal": "item"}
    assert parse_cluster_option(["item", "dissonance=anchor"]) == {"*": "item", "dissonance": "anchor"}
    with pytest.raises(InputError, match="two units"):
        parse_cluster_option(["anchor", "item"])
    with pytest.raises(InputError, match="protocol=column"):
        parse_cluster_option(["dissonance="])


def test_metrics_json_records_the_unit_and_the_report_marks_few_clusters(tmp_path):
    from omnieval.report import build_report
    from omnieval.report.html import render
    from omnieval.stats.command import metrics_command

    path = tmp_path / "predictions.parquet"
    anchored(seed=12).write_parquet(path)
    metrics_command([str(path)], str(tmp_path / "m"), resamples=200, permutations=100, cluster=["anchor"][0])
    doc = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert doc["cluster"] == {"dissonance": "anchor"}
    assert {r["n_clusters"] for r in doc["metrics"] if r["metric"] == "accuracy"} == {N_ANCHORS}
    report = build_report([str(tmp_path / "m")], resamples=200, permutations=100)
    runs = report.sections[0].blocks[0]
    column = runs.header.index("resampling unit")
    assert runs.rows[0][column].text == f"anchor ({N_ANCHORS})"
    # 60 questions, but 12 anchors: every interval rests on fewer clusters than is reliable
    assert any("fewer than" in line and "clusters" in line for line in report.intro)
    assert "‡" in render(report)


def test_sweep_metrics_settings_take_a_unit_per_protocol():
    from omnieval.sweep.config import MetricsSettings
    from omnieval.sweep.state import resolved_units

    settings = MetricsSettings(cluster={"dissonance": "anchor"})
    units = resolved_units(settings.cluster)
    assert units["dissonance"] == "anchor" and units["crossmodal"] == resolved_units(None)["crossmodal"]
    with pytest.raises(ValueError, match="unknown protocol"):
        MetricsSettings(cluster={"dissonnance": "anchor"})


def test_dissonance_resamples_anchors_by_default_and_questions_without_them():
    from omnieval.stats.clusters import units_used
    from omnieval.stats.metrics import metrics_table

    frame = anchored(seed=13)
    assert units_used(frame) == {"dissonance": "anchor"}
    row = metrics_table(frame, resamples=100).filter(pl.col("metric") == "shapley").row(0, named=True)
    assert row["n_clusters"] == N_ANCHORS and row["n_items"] == 60
    # a file without anchors (another tool's): the question is the unit, and metrics.json says so
    bare = frame.drop("anchor")
    assert units_used(bare) == {"dissonance": "item"}
    row = metrics_table(bare, resamples=100).filter(pl.col("metric") == "shapley").row(0, named=True)
    assert row["n_clusters"] == row["n_items"] == 60
    with pytest.raises(InputError, match="the column is absent"):
        metrics_table(bare, resamples=100, cluster="anchor")


def test_the_interval_method_is_a_choice_of_omnieval_metrics(tmp_path):
    from omnieval.cli import main
    from omnieval.stats.metrics import metrics_table

    path = tmp_path / "predictions.parquet"
    frame = anchored(seed=14)
    frame.write_parquet(path)
    for method in ("percentile", "t"):
        assert main(["metrics", str(path), "--out", str(tmp_path / method), "--resamples", "300",
                     "--permutations", "50", "--interval", method]) == 0
    docs = {m: json.loads((tmp_path / m / "metrics.json").read_text()) for m in ("percentile", "t")}
    assert docs["percentile"]["interval"] == "percentile" and docs["t"]["interval"] == "t"
    want = metrics_table(frame, resamples=300, interval="percentile").filter(
        (pl.col("model") == "model00") & (pl.col("metric") == "accuracy") & (pl.col("key") == "C000")
    ).row(0, named=True)
    got = {m: next(r for r in docs[m]["metrics"] if (r["model"], r["metric"], r["key"]) == ("model00", "accuracy",
                                                                                            "C000")) for m in docs}
    assert (got["percentile"]["ci_low"], got["percentile"]["ci_high"]) == pytest.approx((want["ci_low"],
                                                                                          want["ci_high"]), abs=1e-12)
    # and the percentile interval is a plain numpy bootstrap over anchors' 2.5th and 97.5th percentiles
    s, c = per_anchor(frame, "model00", "C000")
    lo, hi = np.percentile(numpy_anchor_bootstrap([(s, c)], np.random.default_rng(1)), [2.5, 97.5])
    assert got["percentile"]["ci_low"] == pytest.approx(lo, abs=0.02)
    assert got["percentile"]["ci_high"] == pytest.approx(hi, abs=0.02)
    assert got["t"]["ci_low"] != pytest.approx(got["percentile"]["ci_low"], abs=1e-9)
