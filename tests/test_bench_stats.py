"""The stats bench's synthetic inputs are valid predictions; the quick bench runs end to end (slow)."""

from __future__ import annotations

import math
import re

import polars as pl
import pytest

from omnieval.core.schema import REQUIRED_COLUMNS
from omnieval.dev.bench_stats import bench_stats, synthetic_crossmodal, synthetic_dissonance
from omnieval.stats.metrics import metrics_table


def test_synthetic_predictions_have_the_schema_and_give_every_metric():
    dis = synthetic_dissonance(n_models=1, prompts=("zs",), splits=("s",), n_items=20)
    xm = synthetic_crossmodal(n_models=1, n_items=50)
    for frame in (dis, xm):
        assert set(REQUIRED_COLUMNS) <= set(frame.columns)
    assert len(dis) == 20 * 8 and dis["choice"].null_count() < len(dis)
    metrics = set(metrics_table(dis, resamples=20)["metric"])
    assert metrics == {"accuracy", "accuracy_k", "abstention_k", "human_abstention_k", "ace", "confidence_k", "ece",
                       "rc_auc", "shapley", "reliance", "anchor_accuracy", "invalid_rate", "error_rate"}
    xm_table = metrics_table(xm, resamples=20)
    assert set(xm_table.filter(pl.col("metric") == "disparity")["key"]) == {"T_vs_V", "T_vs_A", "V_vs_A"}


CELL = {"seconds": r"([\d.]+) s", "ms": r"([\d.]+) ms", "baseline": r"scipy (\d+) ms", "ratio": r"([\d,]+\.\d)x",
        "in_process": r"in-process ([\d.]+) s", "verdict": r"(met|MISSED) \((.+)\)"}


def _row(line: str) -> dict:
    """One table row as ``{"what": ..., column: matched value}``: columns are two or more spaces apart and each cell
    is recognised by its format, so an empty column is simply absent; an unrecognised cell fails the test."""
    what, *cells = re.split(r" {2,}", line.strip())
    row: dict = {"what": what}
    for cell in cells:
        kind = next((k for k, pattern in CELL.items() if re.fullmatch(pattern, cell)), None)
        assert kind is not None and kind not in row, (cell, line)
        row[kind] = re.fullmatch(CELL[kind], cell).groups()
    return row


def _ratio_bounds(num: float, num_step: float, den: float, den_step: float) -> tuple[float, float]:
    """The range of ``num / den`` for values printed as ``num`` and ``den`` rounded to the given steps."""
    lo = (num - num_step / 2) / (den + den_step / 2)
    hi = (num + num_step / 2) / (den - den_step / 2) if den > den_step / 2 else math.inf
    return lo, hi


def test_scale_bench_writes_the_rows_it_names_as_valid_per_run_files(tmp_path):
    """``bench stats --scale``'s input: per-run Parquet files of about the asked rows, half per protocol, one model
    per file, that the reader accepts (instance ids unique per model and prompt)."""
    from omnieval.dev.bench_scale import write_runs
    from omnieval.stats.read import read_predictions

    paths = write_runs(100_000, tmp_path)  # whole items per model, prompt and split: within 2% from here up
    frame = read_predictions(paths)
    counts = dict(frame.group_by("protocol").len().iter_rows())
    assert abs(sum(counts.values()) - 100_000) <= 100_000 * 0.02 and set(counts) == {"dissonance", "crossmodal"}
    assert abs(counts["dissonance"] - counts["crossmodal"]) <= 100_000 * 0.02
    groups = frame.group_by("protocol", "split", "prompt").len()  # six Ray groups per protocol, of equal size
    assert groups.height == 12 and groups["len"].max() - groups["len"].min() <= counts["crossmodal"] // 6 // 50
    assert all(pl.read_parquet(p)["model"].n_unique() == 1 for p in paths) and len(paths) == 10 + 14


def test_scale_bench_leaves_the_single_process_out_above_its_size_and_judges_the_ray_runs():
    """Above ``SINGLE_MAX_ROWS`` the single process is not run (it would need ~1.1 KB a row); the targets are
    judged on the Ray runs' figures: 100 s on 1 node and 60 s on 2 is 100 / 60 / 2 = 0.83 x linear, and the peak is
    the largest of the drivers and workers."""
    from omnieval.dev.bench_scale import SINGLE_MAX_ROWS, _rows

    figures = {"ray1": {"seconds": 100.0, "driver_mb": 400.0, "worker_mb": 3000.0},
               "ray2": {"seconds": 60.0, "driver_mb": 410.0, "worker_mb": 4200.0}}
    single, one, two = _rows(SINGLE_MAX_ROWS + 1, figures, True)
    assert single[1:4] == ("single process", "not run", f"(> {SINGLE_MAX_ROWS:,} rows)")
    assert one[2:5] == ("100.0 s", "400 MB", "3,000 MB")
    assert two[-1] == "scaling 0.83 x linear met; peak 4,200 MB MISSED; tables identical"


