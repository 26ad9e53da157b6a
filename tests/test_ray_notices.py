"""What a user sees of a run: no error-level Ray line about actor restarts (a false alarm for Ray Data's pools),
while every other line written to stderr, real errors included, still comes through."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from omnieval.run.ray_notices import NOTICE, _without_notice_on_stderr, without_notice

ROOT = Path(__file__).resolve().parents[1]
RAY_NOTICE_LINE = (b"[2026-01-01 00:00:00,000 E 1 1] core_worker.cc:2465: Actor with class name: 'MapWorker(MapBatches("
                   b"ModelStage))' and ID: 'ab' has constructor arguments in the object store and max_restarts > 0. If "
                   b"the arguments in the object store go out of scope or are lost, the actor restart will fail.\n")


def test_only_the_notice_line_is_dropped():
    real = b"[2026-01-01 00:00:00,000 E 1 1] core_worker.cc:900: Failed to register actor.\n"
    bar = b"sim:   0%|          | 0/32 [00:00<?, ?row/s]\rsim: 100%|##########| 32/32\n"
    assert without_notice(real + RAY_NOTICE_LINE + bar + b"no newline at the end") == (
        real + bar + b"no newline at the end")
    assert without_notice(RAY_NOTICE_LINE) == b""


def test_what_is_written_to_stderr_meanwhile_comes_through_less_the_notice(capfd):
    """File descriptor 2 is caught while the throwaway actor is created: what else lands there is written back."""
    with _without_notice_on_stderr():
        os.write(2, b"a real error from a C++ thread\n" + RAY_NOTICE_LINE)
        print("a Python warning", file=sys.stderr)
    err = capfd.readouterr().err  # pytest catches sys.stderr itself, so the order of the two lines may differ
    assert sorted(err.splitlines()) == ["a Python warning", "a real error from a C++ thread"]


@pytest.mark.slow
def test_omnieval_run_prints_no_ray_restart_notice(ray_session, small_bench, tmp_path):
    """``omnieval run`` as a user runs it (a subprocess, its stdout and stderr as the terminal would show them), on
    the test session's Ray: two actor pools (prefetch and engine) start, and Ray's line does not appear."""
    config = {"benchmark": str(small_bench), "output": str(tmp_path / "out"), "limit_items": 2,
              "decode": {"num_frames": 2, "max_side": 64},
              "models": [{"name": "sim", "engine": "simulated", "options": {"seed": 1}}]}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    address = ray_session.get_runtime_context().gcs_address
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "omnieval.cli", "run", str(tmp_path / "run.yaml"), "--address",
                           address], capture_output=True, env=env, cwd=tmp_path, timeout=600)
    seen = done.stdout + done.stderr
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "out" / "predictions.parquet").exists() and b"rows scored now: 16" in done.stdout
    assert NOTICE not in seen and b"issues/53727" not in seen, seen.decode()[-3000:]
    assert not re.search(rb"\] core_worker\.cc:\d+:", seen), seen.decode()[-3000:]
