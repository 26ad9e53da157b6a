"""Sweeps (``omnieval.sweep``): validation before any Ray work, expansion, fingerprints, complete-run skipping and
redoing exactly what was deleted or changed, on a local Ray with simulated models."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml

from omnieval.core.schema import InputError
from omnieval.sweep import SweepRunner, expand_runs, load_sweep_config, parse_sweep_config
from omnieval.sweep.expand import fingerprint, plan_benchmarks

ROOT = Path(__file__).resolve().parents[1]


def _n_instances(bench) -> int:
    return sum(1 for _ in open(Path(bench) / "items.jsonl")) * 8


def _sweep_data(bench, output, **kw) -> dict:
    return {"name": "t", "output": str(output), "prompts": ["zs", "cot"],
            "protocols": [{"protocol": "dissonance", "benchmark": str(bench)}],
            "models": [{"name": "sim-a", "engine": "simulated", "options": {"seed": 1}},
                       {"name": "sim-b", "engine": "simulated", "replicas": 2,
                        "options": {"seed": 2, "reliance": {"text": 0.9}}}],
            "decode": {"num_frames": 4, "max_side": 96}, "metrics": {"resamples": 50},
            "progress_interval_s": 0.5, **kw}


class Recorder:
    """Wraps the runner's model work: records each run it evaluates, with the rows it scored (or forbids any Ray
    work); ``passes`` counts the calls (one per model with runs to do: one model load each)."""

    def __init__(self, runner: SweepRunner, allow: bool = True):
        self.calls: list[tuple[str, str, int]] = []
        self.passes = 0
        inner = runner.evaluate_runs

        def evaluate_runs(configs, address=None, progress=True):
            assert allow, "no model work expected"
            self.passes += 1
            results = inner(configs, address, progress=progress)
            self.calls += [(c.models[0].name, c.prompts[0], r.n_rows) for c, r in zip(configs, results, strict=True)
                           if not isinstance(r, Exception)]
            return results

        def ensure_ray(config, address=None):
            assert allow, "no Ray expected"

        runner.evaluate_runs = evaluate_runs
        if not allow:
            runner.ensure_ray = ensure_ray


def _sweep(data, allow=True, logs=None):
    runner = SweepRunner(parse_sweep_config(data), log=(logs.append if logs is not None else lambda m: None))
    recorder = Recorder(runner, allow=allow)
    return runner.run(), recorder


# ---------------------------------------------------------------------------------------------------------------
# Validation: seconds, the field named, no Ray
# ---------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, field, message", [
    ({"protocols": [{"protocol": "telepathy", "benchmark": "b"}]}, "protocols[0].protocol", "unknown protocol"),
    ({"models": [{"name": "m", "engine": "hf", "options": {"dtype": "float32"}}]}, "models[0].path",
     "needs the model folder"),
    ({"models": [{"name": "a", "engine": "simulated"}, {"name": "m", "engine": "vllm"}]}, "models[1].path",
     "needs the model folder"),
    ({"models": [{"name": "m", "engine": "hf", "path": "no/such/model"}]}, "models[0].path", "no config.json"),
    ({"models": [{"name": "m", "engine": "simulated", "replicas": -2}]}, "models[0].replicas",
     "greater than or equal to 1"),
    ({"models": [{"name": "m", "engine": "simulated", "tensor_parallel_size": 2}]}, "models[0]",
     "needs engine 'vllm'"),
    ({"prompts": ["zs", "few-shot"]}, "prompts", "unknown prompt style"),
    ({"protocols": [{"protocol": "dissonance", "benchmark": "b"}, {"protocol": "dissonance", "benchmark": "c"}]},
     None, "must be unique"),
])
def test_invalid_sweep_file_fails_in_seconds_naming_the_field(tmp_path, change, field, message):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({**_sweep_data(tmp_path / "b", tmp_path / "out"), **change}))
    start = time.perf_counter()
    with pytest.raises(InputError) as err:
        load_sweep_config(path)
    assert time.perf_counter() - start < 5
    assert err.value.field == field and err.value.file == str(path)
    assert message in str(err.value)
    assert not (tmp_path / "out").exists()


def test_benchmark_that_is_another_protocol_fails_before_ray(bench, tmp_path):
    data = _sweep_data(bench, tmp_path / "out")
    data["protocols"] = [{"protocol": "dissonance", "benchmark": str(bench)},
                         {"protocol": "crossmodal", "benchmark": str(bench), "name": "xm"}]
    with pytest.raises(InputError) as err:
        _sweep(data, allow=False)
    assert err.value.field == "protocols[1].protocol"
    assert "'dissonance' benchmark" in str(err.value)
    data["protocols"] = [{"protocol": "dissonance", "benchmark": str(bench), "options": {"bogus": 1}}]
    with pytest.raises(InputError) as err:
        _sweep(data, allow=False)
    assert err.value.field == "protocols[0].options.bogus"
    assert not (tmp_path / "out" / "runs").exists()


def test_invalid_sweep_file_through_the_job_entry_exits_2(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(_sweep_data(tmp_path / "b", tmp_path / "out") | {
        "models": [{"name": "m", "engine": "vllm", "replicas": 0, "path": str(tmp_path)}]}))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(ROOT / "jobs" / "sweep.py"), str(path)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "RAY_ADDRESS": ""})
    assert done.returncode == 2, done.stderr[-2000:]
    assert "models[0].replicas" in done.stderr and "greater than or equal to 1" in done.stderr
    assert time.perf_counter() - start < 60


# ---------------------------------------------------------------------------------------------------------------
# Expansion and fingerprints (no Ray)
# ---------------------------------------------------------------------------------------------------------------

def test_runs_are_model_major_and_pass_protocol_benchmark_and_options_through(bench, tmp_path):
    data = _sweep_data(bench, "out", protocols=[
        {"protocol": "dissonance", "benchmark": str(bench), "options": {}, "limit_items": 3},
        {"protocol": "dissonance", "benchmark": str(bench), "name": "dis-2"}])
    sweep = parse_sweep_config(data, base_dir=tmp_path)
    specs = expand_runs(sweep)
    assert [(s.model.name, s.entry.label, s.prompt) for s in specs] == [
        (m, p, q) for m in ("sim-a", "sim-b") for p in ("dissonance", "dis-2") for q in ("zs", "cot")]
    first = specs[0].config
    assert first.protocol == "dissonance" and first.benchmark == str(bench) and first.protocol_options == {}
    assert first.limit_items == 3 and first.prompts == ["zs"] and [m.name for m in first.models] == ["sim-a"]
    assert first.output == str(tmp_path / "out" / "runs" / "dissonance" / "sim-a" / "zs")
    assert len({s.uri for s in specs}) == len(specs)


def test_fingerprint_follows_what_decides_predictions(bench, tmp_path):
    def fp(**kw):
        data = _sweep_data(bench, tmp_path / "out")
        data["models"][0].update(kw.pop("model", {}))
        sweep = parse_sweep_config({**data, **kw})
        plans = plan_benchmarks(sweep)
        spec = expand_runs(sweep)[0]
        return fingerprint(spec.config, plans[spec.entry.label])

    base = fp()
    assert base == fp(output=str(tmp_path / "elsewhere"))  # where the outputs go
    assert base == fp(model={"replicas": 3, "batch_size": 5, "num_cpus": 2})  # how many workers make them
    assert base == fp(decode={"num_frames": 4, "max_side": 96, "media_check": "exists"})
    assert base == fp(decode={"num_frames": 4, "max_side": 96, "store": str(tmp_path / "shared-media")})
    assert base != fp(seed=1)
    assert base != fp(model={"options": {"seed": 9}})
    assert base != fp(decode={"num_frames": 2, "max_side": 96})
    edited = tmp_path / "edited"
    shutil.copytree(bench, edited)
    lines = (edited / "items.jsonl").read_text().splitlines()
    item = json.loads(lines[0])
    item["question"] += " (reworded)"
    (edited / "items.jsonl").write_text("\n".join([json.dumps(item), *lines[1:]]) + "\n")
    data = _sweep_data(edited, tmp_path / "out")
    sweep = parse_sweep_config(data)
    spec = expand_runs(sweep)[0]
    assert base != fingerprint(spec.config, plan_benchmarks(sweep)[spec.entry.label])


# ---------------------------------------------------------------------------------------------------------------
# Running, resubmitting, redoing
# ---------------------------------------------------------------------------------------------------------------

def _run_dir(root: Path, model: str, prompt: str, protocol: str = "dissonance") -> Path:
    return root / "runs" / protocol / model / prompt


def _mtimes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()
            and p.name != "summary.json" and p.parent != root}


@pytest.fixture(scope="module")
def finished(ray_session, bench, tmp_path_factory):
    """One sweep (2 models x 1 protocol x 2 prompts) written through a ``file://`` URI."""
    root = tmp_path_factory.mktemp("sweep") / "out"
    logs: list[str] = []
    result, recorder = _sweep(_sweep_data(bench, f"file://{root}"), logs=logs)
    return root, result, recorder, logs


