"""What a recipe applies at the engine beyond the decode settings (``engines.feeding``): the image pixel budget, the
video's own soundtrack heard or not, the media before or after the text; the options a recipe gives and what
``run.json`` records of them (``run.recipe.applied_options``).

References: the images are compared with the reference utilities' own ``fetch_image`` (``qwen_vl_utils``,
``qwen_omni_utils``) called here on the same PNG file; the recipe's budget with the utilities' constants; the
placeholder count of a resized image with Qwen2.5-Omni's published rule (one token per 28 x 28 pixels); the
soundtrack's seconds with the waveform's length; the media order with the parts written out by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from omnieval.config import parse_run_config
from omnieval.core.prompts import PromptPart, render_prompt
from omnieval.core.schema import Instance, Segment
from omnieval.engines.base import OptionError
from omnieval.engines.families import recipe_for
from omnieval.engines.feeding import Feeding
from omnieval.media.decode import decode_media
from omnieval.media.decoded import DecodedMedia
from omnieval.run.recipe import model_decode, recipe_options

LABELS = list("ABCD")
RATE = 16_000


def png(path, height: int, width: int, seed: int = 0):
    """A PNG of random RGB pixels (lossless: every reader gets the same array)."""
    from PIL import Image

    data = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    Image.fromarray(data).save(path)
    return path


def omni_budget() -> dict[str, int]:
    return {k: v.value for k, v in recipe_for("qwen2.5-omni").image.items()}


# (height, width, budget given to both, patch size)
IMAGES = [
    pytest.param(300, 400, None, 14, id="4:3-utilities-default"),  # within the budget: to multiples of 28
    pytest.param(20, 30, None, 14, id="tiny-scaled-up"),  # under 4 x 28 x 28 pixels: scaled up
    pytest.param(600, 800, {"max_pixels": 100_000}, 14, id="over-budget-scaled-down"),
    pytest.param(480, 270, {"max_pixels": 200_000, "min_pixels": 50_000}, 16, id="portrait-factor-32"),
]


@pytest.mark.parametrize("utils", ["qwen_vl_utils.vision_process", "qwen_omni_utils.v2_5.vision_process"])
@pytest.mark.parametrize("height, width, budget, patch", IMAGES)
def test_images_are_resized_as_the_reference_utilities_fetch_them(tmp_path, utils, height, width, budget, patch):
    vision = pytest.importorskip(utils)
    path = png(tmp_path / "pic.png", height, width)
    ele = {"image": str(path), **(budget or {})}
    reference = np.asarray(vision.fetch_image(ele, image_patch_size=patch))
    factor = patch * 2
    given = {"size_factor": factor, "min_pixels": vision.IMAGE_MIN_TOKEN_NUM * factor ** 2,
             "max_pixels": vision.IMAGE_MAX_TOKEN_NUM * factor ** 2, **(budget or {})}
    decoded = decode_media(path, "image")
    fed = Feeding.from_options("hf", image_pixels=given).image(decoded)
    assert fed.data.shape == reference.shape
    np.testing.assert_array_equal(fed.data, reference)
    assert (fed.content_hash != decoded.content_hash) == (fed.data.shape != decoded.data.shape)


def test_the_omni_recipes_image_budget_is_the_utilities_default():
    vision = pytest.importorskip("qwen_omni_utils.v2_5.vision_process")
    assert omni_budget() == {"size_factor": 28, "min_pixels": vision.IMAGE_MIN_TOKEN_NUM * 28 * 28,
                             "max_pixels": vision.IMAGE_MAX_TOKEN_NUM * 28 * 28}


def instance(segments: list[Segment]) -> Instance:
    return Instance(instance_id="i0", item_id="it0", protocol="dissonance", benchmark="b", split="s",
                    condition="C111", segments=segments, question="What is shown?", option_labels=LABELS,
                    option_texts=["a dog", "a cat", "a car", "I cannot answer"], target="A")


CLIP = [Segment(kind="media", modality="video", path="clip.mp4"),
        Segment(kind="media", modality="audio", path="clip.mp4")]


def test_a_muted_soundtrack_and_the_text_first_are_laid_out_as_written():
    parts = render_prompt(instance([*CLIP, Segment(kind="media", modality="audio", path="other.wav")]), "zs")
    video, sound, other, text = parts
    assert Feeding().parts(parts) == parts
    assert Feeding(soundtrack=False).parts(parts) == [video, other, text]  # another file's audio stays
    assert Feeding(media_first=False).parts(parts) == [text, video, sound, other]
    assert Feeding(soundtrack=False, media_first=False).parts(parts) == [text, video, other]
    options = [PromptPart("media", modality="image", path="ctx.png"), PromptPart("text", text="Q"),
               PromptPart("text", text="A."), PromptPart("media", modality="image", path="a.png")]
    assert Feeding(media_first=False).parts(options) == [options[1], options[0], *options[2:]]


@pytest.mark.parametrize("options, field", [
    ({"image_pixels": {"min_pixels": 10}}, "image_pixels"),
    ({"image_pixels": {"max_pixels": 0}}, "image_pixels"),
    ({"image_pixels": {"max_pixels": 100, "min_pixels": 200}}, "image_pixels"),
    ({"image_pixels": {"max_pixels": 100, "factor": 28}}, "image_pixels"),
    ({"soundtrack": "yes"}, "soundtrack"),
    ({"media_first": None}, "media_first"),
])
def test_a_bad_option_is_one_line_naming_it(options, field):
    from omnieval.engines.hf import HFEngine

    with pytest.raises(OptionError, match=field) as err:
        HFEngine.validate_options(options)
    assert err.value.option == field and "\n" not in str(err.value)


def _config(tmp_path, models):
    folder = tmp_path / "omni"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2_5_omni"}))
    for model in models:
        model.setdefault("options", {})["path"] = str(folder)
    return parse_run_config({"benchmark": str(tmp_path / "bench"), "output": str(tmp_path / "out"),
                             "models": models})


def test_the_recipe_gives_the_options_the_model_leaves_unset_and_run_json_says_where_each_came_from(tmp_path):
    config = _config(tmp_path, [{"name": "auto", "engine": "hf"},
                                {"name": "own", "engine": "hf", "options": {"soundtrack": False}},
                                {"name": "off", "engine": "hf", "recipe": False}])
    auto, own, off = config.models
    card = recipe_for("qwen2.5-omni")
    assert recipe_options(config, auto) == {"system_prompt": card.system_prompt.value,
                                            "image_pixels": omni_budget(), "soundtrack": True}
    assert "soundtrack" not in recipe_options(config, own) and recipe_options(config, off) == {}
    record = model_decode(config, own).record()["options"]
    assert record["soundtrack"] == {"value": False, "from": "config", "source": "the model's options"}
    assert record["image_pixels"]["value"] == omni_budget() and record["image_pixels"]["from"] == "recipe"
    assert "fetch_image" in record["image_pixels"]["source"]
    assert model_decode(config, auto).record()["options"]["soundtrack"] == {
        "value": True, "from": "recipe", "source": card.use_audio_in_video.source}
    assert "options" not in model_decode(config, off).record()


# -- on the tiny Qwen2.5-Omni build, the transformers engine --------------------------------------------------------


@pytest.fixture(scope="module")
def omni_path(tiny_models):
    pytest.importorskip("transformers")
    return tiny_models("qwen2.5-omni")


def video(frames: int = 4) -> DecodedMedia:
    data = np.random.default_rng(frames).integers(0, 256, (frames, 56, 84, 3), dtype=np.uint8)
    return DecodedMedia("video", data, f"v{frames}", path="clip.mp4", fps=2.0)


def audio(seconds: float) -> DecodedMedia:
    t = np.arange(int(RATE * seconds)) / RATE
    return DecodedMedia("audio", (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), f"a{seconds}",
                        path="clip.mp4", sample_rate=RATE)


@pytest.mark.slow
def test_the_engine_hears_the_soundtrack_only_where_it_is_on(omni_path):
    from omnieval.engines import EngineRequest, create_engine

    inst = instance(CLIP)
    media = {CLIP[0].ref: video(), CLIP[1].ref: audio(3.0)}
    heard, muted = (create_engine("hf", model="m", path=str(omni_path), **extra).score(
        [EngineRequest(inst, media, "zs")])[0] for extra in ({}, {"soundtrack": False}))
    assert heard.error is None and muted.error is None
    assert heard.shown["audio_seconds"] == 3.0 and heard.shown["media_tokens"]["audio"] > 0
    assert muted.shown["audio_seconds"] == 0.0 and muted.shown["media_tokens"]["audio"] == 0
    assert muted.shown["video_frames"] == heard.shown["video_frames"] == 4


@pytest.mark.slow
def test_the_engine_shows_images_within_the_budget_and_the_text_first_where_asked(omni_path, tmp_path):
    """A 300 x 400 PNG under a 100 000-pixel budget: the utilities make it 252 x 364 (both sides over
    sqrt(120 000 / 100 000), floored to 28), 117 image placeholders (one per 28 x 28 pixels), where the image as
    decoded (308 x 392 after the processor's own resize) makes 154."""
    from omnieval.engines import EngineRequest, create_engine

    vision = pytest.importorskip("qwen_omni_utils.v2_5.vision_process")
    path = png(tmp_path / "pic.png", 300, 400)
    seg = Segment(kind="media", modality="image", path=str(path))
    inst = instance([seg])
    media = {seg.ref: decode_media(path, "image")}
    budget = {"max_pixels": 100_000, "min_pixels": 3136, "size_factor": 28}
    h, w = np.asarray(vision.fetch_image({"image": str(path), "max_pixels": 100_000})).shape[:2]
    assert (h, w) == (252, 364)
    plain = create_engine("hf", model="m", path=str(omni_path))
    sized = create_engine("hf", model="m", path=str(omni_path), image_pixels=budget, media_first=False)
    (a,), (b,) = (engine.score([EngineRequest(inst, media, "zs")]) for engine in (plain, sized))
    assert a.error is None and b.error is None
    assert a.shown["media_tokens"]["image"] == (308 // 28) * (392 // 28)
    assert b.shown["media_tokens"]["image"] == (h // 28) * (w // 28)
    text = sized.prompt_text(sized.feeding.parts(render_prompt(inst, "zs")))
    assert text.index("What is shown?") < text.index("<|IMAGE|>")
    plain_text = plain.prompt_text(render_prompt(inst, "zs"))
    assert plain_text.index("<|IMAGE|>") < plain_text.index("What is shown?")
