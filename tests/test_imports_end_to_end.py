"""inspect and VLMEvalKit files through the command a user runs: ``omnieval import`` then ``omnieval metrics`` on the
folder it writes; each model's accuracy and sample count equal the tool's own, recomputed here from its per-sample
files (inspect's JSON logs, VLMEvalKit's prediction files and its ``_acc.csv``)."""

from __future__ import annotations

import polars as pl
import pytest

from omnieval.cli import main
from tests.test_imports_inspect import JSON_LOGS, LOGS, plain_loop
from tests.test_imports_vlmevalkit import LLAVA, OUTPUTS, QWEN, RUN, overall, verdicts_from_predictions


def imported_accuracy(tmp_path, fmt: str, paths: list) -> pl.DataFrame:
    out, metrics = tmp_path / "imported", tmp_path / "metrics"
    assert main(["import", fmt, *map(str, paths), "--out", str(out)]) == 0
    # the folder import wrote, as docs/import.md gives it (its predictions.parquet)
    assert main(["metrics", str(out), "--out", str(metrics), "--resamples", "50"]) == 0
    return pl.read_csv(metrics / "metrics.csv").filter((pl.col("metric") == "accuracy") & (pl.col("key") == "normal"))


def test_inspect_logs_through_import_and_metrics(tmp_path):
    """Both models' ``.eval`` and ``.json`` logs at once (each run twice: the pair collapses); 4 samples x 2 epochs
    per model: 8 rows of 4 items, accuracy the mean over every (sample, epoch)."""
    table = imported_accuracy(tmp_path, "inspect", [LOGS])
    assert table.height == len(JSON_LOGS) == 2
    for log in JSON_LOGS:
        model, n, acc, verdicts = plain_loop(log)
        got = table.filter(pl.col("model") == model).row(0, named=True)
        assert got["split"] == "video_mcq"
        assert (got["n"], got["n_items"]) == (n, len({sample for sample, _ in verdicts}))
        assert got["value"] == pytest.approx(acc)


def test_vlmevalkit_results_through_import_and_metrics(tmp_path):
    """One run folder per model, its two multiple-choice result files (MMBench circular in .xlsx, MMStar in .tsv):
    accuracy per model and benchmark equal VLMEvalKit's own ``Overall`` and a loop over its prediction files."""
    pytest.importorskip("openpyxl")
    paths = [OUTPUTS / model / RUN[model] / f"{model}_{dataset}_exact_matching_result.{ext}"
             for model in (QWEN, LLAVA) for dataset, ext in (("MMBench_DEV_EN", "xlsx"), ("MMStar", "tsv"))]
    table = imported_accuracy(tmp_path, "vlmevalkit", paths)
    assert table.height == 4
    for model in (QWEN, LLAVA):
        for dataset, ext in (("MMBench_DEV_EN", "xlsx"), ("MMStar", "tsv")):
            verdicts = verdicts_from_predictions(OUTPUTS / model / RUN[model] / f"{model}_{dataset}.{ext}")
            got = table.filter((pl.col("model") == model) & (pl.col("split") == dataset)).row(0, named=True)
            assert got["n"] == got["n_items"] == len(verdicts)
            assert got["value"] == pytest.approx(sum(verdicts.values()) / len(verdicts))
            assert got["value"] == pytest.approx(overall(model, dataset, RUN[model]))
