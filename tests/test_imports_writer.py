"""The shared import writer (``omnieval.imports.writer``): dedupe, reruns, filters, repeats, joining and clusters,
each on a worked example whose right answer is written out by hand, and the written folder read back by
``omnieval metrics``'s own reader."""

from __future__ import annotations

import json

import polars as pl
import pytest

from omnieval.core.schema import InputError
from omnieval.imports.base import ImportedRow
from omnieval.imports.writer import write_import
from omnieval.stats.metrics import metrics_table
from omnieval.stats.read import read_predictions


def row(sample, correct, *, model="m1", task="t", repeat=0, filter="", source=None, written=None, cluster=None,
        choice=None, target=None, text=None):
    return ImportedRow(model=model, task=task, sample_id=str(sample), correct=correct,
                       source=source or f"{model}.jsonl:{sample}", repeat=repeat, filter=filter, written=written,
                       cluster=cluster, choice=choice, target=target, text=text)


def accuracy(out, model, task):
    table = metrics_table(read_predictions([out / "predictions.parquet"]), resamples=50, seed=0)
    hit = table.filter((pl.col("model") == model) & (pl.col("split") == task) & (pl.col("metric") == "accuracy"))
    assert hit.height == 1
    return hit.row(0, named=True)


def test_identical_duplicates_collapse_and_are_counted(tmp_path):
    rows = [row(1, True), row(2, False), row(3, True),
            row(1, True, source="copy.json#1"), row(2, False, source="copy.json#2")]  # a log and its conversion
    summary = write_import(rows, tmp_path / "out", fmt="test")
    assert (summary.rows, summary.duplicates, summary.reruns) == (3, 2, 0)
    frame = read_predictions([tmp_path / "out" / "predictions.parquet"])
    assert frame.height == 3
    assert accuracy(tmp_path / "out", "m1", "t")["value"] == pytest.approx(2 / 3)
    assert json.loads((tmp_path / "out" / "import.json").read_text())["duplicates"] == 2


def test_a_rerun_keeps_the_newest_verdict(tmp_path):
    rows = [row(1, False, written=100.0, source="old.jsonl:1"), row(2, False, written=100.0),
            row(1, True, written=200.0, source="new.jsonl:1")]
    summary = write_import(rows, tmp_path / "out", fmt="test")
    assert (summary.rows, summary.reruns) == (2, 1)
    assert accuracy(tmp_path / "out", "m1", "t")["value"] == pytest.approx(1 / 2)  # sample 1 right, sample 2 wrong
    # the older file read last changes nothing
    summary = write_import(list(reversed(rows)), tmp_path / "again", fmt="test")
    assert accuracy(tmp_path / "again", "m1", "t")["value"] == pytest.approx(1 / 2)


def test_conflicting_records_of_equal_age_are_refused_naming_both(tmp_path):
    rows = [row(1, True, written=5.0, source="a.jsonl:1"), row(1, False, written=5.0, source="b.jsonl:7")]
    with pytest.raises(InputError) as err:
        write_import(rows, tmp_path / "out", fmt="test")
    message = str(err.value)
    assert "a.jsonl:1" in message and "b.jsonl:7" in message and "\n" not in message
    assert not (tmp_path / "out" / "predictions.parquet").exists()


def test_repeats_are_rows_of_one_item(tmp_path):
    # item 1: 2 of 3 repeats right; item 2: 0 of 3; item 3: 3 of 3 -> 5/9 of rows, 3 items
    verdicts = {1: [True, True, False], 2: [False, False, False], 3: [True, True, True]}
    rows = [row(i, v, repeat=r) for i, vs in verdicts.items() for r, v in enumerate(vs)]
    summary = write_import(rows, tmp_path / "out", fmt="test")
    assert (summary.rows, summary.repeats) == (9, 6)
    got = accuracy(tmp_path / "out", "m1", "t")
    assert got["value"] == pytest.approx(5 / 9)
    assert (got["n"], got["n_items"], got["n_clusters"]) == (9, 3, 3)
    frame = read_predictions([tmp_path / "out" / "predictions.parquet"])
    assert sorted(frame["sample"].to_list()) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert frame["item_id"].n_unique() == 3


