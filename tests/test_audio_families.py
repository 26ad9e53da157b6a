"""The audio-and-text families on the transformers engine (tiny builds, no vLLM): what each one's adapter gives the
model against its published processor called directly on a hand-written message, and what each refuses. (Both
engines through a whole run: tests/test_vllm_family_runs.py.)

* Voxtral: the rendered prompt is read back into the user message it stands for; the ids and log-mel features equal
  ``VoxtralProcessor.apply_chat_template`` on that message written out here (its clips as float WAV), the ``[AUDIO]``
  runs 375 tokens per started 30 s, text after ``[/INST]`` appended as its own tokens.
* Audio Flamingo 3: its processor itself refuses one prompt with several audios; the adapter says so in one line.
* Granite Speech: the engine's option logprobs are the log-softmax of the model's logits divided by the decoder's
  ``logits_scaling``, computed here from one forward pass."""

from __future__ import annotations

import base64
import io
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from omnieval.core.prompts import PromptPart, render_prompt  # noqa: E402
from omnieval.core.schema import Instance, Segment  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.families import family_for, load_processor  # noqa: E402
from omnieval.media.decoded import DecodedMedia  # noqa: E402


def wave(seed: int, samples: int) -> DecodedMedia:
    data = (0.1 * np.random.default_rng(seed).standard_normal(samples)).astype(np.float32)
    return DecodedMedia("audio", data, f"a{seed}", path=f"a{seed}.wav", sample_rate=16000)


def instance(*paths: str) -> Instance:
    segments = [Segment(kind="media", modality="audio", path=p) for p in paths]
    return Instance(instance_id="i", item_id="i", protocol="dissonance", benchmark="b", split="s", condition="C000",
                    segments=[*segments, Segment(kind="text", text="Text: a passage")], question="Which is it?",
                    option_labels=list("ABCD"), option_texts=["dog", "cat", "car", "bird"], target="A")


SHORT, LONG = wave(1, 40_000), wave(2, 500_000)  # 2.5 s; 31.25 s: two 30 s chunks


def wav_base64(item: DecodedMedia) -> str:
    import soundfile

    out = io.BytesIO()
    soundfile.write(out, item.data, 16000, format="WAV", subtype="FLOAT")
    return base64.b64encode(out.getvalue()).decode()


def test_voxtral_inputs_equal_its_processor_on_the_message_written_out(tiny_models):
    pytest.importorskip("mistral_common")
    pytest.importorskip("soundfile")
    path = tiny_models("voxtral")
    adapter, processor = family_for(path), load_processor(path)
    parts = [PromptPart(kind="media", modality="audio", path="a1.wav"),
             PromptPart(kind="text", text="Which "), PromptPart(kind="text", text="one?"),
             PromptPart(kind="media", modality="audio", path="a2.wav"),
             PromptPart(kind="media", modality="pointcloud", path="p.ply"),
             PromptPart(kind="text", text="Answer:")]
    text = adapter.prompt(processor, parts)
    assert text == ("<s>[INST][BEGIN_AUDIO][AUDIO]Which one?[BEGIN_AUDIO][AUDIO]"
                    "[pointcloud omitted: this model does not take pointcloud]\nAnswer:[/INST]")
    got = adapter.hf_inputs(processor, text, [SHORT, LONG])
    message = [{"role": "user", "content": [
        {"type": "audio", "base64": wav_base64(SHORT)}, {"type": "text", "text": "Which one?"},
        {"type": "audio", "base64": wav_base64(LONG)},
        {"type": "text", "text": "[pointcloud omitted: this model does not take pointcloud]\nAnswer:"}]}]
    want = processor.apply_chat_template(message, tokenize=True, return_dict=True, return_tensors="pt")
    assert set(got) == set(want) == {"input_ids", "attention_mask", "input_features"}
    for key in want:
        assert torch.equal(got[key], want[key]), key
    ids = got["input_ids"][0].tolist()
    # <s> [INST] [BEGIN_AUDIO] 375 x [AUDIO] ... : one 30 s chunk for 2.5 s, two for 31.25 s
    assert ids[:4] == [1, 3, 25, 24] and ids[-1] == 4
    assert ids.count(24) == 375 * (math.ceil(40_000 / 480_000) + math.ceil(500_000 / 480_000)) == 1125
    assert ids.count(25) == 2 and got["input_features"].shape == (3, 128, 3000)

    # text after [/INST] (chain-of-thought reasoning) follows as its own tokens
    more = adapter.hf_inputs(processor, text + " A", [SHORT, LONG])
    tail = processor.tokenizer.encode(" A", add_special_tokens=False)
    assert more["input_ids"][0].tolist() == ids + tail and more["attention_mask"].sum() == len(ids) + len(tail)
    with pytest.raises(ValueError, match="2 clips in the prompt, 1 given"):
        adapter.hf_inputs(processor, text, [SHORT])


