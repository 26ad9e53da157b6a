"""The transformers engine on the tiny random-weight models: scores equal an independent forward pass, media reach
the omni thinker, CoT follows its documented rule, bad requests come back as errors.

The torchvision-free preprocessing (``omnieval/engines/omni_inputs.py``) was checked against the official
``Qwen2_5OmniProcessor`` (transformers 5.19 with torchvision 0.28.0 in a throwaway environment, never part of the
project), on the tiny omni folder and on a copy with a flat, older-style ``preprocessor_config.json`` (audio
chunk_length 300): videos of 8x120x160, 8x240x320, 7x480x640, 4x1080x1920 and 6x90x90 with 0.7-3.3 s of audio, and
images of 200x300, 37x45 and 1200x1600. Input ids, grids, ``video_second_per_grid`` and feature masks were equal;
the max abs difference of pixel values, audio features and the thinker's log-probs was 0 (bit-identical).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from scipy.special import softmax  # noqa: E402

from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.omni_inputs import audio_token_count, patchify, smart_resize  # noqa: E402
from omnieval.media.decoded import DecodedMedia  # noqa: E402
from omnieval.prompts import TEXT_ONLY_NOTE, render_prompt  # noqa: E402
from omnieval.schema import Instance, Segment  # noqa: E402

LABELS = list("ABCDE")


@pytest.fixture(scope="module")
def qwen2(tiny_models):
    path = tiny_models("qwen2")
    return path, create_engine("hf", model="tiny-qwen2", path=str(path), batch_size=3, max_new_tokens=12)


@pytest.fixture(scope="module")
def omni(tiny_models):
    path = tiny_models("qwen2.5-omni")
    return path, create_engine("hf", model="tiny-omni", path=str(path), max_new_tokens=8)


def instance(n: int = 0, media: tuple[str, ...] = ("video", "audio"), question: str = "What is shown?") -> Instance:
    segs = [Segment(kind="media", modality=m, path=f"{m}{n}") for m in media]
    segs.append(Segment(kind="text", text="A red circle moves left. " * (n % 3)))
    return Instance(instance_id=f"i{n}", item_id=f"it{n}", protocol="dissonance", benchmark="b", split="s",
                    condition="C111", segments=segs, question=question, option_labels=LABELS,
                    option_texts=["a dog", "a cat", "a car", "a drum", "I cannot answer"], target="A")


def video(seed: int = 0, frames: int = 8) -> DecodedMedia:
    data = np.random.default_rng(seed).integers(0, 256, (frames, 120, 160, 3), dtype=np.uint8)
    return DecodedMedia("video", data, f"v{seed}", fps=4.0)


def audio(freq: float = 440.0, seconds: float = 2.0) -> DecodedMedia:
    t = np.arange(int(16000 * seconds)) / 16000
    return DecodedMedia("audio", (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32), f"a{freq}",
                        sample_rate=16000)


def request(n=0, media=("video", "audio"), style="zs", v=None, a=None) -> EngineRequest:
    decoded = {"video": v or video(), "audio": a or audio()}
    return EngineRequest(instance(n, media), {f"{m}{n}": decoded[m] for m in media}, style)


# ---------------------------------------------------------------------------------------------------------------
# Text-only model
# ---------------------------------------------------------------------------------------------------------------

def reference_logprobs(path: Path, inst: Instance, style: str = "zs") -> np.ndarray:
    """An independent reference: the prompt rendered here, one unpadded transformers forward pass, log_softmax."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    content = [{"type": "text", "text": p.text} if p.kind == "text" else
               {"type": "text", "text": TEXT_ONLY_NOTE.format(modality=p.modality) + "\n"}
               for p in render_prompt(inst, style)]
    ids = tok.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    ids = tok(ids, return_tensors="pt", add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        lp = torch.log_softmax(model(ids).logits[0, -1], dim=-1)
    return np.array([lp[tok.convert_tokens_to_ids(label)].item() for label in LABELS])


def test_text_zero_shot_equals_reference_forward_pass(qwen2):
    path, engine = qwen2
    # 5 requests of different lengths with batch_size 3: left padding in both chunks
    reqs = [request(n) for n in range(5)]
    results = engine.score(reqs)
    assert len(results) == 5
    for req, res in zip(reqs, results, strict=True):
        ref = reference_logprobs(path, req.instance)
        assert res.error is None
        np.testing.assert_allclose(res.option_logprobs, ref, atol=2e-5, rtol=0)
        assert res.choice == LABELS[int(np.argmax(res.option_logprobs))]
        assert res.confidence == pytest.approx(softmax(res.option_logprobs).max(), abs=1e-12)
        assert res.confidence_method == "rs"


def test_text_model_sees_a_note_instead_of_media(qwen2):
    _, engine = qwen2
    text = engine.prompt_text(render_prompt(instance(0), "zs"))
    assert "[video omitted: this model takes text only]" in text
    assert "[audio omitted: this model takes text only]" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_text_cot_returns_text_and_follows_the_rule(qwen2):
    from omnieval.prompts import parse_answer

    _, engine = qwen2
    res = engine.score([request(0, style="cot")])[0]
    assert res.error is None and isinstance(res.raw_text, str)
    parsed = parse_answer(res.raw_text, LABELS, instance(0).option_texts)
    expected = parsed if parsed is not None else LABELS[int(np.argmax(res.option_logprobs))]
    assert res.choice == expected
    assert res.confidence == pytest.approx(softmax(res.option_logprobs)[LABELS.index(res.choice)], abs=1e-12)


def test_cot_parsed_answer_wins_and_logits_are_read_after_answer(qwen2, monkeypatch):
    path, engine = qwen2
    monkeypatch.setattr(engine, "greedy", lambda enc, max_new_tokens=None: "The drum is loud.\nAnswer: D")
    res = engine.score([request(1, style="cot")])[0]
    assert res.choice == "D" and res.raw_text == "The drum is loud.\nAnswer: D"
    # reference: the prompt, the reasoning up to "Answer:", then the " D"-style label tokens
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok, model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path).eval()
    text = engine.prompt_text(render_prompt(instance(1), "cot")) + "The drum is loud.\nAnswer:"
    with torch.no_grad():
        lp = torch.log_softmax(model(tok(text, return_tensors="pt")["input_ids"]).logits[0, -1], dim=-1)
    ref = [lp[tok.encode(" " + label, add_special_tokens=False)[0]].item() for label in LABELS]
    np.testing.assert_allclose(res.option_logprobs, ref, atol=2e-5, rtol=0)
    assert res.confidence == pytest.approx(softmax(ref)[3], abs=1e-5)


