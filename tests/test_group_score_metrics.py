"""Video-MME-v2's group score as a metric of a run (``protocols.spectrum.group_score_columns``): worked by hand on
three groups (one per group type and parallel structure), per group type, a group with an errored question left
without a value, an unanswered question counted wrong; the official group score from the release rule's verdicts,
its -1 for an answer without a letter kept; and its 95% interval, which resamples whole groups (the clip,
``media_unit``), against a plain numpy bootstrap loop over the groups' scores."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from omnieval.stats.metrics import metrics_table

STRUCTURES = {"relevance": "[1,2,3,4]", "chain": "[1,2,3,4]", "middle": "[1,[2,3],4]", "first": "[[1,2],3,4]"}
SQUARES = (0.0, 1 / 16, 4 / 16, 9 / 16, 1.0)


def group_rows(video: str, kind: str, right: list[bool | None], model: str = "m", condition: str = "normal",
               errored: int | None = None) -> list[dict]:
    """Four questions on one clip: ``right[k]`` True (the target chosen), False (another option), None (no answer
    read); ``errored`` the question whose row errored."""
    group_type = "relevance" if kind == "relevance" else "logic"
    out = []
    for k, ok in enumerate(right, start=1):
        item = f"{video}-{k}"
        out.append({"model": model, "prompt": "zs", "protocol": "spectrum", "split": "test", "item_id": item,
                    "instance_id": f"{item}|{condition}|s0", "condition": condition, "target": "C",
                    "choice": None if ok is None or errored == k else ("C" if ok else "E"), "abstain_label": None,
                    "confidence": None, "confidence_method": None, "n_options": 8, "media_unit": f"videos/{video}.mp4",
                    "error": "engine: out of memory" if errored == k else None,
                    "breakdowns": [{"name": "group_structure", "value": STRUCTURES[kind]},
                                   {"name": "group_type", "value": group_type}]})
    return out


def with_official(rows: list[dict], official: list[int]) -> list[dict]:
    """The rows as a chain-of-thought run writes them, with the verdicts of the release's rule: ``official[k]`` 1
    (read, right), 0 (read, wrong) or -1 (no letter read: dropped from its plain accuracy)."""
    for row, score in zip(rows, official, strict=True):
        row.update(mode="cot", robust_choice=row["choice"],
                   robust_source="parsed" if row["choice"] is not None else "unparsed",
                   official_choice={1: "C", 0: "E", -1: None}[score], official_correct={1: True, 0: False}.get(score),
                   official_source="unparsed" if score == -1 else "parsed")
    return rows


def frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema_overrides={
        "choice": pl.Utf8, "abstain_label": pl.Utf8, "confidence": pl.Float64, "confidence_method": pl.Utf8,
        "error": pl.Utf8, "breakdowns": pl.List(pl.Struct({"name": pl.Utf8, "value": pl.Utf8})),
        "robust_choice": pl.Utf8, "robust_source": pl.Utf8, "official_choice": pl.Utf8, "official_correct": pl.Boolean,
        "official_source": pl.Utf8})


def scores(table: pl.DataFrame, key: str, metric: str = "group_score") -> dict:
    return table.filter((pl.col("metric") == metric) & (pl.col("key") == key)).row(0, named=True)


def test_group_scores_worked_by_hand():
    rows = (group_rows("001", "relevance", [True, False, True, True])  # 3 right: 9/16
            + group_rows("002", "middle", [True, False, True, False])  # run 1, question 3 right: 2 -> 4/12
            + group_rows("003", "first", [False, True, True, True])  # run 0, question 2 right: 1 -> 1/10
            + group_rows("004", "chain", [True, None, True, True])  # no answer read is wrong: run 1 -> 1/16
            + group_rows("005", "relevance", [True, True, True, True], errored=2))  # no value: a question errored
    table = metrics_table(frame(rows), resamples=200, seed=1)
    overall = scores(table, "normal")
    assert overall["value"] == pytest.approx((9 / 16 + 4 / 12 + 1 / 10 + 1 / 16) / 4, abs=1e-12)
    assert (overall["n"], overall["n_clusters"]) == (4, 4)
    logic = scores(table, "group_type=logic/normal")
    assert logic["value"] == pytest.approx((4 / 12 + 1 / 10 + 1 / 16) / 3, abs=1e-12)
    assert scores(table, "group_structure=[[1,2],3,4]/normal")["value"] == pytest.approx(1 / 10, abs=1e-12)
    # plain accuracy beside it: every answered question, the errored one left out
    accuracy = table.filter((pl.col("metric") == "accuracy") & (pl.col("key") == "normal")).row(0, named=True)
    assert accuracy["value"] == pytest.approx((3 + 2 + 3 + 3 + 3) / (4 + 4 + 4 + 3 + 3), abs=1e-12)


def test_the_official_group_score_keeps_the_scripts_minus_one():
    # the release's rule reads no letter in the fourth answer (relevance) and the second (chain); omnieval's reads none
    # either: the run's group score counts them wrong, the script's -1 is summed (relevance) or counts right (chain)
    rows = (with_official(group_rows("001", "relevance", [True, True, True, None]), [1, 1, 1, -1])
            + with_official(group_rows("002", "chain", [True, None, True, False]), [1, -1, 1, 0]))
    table = metrics_table(frame(rows), resamples=200, seed=1)
    assert scores(table, "normal")["value"] == pytest.approx((9 / 16 + 1 / 16) / 2, abs=1e-12)
    official = scores(table, "normal", "official_group_score")
    assert official["value"] == pytest.approx((4 / 16 + 9 / 16) / 2, abs=1e-12)
    assert (official["n"], official["n_clusters"]) == (2, 2)
    # and beside them the plain accuracies: the script's leaves its -1 answers out
    official_accuracy = table.filter((pl.col("metric") == "official_accuracy") & (pl.col("key") == "normal"))
    assert official_accuracy["value"][0] == pytest.approx(5 / 6, abs=1e-12)


def test_questions_without_group_breakdowns_get_no_group_score():
    rows = group_rows("001", "relevance", [True, True, False, True])
    for row in rows:
        row["breakdowns"] = [{"name": "level", "value": "1"}]
    table = metrics_table(frame(rows), resamples=0, seed=1)
    assert "group_score" not in set(table["metric"])


def test_predictions_whose_breakdowns_are_all_null_get_no_group_score():
    rows = group_rows("001", "relevance", [True, True, False, True])
    for row in rows:
        row["breakdowns"] = None
    table = metrics_table(pl.DataFrame(rows).with_columns(pl.lit(None).alias("breakdowns")), resamples=0, seed=1)
    assert "group_score" not in set(table["metric"]) and "accuracy" in set(table["metric"])


def test_the_interval_resamples_whole_groups_as_a_numpy_loop_over_groups_does():
    rng = np.random.default_rng(11)
    rows, per_group = [], []
    for g in range(40):
        right = [bool(x) for x in rng.random(4) < 0.6]
        kind = ("relevance", "chain", "middle", "first")[g % 4]
        rows += group_rows(f"{g:03d}", kind, right)
        run = next((i for i, ok in enumerate(right) if not ok), 4)
        per_group.append({"relevance": SQUARES[sum(right)], "chain": SQUARES[run],
                          "middle": (0, 1 / 12, 4 / 12, 7 / 12, 1)[2 if run == 1 and right[2] else run],
                          "first": (0, 1 / 10, 2 / 10, 5 / 10, 1)[1 if run == 0 and right[1] else run]}[kind])
    resamples = 20_000
    got = scores(metrics_table(frame(rows), resamples=resamples, seed=3), "normal")
    values = np.array(per_group)
    draws = np.random.default_rng(5).integers(0, len(values), size=(resamples, len(values)))
    means = values[draws].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    assert got["value"] == pytest.approx(values.mean(), abs=1e-12)
    assert got["n_clusters"] == 40
    assert got["ci_low"] == pytest.approx(low, abs=0.012)
    assert got["ci_high"] == pytest.approx(high, abs=0.012)
