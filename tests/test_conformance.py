"""Conformance kit: each registered family's model inputs, as omnieval's hf engine builds them from media decoded
with the family's reference settings (``conformance_kit.REFERENCE_DECODE``), equal those of the family's reference
pipeline run on the same file (``conformance_kit.REFERENCES``; a family not run is a skip saying why, "cannot run
here" or "not checked yet", and the README says the same).

What is compared, and how closely (the reasons per case):

* input ids: exact (the text, the placeholders, a video's soundtrack interleaved with it, Qwen3-VL's frame times),
  except one audio token Qwen3-Omni adds on purpose where a waveform is a whole number of hops
  (``without_padding_token``);
* position ids where the family has its own (Qwen omni: the thinker's ``get_rope_index``): exact;
* the frames each pipeline sampled, as uint8 pixels: exact on the clip neither pipeline resizes (the omni families:
  same frame indices, same colour conversion), which is what checks the frame count and index rule; where both
  resize (the portrait clip, upscaled; the Qwen-VL families, whose budget differs from the clip's size) their
  kernels differ (PyAV's bilinear scaler, torchvision's antialiased bicubic): sizes exact, pixels bounded by their
  mean difference (``RESIZED_MEAN``);
* pixel values after the processor: exact where the processor does not resize (Qwen2.5-Omni); Qwen3-Omni's processor
  resizes the 28-multiples to its own 32-multiples, from the reference's float frames but from omnieval's uint8 ones
  (rounded and clipped after bicubic overshoot), so they are bounded (``PROCESSOR_RESIZE``);
* audio features: exact from a lossless soundtrack and a 16 kHz WAV; Qwen3-Omni's waveform carries up to 12.5 ms of
  trailing silence on purpose (``Qwen3OmniFamily``), so its features may be one mel frame longer and the reference's
  last frame (which mirrors the clip's end) is left out; an AAC soundtrack at 44.1 kHz is compared as waveforms
  (``test_an_aac_soundtrack_is_heard_as_the_reference_hears_it``).

The processor is given the rate the reference utilities sampled at (``omni_reference``): the omni cards leave it to
the processor's default, which does not follow the sampling.

The families whose processor samples the file itself (``PROCESSOR_SAMPLED``: LLaVA-OneVision, InternVL, Gemma 4,
Gemma 4 Unified, VideoLLaMA3, Qwen3.5) are checked on both clips against that processor given the file's path, the
card's count or rate and ``do_sample_frames=True`` (``processor_reference``): the rendered text, the input ids and
every tensor the processor returns (pixel values, grids, frame positions, VideoLLaMA3's compression mask) exact,
which holds only where both sampled the same frames and resized them from the same size. Their images and audio go
to the processor as omnieval hands them over, which is what their cards do too: those cases are not run.

The audio families whose cards load the file with ``librosa.load`` at the feature extractor's 16 kHz (``AUDIO_CARD``:
Qwen2-Audio, Audio Flamingo 3, Music Flamingo, Granite Speech) are checked on the 41 s WAV against that and their
processor (``audio_card_conformance``): text, ids, features and masks exact, Qwen2-Audio's decoded at its recipe's
30 s where its processor cuts the card's 41 s.

Gemma 3n (``TEMPLATE_CARD``) is checked as its card calls its processor, ``apply_chat_template(tokenize=True)`` on
the media, on the 4:3 image and the 41 s WAV (``template_card_conformance``: every tensor exact), and Voxtral against
both requests of its card on the 41 s WAV (``voxtral_card_conformance``): mistral-common's, as sent to vLLM (ids and
the padded clips exact, against omnieval's vLLM prompt and its transformers ids), and transformers'
``apply_chat_template`` on the file's path (ids and log-mel features exact).
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.conformance_kit import (
    AUDIO_CARD,
    KIT_MAX_FRAMES,
    PROCESSOR_SAMPLED,
    REFERENCE_DECODE,
    REFERENCES,
    TEMPLATE_CARD,
    make_media,
)

QUESTION = "What do you see and hear?"
# Bounds where the two pipelines resize differently (measured on the kit's files: in parentheses)
RESIZED_MEAN = 6.0  # portrait frames upscaled by two kernels: mean abs difference in uint8 levels (4.2)
PROCESSOR_RESIZE = {"max": 0.5, "mean": 0.005}  # Qwen3-Omni pixel values: uint8 vs float frames (0.39, 0.002)
IMAGE_MEAN = 0.01  # a 640 x 480 image resized by PIL (reference) or the processor: mean, pixel values (0.0056)
AAC_MAX = 0.005  # an AAC soundtrack resampled from 44.1 kHz by soxr or FFmpeg's swr: max abs (0.0014)
OMNI = ("qwen2.5-omni", "qwen3-omni")


def needs_video_reader() -> None:
    """The reference utilities read video with torchcodec or decord (their torchvision fallback calls
    ``torchvision.io.read_video``, which torchvision 0.28 no longer has): without either, a video case is a skip."""
    import importlib.util

    if not any(importlib.util.find_spec(name) for name in ("torchcodec", "decord")):
        pytest.skip("the reference utilities read video with torchcodec or decord, neither of which is installed")


def takes(family: str, modality: str) -> bool:
    """Whether the family's adapter takes the medium (a case for a medium it does not take is a skip)."""
    from omnieval.engines.families import FAMILIES

    return any(a.name == family and modality in a.modalities for a in FAMILIES.values())


