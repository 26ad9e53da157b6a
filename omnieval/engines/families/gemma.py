"""Gemma 3n (``AudioFamily``), Gemma 4 and its encoder-free variant Gemma 4 Unified (``Gemma4Family``).

Gemma 4 gives the transformers model its image and video features already encoded (``hf_model_inputs``), as
transformers' own ``generate`` does: its forward cannot encode video frames by itself. Its recipe is its video
processor's own frame count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from omnieval.engines.families.base import AudioFamily, register_family, video_metadata
from omnieval.engines.recipes import TRANSFORMERS, Recipe, Sourced, register_recipe
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


GEMMA4_PROCESSOR = f"{TRANSFORMERS}, Gemma4VideoProcessor.num_frames (the processor's own default)"


# Gemma 4's video processor samples 32 frames, the first of each of 32 equal runs of frames
# (transformers' default_sample_indices_fn): the count is its own; its index rule has no match here (bin centres).
register_recipe(Recipe("gemma4", decode={"num_frames": Sourced(32, GEMMA4_PROCESSOR)}))


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