def test_cot_unparseable_text_falls_back_to_logit_argmax(qwen2, monkeypatch):
    _, engine = qwen2
    monkeypatch.setattr(engine, "greedy", lambda enc, max_new_tokens=None: "hmm, hard to say")
    res = engine.score([request(2, style="cot")])[0]
    assert res.choice == LABELS[int(np.argmax(res.option_logprobs))]
    assert res.confidence == pytest.approx(softmax(res.option_logprobs).max(), abs=1e-12)


def test_missing_media_is_an_error_not_an_exception(qwen2, omni):
    for _, engine in (qwen2, omni):
        good = request(0)
        bad = EngineRequest(instance(1), {}, "zs")
        bad_cot = EngineRequest(instance(2), {}, "cot")
        results = engine.score([bad, good, bad_cot])
        assert [r.error is None for r in results] == [False, True, False]
        assert "media not decoded" in results[0].error and results[0].choice is None
        assert results[1].choice in LABELS


def test_bad_engine_options_fail_loud(tmp_path, qwen2):
    path, _ = qwen2
    with pytest.raises(ValueError, match="no config.json"):
        create_engine("hf", model="x", path=str(tmp_path))
    with pytest.raises(ValueError, match="dtype"):
        create_engine("hf", model="x", path=str(path), dtype="float64x")


