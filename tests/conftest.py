"""Shared fixtures. Ray starts once per test session (2-5 s), never per test."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray with 8 logical CPUs (the embedded default): engine replicas, the request task and decode tasks
    each hold a slot, and 2 real cores would deadlock the actor pools."""
    import ray

    if not ray.is_initialized():
        start_local_ray()
    yield ray
    ray.shutdown()


def start_local_ray():
    """The test session's local Ray (see ``ray_session``): always a new one (``address="local"``), never a cluster
    already running on the machine (a ``ray start`` head, another process's bench), which ``ray.init()`` would
    otherwise join, refusing ``num_cpus``."""
    import ray

    ray.init(address="local", num_cpus=8, include_dashboard=False, log_to_driver=False)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.execution_no_progress_timeout_s = 600  # a hung engine fails its test in 10 min, not Ray's 30


def assert_same_predictions(got, want, *, skip=("latency_s",), atol: float = 1e-4) -> None:
    """Two predictions tables (polars) agree row by row in every column but ``skip``: floats (option logprobs,
    confidences) to ``atol``, everything else exactly. Used where two engine paths must write the same rows."""
    import numpy as np

    assert got.drop(skip).columns == want.drop(skip).columns and got.height == want.height > 0
    for column in got.drop(skip).columns:
        for a, b in zip(got[column].to_list(), want[column].to_list(), strict=True):
            if column in ("option_logprobs", "confidence") and b is not None:
                np.testing.assert_allclose(a, b, atol=atol, err_msg=column)
            else:
                assert a == b, (column, a, b)


@pytest.fixture(scope="session")
def bench(tmp_path_factory):
    """The shared synthetic dissonance benchmark (4 anchors x 2 questions: 8 items, 64 instances) with real media.
    Session-wide: tests that change a benchmark copy it first (``first_items``, ``editable_copy``)."""
    from omnieval.datasets.synthetic import make_dissonance_benchmark

    return make_dissonance_benchmark(tmp_path_factory.mktemp("bench") / "b", seed=0, n_anchors=4, n_questions=2)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """``tiny_models(arch, seed=0)``: the folder of a tiny random-weight model (``omnieval.dev.tiny_models``), built
    once per test session and shared by every module."""
    from omnieval.dev.tiny_models import build_tiny_model

    base = tmp_path_factory.mktemp("tiny-models")

    def get(arch: str, seed: int = 0):
        out = base / f"{arch}-seed{seed}"
        if not (out / "config.json").exists():
            build_tiny_model(arch, out, seed=seed)
        return out

    return get


@pytest.fixture(scope="session")
def small_bench(tmp_path_factory):
    """A small synthetic dissonance benchmark (4 anchors x 1 question: 4 items, 32 instances) with real media."""
    from omnieval.datasets.synthetic import make_dissonance_benchmark

    return make_dissonance_benchmark(tmp_path_factory.mktemp("small-bench") / "b", seed=0, n_anchors=4,
                                     n_questions=1)


def media_specs_of(folder, n_anchors: int) -> list:
    """The media specs (sorted by path) of a new synthetic dissonance benchmark of ``n_anchors`` anchors, one
    question each, decoded small (2 frames, 32 px): for tests of the media cache itself."""
    from omnieval.config import parse_run_config
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.run.plan import make_plan

    bench = make_dissonance_benchmark(folder / "b", seed=0, n_anchors=n_anchors, n_questions=1)
    config = parse_run_config({"benchmark": str(bench), "output": str(folder / "unused"),
                               "models": [{"name": "s", "engine": "simulated"}],
                               "decode": {"num_frames": 2, "max_side": 32}})
    return sorted(make_plan(config).media_specs.values(), key=lambda s: s.path)


def first_items(bench, n: int, dest):
    """A copy of a benchmark folder holding only its first ``n`` items (media linked, not copied): for tests that
    need particular items, where ``limit_items`` would draw a seeded sample across splits."""
    import shutil
    from pathlib import Path

    bench, dest = Path(bench), Path(dest)
    shutil.copytree(bench, dest, copy_function=os.link, ignore=shutil.ignore_patterns("items.jsonl"))
    lines = (bench / "items.jsonl").read_text().splitlines(keepends=True)
    (dest / "items.jsonl").write_text("".join(lines[:n]))
    return dest
