"""The stats bench's synthetic inputs are valid predictions; the quick bench runs end to end (slow)."""

from __future__ import annotations

import polars as pl
import pytest

from omnieval.dev.bench_stats import bench_stats, synthetic_crossmodal, synthetic_dissonance
from omnieval.metrics import metrics_table
from omnieval.schema import REQUIRED_COLUMNS


def test_synthetic_predictions_have_the_schema_and_give_every_metric():
    dis = synthetic_dissonance(n_models=1, prompts=("zs",), splits=("s",), n_items=20)
    xm = synthetic_crossmodal(n_models=1, n_items=50)
    for frame in (dis, xm):
        assert set(REQUIRED_COLUMNS) <= set(frame.columns)
    assert len(dis) == 20 * 8 and dis["choice"].null_count() < len(dis)
    metrics = set(metrics_table(dis, resamples=20)["metric"])
    assert metrics == {"accuracy", "accuracy_k", "abstention_k", "human_abstention_k", "ace", "confidence_k", "ece",
                       "rc_auc", "shapley", "reliance", "anchor_accuracy", "invalid_rate", "error_rate"}
    xm_table = metrics_table(xm, resamples=20)
    assert set(xm_table.filter(pl.col("metric") == "disparity")["key"]) == {"T_vs_V", "T_vs_A", "V_vs_A"}


@pytest.mark.slow
def test_quick_bench_prints_its_table_and_says_which_targets_it_met(capsys):
    import re

    assert bench_stats(quick=True) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("(")]
    assert {r[:3] for r in rows} == {"(a)", "(b)", "(c)", "(d)"}
    met = missed = 0
    for row in rows:  # each verdict agrees with the numbers printed beside it
        verdict = re.search(r"(met|MISSED) \((< (\d+) s|>= 30x scipy)\)$", row)
        if verdict is None:
            continue
        if verdict.group(3):  # printed to 0.01 s; a value within that of the target may go either way
            value, goal, half_step = float(re.search(r"  ([\d.]+) s  ", row).group(1)), float(verdict.group(3)), 0.005
            ok, edge = value < goal, abs(value - goal) <= half_step
        else:  # printed to 0.1x
            value = float(re.search(r"  ([\d,.]+)x  ", row).group(1).replace(",", ""))
            ok, edge = value >= 30, abs(value - 30) <= 0.05
        assert edge or ok == (verdict.group(1) == "met"), row
        ok = verdict.group(1) == "met"
        met, missed = met + ok, missed + (not ok)
    assert met + missed >= 6 and f"targets: {met} met, {missed} missed" in out
