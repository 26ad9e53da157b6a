"""Random factors (``stats.factors``, ``omnieval metrics --random``): the pooled value, its two standard error parts
against the spread of item means and of level means computed by hand with numpy, the Welch-Satterthwaite t
interval against scipy's t quantile, the column refused where it cannot be a factor, and the bench's truth of the
paraphrase design against a Monte Carlo draw."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from scipy.stats import t

from omnieval.core.schema import InputError
from omnieval.stats.metrics import metrics_table

SHIFTS = np.array([-0.4, 0.0, 0.2, 0.5])


def paraphrase_frame(n_items: int = 200, seed: int = 0) -> tuple[pl.DataFrame, np.ndarray]:
    """One model answering every question once in each of four prompt paraphrases, each shifting the logit."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2, 2, n_items)
    logit = np.log(p / (1 - p))[:, None] + SHIFTS[None, :]
    right = rng.random(logit.shape) < 1 / (1 + np.exp(-logit))
    rows = [("m", f"para{j}", "crossmodal", "all", f"x{i:03d}", f"x{i:03d}", "A->T", "A", "A" if right[i, j] else "B")
            for i in range(n_items) for j in range(len(SHIFTS))]
    frame = pl.DataFrame(rows, orient="row", schema=["model", "prompt", "protocol", "split", "item_id",
                                                     "instance_id", "condition", "target", "choice"])
    return frame.with_columns(abstain_label=pl.lit(None, pl.Utf8), confidence=pl.lit(None, pl.Float64),
                              confidence_method=pl.lit(None, pl.Utf8)), right.astype(float)


def test_the_prompt_factor_adds_the_spread_of_the_levels_to_the_items_spread():
    frame, y = paraphrase_frame()
    n, levels = y.shape
    se_items = y.mean(axis=1).std(ddof=1) / np.sqrt(n)  # levels fixed: the questions' spread
    se_prompt = y.mean(axis=0).std(ddof=1) / np.sqrt(levels)  # questions fixed: the paraphrases' spread
    table = metrics_table(frame, resamples=4_000, seed=2, random="prompt")
    row = table.filter(pl.col("metric") == "accuracy").row(0, named=True)
    assert row["prompt"] == "random:para0+para1+para2+para3"
    assert row["value"] == pytest.approx(y.mean())
    assert row["se_data"] == pytest.approx(se_items, rel=0.05)
    assert row["se_prompt"] == pytest.approx(se_prompt, rel=0.05)
    assert row["se_total"] == pytest.approx(np.hypot(row["se_data"], row["se_prompt"]))
    df = row["se_total"] ** 4 / (row["se_data"] ** 4 / (n - 1) + row["se_prompt"] ** 4 / (levels - 1))
    half = t.ppf(0.975, df) * row["se_total"]
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((row["value"] - half, row["value"] + half))
    fixed = metrics_table(frame, resamples=4_000, seed=2).filter(pl.col("metric") == "accuracy")
    assert len(fixed) == 4 and "se_prompt" not in fixed.columns  # without the flag: one row per paraphrase


def test_a_factor_the_predictions_cannot_have_is_refused():
    frame, _ = paraphrase_frame(n_items=10)
    with pytest.raises(InputError, match="--random 'judge': the predictions have no such column"):
        metrics_table(frame, resamples=50, random="judge")
    with pytest.raises(InputError, match="one level only"):
        metrics_table(frame.filter(pl.col("prompt") == "para0"), resamples=50, random="prompt")


def test_the_command_records_the_factor(tmp_path):
    from omnieval.cli import main

    frame, _ = paraphrase_frame(n_items=30)
    frame.write_parquet(tmp_path / "p.parquet")
    assert main(["metrics", str(tmp_path / "p.parquet"), "--out", str(tmp_path / "m"), "--resamples", "200",
                 "--permutations", "10", "--random", "prompt"]) == 0
    doc = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert doc["random"] == "prompt"
    assert "se_prompt" in pl.read_csv(tmp_path / "m" / "metrics.csv").columns


def test_the_paraphrase_truth_of_the_bench_is_the_population_mean():
    from omnieval.dev.bench_coverage_samples import SampleDesign

    design = SampleDesign(200, 1, 3.0, 2.0, paraphrases=4, paraphrase_sd=0.5)
    rng = np.random.default_rng(0)
    p, u = rng.beta(3, 2, 1_000_000), rng.normal(0, 0.5, 1_000_000)
    assert design.paraphrase_truth() == pytest.approx(np.mean(1 / (1 + np.exp(-(np.log(p / (1 - p)) + u)))),
                                                      abs=0.001)