@pytest.mark.slow
def test_quick_bench_prints_a_coherent_table_and_says_which_targets_it_met(capsys):
    """No timing is asserted: each printed number is checked against the others printed beside it."""
    assert bench_stats(quick=True) == 0
    check_quick_table(capsys.readouterr().out)


def check_quick_table(out: str) -> None:
    lines = out.splitlines()
    assert re.fullmatch(r"omnieval bench stats \(\d+ cores, numba threads \d+\)", lines[0])
    assert re.split(r" {2,}", lines[1].strip()) == ["measurement", "ours", "baseline", "ratio", "target"]
    rows = [_row(line) for line in lines[2:-1]]
    assert [r["what"][:3] for r in rows] == ["(a)"] * 4 + ["(b)"] + ["(c)"] * 4 + ["(d)"] * 2 + ["(e)"]
    # the quick sizes are those the rows describe
    assert re.match(r"\(a\) dissonance 2 models x 2 prompts x 2 splits x 60 items x 8 cond\.: ([\d,]+) metrics, "
                    r"([\d,]+) CIs, 1,000 resamples$", rows[0]["what"])
    metrics, cis = (int(x.replace(",", "")) for x in re.search(r"([\d,]+) metrics, ([\d,]+) CIs",
                                                                rows[0]["what"]).groups())
    assert 0 < cis <= metrics
    assert rows[3]["what"].startswith("(a) the same study as a user runs it: `omnieval metrics` in a fresh process")
    # the whole command beside the in-process figure of row 2, measured in the same run: ratio = whole / in-process
    assert rows[3]["in_process"] == rows[1]["seconds"]
    lo, hi = _ratio_bounds(float(rows[3]["seconds"][0]), 0.01, float(rows[3]["in_process"][0]), 0.01)
    assert lo - 0.05 <= float(rows[3]["ratio"][0].replace(",", "")) <= hi + 0.05
    assert rows[4]["what"].startswith("(b) crossmodal 2 models x 2,000 items x 6 directions")
    met = missed = 0
    for row in rows:
        seconds = float(row["seconds"][0]) if "seconds" in row else float(row["ms"][0]) / 1e3
        assert seconds > 0, row  # every time is printed to 0.01 s or 0.01 ms
        if row["what"].startswith("(c)"):  # per-CI rows: ratio = scipy's time / ours, within display rounding
            assert row.keys() == {"what", "ms", "baseline", "ratio", "verdict"}, row
            ratio = float(row["ratio"][0].replace(",", ""))
            lo, hi = _ratio_bounds(float(row["baseline"][0]), 1.0, float(row["ms"][0]), 0.01)
            assert lo - 0.05 <= ratio <= hi + 0.05, row
            ok, edge = ratio >= 30, abs(ratio - 30) <= 0.05
            assert row["verdict"][1] == ">= 30x scipy"
        elif "verdict" in row:  # (a) and (b): a time against a limit in seconds
            goal = float(re.fullmatch(r"< (\d+) s", row["verdict"][1]).group(1))
            ok, edge = seconds < goal, abs(seconds - goal) <= 0.005
        if "verdict" in row:
            assert edge or ok == (row["verdict"][0] == "met"), row
            met, missed = met + (row["verdict"][0] == "met"), missed + (row["verdict"][0] == "MISSED")
    # (d): the cold process compiles, the second reads the cache; the ratio is cold / warm within display rounding
    compiled = [r for r in rows if r["what"].startswith("(d)")]
    cold, warm = (float(r["seconds"][0]) for r in compiled)
    lo, hi = _ratio_bounds(cold, 0.01, warm, 0.01)
    assert "ratio" not in compiled[0] and lo - 0.05 <= float(compiled[1]["ratio"][0].replace(",", "")) <= hi + 0.05
    assert rows[-1]["what"] == "(e) derangement of 1,000,000 items in 1,000 groups (warm, best of 3)"
    assert [r["what"][:3] for r in rows if "verdict" in r] == ["(a)", "(a)", "(b)"] + ["(c)"] * 4
    assert lines[-1].startswith(f"targets: {met} met, {missed} missed") and met + missed == 7
