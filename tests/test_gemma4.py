"""Gemma 4 and Gemma 4 Unified on the transformers engine (the tiny builds, ``omnieval models tiny --arch gemma4`` /
``gemma4-unified``): the placeholders their inputs carry against the published arithmetic worked out by hand, the
frame times written into the prompt, and the scores of a prompt with a video against transformers' own
``generate``, which encodes the media before the first step (the engine's forward passes the encoded features the
same way, ``Gemma4Family.hf_model_inputs``). Both engines over a whole run: tests/test_vllm_family_runs.py."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from omnieval.core.prompts import render_prompt  # noqa: E402
from omnieval.core.schema import Instance, Segment  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.families.gemma import gemma4_audio_tokens, gemma4_frame_tokens  # noqa: E402
from omnieval.media.decoded import DecodedMedia  # noqa: E402

TOKENS = {"image": "<|image|>", "video": "<|video|>", "audio": "<|audio|>"}


def instance(*media: tuple[str, str]) -> Instance:
    segments = [Segment(kind="media", modality=m, path=p) for m, p in media]
    return Instance(instance_id="i", item_id="i", protocol="dissonance", benchmark="b", split="s", condition="C000",
                    segments=[*segments, Segment(kind="text", text="Text: a passage")], question="Which is it?",
                    option_labels=list("ABCDE"), option_texts=["red", "blue", "green", "cat", "I cannot answer"],
                    target="A")


def pixels(seed: int, shape: tuple) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 255, shape, np.uint8)


IMAGE = DecodedMedia("image", pixels(1, (56, 84, 3)), "i1")
WIDE = DecodedMedia("image", pixels(2, (100, 300, 3)), "i2")
VIDEO = DecodedMedia("video", pixels(3, (8, 240, 320, 3)), "v3", path="v.mp4", fps=4.0)
SLOW = DecodedMedia("video", pixels(4, (6, 120, 160, 3)), "v4", path="s.mp4", fps=2.0)
AUDIO = DecodedMedia("audio", (0.1 * np.random.default_rng(5).standard_normal(32_000)).astype(np.float32), "a5",
                     sample_rate=16_000)
ODD = DecodedMedia("audio", (0.1 * np.random.default_rng(6).standard_normal(23_457)).astype(np.float32), "a6",
                   sample_rate=16_000)
REQUEST = EngineRequest(instance(("image", "im"), ("video", "v"), ("audio", "a")),
                        {"im": IMAGE, "v": VIDEO, "a": AUDIO}, "zs")


def unified_audio_tokens(n_samples: int) -> int:
    """Gemma 4 Unified: one token per 640-sample (40 ms) frame of the waveform, the last frame padded."""
    return math.ceil(n_samples / 640)


AUDIO_TOKENS = {"gemma4": gemma4_audio_tokens, "gemma4-unified": unified_audio_tokens}


@pytest.fixture(scope="module", params=list(AUDIO_TOKENS))
def hf(request, tiny_models):
    engine = create_engine("hf", model="g4", path=str(tiny_models(request.param)))
    engine.arch = request.param
    return engine


def encode(engine, request: EngineRequest):
    parts = render_prompt(request.instance, request.prompt_style)
    return engine.encode(request.media, parts, engine.prompt_text(parts))


def test_by_hand_the_counts_of_a_frame_and_a_clip():
    """A 240 x 320 frame at 70 tokens: scale sqrt(70 x 9 x 256 / 76800) = 1.449, sides 347.8 and 463.7 cut to 336
    and 432 (multiples of 48), 21 x 27 patches, 63 tokens. Two seconds of audio: 199 whole 20 ms frames, 100, then
    50 tokens (40 ms each)."""
    assert gemma4_frame_tokens(240, 320, 70) == 63
    assert gemma4_audio_tokens(32_000) == 50
    assert unified_audio_tokens(32_000) == 50 and unified_audio_tokens(23_457) == 37  # 36.65 frames: 37


@pytest.mark.parametrize("media", [(IMAGE, VIDEO, AUDIO), (WIDE, SLOW, ODD)], ids=["small-image", "wide-image"])
def test_placeholders_follow_the_published_arithmetic(hf, media):
    image, video, audio = media
    request = EngineRequest(instance(("image", "im"), ("video", "v"), ("audio", "a")),
                            {"im": image, "v": video, "a": audio}, "zs")
    ids = encode(hf, request)["input_ids"][0].tolist()
    got = {m: ids.count(hf.tokenizer.convert_tokens_to_ids(t)) for m, t in TOKENS.items()}
    frames, height, width = video.data.shape[:3]
    assert got == {"image": gemma4_frame_tokens(*image.data.shape[:2], 70),
                   "video": frames * gemma4_frame_tokens(height, width, 70),
                   "audio": AUDIO_TOKENS[hf.arch](len(audio.data))}


@pytest.mark.parametrize(("video", "times"), [
    (VIDEO, ["00:00"] * 4 + ["00:01"] * 4),  # 8 frames at 4 fps: 0, 0.25, ..., 1.75 s
    (SLOW, ["00:00", "00:00", "00:01", "00:01", "00:02", "00:02"]),  # 6 frames at 2 fps
], ids=["4fps", "2fps"])
def test_each_frame_is_preceded_by_its_time_at_the_sampled_rate(hf, video, times):
    ids = encode(hf, EngineRequest(instance(("video", "v")), {"v": video}, "zs"))["input_ids"][0].tolist()
    text = hf.tokenizer.decode(ids)
    frame = "<|image>" + "<|video|>" * gemma4_frame_tokens(*video.data.shape[1:3], 70) + "<image|>"
    assert " ".join(f"{t} {frame}" for t in times) in text


def test_a_prompt_with_a_video_scores_as_transformers_generate_encodes_it(hf):
    """The engine's next-token log-probabilities equal the first step of transformers' ``generate`` on the
    processor's raw output (which encodes the image and video with their frame counts before the step)."""
    enc = encode(hf, REQUEST)
    got = hf.next_token_logprobs([enc])[0]
    raw = {k: v for k, v in enc.items() if hasattr(v, "to")}
    assert "pixel_values_videos" in raw and "num_frames_per_video" in raw
    with torch.no_grad():
        out = hf.net.generate(**raw, max_new_tokens=1, do_sample=False, output_logits=True,
                              return_dict_in_generate=True, pad_token_id=hf.pad_id)
    want = torch.log_softmax(out.logits[0][0].float(), dim=-1)
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)
    # the video reaches the model: other frames, other scores
    other = EngineRequest(REQUEST.instance, {**REQUEST.media, "v": SLOW}, "zs")
    assert np.abs(hf.next_token_logprobs([encode(hf, other)])[0].numpy() - got.numpy()).max() > 1e-3