@pytest.mark.slow
def test_sweep_writes_every_run_complete_and_correct(finished, bench):
    root, result, recorder, logs = finished
    n = _n_instances(bench)
    assert result.ok and [r.status for r in result.runs] == ["done"] * 4
    assert sorted(recorder.calls) == [(m, p, n) for m in ("sim-a", "sim-b") for p in ("cot", "zs")]
    assert recorder.passes == 2  # one pass (one engine pool) per model, not one per run
    for model in ("sim-a", "sim-b"):
        for prompt in ("zs", "cot"):
            run = _run_dir(root, model, prompt)
            df = pl.read_parquet(run / "predictions.parquet")
            assert df.height == n and df["instance_id"].n_unique() == n
            assert set(df["model"]) == {model} and set(df["prompt"]) == {prompt}
            assert df["error"].null_count() == n
            metrics = pl.read_parquet(run / "metrics" / "metrics.parquet")
            assert set(metrics["model"]) == {model} and "shapley" in set(metrics["metric"])
            marker = json.loads((run / "sweep-run.json").read_text())
            assert marker["state"] == "complete" and marker["n_predictions"] == n
    summary = json.loads((root / "summary.json").read_text())
    assert summary["state"] == "finished" and summary["totals"]["done"] == 4
    assert summary["totals"]["predictions"] == summary["totals"]["expected_predictions"] == 4 * n
    combined = pl.read_parquet(root / "metrics.parquet")
    assert combined.select("model", "prompt").unique().height == 4 and set(combined["benchmark"]) == {"dissonance"}
    # progress per run and overall in the log
    assert any("run 3/4 sim-b / dissonance / zs: starting" in m for m in logs)
    assert any(f"overall: 4/4 runs finished (0 were complete, 0 failed), {4 * n}/{4 * n} predictions" in m
               for m in logs)


