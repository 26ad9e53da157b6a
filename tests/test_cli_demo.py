"""The demo and `omnieval run` through the command line, end to end on a local Ray."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from omnieval.cli import main
from omnieval.protocols import dissonance

pytestmark = pytest.mark.slow


def test_demo_without_hf_runs_end_to_end_and_resumes(ray_session, tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path / "demo"), "--no-hf"]) == 0
    out = capsys.readouterr().out
    table = pq.read_table(tmp_path / "demo" / "run" / "predictions.parquet")
    # sim-balanced and its audio-described copy in both modes, sim-text-only in multiple choice only
    assert table.num_rows == 5 * 128
    rows = table.select(["model", "mode", "cascade", "verdicts"]).to_pylist()
    assert {(r["model"], r["mode"]) for r in rows} == {("sim-balanced", "mcq"), ("sim-balanced", "open"),
                                                       ("sim-text-only", "mcq"), ("sim-balanced+audio-desc", "mcq"),
                                                       ("sim-balanced+audio-desc", "open")}
    assert all((r["cascade"] == "sim-describer:audio") == (r["model"] == "sim-balanced+audio-desc") for r in rows)
    assert all(sorted(v["judge"] for v in r["verdicts"]) == ["judge-careful", "judge-noisy"]
               for r in rows if r["mode"] == "open")
    assert "Open-ended answers graded by the judges" in out
    assert all(c in out for c in dissonance.CONDITIONS) and "sim-text-only" in out
    assert str(tmp_path / "demo" / "run" / "predictions.parquet") in out
    assert "Shapley modality attribution" in out and (tmp_path / "demo" / "metrics" / "metrics.csv").exists()
    # the crossmodal part: 24 items x 6 directions x 2 simulated models, with its headline table
    xm = pq.read_table(tmp_path / "demo" / "crossmodal" / "run" / "predictions.parquet")
    assert xm.num_rows == 24 * 6 * 2 and set(xm["protocol"].to_pylist()) == {"crossmodal"}
    assert "Modality disparity, direction imbalance and consistency" in out and "disparity T_vs_V" in out
    assert (tmp_path / "demo" / "crossmodal" / "metrics" / "metrics.csv").exists()
    # a second run finds everything done and scores nothing
    assert main(["demo", "--out", str(tmp_path / "demo"), "--no-hf"]) == 0
    again = capsys.readouterr().out
    assert "rows scored now: 0  resumed (skipped): 640" in again
    assert "rows scored now: 0  resumed (skipped): 288" in again
