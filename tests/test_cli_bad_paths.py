"""Bad paths given to the statistics commands: one line naming the file and what to do, exit 2, and nothing
computed first (the computing can take minutes at paper scale; a bad ``--out`` must not waste it)."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

from omnieval.cli import main


@pytest.fixture(scope="module")
def run_folder(small_bench, tmp_path_factory):
    """A finished run's folder: a simulated model's predictions and a run record, no metrics yet."""
    from omnieval.config import parse_run_config
    from omnieval.engines.simulated import SimulatedEngine
    from omnieval.run.answers import PredictionRows, answer_requests
    from omnieval.run.plan import make_plan
    from omnieval.run.stages import call_rows

    folder = tmp_path_factory.mktemp("bad-paths") / "run"
    config = parse_run_config({"benchmark": str(small_bench), "output": str(folder),
                               "models": [{"name": "sim", "engine": "simulated", "options": {"seed": 1}}]})
    rows = list(answer_requests(make_plan(config).load_instances(), ["mcq"], ["zs"], set(), {}))
    folder.mkdir()
    pq.write_table(PredictionRows("sim", "simulated")(call_rows(SimulatedEngine("sim", seed=1), rows)),
                   folder / "predictions.parquet")
    (folder / "run.json").write_text(json.dumps({"config": config.model_dump(), "seed": 0, "started": 0.0}, indent=1))
    return folder


def _never(*args, **kwargs):
    raise AssertionError("computed before the paths were checked")


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_report_on_a_run_whose_run_json_is_cut_short_names_it_and_says_what_to_do(run_folder, tmp_path, capsys,
                                                                                   monkeypatch):
    run = shutil.copytree(run_folder, tmp_path / "run")
    text = (run / "run.json").read_text()
    (run / "run.json").write_text(text[: len(text) // 2])  # a copy cut short, a run stopped while writing it
    monkeypatch.setattr("omnieval.stats.paired.metrics_and_paired", _never)
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 2
    err = _one_line_error(capsys)
    assert str(run / "run.json") in err and "not valid JSON" in err and "omnieval run" in err
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize("command, compute", [
    ("metrics", "omnieval.stats.command.compute"),
    ("stats", "omnieval.stats.significance.stats_table"),
    ("power", "omnieval.stats.power.power_table"),
    ("report", "omnieval.report.build_report"),
])
@pytest.mark.parametrize("under", [True, False])
def test_an_out_that_is_a_file_or_lies_under_one_is_refused_before_any_computing(run_folder, tmp_path, capsys,
                                                                                 monkeypatch, command, compute,
                                                                                 under):
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me")
    out = a_file / "results" if under else a_file
    monkeypatch.setattr(compute, _never)
    source = run_folder if command == "report" else run_folder / "predictions.parquet"
    assert main([command, str(source), "--out", str(out)]) == 2
    err = _one_line_error(capsys)
    assert f"'{out}'" in err and "--out" in err
    assert (f"lies under {a_file}, which is a file" if under else "is a file") in err
    assert a_file.read_text() == "keep me"
