"""The thinking prompt style and the chat template's thinking switch (engines/thinking.py) on a tiny build with a
Qwen3-style thinking template: the reasoning block is split off and kept, the answer is read after it, option-logprob
scoring never reads a reasoning token, and a template that always thinks is refused.

The tiny build is the ``qwen2`` one with ``<think>`` and ``</think>`` added as plain (not special) tokens, as Qwen3's
tokenizer has them, the embeddings grown to match, and the generation prompt of Qwen3's released chat template
(``enable_thinking`` false writes an empty block) or of a template that always opens ``<think>``. Its
``generation_config.json`` carries Qwen3's sampling values. References are computed here: the prompt rendered with
the tokenizer's own ``apply_chat_template`` and one plain forward pass.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from thinking_builds import ALWAYS_TEMPLATE, OPENING_TEMPLATE, QWEN3_TEMPLATE, thinking_build  # noqa: E402

from omnieval.core.prompts import parse_answer, render_prompt  # noqa: E402
from omnieval.core.schema import Instance, Segment  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.thinking import (  # noqa: E402
    FORCED_CLOSE,
    generation_settings,
    split_reasoning,
    template_mode,
)

LABELS = list("ABCDE")


@pytest.fixture(scope="module")
def builds(tiny_models, tmp_path_factory):
    base, root = tiny_models("qwen2"), tmp_path_factory.mktemp("thinking")
    return {"qwen3": thinking_build(base, root / "qwen3", QWEN3_TEMPLATE),
            "opening": thinking_build(base, root / "opening", OPENING_TEMPLATE),
            "always": thinking_build(base, root / "always", ALWAYS_TEMPLATE), "plain": base}


@pytest.fixture(scope="module")
def qwen3(builds):
    return create_engine("hf", model="tiny-qwen3", path=str(builds["qwen3"]), max_new_tokens=4, thinking_budget=6)


@pytest.fixture(scope="module")
def opening(builds):
    return create_engine("hf", model="tiny-opening", path=str(builds["opening"]), max_new_tokens=4,
                         thinking_budget=6)


def instance(n: int = 0) -> Instance:
    return Instance(instance_id=f"i{n}", item_id=f"it{n}", protocol="dissonance", benchmark="b", split="s",
                    condition="C111", segments=[Segment(kind="text", text="A dog barks twice.")],
                    question="What is heard?", option_labels=LABELS,
                    option_texts=["a dog", "a cat", "a car", "a drum", "I cannot answer"], target="A")


def reference(path, inst: Instance, style: str, thinking: bool, suffix: str = ""):
    """The prompt rendered by the tokenizer's own chat template with ``enable_thinking``, plus ``suffix``; the
    label tokens' log-softmax after it from one forward pass."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    content = [{"type": "text", "text": p.text} for p in render_prompt(inst, style)]
    text = tok.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                   add_generation_prompt=True, enable_thinking=thinking) + suffix
    with torch.no_grad():
        ids = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
        lp = torch.log_softmax(model(ids).logits[0, -1], dim=-1)
    return text, [lp[tok.encode(label, add_special_tokens=False)[0]].item() for label in LABELS]


def read_positions(engine, monkeypatch) -> list[str]:
    """The decoded inputs of every pass whose next-token logits the engine reads labels from."""
    seen, real = [], engine.next_token_logprobs

    def spy(batch):
        seen.extend(engine.tokenizer.decode(enc.input_ids) for enc in batch)
        return real(batch)

    monkeypatch.setattr(engine, "next_token_logprobs", spy)
    return seen


# -- the splitter, on controlled texts -------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "opened", "reasoning", "answer", "closed"), [
    ("<think>\nThe dog barks.\n</think>\n\nB", False, "The dog barks.", "B", True),
    ("  <think>Answer: A, or not.</think>The answer is C.", False, "Answer: A, or not.", "The answer is C.", True),
    ("It barks, so Answer: A?\n</think>\n\nAnswer: D", True, "It barks, so Answer: A?", "Answer: D", True),
    ("<think>I think it is A and", False, "I think it is A and", "", False),
    ("I think it is A and", True, "I think it is A and", "", False),
    ("It barks, so A.\n</think>\n\nD", False, "It barks, so A.", "D", True),
    ("C. a car", False, None, "C. a car", True),
    ("<think></think>\n\n(E)", False, "", "(E)", True),
])
def test_split_keeps_the_reasoning_apart_from_the_answer(text, opened, reasoning, answer, closed):
    split = split_reasoning(text, opened)
    assert (split.reasoning, split.answer, split.closed) == (reasoning, answer, closed)