def registered_families() -> list[str]:
    from omnieval.engines.families import FAMILIES

    return sorted({adapter.name for adapter in FAMILIES.values()})


@pytest.fixture(scope="session")
def media(tmp_path_factory):
    return make_media(tmp_path_factory.mktemp("conformance"))


@pytest.fixture(scope="module")
def engines(tiny_models):
    """One hf engine a family, on its tiny build (loaded on first use)."""
    from omnieval.engines import create_engine

    cache: dict = {}

    def get(family: str):
        if family not in cache:
            cache[family] = create_engine("hf", model=f"tiny-{family}", path=str(tiny_models(family)))
        return cache[family]

    return get


def kit_settings(family: str) -> dict:
    """The family's reference settings with the kit's caps: ``KIT_MAX_FRAMES`` where the reference utilities sample
    by rate, and for the tiny Qwen2.5-VL the pixel budget of its processor
    (``TINY_VL_PIXELS``, smaller than the release's), which the reference is given too, so that neither pipeline's
    frames are resized again by the processor."""
    from omnieval.dev.tiny_models import TINY_VL_PIXELS

    # a processor sampling the file reads its own bounds (Qwen3-VL's ignores a max_frames given to it): no cap
    caps = {"max_frames": KIT_MAX_FRAMES} if "fps" in REFERENCE_DECODE[family] and family not in PROCESSOR_SAMPLED \
        else {}
    if family == "qwen2.5-vl":
        caps.update(min_pixels=TINY_VL_PIXELS["shortest_edge"], max_pixels=TINY_VL_PIXELS["longest_edge"])
    return {**REFERENCE_DECODE[family], **caps}


def decode(path, modality: str, family: str):
    """The file decoded as a run whose ``decode:`` section holds the family's reference settings (frames capped at
    ``KIT_MAX_FRAMES`` on both sides)."""
    from omnieval.config import DecodeConfig
    from omnieval.media import spec
    from omnieval.media.decode import decode_media

    settings = DecodeConfig(**kit_settings(family))
    params = spec.video_params(settings) if modality == "video" else spec.audio_params(settings) \
        if modality == "audio" else ()
    return decode_media(path, modality, **dict(params))


def ours(engine, family: str, shown: list[tuple[str, object]]):
    """omnieval's inputs for a prompt of media parts ``(modality, path)`` then the question: (rendered text, the
    engine's tensors for the model, the decoded media by ref)."""
    from omnieval.core.prompts import PromptPart

    parts = [PromptPart("media", modality=m, path=str(p)) for m, p in shown] + [PromptPart("text", text=QUESTION)]
    decoded = {part.ref: decode(part.path, part.modality, family) for part in parts if part.kind == "media"}
    text = engine.prompt_text(parts)
    enc = engine.encode(decoded, parts, text)
    return text, engine._inputs([enc]), decoded


