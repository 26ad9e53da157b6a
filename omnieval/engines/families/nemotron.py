"""Nemotron-H omni (``NemotronOmniFamily``, transformers engine only): one video a prompt (its processor lays out
all the frames of a prompt as one clip), its video features given encoded (``hf_model_inputs``): its forward
fails on the one tensor its own video encoder returns. Its recipe: 16 kHz audio, whole (its processor's
``audio_sampling_rate``); its frame count and size have no published setting (omnieval's defaults).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from omnieval.engines.families.base import AudioFamily, register_family
from omnieval.engines.omni_inputs import DEFAULT_VIDEO_FPS
from omnieval.engines.recipes import Recipe, Sourced, processor_source, register_recipe
from omnieval.media.decoded import DecodedMedia


class NemotronOmniFamily(AudioFamily):
    """Nemotron-H omni (transformers engine only): images, waveforms at the feature extractor's rate
    (``AudioFamily``), and one video a prompt whose decoded frames go in as they are with their own times.

    * Its processor lays out the frames of every video of a call as one clip (the placeholders of the first
      ``<video>`` only), and its model scatters image and video features onto the same ``<image>`` tokens, so a
      prompt with several videos, or with a video and an image, is refused here in one line (an errored row).
    * Each pair of frames is labelled with its frames' times, ``frame index x int(1000 / fps) / 1000`` s from the
      metadata: the frames' own times as for Qwen3-VL (``TimestampedVideoFamily``: twice the sampled rate, odd
      indices), cut to whole milliseconds by the processor's rule.
    * transformers' forward (5.19) concatenates the video features as if they were a list of tensors and fails on
      the one tensor its ``get_video_features`` returns; ``hf_model_inputs`` encodes the frames with that method and
      passes its temporal patches' features one by one (``mm_encoder_outputs``), in the same order."""

    def media_kwargs(self, items: Sequence[DecodedMedia]) -> dict:
        videos = [item for item in items if item.modality == "video"]
        images = sum(item.modality == "image" for item in items)
        if len(videos) > 1 or (videos and images):
            raise ValueError(f"{self.name} takes one video a prompt and no image beside it ({len(videos)} videos, "
                             f"{images} images given): its processor lays out the frames of all the videos of a "
                             "prompt as one clip")
        out = super().media_kwargs(items)
        if not videos:
            return out
        from transformers.video_utils import VideoMetadata

        n = int(videos[0].data.shape[0])
        fps = float(videos[0].fps or DEFAULT_VIDEO_FPS)
        metadata = VideoMetadata(total_num_frames=2 * n, fps=2 * fps, duration=n / fps,
                                 frames_indices=[2 * i + 1 for i in range(n)])
        return {**out, "video_metadata": metadata, "do_sample_frames": False}

    def hf_model_inputs(self, net, inputs: dict) -> dict:
        if "pixel_values_videos" not in inputs:
            return inputs
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        out = dict(inputs)
        features = net.get_video_features(out.pop("pixel_values_videos"), return_dict=True).pooler_output
        return {**out, "mm_encoder_outputs": {"video": BaseModelOutputWithPooling(pooler_output=tuple(features))}}


register_family(NemotronOmniFamily(
    name="nemotron-h-omni", model_types=("nemotron_h_omni",), modalities=("image", "audio", "video"),
    model_class="NemotronH_Omni_Reasoning_V3", packages=("librosa",), placeholder_tokens={"video": "<image>"},
    refusals={"vllm": "vLLM 0.32 maps NemotronH_Omni_Reasoning_V3 to NemotronH_Nano_VL_V2, whose processor reads "
                      "the remote-code config and fails on the transformers-native one (no attribute 'patch_size')"}))
register_recipe(Recipe("nemotron-h-omni", decode={
    "sample_rate": Sourced(16_000, processor_source("NemotronH_Omni_Reasoning_V3Processor", "audio_sampling_rate"))}))


# -- placeholder counts: the tests' reference, worked out from the published preprocessing rules and the media
# sizes alone, never by the adapter's or the processor's code (tests/family_placeholders.py binds them to the
# tiny builds of omnieval/dev) --


def nemotron_image_tokens(height: int, width: int) -> int:
    """Nemotron-H omni's ``<image>`` tokens for a picture (the published image preprocessing: 16-pixel patches,
    at least 1024 and at most 13312 of them): the patch grid of the picture with each side's count rounded half up
    after adding half a patch, shrunk (both sides floored) by the square root of the budget over its area where
    larger, or grown (both ceiled) to at least 1024 patches where smaller; then each side made even, up where the
    grid stays within 13312 patches, else down (to at least 2); one token per 2 x 2 patches."""
    rows, cols = round(height / 16 + 0.5), round(width / 16 + 0.5)
    shrink = min(math.sqrt(13312 / (rows * cols)), 1.0)
    rows, cols = math.floor(shrink * rows), math.floor(shrink * cols)
    if rows * cols < 1024:
        grow = math.sqrt(1024 / (rows * cols))
        rows, cols = math.ceil(grow * rows), math.ceil(grow * cols)
    if rows % 2:
        rows = rows + 1 if (rows + 1) * cols <= 13312 else max(2, rows - 1)
    if cols % 2:
        cols = cols + 1 if rows * (cols + 1) <= 13312 else max(2, cols - 1)
    return rows * cols // 4


def nemotron_video_tokens(frames: int, height: int, width: int, target: int) -> int:
    """Nemotron-H omni's ``<image>`` tokens for a video (the published video preprocessing; ``target`` patches a
    frame: the tiny build's 64): every frame one tile of 16-pixel patches, ``round(sqrt(target / aspect))`` rows
    and ``round(sqrt(target x aspect))`` columns (aspect = width / height), both made even, up where the tile stays
    within ``target`` patches, else both down (to at least 2); one token per 2 x 2 patches of a frame, one run of
    them per pair of frames (the last frame repeated where the count is odd)."""
    aspect = width / height
    rows, cols = max(round(math.sqrt(target / aspect)), 1), max(round(math.sqrt(target * aspect)), 1)
    up_rows, up_cols = rows + rows % 2, cols + cols % 2
    if up_rows * up_cols <= target:
        rows, cols = up_rows, up_cols
    else:
        rows, cols = max(2, rows - rows % 2), max(2, cols - cols % 2)
    return math.ceil(frames / 2) * rows * cols // 4


def nemotron_audio_tokens(n_samples: int) -> int:
    """Nemotron-H omni's ``<so_embedding>`` tokens for a 16 kHz waveform: ``1 + samples // 160`` mel frames (the
    STFT centred on each 10 ms hop), halved (rounding up) by each of three stride-2 convolutions."""
    frames = 1 + n_samples // 160
    for _ in range(3):
        frames = math.ceil(frames / 2)
    return frames
