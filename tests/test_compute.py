"""The sweep's pooled result (``stats.compute``, ``<sweep>/combined/<benchmark>/``) and the report reading it: its
numbers against a plain loop over the predictions, the same report as one computed from the predictions, reused
while its inputs stand and computed again when a run's predictions change, and the report reading only the
prediction columns it shows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml

from omnieval.cli import main
from omnieval.report import build_report, markdown
from omnieval.report import inputs as report_inputs
from tests.identity_outputs import report_numbers

pytestmark = pytest.mark.slow
MODELS = [{"name": "sim-sight", "engine": "simulated", "options": {"seed": 3, "reliance": {"video": 0.9}}},
          {"name": "sim-text", "engine": "simulated", "options": {"seed": 5, "reliance": {"text": 0.9}}}]
RESAMPLES = 200


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark

    base = tmp_path_factory.mktemp("compute")
    make_crossmodal_benchmark(base / "bench", seed=0, n_entities=4)
    config = {"name": "pooled", "output": str(base / "sweep"), "prompts": ["zs", "cot"], "models": MODELS,
              "protocols": [{"protocol": "crossmodal", "benchmark": str(base / "bench")}],
              "decode": {"num_frames": 2, "max_side": 32},
              "metrics": {"resamples": RESAMPLES, "permutations": RESAMPLES}}
    (base / "sweep.yaml").write_text(yaml.safe_dump(config))
    assert main(["sweep", str(base / "sweep.yaml")]) == 0
    return base


def _plain_accuracy(path: Path) -> dict[tuple[str, str], float]:
    """Share of rows whose choice is the target, per (prompt, condition), by a loop over the file's rows."""
    right: dict[tuple[str, str], list[int]] = {}
    for row in pq.read_table(path, columns=["prompt", "condition", "choice", "target", "error"]).to_pylist():
        if row["error"] is None and row["choice"] is not None:
            right.setdefault((row["prompt"], row["condition"]), []).append(int(row["choice"] == row["target"]))
    return {k: sum(v) / len(v) for k, v in right.items()}


def _no_pooled_compute(monkeypatch) -> list:
    """Make a pooled ``compute`` in the report fail the test; returns the list of the other calls."""
    calls = []
    real = report_inputs.compute

    def spy(inputs, settings):
        assert not inputs.runs, "the report computed the pooled result the sweep stored"
        calls.append(inputs)
        return real(inputs, settings)

    monkeypatch.setattr(report_inputs, "compute", spy)
    return calls


def _protocol_input(root: Path):
    runs = report_inputs.load_runs([str(root)], resamples=RESAMPLES, permutations=RESAMPLES)
    (data,) = report_inputs.protocol_inputs(runs, resamples=RESAMPLES, permutations=RESAMPLES,
                                            stored=report_inputs.stored_results([str(root)]))
    return data


def test_the_reports_paired_differences_come_from_the_stored_result_and_match_a_plain_loop(sweep, monkeypatch):
    root = sweep / "sweep"
    assert (root / "combined" / "crossmodal" / "combined.json").is_file()
    calls = _no_pooled_compute(monkeypatch)
    data = _protocol_input(root)
    assert calls == []
    runs = root / "runs" / "crossmodal"
    sight = _plain_accuracy(runs / "sim-sight" / "zs" / "predictions.parquet") | \
        _plain_accuracy(runs / "sim-sight" / "cot" / "predictions.parquet")
    text = _plain_accuracy(runs / "sim-text" / "zs" / "predictions.parquet") | \
        _plain_accuracy(runs / "sim-text" / "cot" / "predictions.parquet")
    models = data.paired.filter((pl.col("comparison") == "models") & (pl.col("metric") == "accuracy")
                                & (pl.col("a") == "sim-sight") & (pl.col("b") == "sim-text"))
    assert models.height == len(sight) == 12  # 6 conditions x 2 prompts
    for row in models.iter_rows(named=True):
        cell = (row["prompt"], row["key"])
        assert row["a_value"] == pytest.approx(sight[cell], abs=1e-12)
        assert row["b_value"] == pytest.approx(text[cell], abs=1e-12)
        assert row["estimate"] == pytest.approx(sight[cell] - text[cell], abs=1e-12)
    prompts = data.paired.filter((pl.col("comparison") == "prompts") & (pl.col("metric") == "accuracy")
                                 & (pl.col("model") == "sim-sight") & (pl.col("a") == "cot"))
    assert prompts.height == 6
    for row in prompts.iter_rows(named=True):
        assert row["estimate"] == pytest.approx(sight[("cot", row["key"])] - sight[("zs", row["key"])], abs=1e-12)


