"""The demo and `omnieval run` through the command line, end to end on a local Ray; the demo's metrics recomputed
from its predictions with plain loops."""

from __future__ import annotations

import csv
import itertools
import math

import pyarrow.parquet as pq
import pytest

from omnieval.cli import main
from omnieval.protocols import dissonance

pytestmark = pytest.mark.slow


def _accuracy_by_loop(rows: list[dict], pool_splits: bool = False) -> dict[tuple, tuple[float, int]]:
    """(model, prompt, split, condition) -> (share of right choices, count) over the answered multiple-choice rows
    with a choice (docs/reference.md: accuracy is over valid predictions; errored rows are no answers)."""
    counts: dict[tuple, list[int]] = {}
    for r in rows:
        if r["mode"] == "open" or r["error"] is not None or r["choice"] is None:
            continue
        split = "all" if pool_splits else r["split"]
        cell = counts.setdefault((r["model"], r["prompt"], split, r["condition"]), [0, 0])
        cell[0] += r["choice"] == r["target"]
        cell[1] += 1
    return {key: (right / n, n) for key, (right, n) in counts.items()}


def _metric_rows(path, protocol: str) -> dict[tuple, dict]:
    """metrics.csv rows of a protocol by (model, prompt, split, metric, key)."""
    with open(path, newline="") as f:
        return {(r["model"], r["prompt"], r["split"], r["metric"], r["key"]): r for r in csv.DictReader(f)
                if r["protocol"] == protocol}


def _shapley_by_hand(accuracy: dict[str, float]) -> dict[str, float]:
    """Exact Shapley values of video, audio and text with v(S) = accuracy of the condition where exactly S is
    clean (C<video><audio><text>, 1 = corrupted), summed over every coalition."""
    players = ("video", "audio", "text")

    def v(clean: set[str]) -> float:
        return accuracy["C" + "".join("0" if m in clean else "1" for m in players)]

    values = {}
    for m in players:
        others = [p for p in players if p != m]
        values[m] = sum(math.factorial(len(s)) * math.factorial(2 - len(s)) / 6 * (v(set(s) | {m}) - v(set(s)))
                        for k in range(3) for s in itertools.combinations(others, k))
    return values


def _check_dissonance_metrics(predictions, metrics_csv) -> None:
    predictions = pq.read_table(predictions).to_pylist()
    accuracy = _accuracy_by_loop(predictions)
    rows = _metric_rows(metrics_csv, "dissonance")
    units = {key[:3] for key in accuracy}
    assert {key[0] for key in units} == {"sim-balanced", "sim-text-only", "sim-balanced+audio-desc"}
    for unit in units:
        by_condition = {c: accuracy[(*unit, c)][0] for c in dissonance.CONDITIONS}
        for condition, (value, n) in ((c, accuracy[(*unit, c)]) for c in dissonance.CONDITIONS):
            row = rows[(*unit, "accuracy", condition)]
            assert float(row["value"]) == pytest.approx(value, rel=1e-12) and int(row["n"]) == n
        for modality, value in _shapley_by_hand(by_condition).items():
            assert float(rows[(*unit, "shapley", modality)]["value"]) == pytest.approx(value, abs=1e-12)
        for modality, corrupted in (("video", "C100"), ("audio", "C010"), ("text", "C001")):
            expected = (by_condition["C000"] - by_condition[corrupted]) / by_condition["C000"]
            assert float(rows[(*unit, "reliance", modality)]["value"]) == pytest.approx(expected, rel=1e-12)
    # the instrument's set reliance shows (both splits pooled): sim-text-only perceives the text alone
    pooled = _accuracy_by_loop(predictions, pool_splits=True)
    text_only = _shapley_by_hand({c: pooled[("sim-text-only", "zs", "all", c)][0] for c in dissonance.CONDITIONS})
    assert text_only["text"] > 0.3 and text_only["text"] > 2 * (abs(text_only["video"]) + abs(text_only["audio"]))


def _check_crossmodal_accuracy(predictions, metrics_csv) -> None:
    accuracy = _accuracy_by_loop(pq.read_table(predictions).to_pylist())
    rows = _metric_rows(metrics_csv, "crossmodal")
    assert len(accuracy) == 2 * 6
    for (model, prompt, split, direction), (value, n) in accuracy.items():
        row = rows[(model, prompt, split, "accuracy", direction)]
        assert float(row["value"]) == pytest.approx(value, rel=1e-12) and int(row["n"]) == n


def test_demo_without_hf_runs_end_to_end_and_resumes(ray_session, tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "demo"), "--no-hf"]) == 0
    out = capsys.readouterr().out
    table = pq.read_table(tmp_path / "demo" / "run" / "predictions.parquet")
    # sim-balanced and its audio-described copy in both modes, sim-text-only in multiple choice only
    assert table.num_rows == 5 * 128
    rows = table.select(["model", "mode", "cascade", "verdicts"]).to_pylist()
    assert {(r["model"], r["mode"]) for r in rows} == {("sim-balanced", "mcq"), ("sim-balanced", "open"),
                                                       ("sim-text-only", "mcq"), ("sim-balanced+audio-desc", "mcq"),
                                                       ("sim-balanced+audio-desc", "open")}
    assert all((r["cascade"] == "sim-describer:audio") == (r["model"] == "sim-balanced+audio-desc") for r in rows)
    assert all(sorted(v["judge"] for v in r["verdicts"]) == ["judge-careful", "judge-noisy"]
               for r in rows if r["mode"] == "open")
    assert "Open-ended answers graded by the judges" in out
    assert all(c in out for c in dissonance.CONDITIONS) and "sim-text-only" in out
    assert str(tmp_path / "demo" / "run" / "predictions.parquet") in out
    assert "Shapley modality attribution" in out
    _check_dissonance_metrics(tmp_path / "demo" / "run" / "predictions.parquet",
                              tmp_path / "demo" / "metrics" / "metrics.csv")
    # the crossmodal part: 24 items x 6 directions x 2 simulated models, with its headline table
    xm = pq.read_table(tmp_path / "demo" / "crossmodal" / "run" / "predictions.parquet")
    assert xm.num_rows == 24 * 6 * 2 and set(xm["protocol"].to_pylist()) == {"crossmodal"}
    assert "Modality disparity, direction imbalance and consistency" in out and "disparity T_vs_V" in out
    _check_crossmodal_accuracy(tmp_path / "demo" / "crossmodal" / "run" / "predictions.parquet",
                               tmp_path / "demo" / "crossmodal" / "metrics" / "metrics.csv")
    # a second run finds everything done and scores nothing
    assert main(["demo", "--out", str(tmp_path / "demo"), "--no-hf"]) == 0
    again = capsys.readouterr().out
    assert "rows scored now: 0  resumed (skipped): 640" in again
    assert "rows scored now: 0  resumed (skipped): 288" in again
