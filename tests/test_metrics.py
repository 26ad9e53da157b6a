"""``omnieval metrics``: the dissonance worked example through the CLI, denominators, confidence methods, file
formats."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import polars as pl
import pytest

from omnieval.core.schema import InputError
from omnieval.stats.key_parts import key_columns
from omnieval.stats.metrics import compute_metrics, metrics_table
from omnieval.stats.read import read_predictions

ROOT = Path(__file__).resolve().parents[1]
ACC = {"C000": 965, "C100": 928, "C010": 964, "C001": 837, "C110": 907, "C101": 372, "C011": 835, "C111": 600}
# abstentions per condition (level sums 12, 165, 600, 596 of 1000, 3000, 3000, 1000) and human abstention targets
ABST = {"C000": 12, "C100": 50, "C010": 30, "C001": 85, "C110": 100, "C101": 330, "C011": 170, "C111": 596}
HUMAN = {"C000": 0, "C100": 0, "C010": 0, "C001": 0, "C110": 12, "C101": 12, "C011": 12, "C111": 976}


def base_row(**kw) -> dict:
    row = dict(model="m", prompt="zs", protocol="dissonance", split="synthetic", item_id="q", instance_id="i",
               condition="C000", target="A", choice="A", abstain_label="E", confidence=None,
               confidence_method=None)
    row.update(kw)
    return row


def worked_example(n: int = 1000) -> pl.DataFrame:
    """Predictions with exactly the condition accuracies, abstention and human-abstention rates of
    docs/reference.md's dissonance worked check."""
    rows = []
    for c in ACC:
        h, a = HUMAN[c], ABST[c]
        x = min(h, a)  # abstentions on abstention targets (correct)
        y = ACC[c] - x  # correct answers among the other targets
        assert 0 <= y <= n - h - (a - x)
        for i in range(n):
            if i < h:
                target, choice = "E", ("E" if i < x else "B")
            else:
                j = i - h
                target = "A"
                choice = "E" if j < a - x else ("A" if j < a - x + y else "B")
            rows.append(base_row(item_id=f"q{i:04d}", instance_id=f"q{i}|{c}", condition=c, target=target,
                                 choice=choice))
    return pl.DataFrame(rows, schema_overrides={"confidence": pl.Float64, "confidence_method": pl.Utf8})


def lookup(table: pl.DataFrame, metric: str, key: str = "", **where) -> dict:
    sel = table.filter((pl.col("metric") == metric) & (pl.col("key") == key))
    for col, val in where.items():
        sel = sel.filter(pl.col(col) == val)
    assert len(sel) == 1, (metric, key, where, sel)
    return sel.row(0, named=True)


def test_spec_worked_example_through_the_cli(tmp_path):
    path = tmp_path / "pred.parquet"
    worked_example().write_parquet(path)
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "metrics", str(path), "--out", str(out),
                           "--resamples", "200"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    table = pl.read_csv(out / "metrics.csv", schema_overrides={"key": pl.Utf8})
    assert table.columns == ["protocol", "model", "prompt", "split", "metric", "key", "value", "ci_low", "ci_high",
                             "n", "n_items", "n_clusters", *key_columns()]
    assert (out / "metrics.parquet").exists() and (out / "metrics.json").exists()
    assert (out / "paired.parquet").exists()  # one model, one prompt: no pair, an empty table with its columns
    assert set(table["n_items"].to_list()) == set(table["n_clusters"].to_list()) == {1000}
    table = table.with_columns(pl.col("key").fill_null(""))
    for c, correct in ACC.items():
        assert lookup(table, "accuracy", c)["value"] == pytest.approx(correct / 1000)
    for m, v in {"video": 0.18, "audio": -0.07, "text": 0.26}.items():
        assert lookup(table, "shapley", m)["value"] == pytest.approx(v, abs=0.005)
    for m, v in {"video": 0.04, "audio": 0.00, "text": 0.13}.items():
        assert lookup(table, "reliance", m)["value"] == pytest.approx(v, abs=0.005)
    for k, v in enumerate((0.012, 0.055, 0.200, 0.596)):
        assert lookup(table, "abstention_k", str(k))["value"] == pytest.approx(v)
    for k, v in enumerate((0.0, 0.0, 0.012, 0.976)):
        assert lookup(table, "human_abstention_k", str(k))["value"] == pytest.approx(v)
    ace = lookup(table, "ace")
    assert ace["value"] == pytest.approx(0.159, abs=0.0005)
    assert ace["ci_low"] < ace["value"] < ace["ci_high"]
    shapley = table.filter(pl.col("metric") == "shapley")["value"].sum()
    assert shapley == pytest.approx(ACC["C000"] / 1000 - ACC["C111"] / 1000)
    assert lookup(table, "accuracy_k", "1")["value"] == pytest.approx((0.928 + 0.964 + 0.837) / 3)
    assert lookup(table, "invalid_rate")["value"] == 0.0


