"""A run on S3 and its statistics read from there: a real S3 server (moto's, on 127.0.0.1 with dummy credentials),
a real ``omnieval run`` process writing to ``s3://`` and killed with SIGKILL once its first part is in the bucket,
the same command again (it resumes from the bucket), then ``omnieval metrics`` and ``omnieval report`` reading the
run by its URI. Every (model, prompt, mode, instance_id) must be there exactly once, equal row for row to an
uninterrupted local run, and the metrics equal to those of that local run (the storage must change nothing)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
import yaml

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
MODEL = {"name": "slow-sim", "engine": "simulated", "batch_size": 4, "options": {"delay_ms": 100, "seed": 3}}
KEY = ["model", "prompt", "mode", "instance_id"]


@pytest.fixture(scope="module")
def s3():
    """A bucket on a moto S3 server in this process, on loopback only; returns ``uri(prefix)`` for pyarrow."""
    import boto3
    from moto.server import ThreadedMotoServer

    saved = {k: os.environ.get(k) for k in CREDENTIALS}
    os.environ.update(CREDENTIALS)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        _, port = server.get_host_and_port()
        boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}").create_bucket(Bucket="runs")
        yield lambda prefix: f"s3://runs/{prefix}?endpoint_override=127.0.0.1:{port}&scheme=http"
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _config(bench, output: str, model: dict = MODEL) -> dict:
    return {"benchmark": str(bench), "output": output, "prompts": ["zs"], "models": [model],
            "decode": {"num_frames": 4, "max_side": 96}, "ray": {"num_cpus": 4}}


def _parts(uri: str) -> list[str]:
    fs, root = pafs.FileSystem.from_uri(uri)
    infos = fs.get_file_info(pafs.FileSelector(f"{root}/parts/{MODEL['name']}", allow_not_found=True))
    return sorted(i.path for i in infos if i.path.endswith(".parquet"))


def _read(uri: str, rel: str) -> pl.DataFrame:
    fs, root = pafs.FileSystem.from_uri(uri)
    with fs.open_input_file(f"{root}/{rel}") as f:
        return pl.from_arrow(pq.read_table(f))


def test_killed_run_on_s3_resumes_and_the_statistics_read_it_there(ray_session, s3, bench, tmp_path):
    from conftest import assert_same_predictions

    from omnieval.cli import main
    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation

    start = time.perf_counter()
    # the reference without the emulated latency (it changes no prediction)
    unhurried = MODEL | {"options": {k: v for k, v in MODEL["options"].items() if k != "delay_ms"}}
    reference = run_evaluation(parse_run_config(_config(bench, str(tmp_path / "local"), unhurried)), progress=False)
    want = pl.read_parquet(reference.predictions_path)
    total = sum(1 for _ in open(Path(bench) / "items.jsonl")) * 8
    assert want.height == total

    uri = s3("run")
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(_config(bench, uri)))
    # the run process joins this session's Ray (no second Ray to start); killing it ends its job's actors
    cmd = [sys.executable, "-m", "omnieval.cli", "run", str(tmp_path / "run.yaml"),
           "--address", ray_session.get_runtime_context().gcs_address]
    env = os.environ | CREDENTIALS | {"PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    try:
        deadline = time.time() + 180
        while time.time() < deadline and proc.poll() is None and not _parts(uri):
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    first = pl.concat([_read(uri, p.split("/", 2)[2]) for p in _parts(uri)])
    assert 0 < first.height < total, "the kill must come in the middle of the run"
    print(f"reference and killed run: {time.perf_counter() - start:.1f} s")

    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resumed (skipped): {first.height}" in done.stdout

    print(f"resumed: {time.perf_counter() - start:.1f} s")
    got = _read(uri, "predictions.parquet")
    assert got.select(KEY).is_duplicated().sum() == 0 and got.height == total
    assert_same_predictions(got, want)

    # the statistics commands read the run by its URI; the numbers are those of the local run
    assert main(["metrics", s3("run/predictions.parquet"), "--out", str(tmp_path / "m-s3"), "--resamples", "200"]) == 0
    assert main(["metrics", reference.predictions_path, "--out", str(tmp_path / "m-local"), "--resamples", "200"]) == 0
    from_s3, local = (pl.read_parquet(tmp_path / m / "metrics.parquet") for m in ("m-s3", "m-local"))
    assert from_s3.height > 0 and from_s3.equals(local)
    assert main(["metrics", s3("run/predictions.parquet"), "--out", s3("metrics")]) == 2  # outputs stay local
    assert main(["stats", s3("run/predictions.parquet"), "--out", str(tmp_path / "t"), "--permutations", "200"]) == 0
    assert (tmp_path / "t" / "tests.parquet").is_file()
    assert main(["report", s3("run"), "--out", str(tmp_path / "report"), "--resamples", "200",
                 "--permutations", "200"]) == 0
    for name in ("report.html", "report.md"):
        text = (tmp_path / "report" / name).read_text()
        assert MODEL["name"] in text, name


def test_remote_paths_fail_with_the_file_named(s3, tmp_path, capsys):
    from omnieval.cli import main

    missing = s3("nowhere/predictions.parquet")
    assert main(["metrics", missing, "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "s3://runs/nowhere/predictions.parquet" in err and "no such predictions file" in err
    assert "endpoint_override" not in err  # the URI's options stay out of messages
    assert main(["report", s3("nowhere"), "--out", str(tmp_path / "r")]) == 2
    assert "no such run" in capsys.readouterr().err


def test_a_sweep_runs_metrics_on_s3_are_what_omnieval_metrics_writes(s3, tmp_path):
    """A sweep run's ``metrics/`` on S3 (``sweep.state.write_metrics``, reading the predictions by their URI) holds
    the files ``omnieval metrics`` writes for a local copy of the same predictions, byte for byte, but for the
    input each ``metrics.json`` names."""
    import json

    from omnieval.cli import main
    from omnieval.core.run_outputs import RunOutputs
    from omnieval.dev.bench_stats import synthetic_dissonance
    from omnieval.sweep.state import write_metrics

    local = tmp_path / "predictions.parquet"
    synthetic_dissonance(n_models=2, prompts=("zs",), splits=("real",), n_items=12, seed=4).write_parquet(local)
    store = RunOutputs(s3("sweep-run"))
    store.write_bytes("predictions.parquet", local.read_bytes())
    rows = write_metrics(store, {"resamples": 100, "seed": 3, "permutations": 200})
    assert main(["metrics", str(local), "--out", str(tmp_path / "m"), "--resamples", "100", "--seed", "3",
                 "--permutations", "200"]) == 0
    expected = {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()}
    infos = store.fs.get_file_info(pafs.FileSelector(store.path("metrics")))
    got = {Path(i.path).name: store.read_bytes(f"metrics/{Path(i.path).name}") for i in infos}
    assert sorted(got) == sorted(expected) == ["metrics.csv", "metrics.json", "metrics.parquet", "paired.csv",
                                               "paired.parquet"]
    for name in expected:
        if name != "metrics.json":
            assert got[name] == expected[name], name
    doc, reference = json.loads(got["metrics.json"]), json.loads(expected["metrics.json"])
    assert doc["inputs"] == [s3("sweep-run/predictions.parquet")] and reference["inputs"] == [str(local.resolve())]
    assert {**doc, "inputs": None} == {**reference, "inputs": None}
    assert rows == len(pl.read_csv(tmp_path / "m" / "metrics.csv")) > 0
    assert len(pl.read_csv(tmp_path / "m" / "paired.csv")) > 0  # two models: their paired differences are there


def test_join_uri_keeps_a_uris_options_at_its_end():
    from omnieval.sweep.expand import join_uri

    assert join_uri("s3://b/out?endpoint_override=127.0.0.1:9000&scheme=http", "runs", "x") == \
        "s3://b/out/runs/x?endpoint_override=127.0.0.1:9000&scheme=http"
    assert join_uri("s3://b/out/", "media") == "s3://b/out/media"
    assert join_uri("/data/out", "runs") == "/data/out/runs"


def test_a_sweep_on_s3_with_endpoint_options_writes_everything_under_its_prefix(s3, bench, tmp_path):
    """A whole sweep whose output is an S3 URI with options (an endpoint of one's own, as MinIO's): its summary, its
    runs and its decoded-media store land under that prefix on the server; the same sweep with a second prompt style
    then decodes nothing (every medium read from the store there)."""
    import json

    printed = []

    def sweep(prompts):
        path = tmp_path / f"sweep-{len(prompts)}.yaml"
        path.write_text(yaml.safe_dump({
            "name": "on-s3", "output": s3("sweep"), "prompts": prompts,
            "protocols": [{"protocol": "dissonance", "benchmark": str(bench)}],
            "models": [{"name": "sim", "engine": "simulated", "options": {"seed": 1}}],
            "decode": {"num_frames": 4, "max_side": 96}, "ray": {"num_cpus": 4}, "metrics": {"resamples": 100}}))
        done = subprocess.run([sys.executable, "-m", "omnieval.cli", "sweep", str(path)], cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
        printed.append(done.stdout)
        fs, root = pafs.FileSystem.from_uri(s3("sweep"))
        with fs.open_input_file(f"{root}/summary.json") as f:
            return fs, root, json.loads(f.read())

    fs, root, first = sweep(["zs"])
    assert printed[-1].count("sweep summary: s3://runs/sweep/summary.json") == 1  # a URI, its options left out
    media = [i for i in fs.get_file_info(pafs.FileSelector(f"{root}/media", recursive=True)) if i.is_file]
    distinct = len({p for line in (Path(bench) / "items.jsonl").read_text().splitlines()
                    for m, p in json.loads(line)["media"].items() if m != "text"})
    assert first["totals"]["decodes"] == distinct == len(media)
    assert _read(s3("sweep/runs/dissonance/sim/zs"), "predictions.parquet").height == \
        sum(1 for _ in open(Path(bench) / "items.jsonl")) * 8
    _, _, second = sweep(["zs", "cot"])
    assert second["totals"]["decodes"] == 0 and second["totals"]["decoded_store_hits"] == distinct
    assert _read(s3("sweep/runs/dissonance/sim/cot"), "predictions.parquet").height > 0