@pytest.mark.slow
def test_each_runs_metrics_folder_is_what_omnieval_metrics_writes(finished, tmp_path):
    """A sweep computes a run's metrics as ``omnieval metrics`` does on its predictions: the same files (paired
    differences included), byte for byte, with the settings its marker records."""
    from omnieval.cli import main

    root, *_ = finished
    for model in ("sim-a", "sim-b"):
        for prompt in ("zs", "cot"):
            run = _run_dir(root, model, prompt)
            settings = json.loads((run / "sweep-run.json").read_text())["metrics"]
            out = tmp_path / f"{model}-{prompt}"
            assert main(["metrics", str(run / "predictions.parquet"), "--out", str(out), "--resamples",
                         str(settings["resamples"]), "--seed", str(settings["seed"]), "--permutations",
                         str(settings["permutations"])]) == 0
            names = sorted(p.name for p in out.iterdir())
            assert names == ["metrics.csv", "metrics.json", "metrics.parquet", "paired.csv", "paired.parquet"]
            assert sorted(p.name for p in (run / "metrics").iterdir()) == names
            for name in names:
                assert (run / "metrics" / name).read_bytes() == (out / name).read_bytes(), (run, name)


@pytest.mark.slow
def test_run_json_records_config_versions_commit_seed_times_counts_errors(finished, bench):
    import ray

    root, *_ = finished
    record = json.loads((_run_dir(root, "sim-b", "cot") / "run.json").read_text())
    config = record["config"]
    assert config["protocol"] == "dissonance" and config["benchmark"] == str(bench)
    assert config["prompts"] == ["cot"] and [m["name"] for m in config["models"]] == ["sim-b"]
    assert config["models"][0]["replicas"] == 2 and config["protocol_options"] == {}
    assert {"omnieval", "ray", "vllm", "transformers"} <= set(record["versions"])
    assert record["versions"]["ray"] == ray.__version__ and record["versions"]["omnieval"]
    assert "git_commit" in record and record["seed"] == 0
    assert 0 < record["started"] <= record["finished"]
    n = _n_instances(bench)
    assert record["counts"]["instances"] == record["counts"]["predictions"] == n
    assert record["errors"]["count"] == 0 and record["errors"]["examples"] == []


