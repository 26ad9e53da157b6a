"""Models side by side (``max_concurrent_models``): which model starts when (plain arithmetic, by hand), the same
predictions as the one-at-a-time schedule, and a driver killed mid-sweep with two models running loses and
duplicates no prediction when the same command is run again."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

from omnieval.config import ModelConfig
from omnieval.sweep import SweepRunner, parse_sweep_config
from omnieval.sweep.schedule import Demand, model_demand, next_to_start, start_order

ROOT = Path(__file__).resolve().parents[1]


# -- the schedule, by hand ----------------------------------------------------------------------------------------

def test_demand_is_replicas_times_resources_plus_the_request_and_a_decode_task():
    model = ModelConfig(name="m", engine="simulated", replicas=3, num_gpus=2.0, num_cpus=1.5)
    assert model_demand(model) == Demand(gpus=6.0, cpus=4.5 + 0.25 + 1.0)  # request task 0.25, decode task 1
    assert Demand(4, 3).fits(Demand(4, 3)) and not Demand(4, 3).fits(Demand(3.5, 8))
    assert not Demand(1, 9).fits(Demand(8, 8))


def test_start_order_is_the_sweeps_one_at_a_time_else_largest_first():
    demands = {"a": Demand(2, 3), "b": Demand(8, 9), "c": Demand(2, 5), "d": Demand(8, 9)}
    assert start_order(list("abcd"), demands, 1) == list("abcd")
    assert start_order(list("abcd"), demands, 4) == list("bdca")  # GPUs, then CPUs, ties in the sweep's order


def test_next_to_start_fills_free_resources_and_respects_the_limit():
    demands = {"big": Demand(8, 9), "mid": Demand(4, 5), "small": Demand(2, 3)}
    waiting = ["big", "mid", "small"]
    assert next_to_start(waiting, demands, Demand(0, 0), 0, 4) == "big"  # nothing running: the first starts
    assert next_to_start(waiting, demands, Demand(6, 20), 1, 4) == "mid"  # big does not fit, mid does
    assert next_to_start(waiting, demands, Demand(3, 20), 1, 4) == "small"
    assert next_to_start(waiting, demands, Demand(3, 2), 1, 4) is None  # GPUs fit, CPUs do not
    assert next_to_start(waiting, demands, Demand(64, 64), 2, 2) is None  # at the limit
    assert next_to_start(waiting, demands, Demand(64, 64), 1, 1) is None  # one at a time


def _model(**fields):
    from omnieval.sweep.config import SweepModel

    return SweepModel(name="m", engine="simulated", **fields)


def test_replicas_auto_takes_the_free_gpus_up_to_max_replicas():
    auto = _model(replicas="auto", num_gpus=2, max_replicas=3)
    assert [auto.auto_replicas(free) for free in (0, 1.5, 2, 5.9, 6, 64)] == [1, 1, 1, 2, 3, 3]
    assert _model(replicas="auto", num_gpus=1).auto_replicas(7) == 7
    assert auto.as_model_config().replicas == 1 and auto.as_model_config(3).replicas == 3
    assert _model(replicas=4).as_model_config().replicas == 4
    for bad, match in (({"replicas": "auto"}, "set num_gpus"), ({"replicas": 2, "max_replicas": 4}, "auto only"),
                       ({"replicas": 0}, "greater than or equal to 1"), ({"replicas": "all", "num_gpus": 1}, "auto")):
        with pytest.raises(ValueError, match=match):
            _model(**bad)


# -- side by side against one at a time, on the session's local Ray -----------------------------------------------

MODELS = [("sim-a", 1, {"seed": 1}), ("sim-b", 2, {"seed": 2, "reliance": {"text": 0.9}}),
          ("sim-c", 1, {"seed": 3, "invalid_rate": 0.1})]


def _sweep_data(bench, output, max_concurrent: int) -> dict:
    return {"name": "side", "output": str(output), "prompts": ["zs", "cot"],
            "protocols": [{"protocol": "dissonance", "benchmark": str(bench)}],
            "models": [{"name": n, "engine": "simulated", "replicas": r, "num_cpus": 0.5, "batch_size": 8,
                        "options": {**o, "load_s": 1.0, "batch_s": 0.05}} for n, r, o in MODELS],
            "decode": {"num_frames": 4, "max_side": 96, "media_check": "exists"}, "metrics": {"resamples": 20},
            "max_concurrent_models": max_concurrent, "progress_interval_s": 0.5}


def test_side_by_side_writes_the_predictions_of_one_at_a_time(ray_session, small_bench, tmp_path):
    spans = {}
    for limit in (1, 3):
        runner = SweepRunner(parse_sweep_config(_sweep_data(small_bench, tmp_path / str(limit), limit)),
                             log=lambda m: None)
        result = runner.run()
        assert [r.status for r in result.runs] == ["done"] * 6
        spans[limit] = runner.model_spans
        # one decoded-media store for the sweep: each file decoded once, whatever the schedule; each of the other
        # two models' passes reads every file (its two runs share the pass)
        distinct = len({hashlib.sha256(p.read_bytes()).digest() for p in (Path(small_bench) / "media").rglob("*")
                        if p.is_file()})
        assert result.decodes + result.decoded_store_hits == 3 * distinct, limit
        assert result.decodes == distinct, limit
    one, three = (sorted(spans[k].values()) for k in (1, 3))
    assert all(a[1] <= b[0] for a, b in zip(one, one[1:], strict=False))  # one at a time: no overlap
    assert any(a[1] > b[0] for a, b in zip(three, three[1:], strict=False))  # side by side: some overlap
    n = sum(1 for _ in open(Path(small_bench) / "items.jsonl")) * 8
    for name, _, _ in MODELS:
        for prompt in ("zs", "cot"):
            got, want = (pl.read_parquet(tmp_path / k / "runs" / "dissonance" / name / prompt /
                                         "predictions.parquet").drop("latency_s") for k in ("3", "1"))
            assert got.height == n and got.equals(want), (name, prompt)
    # the same side-by-side sweep again, from a fresh process: every run complete, so Ray is never started, and the
    # command says so (it used to ask Ray for free resources it had not started)
    config = tmp_path / "again.yaml"
    config.write_text(yaml.safe_dump(_sweep_data(small_bench, tmp_path / "3", 3)))
    again = subprocess.run([sys.executable, "-m", "omnieval.cli", "sweep", str(config)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "6 runs: 0 done, 6 skipped (complete), 0 failed" in again.stdout


# -- the driver killed mid-sweep, models side by side, on a multi-node cluster ------------------------------------

@pytest.fixture
def cluster(monkeypatch):
    """Head (4 CPUs, no GPU) + 2 workers (2 CPUs, 1 logical GPU each), its own Ray temp dir, as test_multinode."""
    import ray
    from ray.cluster_utils import Cluster

    session = ray.is_initialized()
    if session:
        ray.shutdown()
    temp = tempfile.mkdtemp(prefix="oms", dir="/tmp")
    monkeypatch.setenv("RAY_TMPDIR", temp)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4, "num_gpus": 0,
                                                            "include_dashboard": False})
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=2, num_gpus=1)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        for node in list(cluster.worker_nodes):
            cluster.remove_node(node, allow_graceful=False)
        if cluster.head_node is not None:
            cluster.remove_node(cluster.head_node, allow_graceful=False)
        shutil.rmtree(temp, ignore_errors=True)
        monkeypatch.delenv("RAY_TMPDIR")
        if session:
            from conftest import start_local_ray

            start_local_ray()


@pytest.mark.slow
def test_killed_driver_with_models_side_by_side_loses_and_duplicates_nothing(cluster, bench, tmp_path):
    out = tmp_path / "out"
    sweep = {"name": "killed", "output": str(out), "prompts": ["zs"],
             "protocols": [{"protocol": "dissonance", "benchmark": str(bench)}],
             "models": [{"name": f"gpu-{i}", "engine": "simulated", "replicas": 1, "num_gpus": 1, "num_cpus": 0.5,
                         "batch_size": 4, "options": {"seed": i, "batch_s": 0.4}} for i in range(3)],
             "decode": {"num_frames": 4, "max_side": 96}, "metrics": {"resamples": 20},
             "max_concurrent_models": 2, "progress_interval_s": 1, "max_attempts": 2}
    sweep["models"][2] |= {"replicas": "auto", "max_replicas": 4}  # starts when a GPU frees up: 1 replica then
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    cmd = [sys.executable, str(ROOT / "jobs" / "sweep.py"), str(tmp_path / "sweep.yaml"), "--address",
           cluster.address]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    parts = lambda m: list((out / "runs" / "dissonance" / m / "zs" / "parts" / m).glob("part-*.parquet"))  # noqa: E731
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    try:
        deadline = time.time() + 180
        while proc.poll() is None and time.time() < deadline:
            if parts("gpu-0") and parts("gpu-1"):  # two models scoring side by side
                break
            time.sleep(0.2)
        assert proc.poll() is None, "the sweep ended before two models were scoring"
        assert parts("gpu-0") and parts("gpu-1"), "two models never scored side by side"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    n = sum(1 for _ in open(Path(bench) / "items.jsonl")) * 8
    written = {m: sum(pl.read_parquet(p).height for p in parts(m)) for m in ("gpu-0", "gpu-1")}
    assert all(0 < w < n for w in written.values()), written  # killed in the middle of both

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env, cwd=ROOT)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert sorted((r["model"], r["status"]) for r in summary["runs"]) == [(f"gpu-{i}", "done") for i in range(3)]
    for run in summary["runs"]:
        folder = Path(run["output"])
        df = pl.read_parquet(folder / "predictions.parquet")
        assert df.height == n and df["instance_id"].n_unique() == n
        scored = pl.concat([pl.read_parquet(p) for p in parts(run["model"])])
        assert scored.height == n and scored["instance_id"].n_unique() == n  # each instance scored once
    # replicas: auto, started beside one running model of 1 GPU on a 2-GPU cluster: 1 replica, in its run.json
    recorded = json.loads((out / "runs" / "dissonance" / "gpu-2" / "zs" / "run.json").read_text())
    assert recorded["config"]["models"][0]["replicas"] == 1
    assert "gpu-2: replicas auto: 1 (1 GPUs free" in again.stdout + again.stderr
    resumed = {r["model"]: r["resumed"] for r in summary["runs"]}
    assert resumed["gpu-0"] == written["gpu-0"] and resumed["gpu-1"] == written["gpu-1"]
