"""A newcomer's first commands: one-line errors, help that explains, printed commands that run as printed, config
paths that mean the same from any folder, and a limited run that keeps every split."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from omnieval.cli import main


@pytest.mark.parametrize("argv, message", [
    (["models", "tiny", "--arch", "llama", "--out", "x"], "invalid choice: 'llama' (choose from"),
    (["datasets", "synth", "--questions", "40", "--out", "x"], "argument --questions: must be in 1..12"),
    (["datasets", "synth", "--protocol", "crossmodal", "--entities", "2", "--out", "x"],
     "argument --entities: must be in 4..30"),
    (["datasets", "synth", "--anchors", "31", "--out", "x"], "argument --anchors: must be in 2..30"),
    (["datasets", "synth", "--protocol", "spectrum", "--items", "4", "--out", "x"], "argument --items: must be >= 8"),
    (["metrics", "p.parquet", "--out", "m", "--resamples", "0"], "argument --resamples: must be >= 1"),
])
def test_bad_arguments_give_one_line_and_no_traceback(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())  # nothing was written


def test_version_and_help_explain(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"omnieval {md.version('omnieval')}"
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "``" not in top and "modality reliance" in top
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "README" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["metrics", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "bootstrap resamples (clustered by each protocol's unit, --cluster) (default: 10000)" in text
    assert "(default: None)" not in text and "(default: t)" in text


def test_printed_follow_up_commands_run_as_printed(tmp_path):
    """A venv's ``omnieval`` that is not on PATH is printed by its path, and that path runs."""
    from omnieval.core.commands import command_prefix

    script = Path(sys.executable).with_name("omnieval")
    code = ("import sys; sys.argv = [sys.argv[1]]; from omnieval.core.commands import command_prefix; "
            "print(command_prefix())")
    env = {k: v for k, v in os.environ.items() if k != "PATH"} | {"PATH": "/usr/bin:/bin"}
    printed = subprocess.run([sys.executable, "-c", code, str(script)], capture_output=True, text=True, env=env,
                             cwd=tmp_path, check=True).stdout.strip()
    assert printed != "omnieval"
    ran = subprocess.run(f"{printed} --version", shell=True, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert ran.returncode == 0 and ran.stdout.startswith("omnieval "), (printed, ran.stderr)
    assert command_prefix()  # whatever runs the tests has a usable prefix too


def test_model_folders_are_relative_to_the_config_file_like_the_benchmark(small_bench, tmp_path, monkeypatch):
    from omnieval.config import load_run_config

    conf_dir = tmp_path / "configs"
    (conf_dir / "models" / "tiny").mkdir(parents=True)
    (conf_dir / "models" / "tiny" / "config.json").write_text("{}")
    (conf_dir / "run.yaml").write_text(yaml.safe_dump({
        "benchmark": os.path.relpath(small_bench, conf_dir), "output": "out",
        "models": [{"name": "h", "engine": "hf", "options": {"path": "models/tiny"}}]}))
    monkeypatch.chdir(tmp_path)  # not the config's folder
    config = load_run_config(conf_dir / "run.yaml")
    assert config.models[0].options["path"] == str(conf_dir / "models" / "tiny")
    assert config.benchmark == str(Path(small_bench).resolve()) and config.output == str(conf_dir / "out")


def test_limit_items_draws_from_every_split_and_says_so(small_bench, tmp_path, capsys):
    from omnieval.config import parse_run_config
    from omnieval.run.plan import make_plan

    splits: dict[str, int] = {}
    for line in (Path(small_bench) / "items.jsonl").read_text().splitlines():
        split = json.loads(line)["split"]
        splits[split] = splits.get(split, 0) + 1
    assert len(splits) == 2 and sum(splits.values()) > 2
    config = parse_run_config({"benchmark": str(small_bench), "output": str(tmp_path / "o"), "limit_items": 2,
                               "models": [{"name": "s", "engine": "simulated"}]})
    plan = make_plan(config)
    instances = plan.load_instances()
    kept = {i.split for i in instances}
    assert kept == set(splits) and len({i.item_id for i in instances}) == 2
    err = capsys.readouterr().err
    assert f"2 of {sum(splits.values())} items" in err
    assert all(f"{name} 1/{n}" in err for name, n in splits.items())
    again = make_plan(config)  # seeded: the same items every time
    assert [i.instance_id for i in again.load_instances()] == [i.instance_id for i in instances]


def test_the_package_builds_without_deprecation_warnings(tmp_path):
    """``pip install`` of the project printed four setuptools deprecation warnings (the license table)."""
    root = Path(__file__).resolve().parents[1]
    src = tmp_path / "src"
    for name in ("pyproject.toml", "README.md"):
        src.mkdir(exist_ok=True)
        (src / name).write_bytes((root / name).read_bytes())
    for package in ("omnieval", "kernels"):
        shutil.copytree(root / package, src / package, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp_path / "wheel"), str(src)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert list((tmp_path / "wheel").glob("omnieval-*.whl"))
    assert "deprecat" not in (built.stdout + built.stderr).lower()


def test_run_summary_explains_the_dissonance_condition_names():
    import pyarrow as pa

    from omnieval.run.pipeline import accuracy_by_condition

    table = pa.table({"model": ["m"] * 2, "prompt": ["zs"] * 2, "condition": ["C000", "C101"],
                      "target": ["A", "B"], "choice": ["A", "A"]})
    text = accuracy_by_condition(table)
    assert "C<video><audio><text>: 1 = that modality shows another anchor" in text
    contrastive = accuracy_by_condition(pa.table({"model": ["m"], "prompt": ["zs"], "condition": ["original"],
                                                  "target": ["A"], "choice": ["A"]}))
    assert "C<video>" not in contrastive


def test_metrics_stats_report_in_readme_order_show_the_run_once_with_the_users_own_tables(small_bench, tmp_path,
                                                                                         monkeypatch, capsys):
    """The README's sequence, run from the folder above the run with relative paths: the report must pair the
    user's metrics and tests with the run (not recompute them) and list the run once."""
    from omnieval.config import parse_run_config
    from omnieval.engines.simulated import SimulatedEngine
    from omnieval.run.answers import PredictionRows, answer_requests
    from omnieval.run.plan import make_plan
    from omnieval.run.stages import call_rows

    config = parse_run_config({"benchmark": str(small_bench), "output": str(tmp_path / "run"),
                               "models": [{"name": "sim", "engine": "simulated", "options": {"seed": 1}}]})
    plan = make_plan(config)
    rows = list(answer_requests(plan.load_instances(), ["mcq"], ["zs"], set(), {}))
    batch = call_rows(SimulatedEngine("sim", seed=1), rows)
    table = PredictionRows("sim", "simulated")(batch)
    (tmp_path / "run").mkdir()
    import pyarrow.parquet as pq

    pq.write_table(table, tmp_path / "run" / "predictions.parquet")
    monkeypatch.chdir(tmp_path)
    assert main(["metrics", "run/predictions.parquet", "--out", "run/metrics", "--resamples", "300"]) == 0
    assert main(["stats", "run/predictions.parquet", "--out", "run/stats", "--permutations", "300"]) == 0
    capsys.readouterr()
    assert main(["report", "run", "--out", "report", "--resamples", "999", "--permutations", "999"]) == 0
    err = capsys.readouterr().err
    assert "left out" not in err
    markdown = (tmp_path / "report" / "report.md").read_text()
    runs = [line for line in markdown.splitlines() if line.startswith("| run ")]
    table = markdown.split("**Runs in this report**", 1)[1].split("\n\n", 2)[1].splitlines()
    body = [line for line in table[2:] if line.startswith("|")]
    assert len(body) == 1 and body[0].startswith("| run | dissonance | sim |"), table
    cells = [c.strip() for c in body[0].strip("|").split("|")]
    header = [c.strip() for c in table[0].strip("|").split("|")]
    assert cells[header.index("metrics")] == "metrics.parquet" and cells[header.index("resamples")] == "300"
    assert "//" not in body[0] and runs


def _readme_first_run() -> tuple[list[str], dict[str, str]]:
    """The commands and the YAML files of the README's 'Your first run, step by step', as written there."""
    import re

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme.split("## Your first run, step by step", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.S)
    commands = [line.split("#", 1)[0].strip() for lang, body in blocks if lang == "bash"
                for line in body.splitlines() if line.strip()]
    names = re.findall(r"`(\w+\.yaml)`[^\n]*:\n\n```yaml", section)
    files = dict(zip(names, [body for lang, body in blocks if lang == "yaml"], strict=True))
    return commands, files


@pytest.mark.slow
def test_the_readme_first_run_works_as_written_in_a_fresh_folder(ray_session, tmp_path, monkeypatch, capsys):
    """A newcomer's walk: the README's commands in order, exit codes, each printed follow-up command run as
    printed, and reports that list each run once with the user's own metrics and tests."""
    import re
    import shlex

    commands, files = _readme_first_run()
    assert [c.split()[1] for c in commands] == ["datasets", "run", "metrics", "stats", "report", "sweep", "report"]
    assert set(files) == {"run.yaml", "sweep.yaml"}
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    printed = []
    for command in commands:
        argv = shlex.split(command)
        assert argv[0] == "omnieval"
        assert main(argv[1:]) == 0, command
        out = capsys.readouterr()
        assert "Traceback" not in out.err and "left out" not in out.err, (command, out.err[-2000:])
        printed.append(out.out)
    follow_ups = [line.strip() for line in printed[1].split("next:", 1)[1].splitlines() if line.strip()]
    assert len(follow_ups) == 3
    env = {k: v for k, v in os.environ.items() if k != "PATH"} | {"PATH": "/usr/bin:/bin"}
    for command in follow_ups:  # exactly as printed, by a shell that has no omnieval on its PATH
        ran = subprocess.run(command, shell=True, capture_output=True, text=True, env=env, cwd=tmp_path,
                             timeout=600)
        assert ran.returncode == 0, (command, ran.stderr[-2000:])
    run_report = (tmp_path / "report" / "report.md").read_text()
    table = run_report.split("**Runs in this report**", 1)[1].split("\n\n", 2)[1].splitlines()
    assert len([line for line in table[2:] if line.startswith("|")]) == 1  # the run, once
    header = [c.strip() for c in table[0].strip("|").split("|")]
    cells = [c.strip() for c in table[2].strip("|").split("|")]
    assert cells[header.index("metrics")] == "metrics.parquet"  # the user's, not recomputed
    assert "Significance tests" in run_report
    sweep_report = (tmp_path / "sweep-report" / "report.md").read_text()
    rows = [line for line in sweep_report.split("**Runs in this report**", 1)[1].split("\n\n", 2)[1].splitlines()
            if line.startswith("|")][2:]
    assert len(rows) == 4  # 2 models x 2 prompt styles, each once
    assert all(re.search(r"\| 1000 \|", row) for row in rows)  # the sweep's own metrics (resamples: 1000)


def test_benches_remove_their_temporary_folders_and_keep_a_given_workdir(tmp_path, monkeypatch):
    import tempfile

    from omnieval.dev.bench_pipeline import bench_folder

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with bench_folder(None, "omnieval-bench-") as (folder, runs):
        (runs / "out").mkdir()
        assert folder.exists() and runs.parent == folder
    assert list((tmp_path / "tmp").iterdir()) == []  # nothing left behind
    work = tmp_path / "work"
    with bench_folder(str(work), "omnieval-bench-") as (folder, runs):
        (folder / "benchmark").mkdir()
    assert [p.name for p in work.iterdir()] == ["benchmark"]  # the benchmark is kept for reuse, the runs are not


def test_headline_tables_never_wrap_a_header():
    import polars as pl

    from omnieval.stats.headlines import headline_tables, render
    from omnieval.stats.key_parts import key_columns

    rows = [("contrastive", f"a-model-with-a-rather-long-name-{i}", "zs", "all", "accuracy", key, 0.5, 0.4, 0.6, 10,
             10, n) for i in range(6) for key, n in (("all", ""), ("n=2", "2"), ("n=3", "3"))]
    table = pl.DataFrame(rows, orient="row", schema=["protocol", "model", "prompt", "split", "metric", "key", "value",
                                                     "ci_low", "ci_high", "n", "n_items", "n_inputs"])
    table = table.with_columns(pl.lit("").alias(p) for p in key_columns() if p != "n_inputs")
    text = render(headline_tables(table))
    lines = [line for line in text.splitlines() if line.startswith(("┌", "│", "╞", "└"))]
    assert len({len(line) for line in lines}) == 1  # every row of the table is one line: nothing wrapped
    assert all(f"a-model-with-a-rather-long-name-{i}" in text for i in range(6))