def omni_reference(processor, shown: list[tuple[str, object]], use_audio_in_video: bool):
    """The reference pipeline of the Qwen omni cards on the same files: ``process_mm_info`` on the messages, then the
    processor. The cards leave ``fps`` out (the processor then assumes its default, 2.0 for Qwen2.5-Omni, 1.0 for
    Qwen3-Omni, whatever rate the frames were sampled at); the rate ``qwen-omni-utils`` sampled at is given here, as
    it returns it (``return_video_kwargs``) and as the Qwen2.5-VL card passes it."""
    from qwen_omni_utils import process_mm_info

    content = [{"type": m, m: str(p), **({"max_frames": KIT_MAX_FRAMES} if m == "video" else {})} for m, p in shown]
    messages = [{"role": "user", "content": [*content, {"type": "text", "text": QUESTION}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    audios, images, videos, video_kwargs = process_mm_info(messages, use_audio_in_video=use_audio_in_video,
                                                           return_video_kwargs=True)
    kwargs = {"fps": video_kwargs["fps"][0], "do_sample_frames": False} if videos else {}
    if audios:  # the whole sound ``process_mm_info`` read, as vLLM's processing keeps it (not Whisper's first 30 s)
        kwargs["truncation"] = False
    out = processor(text=text, audio=audios, images=images, videos=videos, return_tensors="pt", padding=True,
                    use_audio_in_video=use_audio_in_video, **kwargs)
    return text, out, videos


def vl_reference(family: str, processor, shown: list[tuple[str, object]]):
    """The Qwen-VL cards' pipeline: ``qwen-vl-utils``' ``process_vision_info`` (16-pixel patches and the frames'
    metadata for Qwen3-VL, whose card also turns the processor's resize off), then the processor with the video
    arguments it returns. The kit's video pixel budget is given in the message (the reference reads it there)."""
    from qwen_vl_utils import process_vision_info

    budget = {k: kit_settings(family)[k] for k in ("min_pixels", "max_pixels")}
    content = [{"type": m, m: str(p), **({"max_frames": KIT_MAX_FRAMES, **budget} if m == "video" else {})}
               for m, p in shown]
    messages = [{"role": "user", "content": [*content, {"type": "text", "text": QUESTION}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    if family.startswith("qwen3-vl"):
        images, videos, kwargs = process_vision_info(messages, image_patch_size=16, return_video_kwargs=True,
                                                     return_video_metadata=True)
        if videos:
            videos, metadata = (list(x) for x in zip(*videos, strict=True))
            kwargs["video_metadata"] = metadata
        out = processor(text=text, images=images, videos=videos, do_resize=False, return_tensors="pt", **kwargs)
        return text, out, videos
    images, videos, kwargs = process_vision_info(messages, return_video_kwargs=True)
    fps = kwargs.pop("fps")  # one a video; transformers 5.19 takes one a call, and none without a video
    if videos:
        kwargs["fps"] = fps[0]
    out = processor(text=[text], images=images, videos=videos, padding=True, return_tensors="pt", **kwargs)
    return text, out, videos


def reference(family: str, processor, shown: list[tuple[str, object]]):
    """The family's reference pipeline on media parts ``(modality, path)`` then the question (no soundtrack)."""
    if family in OMNI:
        return omni_reference(processor, shown, use_audio_in_video=False)
    return vl_reference(family, processor, shown)


def processor_reference(family: str, processor, clip) -> tuple[str, dict]:
    """The reference of a family whose processor samples the file itself: the chat template's text for a video then
    the question, and the processor given the clip's path with ``do_sample_frames=True`` and the count or rate of
    the family's settings (the kit's frame cap included), reading the file with its own video reader."""
    settings = kit_settings(family)
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": QUESTION}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    count = {"fps": settings["fps"], "max_frames": settings["max_frames"]} if "fps" in settings else \
        {"num_frames": settings["num_frames"]}
    out = processor(text=[text], videos=[str(clip)], do_sample_frames=True, return_tensors="pt", **count)
    return text, out


def processor_family_inputs(engine, family: str, clip) -> tuple[str, dict]:
    """omnieval's processor inputs for the same prompt: the clip decoded by the family's settings, the prompt
    rendered by the engine, the processor called by the family's adapter (before any model-side encoding)."""
    from omnieval.core.prompts import PromptPart

    parts = [PromptPart("media", modality="video", path=str(clip)), PromptPart("text", text=QUESTION)]
    decoded = {parts[0].ref: decode(clip, "video", family)}
    text = engine.prompt_text(parts)
    items = engine.family.media_items(parts, decoded)
    return text, engine.family.hf_inputs(engine.processor, text, items)


def assert_same_processor_inputs(got, want) -> None:
    """Every tensor the reference processor returned, equal in omnieval's inputs."""
    import torch

    assert set(want) <= set(got)
    for key, value in want.items():
        if isinstance(value, torch.Tensor):
            assert got[key].shape == value.shape, key
            assert torch.equal(got[key], value), key
        else:
            assert got[key] == value, key


def assert_processor_conformance(engine, family: str, clip) -> None:
    pytest.importorskip("torchcodec", reason="transformers' video processors read a file with torchcodec")
    text, got = processor_family_inputs(engine, family, clip)
    ref_text, want = processor_reference(family, engine.processor, clip)
    assert text == ref_text
    assert_same_processor_inputs(got, want)


def recipe_inputs(engine, family: str, modality: str, path) -> tuple[str, dict, object]:
    """omnieval's processor inputs for one file then the question, the file decoded by the family's recipe (as a run
    with no ``decode:`` options): the rendered text, the adapter's processor inputs, and the prompt's parts and media
    items (for the family's other calls)."""
    from omnieval.config import DecodeConfig
    from omnieval.core.prompts import PromptPart
    from omnieval.engines.families import recipe_for
    from omnieval.media import spec
    from omnieval.media.decode import decode_media

    parts = [PromptPart("media", modality=modality, path=str(path)), PromptPart("text", text=QUESTION)]
    settings = DecodeConfig(**{k: v.value for k, v in recipe_for(family).decode.items()})
    params = spec.audio_params(settings) if modality == "audio" else spec.video_params(settings) \
        if modality == "video" else ()
    decoded = {parts[0].ref: decode_media(str(path), modality, **dict(params))}
    text = engine.prompt_text(parts)
    items = engine.family.media_items(parts, decoded)
    return text, engine.family.hf_inputs(engine.processor, text, items), (parts, items)


def audio_card_conformance(engine, family: str, path) -> None:
    """An audio family's card: ``librosa.load`` at 16 kHz, then the processor on the chat template's text; against
    the file decoded by the family's recipe (its cut where the processor cuts: Qwen2-Audio's 30 s) and the processor
    called by the adapter. Text, ids, features and masks exact."""
    import librosa

    text, got, _ = recipe_inputs(engine, family, "audio", path)
    messages = [{"role": "user", "content": [{"type": "audio"}, {"type": "text", "text": QUESTION}]}]
    ref_text = engine.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    wave, rate = librosa.load(str(path), sr=16_000)
    want = engine.processor(text=[ref_text], audio=[wave], sampling_rate=rate, return_tensors="pt")
    assert text == ref_text
    assert_same_processor_inputs(got, want)


def template_card_conformance(engine, family: str, modality: str, path) -> None:
    """A card that hands the file to the processor's ``apply_chat_template`` (``TEMPLATE_CARD``: Gemma 3n), which
    loads it (an audio file at its feature extractor's rate; an image opened with PIL, the kit's module doc):
    against the file decoded by the family's recipe and the processor called by the adapter. Every tensor exact."""
    from PIL import Image

    text, got, _ = recipe_inputs(engine, family, modality, path)
    media = Image.open(path).convert("RGB") if modality == "image" else str(path)
    messages = [{"role": "user", "content": [{"type": modality, modality: media}, {"type": "text", "text": QUESTION}]}]
    ref_text = engine.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    want = engine.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                return_dict=True, return_tensors="pt")
    assert text == ref_text
    assert_same_processor_inputs(got, want)


def voxtral_card_conformance(engine, path) -> None:
    """Voxtral's card on the 41 s WAV (the kit's module doc): the mistral-common request it sends vLLM gives the ids
    and padded clips omnieval's vLLM prompt holds and the ids of its transformers inputs; the transformers snippet
    (``apply_chat_template`` on the file's path) gives the same ids and the same log-mel features. All exact."""
    import torch
    from mistral_common.protocol.instruct.messages import AudioChunk, TextChunk, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.audio import Audio
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    _, got, (parts, items) = recipe_inputs(engine, "voxtral", "audio", path)
    vllm = engine.family.vllm_prompt(engine.processor, parts, items)
    chunk = AudioChunk.from_audio(Audio.from_file(str(path), strict=False))
    request = ChatCompletionRequest(messages=[UserMessage(content=[chunk, TextChunk(text=QUESTION)])])
    tekken = MistralTokenizer.from_file(str(engine.path / "tekken.json")).encode_chat_completion(request)
    assert got["input_ids"][0].tolist() == tekken.tokens == vllm["prompt_token_ids"]
    clip, rate = vllm["multi_modal_data"]["audio"]
    assert len(tekken.audios) == 1 and rate == tekken.audios[0].sampling_rate
    np.testing.assert_array_equal(clip, tekken.audios[0].audio_array)
    messages = [{"role": "user", "content": [{"type": "audio", "path": str(path)}, {"type": "text", "text": QUESTION}]}]
    want = engine.processor.apply_chat_template(messages)
    assert torch.equal(got["input_ids"], want["input_ids"])
    assert torch.equal(got["input_features"], want["input_features"])


def positions(engine, inputs, use_audio_in_video: bool):
    """The thinker's own 3D positions (``get_rope_index``) of one prompt's inputs."""
    seqlens = inputs["feature_attention_mask"].sum(-1) if "feature_attention_mask" in inputs else None
    return engine.net.get_rope_index(inputs["input_ids"], inputs.get("image_grid_thw"), inputs.get("video_grid_thw"),
                                     inputs["attention_mask"], use_audio_in_video, seqlens,
                                     inputs.get("video_second_per_grid"))


def assert_same_frames(ours_frames: np.ndarray, ref_frames, resized: bool) -> None:
    """The frames sampled (T, H, W, 3 uint8) against the reference's (T, 3, H, W float): same count and size; equal
    pixels, or a bounded mean difference where the two pipelines resize with different kernels."""
    ref = ref_frames.permute(0, 2, 3, 1).numpy()
    assert ours_frames.shape == ref.shape
    diff = np.abs(ours_frames.astype(np.float64) - ref)
    if resized:
        assert diff.mean() <= RESIZED_MEAN
    else:
        assert diff.max() == 0


def assert_close_pixels(family: str, got, want) -> None:
    assert got.shape == want.shape
    diff = (got.float() - want.float()).abs()
    if family == "qwen3-omni":
        assert diff.max() <= PROCESSOR_RESIZE["max"] and diff.mean() <= PROCESSOR_RESIZE["mean"]
    else:
        assert diff.max() == 0


def assert_same_features(family: str, got, want) -> None:
    """Audio features: exact, except the reference's last mel frame for Qwen3-Omni (module doc)."""
    import torch

    if family == "qwen3-omni":
        n = want.shape[-1] - 1
        assert got.shape[-1] - want.shape[-1] in (0, 1)
        got, want = got[..., :n], want[..., :n]
    assert torch.equal(got, want)


def test_every_registered_family_has_a_reference_line():
    """A new family is either run against its reference or says why not, here and in the README."""
    from pathlib import Path

    assert sorted(REFERENCES) == registered_families()
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    for name, reference in REFERENCES.items():
        assert f"- `{name}`: {reference.line()}\n" in readme, name


@pytest.mark.parametrize("family", registered_families())
def test_a_clip_with_its_soundtrack_gives_the_reference_inputs(family, engines, media):
    """The 23.5 s clip (16 of its frames, ``KIT_MAX_FRAMES``), with its soundtrack for the omni families: ids,
    frames, pixel values, audio features and positions."""
    if REFERENCES[family].runner is None:
        pytest.skip(f"{family}: {REFERENCES[family].status}")
    if not takes(family, "video"):
        pytest.skip(f"{family} takes no video")
    needs_video_reader()
    engine = engines(family)
    clip = media["clip.mov"]
    if family in PROCESSOR_SAMPLED:  # the clip alone: its card gives the processor the video
        assert_processor_conformance(engine, family, clip)
        return
    if family not in OMNI:  # the Qwen-VL families take no audio; their budget makes both pipelines resize
        text, got, decoded = ours(engine, family, [("video", clip)])
        ref_text, want, ref_videos = reference(family, engine.processor, [("video", clip)])
        assert text == ref_text
        assert got["input_ids"].tolist() == want["input_ids"].tolist()
        assert_same_frames(decoded[str(clip)].data, ref_videos[0], resized=True)
        assert got["video_grid_thw"].tolist() == want["video_grid_thw"].tolist()
        return
    text, got, decoded = ours(engine, family, [("video", clip), ("audio", clip)])
    ref_text, want, ref_videos = omni_reference(engine.processor, [("video", clip)], use_audio_in_video=True)
    assert text == ref_text
    assert got["input_ids"].tolist() == want["input_ids"].tolist()
    assert_same_frames(decoded[str(clip)].data, ref_videos[0], resized=False)
    assert_close_pixels(family, got["pixel_values_videos"], want["pixel_values_videos"])
    assert got["video_grid_thw"].tolist() == want["video_grid_thw"].tolist()
    np.testing.assert_allclose(got["video_second_per_grid"].numpy(), want["video_second_per_grid"].numpy(),
                               rtol=1e-6)
    assert_same_features(family, got["input_features"], want["input_features"])
    pos, delta = positions(engine, got, True)
    ref_pos, ref_delta = positions(engine, want, True)
    assert pos.tolist() == ref_pos.tolist() and delta.tolist() == ref_delta.tolist()


@pytest.mark.parametrize("family", registered_families())
def test_a_long_audio_gives_the_reference_inputs(family, engines, media):
    """A 41 s WAV, longer than Whisper's 30 s window: ids (every audio token), features and positions."""
    if REFERENCES[family].runner is None:
        pytest.skip(f"{family}: {REFERENCES[family].status}")
    if family in AUDIO_CARD:
        audio_card_conformance(engines(family), family, media["long.wav"])
        return
    if family in TEMPLATE_CARD:
        template_card_conformance(engines(family), family, "audio", media["long.wav"])
        return
    if family == "voxtral":
        voxtral_card_conformance(engines(family), media["long.wav"])
        return
    if family not in OMNI:
        pytest.skip(f"{family}: its reference here is its video processor; audio goes to its processor as omnieval "
                    "hands it over" if takes(family, "audio") else f"{family} takes no audio")
    engine = engines(family)
    text, got, _ = ours(engine, family, [("audio", media["long.wav"])])
    ref_text, want, _ = omni_reference(engine.processor, [("audio", media["long.wav"])], use_audio_in_video=False)
    assert text == ref_text
    ids = got["input_ids"][0].tolist()
    if family == "qwen3-omni":
        ids = without_padding_token(engine, ids, len(decode(media["long.wav"], "audio", family).data))
    assert ids == want["input_ids"][0].tolist()
    assert_same_features(family, got["input_features"], want["input_features"])
    if family != "qwen3-omni":  # where an audio token was added, every later position moves by one
        pos, _ = positions(engine, got, False)
        assert pos.tolist() == positions(engine, want, False)[0].tolist()


def without_padding_token(engine, ids: list[int], n_samples: int) -> list[int]:
    """Qwen3-Omni's ids less the audio token its trailing silence adds (``Qwen3OmniFamily``): a waveform of a whole
    number of 10 ms hops is given one hop more, which adds a token where the last 100-frame window held none. That
    is the one difference from the reference allowed; the count is the family's own arithmetic."""
    from omnieval.engines.families import QWEN3_HOP, qwen3_audio_tokens

    extra = engine.family.audio_tokens(n_samples) - qwen3_audio_tokens(-(-n_samples // QWEN3_HOP))
    assert extra in (0, 1)
    if extra:
        ids = list(ids)
        ids.remove(engine.audio_token_id)
    return ids


@pytest.mark.parametrize("family", registered_families())
def test_a_4_3_image_gives_the_reference_inputs(family, engines, media):
    """A 640 x 480 PNG: the same grid and ids; the reference resizes it to multiples of the factor with PIL's bicubic
    before the processor, omnieval leaves the resize to the processor (torchvision's bicubic), so pixel values are
    bounded by their mean difference."""
    if REFERENCES[family].runner is None:
        pytest.skip(f"{family}: {REFERENCES[family].status}")
    if not takes(family, "image"):
        pytest.skip(f"{family} takes no image")
    if family in TEMPLATE_CARD:
        template_card_conformance(engines(family), family, "image", media["image.png"])
        return
    if family in PROCESSOR_SAMPLED:
        pytest.skip(f"{family}: its reference here is its video processor; images go to its processor as omnieval "
                    "hands them over")
    engine = engines(family)
    text, got, _ = ours(engine, family, [("image", media["image.png"])])
    ref_text, want, _ = reference(family, engine.processor, [("image", media["image.png"])])
    assert text == ref_text
    assert got["input_ids"].tolist() == want["input_ids"].tolist()
    assert got["image_grid_thw"].tolist() == want["image_grid_thw"].tolist()
    diff = (got["pixel_values"].float() - want["pixel_values"].float()).abs()
    assert diff.mean() <= IMAGE_MEAN


@pytest.mark.parametrize("family", registered_families())
def test_a_portrait_clip_gives_the_reference_inputs(family, engines, media):
    """A 180 x 320 clip at 30 fps, 7.3 s (its frames upscaled by both pipelines): frame count, size, ids and
    positions exact; pixels within ``RESIZED_MEAN``."""
    if REFERENCES[family].runner is None:
        pytest.skip(f"{family}: {REFERENCES[family].status}")
    if not takes(family, "video"):
        pytest.skip(f"{family} takes no video")
    needs_video_reader()
    engine = engines(family)
    clip = media["portrait.mp4"]
    if family in PROCESSOR_SAMPLED:
        assert_processor_conformance(engine, family, clip)
        return
    text, got, decoded = ours(engine, family, [("video", clip)])
    ref_text, want, ref_videos = reference(family, engine.processor, [("video", clip)])
    assert text == ref_text
    assert got["input_ids"].tolist() == want["input_ids"].tolist()
    frames = ref_videos[0][0] if isinstance(ref_videos[0], tuple) else ref_videos[0]
    assert_same_frames(decoded[str(clip)].data, frames, resized=True)
    assert got["video_grid_thw"].tolist() == want["video_grid_thw"].tolist()
    if family in OMNI:
        pos, _ = positions(engine, got, False)
        assert pos.tolist() == positions(engine, want, False)[0].tolist()


@pytest.mark.parametrize("family", OMNI)
def test_an_aac_soundtrack_is_heard_as_the_reference_hears_it(family, media):
    """The portrait clip's AAC soundtrack at 44.1 kHz: the reference reads it through ffmpeg's command line and
    resamples with soxr (librosa), omnieval through PyAV's resampler, trimmed to the stream's declared duration. The
    two waveforms agree sample by sample within ``AAC_MAX``; the reference also hears the decoder's trailing padding
    (under one AAC frame, 1024 samples at 44.1 kHz), which omnieval trims."""
    from qwen_omni_utils import process_mm_info

    clip = str(media["portrait.mp4"])
    wave = decode(clip, "audio", family).data
    messages = [{"role": "user", "content": [{"type": "video", "video": clip}]}]
    ref = process_mm_info(messages, use_audio_in_video=True)[0][0]
    assert len(wave) == round(7.3 * 16_000)
    assert 0 <= len(ref) - len(wave) <= 1024 * 16_000 / 44_100 + 1
    assert np.abs(wave - ref[:len(wave)]).max() <= AAC_MAX


@pytest.mark.parametrize("family", sorted(REFERENCE_DECODE))
def test_a_runs_default_decode_for_the_family_is_the_settings_the_kit_proved(family, tmp_path):
    """With no ``decode:`` options, a model of the family decodes by its recipe; the recipe must resolve to the
    settings under which the kit found omnieval's inputs equal to the reference pipeline's (``REFERENCE_DECODE``,
    written from the reference utilities' constants), so what the kit proves is what a run does by default."""
    from omnieval.config import parse_run_config
    from omnieval.run.recipe import model_decode

    config = parse_run_config({"benchmark": str(tmp_path / "bench"), "output": str(tmp_path / "out"),
                               "models": [{"name": "m", "engine": "simulated", "recipe": family}]})
    resolved = model_decode(config, config.models[0]).decode
    assert {k: getattr(resolved, k) for k in REFERENCE_DECODE[family]} == REFERENCE_DECODE[family]
