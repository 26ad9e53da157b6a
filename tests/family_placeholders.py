"""The media placeholder counts of each tiny model family: the published rules (beside each family's adapter in
``omnieval/engines/families/``, worked out from the preprocessing rules and the media sizes alone, no processor code)
bound to the tiny builds' sizes (``omnieval/dev``): what ``test_vllm_families.py`` and ``test_vllm_family_runs.py``
check the token ids each engine sends against."""

from __future__ import annotations

import math

from omnieval.engines.families import internvl as internvl_rules
from omnieval.engines.families import llava_onevision as llava_ov_rules
from omnieval.engines.families.audio import (
    flamingo_audio_tokens,
    granite_speech_audio_tokens,
    whisper_audio_tokens,
)
from omnieval.engines.families.gemma import gemma4_audio_tokens, gemma4_frame_tokens
from omnieval.engines.families.nemotron import nemotron_audio_tokens, nemotron_image_tokens, nemotron_video_tokens
from omnieval.engines.families.phi4 import phi4_audio_tokens, phi4_image_tokens
from omnieval.engines.families.qwen_omni import qwen3_omni_audio_tokens, qwen3_omni_vision_tokens
from omnieval.engines.families.qwen_vl import qwen3_vl_video_grid, qwen_vl_grid
from omnieval.engines.families.videollama3 import videollama3_image_tokens, videollama3_video_tokens
from omnieval.engines.families.voxtral import voxtral_audio_tokens


def vl_tokens(item) -> int:
    from omnieval.dev.tiny_models import TINY_VL_PIXELS

    frames = item.data if item.modality == "video" else item.data[None]
    gh, gw = qwen_vl_grid(frames.shape[1], frames.shape[2], TINY_VL_PIXELS["shortest_edge"],
                          TINY_VL_PIXELS["longest_edge"])
    return math.ceil(frames.shape[0] / 2) * gh * gw // 4  # frame pairs x patches / the 2x2 merge


def qwen3_vl_tokens(item) -> int:
    """Qwen3-VL's (and Qwen3.5's) placeholders for an image or video: 16-pixel patches merged 2 x 2 (resize factor
    32); an image within 65536..16777216 pixels (the released preprocessor config), a video's frames within
    4096..25165824 pixels all together (the released video preprocessor config), one placeholder run per frame
    pair (an odd last frame is paired with itself)."""
    from omnieval.dev.tiny_qwen3_vl import IMAGE_PIXELS, VIDEO_PIXELS

    if item.modality == "image":
        gh, gw = qwen_vl_grid(*item.data.shape[:2], IMAGE_PIXELS["shortest_edge"], IMAGE_PIXELS["longest_edge"],
                              factor=32)
        return gh * gw // 4
    gh, gw = qwen3_vl_video_grid(*item.data.shape[:3], VIDEO_PIXELS["shortest_edge"], VIDEO_PIXELS["longest_edge"])
    return math.ceil(item.data.shape[0] / 2) * gh * gw // 4


def llava_ov_image_tokens(height: int, width: int) -> int:
    """LLaVA-OneVision's anyres tokens for one image of the tiny build (its tile and pinpoints)."""
    from omnieval.dev.tiny_families import TINY_OV_PINPOINTS, TINY_OV_TILE

    return llava_ov_rules.llava_ov_image_tokens(height, width, TINY_OV_TILE, TINY_OV_PINPOINTS)


def llava_ov_video_tokens(frames: int) -> int:
    """LLaVA-OneVision's tokens for a video of ``frames`` frames on the tiny build."""
    from omnieval.dev.tiny_families import TINY_OV_TILE

    return llava_ov_rules.llava_ov_video_tokens(frames, TINY_OV_TILE)


def internvl_tiles(height: int, width: int, max_tiles: int) -> int:
    """InternVL's tiles for a picture on the tiny build (its tile side)."""
    from omnieval.dev.tiny_families import TINY_INTERNVL_TILE

    return internvl_rules.internvl_tiles(height, width, max_tiles, TINY_INTERNVL_TILE)


# the placeholder token of each family and modality (InternVL: vLLM marks a video's frames with ``<video>``,
# transformers with ``<IMG_CONTEXT>`` like an image's tiles; Nemotron-H omni: a video's frames with ``<image>``)
TOKENS = {"qwen2-audio": {"audio": "<|AUDIO|>"},
          "qwen2.5-vl": {"image": "<|image_pad|>", "video": "<|video_pad|>"},
          "llava-onevision": {"image": "<image>", "video": "<video>"},
          "internvl": {"image": "<IMG_CONTEXT>", "video": "<video>"},
          "gemma3n": {"image": "<image_soft_token>", "audio": "<audio_soft_token>"},
          "qwen3-omni": {"image": "<|image_pad|>", "video": "<|video_pad|>", "audio": "<|audio_pad|>"},
          **{arch: {"image": "<|image_pad|>", "video": "<|video_pad|>"} for arch in ("qwen3-vl", "qwen3-vl-moe",
                                                                                      "qwen3.5")},
          "audioflamingo3": {"audio": "<sound>"}, "musicflamingo": {"audio": "<sound>"},
          "granite-speech": {"audio": "<|audio|>"}, "voxtral": {"audio": "[AUDIO]"},
          "gemma4": {"image": "<|image|>", "video": "<|video|>", "audio": "<|audio|>"},
          "gemma4-unified": {"image": "<|image|>", "video": "<|video|>", "audio": "<|audio|>"},
          "phi4-multimodal": {"image": "<|image|>", "audio": "<|audio|>"},
          "videollama3": {"image": "<|image_pad|>", "video": "<|video_pad|>"},
          "nemotron-h-omni": {"image": "<image>", "video": "<image>", "audio": "<so_embedding>"}}


