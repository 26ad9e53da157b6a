"""Qwen3-VL and Qwen3.5 video prompts on the transformers engine (the tiny builds, ``omnieval models tiny --arch
qwen3-vl`` / ``qwen3.5``): each frame pair's time written into the prompt is the pair's own (the mean of its two
frames' times, each frame at the centre of its sampling bin, ``media.decode.sample_times``), worked out here by hand;
each pair's placeholders follow the published resize rule; videos sampled at different rates in one prompt keep their
own times. (Both engines together: tests/test_vllm_families.py and tests/test_vllm_family_runs.py.)"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("torchvision")

from family_placeholders import qwen3_vl_tokens  # noqa: E402

from omnieval.core.prompts import render_prompt  # noqa: E402
from omnieval.core.schema import Instance, Segment  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.media.decoded import DecodedMedia  # noqa: E402

FRAME = re.compile(r"<(\d+\.\d) seconds><\|vision_start\|>((?:<\|video_pad\|>)*)<\|vision_end\|>")


def instance(*media: tuple[str, str]) -> Instance:
    segments = [Segment(kind="media", modality=m, path=p) for m, p in media]
    return Instance(instance_id="i", item_id="i", protocol="dissonance", benchmark="b", split="s", condition="C000",
                    segments=[*segments, Segment(kind="text", text="Text: a passage")], question="Which is it?",
                    option_labels=list("ABCD"), option_texts=["red", "blue", "green", "cat"], target="A")


def video(seed: int, frames: int, seconds: float, side: tuple = (240, 320)) -> DecodedMedia:
    data = np.random.default_rng(seed).integers(0, 255, (frames, *side, 3), np.uint8)
    return DecodedMedia("video", data, f"v{seed}", path=f"v{seed}.mp4", fps=frames / seconds)


# 8 frames over 2 s: frames at 0.125, 0.375, ... 1.875 s; pairs at 0.25, 0.75, 1.25, 1.75 (printed to one decimal,
# halves to even). 7 frames over 2.9 s: frames at (i + 0.5) x 2.9 / 7 = 0.207, 0.621, 1.036, 1.450, 1.864, 2.279,
# 2.693 s; pairs at 0.414, 1.243, 2.071 and the last frame alone at 2.693.
EIGHT, SEVEN = video(1, 8, 2.0), video(2, 7, 2.9, side=(120, 160))
TIMES = {"v1": ["0.2", "0.8", "1.2", "1.8"], "v2": ["0.4", "1.2", "2.1", "2.7"]}


@pytest.fixture(scope="module", params=["qwen3-vl", "qwen3.5"])
def engine(request, tiny_models):
    return create_engine("hf", model="m", path=str(tiny_models(request.param)))


def prompt_of(engine, request: EngineRequest) -> tuple[str, dict]:
    parts = render_prompt(request.instance, request.prompt_style)
    inputs = engine.encode(request.media, parts, engine.prompt_text(parts))
    return engine.tokenizer.decode(inputs["input_ids"][0]), inputs


def test_each_frame_pair_is_given_its_own_time_and_its_placeholders(engine):
    request = EngineRequest(instance(("video", "a"), ("video", "b")), {"a": EIGHT, "b": SEVEN}, "zs")
    text, inputs = prompt_of(engine, request)
    frames = FRAME.findall(text)
    assert [t for t, _ in frames] == TIMES["v1"] + TIMES["v2"]
    per_pair = [qwen3_vl_tokens(v) // len(TIMES[v.content_hash]) for v in (EIGHT, SEVEN)]
    assert [len(pads) // len("<|video_pad|>") for _, pads in frames] == [per_pair[0]] * 4 + [per_pair[1]] * 4
    # 240 x 320 frames stay 240 -> 256 by 320 pixels: 16 x 20 patches, 80 tokens a pair; 120 x 160 -> 128 x 160
    assert per_pair == [80, 20]
    assert inputs["video_grid_thw"].tolist() == [[4, 16, 20], [4, 8, 10]]


def test_a_video_alone_keeps_its_times(engine):
    """The times do not depend on the other videos of the prompt (each has its own metadata)."""
    text, _ = prompt_of(engine, EngineRequest(instance(("video", "b")), {"b": SEVEN}, "zs"))
    assert [t for t, _ in FRAME.findall(text)] == TIMES["v2"]


def test_an_image_has_no_times_and_the_published_grid(engine):
    image = DecodedMedia("image", np.random.default_rng(3).integers(0, 255, (120, 160, 3), np.uint8), "i3")
    text, inputs = prompt_of(engine, EngineRequest(instance(("image", "im")), {"im": image}, "zs"))
    assert "seconds>" not in text
    # 120 x 160 is below 65536 pixels: scaled by sqrt(65536 / 19200) and rounded up to 224 x 320, 14 x 20 patches
    assert inputs["image_grid_thw"].tolist() == [[1, 14, 20]]
    assert text.count("<|image_pad|>") == qwen3_vl_tokens(image) == 70
