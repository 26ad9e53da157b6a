"""Gemma 3n (``AudioFamily``), Gemma 4 and its encoder-free variant Gemma 4 Unified (``Gemma4Family``).

Gemma 4 gives the transformers model its image and video features already encoded (``hf_model_inputs``), as
transformers' own ``generate`` does: its forward cannot encode video frames by itself.

Recipes (transformers 5.19's processors): Gemma 4 and Gemma 4 Unified sample 32 frames a clip, the first of each of
32 equal runs (their video processors' ``num_frames`` and the ``uniform`` rule of ``default_sample_indices_fn``), at
their own size (the processors size frames to their token budget themselves);
Gemma 3n and Gemma 4 hear 16 kHz audio cut at 30 s (their audio feature extractors' ``max_length`` of 480000
samples, truncation on); Gemma 4 Unified's extractor cuts nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from omnieval.engines.families.base import AudioFamily, register_family, video_metadata
from omnieval.engines.recipes import (
    TRANSFORMERS_SAMPLING,
    Recipe,
    Sourced,
    audio_recipe,
    own_size,
    processor_source,
    register_recipe,
)
from omnieval.media.decoded import DecodedMedia


class Gemma4Family(AudioFamily):
    """Gemma 4: images, waveforms at the feature extractor's rate (``AudioFamily``) and videos whose decoded frames
    go in as they are (``do_sample_frames`` off) with their sampled fps, from which both engines write each frame's
    ``mm:ss`` time into the prompt.

    transformers' forward (5.19) encodes a prompt's video frames without the frame count of each video, which its
    video encoder requires, and fails; its ``generate`` encodes the media first with everything the encoders take.
    ``hf_model_inputs`` does the same for the forward: the image and video features from the model's own
    ``get_image_features`` / ``get_video_features``, passed as ``mm_encoder_outputs``."""

    def media_kwargs(self, items: Sequence[DecodedMedia]) -> dict:
        out = super().media_kwargs(items)
        videos = [video_metadata(i) for i in items if i.modality == "video"]
        return {**out, "video_metadata": videos, "do_sample_frames": False} if videos else out

    def vllm_item(self, item: DecodedMedia):
        if item.modality != "video":
            return super().vllm_item(item)
        return item.data, {**video_metadata(item), "do_sample_frames": False}

    def hf_model_inputs(self, net, inputs: dict) -> dict:
        if "pixel_values_videos" not in inputs:
            return inputs
        out = dict(inputs)
        model = net.model
        encoded = {"video": model.get_video_features(out.pop("pixel_values_videos"), out.pop("video_position_ids"),
                                                     out.pop("num_frames_per_video"), return_dict=True)}
        if "pixel_values" in out:
            encoded["image"] = model.get_image_features(out.pop("pixel_values"), out.pop("image_position_ids"),
                                                        return_dict=True)
        return {**out, "mm_encoder_outputs": encoded}


register_family(AudioFamily(name="gemma3n", model_types=("gemma3n",), modalities=("image", "audio"),
                            model_class="Gemma3nForConditionalGeneration", packages=("timm",)))
register_family(Gemma4Family(name="gemma4", model_types=("gemma4",), modalities=("image", "audio", "video"),
                             model_class="Gemma4ForConditionalGeneration"))
register_family(Gemma4Family(name="gemma4-unified", model_types=("gemma4_unified",),
                             modalities=("image", "audio", "video"),
                             model_class="Gemma4UnifiedForConditionalGeneration"))


GEMMA_AUDIO_CAP = 30.0  # 480000 samples at 16 kHz


def gemma_recipe(family: str, video_processor: str | None, extractor: str, audio_cap: bool) -> Recipe:
    """A Gemma family's recipe: its audio feature extractor's rate and cut, and where it takes video, its video
    processor's own sampling (32 frames by the ``uniform`` rule)."""
    cap = processor_source(extractor, "max_length (480000 samples, truncation=True)")
    recipe = audio_recipe(family, extractor, GEMMA_AUDIO_CAP if audio_cap else None, cap)
    if video_processor is None:
        return recipe
    video = {"num_frames": Sourced(32, processor_source(video_processor, "num_frames")),
             "index_rule": Sourced("uniform", TRANSFORMERS_SAMPLING), "max_side": own_size(video_processor)}
    return Recipe(family=family, decode=recipe.decode | video)


register_recipe(gemma_recipe("gemma3n", None, "Gemma3nAudioFeatureExtractor", audio_cap=True))
register_recipe(gemma_recipe("gemma4", "Gemma4VideoProcessor", "Gemma4AudioFeatureExtractor", audio_cap=True))
register_recipe(gemma_recipe("gemma4-unified", "Gemma4UnifiedVideoProcessor", "Gemma4UnifiedAudioFeatureExtractor",
                             audio_cap=False))


# -- placeholder counts: the tests' reference, worked out from the published preprocessing rules and the media
# sizes alone, never by the adapter's or the processor's code (tests/family_placeholders.py binds them to the
# tiny builds of omnieval/dev) --


def gemma4_frame_tokens(height: int, width: int, budget: int) -> int:
    """Gemma 4's soft tokens for an image or video frame under a budget of ``budget`` tokens: the picture scaled,
    aspect kept, to about ``budget x 9`` patches of 16 pixels, each side cut down to a multiple of 48 (patch x the
    3 x 3 pooling); one token per pooled 3 x 3 patches."""
    scale = math.sqrt(budget * 9 * 16 * 16 / (height * width))
    rows, cols = math.floor(height * scale / 48) * 3, math.floor(width * scale / 48) * 3
    return rows * cols // 9


def gemma4_audio_tokens(n_samples: int) -> int:
    """Gemma 4's audio soft tokens for a 16 kHz waveform: 20 ms mel frames (320 samples, the unfolded window one
    longer) every 10 ms over the waveform with 10 ms of silence before it, only frames wholly inside it; then two
    stride-2 convolutions (kernel 3, padding 1); at most 750 (``audio_seq_length``)."""
    frames = (n_samples + 160 - 321) // 160 + 1
    for _ in range(2):
        frames = (frames - 1) // 2 + 1
    return min(frames, 750)
