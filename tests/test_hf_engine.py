"""The transformers engine on the tiny random-weight models: scores equal an independent forward pass, media reach
the omni thinker, CoT follows its documented rule, bad requests come back as errors.

Qwen2.5-Omni's inputs come from its own ``Qwen2_5OmniProcessor``. Checked here against hand arithmetic (the Qwen2-VL
resize rule, patches per merged token, Whisper frames through the audio tower's two stride-2 stages) and against a
direct processor call written out in the test (a batch of prompts, as the processor pads it).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from scipy.special import softmax  # noqa: E402

from omnieval.core.prompts import TEXT_ONLY_NOTE, render_prompt  # noqa: E402
from omnieval.core.schema import Instance, Segment  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.media.decoded import DecodedMedia  # noqa: E402

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
    from omnieval.core.prompts import parse_answer

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
    assert res.choice == "D" and res.raw_text == "The drum is loud.\nAnswer: D" and res.answer_source == "parsed"
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
    assert res.answer_source == "forced"  # the model named no answer: the logits made one, and say so


def test_forced_cot_answers_are_counted_in_forced_rate(qwen2, monkeypatch):
    """Through the row builder and the metrics: of five reasonings, three name no answer; forced_rate is the share
    of cot answers whose text does not parse (counted here from the texts), and none of them is invalid."""
    import polars as pl

    from omnieval.core.prompts import parse_answer
    from omnieval.core.run_outputs import predictions_table
    from omnieval.run.predictions import Prediction
    from omnieval.stats.metrics import metrics_table

    _, engine = qwen2
    script = iter(["Answer: A", "I think so.", "(B) it is", "no idea at all", "zzz"])
    monkeypatch.setattr(engine, "greedy", lambda enc, max_new_tokens=None: next(script))
    rows = []
    for i in range(5):
        inst = instance(i % 3, media=()).model_copy(update={"instance_id": f"x{i}", "item_id": f"i{i}"})
        res = engine.score([EngineRequest(inst, {}, "cot")])[0]
        assert res.error is None
        rows.append(Prediction.scored(inst, "tiny", "hf", "cot", choice=res.choice, confidence=res.confidence,
                                      confidence_method=res.confidence_method, option_logprobs=res.option_logprobs,
                                      raw_text=res.raw_text, answer_source=res.answer_source))
    table = pl.from_arrow(predictions_table(r.row() for r in rows))
    unparsed = sum(parse_answer(t, LABELS, instance(0).option_texts) is None for t in table["raw_text"])
    assert table["answer_source"].to_list().count("forced") == unparsed == 3
    metrics = metrics_table(table, resamples=0)
    forced = metrics.filter(pl.col("metric") == "forced_rate")
    assert forced["value"].to_list() == [pytest.approx(3 / 5)] and forced["n"].to_list() == [5]
    assert metrics.filter(pl.col("metric") == "invalid_rate")["value"].to_list() == [0.0]


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
    enc = engine.encode({"video0": video(), "audio0": audio()}, render_prompt(instance(0), "zs"),
                        engine.prompt_text(render_prompt(instance(0), "zs")))
    assert enc.input_ids.count(tok.convert_tokens_to_ids(tok.video_token)) == 560
    assert enc.input_ids.count(tok.convert_tokens_to_ids(tok.audio_token)) == 50
    assert enc.tensors["video_grid_thw"].tolist() == [[4, 20, 28]]
    assert enc.tensors["video_second_per_grid"].tolist() == [0.5]  # 2 frames a temporal patch at 4 fps


def qwen_resize(height: int, width: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen2-VL's resize rule written out: sides rounded to multiples of 28, scaled up (ceil) or down (floor)
    by the square root of the pixel ratio when the area is outside [min_pixels, max_pixels]."""
    h, w = round(height / 28) * 28, round(width / 28) * 28
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h, w = max(28, math.floor(height / beta / 28) * 28), max(28, math.floor(width / beta / 28) * 28)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / 28) * 28, math.ceil(width * beta / 28) * 28
    return h, w


