"""``omnieval import lmms-eval`` on files lmms-eval 0.7.3 itself wrote (tests/data/imports/lmms-eval/README.md): its
dummy model, answering ``A`` (dummy-a) or ``B`` (dummy-b), on a local Video-MME-layout task scored by Video-MME's own
``videomme_process_results``. Expected numbers are recomputed from lmms-eval's per-sample files with plain loops
(Video-MME's aggregation: ``pred_answer == answer``) and checked against the aggregate in its results files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from omnieval.cli import main

DATA = Path(__file__).parent / "data" / "imports" / "lmms-eval"
TASK, FIELD = "videomme_local", "videomme_perception_score"


def samples(model: str) -> list[dict]:
    path = next((DATA / model).glob(f"*_samples_{TASK}.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines()]


def plain_accuracy(model: str) -> float:
    lines = samples(model)
    return sum(s[FIELD]["pred_answer"] == s[FIELD]["answer"] for s in lines) / len(lines)


def imported_metrics(tmp_path, *import_args) -> tuple[pl.DataFrame, pl.DataFrame]:
    out = tmp_path / "imported"
    assert main(["import", "lmms-eval", str(DATA), "--out", str(out), *import_args]) == 0
    assert main(["metrics", str(out / "predictions.parquet"), "--out", str(tmp_path / "m"), "--resamples",
                 "50"]) == 0
    metrics = pl.read_csv(tmp_path / "m" / "metrics.csv").filter(pl.col("metric") == "accuracy")
    return metrics, pl.read_csv(tmp_path / "m" / "paired.csv")


def test_accuracy_sample_count_and_clusters_equal_lmms_evals_own(tmp_path):
    metrics, paired = imported_metrics(tmp_path)
    for model in ("dummy-a", "dummy-b"):
        got = metrics.filter(pl.col("model") == model).row(0, named=True)
        assert got["split"] == TASK
        assert got["value"] == pytest.approx(plain_accuracy(model))
        results = json.loads(next((DATA / model).glob("*_results.json")).read_text())["results"][TASK]
        assert got["value"] * 100 == pytest.approx(results[f"{FIELD},none"])  # lmms-eval reports a percentage
        lines = samples(model)
        assert got["n"] == got["n_items"] == len(lines) == 12
        assert got["n_clusters"] == len({s[FIELD]["videoID"] for s in lines}) == 4
    # the paired difference of the two models, resampled by video
    pair = paired.filter(pl.col("metric") == "accuracy").row(0, named=True)
    signs = {("dummy-a", "dummy-b"): 1, ("dummy-b", "dummy-a"): -1}[(pair["a"], pair["b"])]
    assert pair["estimate"] == pytest.approx(signs * (plain_accuracy("dummy-a") - plain_accuracy("dummy-b")))
    assert (pair["n_items"], pair["n_clusters"]) == (12, 4)


def test_rows_keep_the_logged_answer_and_the_doc_id(tmp_path):
    out = tmp_path / "imported"
    assert main(["import", "lmms-eval", str(DATA / "dummy-b"), "--out", str(out)]) == 0
    frame = pl.read_parquet(out / "predictions.parquet")
    by_id = {r["item_id"]: r for r in frame.to_dicts()}
    lines = samples("dummy-b")
    assert len({s["doc_hash"] for s in lines}) == 1 < len(lines)  # in this real file every doc_hash is the same
    for sample in lines:
        row = by_id[f"{TASK}/{sample['doc_id']}"]
        assert (row["choice"], row["target"]) == (sample[FIELD]["pred_answer"], sample[FIELD]["answer"])
        assert row["media_unit"] == sample[FIELD]["videoID"]
        assert row["model"] == "dummy-b"


def test_cluster_field_names_another_unit(tmp_path):
    metrics, _ = imported_metrics(tmp_path, "--cluster-field", "duration")
    durations = {s[FIELD]["duration"] for s in samples("dummy-a")}
    assert metrics["n_clusters"].to_list() == [len(durations)] * 2


@pytest.mark.parametrize("edit, field", [
    (lambda s: s[FIELD].pop("answer"), "metrics"),
    (lambda s: s.update(doc_id=None), "doc_id"),
])
def test_a_bad_record_is_one_line_naming_file_line_and_field(tmp_path, capsys, edit, field):
    folder = tmp_path / "dummy-a"
    shutil.copytree(DATA / "dummy-a", folder)
    path = next(folder.glob("*_samples_*.jsonl"))
    lines = path.read_text().splitlines()
    sample = json.loads(lines[6])
    edit(sample)
    lines[6] = json.dumps(sample)
    path.write_text("\n".join(lines) + "\n")
    assert main(["import", "lmms-eval", str(folder), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(path) in err and "line 7" in err and f"field {field!r}" in err
    assert not (tmp_path / "out").exists()


def test_a_missing_cluster_field_is_refused(tmp_path, capsys):
    assert main(["import", "lmms-eval", str(DATA), "--out", str(tmp_path / "out"), "--cluster-field", "scene"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "line 1" in err and "field 'scene'" in err


def test_the_report_pairs_the_imported_models_by_video(tmp_path):
    out = tmp_path / "imported"
    assert main(["import", "lmms-eval", str(DATA), "--out", str(out)]) == 0
    assert main(["report", str(out), "--out", str(tmp_path / "report"), "--resamples", "200",
                 "--permutations", "200"]) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "media_unit (4)" in text  # the resampling unit: the four videos
    pair = next(line for line in text.splitlines() if line.startswith("| models | dummy-a − dummy-b"))
    assert "12 in 4 clusters" in pair
    difference = plain_accuracy("dummy-a") - plain_accuracy("dummy-b")
    assert f"| {difference:.3f} [" in pair
