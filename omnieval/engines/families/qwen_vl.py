"""Qwen2.5-VL (``QwenVisionFamily``), Qwen3-VL, Qwen3-VL-MoE and Qwen3.5 (``TimestampedVideoFamily``): their
adapters, registrations and recipes.

Qwen3-VL and Qwen3.5 write each frame pair's time into the prompt: the adapter gives the decoded frames' own
times as frame metadata, the same on both engines (VideoLLaMA3, ``videollama3.py``, is given the same metadata).
The recipes are ``qwen-vl-utils``' sampling (``recipes.qwen_vl_recipe``) with the patch size each card passes;
Qwen3.5's is its video processor's own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from omnieval.engines.families.base import FamilyAdapter, register_family, video_metadata
from omnieval.engines.omni_inputs import DEFAULT_VIDEO_FPS
from omnieval.engines.recipes import (
    QWEN3_VL_CARD,
    TRANSFORMERS,
    Recipe,
    Sourced,
    own_size,
    qwen_vl_recipe,
    register_recipe,
)
from omnieval.media.decoded import DecodedMedia


class QwenVisionFamily(FamilyAdapter):
    """Qwen2-VL-style video: the decoded frames go in as they are (``do_sample_frames`` off) with their sampled fps,
    so both engines give every video the same ``second_per_grid`` (one value per video, exact on both)."""

    def video_metadata(self, item: DecodedMedia) -> dict:
        return video_metadata(item)

    def media_kwargs(self, items: Sequence[DecodedMedia]) -> dict:
        out = super().media_kwargs(items)
        videos = [self.video_metadata(i) for i in items if i.modality == "video"]
        return {**out, "video_metadata": videos, "do_sample_frames": False} if videos else out

    def vllm_item(self, item: DecodedMedia):
        if item.modality != "video":
            return item.data
        return item.data, {**self.video_metadata(item), "do_sample_frames": False}


class TimestampedVideoFamily(QwenVisionFamily):
    """Qwen3-VL and Qwen3.5: the processor writes each frame pair's time into the prompt (``<1.6 seconds>``), the
    mean of its two frames' times, a frame's time being its index over the fps of the metadata; the positions do
    not depend on time. Both engines compute the same text from the same metadata (vLLM tokenizes each time apart,
    transformers in the prompt, between special tokens either way: the same ids). VideoLLaMA3's processor writes
    each frame's own time (``Time 0.1s:``, one frame a temporal patch) from the same metadata.

    The decoder takes frame ``i`` of ``n`` at the centre of its bin, ``(i + 0.5) x duration / n``
    (``media.decode.sample_times``), not at ``i / fps``: the metadata says so exactly with integer indices, as the
    odd frames ``2i + 1`` of a clip at twice the sampled rate, so the times in the prompt are the frames' own.
    Frames taken by ``linspace`` indices (``index_rule``) carry those indices and the clip's rate
    (``decode_video``'s meta), which the metadata gives as they are, as the reference utilities do."""

    def video_metadata(self, item: DecodedMedia) -> dict:
        if "frame_indices" in item.meta:
            return {"fps": float(item.meta["source_fps"]), "duration": item.meta["duration"],
                    "total_num_frames": item.meta["source_frames"], "frames_indices": list(item.meta["frame_indices"])}
        n = int(item.data.shape[0])
        fps = float(item.fps or DEFAULT_VIDEO_FPS)
        return {"fps": 2 * fps, "duration": n / fps, "total_num_frames": 2 * n,
                "frames_indices": [2 * i + 1 for i in range(n)]}


register_family(QwenVisionFamily(name="qwen2.5-vl", model_types=("qwen2_5_vl",), modalities=("image", "video"),
                                 model_class="Qwen2_5_VLForConditionalGeneration"))
register_family(TimestampedVideoFamily(name="qwen3-vl", model_types=("qwen3_vl",), modalities=("image", "video"),
                                       model_class="Qwen3VLForConditionalGeneration"))
register_family(TimestampedVideoFamily(name="qwen3-vl-moe", model_types=("qwen3_vl_moe",),
                                       modalities=("image", "video"), model_class="Qwen3VLMoeForConditionalGeneration"))


# Measured on the tiny build (dev/tiny_qwen3_5.py): vLLM 0.32's CPU kernel for the Gated DeltaNet layers asserts
# bfloat16 inputs (and rejects heads of 32); in bfloat16 the option logprobs differ from transformers' float32 by up
# to 0.04, and from its bfloat16 by as much, so agreement with the reference code cannot be shown here.
QWEN3_5_VLLM_REFUSAL = ("vLLM 0.32's CPU build runs its Gated DeltaNet layers in bfloat16 only, where its option "
                        "logprobs differ from transformers' by up to 0.04: not shown to agree with the reference code")


register_family(TimestampedVideoFamily(name="qwen3.5", model_types=("qwen3_5",), modalities=("image", "video"),
                                       model_class="Qwen3_5ForConditionalGeneration",
                                       refusals={"vllm": QWEN3_5_VLLM_REFUSAL}))

register_recipe(qwen_vl_recipe("qwen2.5-vl", 14, ""))
register_recipe(qwen_vl_recipe("qwen3-vl", 16, QWEN3_VL_CARD))
register_recipe(qwen_vl_recipe("qwen3-vl-moe", 16, QWEN3_VL_CARD))


QWEN3_VL_PROCESSOR = f"{TRANSFORMERS}, Qwen3VLVideoProcessor.sample_frames (the processor's own default)"


# Qwen3.5 goes through Qwen3VLVideoProcessor: its frame count by rate is the utilities' without the rounding to pairs
# (frame_factor 1), its indices linspace; its pixel budget bounds a whole clip (t x h x w), which the per-frame
# budget of the decoder cannot state, so its frames go to it at their own size and it sizes them itself.
register_recipe(Recipe("qwen3.5", decode={
    "fps": Sourced(2.0, QWEN3_VL_PROCESSOR), "min_frames": Sourced(4, QWEN3_VL_PROCESSOR),
    "max_frames": Sourced(768, QWEN3_VL_PROCESSOR), "frame_factor": Sourced(1, QWEN3_VL_PROCESSOR),
    "index_rule": Sourced("linspace", QWEN3_VL_PROCESSOR), "max_side": own_size("Qwen3VLVideoProcessor")}))


# -- placeholder counts: the tests' reference, worked out from the published preprocessing rules and the media
# sizes alone, never by the adapter's or the processor's code (tests/family_placeholders.py binds them to the
# tiny builds of omnieval/dev) --


def qwen_vl_grid(height: int, width: int, min_pixels: int, max_pixels: int, factor: int = 28) -> tuple[int, int]:
    """Qwen2-VL's published resize rule: sides rounded to multiples of ``factor`` (patch x merge: 28), area brought
    into [min, max] keeping the aspect ratio; returns the grid of patches (``factor / 2`` pixels)."""
    h, w = round(height / factor) * factor, round(width / factor) * factor
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h, w = math.floor(height / beta / factor) * factor, math.floor(width / beta / factor) * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h // (factor // 2), w // (factor // 2)


def qwen3_vl_video_grid(frames: int, height: int, width: int, min_pixels: int, max_pixels: int,
                        factor: int = 32) -> tuple[int, int]:
    """Qwen3-VL's published video resize rule: sides rounded to multiples of ``factor`` (patch 16 x merge 2), the
    pixels of all the frames together (the frame count rounded to frame pairs) brought into [min, max] keeping the
    aspect ratio, the scale worked out from the frame count as it is; returns the grid of 16-pixel patches."""
    h, w = round(height / factor) * factor, round(width / factor) * factor
    pairs = round(frames / 2) * 2
    if pairs * h * w > max_pixels:
        beta = math.sqrt(frames * height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif pairs * h * w < min_pixels:
        beta = math.sqrt(min_pixels / (frames * height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h // 16, w // 16
