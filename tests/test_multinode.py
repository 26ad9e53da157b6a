"""A sweep on a multi-node cluster (``ray.cluster_utils.Cluster``: one head and three worker nodes on this machine,
each with its own resources): replicas spread over nodes, one model holds the GPUs at a time, and killing a worker
node in the middle of a run neither loses nor duplicates a prediction (Ray restarts the engine actor elsewhere and
retries its batches; the sweep's retry and the pipeline's resume cover anything else), counted by instance id.

The GPUs are logical (declared per node); the simulated engine does not touch them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ENGINE_ACTOR = "MapWorker(MapBatches(ModelStage))"


@pytest.fixture
def cluster(monkeypatch):
    """Head (4 CPUs, no GPU: driver-side stages and decoding) + 3 workers (2 CPUs, 1 GPU each). One GPU a node:
    Ray's default ``SPREAD`` placement is best effort and now and then put both replicas of a model on one 2-GPU
    node; with one a node two replicas run on two nodes, and the two GPUs left after a node is lost still hold
    them. Its own Ray temp dir, so its address file and logs stay out of the machine-wide ``/tmp/ray``; fast
    node-death detection."""
    import ray
    from ray.cluster_utils import Cluster

    # This process may be a driver of the test session's local Ray: leave it first and come back afterwards, or
    # tearing the cluster down makes Ray end the whole test process once its driver loses a GCS.
    session = ray.is_initialized()
    if session:
        ray.shutdown()
    temp = tempfile.mkdtemp(prefix="omn", dir="/tmp")  # short: Ray's socket paths live under it
    monkeypatch.setenv("RAY_TMPDIR", temp)
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 4, "num_gpus": 0, "resources": {"head": 1}, "include_dashboard": False,
        "_system_config": {"health_check_initial_delay_ms": 0, "health_check_period_ms": 1000,
                           "health_check_failure_threshold": 3}})
    try:
        workers = [cluster.add_node(num_cpus=2, num_gpus=1, resources={f"worker-{i}": 1}) for i in range(3)]
        cluster.wait_for_nodes()
        yield cluster, workers
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


def _engine_actors(cluster) -> list[dict]:
    return [a for a in cluster.global_state.actor_table(None).values() if a["ActorClassName"] == ENGINE_ACTOR]


def test_sweep_spreads_over_nodes_and_survives_a_lost_node(cluster, bench, tmp_path):
    cluster, workers = cluster
    out = tmp_path / "out"
    sweep = {"name": "multinode", "output": str(out), "prompts": ["zs"],
             "protocols": [{"protocol": "dissonance", "benchmark": str(bench)}],
             "models": [{"name": "slow-a", "engine": "simulated", "replicas": 2, "num_gpus": 1, "batch_size": 4,
                         "options": {"delay_ms": 80, "seed": 1}},
                        {"name": "slow-b", "engine": "simulated", "replicas": 2, "num_gpus": 1, "batch_size": 8,
                         "options": {"delay_ms": 10, "seed": 2}}],
             "decode": {"num_frames": 4, "max_side": 96}, "metrics": {"resamples": 50},
             "progress_interval_s": 1, "max_attempts": 3, "release_timeout_s": 60}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    log = open(tmp_path / "sweep.log", "w")
    proc = subprocess.Popen([sys.executable, str(ROOT / "jobs" / "sweep.py"), str(tmp_path / "sweep.yaml"),
                             "--address", cluster.address], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    head_id = cluster.head_node.node_id
    victim = None
    try:
        deadline = time.time() + 120
        while victim is None and proc.poll() is None and time.time() < deadline:
            alive = [a for a in _engine_actors(cluster) if a["State"] == "ALIVE"]
            if len(alive) == 2:
                time.sleep(1.5)  # both replicas are scoring the first run's batches
                first_run = out / "runs" / "dissonance" / "slow-a" / "zs"
                assert not (first_run / "predictions.parquet").exists(), "the kill must come in the middle of a run"
                victim = next(w for w in workers if w.node_id == alive[0]["Address"]["NodeID"])
                cluster.remove_node(victim, allow_graceful=False)
            time.sleep(0.1)
        assert victim is not None, "no engine replicas came up"
        rc = proc.wait(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    text = (tmp_path / "sweep.log").read_text()
    assert rc == 0, text[-4000:]

    # every run: each instance exactly once in the predictions, and scored exactly once (the part files)
    n = sum(1 for _ in open(Path(bench) / "items.jsonl")) * 8
    summary = json.loads((out / "summary.json").read_text())
    assert [(r["model"], r["status"]) for r in summary["runs"]] == [("slow-a", "done"), ("slow-b", "done")]
    for run in summary["runs"]:
        folder = Path(run["output"])
        df = pl.read_parquet(folder / "predictions.parquet")
        assert df.height == n and df["instance_id"].n_unique() == n and df["error"].null_count() == n
        parts = pl.concat([pl.read_parquet(p) for p in (folder / "parts" / run["model"]).glob("part-*.parquet")])
        assert parts.height == n and parts["instance_id"].n_unique() == n

    actors = _engine_actors(cluster)
    # the lost replica came back (Ray restarted it on a node with a free GPU) or the sweep retried the run
    assert any(a["NumRestarts"] > 0 for a in actors) or summary["runs"][0]["attempts"] > 1
    # replicas ran on worker nodes only (the GPUs are there), never on the head; two at once on two nodes
    nodes = {a["Address"]["NodeID"] for a in actors}
    assert head_id not in nodes and len(nodes) >= 2
    for run in summary["runs"][1:]:  # the run after the kill: no restart to blur who ran where
        during = [a for a in actors if run["started"] * 1000 <= a["StartTime"] <= run["finished"] * 1000]
        assert len(during) == 2 and len({a["Address"]["NodeID"] for a in during}) == 2, during
    # one model at a time: every replica of slow-a was gone before slow-b's first run started
    b_start = min(r["started"] for r in summary["runs"] if r["model"] == "slow-b") * 1000
    earlier = [a for a in actors if a["StartTime"] < b_start]
    assert earlier and all(0 < a["EndTime"] <= b_start for a in earlier)
    assert "slow-a: GPUs released" in text