def expected_placeholders(arch: str, media: list, engine: str) -> dict[str, int]:
    """placeholder token -> how many of it a prompt showing ``media`` (decoded, in prompt order) carries on
    ``engine`` (``hf`` or ``vllm``)."""
    from omnieval.dev.tiny_families import (
        GEMMA3N_AUDIO_TOKENS,
        TINY_GEMMA3N_IMAGE_TOKENS,
        TINY_INTERNVL_MAX_TILES,
        TINY_INTERNVL_TILE,
        TINY_OV_TILE,
    )

    images = [m.data for m in media if m.modality == "image"]
    videos = [m.data for m in media if m.modality == "video"]
    audios = [m.data for m in media if m.modality == "audio"]
    tokens = TOKENS[arch]
    if arch == "qwen2-audio":
        return {tokens["audio"]: sum(whisper_audio_tokens(len(a)) for a in audios)}
    if arch == "qwen2.5-vl":
        return {tokens["image"]: sum(vl_tokens(m) for m in media if m.modality == "image"),
                tokens["video"]: sum(vl_tokens(m) for m in media if m.modality == "video")}
    if arch == "llava-onevision":
        # several images in one prompt: each its base tile and a newline (the reference code tiles a lone image)
        image_tokens = (llava_ov_image_tokens(*images[0].shape[:2]) if len(images) == 1
                        else len(images) * ((TINY_OV_TILE // 14) ** 2 + 1))
        return {tokens["image"]: image_tokens, tokens["video"]: sum(llava_ov_video_tokens(len(v)) for v in videos)}
    if arch == "internvl":
        per_tile = (TINY_INTERNVL_TILE // 14 // 2) ** 2  # 4 x 4 patches, pixel-shuffled by 0.5 on each side
        image_tokens = sum(per_tile * internvl_tiles(*i.shape[:2], TINY_INTERNVL_MAX_TILES) for i in images)
        video_tokens = sum(per_tile * len(v) for v in videos)  # one tile a frame
        if engine == "hf":
            return {tokens["image"]: image_tokens + video_tokens}
        return {tokens["image"]: image_tokens, tokens["video"]: video_tokens}
    if arch == "gemma3n":
        return {tokens["image"]: TINY_GEMMA3N_IMAGE_TOKENS * len(images),
                tokens["audio"]: GEMMA3N_AUDIO_TOKENS * len(audios)}
    if arch == "qwen3-omni":  # the same on both engines
        return {tokens["image"]: sum(qwen3_omni_vision_tokens(m) for m in media if m.modality == "image"),
                tokens["video"]: sum(qwen3_omni_vision_tokens(m) for m in media if m.modality == "video"),
                tokens["audio"]: sum(qwen3_omni_audio_tokens(len(a)) for a in audios)}
    if arch in ("qwen3-vl", "qwen3-vl-moe", "qwen3.5"):  # the same on both engines
        return {tokens[modality]: sum(qwen3_vl_tokens(m) for m in media if m.modality == modality)
                for modality in ("image", "video")}
    if arch in ("audioflamingo3", "musicflamingo"):
        return {tokens["audio"]: sum(flamingo_audio_tokens(len(a)) for a in audios)}
    if arch == "granite-speech":
        return {tokens["audio"]: sum(granite_speech_audio_tokens(len(a)) for a in audios)}
    if arch == "voxtral":
        return {tokens["audio"]: sum(voxtral_audio_tokens(len(a)) for a in audios)}
    if arch in ("gemma4", "gemma4-unified"):  # the same on both engines; 70 tokens an image (the tiny builds'
        # budget) and a frame; Gemma 4 Unified's waveform: one token per 640 samples (40 ms), the last one padded
        audio_tokens = gemma4_audio_tokens if arch == "gemma4" else (lambda n: math.ceil(n / 640))
        return {tokens["image"]: sum(gemma4_frame_tokens(*i.shape[:2], 70) for i in images),
                tokens["video"]: sum(len(v) * gemma4_frame_tokens(*v.shape[1:3], 70) for v in videos),
                tokens["audio"]: sum(audio_tokens(len(a)) for a in audios)}
    if arch == "phi4-multimodal":  # transformers engine only
        return {tokens["image"]: sum(phi4_image_tokens(*i.shape[:2]) for i in images),
                tokens["audio"]: sum(phi4_audio_tokens(len(a)) for a in audios)}
    if arch == "videollama3":  # transformers engine only
        return {tokens["image"]: sum(videollama3_image_tokens(*i.shape[:2]) for i in images),
                tokens["video"]: sum(videollama3_video_tokens(v) for v in videos)}
    if arch == "nemotron-h-omni":  # transformers engine only; images and video frames share ``<image>``
        vision = (sum(nemotron_image_tokens(*i.shape[:2]) for i in images)
                  + sum(nemotron_video_tokens(len(v), *v.shape[1:3], 64) for v in videos))
        return {tokens["image"]: vision, tokens["audio"]: sum(nemotron_audio_tokens(len(a)) for a in audios)}
    raise KeyError(arch)
