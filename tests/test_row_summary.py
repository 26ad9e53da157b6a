"""The report keeps aggregates of a run's prediction rows, never the rows (``omnieval.report.summary``): each
aggregate a section reads equals what a plain Python loop over the same rows gives (skipped rows, what was shown,
cascades, official rules not computed, the reliability diagram's bins, a confidence left to the option logprobs),
whether the file is scanned lazily or read batch by batch from a filesystem URI; and a summary of ten times the
rows is no larger."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from omnieval.report import skipped_text, summary
from omnieval.report.inputs import Run, RunSource
from omnieval.report.open_ended import cascades_of
from omnieval.report.shown import shown_table
from omnieval.report.summary import RowSummary, summarise
from omnieval.report.verdicts import not_computed
from omnieval.scoring.base import NOT_COMPUTED

TOKENS = pl.Struct({"video": pl.Int32, "audio": pl.Int32, "image": pl.Int32})
LOGPROBS = [math.log(0.2), math.log(0.65), math.log(0.15)]


def rows(with_logprobs: bool) -> list[dict]:
    """Twelve rows of one run: skipped ones (modalities not asked), rows that say what was shown and rows that do not,
    a cascade whose stages change after its first row, two cells whose official rule was not computed, confidences
    in several bins (one at 1.0, one whose target is null), and one confidence left to the option logprobs."""
    def row(model, split, skipped=None, shown=(None,) * 5, choice=None, target="A", conf=None, method=None,
            cascade=None, stages=None, how=None, logprobs=None):
        frames, size, seconds, tokens, prompt = shown
        return {"protocol": "dissonance", "model": model, "prompt": "zs", "split": split, "skipped": skipped,
                "cascade": cascade, "stage_engines": stages, "video_frames": frames, "video_size": size,
                "audio_seconds": seconds, "media_tokens": tokens, "prompt_tokens": prompt, "choice": choice,
                "target": target, "confidence": conf, "confidence_method": method, "official_how": how,
                "reasoning": "long text the report never reads", **({"option_logprobs": logprobs}
                                                                     if with_logprobs else {})}

    tok = lambda v, a, i: {"video": v, "audio": a, "image": i}  # noqa: E731
    return [
        row("m1", "real", shown=(8, "280x392", 2.5, tok(140, 63, 0), 250), choice="A", conf=0.95, method="rs",
            cascade="desc:audio", stages="hf+vllm"),
        row("m1", "real", skipped="", shown=(16, "280x392", 30.0, tok(280, 750, 0), 1100), choice="B",
            conf=0.91, method="rs", cascade="desc:audio", stages="vllm"),
        row("m1", "synth", skipped="video+audio"),
        row("m1", "synth", shown=(4, "224x224", None, tok(64, 0, None), 130), choice="A", conf=0.15),
        row("m2", "real", skipped="video"),
        row("m2", "real", choice="C", target="C", conf=0.05, method="tp", how=NOT_COMPUTED + "reason one"),
        row("m2", "synth", skipped="audio"),
        row("m2", "synth", choice="D", conf=1.0, method="tp", how=NOT_COMPUTED + "reason two"),
        row("m2", "real", choice="A", target=None, conf=0.55, method="tp", how="official"),
        row("m2", "real", choice="B", target="B", logprobs=LOGPROBS),
        row("m3", "real", skipped="video+audio"),
        row("m1", "real", cascade="desc:audio", stages="hf+vllm"),  # the first stages again, after the others
    ]


def write(path: Path, data: list[dict], repeat: int = 1) -> Path:
    frame = pl.DataFrame(data * repeat, schema_overrides={"media_tokens": TOKENS, "video_frames": pl.Int32,
                                                          "prompt_tokens": pl.Int32, "audio_seconds": pl.Float64,
                                                          "confidence": pl.Float64})
    frame.write_parquet(path, row_group_size=4)
    return path


@pytest.fixture(params=["scan", "scan-logprobs", "batches-logprobs"])
def made(request, tmp_path, monkeypatch):
    """(summary, rows): a local file scanned lazily, without or with option logprobs, or one read batch by batch
    (three rows at a time) through its ``file://`` URI, as a file on remote storage is."""
    data = rows(with_logprobs=request.param.endswith("logprobs"))
    path = write(tmp_path / "predictions.parquet", data)
    if request.param.startswith("batches"):
        monkeypatch.setattr(summary, "BATCH_ROWS", 3)
        from omnieval.core.storage import stored_path

        path = stored_path(f"file://{path}")
    return summarise([path]), data


def confidence(row: dict) -> float | None:
    """The row's confidence, or the restricted softmax of its choice over the option logprobs."""
    if row["confidence"] is not None or row["choice"] is None or not row.get("option_logprobs"):
        return row["confidence"]
    weights = [math.exp(v) for v in row["option_logprobs"]]
    return weights["ABC".index(row["choice"])] / sum(weights)


def test_the_run_table_counts_every_row_and_the_skipped_ones_per_model_and_modality(made):
    made_summary, data = made
    assert made_summary.rows == len(data) == 12
    assert skipped_text(made_summary) == "m1 1: audio 1, video 1; m2 2: audio 1, video 1; m3 1: audio 1, video 1"
    cells = {(r["model"], r["split"]): 0 for r in data}
    for r in data:
        cells[r["model"], r["split"]] += 1
    got = {(m, s): n for m, s, n in made_summary.cells.select("model", "split", "n").iter_rows()}
    assert got == cells
    assert made_summary.cells["model"].unique(maintain_order=True).to_list() == ["m1", "m2", "m3"]