def test_voxtral_engine_scores_with_mistral_tokens(tiny_models):
    pytest.importorskip("mistral_common")
    pytest.importorskip("soundfile")
    engine = create_engine("hf", model="v", path=str(tiny_models("voxtral")))
    request = EngineRequest(instance("a1.wav"), {"a1.wav": SHORT}, "zs")
    parts = render_prompt(request.instance, request.prompt_style)
    enc = engine.encode(request.media, parts, engine.prompt_text(parts))
    assert enc["input_ids"][0].tolist().count(24) == 375
    result = engine.score([request])[0]
    assert result.error is None and len(result.option_logprobs) == 4
    assert all(lp < 0 for lp in result.option_logprobs)


def test_audio_flamingo_3_takes_one_audio_a_prompt_as_its_processor_does(tiny_models):
    path = tiny_models("audioflamingo3")
    adapter, processor = family_for(path), load_processor(path)
    text = "<sound><sound>Which?"
    with pytest.raises(ValueError, match="1 text but 2 audios"):  # the published processor itself
        processor(text=[text], audio=[SHORT.data, LONG.data], sampling_rate=16000)
    with pytest.raises(ValueError, match="audioflamingo3 takes one audio a prompt \\(2 given\\)"):
        adapter.hf_inputs(processor, text, [SHORT, LONG])
    with pytest.raises(ValueError, match="one audio a prompt"):
        adapter.vllm_fields([SHORT, LONG])
    one = adapter.hf_inputs(processor, "<sound>Which?", [SHORT])
    frames = math.ceil(40_000 / 160)  # 250 mel frames -> 125 after the stride-2 conv -> 62 after the pooling
    assert one["input_ids"][0].tolist().count(processor.audio_token_id) == ((frames - 1) // 2 + 1 - 2) // 2 + 1 == 62


def test_granite_speech_logprobs_are_the_decoder_logits_divided_by_its_scaling(tiny_models):
    pytest.importorskip("torchaudio")
    path = tiny_models("granite-speech")
    engine = create_engine("hf", model="g", path=str(path))
    scaling = engine.net.config.text_config.logits_scaling
    assert scaling == 8.0 and engine.logit_scale == 1 / 8
    request = EngineRequest(instance("a1.wav"), {"a1.wav": SHORT}, "zs")
    parts = render_prompt(request.instance, request.prompt_style)
    enc = engine.encode(request.media, parts, engine.prompt_text(parts))
    with torch.no_grad():
        logits = engine.net(**{k: v for k, v in enc.items()}).logits[0, -1].double()
    want = torch.log_softmax(logits / scaling, dim=-1)
    labels = [engine.tokenizer.encode(c, add_special_tokens=False)[0] for c in "ABCD"]
    got = engine.score([request])[0].option_logprobs
    np.testing.assert_allclose(got, [float(want[t]) for t in labels], atol=1e-5)
    # unscaled, they would differ (the test can fail)
    assert not np.allclose(got, torch.log_softmax(logits, dim=-1)[labels].numpy(), atol=1e-2)


def test_voxtral_without_mistral_common_is_one_line_naming_it(tiny_models, monkeypatch):
    """Before the tokenizer (mistral_common's) is asked for: the family's packages are checked first."""
    import importlib.util

    path = tiny_models("voxtral") if importlib.util.find_spec("mistral_common") else pytest.skip("mistral_common")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mistral_common" else
                        real(name, *a))
    with pytest.raises(RuntimeError) as caught:
        create_engine("hf", model="v", path=str(path))
    assert "a voxtral model needs the 'mistral_common' package" in str(caught.value)
    assert "\n" not in str(caught.value)
