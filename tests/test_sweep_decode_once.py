"""A sweep decodes each media file once: its runs share a decoded-media store under the sweep's output, so three
models side by side decode, summed over their runs, as many times as the benchmark has distinct media (counted
here from the files' bytes), and a rerun with one model's option changed (new runs) decodes nothing. The store on a
real S3 server (moto's, as tests/test_remote_store.py) serves a second run every media file."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from test_decoded_store import distinct_media
from test_remote_store import s3  # noqa: F401 - the S3 server fixture

from omnieval.sweep import SweepRunner, parse_sweep_config

pytestmark = pytest.mark.slow

MODELS = [("sim-a", {"seed": 1}), ("sim-b", {"seed": 2, "reliance": {"text": 0.9}}), ("sim-c", {"seed": 3})]


def _sweep_data(bench, output, options: dict | None = None) -> dict:
    options = options or {}
    return {"name": "once", "output": str(output), "prompts": ["zs"],
            "protocols": [{"protocol": "dissonance", "benchmark": str(bench)}],
            "models": [{"name": n, "engine": "simulated", "replicas": 1, "num_cpus": 0.5, "batch_size": 8,
                        "options": {**o, **options.get(n, {}), "batch_s": 0.05}} for n, o in MODELS],
            "decode": {"num_frames": 4, "max_side": 96, "media_check": "exists"}, "metrics": {"resamples": 20},
            "max_concurrent_models": 3, "progress_interval_s": 0.5}


def _counts(result) -> dict[str, dict]:
    return {r.model: json.loads((Path(r.output) / "run.json").read_text())["counts"] for r in result.runs}


def test_a_sweep_decodes_each_media_file_once_and_a_changed_model_decodes_none(ray_session, small_bench, tmp_path):
    n = distinct_media(small_bench)
    out = tmp_path / "sweep"
    first = SweepRunner(parse_sweep_config(_sweep_data(small_bench, out)), log=lambda m: None).run()
    assert [r.status for r in first.runs] == ["done"] * 3
    counts = _counts(first)
    decodes = sum(c["decodes"] for c in counts.values())
    # every pass looked up every file once: decoded, or read from the store
    assert decodes + sum(c["decoded_store_hits"] for c in counts.values()) == 3 * n
    # each file decoded once: the passes side by side share one claims actor (tests/test_decode_claims.py)
    assert decodes == n
    assert all(c["decoded_store_rejected"] == 0 for c in counts.values())
    assert len(list((out / "media").rglob("*.omdm"))) == n
    totals = json.loads((out / "summary.json").read_text())["totals"]
    assert (totals["decodes"], totals["decoded_store_hits"]) == (first.decodes, first.decoded_store_hits)
    assert first.decodes == decodes and first.decodes + first.decoded_store_hits == 3 * n
    from omnieval.media import claims

    assert not [where for where in claims._HELD if where[2].startswith(str(out))]  # its claims actor let go

    # sim-b with another temperature-like option: its run is new, the others are complete
    changed = {"sim-b": {"reliance": {"text": 0.5}}}
    again = SweepRunner(parse_sweep_config(_sweep_data(small_bench, out, changed)), log=lambda m: None).run()
    assert {r.model: r.status for r in again.runs} == {"sim-a": "skipped", "sim-b": "done", "sim-c": "skipped"}
    redone = _counts(again)["sim-b"]
    assert (redone["decodes"], redone["decoded_store_hits"], redone["decoded_store_rejected"]) == (0, n, 0)
    assert (again.decodes, again.decoded_store_hits) == (0, n)

    # the same predictions as the run of that config alone, without a store
    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation

    model = next(m for m in _sweep_data(small_bench, out, changed)["models"] if m["name"] == "sim-b")
    alone = run_evaluation(parse_run_config({"benchmark": str(small_bench), "output": str(tmp_path / "alone"),
                                             "prompts": ["zs"], "models": [model], "seed": 0,
                                             "decode": {"num_frames": 4, "max_side": 96}}), progress=False)
    swept = next(r.output for r in again.runs if r.model == "sim-b")
    want = pl.read_parquet(alone.predictions_path).drop("latency_s")
    assert pl.read_parquet(Path(swept) / "predictions.parquet").drop("latency_s").equals(want)


def test_the_store_on_s3_serves_a_second_run(s3, small_bench, tmp_path):  # noqa: F811
    """Ray started again after the S3 server: its workers (which read and write the store) see the server's
    credentials. (Workers without them write unsigned chunked uploads that moto keeps as they came; the checksum
    rejects every such entry, which is how this test first failed.)"""
    import ray
    from conftest import start_local_ray

    from omnieval.config import parse_run_config
    from omnieval.media.decoded_store import DecodedStore
    from omnieval.run.pipeline import run_evaluation

    if ray.is_initialized():
        ray.shutdown()
    start_local_ray()
    n = distinct_media(small_bench)
    store = s3("media-store")

    def run(name: str):
        return run_evaluation(parse_run_config(
            {"benchmark": str(small_bench), "output": str(tmp_path / name), "prompts": ["zs"],
             "models": [{"name": "sim", "engine": "simulated", "batch_size": 8, "options": {"seed": 5}}],
             "decode": {"num_frames": 4, "max_side": 96, "store": store}}), progress=False)

    filled = run("filled")
    assert sum(filled.decode_counts.values()) == n and filled.store_hits == 0
    assert len(DecodedStore(store).keys()) == n
    read = run("read")
    assert read.decode_counts == {} and read.store_hits == n
    assert pl.read_parquet(read.predictions_path).drop("latency_s").equals(
        pl.read_parquet(filled.predictions_path).drop("latency_s"))
