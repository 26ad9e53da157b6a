"""The media placeholder counts of each tiny model family, worked out from the published preprocessing rules and
the media sizes alone (no processor code; VideoLLaMA3's video tokens from the frames' pixels too, which its token
compression reads): what ``test_vllm_families.py`` and ``test_vllm_family_runs.py`` check the token ids each engine
sends against."""

from __future__ import annotations

import math


def whisper_audio_tokens(n_samples: int) -> int:
    """Qwen2-Audio's embeddings for a waveform: Whisper frames (hop 160, at most 30 s = 3000), then two stride-2
    stages (the conv front end and the pooling)."""
    frames = min(math.ceil(n_samples / 160), 3000)
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


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


def vl_tokens(item) -> int:
    from omnieval.dev.tiny_models import TINY_VL_PIXELS

    frames = item.data if item.modality == "video" else item.data[None]
    gh, gw = qwen_vl_grid(frames.shape[1], frames.shape[2], TINY_VL_PIXELS["shortest_edge"],
                          TINY_VL_PIXELS["longest_edge"])
    return math.ceil(frames.shape[0] / 2) * gh * gw // 4  # frame pairs x patches / the 2x2 merge


def llava_ov_image_tokens(height: int, width: int) -> int:
    """LLaVA-OneVision's published anyres layout for one image: the pinpoint canvas that keeps the most of the
    picture's resolution (then wastes the least), its tiles' patch grid cut back to the picture's aspect ratio
    (padding rows or columns dropped), shrunk to at most 9 tiles' worth when it exceeds that by 10%, one newline
    token per row, plus the base tile's patches."""
    from omnieval.dev.tiny_families import TINY_OV_PINPOINTS, TINY_OV_TILE

    side = TINY_OV_TILE // 14  # patches per tile side

    def kept(canvas):
        ch, cw = canvas
        s = min(cw / width, ch / height)
        return min(int(width * s) * int(height * s), width * height), -(ch * cw)

    ch, cw = max(TINY_OV_PINPOINTS, key=kept)
    rows, cols = side * ch // TINY_OV_TILE, side * cw // TINY_OV_TILE
    if width / height > cols / rows:  # wider than the canvas: rows of padding above and below
        rows -= 2 * ((rows - int(round(height * cols / width, 7))) // 2)
    else:
        cols -= 2 * ((cols - int(round(width * rows / height, 7))) // 2)
    ratio = math.sqrt(rows * cols / (9 * side * side))
    if ratio > 1.1:
        rows, cols = int(rows // ratio), int(cols // ratio)
    return side * side + rows * cols + rows


def llava_ov_video_tokens(frames: int) -> int:
    """Each frame's patch grid pooled 2 x 2 (ceil), one newline token for the whole video."""
    from omnieval.dev.tiny_families import TINY_OV_TILE

    pooled = math.ceil(TINY_OV_TILE // 14 / 2)
    return frames * pooled * pooled + 1


def internvl_tiles(height: int, width: int, max_tiles: int) -> int:
    """InternVL's published dynamic tiling: the grid of at most ``max_tiles`` tiles whose aspect ratio is closest
    to the picture's (on a tie, the larger grid while the picture covers more than half of it), plus a thumbnail
    tile when the grid has more than one tile."""
    from omnieval.dev.tiny_families import TINY_INTERNVL_TILE

    grids = sorted(((c, r) for c in range(1, max_tiles + 1) for r in range(1, max_tiles + 1) if c * r <= max_tiles),
                   key=lambda g: g[0] * g[1])
    best, best_diff = (1, 1), float("inf")
    for c, r in grids:
        diff = abs(width / height - c / r)
        if diff < best_diff:
            best, best_diff = (c, r), diff
        elif diff == best_diff and width * height > 0.5 * TINY_INTERNVL_TILE ** 2 * c * r:
            best = (c, r)
    n = best[0] * best[1]
    return n + 1 if n > 1 else 1


def qwen3_omni_audio_tokens(n_samples: int) -> int:
    """Qwen3-Omni's audio placeholders for a decoded waveform of ``n_samples`` (16 kHz): the waveform is followed by
    silence up to a whole number of 160-sample hops, at least 41 samples of it (``families.Qwen3OmniFamily``), one
    mel frame a hop; the audio tower gives 13 tokens per full 100 frames and the rest through three stride-2
    convolutions (ceil halvings)."""
    frames = math.ceil((n_samples + 41) / 160)
    rest = frames % 100
    for _ in range(3):
        rest = math.ceil(rest / 2)
    return 13 * (frames // 100) + rest


def qwen3_omni_vision_tokens(item) -> int:
    """Qwen3-Omni's placeholders for an image or video: 16-pixel patches merged 2 x 2 (resize factor 32), frame pairs
    for a video; images within 3136..12845056 pixels (the released preprocessor config), video frames within 128..768
    merged patches (the processor's defaults)."""
    if item.modality == "image":
        gh, gw = qwen_vl_grid(*item.data.shape[:2], 3136, 12_845_056, factor=32)
        return gh * gw // 4
    gh, gw = qwen_vl_grid(*item.data.shape[1:3], 128 * 32 * 32, 768 * 32 * 32, factor=32)
    return math.ceil(item.data.shape[0] / 2) * gh * gw // 4


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


def flamingo_audio_tokens(n_samples: int) -> int:
    """Audio Flamingo 3's and Music Flamingo's ``<sound>`` tokens for a waveform: cut into 30 s windows (480000
    samples at 16 kHz), each window's Whisper frames counted one per started 160-sample hop (the feature
    extractor's attention mask), summed over the windows, then the stride-2 convolution and the stride-2 pooling."""
    frames = sum(math.ceil(min(480_000, n_samples - start) / 160) for start in range(0, n_samples, 480_000))
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


def granite_speech_audio_tokens(n_samples: int) -> int:
    """Granite Speech's ``<|audio|>`` tokens for a waveform (its published feature extractor and projector): one
    centred mel frame per 160-sample hop plus one, frames stacked in pairs (an odd last frame dropped), the
    projector reading windows of 15 stacked frames and giving 15 / 5 = 3 tokens a window (the last one padded)."""
    stacked = (n_samples // 160 + 1) // 2
    return math.ceil(stacked / 15) * 3


def voxtral_audio_tokens(n_samples: int) -> int:
    """Voxtral's ``[AUDIO]`` tokens for a waveform (16 kHz): padded with silence to whole 30 s chunks (480000
    samples), 12.5 tokens a second: 375 a chunk."""
    return 375 * math.ceil(n_samples / 480_000)


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


def phi4_image_tokens(height: int, width: int) -> int:
    """Phi-4-multimodal's tokens for a picture (at most 36 crops' worth): scaled, aspect kept, to fit the grid of
    448-pixel crops it spans (``ceil`` of each side / 448) and padded right or below; each crop's 32 x 32 patches of
    14 pixels pooled 2 x 2, one token per pooled patch holding some of the picture (the padding's whole patches
    dropped) plus one a row of them, then one separator, then the whole picture squeezed into one crop: 16 x 16
    tokens and one a row."""
    cols, rows = math.ceil(width / 448), math.ceil(height / 448)
    if cols * rows > 36:
        raise NotImplementedError("more than 36 crops: the processor picks another grid")
    scale_w, scale_h = 448 * cols / width, 448 * rows / height
    if scale_w < scale_h:  # fills the grid's width: padding below
        pad_w, pad_h = 0, 448 * rows - int(height * scale_w)
    else:
        pad_w, pad_h = 448 * cols - int(width * scale_h), 0
    patch_cols = 32 * cols - (pad_w // 14 if pad_w >= 14 else 0)
    patch_rows = 32 * rows - (pad_h // 14 if pad_h >= 14 else 0)
    pooled_cols, pooled_rows = math.ceil(patch_cols / 2), math.ceil(patch_rows / 2)
    return pooled_rows * pooled_cols + pooled_rows + 1 + 16 * 16 + 16


def phi4_audio_tokens(n_samples: int) -> int:
    """Phi-4-multimodal's tokens for a 16 kHz waveform: 25 ms windows every 10 ms (only whole windows), 8 frames a
    token (the last one partial)."""
    return math.ceil(((n_samples - 400) // 160 + 1) / 8)


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