def test_a_report_from_the_stored_result_says_what_one_computed_from_the_predictions_says(sweep, monkeypatch,
                                                                                         tmp_path):
    import omnieval.report as report

    root = sweep / "sweep"
    calls = []
    real = report_inputs.compute
    monkeypatch.setattr(report_inputs, "compute", lambda i, s: calls.append(i) or real(i, s))
    monkeypatch.setattr(report, "stored_results", lambda inputs: {})  # as if the sweep had stored none
    computed = markdown.render(build_report([str(root)], resamples=RESAMPLES, permutations=RESAMPLES))
    assert [bool(i.runs) for i in calls] == [True]
    monkeypatch.undo()
    _no_pooled_compute(monkeypatch)
    stored = markdown.render(build_report([str(root)], resamples=RESAMPLES, permutations=RESAMPLES))
    (tmp_path / "a.md").write_text(computed)
    (tmp_path / "b.md").write_text(stored)
    assert report_numbers(tmp_path / "a.md") == report_numbers(tmp_path / "b.md")


def test_a_report_with_other_settings_computes_instead_of_reading_the_stored_result(sweep, monkeypatch):
    calls = []
    real = report_inputs.compute
    monkeypatch.setattr(report_inputs, "compute", lambda i, s: calls.append(i) or real(i, s))
    runs = report_inputs.load_runs([str(sweep / "sweep")], resamples=RESAMPLES + 1, permutations=RESAMPLES)
    report_inputs.protocol_inputs(runs, resamples=RESAMPLES + 1, permutations=RESAMPLES,
                                  stored=report_inputs.stored_results([str(sweep / "sweep")]))
    assert [bool(i.runs) for i in calls] == [True]


def test_the_report_command_as_typed_reads_the_sweeps_result_with_the_sweeps_settings(sweep, monkeypatch, tmp_path):
    """``omnieval report <sweep> --out DIR`` with no settings: the stored result is read (made with the sweep's 200
    resamples, not the report's default 10,000), and its paired differences are what a plain loop gives; a setting
    given that differs from the sweep's makes the report compute."""
    root = sweep / "sweep"
    _no_pooled_compute(monkeypatch)
    assert main(["report", str(root), "--out", str(tmp_path / "r")]) == 0
    stored = pl.read_parquet(root / "combined" / "crossmodal" / "paired.parquet")
    page = (tmp_path / "r" / "report.md").read_text()
    row = stored.filter((pl.col("comparison") == "models") & (pl.col("metric") == "accuracy")).row(0, named=True)
    assert f"{row['estimate']:+.3f}".replace("+", "") in page.replace("+", "")
    monkeypatch.undo()
    calls = []
    real = report_inputs.compute
    monkeypatch.setattr(report_inputs, "compute", lambda i, s: calls.append((i, s)) or real(i, s))
    assert main(["report", str(root), "--out", str(tmp_path / "s"), "--seed", "1"]) == 0
    assert [(bool(i.runs), s.seed, s.resamples) for i, s in calls if i.runs] == [(True, 1, 10_000)]


def test_the_report_on_a_sweep_reads_only_the_prediction_columns_it_shows(sweep, monkeypatch):
    from omnieval.report import summary

    _no_pooled_compute(monkeypatch)
    reads, scans = [], []
    real, real_scan = pl.read_parquet, summary._scan

    def spy(source, *args, **kwargs):
        reads.append((str(source), kwargs.get("columns")))
        return real(source, *args, **kwargs)

    def scan_spy(source, columns):
        scans.append((str(source), list(columns)))
        return real_scan(source, columns)

    monkeypatch.setattr(pl, "read_parquet", spy)
    monkeypatch.setattr(summary, "_scan", scan_spy)
    build_report([str(sweep / "sweep")], resamples=RESAMPLES, permutations=RESAMPLES)
    predictions = [(source, columns) for source, columns in scans if source.endswith("predictions.parquet")]
    assert len(predictions) == 4  # one scan per run, summarised as it streams (report.summary)
    everything = pq.read_schema(sweep / "sweep" / "runs" / "crossmodal" / "sim-sight" / "zs"
                                / "predictions.parquet").names
    for _, columns in predictions:
        assert set(columns) <= set(summary.READ_COLUMNS)
        assert len(columns) < len(everything) / 2 and "reasoning" not in columns and "raw_text" not in columns
    # nothing else read a predictions file whole (read_predictions reads bytes, then parses them)
    assert all(columns is not None for source, columns in reads if "predictions" in source or "BytesIO" in source)


