"""VideoLLaMA3 (transformers engine only): given the same frame metadata as Qwen3-VL (``TimestampedVideoFamily``),
it writes each frame's time (``Time 0.1s:``) before the frame's placeholders.

Recipe: 1 frame a second, at most 180 (the card's video message ``{"fps": 1, "max_frames": 180}``), at least 4 and
no rounding to pairs (its video processor's ``min_frames`` and ``temporal_patch_size`` 1), the first frame of each
of N equal runs (``uniform``: the processor's ``sample_frames``), at their own size: its processor sizes them under
one pixel budget over the clip, from the size it is given (a 180-frame 1080p clip holds 1.1 GB decoded).
"""

from __future__ import annotations

from omnieval.engines.families.base import register_family
from omnieval.engines.families.qwen_vl import TimestampedVideoFamily, qwen_vl_grid
from omnieval.engines.recipes import Recipe, Sourced, own_size, processor_source, register_recipe

register_family(TimestampedVideoFamily(
    name="videollama3", model_types=("video_llama_3",), modalities=("image", "video"),
    model_class="VideoLlama3ForConditionalGeneration",
    refusals={"vllm": "vLLM 0.32 has no VideoLLaMA3 model (no VideoLlama3ForConditionalGeneration in its registry)"}))

VIDEOLLAMA3_CARD = ("https://huggingface.co/DAMO-NLP-SG/VideoLLaMA3-7B (model card, video inference: "
                    "{'video_path': ..., 'fps': 1, 'max_frames': 180})")
register_recipe(Recipe("videollama3", decode={
    "fps": Sourced(1.0, VIDEOLLAMA3_CARD), "max_frames": Sourced(180, VIDEOLLAMA3_CARD),
    "min_frames": Sourced(4, processor_source("VideoLlama3VideoProcessor", "min_frames")),
    "frame_factor": Sourced(1, processor_source("VideoLlama3VideoProcessor", "temporal_patch_size")),
    "index_rule": Sourced("uniform", processor_source("VideoLlama3VideoProcessor", "sample_frames")),
    "max_side": own_size("VideoLlama3VideoProcessor")}))


# -- placeholder counts: the tests' reference, worked out from the published preprocessing rules and the media
# sizes alone, never by the adapter's or the processor's code (tests/family_placeholders.py binds them to the
# tiny builds of omnieval/dev) --


def videollama3_image_tokens(height: int, width: int) -> int:
    """VideoLLaMA3's tokens for a picture: sides rounded to 14-pixel patches, kept within 16 to 16384 patches
    (the released image preprocessor config), one token a patch (no merging)."""
    gh, gw = qwen_vl_grid(height, width, 16 * 14 * 14, 16384 * 14 * 14, factor=14)
    return gh * gw // 4  # ``qwen_vl_grid`` counts half-factor (7-pixel) cells: 2 x 2 of them a patch


def videollama3_video_tokens(frames) -> int:
    """VideoLLaMA3's tokens for a video's decoded frames (uint8, frames x height x width x 3), by the released video
    preprocessing: every frame resized to sides that are multiples of 28 (14-pixel patches merged 2 x 2), the frames
    together within 16384 merged patches (each frame within 12845056 / frames pixels, at least 16 merged patches),
    by torchvision's antialiased bicubic resize in uint8 as the processor resizes; then one token per merged patch
    of the first frame, and of each later frame the merged patches whose pixels changed: mean absolute difference
    from the previous frame of the normalised values (mean and std 0.5, so twice the 0..255 difference over 255)
    times 255 above 0.1, i.e. a sum of absolute 0..255 differences over its 28 x 28 x 3 values above 2352 x 0.05;
    a frame keeping none keeps its first. Worked out from the pixels: the count depends on the content."""
    import numpy as np
    import torch
    import torchvision.transforms.v2.functional as tvf

    n, height, width = frames.shape[:3]
    gh, gw = qwen_vl_grid(height, width, 16 * 28 * 28, 16384 * 28 * 28 // n, factor=28)
    h, w = gh * 14, gw * 14  # ``qwen_vl_grid`` counts 14-pixel cells for factor 28
    resized = tvf.resize(torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2), [h, w],
                         interpolation=tvf.InterpolationMode.BICUBIC, antialias=True).numpy().astype(np.int64)
    blocks = resized.reshape(n, 3, h // 28, 28, w // 28, 28)
    change = np.abs(np.diff(blocks, axis=0)).sum(axis=(1, 3, 5))  # (n - 1, rows, cols) sums of 2352 values
    kept = [(h // 28) * (w // 28)] + [max(int((20 * c > 2352).sum()), 1) for c in change]
    return sum(kept)
