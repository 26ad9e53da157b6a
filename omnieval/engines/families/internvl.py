"""InternVL: the base adapter, each video frame a tile of image tokens.

Recipe: 8 frames a clip, each one tile (the InternVL3 cards' ``load_video(video_path, num_segments=8, max_num=1)``),
at their own size (the card and the processor resize each frame to the tile themselves), the middle frame of each of
8 equal runs (``uniform_shifted``: transformers' InternVL video processor, ``initial_shift``; the cards'
``get_index`` spreads the runs over the frames up to the last index, ``frames - 1``, and rounds each offset, which
moves an index by at most one frame).
"""

from __future__ import annotations

from omnieval.engines.families.base import FamilyAdapter, register_family
from omnieval.engines.recipes import Recipe, Sourced, own_size, processor_source, register_recipe

register_family(FamilyAdapter(name="internvl", model_types=("internvl",), modalities=("image", "video"),
                              model_class="InternVLForConditionalGeneration",
                              placeholder_tokens={"video": "<IMG_CONTEXT>"},  # each frame a tile of image tokens
                              # vLLM's processor for InternVLForConditionalGeneration marks a video's frames with
                              # the <video> token where transformers puts <IMG_CONTEXT> (the same ids otherwise:
                              # tests/test_vllm_families.py)
                              vllm_placeholder_tokens={"video": ("<video>", "<IMG_CONTEXT>")}))

INTERNVL3_CARD = ("https://huggingface.co/OpenGVLab/InternVL3-8B (model card, video inference: "
                  "load_video(video_path, num_segments=8, max_num=1))")
register_recipe(Recipe("internvl", decode={
    "num_frames": Sourced(8, INTERNVL3_CARD),
    "index_rule": Sourced("uniform_shifted",
                          processor_source("InternVLVideoProcessor", "sample_frames (initial_shift)")),
    "max_side": own_size("InternVLVideoProcessor")}))


# -- placeholder counts: the tests' reference, worked out from the published preprocessing rules and the media
# sizes alone, never by the adapter's or the processor's code (tests/family_placeholders.py binds them to the
# tiny builds of omnieval/dev) --


def internvl_tiles(height: int, width: int, max_tiles: int, tile: int) -> int:
    """InternVL's published dynamic tiling: the grid of at most ``max_tiles`` tiles whose aspect ratio is closest
    to the picture's (on a tie, the larger grid while the picture covers more than half of it), plus a thumbnail
    tile when the grid has more than one tile (``tile``: the side of a tile in pixels)."""
    grids = sorted(((c, r) for c in range(1, max_tiles + 1) for r in range(1, max_tiles + 1) if c * r <= max_tiles),
                   key=lambda g: g[0] * g[1])
    best, best_diff = (1, 1), float("inf")
    for c, r in grids:
        diff = abs(width / height - c / r)
        if diff < best_diff:
            best, best_diff = (c, r), diff
        elif diff == best_diff and width * height > 0.5 * tile ** 2 * c * r:
            best = (c, r)
    n = best[0] * best[1]
    return n + 1 if n > 1 else 1
