"""The report's leaderboard (``report.leaderboard``): a sweep of one model per run shows each model's accuracy (against
numpy on the raw answers), rank order, and the rank intervals and groups ``omnieval metrics`` writes to ``ranks.csv``
for the same predictions; a run folder with ``ranks.parquet`` beside its metrics shows it; two models show none."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from omnieval.report import build_report
from omnieval.stats.command import metrics_files
from tests.test_ranks import SKILL, five_models

R = 300


def _leaderboard(report) -> list:
    return [b for s in report.sections if s.id == "leaderboard" for b in s.walk()]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    frame = five_models(n_items=80, seed=9)
    for model in SKILL:
        folder = root / "runs" / "bench" / model / "zs"
        folder.mkdir(parents=True)
        frame.filter(pl.col("model") == model).write_parquet(folder / "predictions.parquet")
    return root, frame


def test_sweep_leaderboard_matches_numpy_and_the_ranks_file(sweep, tmp_path):
    root, frame = sweep
    tables = _leaderboard(build_report([str(root)], resamples=R, permutations=R, seed=0))
    assert len(tables) == 1 and tables[0].header[:3] == ["rank", "model", "accuracy [95% CI]"]
    shown = {row[1].text: row for row in tables[0].rows}
    accuracy = {m: float((frame.filter(pl.col("model") == m)["choice"] == "A").mean()) for m in SKILL}
    assert {m.split("/")[-1] for m in shown} == set(SKILL)
    order = [row[1].text.split("/")[-1] for row in tables[0].rows]
    assert [accuracy[m] for m in order] == sorted(accuracy.values(), reverse=True)
    for label, row in shown.items():
        assert float(row[2].text) == pytest.approx(accuracy[label.split("/")[-1]], abs=5.01e-4)  # shown to 3 decimals
    # the same predictions under the same labels through omnieval metrics: the same rank intervals and groups
    pooled = tmp_path / "pooled.parquet"
    labels = {m: next(label for label in shown if label.split("/")[-1] == m) for m in SKILL}
    frame.with_columns(pl.col("model").replace_strict(labels)).write_parquet(pooled)
    ranks = pl.read_csv(metrics_files([pooled], resamples=R, seed=0, permutations=R).files["ranks.csv"])
    for r in ranks.iter_rows(named=True):
        row = shown[r["model"]]
        assert row[3].text == f"{r['rank_low']}–{r['rank_high']}" and row[4].text == r["group"]


def test_a_run_with_ranks_beside_its_metrics_shows_them_and_two_models_show_none(tmp_path):
    frame = five_models(n_items=60, seed=2)
    run = tmp_path / "run"
    (run / "metrics").mkdir(parents=True)
    frame.write_parquet(run / "predictions.parquet")
    made = metrics_files([run / "predictions.parquet"], resamples=R, seed=0, permutations=R)
    for name, data in made.files.items():
        (run / "metrics" / name).write_bytes(data)
    tables = _leaderboard(build_report([str(run)], resamples=R, permutations=R))
    assert len(tables) == 1
    assert [row[3].text for row in tables[0].rows] == \
        [f"{lo}–{hi}" for lo, hi in made.ranks.select("rank_low", "rank_high").iter_rows()]
    two = tmp_path / "two"
    two.mkdir()
    frame.filter(pl.col("model").is_in(["m0", "m1"])).write_parquet(two / "predictions.parquet")
    assert _leaderboard(build_report([str(two)], resamples=R, permutations=R)) == []
    assert np.all(made.ranks["n_models"].to_numpy() == 5)