def test_the_pooled_result_is_reused_while_its_inputs_stand_and_computed_again_when_predictions_change(
        sweep, tmp_path, monkeypatch):
    from omnieval.core.run_outputs import RunOutputs
    from omnieval.sweep.state import write_combined
    from omnieval.sweep.status import RunOutcome

    copy = tmp_path / "sweep"
    shutil.copytree(sweep / "sweep", copy)
    for doc in copy.glob("runs/*/*/*/metrics/metrics.json"):  # each run's metrics name its copied predictions
        record = json.loads(doc.read_text())
        record["inputs"] = [str(doc.parent.parent / "predictions.parquet")]
        doc.write_text(json.dumps(record))
    settings = {"resamples": RESAMPLES, "seed": 0, "permutations": RESAMPLES, "cluster": None}
    outcomes = [RunOutcome(key=f"{m}/{p}", model=m, protocol="crossmodal", benchmark="crossmodal", prompt=p,
                           output=str(copy / "runs" / "crossmodal" / m / p), fingerprint="", status="done")
                for m in ("sim-sight", "sim-text") for p in ("zs", "cot")]
    root = RunOutputs(str(copy))
    assert write_combined(root, outcomes, settings) == ["crossmodal"]  # other paths: made again for the copy
    stored = copy / "combined" / "crossmodal" / "paired.parquet"
    before = stored.stat().st_mtime_ns
    assert write_combined(root, outcomes, settings) == []
    assert stored.stat().st_mtime_ns == before
    # a sweep run again with nothing to do leaves its own stored result as it was
    original = sweep / "sweep" / "combined" / "crossmodal" / "paired.parquet"
    first = original.read_bytes(), original.stat().st_mtime_ns
    assert main(["sweep", str(sweep / "sweep.yaml")]) == 0
    assert (original.read_bytes(), original.stat().st_mtime_ns) == first

    # one answer of sim-text (zs) turned right: its accuracy on that condition rises by one item's share
    path = copy / "runs" / "crossmodal" / "sim-text" / "zs" / "predictions.parquet"
    frame = pl.read_parquet(path)
    wrong = frame.with_row_index("_i").filter(pl.col("choice") != pl.col("target")).row(0, named=True)
    frame = frame.with_columns(choice=pl.when(pl.int_range(pl.len()) == wrong["_i"]).then(pl.col("target"))
                               .otherwise(pl.col("choice")))
    frame.write_parquet(path)
    calls = []
    real = report_inputs.compute
    monkeypatch.setattr(report_inputs, "compute", lambda i, s: calls.append(i) or real(i, s))
    stale = _protocol_input(copy)
    assert [bool(i.runs) for i in calls] == [True]  # the stored result no longer matches: computed
    assert write_combined(root, outcomes, settings) == ["crossmodal"]
    calls.clear()
    fresh = _protocol_input(copy)
    assert calls == []
    pick = (pl.col("comparison") == "models") & (pl.col("metric") == "accuracy") & (pl.col("prompt") == "zs") \
        & (pl.col("key") == wrong["condition"])
    old = pl.read_parquet(sweep / "sweep" / "combined" / "crossmodal" / "paired.parquet").filter(pick).row(
        0, named=True)
    new = fresh.paired.filter(pick).row(0, named=True)
    assert new["b_value"] == pytest.approx(old["b_value"] + 1 / new["n_items"], abs=1e-12)
    assert stale.paired.filter(pick).row(0, named=True)["b_value"] == new["b_value"]


def test_the_sweeps_pooled_result_above_the_threshold_is_made_by_ray_tasks_with_the_same_bytes(
        sweep, tmp_path, monkeypatch):
    """A sweep's pooled result of large runs: the same files (tables, tests, power, metrics.json, combined.json) as
    the sweep wrote computing in one process, made by Ray tasks from the run files read in place (a local Ray of
    the call's own), the pooled predictions never read whole in this process."""
    from omnieval.core.run_outputs import RunOutputs
    from omnieval.stats import compute as compute_module
    from omnieval.stats import distributed
    from omnieval.sweep.state import write_combined
    from omnieval.sweep.status import RunOutcome

    settings = {"resamples": RESAMPLES, "seed": 0, "permutations": RESAMPLES, "cluster": None}
    outcomes = [RunOutcome(key=f"{m}/{p}", model=m, protocol="crossmodal", benchmark="crossmodal", prompt=p,
                           output=str(sweep / "sweep" / "runs" / "crossmodal" / m / p), fingerprint="",
                           status="done") for m in ("sim-sight", "sim-text") for p in ("zs", "cot")]
    monkeypatch.setattr(distributed, "SCALE_THRESHOLD_ROWS", 1)

    def whole(_):
        raise AssertionError("the pooled input was read whole in the driver")
    monkeypatch.setattr(compute_module, "_read", whole)
    assert write_combined(RunOutputs(str(tmp_path)), outcomes, settings) == ["crossmodal"]
    want = sweep / "sweep" / "combined" / "crossmodal"
    names = sorted(p.name for p in want.iterdir())
    assert {"paired.parquet", "tests.parquet", "power.parquet", "metrics.json", "combined.json"} <= set(names)
    assert sorted(p.name for p in (tmp_path / "combined" / "crossmodal").iterdir()) == names
    for name in names:
        assert (tmp_path / "combined" / "crossmodal" / name).read_bytes() == (want / name).read_bytes(), name
