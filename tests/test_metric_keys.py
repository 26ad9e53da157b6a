"""A metric row's key as named parts, and a pair of models as two columns: nothing reads them back out of a label.

Model and task names holding ``/`` and `` vs `` (what the labels ``task/direction`` and ``a vs b`` are made of) go
through ``metrics``, the paired differences, ``stats`` and the report, each value checked against plain Python over
the hand-made predictions; old tables are refused with one line naming the file; a metric function that breaks the
key contract is refused naming the protocol.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from omnieval.core.metric_types import KEY_PARTS, CellFamily, MetricRow, ProtocolMetrics, Support
from omnieval.core.schema import InputError
from omnieval.protocols.crossmodal import DIRECTIONS
from omnieval.report import build_report
from omnieval.report.blocks import Table
from omnieval.report.inputs import load_runs
from omnieval.stats.bootstrap import checked_rows
from omnieval.stats.paired import metrics_and_paired
from omnieval.stats.significance import stats_table

SLASHED = "org/m1 vs m2"  # a model named like a pair, with a slash
PLAIN = "base"
TASK = "speech/music vs noise"  # a task named like a task/subtask scope and a pair
OTHER = "plain"
ITEMS = [f"i{i}" for i in range(12)]


def _correct(model: str, item: int, direction: int) -> bool:
    """A fixed pattern of right and wrong answers that differs between the two models."""
    shift = 0 if model == SLASHED else 1
    return (item * 7 + direction * 3 + shift) % 3 != 0


def _predictions() -> pl.DataFrame:
    rows = []
    for model in (SLASHED, PLAIN):
        for i, item in enumerate(ITEMS):
            for j, direction in enumerate(DIRECTIONS):
                right = _correct(model, i, j)
                rows.append(dict(model=model, prompt="zs", protocol="crossmodal", split="all", item_id=item,
                                 instance_id=f"{item}|{direction}", condition=direction, target="A",
                                 choice="A" if right else "B", abstain_label=None, confidence=None,
                                 confidence_method=None, task=TASK if i % 2 else OTHER, n_options=4))
    return pl.DataFrame(rows)


def _accuracy(model: str, direction: str, task: str | None) -> float:
    """Share of right answers, by a plain loop over the pattern."""
    j = DIRECTIONS.index(direction)
    hits = [_correct(model, i, j) for i in range(len(ITEMS)) if task is None or (TASK if i % 2 else OTHER) == task]
    return sum(hits) / len(hits)


def test_names_with_a_slash_and_vs_are_read_from_the_key_parts_and_pair_columns(tmp_path):
    predictions = _predictions()
    metrics, paired = metrics_and_paired(predictions, resamples=200, seed=1, permutations=200)

    # the task scope is its own part: a task holding "/" is a task, never a task and subtask
    scoped = metrics.filter((pl.col("metric") == "accuracy") & (pl.col("task") == TASK))
    assert set(scoped["subtask"].to_list()) == {""} and set(scoped["leaf"].to_list()) == set(DIRECTIONS)
    for r in metrics.filter(pl.col("metric") == "accuracy").iter_rows(named=True):
        task = r["task"] or None
        assert r["value"] == pytest.approx(_accuracy(r["model"], r["leaf"], task)), (r["model"], r["key"])
    assert metrics.filter((pl.col("model") == SLASHED) & (pl.col("task") == TASK)
                          & (pl.col("metric") == "accuracy")).height == len(DIRECTIONS)

    # paired: a - b per direction, the two models as the sides, the direction as the leaf
    models = paired.filter((pl.col("comparison") == "models") & (pl.col("metric") == "accuracy"))
    assert models.height == len(DIRECTIONS)
    for r in models.iter_rows(named=True):
        assert (r["a"], r["b"]) == (SLASHED, PLAIN)
        expected = _accuracy(SLASHED, r["leaf"], None) - _accuracy(PLAIN, r["leaf"], None)
        assert r["estimate"] == pytest.approx(expected)

    # tests: the pair in model_a / model_b; the pooled estimate is the mean over items of a's minus b's accuracy
    tests = stats_table(predictions, permutations=200, seed=1)
    pooled = tests.filter((pl.col("test") == "permutation_models")
                          & (pl.col("comparison") == "all")).row(0, named=True)
    assert (pooled["model_a"], pooled["model_b"]) == (SLASHED, PLAIN)
    per_item = [np.mean([_correct(SLASHED, i, j) - _correct(PLAIN, i, j) for j in range(len(DIRECTIONS))])
                for i in range(len(ITEMS))]
    assert pooled["estimate"] == pytest.approx(float(np.mean(per_item)))

    # the report: the task is shown as a task (not a subtask), and both models stand in the pair matrix
    folder = tmp_path / "run"
    folder.mkdir()
    predictions.write_parquet(folder / "predictions.parquet")
    tests.write_parquet(folder / "tests.parquet")
    report = build_report([str(folder)], resamples=200, permutations=200, seed=1)
    tables = {b.name: b for s in report.sections for b in s.walk() if isinstance(b, Table)}
    scope_col = tables["directions-task"].header.index("task")
    assert {row[scope_col].text for row in tables["directions-task"].rows} == {TASK, OTHER}
    assert "directions-subtask" not in tables
    matrices = [b for s in report.sections for b in s.walk()
                if isinstance(b, Table) and b.rows and b.header[1:] == [SLASHED, PLAIN]]
    assert matrices and [row[0].text for row in matrices[0].rows] == [SLASHED, PLAIN]
    (pair,) = [row for row in matrices[0].rows if row[0].text == SLASHED]
    assert float(pair[2].text) == pytest.approx(pooled["estimate"], abs=0.0005)


def test_a_metrics_table_or_tests_table_written_before_the_parts_is_refused_naming_it(tmp_path):
    folder = tmp_path / "metrics"
    folder.mkdir()
    old = pl.DataFrame({"protocol": ["crossmodal"], "model": ["m"], "prompt": ["zs"], "split": ["all"],
                        "metric": ["accuracy"], "key": ["a/A->T"], "value": [0.5], "ci_low": [0.4],
                        "ci_high": [0.6], "n": [10]})
    old.write_parquet(folder / "metrics.parquet")
    with pytest.raises(InputError) as got:
        load_runs([str(folder)])
    message = str(got.value)
    assert "metrics.parquet" in message and "written before" in message and "\n" not in message
    # key parts as columns, but written before the resampling unit was recorded: no n_clusters to show
    old.with_columns([pl.lit("").alias(p) for p in KEY_PARTS] + [pl.lit(10).alias("n_items")]).write_parquet(
        folder / "metrics.parquet")
    with pytest.raises(InputError, match=r"metrics\.parquet.*n_clusters"):
        load_runs([str(folder)])

    run = tmp_path / "run"
    run.mkdir()
    _predictions().write_parquet(run / "predictions.parquet")
    stats_table(_predictions(), permutations=50).drop("model_a", "model_b").write_parquet(run / "tests.parquet")
    with pytest.raises(InputError, match=r"tests\.parquet.*model_a"):
        load_runs([str(run)], resamples=50, permutations=50)


def _spec(**kw) -> ProtocolMetrics:
    return ProtocolMetrics(name="toy", families=(CellFamily("acc", "correct"),), metrics=lambda cells: [], **kw)


def test_a_metric_row_breaking_the_key_contract_is_refused_naming_the_protocol():
    support = Support(3, np.ones(3, bool))
    values = np.zeros(4)
    ok = [MetricRow("accuracy", values, support, "x", {"leaf": "x"}), MetricRow("accuracy", values, support)]
    assert checked_rows(_spec(), ("m", "zs", "all"), ok) == ok
    with pytest.raises(ValueError, match="toy.*MetricRow"):
        checked_rows(_spec(), ("m", "zs", "all"), [("accuracy", "x", values, support)])
    with pytest.raises(ValueError, match="toy.*'accuracy'.*not declared"):
        checked_rows(_spec(), ("m", "zs", "all"), [MetricRow("accuracy", values, support, "t/x", {"task": "t"})])
    with pytest.raises(ValueError, match="toy.*two rows with the same key parts"):  # two labels, one set of parts
        checked_rows(_spec(key_parts=("task",)), ("m", "zs", "all"),
                     [MetricRow("accuracy", values, support, "a", {"task": "t"}),
                      MetricRow("accuracy", values, support, "b", {"task": "t"})])
    with pytest.raises(ValueError, match="must not repeat a shared part or a table column"):
        _spec(key_parts=("model",))


def test_key_parts_read_back_from_metrics_csv_stay_text(tmp_path):
    """Tasks named ``007`` and ``010`` are parts ``007`` and ``010`` after a round trip through ``metrics.csv``,
    not the integers 7 and 10, also where the file was saved again by a tool that writes an empty part as an empty
    field (a spreadsheet): the column then holds only numbers and empty fields."""
    from omnieval.report.inputs import _read_metrics
    from omnieval.stats.metrics import metrics_table

    predictions = _predictions().with_columns(task=pl.when(pl.col("task") == TASK).then(pl.lit("007"))
                                              .otherwise(pl.lit("010")))
    table = metrics_table(predictions, resamples=50, seed=1)
    table.with_columns(pl.col("task").replace("", None)).write_csv(tmp_path / "metrics.csv")
    read, _ = _read_metrics(tmp_path / "metrics.csv")
    assert set(read["task"].to_list()) == {"", "007", "010"}
    got = read.filter((pl.col("task") == "007") & (pl.col("leaf") == "A->T") & (pl.col("metric") == "accuracy")
                      & (pl.col("model") == PLAIN))
    assert got["value"].to_list() == [pytest.approx(_accuracy(PLAIN, "A->T", TASK))]
