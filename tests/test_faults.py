"""Faults in the middle of a run on a local multi-node Ray (``ray.cluster_utils.Cluster``: a head and two worker
nodes on this machine, one logical GPU each, so the engine replica lives on a worker). Each of four things dies,
early (before the first part is written) and late (after parts exist):

* the driver: the ``omnieval run`` process, SIGKILL; the same command again resumes;
* the engine replica's process, SIGKILL; Ray Data restarts the actor and retries its batches;
* the media cache actor: ``ray.kill(..., no_restart=False)`` early, SIGKILL of its process late; Ray restarts it
  and the readers look their media up again;
* the worker node that holds the engine replica (``Cluster.remove_node``); the replica comes back on another
  worker (a third one is added for this scenario).

The faults Ray recovers from hit one run twice (early, then late, the same actor restarted twice); the driver is
killed early, the same command killed again late, and run once more to the end.

Every run ends with each (model, prompt, mode, instance_id) exactly once in ``predictions.parquet``, equal row for
row (but ``latency_s``) to one uninterrupted run, and, where Ray recovered in place, each scored once in the parts.
All scenarios share one cluster; the runs where Ray recovers are driven from this process, the driver kills from a
subprocess."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
ENGINE_ACTOR = "MapWorker(MapBatches(ModelStage))"
MODEL = {"name": "sim", "engine": "simulated", "batch_size": 4, "num_gpus": 1,
         "options": {"delay_ms": 60, "seed": 5}}
KEY = ["model", "prompt", "mode", "instance_id"]


def _start_cluster(Cluster, attempts: int = 3):
    """The head and the two workers. Ray gives a starting raylet a fixed 30 s to register; on a loaded 2-core
    machine it can miss that, so a start that times out is torn down and tried again (any other error is raised)."""
    for attempt in range(attempts):
        cluster = Cluster(initialize_head=False)
        try:
            cluster.add_node(num_cpus=4, num_gpus=0, resources={"head": 1}, include_dashboard=False,
                             _system_config={"health_check_initial_delay_ms": 0, "health_check_period_ms": 1000,
                                             "health_check_failure_threshold": 3})
            for _ in range(2):
                cluster.add_node(num_cpus=2, num_gpus=1)
            cluster.wait_for_nodes()
            return cluster
        except Exception as exc:
            cluster.shutdown()
            if "timed out during startup" not in str(exc) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def cluster():
    """Head (4 CPUs, no GPU: driver-side stages and decoding) + 2 workers (2 CPUs, 1 GPU each), its own Ray temp
    dir, fast node-death detection; this process is a driver of it for the module. The test session's local Ray,
    if any, is left first and started again afterwards."""
    import ray
    from conftest import start_local_ray
    from ray.cluster_utils import Cluster

    session = ray.is_initialized()
    if session:
        ray.shutdown()
    temp = tempfile.mkdtemp(prefix="omf", dir="/tmp")  # short: Ray's socket paths live under it
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = temp
    cluster = _start_cluster(Cluster)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.execution_no_progress_timeout_s = 300
        yield cluster
    finally:
        ray.shutdown()
        for node in list(cluster.worker_nodes):
            cluster.remove_node(node, allow_graceful=False)
        if cluster.head_node is not None:
            cluster.remove_node(cluster.head_node, allow_graceful=False)
        shutil.rmtree(temp, ignore_errors=True)
        if saved is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = saved
        if session:
            start_local_ray()


def _config(bench, out: Path, model: dict = MODEL) -> dict:
    return {"benchmark": str(bench), "output": str(out), "prompts": ["zs"], "models": [model],
            "decode": {"num_frames": 4, "max_side": 96}}


@pytest.fixture(scope="module")
def reference(cluster, bench, tmp_path_factory) -> pl.DataFrame:
    """One uninterrupted run (without the emulated latency, which changes no prediction)."""
    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation

    quick = MODEL | {"options": {k: v for k, v in MODEL["options"].items() if k != "delay_ms"}}
    out = tmp_path_factory.mktemp("reference") / "run"
    result = run_evaluation(parse_run_config(_config(bench, out, quick)), address=cluster.address, progress=False)
    table = pl.read_parquet(result.predictions_path)
    assert table.height == sum(1 for _ in open(Path(bench) / "items.jsonl")) * 8
    assert result.decode_counts and set(result.decode_counts.values()) == {1}
    return table


def _alive(class_name: str, since: float = 0.0) -> list[dict]:
    """Live actors of a class started after ``since`` (earlier runs' actors may still be on their way out). The
    media cache is the driver's, kept from one pass to the next: it may have started before the run."""
    import ray

    if class_name == "MediaCache":
        since = 0.0
    return [a for a in ray._private.state.state.actor_table(None).values()
            if a["ActorClassName"] == class_name and a["State"] == "ALIVE" and a.get("Pid")
            and a["StartTime"] >= since * 1000]


def _parts(out: Path) -> list[Path]:
    return sorted((out / "parts" / MODEL["name"]).glob("part-*.parquet"))


def _wait_for(point: str, out: Path, done, since: float, timeout: float = 180) -> None:
    """Until the moment of a fault: ``early`` = the run's engine replica and cache are up, ``late`` = a part is
    written (the caller checks that none was at ``early``)."""
    deadline = time.time() + timeout
    while time.time() < deadline and not done():
        if point == "early" and _alive(ENGINE_ACTOR, since) and _alive("MediaCache", since):
            return
        if point == "late" and _parts(out):
            return
        time.sleep(0.05)
    raise AssertionError(f"the run ended or hung before the {point} fault could hit it")


def _check(out: Path, reference: pl.DataFrame, *, scored_once: bool) -> None:
    from conftest import assert_same_predictions

    got = pl.read_parquet(out / "predictions.parquet")
    assert got.height == reference.height and not got.select(KEY).is_duplicated().any()
    assert_same_predictions(got, reference)
    if scored_once:  # Ray retried in place: the driver received each row once
        parts = pl.concat([pl.read_parquet(p) for p in _parts(out)])
        assert parts.height == reference.height and not parts.select(KEY).is_duplicated().any()


# ---------------------------------------------------------------------------------------------------------------
# Faults Ray recovers from inside the run
# ---------------------------------------------------------------------------------------------------------------

def _kill_engine(cluster, point, since):
    os.kill(_alive(ENGINE_ACTOR, since)[0]["Pid"], signal.SIGKILL)


def _kill_cache(cluster, point, since):
    import ray

    actor = _alive("MediaCache", since)[0]
    if point == "early":
        ray.kill(ray.get_actor(actor["Name"], namespace="omnieval"), no_restart=False)
    else:
        os.kill(actor["Pid"], signal.SIGKILL)


def _remove_engine_node(cluster, point, since):
    node_id = _alive(ENGINE_ACTOR, since)[0]["Address"]["NodeID"]
    victim = next(n for n in cluster.worker_nodes if n.node_id == node_id)
    cluster.remove_node(victim, allow_graceful=False)


FAULTS = {"engine": (_kill_engine, ENGINE_ACTOR), "cache": (_kill_cache, "MediaCache"),
          "node": (_remove_engine_node, ENGINE_ACTOR)}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_run_survives(cluster, bench, reference, tmp_path, monkeypatch, fault):
    """One run hit twice: early, then, once the victim is back and a part is written, late."""
    import ray

    from omnieval.config import parse_run_config
    from omnieval.run import pipeline, stages

    monkeypatch.setattr(stages, "FLUSH_ROWS", 1)  # a part per block, so "late" has parts to come after
    if fault == "node":  # two nodes will go: a third worker (nodes are added from the main thread only)
        cluster.add_node(num_cpus=2, num_gpus=1)
        cluster.wait_for_nodes()
    out = tmp_path / "run"
    kill, victim_class = FAULTS[fault]
    finished = threading.Event()
    hits: list[dict] = []
    failure: list[BaseException] = []
    since = time.time() - 1

    def fault_thread():
        try:
            for point in ("early", "late"):
                _wait_for(point, out, finished.is_set, since)
                while not _alive(victim_class, since):  # back from the early fault
                    assert not finished.is_set(), "the run ended before the late fault"
                    time.sleep(0.05)
                hits.append({"point": point, "parts": len(_parts(out)), "victim": _alive(victim_class, since)[0],
                             "predictions": (out / "predictions.parquet").exists()})
                kill(cluster, point, since)
        except BaseException as exc:  # reported by the test below
            failure.append(exc)

    thread = threading.Thread(target=fault_thread, daemon=True)
    thread.start()
    try:
        result = pipeline.run_evaluation(parse_run_config(_config(bench, out)), address=cluster.address,
                                         progress=False)
    finally:
        finished.set()
        thread.join(timeout=60)
    assert not failure and len(hits) == 2, (failure, hits)
    early, late = hits
    assert early["parts"] == 0 < late["parts"] and not early["predictions"] and not late["predictions"], hits
    _check(out, reference, scored_once=True)
    assert result.n_rows == reference.height and result.n_errors == 0
    # the same actor came back after each fault (Ray restarted it; it was not a new pool or a rerun)
    actor_id = early["victim"]["ActorID"]
    assert late["victim"]["ActorID"] == actor_id and late["victim"]["Pid"] != early["victim"]["Pid"]
    assert ray._private.state.state.actor_table(actor_id)["NumRestarts"] >= 2
    if fault == "node":  # back to two workers for the next scenario
        cluster.add_node(num_cpus=2, num_gpus=1)
        cluster.wait_for_nodes()


# ---------------------------------------------------------------------------------------------------------------
# The driver: killed, then the same command again
# ---------------------------------------------------------------------------------------------------------------

def test_killed_driver_resumes(cluster, bench, reference, tmp_path):
    """The run process killed early (nothing written), the same command killed again late (parts written), then
    once more to the end: it scores only what is missing."""
    out = tmp_path / "run"
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(_config(bench, out)))
    cmd = [sys.executable, "-m", "omnieval.cli", "run", str(tmp_path / "run.yaml"), "--address", cluster.address]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    written = []
    for point in ("early", "late"):
        since = time.time() - 1
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
        try:
            _wait_for(point, out, lambda p=proc: p.poll() is not None, since)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        written.append(sum(pl.read_parquet(p).height for p in _parts(out)))
        assert not (out / "predictions.parquet").exists()
    assert written[0] == 0 < written[1] < reference.height, written

    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resumed (skipped): {written[1]}" in again.stdout
    _check(out, reference, scored_once=True)  # the resumes scored only what was missing
    assert json.loads((out / "run.json").read_text())["counts"]["predictions"] == reference.height