def test_no_answer_is_taken_from_inside_a_reasoning_block():
    """The letter a reasoning names is not the answer: the text after the block is, and an unclosed block gives
    none (the engine then closes it and asks again)."""
    split = split_reasoning("<think>Maybe (A). Answer: A</think>\n\nThe answer is C.")
    assert parse_answer(split.answer, LABELS) == "C"
    assert parse_answer(split_reasoning("<think>Answer: A").answer, LABELS) is None


def test_template_modes_from_rendered_probes():
    assert template_mode("<|im_start|>assistant\n<think>\n\n</think>\n\n", "<|im_start|>assistant\n") == "switch"
    assert template_mode("<|im_start|>assistant\n<think>\n", "<|im_start|>assistant\n<think>\n") == "always"
    assert template_mode("<|im_start|>assistant\n", "<|im_start|>assistant\n") == "none"


def test_generation_settings_come_from_the_model_folder_for_thinking_only(tmp_path):
    (tmp_path / "generation_config.json").write_text(json.dumps({"temperature": 0.6, "top_p": 0.95, "top_k": 20,
                                                                 "do_sample": True, "max_new_tokens": 9}))
    assert generation_settings(tmp_path, "thinking") == {"temperature": 0.6, "top_p": 0.95, "top_k": 20,
                                                         "source": "generation_config.json"}
    assert generation_settings(tmp_path, "zs")["temperature"] == 0.0
    (tmp_path / "generation_config.json").write_text(json.dumps({"do_sample": False, "temperature": 0.7}))
    assert generation_settings(tmp_path, "thinking")["temperature"] == 0.0
    assert generation_settings(tmp_path / "missing", "thinking")["source"].startswith("greedy")


# -- the engine on the tiny thinking build ---------------------------------------------------------------------

def test_zero_shot_reads_the_labels_after_the_empty_think_block(builds, qwen3, monkeypatch):
    seen = read_positions(qwen3, monkeypatch)
    inst = instance(0)
    res = qwen3.score([EngineRequest(inst, {}, "zs")])[0]
    assert res.error is None and qwen3.template_mode() == "switch"
    assert seen[0].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    text, ref = reference(builds["qwen3"], inst, "zs", thinking=False)
    assert seen[0] == text
    np.testing.assert_allclose(res.option_logprobs, ref, atol=2e-5, rtol=0)


def test_a_template_that_always_thinks_refuses_zs_and_cot(builds):
    engine = create_engine("hf", model="tiny-always", path=str(builds["always"]), max_new_tokens=2)
    for style in ("zs", "cot"):
        res = engine.score([EngineRequest(instance(0), {}, style)])[0]
        assert res.choice is None and res.option_logprobs is None
        assert "'tiny-always'" in res.error and "always opens a reasoning block" in res.error
        assert "\n" not in res.error


def test_a_template_without_thinking_refuses_the_thinking_style(builds):
    engine = create_engine("hf", model="tiny-plain", path=str(builds["plain"]), max_new_tokens=2)
    res = engine.score([EngineRequest(instance(0), {}, "thinking")])[0]
    assert res.choice is None and "'tiny-plain'" in res.error and "no thinking switch" in res.error
    assert "\n" not in res.error