def small_study(seed: int = 0, n_items: int = 30) -> pl.DataFrame:
    """Random predictions with invalid outputs, abstentions, anchors and rs confidences."""
    rng = np.random.default_rng(seed)
    rows = []
    conditions = list(ACC)
    for model in ("a", "b"):
        for i in range(n_items):
            for c in conditions:
                k = sum(int(d) for d in c[1:])
                target = "E" if (k == 3 and rng.random() < 0.9) else "ABCD"[rng.integers(4)]
                choice = target if rng.random() < 0.8 - 0.15 * k else "ABCDE"[rng.integers(5)]
                if rng.random() < 0.1:
                    choice = None
                rows.append(base_row(model=model, item_id=f"q{i:03d}", instance_id=f"q{i}|{c}", condition=c,
                                     target=target, choice=choice, anchor=f"anc{i % 4}", k=k,
                                     confidence=float(rng.random()), confidence_method="rs"))
    return pl.DataFrame(rows)


def test_invalid_predictions_leave_the_denominators_and_count_in_invalid_rate():
    frame = small_study()
    table = metrics_table(frame, resamples=50, seed=1)
    for model in ("a", "b"):
        rows = frame.filter(pl.col("model") == model).to_dicts()
        valid = [r for r in rows if r["choice"] is not None]
        assert lookup(table, "invalid_rate", model=model)["value"] == pytest.approx(1 - len(valid) / len(rows))
        assert lookup(table, "invalid_rate", model=model)["n"] == len(rows)
        for c in ACC:
            cell = [r for r in valid if r["condition"] == c]
            row = lookup(table, "accuracy", c, model=model)
            assert row["value"] == pytest.approx(np.mean([r["choice"] == r["target"] for r in cell]))
            assert row["n"] == len(cell)
        for k in range(4):
            at_k = [r for r in valid if r["k"] == k]
            assert lookup(table, "abstention_k", str(k), model=model)["value"] == pytest.approx(
                np.mean([r["choice"] == "E" for r in at_k]))
            assert lookup(table, "confidence_k", str(k), model=model)["value"] == pytest.approx(
                np.mean([r["confidence"] for r in at_k]))
            every = [r for r in rows if r["k"] == k]  # human abstention: all instances, valid or not
            assert lookup(table, "human_abstention_k", str(k), model=model)["value"] == pytest.approx(
                np.mean([r["target"] == "E" for r in every]))
        anchor = [r for r in valid if r["k"] == 0 and r["anchor"] == "anc1"]
        assert lookup(table, "anchor_accuracy", "anc1", model=model)["value"] == pytest.approx(
            np.mean([r["choice"] == r["target"] for r in anchor]))
        conf = np.array([r["confidence"] for r in valid])
        correct = np.array([r["choice"] == r["target"] for r in valid], dtype=float)
        bins = np.minimum((conf * 10).astype(int), 9)
        ece = sum(abs(correct[bins == b].sum() - conf[bins == b].sum()) for b in range(10)) / len(conf)
        assert lookup(table, "ece", model=model)["value"] == pytest.approx(ece)
    # dissonance resamples anchors: an anchor's own accuracy rests on one cluster, too few for any interval
    no_ci = table.filter(pl.col("ci_low").is_null())
    assert set(no_ci["metric"]) == {"anchor_accuracy"} and (no_ci["n_clusters"] == 1).all()
    assert len(no_ci) == 2 * 4