def test_what_was_shown_is_the_median_and_range_of_the_rows_asked(made):
    table = shown_table([Run("r", RunSource(root="."), pl.DataFrame(), made[0], None, {})])
    got = [[c.text for c in row] for row in table.rows]
    assert got == [
        # m1: four rows asked (one skipped: ''), three say; frames 4, 8, 16; seconds 2.5 and 30 (median 16.25)
        ["r", "m1", "3 of 4", "8 (4–16)", "280x392 (+1 other)", "16.2 (2.5–30.0)", "140 (64–280)", "63 (0–750)",
         "0", "250 (130–1100)"],
        ["r", "m2", "0 of 4", "—", "—", "—", "—", "—", "—", "—"],  # asked, but nothing said; m3: nothing asked
    ]


def test_cascades_and_official_rules_not_computed_are_those_of_the_first_rows(made):
    assert cascades_of(made[0]) == {"m1": "desc:audio (hf+vllm)"}
    pooled = RowSummary.pooled([("r", made[0])], "dissonance")
    assert not_computed(pooled) == {("r", "zs", "real"): "reason one", ("r", "zs", "synth"): "reason two"}
    assert RowSummary.pooled([("r", made[0])], "crossmodal") is None


def test_the_reliability_bins_equal_a_plain_loop(made):
    made_summary, data = made
    want: dict[tuple, list] = {}
    for r in data:
        conf = confidence(r)
        if r["choice"] is None or conf is None:
            continue
        method = r["confidence_method"] or ("rs" if r["confidence"] is None else "unknown")
        key = (r["split"], method, r["model"], min(int(conf * 10), 9))
        cell = want.setdefault(key, [[], [], 0])
        cell[0].append(conf)
        if r["target"] is not None:
            cell[1].append(float(r["choice"] == r["target"]))
        cell[2] += 1
    bins = made_summary.reliability
    got = {}
    for split, method, model, b, cs, cn, xs, xn, n in bins.select(
            "split", "method", "model", "bin", "conf_sum", "conf_n", "correct_sum", "correct_n", "n").iter_rows():
        got[split, method, model, b] = (cs / cn, xs / xn if xn else None, n)
    assert set(got) == set(want)
    for key, (confs, correct, n) in want.items():
        assert got[key][0] == pytest.approx(sum(confs) / len(confs), abs=1e-12)
        assert got[key][1] == (sum(correct) / len(correct) if correct else None)
        assert got[key][2] == n
    logprob_rows = [k for k in want if k[1] == "rs" and k[2] == "m2"]
    assert len(logprob_rows) == ("option_logprobs" in data[0])  # filled where the file gives the logprobs


def test_a_summary_of_ten_times_the_rows_is_no_larger(tmp_path):
    once = summarise([write(tmp_path / "once.parquet", rows(False))])
    tenfold = summarise([write(tmp_path / "ten.parquet", rows(False), repeat=10)])
    assert tenfold.rows == 10 * once.rows
    assert tenfold.height() == once.height() > 0
    assert tenfold.cells["n"].to_list() == [10 * n for n in once.cells["n"].to_list()]


def test_the_report_reads_only_the_columns_it_aggregates_and_no_file_whole(tmp_path, monkeypatch):
    path = write(tmp_path / "predictions.parquet", rows(False))
    scanned = []
    real = summary._scan

    def spy(source, columns):
        scanned.append(list(columns))
        return real(source, columns)

    def refuse(*args, **kwargs):
        raise AssertionError("a predictions file read whole")

    monkeypatch.setattr(summary, "_scan", spy)
    monkeypatch.setattr(pl, "read_parquet", refuse)
    monkeypatch.setattr(pq, "read_table", refuse)
    made_summary = summarise([path])
    assert made_summary.rows == 12
    (columns,) = scanned
    assert set(columns) <= set(summary.READ_COLUMNS) and "reasoning" not in columns


def test_loading_a_run_with_its_metrics_reads_no_prediction_row_whole(tmp_path, monkeypatch):
    """A run folder with its metrics folder (``omnieval metrics``' files): the report loads it without reading the
    predictions file whole, and counts its rows and cells as the file holds them."""
    from omnieval.dev.bench_stats import synthetic_dissonance
    from omnieval.report.inputs import load_runs
    from omnieval.stats.command import metrics_files

    run = tmp_path / "run"
    (run / "metrics").mkdir(parents=True)
    synthetic_dissonance(n_models=2, prompts=("zs",), splits=("real",), n_items=6, seed=1) \
        .write_parquet(run / "predictions.parquet")
    for name, data in metrics_files([run / "predictions.parquet"], resamples=20, permutations=20).files.items():
        (run / "metrics" / name).write_bytes(data)
    real = pl.read_parquet

    def refuse_predictions(source, *args, **kwargs):
        assert not str(source).endswith("predictions.parquet"), "the predictions read whole"
        return real(source, *args, **kwargs)

    monkeypatch.setattr(pl, "read_parquet", refuse_predictions)
    (loaded,) = load_runs([str(run)], resamples=20, permutations=20)
    table = pq.read_table(run / "predictions.parquet", columns=["model"]).column("model").to_pylist()
    assert loaded.predictions.rows == len(table) == 2 * 6 * 8  # models x items x conditions
    assert {m: n for m, n in loaded.predictions.cells.select("model", "n").iter_rows()} == \
        {m: table.count(m) for m in set(table)}
