"""``ray job submit`` of a sweep, end to end on this machine: a Ray head started with ``ray start --head`` on
loopback (its own temp dir, ports and auth token), the repository uploaded as the job's working dir, two simulated
models x two protocols x both prompt styles. The job succeeds, every run is complete with the right instance counts,
and the job log shows progress per run and overall. (Resubmitting and redoing are in ``test_sweep.py``.)

Teardown stops exactly the head this test started (its process group), never other Ray instances on the machine,
which a plain ``ray stop`` would also kill."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import polars as pl
import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
COMMIT = "0123456789abcdef0123456789abcdef01234567-sweep-job-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the head's process group (``ray start --block`` and every process of the head), SIGKILL what is
    left after a few seconds (the GCS server does not always exit on SIGTERM)."""
    for sig, timeout in ((signal.SIGTERM, 5), (signal.SIGKILL, 30)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.time() + timeout
        while time.time() < deadline:
            proc.poll()  # reap our own child, or its zombie keeps the group alive
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


@pytest.fixture(scope="module")
def head():
    """``ray start --head`` bound to loopback; yields (dashboard URL, environment for the ``ray`` CLI)."""
    temp = tempfile.mkdtemp(prefix="omj", dir="/tmp")  # short: Ray's socket paths live under it
    token = Path(temp) / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(RAY_TMPDIR=temp, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token),
               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    dashboard = _free_port()
    cmd = [str(BIN / "ray"), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={_free_port()}",
           "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}", f"--temp-dir={temp}", "--num-cpus=8",
           "--object-store-memory=400000000", "--disable-usage-stats",
           f"--ray-client-server-port={_free_port()}", f"--dashboard-agent-listen-port={_free_port()}",
           f"--dashboard-agent-grpc-port={_free_port()}", f"--metrics-export-port={_free_port()}",
           f"--runtime-env-agent-port={_free_port()}", f"--node-manager-port={_free_port()}",
           f"--object-manager-port={_free_port()}"]
    log = open(Path(temp) / "ray-start.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{dashboard}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/version", timeout=2)
                break
            except urllib.error.HTTPError:  # 401 without the token: the server is up
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail("ray start --head did not come up:\n" + (Path(temp) / "ray-start.log").read_text())
                time.sleep(0.5)
        yield url, env, dashboard
    finally:
        _stop_group(proc)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _submit(url: str, env: dict, sweep: Path) -> subprocess.CompletedProcess:
    runtime_env = json.dumps({"env_vars": {"OMNIEVAL_GIT_COMMIT": COMMIT}})
    return subprocess.run([str(BIN / "ray"), "job", "submit", "--address", url, "--working-dir", ".",
                           "--runtime-env-json", runtime_env, "--", "python", "jobs/sweep.py", str(sweep)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)


def _status(url: str, env: dict, out: str) -> str:
    job = re.search(r"raysubmit_\w+", out).group(0)
    done = subprocess.run([str(BIN / "ray"), "job", "status", "--address", url, job], env=env, capture_output=True,
                          text=True, timeout=60)
    return done.stdout + done.stderr


def test_dashboard_is_bound_to_loopback_only(head):
    url, env, port = head
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    import ray.util

    ip = ray.util.get_node_ip_address()
    if not ip.startswith("127."):
        with pytest.raises(OSError):
            socket.create_connection((ip, port), timeout=5).close()


def test_ray_job_submit_runs_a_sweep_to_completion(head, tmp_path):
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark

    url, env, _ = head
    dis = make_dissonance_benchmark(tmp_path / "dis", seed=0, n_anchors=4, n_questions=2)
    xm = make_crossmodal_benchmark(tmp_path / "xm", seed=0)
    out = tmp_path / "out"
    sweep = {"name": "job", "output": str(out), "prompts": ["zs", "cot"], "seed": 3,
             "protocols": [{"protocol": "dissonance", "benchmark": str(dis)},
                           {"protocol": "crossmodal", "benchmark": str(xm)}],
             "models": [{"name": "sim-av", "engine": "simulated",
                         "options": {"reliance": {"video": 0.9, "audio": 0.8}}},
                        {"name": "sim-text", "engine": "simulated", "replicas": 2,
                         "options": {"reliance": {"text": 0.9}, "seed": 5}}],
             "decode": {"num_frames": 4, "max_side": 96}, "metrics": {"resamples": 50}, "progress_interval_s": 2}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep))

    done = _submit(url, env, path)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-6000:]
    assert re.search(r"Job 'raysubmit_\w+' succeeded", _status(url, env, log))
    assert "run 8/8 sim-text / crossmodal / cot: starting" in log
    assert "overall: 8/8 runs finished (0 were complete, 0 failed)" in log

    expected = {"dissonance": sum(1 for _ in open(dis / "items.jsonl")) * 8,  # 8 conditions per item
                "crossmodal": sum(1 for _ in open(xm / "items.jsonl")) * 6}  # 6 directions per item
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["done"] == 8
    runs = {(r["model"], r["protocol"], r["prompt"]) for r in summary["runs"]}
    assert runs == {(m, p, q) for m in ("sim-av", "sim-text") for p in expected for q in ("zs", "cot")}
    for model, protocol, prompt in runs:
        folder = out / "runs" / protocol / model / prompt
        df = pl.read_parquet(folder / "predictions.parquet")
        n = expected[protocol]
        assert df.height == n and df["instance_id"].n_unique() == n, (model, protocol, prompt)
        assert set(df["protocol"]) == {protocol} and set(df["model"]) == {model} and set(df["prompt"]) == {prompt}
        assert df["error"].null_count() == n and df["choice"].null_count() == 0
        assert (folder / "metrics" / "metrics.parquet").is_file()
        record = json.loads((folder / "run.json").read_text())
        assert record["git_commit"] == COMMIT and record["seed"] == 3
        assert record["counts"]["predictions"] == n and record["versions"]["ray"]
    # the models behave as configured: the text-only model fails where the text shows another anchor (C001),
    # the video+audio model does not
    acc = dict(pl.read_parquet(out / "runs" / "dissonance" / "*" / "zs" / "predictions.parquet")
               .group_by("model", "condition").agg((pl.col("choice") == pl.col("target")).mean())
               .select(pl.concat_str("model", "condition", separator="/"), "choice").iter_rows())
    assert acc["sim-text/C000"] > 0.7 and acc["sim-text/C001"] < 0.5 and acc["sim-av/C001"] > 0.7, acc