def test_a_task_with_several_filters_needs_one_chosen(tmp_path):
    rows = [row(1, True, filter="strict-match"), row(1, False, filter="flexible-extract"),
            row(2, False, filter="strict-match"), row(2, False, filter="flexible-extract"),
            row(1, True, task="other", filter="none")]
    with pytest.raises(InputError, match="'flexible-extract', 'strict-match'.*--filter"):
        write_import(rows, tmp_path / "out", fmt="test")
    with pytest.raises(InputError, match="no filter 'majority'"):
        write_import(rows, tmp_path / "out", fmt="test", filter="majority")
    summary = write_import(rows, tmp_path / "out", fmt="test", filter="strict-match")
    assert summary.filters == {"t": "strict-match", "other": "none"}
    assert accuracy(tmp_path / "out", "m1", "t")["value"] == pytest.approx(1 / 2)
    assert accuracy(tmp_path / "out", "m1", "other")["value"] == 1.0


def test_models_join_on_items_and_the_unpaired_ones_are_listed(tmp_path):
    rows = [row(i, True, model="a") for i in (1, 2, 3, 4)] + [row(i, i % 2 == 0, model="b") for i in (2, 3, 4, 5)]
    summary = write_import(rows, tmp_path / "out", fmt="test")
    assert summary.unpaired == 2
    assert "2 items not in every model" in summary.line()
    listed = pl.read_csv(tmp_path / "out" / "unpaired_items.csv").sort("sample_id")
    assert listed["sample_id"].to_list() == [1, 5]
    assert listed["models"].to_list() == ["a", "b"]
    assert listed["missing"].to_list() == ["b", "a"]
    frame = read_predictions([tmp_path / "out" / "predictions.parquet"])
    assert frame.height == 8  # nothing dropped
    assert accuracy(tmp_path / "out", "b", "t")["value"] == pytest.approx(2 / 4)


def test_an_items_cluster_is_one_value(tmp_path):
    rows = [row(1, True, cluster="v1"), row(2, False, cluster="v1"), row(3, True, cluster="v2"),
            row(3, False, model="m2"), row(1, True, model="m2", cluster="v1"), row(2, True, model="m2")]
    write_import(rows, tmp_path / "out", fmt="test")
    frame = read_predictions([tmp_path / "out" / "predictions.parquet"]).sort("model", "item_id")
    # rows without a cluster take their item's: m2's sample 3 is in v2, its sample 2 in v1
    assert frame["media_unit"].to_list() == ["v1", "v1", "v2", "v1", "v1", "v2"]
    got = accuracy(tmp_path / "out", "m1", "t")
    assert (got["n_items"], got["n_clusters"]) == (3, 2)
    bad = [row(1, True, cluster="v1", source="x.jsonl:1"), row(1, True, model="m2", cluster="v9", source="y:3")]
    with pytest.raises(InputError, match="'v1' in x.jsonl:1 but 'v9' in y:3"):
        write_import(bad, tmp_path / "bad", fmt="test")


def test_logged_labels_are_kept_where_they_agree_with_the_verdict(tmp_path):
    rows = [row(1, True, choice="C", target="C"), row(2, False, choice="A", target="D"),
            row(3, False, target="Paris", text="London")]
    write_import(rows, tmp_path / "out", fmt="test")
    frame = read_predictions([tmp_path / "out" / "predictions.parquet"]).sort("item_id")
    assert frame["choice"].to_list() == ["C", "A", "B"]
    assert frame["target"].to_list() == ["C", "D", "A"]
    assert frame["reference"].to_list() == ["C", "D", "Paris"]
    assert frame["raw_text"].to_list() == [None, None, "London"]


def test_a_folder_a_run_wrote_is_never_overwritten(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "predictions.parquet").write_bytes(b"a run's predictions")
    with pytest.raises(InputError, match="no import wrote"):
        write_import([row(1, True)], tmp_path / "run", fmt="test")
    assert (tmp_path / "run" / "predictions.parquet").read_bytes() == b"a run's predictions"
    write_import([row(1, True)], tmp_path / "imp", fmt="test")
    write_import([row(1, False)], tmp_path / "imp", fmt="test")  # an import's folder is replaced
    assert accuracy(tmp_path / "imp", "m1", "t")["value"] == 0.0


def test_nothing_to_import_and_an_out_that_is_a_file_are_one_line(tmp_path):
    with pytest.raises(InputError, match="no scored samples found"):
        write_import([], tmp_path / "out", fmt="test", inputs=[tmp_path / "empty"])
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="names a file"):
        write_import([row(1, True)], tmp_path / "file", fmt="test")
    assert (tmp_path / "file").read_text() == "x"
