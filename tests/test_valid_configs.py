"""Valid configurations, end to end through the real CLI: every protocol with two simulated models x two prompt
styles x both modes (multiple-choice and open-ended, graded by a simulated judge), then every command the run
prints. Each must exit 0 without a traceback and show every (model, prompt style) on its own.

The synthetic benchmarks are as small as ``omnieval datasets synth`` makes them, built once for the module."""

from __future__ import annotations

import shlex
from pathlib import Path

import polars as pl
import pytest
import yaml

from omnieval.cli import main
from omnieval.core.commands import command_prefix

SYNTH_ARGS = {"dissonance": ["--anchors", "2", "--questions", "1"], "crossmodal": ["--entities", "4"],
              "spectrum": ["--items", "8"], "contrastive": ["--entities", "4"]}
PROTOCOL_OPTIONS = {"contrastive": {"permutations": 2}}  # 3 orders per item instead of all 2-24
MODELS = ["sim-a", "sim-b"]
PROMPTS = ["cot", "zs"]
# Fewer resamples than the defaults, appended to the printed commands: the same code paths, a fraction of the time.
FEWER = {"metrics": ["--resamples", "300", "--permutations", "300"], "stats": ["--permutations", "300"],
         "report": ["--resamples", "300", "--permutations", "300"], "power": []}


@pytest.fixture(scope="module")
def benchmarks(tmp_path_factory):
    base = tmp_path_factory.mktemp("valid-configs-benchmarks")
    for protocol, args in SYNTH_ARGS.items():
        assert main(["datasets", "synth", "--protocol", protocol, "--out", str(base / protocol), *args]) == 0
    return base


def _config(protocol: str, benchmark: Path, output: Path) -> dict:
    return {"protocol": protocol, "benchmark": str(benchmark), "output": str(output), "prompts": ["zs", "cot"],
            "modes": ["mcq", "open"], "judges": [{"name": "judge", "engine": "simulated", "options": {"seed": 3}}],
            "models": [{"name": name, "engine": "simulated", "options": {"seed": seed}}
                       for seed, name in enumerate(MODELS, 1)],
            "protocol_options": PROTOCOL_OPTIONS.get(protocol, {})}


def _printed_commands(out: str) -> list[list[str]]:
    """The follow-up commands under ``next:``, as argv for ``main`` (the printed prefix is this very omnieval)."""
    prefix = command_prefix()
    lines = [line.strip() for line in out.split("\nnext:", 1)[1].splitlines() if line.strip()]
    assert lines and all(line.startswith(prefix + " ") for line in lines), (prefix, lines)
    return [shlex.split(line[len(prefix):]) for line in lines]


@pytest.mark.slow
@pytest.mark.parametrize("protocol", list(SYNTH_ARGS))
def test_two_models_two_prompts_both_modes_through_every_printed_command(protocol, benchmarks, ray_session,
                                                                          tmp_path, capsys):
    from omnieval.stats.headlines import headline_tables

    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(_config(protocol, benchmarks / protocol, tmp_path / "out")))
    assert main(["run", str(config)]) == 0
    ran = capsys.readouterr()
    assert "Traceback" not in ran.out + ran.err
    commands = _printed_commands(ran.out)
    assert [argv[0] for argv in commands] == ["metrics", "stats", "report"]
    printed = {}
    for argv in commands:
        assert main([*argv, *FEWER[argv[0]]]) == 0, argv
        got = capsys.readouterr()
        assert "Traceback" not in got.out + got.err, (argv, got.err[-2000:])
        printed[argv[0]] = got.out

    out = tmp_path / "out"
    for name in ("metrics/metrics.csv", "metrics/paired.csv", "stats/tests.csv", "report/report.html",
                 "report/report.md"):
        assert (out / name).is_file(), name
    metrics = pl.read_parquet(out / "metrics" / "metrics.parquet")
    assert set(metrics["model"]) >= set(MODELS) and set(metrics["prompt"]) == set(PROMPTS)
    tables = headline_tables(metrics)
    assert any("Open-ended" in title for title, _ in tables)  # the open mode was graded and measured
    for title, frame in tables:
        if "prompt" not in frame.columns:
            continue
        pairs = ({(m, p) for m, p in frame.select("model", "prompt").unique().iter_rows()} if "model" in frame.columns
                 else {(m, p) for m in MODELS if m in frame.columns for p in frame["prompt"].unique()})
        assert pairs >= {(m, p) for m in MODELS for p in PROMPTS}, title
    # each headline cell is the value of its own metric row (model, prompt style, split, metric and key)
    checked = 0
    for title, frame in tables:
        if not {"metric", "prompt", *MODELS} <= set(frame.columns):
            continue
        for row in frame.iter_rows(named=True):
            metric, _, key = row["metric"].partition(" ")
            if protocol == "spectrum" and "Open-ended" not in title:  # labelled by condition, or chance
                metric, key = ("chance", "") if row["metric"] == "chance" else ("accuracy", row["metric"])
            for model in MODELS:
                want = metrics.filter((pl.col("model") == model) & (pl.col("prompt") == row["prompt"])
                                      & (pl.col("split") == row["split"]) & (pl.col("metric") == metric)
                                      & (pl.col("key") == key))
                assert len(want) == 1, (title, row)
                assert abs(float(row[model].split(" ")[0]) - want["value"][0]) <= 0.005 + 1e-9, (title, row)
                checked += 1
    assert checked >= 4 * len(MODELS)
    assert all(f"┆ {p} " in printed["metrics"] for p in PROMPTS)
    assert all(f" {m} " in printed["metrics"] for m in MODELS)

    report = (out / "report" / "report.md").read_text()
    runs = report.split("**Runs in this report**", 1)[1].split("\n\n", 2)[1].splitlines()
    header = [c.strip() for c in runs[0].strip("|").split("|")]
    [row] = [[c.strip() for c in line.strip("|").split("|")] for line in runs[2:] if line.startswith("|")]
    assert set(MODELS) <= set(row[header.index("models")].split(", "))  # spectrum adds its ensemble
    assert row[header.index("prompts")] == ", ".join(PROMPTS)
    assert "Open-ended answers and judges" in report