def whisper_audio_tokens(samples: int) -> int:
    """Mel frames (hop 160, the whole clip: not cut at Whisper's 30 s), then two stride-2 stages of the audio
    tower."""
    frames = -(-samples // 160)
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


@pytest.mark.parametrize(("frames", "height", "width", "fps", "grid"), [
    (8, 120, 160, 4.0, [4, 20, 28]),  # upsized to 280 x 392
    (4, 1080, 1920, 1.0, [2, 40, 72]),  # downsized to 560 x 1008 (max 768*28*28 pixels)
    (7, 90, 90, 3.5, [4, 24, 24]),  # an odd frame count: the last frame repeated; upsized to 336 x 336
])
def test_omni_video_inputs_follow_the_resize_rule(omni, frames, height, width, fps, grid):
    _, engine = omni
    assert qwen_resize(height, width, 128 * 28 * 28, 768 * 28 * 28) == (grid[1] * 14, grid[2] * 14)
    media = {"video0": DecodedMedia("video", np.zeros((frames, height, width, 3), np.uint8), "v", fps=fps)}
    parts = render_prompt(instance(0, ("video",)), "zs")
    enc = engine.encode(media, parts, engine.prompt_text(parts))
    assert enc.tensors["video_grid_thw"].tolist() == [grid]
    assert enc.tensors["pixel_values_videos"].shape == (grid[0] * grid[1] * grid[2], 3 * 2 * 14 * 14)
    assert enc.input_ids.count(engine.tokenizer.convert_tokens_to_ids("<|VIDEO|>")) == grid[0] * grid[1] * grid[2] // 4
    assert enc.tensors["video_second_per_grid"].tolist() == pytest.approx([2 / fps])


@pytest.mark.parametrize(("height", "width"), [(200, 300), (37, 45), (1200, 1600)])
def test_omni_image_inputs_follow_the_resize_rule(omni, height, width):
    _, engine = omni
    h, w = qwen_resize(height, width, 56 * 56, 12845056)  # the released image processor's bounds
    media = {"image0": DecodedMedia("image", np.zeros((height, width, 3), np.uint8), "i")}
    parts = render_prompt(instance(0, ("image",)), "zs")
    enc = engine.encode(media, parts, engine.prompt_text(parts))
    assert enc.tensors["image_grid_thw"].tolist() == [[1, h // 14, w // 14]]
    assert enc.input_ids.count(engine.tokenizer.convert_tokens_to_ids("<|IMAGE|>")) == h * w // (28 * 28)


@pytest.mark.parametrize(("seconds", "tokens"), [(0.3, 7), (2.0, 50), (3.3, 82), (31.0, 775)])
def test_omni_audio_tokens_follow_whisper_frames(omni, seconds, tokens):
    _, engine = omni
    samples = int(16000 * seconds)
    assert whisper_audio_tokens(samples) == tokens
    parts = render_prompt(instance(0, ("audio",)), "zs")
    enc = engine.encode({"audio0": DecodedMedia("audio", np.zeros(samples, np.float32), "a", sample_rate=16000)},
                        parts, engine.prompt_text(parts))
    assert enc.input_ids.count(engine.audio_token_id) == tokens
    mask = enc.tensors["feature_attention_mask"]
    # padded to Whisper's 30 s window, never cut to it
    assert mask.shape == (1, max(-(-samples // 160), 3000)) and int(mask.sum()) == -(-samples // 160)


def test_omni_batch_equals_the_processor_on_the_same_texts(omni):
    """Three prompts of different lengths and media in one forward pass: the engine's collated inputs equal the
    processor called on the three texts at once (it pads on the left and concatenates the media in order)."""
    from transformers import AutoProcessor

    path, engine = omni
    reqs = [request(0), request(1, media=("audio",), a=audio(330, 0.7)), request(2, v=video(3))]
    encoded, texts = [], []
    for req in reqs:
        parts, text = engine._prepare(req)
        texts.append(text)
        encoded.append(engine.encode(req.media, parts, text))
    got = engine._inputs(encoded)
    processor = AutoProcessor.from_pretrained(path)
    want = processor(text=texts, videos=[video().data, video(3).data], audio=[audio().data, audio(330, 0.7).data,
                     audio().data], fps=4.0, padding=True, return_tensors="pt")
    assert want["input_ids"].shape == got["input_ids"].shape and torch.equal(want["attention_mask"],
                                                                               got["attention_mask"])
    real = want["attention_mask"].bool()
    assert torch.equal(want["input_ids"][real], got["input_ids"][real])
    for key in ("pixel_values_videos", "video_grid_thw", "video_second_per_grid", "input_features",
                "feature_attention_mask"):
        assert torch.equal(torch.as_tensor(want[key]), got[key]), key
    # and the batch scores as each prompt alone
    together = engine.next_token_logprobs(encoded)
    for i, enc in enumerate(encoded):
        np.testing.assert_allclose(together[i], engine.next_token_logprobs([enc])[0], atol=2e-5)


def test_scoring_projects_only_the_last_position_with_the_same_logprobs(omni, qwen2):
    """The output head sees one position per prompt during scoring (the omni thinker has no ``logits_to_keep``, and
    full-sequence logits dominate a batch's GPU memory), and the log-probabilities equal a plain forward pass's
    last row over the full sequence (no hook), for a left-padded omni batch and a text model."""
    for _, engine in (omni, qwen2):
        reqs = [request(0), request(1, media=("audio",), a=audio(330, 0.7))]
        encoded = [engine.encode(r.media, *engine._prepare(r)) for r in reqs]
        with torch.no_grad():
            full = engine.net(**engine._inputs(encoded), use_cache=False).logits
        assert full.shape[1] > 1  # the plain pass computes every position
        want = torch.log_softmax(full[:, -1].float(), dim=-1)
        seen: list = []
        handle = engine.net.get_output_embeddings().register_forward_hook(
            lambda _m, _args, out, seen=seen: seen.append(tuple(out.shape)))
        try:
            got = engine.next_token_logprobs(encoded)
        finally:
            handle.remove()
        assert seen == [(len(encoded), 1, full.shape[-1])]
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)


def test_omni_videos_at_different_rates_get_their_own_time_per_patch(omni):
    """The processor takes one fps a call: each video's ``video_second_per_grid`` is 2 frames / its own fps. With
    their soundtracks interleaved (laid out by those times) such videos are refused, naming the files."""
    _, engine = omni
    base = instance(0, ("video",))
    inst = base.model_copy(update={"segments": [base.segments[0], Segment(kind="media", modality="video",
                                                                          path="other.mp4"), *base.segments[1:]]})
    slow = DecodedMedia("video", video().data, "slow", path="other.mp4", fps=1.0)
    parts = render_prompt(inst, "zs")
    enc = engine.encode({"video0": video(), "other.mp4": slow}, parts, engine.prompt_text(parts))
    assert enc.tensors["video_second_per_grid"].tolist() == [0.5, 2.0]
    assert enc.input_ids.count(engine.tokenizer.convert_tokens_to_ids("<|VIDEO|>")) == 2 * 560
    assert engine.score([EngineRequest(inst, {"video0": video(), "other.mp4": slow}, "zs")])[0].error is None

    pairs = base.model_copy(update={"segments": [
        Segment(kind="media", modality="video", path="a.mp4"), Segment(kind="media", modality="audio", path="a.mp4"),
        Segment(kind="media", modality="video", path="b.mp4"), Segment(kind="media", modality="audio", path="b.mp4"),
        Segment(kind="text", text="Two clips.")]})
    media = {"a.mp4": DecodedMedia("video", video().data, "va", path="a.mp4", fps=4.0), "a.mp4#audio": audio(),
             "b.mp4": DecodedMedia("video", video().data, "vb", path="b.mp4", fps=1.0), "b.mp4#audio": audio(880)}
    (res,) = engine.score([EngineRequest(pairs, media, "zs")])
    assert res.choice is None and "different frame rates" in res.error and "a.mp4, b.mp4" in res.error
