"""``omnieval import lm-eval`` on files lm-eval 0.4.13 itself wrote (tests/data/imports/lm-eval/README.md): two
dummy models on a multiple-choice and a generation task, and a rerun of one model's multiple-choice task. Every
expected number is recomputed here from lm-eval's own per-sample files with a plain loop, and checked against the
aggregate lm-eval wrote in its results file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from omnieval.cli import main

DATA = Path(__file__).parent / "data" / "imports" / "lm-eval"
METRIC = {"omni_mc": "acc", "omni_gen": "exact_match"}


def newest_samples(model: str, task: str) -> list[dict]:
    """The lines of the newest samples file of ``model``'s ``task`` (lm-eval names them by the run's start)."""
    newest = sorted((DATA / model).glob(f"samples_{task}_*.jsonl"))[-1]
    return [json.loads(line) for line in newest.read_text().splitlines()]


def results_aggregate(model: str, task: str, key: str) -> float:
    newest = sorted((DATA / model).glob("results_*.json"), key=lambda p: p.name)
    for path in reversed(newest):
        results = json.loads(path.read_text())["results"]
        if task in results:
            return results[task][key]
    raise AssertionError((model, task))


def run_import(tmp_path, *args) -> Path:
    out = tmp_path / "imported"
    assert main(["import", "lm-eval", str(DATA), "--out", str(out), *args]) == 0
    return out


def metrics_of(tmp_path, out: Path, *args) -> pl.DataFrame:
    folder = tmp_path / "metrics"
    assert main(["metrics", str(out / "predictions.parquet"), "--out", str(folder), "--resamples", "50",
                 *args]) == 0
    return pl.read_csv(folder / "metrics.csv").filter(pl.col("metric") == "accuracy")


def test_accuracy_and_sample_count_equal_lm_evals_own(tmp_path, capsys):
    out = run_import(tmp_path, "--filter", "flexible-extract")
    line = capsys.readouterr().out
    assert "imported 40 rows (2 models, 2 tasks)" in line and "10 reruns" in line
    record = json.loads((out / "import.json").read_text())
    assert record["verdicts"] == {"omni_gen": ["exact_match"], "omni_mc": ["acc"]}
    assert record["filters"] == {"omni_gen": "flexible-extract", "omni_mc": "none"}
    table = metrics_of(tmp_path, out)
    for model in ("dummy-a", "dummy-b"):
        for task, metric in METRIC.items():
            lines = [s for s in newest_samples(model, task) if s["filter"] in ("none", "flexible-extract")]
            expected = sum(s[metric] for s in lines) / len(lines)
            got = table.filter((pl.col("model") == model) & (pl.col("split") == task)).row(0, named=True)
            assert got["value"] == pytest.approx(expected)
            assert got["n"] == got["n_items"] == len(lines) == 10
            key = f"{metric},{'none' if task == 'omni_mc' else 'flexible-extract'}"
            assert got["value"] == pytest.approx(results_aggregate(model, task, key))


def test_the_other_filter_gives_lm_evals_strict_match_score(tmp_path):
    table = metrics_of(tmp_path, run_import(tmp_path, "--filter", "strict-match"))
    got = table.filter((pl.col("model") == "dummy-b") & (pl.col("split") == "omni_gen")).row(0, named=True)
    lines = [s for s in newest_samples("dummy-b", "omni_gen") if s["filter"] == "strict-match"]
    assert got["value"] == pytest.approx(sum(s["exact_match"] for s in lines) / len(lines))
    assert got["value"] == pytest.approx(results_aggregate("dummy-b", "omni_gen", "exact_match,strict-match"))


def test_multiple_choice_rows_carry_the_options_lm_eval_scored(tmp_path):
    out = run_import(tmp_path, "--filter", "strict-match")  # omni_mc keeps its one filter
    frame = pl.read_parquet(out / "predictions.parquet")
    rows = frame.filter((pl.col("model") == "dummy-b") & (pl.col("task") == "omni_mc")).sort("sample")
    by_id = {r["item_id"]: r for r in rows.to_dicts()}
    for sample in newest_samples("dummy-b", "omni_mc"):
        scores = [float(option[0]) for option in sample["filtered_resps"]]
        row = by_id[f"omni_mc/{sample['doc_id']}"]
        assert row["choice"] == "ABCD"[scores.index(max(scores))]
        assert row["target"] == "ABCD"[int(sample["target"])]
        assert (row["choice"] == row["target"]) == (sample["acc"] == 1.0)


def test_a_task_under_several_filters_needs_one(tmp_path, capsys):
    assert main(["import", "lm-eval", str(DATA), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "omni_gen" in err and "'flexible-extract', 'strict-match'" in err
    assert not (tmp_path / "out").exists()


def test_cluster_field_and_model_name(tmp_path):
    out = tmp_path / "one"
    assert main(["import", "lm-eval", str(DATA / "dummy-b"), "--out", str(out), "--filter", "strict-match",
                 "--cluster-field", "video_id", "--model", "my-model"]) == 0
    table = metrics_of(tmp_path, out)
    assert table["model"].unique().to_list() == ["my-model"]
    for task in METRIC:
        videos = {s["doc"]["video_id"] for s in newest_samples("dummy-b", task)}
        got = table.filter(pl.col("split") == task).row(0, named=True)
        assert got["n_clusters"] == len(videos) < got["n_items"]


@pytest.mark.parametrize("edit, field", [
    (lambda s: s.update(acc=0.5), "acc"),
    (lambda s: s.pop("doc_id"), "doc_id"),
    (lambda s: s.update(metrics=["f1"]), "metrics"),
])
def test_a_bad_record_is_one_line_naming_file_line_and_field(tmp_path, capsys, edit, field):
    folder = tmp_path / "dummy-b"
    shutil.copytree(DATA / "dummy-b", folder)
    path = sorted(folder.glob("samples_omni_mc_*.jsonl"))[0]
    lines = path.read_text().splitlines()
    sample = json.loads(lines[3])
    edit(sample)
    lines[3] = json.dumps(sample)
    path.write_text("\n".join(lines) + "\n")
    assert main(["import", "lm-eval", str(folder), "--out", str(tmp_path / "out"), "--filter", "strict-match"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err
    assert str(path) in err and "line 4" in err and f"field {field!r}" in err


def test_repeats_are_one_line_per_document_in_lm_eval(tmp_path):
    folder = Path(__file__).parent / "data" / "imports" / "lm-eval-repeats"
    out = tmp_path / "imported"
    assert main(["import", "lm-eval", str(folder), "--out", str(out), "--filter", "flexible-extract"]) == 0
    lines = [json.loads(line) for path in folder.glob("dummy-r/samples_*.jsonl")
             for line in path.read_text().splitlines()]
    kept = [s for s in lines if s["filter"] == "flexible-extract"]
    assert all(len(s["resps"][0]) == 3 for s in kept)  # three answers logged, one verdict
    table = metrics_of(tmp_path, out)
    got = table.row(0, named=True)
    assert got["n"] == got["n_items"] == len(kept) == 4
    assert got["value"] == pytest.approx(sum(s["exact_match"] for s in kept) / len(kept))
    assert pl.read_parquet(out / "predictions.parquet")["sample"].to_list() == [0] * 4


def test_model_renames_one_model_only(tmp_path, capsys):
    """--model over two models' folders would merge their answers (each other's 'reruns'): refused."""
    assert main(["import", "lm-eval", str(DATA), "--out", str(tmp_path / "out"), "--filter", "strict-match",
                 "--model", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "dummy-a, dummy-b" in err and "--model" in err
