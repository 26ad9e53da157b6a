"""Errored predictions (media that failed to decode, an engine or describer failure) are not the model's answers:
they leave every accuracy, abstention, calibration and invalid-rate denominator and are counted in ``error_rate``.
Every expected number here is a plain pandas computation over the same rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

from omnieval.core.schema import error_kind
from omnieval.stats.metrics import metrics_table

ERRORS = {"media": "media decode failed: clip.mp4: truncated video", "engine": "engine error: RuntimeError: OOM",
          "describe": "describe failed: media decode failed: a.wav: no audio stream", "other": "judge timed out"}
CONDITIONS = ("C000", "C100", "C010", "C001", "C110", "C101", "C011", "C111")


def errored_study(seed: int = 0, n_items: int = 40) -> pl.DataFrame:
    """Dissonance predictions of two models with invalid answers and errored rows of every kind."""
    rng = np.random.default_rng(seed)
    rows = []
    for model in ("a", "b"):
        for i in range(n_items):
            for c in CONDITIONS:
                k = sum(int(d) for d in c[1:])
                target = "E" if (k == 3 and rng.random() < 0.8) else "ABCD"[rng.integers(4)]
                choice = target if rng.random() < 0.75 - 0.1 * k else "ABCDE"[rng.integers(5)]
                error = None
                u = rng.random()
                if u < 0.08:
                    choice = None  # the model answered, unparseably
                elif u < 0.08 + (0.25 if model == "b" else 0.05):  # model b: many failures, model a: few
                    error = ERRORS[list(ERRORS)[rng.integers(4)]]
                    choice = None
                rows.append(dict(model=model, prompt="zs", protocol="dissonance", split="s", item_id=f"q{i:03d}",
                                 instance_id=f"q{i}|{c}", condition=c, target=target, choice=choice,
                                 abstain_label="E", confidence=None if choice is None else float(rng.random()),
                                 confidence_method="rs", anchor=f"anc{i % 3}", k=k, n_options=5, error=error))
    return pl.DataFrame(rows)


def lookup(table: pl.DataFrame, metric: str, key: str = "", **where) -> dict:
    sel = table.filter((pl.col("metric") == metric) & (pl.col("key") == key))
    for col, val in where.items():
        sel = sel.filter(pl.col(col) == val)
    assert len(sel) == 1, (metric, key, where, sel)
    return sel.row(0, named=True)


def kind_of(message: str | None) -> str | None:
    """Reference classification, written independently of the code's."""
    if not isinstance(message, str):
        return None
    for prefix, kind in (("media decode failed", "media"), ("engine error", "engine"), ("describe failed", "describe")):
        if message.startswith(prefix):
            return kind
    return "other"


def test_errored_rows_leave_every_denominator_and_count_in_error_rate():
    frame = errored_study()
    table = metrics_table(frame, resamples=200, seed=3)
    df = frame.to_pandas()
    df["kind"] = [kind_of(e) for e in df["error"]]
    assert set(df["kind"].dropna()) == set(ERRORS)  # the study has every kind
    for model, rows in df.groupby("model"):
        answered = rows[rows["kind"].isna()]
        valid = answered[answered["choice"].notna()]
        for c in CONDITIONS:
            cell = valid[valid["condition"] == c]
            row = lookup(table, "accuracy", c, model=model)
            assert row["value"] == pytest.approx((cell["choice"] == cell["target"]).mean())
            assert row["n"] == len(cell)
        for k in range(4):
            at_k = valid[valid["k"] == k]
            assert lookup(table, "abstention_k", str(k), model=model)["value"] == pytest.approx(
                (at_k["choice"] == "E").mean())
            assert lookup(table, "confidence_k", str(k), model=model)["value"] == pytest.approx(
                at_k["confidence"].mean())
            every = answered[answered["k"] == k]
            assert lookup(table, "human_abstention_k", str(k), model=model)["value"] == pytest.approx(
                (every["target"] == "E").mean())
        conf = valid["confidence"].to_numpy()
        correct = (valid["choice"] == valid["target"]).to_numpy(float)
        bins = np.minimum((conf * 10).astype(int), 9)
        ece = sum(abs(correct[bins == b].sum() - conf[bins == b].sum()) for b in range(10)) / len(conf)
        assert lookup(table, "ece", model=model)["value"] == pytest.approx(ece)
        invalid = lookup(table, "invalid_rate", model=model)
        assert invalid["value"] == pytest.approx(answered["choice"].isna().mean())
        assert invalid["n"] == len(answered)
        every_error = lookup(table, "error_rate", "", model=model)
        assert every_error["value"] == pytest.approx(rows["kind"].notna().mean())
        assert every_error["n"] == len(rows)
        assert every_error["ci_low"] <= every_error["value"] <= every_error["ci_high"]
        for kind in ERRORS:
            row = lookup(table, "error_rate", kind, model=model)
            assert row["value"] == pytest.approx((rows["kind"] == kind).mean())
            assert row["n"] == len(rows)


def test_a_run_without_errors_reports_a_zero_error_rate():
    frame = errored_study(seed=1).with_columns(error=pl.lit(None, dtype=pl.Utf8))
    table = metrics_table(frame, resamples=20)
    assert lookup(table, "error_rate", "", model="a")["value"] == 0.0
    assert table.filter(pl.col("metric") == "error_rate")["key"].unique().to_list() == [""]
    without_column = metrics_table(frame.drop("error"), resamples=20)
    assert lookup(without_column, "error_rate", "", model="b")["value"] == 0.0


def test_error_kinds_of_the_messages_the_run_layer_writes():
    assert [error_kind(m) for m in ERRORS.values()] == list(ERRORS)
    assert error_kind(None) is None and error_kind("") is None


def test_crossmodal_consistency_leaves_out_items_with_an_errored_direction():
    directions = ("A->T", "A->V", "T->A", "T->V", "V->A", "V->T")
    rows = []
    for i in range(6):
        for d in directions:
            error = ERRORS["media"] if (i < 2 and d == "A->V") else None
            rows.append(dict(model="m", prompt="zs", protocol="crossmodal", split="all", item_id=f"x{i}",
                             instance_id=f"x{i}|{d}", condition=d, target="A",
                             choice=None if error else ("A" if i % 3 else "B"), abstain_label=None,
                             confidence=None, confidence_method=None, error=error))
    table = metrics_table(pl.DataFrame(rows), resamples=0)
    df = pd.DataFrame(rows)
    complete = df.groupby("item_id").filter(lambda g: g["error"].isna().all())
    per_item = complete.groupby("item_id").apply(lambda g: bool((g["choice"] == g["target"]).all()),
                                                 include_groups=False)
    row = lookup(table, "consistency")
    assert row["n"] == len(per_item) == 4
    assert row["value"] == pytest.approx(per_item.mean())
    assert lookup(table, "accuracy", "A->V")["n"] == 4
    assert lookup(table, "error_rate", "media")["value"] == pytest.approx(2 / 36)
