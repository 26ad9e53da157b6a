"""InternVL: the base adapter, each video frame a tile of image tokens. No published recipe: omnieval's defaults.
"""

from __future__ import annotations

from omnieval.engines.families.base import FamilyAdapter, register_family

register_family(FamilyAdapter(name="internvl", model_types=("internvl",), modalities=("image", "video"),
                              model_class="InternVLForConditionalGeneration",
                              placeholder_tokens={"video": "<IMG_CONTEXT>"},  # each frame a tile of image tokens
                              # vLLM's processor for InternVLForConditionalGeneration marks a video's frames with
                              # the <video> token where transformers puts <IMG_CONTEXT> (the same ids otherwise:
                              # tests/test_vllm_families.py)
                              vllm_placeholder_tokens={"video": ("<video>", "<IMG_CONTEXT>")}))


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