def test_rs_and_tp_confidences_are_never_pooled():
    frame = small_study(seed=2)
    tp = pl.col("model") == "b"
    frame = frame.with_columns(model=pl.lit("a"), confidence_method=pl.when(tp).then(pl.lit("tp")).otherwise(
        pl.lit("rs")), item_id=pl.when(tp).then(pl.col("item_id") + "b").otherwise(pl.col("item_id")))
    table = metrics_table(frame, resamples=30)
    keys = set(table.filter(pl.col("metric").is_in(["ece", "rc_auc", "confidence_k"]))["key"].to_list())
    assert keys == {"@rs", "@tp"} | {f"{k}@{m}" for k in range(4) for m in ("rs", "tp")}
    for method in ("rs", "tp"):
        part = frame.filter((pl.col("confidence_method") == method) & pl.col("choice").is_not_null())
        for k in range(4):
            expected = part.filter(pl.col("k") == k)["confidence"].mean()
            assert lookup(table, "confidence_k", f"{k}@{method}")["value"] == pytest.approx(expected)
        alone = metrics_table(frame.filter(pl.col("confidence_method") == method), resamples=0)
        assert lookup(table, "ece", f"@{method}")["value"] == pytest.approx(lookup(alone, "ece")["value"])
        assert lookup(table, "rc_auc", f"@{method}")["value"] == pytest.approx(lookup(alone, "rc_auc")["value"])


def test_formats_agree_and_k_comes_from_the_condition(tmp_path):
    frame = small_study(seed=3, n_items=12)
    frame.write_parquet(tmp_path / "p.parquet")
    frame.drop("k").write_ndjson(tmp_path / "p.jsonl")
    frame.drop("k").with_columns(extra=pl.lit("kept")).write_csv(tmp_path / "p.csv")
    tables = [compute_metrics([tmp_path / f"p.{ext}"], resamples=100, seed=5) for ext in ("parquet", "jsonl", "csv")]
    assert tables[0].equals(tables[1]) and tables[0].equals(tables[2])
    assert "extra" in read_predictions([tmp_path / "p.csv"]).columns


def test_missing_required_column_names_the_column_and_the_file(tmp_path):
    path = tmp_path / "bad.csv"
    small_study(n_items=2).drop("target").write_csv(path)
    with pytest.raises(InputError) as err:
        read_predictions([path])
    assert err.value.field == "target" and err.value.file == str(path)
    assert "target" in str(err.value) and "bad.csv" in str(err.value)
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "metrics", str(path), "--out",
                           str(tmp_path / "o")], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 2 and "target" in done.stderr


def test_same_table_for_one_and_two_threads(monkeypatch):
    import omnieval.kernels.bootstrap

    frame = small_study(seed=4)
    before = numba.get_num_threads()
    tables = []
    try:
        for threads, limit in ((1, 0), (2, 0), (2, 10**12)):  # limit 0: every kernel on numba's threads
            monkeypatch.setattr(omnieval.kernels.bootstrap, "PARALLEL_WORK", limit)
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            tables.append(metrics_table(frame, resamples=300, seed=7))
    finally:
        numba.set_num_threads(before)
    assert tables[0].equals(tables[1]) and tables[0].equals(tables[2])
    assert not tables[0].equals(metrics_table(frame, resamples=300, seed=8))


def test_crossmodal_worked_check_and_pattern_shortcut_ci():
    acc = {"A->T": .710, "A->V": .589, "T->A": .644, "T->V": .798, "V->A": .608, "V->T": .886}
    rows = []
    for d, a in acc.items():
        for i in range(1000):
            rows.append(base_row(protocol="crossmodal", split="all", condition=d, item_id=f"x{i}",
                                 instance_id=f"x{i}|{d}", abstain_label=None, choice="A" if i < a * 1000 else "B"))
    table = metrics_table(pl.DataFrame(rows), resamples=2000)
    assert lookup(table, "average")["value"] == pytest.approx(0.706, abs=0.0005)
    assert lookup(table, "std")["value"] == pytest.approx(0.117, abs=0.0005)
    for key, v in {"T_vs_V": -0.157, "T_vs_A": -0.487, "V_vs_A": -0.330}.items():
        assert lookup(table, "disparity", key)["value"] == pytest.approx(v, abs=0.0005)
    assert lookup(table, "imbalance", "V<->T")["value"] == pytest.approx(0.088, abs=0.0005)
    row = lookup(table, "accuracy", "A->T")
    se = np.sqrt(0.71 * 0.29 / 1000)  # binomial bootstrap: CI ~ +-1.96 se
    assert row["ci_low"] == pytest.approx(0.71 - 1.96 * se, abs=0.3 * se)
    assert row["ci_high"] == pytest.approx(0.71 + 1.96 * se, abs=0.3 * se)