def test_thinking_answer_is_read_after_a_closed_block(builds, qwen3, monkeypatch):
    """A scripted generation (the random weights would not close a block): the reasoning names A, the answer after
    the block C; the choice is C, the reasoning and its token count are kept, and the labels are read at the first
    position after ``</think>\\n\\n``, checked against a forward pass of that text."""
    tok = qwen3.tokenizer
    reasoning = "It barks, so Answer: A maybe."
    script = iter([tok.encode(reasoning + "\n</think>", add_special_tokens=False),
                   tok.encode("The answer is C.", add_special_tokens=False)])
    contexts = []

    def sample(enc, max_new_tokens, seed, stop=()):
        contexts.append(tok.decode(enc.input_ids))
        return next(script)

    monkeypatch.setattr(qwen3, "sample_ids", sample)
    seen = read_positions(qwen3, monkeypatch)
    inst = instance(1)
    res = qwen3.score([EngineRequest(inst, {}, "thinking")])[0]
    assert res.error is None
    assert (res.choice, res.answer_source, res.raw_text) == ("C", "parsed", "The answer is C.")
    assert res.reasoning == reasoning
    assert res.reasoning_tokens == len(tok.encode(reasoning + "\n", add_special_tokens=False))
    text, ref = reference(builds["qwen3"], inst, "thinking", thinking=True, suffix=reasoning + "\n</think>\n\n")
    assert contexts == [text[:-len(reasoning + "\n</think>\n\n")], text] and seen == [text]
    np.testing.assert_allclose(res.option_logprobs, ref, atol=2e-5, rtol=0)


def test_thinking_on_the_random_build_closes_the_budget_and_samples_as_configured(builds, opening, monkeypatch):
    """The random model's own reasoning, in a block its template opened: sampled with Qwen3's settings from
    generation_config.json, cut at the budget (6 tokens) unless it closed it, the labels read after the close, the
    same text on a second run (seeded by the instance)."""
    qwen3 = opening
    calls, real = [], qwen3.net.generate

    def generate(**kwargs):
        calls.append({k: kwargs.get(k) for k in ("do_sample", "temperature", "top_p", "top_k", "max_new_tokens")})
        return real(**kwargs)

    monkeypatch.setattr(qwen3.net, "generate", generate)
    seen = read_positions(qwen3, monkeypatch)
    first = qwen3.score([EngineRequest(instance(2), {}, "thinking")])[0]
    again = qwen3.score([EngineRequest(instance(2), {}, "thinking")])[0]
    assert first.error is None and isinstance(first.reasoning, str) and isinstance(first.reasoning_tokens, int)
    assert calls[0] == {"do_sample": True, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_new_tokens": 6}
    assert calls[1]["max_new_tokens"] == 4
    assert (first.reasoning, first.raw_text, first.choice) == (again.reasoning, again.raw_text, again.choice)
    assert "<think>" not in (first.raw_text or "") and "</think>" not in (first.raw_text or "")
    prompt, _ = reference(builds["opening"], instance(2), "thinking", thinking=True)
    assert prompt.endswith("<think>\n") and seen[0].startswith(prompt) and first.reasoning_tokens <= 6
    after = seen[0][len(prompt):]  # the reasoning as generated, then the close: where the labels are read
    assert after.endswith(FORCED_CLOSE if first.reasoning_tokens == 6 else "</think>\n\n")
    assert after.rsplit("</think>", 1)[0].strip() == first.reasoning


def test_a_model_that_writes_no_block_answers_directly(qwen3):
    """Qwen3's own template leaves the block to the model; the random one never opens it: its text is the answer,
    with an empty reasoning of 0 tokens."""
    res = qwen3.score([EngineRequest(instance(2), {}, "thinking")])[0]
    assert res.error is None and (res.reasoning, res.reasoning_tokens) == ("", 0) and res.raw_text is not None


def test_thinking_rows_carry_the_reasoning_columns(opening):
    """The run's seam without Ray: request rows -> ``ModelCalls`` -> ``PredictionRows``: every thinking row has a
    string ``reasoning``, an integer ``reasoning_tokens`` within the budget and an answer text with no block in
    it; the zero-shot rows have neither column set."""
    from omnieval.run.answers import PredictionRows, answer_requests
    from omnieval.run.stages import call_rows

    insts = [instance(n) for n in range(3)]
    rows = list(answer_requests(insts, ["mcq"], ["zs", "thinking"], set(), {}))
    table = PredictionRows("tiny-opening", "hf")(call_rows(opening, rows))
    assert table.schema.field("reasoning_tokens").type == "int32"
    out = table.to_pylist()
    thinking = [r for r in out if r["prompt"] == "thinking"]
    assert len(thinking) == 3 and all(r["error"] is None for r in out)
    for r in thinking:
        assert isinstance(r["reasoning"], str) and 0 <= r["reasoning_tokens"] <= 6
        assert "</think>" not in (r["raw_text"] or "") and r["answer_source"] in ("parsed", "forced")
    assert all(r["reasoning"] is None and r["reasoning_tokens"] is None for r in out if r["prompt"] == "zs")


@pytest.mark.slow
def test_a_thinking_run_through_the_pipeline(ray_session, bench, builds, tmp_path):
    """``omnieval run`` with prompts zs and thinking on the tiny thinking build, inside Ray: every thinking row keeps
    its reasoning (a string, an int32 token count within the budget) apart from its answer text; the zero-shot rows
    have none; run.json records the sampling settings of each style: the folder's generation_config.json values for
    thinking, greedy for zs."""
    import polars as pl
    import pyarrow.parquet as pq

    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation

    model = {"name": "tiny-opening", "engine": "hf", "unsupported_media": "note",  # a text model: media as notes
             "options": {"path": str(builds["opening"]), "thinking_budget": 6, "max_new_tokens": 4}}
    config = parse_run_config({"benchmark": str(bench), "output": str(tmp_path / "run"), "models": [model],
                               "prompts": ["zs", "thinking"], "limit_items": 1,
                               "decode": {"num_frames": 4, "max_side": 96}})
    result = run_evaluation(config, progress=False)
    table = pq.read_table(result.predictions_path)
    assert table.schema.field("reasoning_tokens").type == "int32"
    df = pl.from_arrow(table)
    thinking, zs = df.filter(pl.col("prompt") == "thinking"), df.filter(pl.col("prompt") == "zs")
    assert thinking.height == zs.height == 8 and df["error"].null_count() == df.height
    assert df["skipped"].null_count() == df.height and df["media_noted"].null_count() == 0
    assert thinking["reasoning"].null_count() == 0 and thinking["reasoning_tokens"].is_between(0, 6).all()
    assert not thinking["raw_text"].str.contains("</think>").any()
    assert zs["reasoning"].null_count() == zs.height == zs["reasoning_tokens"].null_count()
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert record["generation"]["tiny-opening"] == {
        "thinking": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "source": "generation_config.json"},
        "zs": {"temperature": 0.0, "top_p": None, "top_k": None, "source": "greedy"}}