# ---------------------------------------------------------------------------------------------------------------
# Omni model
# ---------------------------------------------------------------------------------------------------------------

def test_omni_scores_are_valid_and_deterministic(omni):
    _, engine = omni
    first = engine.score([request(0), request(1)])
    again = engine.score([request(0)])
    for res in first:
        assert res.error is None and res.choice in LABELS
        assert 1 / len(LABELS) <= res.confidence <= 1 and res.confidence_method == "rs"
        assert len(res.option_logprobs) == 5 and all(np.isfinite(x) and x < 0 for x in res.option_logprobs)
        assert res.confidence == pytest.approx(softmax(res.option_logprobs).max(), abs=1e-12)
    assert again[0] == engine.score([request(0)])[0]  # same input twice: identical result
    np.testing.assert_allclose(again[0].option_logprobs, first[0].option_logprobs, atol=2e-5)  # batched vs alone


def test_omni_media_reach_the_model(omni):
    _, engine = omni
    base, other_video, other_audio = engine.score([request(0), request(0, v=video(seed=7)), request(0, a=audio(880))])
    assert np.abs(np.subtract(base.option_logprobs, other_video.option_logprobs)).max() > 1e-4
    assert np.abs(np.subtract(base.option_logprobs, other_audio.option_logprobs)).max() > 1e-4


def test_omni_video_only_audio_only_and_text_only(omni):
    _, engine = omni
    results = engine.score([request(0, media=("video",)), request(1, media=("audio",)), request(2, media=())])
    assert all(r.error is None and r.choice in LABELS for r in results)


def test_omni_cot(omni):
    _, engine = omni
    res = engine.score([request(0, style="cot")])[0]
    assert res.error is None and isinstance(res.raw_text, str) and res.choice in LABELS
    assert len(res.option_logprobs) == 5


def test_omni_wrong_modality_is_an_error(omni):
    _, engine = omni
    req = EngineRequest(instance(0, ("video",)), {"video0": audio()}, "zs")
    res = engine.score([req])[0]
    assert res.choice is None and "decoded as audio" in res.error


def test_omni_placeholder_counts(omni):
    """8 frames of 160x120 are upsized to 392x280 (min 128*28*28 pixels): 4 x 20 x 28 patches -> 560 tokens; 2 s of
    audio -> 200 mel frames -> 50 tokens."""
    _, engine = omni
    tok = engine.tokenizer
    enc = engine.pre(engine.prompt_text(render_prompt(instance(0), "zs")), [video(), audio()])
    assert enc.input_ids.count(tok.convert_tokens_to_ids(tok.video_token)) == 560
    assert enc.input_ids.count(tok.convert_tokens_to_ids(tok.audio_token)) == 50
    assert enc.videos[0][1] == [4, 20, 28] and enc.videos[0][2] == pytest.approx(0.5)


def test_preprocessing_helpers():
    assert smart_resize(120, 160, min_pixels=128 * 28 * 28, max_pixels=768 * 28 * 28) == (280, 392)
    assert smart_resize(1080, 1920, min_pixels=128 * 28 * 28, max_pixels=768 * 28 * 28) == (560, 1008)
    assert audio_token_count(200) == 50 and audio_token_count(3000) == 750
    # patchify keeps every value and pads an odd frame count by repeating the last frame
    frames = torch.arange(3 * 3 * 56 * 28, dtype=torch.float32).reshape(3, 3, 56, 28)
    patches, grid = patchify(frames, patch=14, temporal=2, merge=2)
    assert grid == [2, 4, 2] and patches.shape == (16, 3 * 2 * 14 * 14)
    assert torch.equal(patches.sum(), frames.sum() + frames[-1].sum())