@pytest.mark.slow
def test_resubmitting_a_finished_sweep_does_no_model_work(finished, bench):
    root, *_ = finished
    before = _mtimes(root)
    result, recorder = _sweep(_sweep_data(bench, f"file://{root}"), allow=False)
    assert [r.status for r in result.runs] == ["skipped"] * 4 and result.ok
    assert recorder.calls == [] and _mtimes(root) == before
    assert json.loads((root / "summary.json").read_text())["totals"]["skipped"] == 4


@pytest.mark.slow
def test_deleting_one_runs_outputs_redoes_only_that_run(finished, bench):
    root, *_ = finished
    n = _n_instances(bench)
    victim = _run_dir(root, "sim-b", "cot")
    shutil.rmtree(victim)
    before = _mtimes(root)
    result, recorder = _sweep(_sweep_data(bench, f"file://{root}"))
    assert recorder.calls == [("sim-b", "cot", n)]
    assert [r.status for r in result.runs] == ["skipped", "skipped", "skipped", "done"]
    after = _mtimes(root)
    # nothing else was rewritten but the benchmark's pooled result, one of whose runs changed
    pooled = {k for k in before if k.startswith("combined/")}
    assert {k: v for k, v in after.items() if k in before and k not in pooled} == \
        {k: v for k, v in before.items() if k not in pooled}
    assert pooled and all(after[k] != before[k] for k in pooled if k.endswith("combined.json"))
    df = pl.read_parquet(victim / "predictions.parquet")
    assert df.height == n and df["instance_id"].n_unique() == n and set(df["prompt"]) == {"cot"}

    # only the consolidated table gone: the run is redone from its part files, no instance scored again
    (victim / "predictions.parquet").unlink()
    result, recorder = _sweep(_sweep_data(bench, f"file://{root}"))
    assert recorder.calls == [("sim-b", "cot", 0)]
    assert result.runs[3].resumed == n and pq.read_metadata(victim / "predictions.parquet").num_rows == n


@pytest.mark.slow
def test_changed_model_config_redoes_that_models_runs_from_scratch(finished, bench):
    root, *_ = finished
    n = _n_instances(bench)
    data = _sweep_data(bench, f"file://{root}")
    data["models"][0]["options"] = {"seed": 7}
    result, recorder = _sweep(data)
    assert sorted(recorder.calls) == [("sim-a", "cot", n), ("sim-a", "zs", n)]  # every row scored again
    assert recorder.passes == 1
    assert [r.status for r in result.runs] == ["done", "done", "skipped", "skipped"]
    for prompt in ("zs", "cot"):
        run = _run_dir(root, "sim-a", prompt)
        parts = pl.concat([pl.read_parquet(p) for p in (run / "parts" / "sim-a").glob("part-*.parquet")])
        assert parts.height == n  # the old config's parts were cleared, not mixed in


@pytest.mark.slow
def test_changed_metrics_settings_recompute_metrics_without_model_work(finished):
    root, *_ = finished
    data = json.loads((root / "summary.json").read_text())["config"]  # the sweep as last run, whatever ran before
    data["metrics"] = {"resamples": 60}
    parts_before = {p: p.stat().st_mtime_ns for p in root.rglob("part-*.parquet")}
    result, recorder = _sweep(data)
    assert [n for *_, n in recorder.calls] == [0, 0, 0, 0] and result.ok  # every run resumed whole from its parts
    assert {p: p.stat().st_mtime_ns for p in root.rglob("part-*.parquet")} == parts_before
    for run in result.runs:
        assert json.loads((Path(run.output.removeprefix("file://")) / "metrics" / "metrics.json").read_text())[
            "resamples"] == 60


