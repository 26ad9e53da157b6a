"""What a user meets first around a run, each a real process where it can be: a Ray cluster already running on the
machine (``ray start``), a cluster address where nothing answers, Ray's own start timing out, Ctrl-C and SIGTERM of
a running driver (one line, the resume command, 130 / 143, and the command then resumes), an engine whose package is
not installed, storage that cannot be opened or does not answer, the user's git checkout, a corrupt identity file."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ENV = os.environ | {"PYTHONPATH": str(ROOT)}
TIMED_OUT = Exception("The current node timed out during startup. This could happen because some of the raylet "
                      "failed to startup or the GCS has become overloaded.")  # what ray._private.node raises


def _free_port() -> int:
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(bench, out, model: dict | None = None) -> dict:
    return {"benchmark": str(bench), "output": str(out), "prompts": ["zs"],
            "models": [model or {"name": "sim", "engine": "simulated"}],
            "decode": {"num_frames": 2, "max_side": 32}, "ray": {"num_cpus": 4}}


def _write_config(tmp_path, bench, out, model: dict | None = None) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(_config(bench, out, model)))
    return path


def _instances(bench) -> int:
    """Instances of a synthetic dissonance benchmark: 8 conditions per item."""
    return 8 * len((Path(bench) / "items.jsonl").read_text().splitlines())


def _omnieval(*args: str) -> list[str]:
    return [sys.executable, "-m", "omnieval.cli", *args]


def _error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("omnieval: error:")]


# ---------------------------------------------------------------------------------------------------------------
# Ray: a cluster already running, an address where nothing answers, a start that times out
# ---------------------------------------------------------------------------------------------------------------

@pytest.fixture
def started_cluster():
    """A real ``ray start --head`` cluster (1 CPU) in a temp dir of its own: the ``RAY_TMPDIR`` it returns makes it
    the cluster a plain ``ray.init()`` finds, as ``/tmp/ray`` does for ``ray start`` without options. Ended by its
    process group (``ray stop`` would end every Ray on the machine), then any process still naming its temp dir."""
    base = tempfile.mkdtemp(prefix="omr", dir="/tmp")  # short: Ray's socket paths live under it
    port = _free_port()
    env = ENV | {"RAY_TMPDIR": base}
    ray_cli = str(Path(sys.executable).with_name("ray"))
    head = subprocess.Popen([ray_cli, "start", "--head", "--port", str(port), "--num-cpus", "1", "--num-gpus", "0",
                             "--temp-dir", f"{base}/ray", "--include-dashboard", "false", "--disable-usage-stats",
                             "--block"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (Path(base) / "ray" / "ray_current_cluster").exists():
            assert head.poll() is None, "ray start exited"
            assert time.monotonic() < deadline, "ray start did not record its address in 120 s"
            time.sleep(0.5)
        yield {"RAY_TMPDIR": base}, port
    finally:
        try:
            os.killpg(head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        head.wait(timeout=30)
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            try:
                if base.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_a_running_cluster_is_named_and_not_joined_without_address(started_cluster, small_bench, tmp_path):
    """Without --address the run starts its own local Ray beside the running cluster (Ray would join that cluster
    and refuse the run's num_cpus), says so in one note, and finishes; --address auto joins the cluster (whose
    1 CPU cannot hold the run's stage, so it is refused naming it: the proof it joined)."""
    env, port = started_cluster
    config = _write_config(tmp_path, small_bench, tmp_path / "out")
    ran = subprocess.run(_omnieval("run", str(config)), capture_output=True, text=True, timeout=300,
                         env=ENV | env, cwd=ROOT)
    assert ran.returncode == 0, ran.stderr[-3000:]
    notes = [line for line in ran.stderr.splitlines() if "running Ray cluster was found" in line]
    assert len(notes) == 1 and f":{port}" in notes[0] and "--address auto" in notes[0], ran.stderr[-3000:]
    assert pl.read_parquet(tmp_path / "out" / "predictions.parquet").height == _instances(small_bench)

    joined = subprocess.run(_omnieval("run", str(config), "--out", str(tmp_path / "joined"), "--address", "auto"),
                            capture_output=True, text=True, timeout=300, env=ENV | env, cwd=ROOT)
    assert joined.returncode == 2, joined.stderr[-3000:]
    assert "the Ray cluster has 1" in joined.stderr and "Traceback" not in joined.stderr


@pytest.mark.slow
def test_an_address_where_nothing_listens_is_given_up_with_one_line(small_bench, tmp_path):
    """A closed local port: Ray alone retries its GCS there for many minutes; the run gives up after the connect
    time-out with one line naming the address and the field."""
    port = _free_port()
    config = _write_config(tmp_path, small_bench, tmp_path / "out")
    ran = subprocess.run(_omnieval("run", str(config), "--address", f"127.0.0.1:{port}"), capture_output=True,
                         text=True, timeout=120, env=ENV | {"OMNIEVAL_RAY_CONNECT_TIMEOUT_S": "2"}, cwd=ROOT)
    assert ran.returncode == 2, ran.stderr[-3000:]
    (line,) = _error_lines(ran.stderr)
    assert f"127.0.0.1:{port}" in line and "'--address'" in line and "within 2 s" in line
    assert "Traceback" not in ran.stderr


@pytest.fixture
def fake_ray_init(monkeypatch):
    """``ray.init`` replaced by a recorder that raises the given errors in turn (then returns), Ray seen as not
    started: Ray's start-up time-out cannot be produced on demand."""
    import ray

    calls: list[dict] = []
    errors: list[BaseException] = []

    def init(*args, **kwargs):
        calls.append(kwargs)
        if errors:
            raise errors.pop(0)

    monkeypatch.setattr(ray, "init", init)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return calls, errors


def test_a_start_that_times_out_is_tried_once_more(fake_ray_init, small_bench, tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import ensure_ray

    calls, errors = fake_ray_init
    errors.append(TIMED_OUT)
    ensure_ray(parse_run_config(_config(small_bench, tmp_path / "out")))
    assert len(calls) == 2 and calls[0] == calls[1]
    assert calls[1]["address"] == "local" and calls[1]["num_cpus"] == 4

    calls.clear()
    errors.append(RuntimeError("some other failure"))  # not a time-out: raised at once, not retried
    with pytest.raises(RuntimeError, match="some other failure"):
        ensure_ray(parse_run_config(_config(small_bench, tmp_path / "out")))
    assert len(calls) == 1


def test_a_start_that_times_out_twice_is_one_line(fake_ray_init, small_bench, tmp_path, capsys):
    from omnieval.cli import main

    calls, errors = fake_ray_init
    errors.extend([TIMED_OUT, TIMED_OUT])
    assert main(["run", str(_write_config(tmp_path, small_bench, tmp_path / "out"))]) == 1
    (line,) = _error_lines(capsys.readouterr().err)
    assert "did not start" in line and "2 times" in line and "--address" in line
    assert len(calls) == 2


# ---------------------------------------------------------------------------------------------------------------
# Ctrl-C and SIGTERM of a running driver
# ---------------------------------------------------------------------------------------------------------------

def _stop_at_next_part(command: list[str], parts: Path, sig: int, cwd: Path) -> tuple[int, str]:
    """Run ``command`` until it writes a part beyond those in ``parts`` now, send it ``sig``; its status and
    stderr."""
    before = len(list(parts.glob("part-*.parquet")))
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=cwd)
    try:
        deadline = time.monotonic() + 180
        while len(list(parts.glob("part-*.parquet"))) <= before:
            assert proc.poll() is None and time.monotonic() < deadline, "no new part written"
            time.sleep(0.05)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err


def _stopped_line(status: int, err: str, sig: int) -> str:
    """The one line of a stopped run (checked: status 128 + signal, no stack); the command it prints."""
    assert status == 128 + sig, err[-3000:]
    assert "Traceback" not in err and "SIGTERM received" not in err, err[-3000:]
    (line,) = [x for x in err.splitlines() if x.startswith("omnieval: run stopped")]
    assert ("Ctrl-C (SIGINT)" if sig == signal.SIGINT else "SIGTERM") in line and "finished rows are kept" in line
    return line.split("resume with: ", 1)[1]


@pytest.mark.slow
def test_a_stopped_run_prints_one_line_and_the_printed_command_resumes_it(small_bench, tmp_path):
    """The driver stopped by Ctrl-C once its first part is written, then (run again by the command it printed) by
    SIGTERM once it wrote another: each time status 128 + signal and one line (no stack) with the resume command;
    that command, run as printed a last time, scores only what is missing and finishes."""
    model = {"name": "sim", "engine": "simulated", "batch_size": 2, "options": {"delay_ms": 150, "seed": 1}}
    out, n = tmp_path / "out", _instances(small_bench)
    parts = out / "parts" / "sim"
    config = _write_config(tmp_path, small_bench, out, model)

    command = _stopped_line(*_stop_at_next_part(_omnieval("run", str(config)), parts, signal.SIGINT, tmp_path),
                            signal.SIGINT)
    assert command.endswith(f"run {shlex.quote(str(config))}")
    command = shlex.split(command)
    again = _stopped_line(*_stop_at_next_part(command, parts, signal.SIGTERM, tmp_path), signal.SIGTERM)
    assert shlex.split(again) == command
    written = pl.concat([pl.read_parquet(p) for p in parts.glob("part-*.parquet")]).height
    assert 0 < written < n

    last = subprocess.run(command, capture_output=True, text=True, timeout=300, env=ENV, cwd=tmp_path)
    assert last.returncode == 0, last.stderr[-3000:]
    assert f"resumed (skipped): {written}" in last.stdout
    predictions = pl.read_parquet(out / "predictions.parquet")
    assert predictions.height == n and predictions.select("instance_id").n_unique() == n


@pytest.mark.slow
def test_a_stopped_sweep_prints_one_line_with_its_resume_command(small_bench, tmp_path):
    """SIGTERM once the sweep's first run started (Ray up, the model's pass under way): status 143 and one line
    naming what is kept and the command that resumes the sweep (its resume itself: tests/test_sweep.py)."""
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump({
        "name": "stopped", "output": str(tmp_path / "out"), "prompts": ["zs"], "ray": {"num_cpus": 4},
        "protocols": [{"protocol": "dissonance", "benchmark": str(small_bench)}],
        "models": [{"name": "sim", "engine": "simulated", "batch_size": 2, "options": {"delay_ms": 500}}],
        "metrics": {"enabled": False}}))
    proc = subprocess.Popen(_omnieval("sweep", str(sweep)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=ENV, cwd=tmp_path)
    try:
        for line in proc.stdout:  # the sweep's log: a run starting means Ray is up
            if ": starting (" in line:
                break
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in err and "SIGTERM received" not in err, err[-3000:]
    (line,) = [x for x in err.splitlines() if x.startswith("omnieval: sweep stopped")]
    assert "SIGTERM" in line and "finished runs and rows are kept" in line
    assert line.endswith(f"sweep {shlex.quote(str(sweep))}")


# ---------------------------------------------------------------------------------------------------------------
# Refused before Ray: an engine whose package is missing, storage that cannot be opened or does not answer
# ---------------------------------------------------------------------------------------------------------------

def test_the_vllm_engine_without_vllm_is_refused_before_ray_starts(fake_ray_init, small_bench, tmp_path, capsys):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed in this Python")
    from omnieval.cli import main

    calls, _ = fake_ray_init
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    model = {"name": "qwen-vllm", "engine": "vllm", "num_gpus": 0, "options": {"path": str(folder)}}
    assert main(["run", str(_write_config(tmp_path, small_bench, tmp_path / "out", model))]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert "qwen-vllm" in line and "'vllm'" in line and "pip install 'omnieval[vllm]'" in line
    assert "models[0].engine" in line
    assert calls == []  # Ray never started


def test_an_output_uri_pyarrow_cannot_open_is_one_line(small_bench, tmp_path, capsys):
    from omnieval.cli import main

    uri = "s3://bucket/x?endpoint_override=127.0.0.1:1&schem=http"  # a misspelt option
    assert main(["run", str(_write_config(tmp_path, small_bench, uri))]) == 2
    (line,) = _error_lines(capsys.readouterr().err)
    assert "s3://bucket/x" in line and "'schem'" in line and "'output'" in line


@pytest.mark.slow
def test_storage_that_does_not_answer_is_given_up_with_one_line(small_bench, tmp_path):
    """A ``gs://`` output on a machine whose GCS client gets no answer (no network, or none for its credentials):
    pyarrow retries for many minutes; the run gives up after the storage time-out with one line, before Ray."""
    blackhole = socket.socket()  # accepts connections and never answers
    blackhole.bind(("127.0.0.1", 0))
    blackhole.listen()
    try:
        host, port = blackhole.getsockname()
        env = ENV | {"OMNIEVAL_STORAGE_TIMEOUT_S": "3", "GCE_METADATA_HOST": f"{host}:{port}",
                     "GCE_METADATA_ROOT": f"{host}:{port}"}
        uri = f"gs://bucket/x?endpoint_override={host}:{port}&scheme=http"
        ran = subprocess.run(_omnieval("run", str(_write_config(tmp_path, small_bench, uri))), capture_output=True,
                             text=True, timeout=120, env=env, cwd=ROOT)
    finally:
        blackhole.close()
    assert ran.returncode == 2, ran.stderr[-3000:]
    (line,) = _error_lines(ran.stderr)
    assert "gs://bucket/x" in line and "within 3 s" in line and "'output'" in line
    assert "Traceback" not in ran.stderr


# ---------------------------------------------------------------------------------------------------------------
# The user's checkout and the output's identity files
# ---------------------------------------------------------------------------------------------------------------

def test_the_commit_is_read_without_rewriting_the_checkouts_index(tmp_path, monkeypatch):
    """``git status`` refreshes a checkout's index under ``.git/index.lock`` when a file's stat changed; a run
    reading its commit must not (a ``git commit`` the user starts meanwhile would fail on the lock)."""
    from omnieval.run.pipeline import git_commit

    monkeypatch.delenv("OMNIEVAL_GIT_COMMIT", raising=False)
    git = ["git", "-c", "user.email=a@b.c", "-c", "user.name=n"]
    subprocess.run([*git, "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "f.txt").write_text("a\n")
    subprocess.run([*git, "-C", str(tmp_path), "add", "f.txt"], check=True)
    subprocess.run([*git, "-C", str(tmp_path), "commit", "-qm", "x"], check=True)
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    stamp = time.time() + 5
    os.utime(tmp_path / "f.txt", (stamp, stamp))  # same content, new stat: git status would rewrite the index
    index = (tmp_path / ".git" / "index").read_bytes()
    assert git_commit(tmp_path) == head
    assert (tmp_path / ".git" / "index").read_bytes() == index
    (tmp_path / "f.txt").write_text("b\n")
    assert git_commit(tmp_path) == f"{head}-dirty"


def test_a_corrupt_identity_file_is_one_line_and_overwrite_recomputes(tmp_path):
    from omnieval.core.run_outputs import RunOutputs
    from omnieval.core.schema import InputError
    from omnieval.run.preflight import claim_folders

    store = RunOutputs(str(tmp_path / "out"))
    identities = {"parts/sim": {"kind": "predictions", "seed": 0}}
    claim_folders(store, identities)
    path = tmp_path / "out" / "parts" / "sim" / "_identity.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])  # cut short
    store.append_part("sim", [])
    with pytest.raises(InputError) as caught:
        claim_folders(store, identities)
    message = str(caught.value)
    assert str(path) in message and "--overwrite" in message and "\n" not in message
    claim_folders(store, identities, overwrite=True)
    assert json.loads(path.read_text())["identity"] == identities["parts/sim"]
    assert not list(path.parent.glob("part-*.parquet"))