def test_an_open_ended_run_refuses_the_thinking_style(tmp_path):
    from omnieval.config import parse_run_config

    sim = {"name": "sim", "engine": "simulated"}
    with pytest.raises(ValueError, match="prompt style 'thinking' answers multiple-choice questions"):
        parse_run_config({"benchmark": str(tmp_path), "output": str(tmp_path / "out"), "models": [sim],
                          "prompts": ["zs", "thinking"], "modes": ["mcq", "open"], "judges": [dict(sim, name="j")]})


def test_the_simulated_engine_keeps_a_reasoning_that_names_another_option():
    """The simulated thinking model's block names another option than its answer: the row's choice is the letter of
    ``raw_text`` (parsed here), never the one inside ``reasoning``."""
    from omnieval.run.answers import PredictionRows, answer_requests
    from omnieval.run.stages import call_rows

    engine = create_engine("simulated", model="sim", seed=3)
    rows = list(answer_requests([instance(n) for n in range(6)], ["mcq"], ["thinking"], set(), {}))
    for r in PredictionRows("sim", "simulated")(call_rows(engine, rows)).to_pylist():
        inside = parse_answer(r["reasoning"], LABELS)
        assert r["choice"] == parse_answer(r["raw_text"], LABELS) != inside and inside is not None
        assert r["reasoning_tokens"] == len(r["reasoning"].split()) and r["answer_source"] == "parsed"


def test_an_engine_without_the_thinking_style_is_refused_before_model_work(bench, tmp_path):
    from omnieval.config import parse_run_config
    from omnieval.core.schema import InputError
    from omnieval.run.plan import make_plan

    model = {"name": "api", "engine": "openai", "options": {"base_url": "http://127.0.0.1:9", "served_model": "m"}}
    config = parse_run_config({"benchmark": str(bench), "output": str(tmp_path / "out"), "models": [model],
                               "prompts": ["zs", "thinking"]})
    with pytest.raises(InputError, match="engine 'openai' of 'api' does not run prompt style 'thinking'"):
        make_plan(config, expand=False)
