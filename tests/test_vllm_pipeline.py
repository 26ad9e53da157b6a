"""``run_evaluation`` end to end with the vLLM engine on CPU (vllm-cpu; skipped where vLLM is not importable): the
tiny random-weight Qwen2 answers multiple-choice and open-ended (``zs`` and ``cot``), and a tiny vLLM judge grades
the open answers, all through the run's one model stage (``stages.ModelStage`` in Ray Data actor pools).

The reference is the engine called directly in this process, without Ray, on media decoded here: the predictions
must carry exactly its choices, confidences, option logprobs, texts and errors, and the verdicts must be what a
plain loop of judge prompt -> strict parse -> one retry with the reminder gives. The benchmark carries a video that
fails at decode time and an item whose question is longer than the model's context: those rows are errored
predictions (no model call for the first) while the rest complete; a rerun retries only the errored rows."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine: starts in ~3 s, not ~15 s
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")  # skips a ~12 s torch.compile of the logprob gather on CPU
vllm = pytest.importorskip("vllm")

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from omnieval.config import parse_run_config  # noqa: E402
from omnieval.engines.vllm_cpu import CPU_ENGINE_OPTIONS  # noqa: E402
from omnieval.run.pipeline import run_evaluation  # noqa: E402
from omnieval.run.plan import make_plan  # noqa: E402

pytestmark = pytest.mark.slow

MAX_MODEL_LEN = 2048
OPTIONS = {**CPU_ENGINE_OPTIONS, "max_model_len": MAX_MODEL_LEN, "max_new_tokens": 16}
LONG_QUESTION = "Which passage is it?" + " passage" * 400  # 2,400+ tokens with the tiny tokenizer


def _config(bench, out, model_path):
    return parse_run_config({
        "benchmark": str(bench), "output": str(out), "prompts": ["zs", "cot"], "modes": ["mcq", "open"],
        "decode": {"num_frames": 4, "max_side": 96, "media_check": "exists"},  # the broken video fails at decode
        "models": [{"name": "tiny-vllm", "engine": "vllm", "batch_size": 8, "unsupported_media": "note",
                    "options": {"path": str(model_path), **OPTIONS}}],
        "judges": [{"name": "tiny-judge", "engine": "vllm", "batch_size": 16,
                    "options": {"path": str(model_path), **OPTIONS}}]})


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_models):
    """Tiny Qwen2 + a 2-anchor, 2-question dissonance benchmark (32 instances) with one video truncated and the
    question of one item (of the other anchor) made longer than ``MAX_MODEL_LEN``."""
    from transformers import AutoTokenizer

    from omnieval.datasets.synthetic import make_dissonance_benchmark

    tmp = tmp_path_factory.mktemp("vllm-pipeline")
    model_path = tiny_models("qwen2")
    assert len(AutoTokenizer.from_pretrained(model_path)(LONG_QUESTION)["input_ids"]) > MAX_MODEL_LEN
    source = make_dissonance_benchmark(tmp / "source", n_anchors=2, n_questions=2, splits=("real",))
    bench = tmp / "bench"
    shutil.copytree(source, bench)
    victim = sorted((bench / "media").rglob("*.mp4"))[0]
    victim.write_bytes(victim.read_bytes()[:300])  # header survives, the stream does not
    broken = str(victim.relative_to(bench))
    items = [json.loads(line) for line in (bench / "items.jsonl").read_text().splitlines()]
    long = next(i for i in items if i["media"]["video"] != broken)
    long["question"] = LONG_QUESTION
    (bench / "items.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))
    config = _config(bench, tmp / "run", model_path)
    return config, broken, long["item_id"]


@pytest.fixture(scope="module")
def run(ray_session, setup):
    config, _, _ = setup
    result = run_evaluation(config, progress=False)
    return result, pl.read_parquet(result.predictions_path)


@pytest.fixture(scope="module")
def reference(setup):
    """The engine called directly: mcq results and open texts per (prompt, instance_id), media decoded here."""
    from omnieval.core.prompts import render_open_prompt
    from omnieval.engines.base import EngineRequest, GenerationRequest, create_engine
    from omnieval.media.decode import MediaError, decode_media

    config, broken, _ = setup
    plan = make_plan(config)
    engine = create_engine("vllm", model="reference", path=config.models[0].options["path"], **OPTIONS)
    media: dict[str, object] = {}
    for path, spec in plan.media_specs.items():
        try:
            media[path] = decode_media(spec.path, spec.modality, **dict(spec.params))
        except MediaError:
            assert path == broken
    ok = [i for i in plan.load_instances() if all(s.path in media for s in i.media_segments())]
    scored, generated = {}, {}
    for style in config.prompts:
        requests = [EngineRequest(i, {s.path: media[s.path] for s in i.media_segments()}, style) for i in ok]
        scored |= {(style, r.instance.instance_id): res for r, res in zip(requests, engine.score(requests),
                                                                          strict=True)}
        opened = [GenerationRequest(render_open_prompt(i, style), {s.path: media[s.path] for s in i.media_segments()})
                  for i in ok]
        generated |= {(style, i.instance_id): res for i, res in zip(ok, engine.generate(opened), strict=True)}
    yield engine, plan, scored, generated
    engine.close()  # its KV cache is RAM on CPU: free it for the next module's engines
    import gc

    gc.collect()


def test_rows_are_what_the_engine_says_when_called_directly(run, reference, setup):
    _, broken, long_id = setup
    result, df = run
    _, plan, scored, generated = reference
    assert result.n_instances == 32 and df.height == 128
    undecodable = {i.instance_id for i in plan.load_instances() if any(s.path == broken for s in i.segments)}
    assert undecodable and len(undecodable) < 32
    checked = {"mcq": 0, "open": 0}
    for row in df.iter_rows(named=True):
        key = (row["prompt"], row["instance_id"])
        if row["instance_id"] in undecodable:
            assert row["error"].startswith("media decode failed") and broken.split("/")[-1] in row["error"]
            assert row["choice"] is None and row["latency_s"] is None
            continue
        if row["mode"] == "mcq":
            want = scored[key]
            assert (row["choice"], row["raw_text"], row["error"]) == (want.choice, want.raw_text, want.error)
            if want.option_logprobs is not None:
                np.testing.assert_allclose(row["option_logprobs"], want.option_logprobs, atol=1e-4)
                np.testing.assert_allclose(row["confidence"], want.confidence, atol=1e-4)
        else:
            want = generated[key]
            assert row["raw_text"] == want.raw_text and row["choice"] is None and row["reference"]
            if want.error is not None:
                assert row["error"] == want.error
            elif not (want.raw_text or "").strip():
                assert row["error"] == "open answer: the model returned no text"
            else:
                assert row["error"] is None and row["answer_text"]
        checked[row["mode"]] += 1
    assert checked["mcq"] == checked["open"] == 64 - 2 * len(undecodable)
    assert df.filter(pl.col("mode") == "mcq")["choice"].n_unique() > 1  # not vacuous: answers differ
    long_rows = df.filter(pl.col("item_id") == long_id)
    assert long_rows.height and all((e or "").startswith(("vllm engine: ", "media decode failed"))
                                    for e in long_rows["error"].to_list())


def test_verdicts_follow_the_strict_parse_and_one_retry(run, reference):
    """Each open answer without an error is graded as a plain loop would: the judge prompt, the strict parse, and
    when that fails one more ask with the reminder; the verdict is None when both fail."""
    from omnieval.core.judges import (
        MAX_VERDICT_TOKENS,
        RETRY_SUFFIX,
        JudgeCase,
        allowed_verdicts,
        judge_prompt,
        parse_verdict,
    )
    from omnieval.core.prompts import PromptPart
    from omnieval.engines.base import GenerationRequest

    _, df = run
    engine, plan, _, _ = reference
    instances = {i.instance_id: i for i in plan.load_instances()}
    graded = df.filter((pl.col("mode") == "open") & pl.col("error").is_null())
    assert graded.height > 0
    for row in graded.iter_rows(named=True):
        inst = instances[row["instance_id"]]
        case = JudgeCase(key="", question=inst.question, reference=row["reference"], answer=row["answer_text"],
                         abstention=inst.abstain_label is not None,
                         reference_is_abstention=inst.abstain_label is not None and inst.target == inst.abstain_label)
        text = judge_prompt(case)
        for attempt in (1, 2):  # noqa: B007 (the last attempt is the expected count)
            reply = engine.generate([GenerationRequest([PromptPart("text", text=text)],
                                                       max_new_tokens=MAX_VERDICT_TOKENS)])[0].raw_text
            verdict = parse_verdict(reply, allowed_verdicts(case))
            if verdict is not None:
                break
            text += RETRY_SUFFIX.format(words=", ".join(allowed_verdicts(case)))
        [got] = row["verdicts"]
        assert (got["judge"], got["verdict"], got["raw_text"], got["attempts"]) == \
            ("tiny-judge", verdict, reply, attempt)


def test_rerun_retries_only_the_errored_rows(run, setup):
    config, _, _ = setup
    first, before = run
    judged = pl.read_parquet(Path(config.output) / "judgements" / "tiny-judge" / "*.parquet").height
    again = run_evaluation(config, progress=False)
    assert again.n_rows == first.n_errors and again.n_skipped == 128 - first.n_errors
    after = pl.read_parquet(again.predictions_path)
    assert after.drop("latency_s").equals(before.drop("latency_s"))
    parts = pl.read_parquet(Path(config.output) / "parts" / "tiny-vllm" / "*.parquet")
    assert parts.height == 128 + first.n_errors  # nothing that had finished was asked twice
    assert pl.read_parquet(Path(config.output) / "judgements" / "tiny-judge" / "*.parquet").height == judged
