"""The Ray Data pipeline end to end on the synthetic benchmark with real media files (local Ray)."""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from omnieval.config import parse_run_config
from omnieval.protocols import dissonance
from omnieval.run.pipeline import run_evaluation

pytestmark = pytest.mark.slow


def _config(bench, out, models, **kw):
    data = {"benchmark": str(bench), "output": str(out), "models": models, "prompts": kw.pop("prompts", ["zs"]),
            "decode": {"num_frames": 4, "max_side": 96, **kw.pop("decode", {})}, **kw}
    return parse_run_config(data)


SIM = {"name": "sim", "engine": "simulated", "options": {"seed": 1}}


def _table(path) -> pa.Table:
    return pq.read_table(path)


def test_end_to_end_counts_columns_and_decode_once(ray_session, bench, tmp_path):
    models = [SIM, {"name": "sim-text", "engine": "simulated", "options": {"reliance": {"text": 0.9}}}]
    result = run_evaluation(_config(bench, tmp_path / "run", models, prompts=["zs", "cot"]), progress=False)
    table = _table(result.predictions_path)
    n_items = sum(1 for _ in open(Path(bench) / "items.jsonl"))
    assert result.n_instances == n_items * 8
    assert table.num_rows == n_items * 8 * 2 * 2 == result.n_rows
    df = pl.from_arrow(table)
    assert df.select(pl.struct("model", "prompt", "instance_id").n_unique()).item() == table.num_rows
    assert set(df["condition"].unique()) == set(dissonance.CONDITIONS)
    assert df["error"].null_count() == table.num_rows and (df["engine"] == "simulated").all()
    assert df["choice"].is_in(["A", "B", "C", "D", "E"]).all()
    # every distinct media file decoded exactly once, although each is used by many instances and two models
    assert result.decode_counts and set(result.decode_counts.values()) == {1}
    from omnieval.run.plan import make_plan

    plan = make_plan(_config(bench, tmp_path / "unused", models))
    assert len(result.decode_counts) == len({s.key for s in plan.media_specs.values()})
    record = __import__("json").loads((tmp_path / "run" / "run.json").read_text())
    assert record["counts"]["predictions"] == table.num_rows and record["versions"]["ray"]