@pytest.mark.slow
def test_report_of_a_sweep_lists_each_run_once_with_its_own_metrics(finished):
    """The sweep's combined metrics.parquet repeats its runs' metrics: the report takes each run folder once, with
    the metrics the sweep computed (not recomputed with other resample counts)."""
    from omnieval.report.inputs import discover, labels

    root, *_ = finished
    sources = discover([str(root)])
    runs = sorted((s.root.parts[-2], s.root.parts[-1]) for s in sources)
    assert runs == [(m, p) for m in ("sim-a", "sim-b") for p in ("cot", "zs")]
    for s in sources:
        assert s.metrics == (s.root / "metrics" / "metrics.parquet").resolve()
        assert s.predictions == [(s.root / "predictions.parquet").resolve()]
    names = labels([s.root for s in sources])
    assert len(set(names)) == 4 and not any(n.startswith("/") for n in names)


@pytest.mark.slow
def test_report_of_a_sweep_compares_each_models_prompt_styles_and_the_sweep_prints_it(finished):
    """Each model's zs and cot sit in sibling run folders: the report pools them as one model, so its cot - zs
    differences are formed (and the models are still compared with each other); the sweep prints the report
    command that runs as printed."""
    from omnieval.report.inputs import load_runs, protocol_inputs

    root, result, *_ = finished
    (dissonance,) = protocol_inputs(load_runs([str(root)], resamples=50), resamples=50, permutations=50)
    paired = dissonance.paired
    prompt_pairs = paired.filter(pl.col("comparison") == "prompts")
    assert sorted(set(prompt_pairs["model"])) == ["sim-a", "sim-b"]  # the run label already names the model
    assert set(zip(prompt_pairs["a"], prompt_pairs["b"], strict=True)) == {("cot", "zs")}
    model_pairs = paired.filter(pl.col("comparison") == "models")
    assert set(model_pairs["prompt"]) == {"zs", "cot"}
    printed = result.summary().splitlines()
    command = printed[printed.index("next:") + 1].strip()
    assert " report " in command and command.endswith("-report")
    ran = subprocess.run(command, shell=True, capture_output=True, text=True,
                         cwd=root.parent, env={**os.environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"})
    assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr[-2000:]


@pytest.mark.slow
def test_the_summarys_verdict_lines_name_each_split_and_match_the_predictions(ray_session, bench, tmp_path):
    """A run over two splits prints one verdict line per split and cell; each line's accuracy is the share right of
    that split's rows in the run's predictions (the same cell of two splits was printed twice, indistinguishable).
    A sweep of its own: the shared one is changed by the tests that redo runs."""
    data = _sweep_data(bench, tmp_path / "out", prompts=["cot"])
    result, _recorder = _sweep(data | {"models": data["models"][:1]})
    lines = [line for line in result.summary().splitlines() if line.startswith("  ") and " / " in line
             and "disagree" in line]
    cot = [r for r in result.runs if r.prompt == "cot"]
    assert cot and lines
    for run in cot:
        rows = pl.read_parquet(run.output.removeprefix("file://") + "/predictions.parquet").filter(
            pl.col("mode") == "mcq")
        mine = [line for line in lines if line.startswith(f"  {run.key} ")]
        heads = [line.split(":")[0] for line in mine]
        assert len(heads) == len(set(heads)) == rows.select("split", "condition").n_unique()
        for line in mine:
            split, cell = line.split(":")[0][len(f"  {run.key} "):].split(" ")
            cell_rows = rows.filter((pl.col("split") == split) & (pl.col("condition") == cell))
            right = (cell_rows["choice"] == cell_rows["target"]).cast(pl.Float64).mean()
            assert line.split(": ")[1].split(" /")[0] == f"{right:.3f}"
