"""Errored predictions (media that failed to decode, an engine or describer failure) are not the model's answers:
they leave every accuracy, abstention, calibration and invalid-rate denominator and are counted in ``error_rate``.
Every expected number here is a plain pandas computation over the same rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

from omnieval.core.schema import InputError, legacy_error_kind
from omnieval.stats.metrics import compute_metrics, metrics_table

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


def test_legacy_error_kinds_of_the_messages_the_run_layer_writes():
    assert [legacy_error_kind(m) for m in ERRORS.values()] == list(ERRORS)
    assert legacy_error_kind(None) is None and legacy_error_kind("") is None and legacy_error_kind("  ") is None


def _metric_rows(table: pl.DataFrame, metric: str) -> dict:
    rows = table.filter(pl.col("metric") == metric)
    return {(r["model"], r["key"]): (r["value"], r["ci_low"], r["ci_high"], r["n"]) for r in rows.to_dicts()}


def test_error_kind_column_is_read_and_a_file_without_it_gets_the_same_error_rates(tmp_path):
    """A file with ``error_kind`` is read by the column (the error text is not looked at: a kind that its message's
    prefix would not give is counted as written); a file without the column, as older runs and other tools write,
    gets every kind from its message's prefix, and so the same ``error_rate`` rows, interval included, as the file
    written with the kinds of ``kind_of`` (the reference classification above)."""
    frame = errored_study(seed=2)
    with_kinds = frame.with_columns(error_kind=pl.Series([kind_of(e) for e in frame["error"]], dtype=pl.Utf8))
    with_kinds.write_parquet(tmp_path / "new.parquet")
    frame.write_parquet(tmp_path / "legacy.parquet")
    frame.write_csv(tmp_path / "legacy.csv")
    new = compute_metrics([tmp_path / "new.parquet"], resamples=200, seed=4)
    legacy = compute_metrics([tmp_path / "legacy.parquet"], resamples=200, seed=4)
    from_csv = compute_metrics([tmp_path / "legacy.csv"], resamples=200, seed=4)
    rates = _metric_rows(new, "error_rate")
    assert {key for _, key in rates} == {"", *ERRORS}
    assert _metric_rows(legacy, "error_rate") == rates == _metric_rows(from_csv, "error_rate")
    df = with_kinds.to_pandas()
    for (model, key), (value, _, _, n) in rates.items():
        rows = df[df["model"] == model]
        assert value == pytest.approx(rows["error_kind"].notna().mean() if key == "" else
                                      (rows["error_kind"] == key).mean())
        assert n == len(rows)

    # the column, not the text: the "other" rows written as engine errors count as engine errors
    relabelled = with_kinds.with_columns(error_kind=pl.when(pl.col("error_kind") == "other").then(pl.lit("engine"))
                                         .otherwise(pl.col("error_kind")))
    relabelled.write_parquet(tmp_path / "relabelled.parquet")
    got = _metric_rows(compute_metrics([tmp_path / "relabelled.parquet"], resamples=0), "error_rate")
    for model, rows in df.groupby("model"):
        assert (model, "other") not in got
        assert got[(model, "engine")][0] == pytest.approx(rows["error_kind"].isin(["engine", "other"]).mean())


def test_a_file_and_an_older_file_read_together_keep_their_own_kinds(tmp_path):
    """Two files, one with the column and one without: each file's kinds are its own (the older file's derived
    from its text before the files are put together, so its rows do not read as having no kind)."""
    frame = errored_study(seed=5)
    a = frame.filter(pl.col("model") == "a")
    b = frame.filter(pl.col("model") == "b")
    a.with_columns(error_kind=pl.Series([kind_of(e) for e in a["error"]], dtype=pl.Utf8)) \
        .write_parquet(tmp_path / "a.parquet")
    b.write_ndjson(tmp_path / "b.jsonl")
    table = compute_metrics([tmp_path / "a.parquet", tmp_path / "b.jsonl"], resamples=0)
    df = frame.to_pandas()
    df["kind"] = [kind_of(e) for e in df["error"]]
    for (model, key), (value, _, _, _) in _metric_rows(table, "error_rate").items():
        rows = df[df["model"] == model]
        assert value == pytest.approx(rows["kind"].notna().mean() if key == "" else (rows["kind"] == key).mean())


@pytest.mark.parametrize(("error", "kind", "message"), [
    ("engine error: OOM", "decode", "error_kind 'decode' is not one of media, engine, describe, other"),
    ("engine error: OOM", None, "error is set but error_kind is null"),
    (None, "engine", "error_kind is 'engine' but error is not set"),
])
def test_rows_whose_kind_and_error_disagree_are_refused(tmp_path, error, kind, message):
    frame = errored_study(seed=1, n_items=3).with_columns(error=pl.lit(None, dtype=pl.Utf8),
                                                          error_kind=pl.lit(None, dtype=pl.Utf8))
    frame = frame.with_columns(error=pl.when(pl.int_range(pl.len()) == 4).then(pl.lit(error)).otherwise("error"),
                               error_kind=pl.when(pl.int_range(pl.len()) == 4).then(pl.lit(kind))
                               .otherwise("error_kind"))
    frame.write_parquet(tmp_path / "p.parquet")
    with pytest.raises(InputError, match="row 5") as info:
        compute_metrics([tmp_path / "p.parquet"], resamples=0)
    assert message in str(info.value) and info.value.field == "error_kind"


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