def _canonical(path) -> bytes:
    """The predictions table without the one column that measures time, serialised to bytes."""
    table = _table(path).drop_columns(["latency_s"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def test_same_predictions_for_any_replicas_and_batch_size(ray_session, bench, tmp_path):
    outs = []
    for replicas, batch in [(1, 4), (2, 4), (2, 32)]:
        model = SIM | {"replicas": replicas, "batch_size": batch}
        result = run_evaluation(_config(bench, tmp_path / f"r{replicas}b{batch}", [model]), progress=False)
        outs.append(_canonical(result.predictions_path))
    assert outs[0] == outs[1] == outs[2]


@pytest.mark.parametrize("modality", ["text", "video"])
def test_known_answer_single_modality_model(ray_session, bench, tmp_path, modality):
    """A model that relies on one modality only: near its set accuracy where that modality is clean (k<=1), near
    chance where it is replaced at k=1 (it then sees no support for any option and guesses among the answers)."""
    model = {"name": f"{modality}-only", "engine": "simulated",
             "options": {"reliance": {modality: 0.9}, "abstain_on_unsupported": 0.0, "margin": 12.0, "noise": 0.5}}
    result = run_evaluation(_config(bench, tmp_path / "run", [model], prompts=["zs", "cot"]), progress=False)
    df = pl.from_arrow(_table(result.predictions_path)).with_columns(ok=pl.col("choice") == pl.col("target"))
    acc = dict(df.group_by("condition").agg(pl.col("ok").mean()).iter_rows())
    n = df.filter(pl.col("condition") == "C000").height
    expected = 0.9 + 0.1 * 0.25
    position = {"video": 0, "audio": 1, "text": 2}[modality]
    for cond in ("C000", "C100", "C010", "C001"):
        if cond[1 + position] == "0":
            assert abs(acc[cond] - expected) < 4 * math.sqrt(expected * (1 - expected) / n) + 0.02, (cond, acc)
        else:  # chance among the answers, unless the replacement anchor's answer happens to be an option
            assert acc[cond] < 0.45, (cond, acc)


def test_runtime_decode_failure_marks_only_its_instances(ray_session, bench, tmp_path):
    broken = tmp_path / "bench"
    shutil.copytree(bench, broken)
    victim = sorted((broken / "media").rglob("*.mp4"))[0]
    victim.write_bytes(victim.read_bytes()[:300])  # header survives, the stream does not
    rel = str(victim.relative_to(broken))
    result = run_evaluation(_config(broken, tmp_path / "run", [SIM], decode={"media_check": "exists"}),
                            progress=False)
    df = pl.from_arrow(_table(result.predictions_path))
    from omnieval.run.plan import make_plan

    plan = make_plan(_config(broken, tmp_path / "unused", [SIM], decode={"media_check": "exists"}))
    uses = {i.instance_id for i in plan.load_instances() if any(s.path == rel for s in i.segments)}
    errored = set(df.filter(pl.col("error").is_not_null())["instance_id"])
    assert uses and errored == uses
    assert df.filter(pl.col("error").is_not_null())["choice"].null_count() == len(uses)
    assert rel.split("/")[-1] in df.filter(pl.col("error").is_not_null())["error"][0]
    assert df.height == result.n_instances
    record = __import__("json").loads((tmp_path / "run" / "run.json").read_text())
    assert record["errors"]["count"] == len(uses) == record["errors"]["by_kind"]["media"]
    assert record["git_commit"] is None or len(record["git_commit"]) >= 40


def test_interrupted_run_resumes_with_every_instance_exactly_once(bench, tmp_path):
    """Kill the whole process group (driver and its local Ray) half way, rerun, count instance ids."""
    config = {"benchmark": str(bench), "output": str(tmp_path / "run"), "prompts": ["zs"],
              "models": [{"name": "slow", "engine": "simulated", "batch_size": 4,
                          "options": {"delay_ms": 40, "seed": 2}}],
              "decode": {"num_frames": 4, "max_side": 96}, "ray": {"num_cpus": 4}}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "omnieval.cli", "run", str(path)]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parts = tmp_path / "run" / "parts" / "slow"
    deadline = time.time() + 120
    while time.time() < deadline and not list(parts.glob("part-*.parquet")):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    first = pa.concat_tables([pq.read_table(p) for p in parts.glob("part-*.parquet")])
    total = sum(1 for _ in open(Path(bench) / "items.jsonl")) * 8
    assert 0 < first.num_rows < total, "the run must have been interrupted half way"
    assert not (tmp_path / "run" / "predictions.parquet").exists()

    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"resumed (skipped): {first.num_rows}" in done.stdout
    final = pl.from_arrow(_table(tmp_path / "run" / "predictions.parquet"))
    assert final.height == total and final["instance_id"].n_unique() == total
    every_part = pa.concat_tables([pq.read_table(p) for p in parts.glob("part-*.parquet")])
    assert every_part.num_rows == total  # nothing scored twice


def test_tiny_transformers_omni_model_through_the_pipeline(ray_session, bench, tmp_path, tiny_models):
    """The real transformers path inside Ray actors on decoded video and audio: valid choices, confidences from the
    restricted softmax of the option logprobs, and the same table again with two replicas."""
    import numpy as np
    from scipy.special import softmax

    path = tiny_models("qwen2.5-omni")
    tables = []
    for replicas in (1, 2):
        model = {"name": "tiny-omni", "engine": "hf", "replicas": replicas, "batch_size": 4,
                 "options": {"path": str(path)}}
        result = run_evaluation(_config(bench, tmp_path / f"run{replicas}", [model], limit_items=2),
                                progress=False)
        tables.append(_canonical(result.predictions_path))
    df = pl.from_arrow(_table(result.predictions_path))
    assert df.height == 16 and df["error"].null_count() == 16 and (df["engine"] == "hf").all()
    for row in df.iter_rows(named=True):
        probs = softmax(np.array(row["option_logprobs"]))
        assert row["choice"] == "ABCDE"[int(np.argmax(probs))]
        assert row["confidence"] == pytest.approx(probs.max(), rel=1e-9)
    assert df["choice"].n_unique() > 1  # the media and texts differ, so do the answers
    assert tables[0] == tables[1]


def test_run_summary_pools_option_orders_into_one_column():
    """Contrastive runs have up to 24 orders per item: the summary shows ``perm:*`` (pooled accuracy) instead."""
    import pyarrow as pa

    from omnieval.run.pipeline import accuracy_by_condition

    table = pa.table({"model": ["m"] * 5, "prompt": ["zs"] * 5,
                      "condition": ["original", "perm:BA", "perm:CAB", "perm:CBA", "captions:perm:BA"],
                      "target": ["A", "B", "C", "C", "B"], "choice": ["A", "B", "A", None, "A"]})
    text = accuracy_by_condition(table)
    header = text.splitlines()[1]
    assert "perm:*" in header and "perm:BA" not in header and "captions:perm:*" in header
    row = text.splitlines()[3]
    # original 1/1; perm:* = 1 of the 2 valid (BA right, CAB wrong, CBA invalid); captions:perm:* 0/1
    assert [c.strip() for c in row.strip("│ ").split("┆")] == ["m", "zs", "0.0", "1.0", "0.5"]


def test_a_prediction_keeps_only_answers_the_instance_allows():
    """The one row builder: a choice outside the instance's labels is no answer (and has no confidence), an open
    reply's graded part is after its last ``Answer:``, an empty reply is an error, and a row that never reached the
    model has no latency. Expected values written out by hand from docs/reference.md, Predictions."""
    from omnieval.core.schema import PREDICTION_SCHEMA, Instance
    from omnieval.run.predictions import Prediction

    inst = Instance(protocol="dissonance", benchmark="b", split="s", item_id="i", instance_id="i|x", condition="x",
                    target="B", question="q?", option_labels=["A", "B"], option_texts=["a cat", "a dog"], segments=[])
    valid = Prediction.scored(inst, "m", "simulated", "zs", choice="B", confidence=0.7, confidence_method="rs",
                              option_logprobs=[-2.0, -0.5], latency_s=0.1).row()
    assert (valid["choice"], valid["confidence"], valid["confidence_method"]) == ("B", 0.7, "rs")
    assert (valid["n_options"], valid["target"], valid["mode"], valid["reference"]) == (2, "B", "mcq", None)
    outside = Prediction.scored(inst, "m", "simulated", "zs", choice="C", confidence=0.9, confidence_method="rs",
                                raw_text="C").row()
    assert (outside["choice"], outside["confidence"], outside["confidence_method"], outside["raw_text"]) == \
        (None, None, None, "C")
    opened = Prediction.generated(inst, "m", "simulated", "cot", raw_text="It barks.\nAnswer: a dog",
                                  latency_s=0.2).row()
    assert (opened["mode"], opened["answer_text"], opened["reference"], opened["error"]) == \
        ("open", "a dog", "a dog", None)
    empty = Prediction.generated(inst, "m", "simulated", "zs", raw_text="  ").row()
    assert empty["error"] == "open answer: the model returned no text" and empty["answer_text"] == ""
    assert (empty["error_kind"], opened["error_kind"], valid["error_kind"]) == ("other", None, None)
    failed = Prediction.failed(inst, "m", "simulated", "zs", "open", "describe failed: x.wav: no text",
                               "describe").row()
    assert (failed["mode"], failed["latency_s"], failed["answer_text"], failed["reference"], failed["error_kind"]) \
        == ("open", None, None, "a dog", "describe")
    for error, kind in (("engine error: OOM", None), (None, "engine"), ("engine error: OOM", "decode")):
        with pytest.raises(ValueError, match="kind"):
            Prediction.scored(inst, "m", "simulated", "zs", choice=None, error=error, error_kind=kind)
    assert all(set(r) == set(PREDICTION_SCHEMA.names) for r in (valid, outside, opened, empty, failed))

