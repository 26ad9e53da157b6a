"""LLaVA-OneVision (``OneImageOnVllmFamily``): one image a prompt on vLLM, where the two engines agree.

Recipe: its video processor's (transformers 5.19) frame rule, the first frame of each of N equal runs (``uniform``),
and the frames at their own size (it resizes them to 384 x 384 itself); no frame count is published with it (the
processor has none: omnieval's 8).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from omnieval.engines.families.base import FamilyAdapter, register_family
from omnieval.engines.recipes import TRANSFORMERS_SAMPLING, Recipe, Sourced, own_size, register_recipe
from omnieval.media.decoded import DecodedMedia


class OneImageOnVllmFamily(FamilyAdapter):
    """LLaVA-OneVision: transformers gives each image of a prompt with several images its base tile only (plus a
    newline), one image alone its anyres tiles; vLLM 0.32 tiles every image. The two agree on one image a prompt,
    so the vLLM engine refuses a prompt with more (an errored row, not a silently different model)."""

    def vllm_fields(self, items: Sequence[DecodedMedia]) -> tuple[dict, dict, dict | None]:
        images = sum(item.modality == "image" for item in items)
        if images > 1:
            raise ValueError(f"{self.name} on vLLM takes one image a prompt ({images} given): vLLM tiles every image "
                             "where the model's reference code gives each of several images its base tile only")
        return super().vllm_fields(items)


register_family(OneImageOnVllmFamily(name="llava-onevision", model_types=("llava_onevision",),
                                     modalities=("image", "video"),
                                     model_class="LlavaOnevisionForConditionalGeneration"))
register_recipe(Recipe("llava-onevision", decode={
    "index_rule": Sourced("uniform", TRANSFORMERS_SAMPLING),
    "max_side": own_size("LlavaOnevisionVideoProcessor")}))


# -- placeholder counts: the tests' reference, worked out from the published preprocessing rules and the media
# sizes alone, never by the adapter's or the processor's code (tests/family_placeholders.py binds them to the
# tiny builds of omnieval/dev) --


def llava_ov_image_tokens(height: int, width: int, tile: int, pinpoints) -> int:
    """LLaVA-OneVision's published anyres layout for one image: the pinpoint canvas that keeps the most of the
    picture's resolution (then wastes the least), its tiles' patch grid cut back to the picture's aspect ratio
    (padding rows or columns dropped), shrunk to at most 9 tiles' worth when it exceeds that by 10%, one newline
    token per row, plus the base tile's patches. ``tile``: the vision tower's image side (14-pixel patches);
    ``pinpoints``: the processor's ``image_grid_pinpoints`` as ``(height, width)`` canvases."""
    side = tile // 14  # patches per tile side

    def kept(canvas):
        ch, cw = canvas
        s = min(cw / width, ch / height)
        return min(int(width * s) * int(height * s), width * height), -(ch * cw)

    ch, cw = max(pinpoints, key=kept)
    rows, cols = side * ch // tile, side * cw // tile
    if width / height > cols / rows:  # wider than the canvas: rows of padding above and below
        rows -= 2 * ((rows - int(round(height * cols / width, 7))) // 2)
    else:
        cols -= 2 * ((cols - int(round(width * rows / height, 7))) // 2)
    ratio = math.sqrt(rows * cols / (9 * side * side))
    if ratio > 1.1:
        rows, cols = int(rows // ratio), int(cols // ratio)
    return side * side + rows * cols + rows


def llava_ov_video_tokens(frames: int, tile: int) -> int:
    """Each frame's patch grid (``tile``-pixel frames, 14-pixel patches) pooled 2 x 2 (ceil), one newline token for
    the whole video."""
    pooled = math.ceil(tile // 14 / 2)
    return frames * pooled * pooled + 1
