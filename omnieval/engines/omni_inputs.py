"""Qwen2.5-Omni thinker inputs without torchvision: what ``Qwen2_5OmniProcessor`` (transformers 5.19) computes.

The official processor cannot be built without torchvision, and the only torchvision wheel for the CPU torch here is
a CUDA build that fails to import. These functions follow it step by step instead: Whisper log-mel features for
audio (``WhisperFeatureExtractor``, numpy/torch only), Qwen2-VL frame resizing and patching for video and images,
and the expansion of each ``<|VIDEO|>``/``<|AUDIO|>``/``<|IMAGE|>`` placeholder to its embedding count. Checked
against the official processor (tests/test_hf_engine.py header): identical ids, pixel values and features.

A video with its own soundtrack (``use_audio_in_video``) is one ``<|vision_bos|><|VIDEO|><|vision_eos|>`` that becomes
``<|vision_bos|><|audio_bos|>`` + video and audio tokens alternating chunk by chunk + ``<|audio_eos|><|vision_eos|>``
(``interleaved``), as the processor lays it out; checked against the official processor in
tests/test_soundtrack_reference.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from omnieval.media.decoded import AUDIO_SAMPLE_RATE, DecodedMedia

OMNI_MODALITIES = ("video", "audio", "image")
DEFAULT_VIDEO_FPS = 2.0  # what Qwen2_5OmniProcessor assumes when it is given no fps
TEMPORAL_PATCH = 2  # frames per temporal patch of Qwen2.5-Omni's vision tower (``temporal_patch_size``)
# The processor's defaults for a video with its soundtrack (``use_audio_in_video``): temporal positions per second
# and the length of the chunks in which video and audio tokens alternate.
POSITION_ID_PER_SECONDS, SECONDS_PER_CHUNK = 25, 2.0

# The processor_config.json that ``Qwen2_5OmniProcessor.save_pretrained`` writes with default sub-processors
# (transformers 5.19): the sizes used where a model folder names none; the tiny omni model is saved with it.
_CLIP_MEAN, _CLIP_STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
_VISION_COMMON = {"do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
                  "image_mean": _CLIP_MEAN, "image_std": _CLIP_STD, "merge_size": 2, "patch_size": 14,
                  "resample": 3, "rescale_factor": 1 / 255, "temporal_patch_size": 2}
PROCESSOR_DEFAULTS = {
    "feature_extractor": {"chunk_length": 30, "dither": 0.0, "feature_extractor_type": "WhisperFeatureExtractor",
                          "feature_size": 128, "hop_length": 160, "n_fft": 400, "n_samples": 480000,
                          "nb_max_frames": 3000, "padding_side": "right", "padding_value": 0.0,
                          "return_attention_mask": True, "sampling_rate": 16000},
    "image_processor": {**_VISION_COMMON, "image_processor_type": "Qwen2VLImageProcessor",
                        "size": {"longest_edge": 12845056, "shortest_edge": 3136}},
    "processor_class": "Qwen2_5OmniProcessor",
    "video_processor": {**_VISION_COMMON, "do_sample_frames": False, "max_frames": 768, "max_video_tokens": 128000,
                        "min_frames": 4, "return_metadata": False, "video_processor_type": "Qwen2VLVideoProcessor",
                        "size": {"longest_edge": 768 * 28 * 28, "shortest_edge": 128 * 28 * 28}},
}


def smart_resize(height: int, width: int, factor: int = 28, min_pixels: int = 56 * 56,
                 max_pixels: int = 14 * 14 * 4 * 1280) -> tuple[int, int]:
    """Qwen2-VL's target size: both sides multiples of ``factor``, area within [min_pixels, max_pixels], aspect
    ratio kept as well as possible (the same arithmetic as ``transformers``' ``smart_resize``)."""
    if max(height, width) / min(height, width) > 200:
        raise ValueError(f"aspect ratio must be < 200, got {max(height, width) / min(height, width):.1f}")
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def resize_frames(frames: np.ndarray, height: int, width: int) -> torch.Tensor:
    """uint8 (T, H, W, 3) -> uint8 (T, 3, height, width) exactly as torchvision's bicubic + antialias resize does on
    the CPU: torch's native uint8 kernel (not float interpolation + rounding, which differs by up to ~20 levels at
    sharp edges)."""
    x = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).contiguous()
    if x.shape[-2:] == (height, width):
        return x
    return torch.nn.functional.interpolate(x, size=(height, width), mode="bicubic", align_corners=False,
                                           antialias=True)


def patchify(frames: torch.Tensor, patch: int, temporal: int, merge: int) -> tuple[torch.Tensor, list[int]]:
    """(T, 3, H, W) float -> (grid_t * grid_h * grid_w, 3 * temporal * patch * patch) patches in Qwen2-VL's order
    (merge windows contiguous), and the grid [t, h, w]. An odd frame count repeats the last frame."""
    if pad := -frames.shape[0] % temporal:
        frames = torch.cat([frames, frames[-1:].expand(pad, -1, -1, -1)])
    t, c, h, w = frames.shape
    gt, gh, gw = t // temporal, h // patch, w // patch
    x = frames.reshape(gt, temporal, c, gh // merge, merge, patch, gw // merge, merge, patch)
    x = x.permute(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return x.reshape(gt * gh * gw, c * temporal * patch * patch), [gt, gh, gw]


def vision_inputs(frames: np.ndarray, cfg: dict) -> tuple[torch.Tensor, list[int]]:
    """Frames (T, H, W, 3) uint8 (an image is one frame) -> (pixel values, grid_thw) for the vision tower:
    smart_resize, bicubic resize, rescale + normalise with the CLIP mean/std (fused as the processor does:
    ``(x - 255 * mean) / (255 * std)``), then patches."""
    patch, merge, temporal = cfg["patch_size"], cfg["merge_size"], cfg["temporal_patch_size"]
    h, w = smart_resize(frames.shape[1], frames.shape[2], factor=patch * merge,
                        min_pixels=cfg["size"]["shortest_edge"], max_pixels=cfg["size"]["longest_edge"])
    x = resize_frames(frames, h, w).to(torch.float32)
    scale = 1.0 / cfg["rescale_factor"]
    mean = torch.tensor(cfg["image_mean"], dtype=torch.float32).view(1, 3, 1, 1) * scale
    std = torch.tensor(cfg["image_std"], dtype=torch.float32).view(1, 3, 1, 1) * scale
    return patchify((x - mean) / std, patch, temporal, merge)


def audio_token_count(n_mel_frames: int) -> int:
    """Audio-tower output length for ``n_mel_frames`` log-mel frames (two stride-2 stages, as in the processor)."""
    after_cnn = (n_mel_frames - 1) // 2 + 1
    return (after_cnn - 2) // 2 + 1


@dataclass
class Encoded:
    """One prompt ready for the thinker: token ids plus its media tensors (in prompt order)."""

    input_ids: list[int]
    videos: list[tuple[torch.Tensor, list[int], float]] = field(default_factory=list)  # pixels, grid, s/grid
    images: list[tuple[torch.Tensor, list[int]]] = field(default_factory=list)
    audios: list[tuple[torch.Tensor, torch.Tensor]] = field(default_factory=list)  # features, mask
    use_audio_in_video: bool = False  # its videos carry their soundtracks (interleaved placeholders)


class OmniPreprocessor:
    """Chat text with one ``<|VIDEO|>``/``<|AUDIO|>``/``<|IMAGE|>`` per media part -> ``Encoded``, each placeholder
    expanded to the number of embeddings its media produce (as ``Qwen2_5OmniProcessor`` does without
    ``use_audio_in_video``)."""

    def __init__(self, tokenizer, video_cfg: dict, image_cfg: dict, audio_cfg: dict):
        from transformers import WhisperFeatureExtractor

        self.tokenizer, self.video_cfg, self.image_cfg = tokenizer, video_cfg, image_cfg
        keep = ("feature_size", "sampling_rate", "hop_length", "chunk_length", "n_fft", "padding_value", "dither")
        self.audio = WhisperFeatureExtractor(**{k: v for k, v in audio_cfg.items() if k in keep},
                                             return_attention_mask=True)
        self.tokens = {m: getattr(tokenizer, f"{'audio' if m == 'audio' else m}_token") for m in OMNI_MODALITIES}

    @classmethod
    def from_folder(cls, path: Path, tokenizer) -> OmniPreprocessor:
        """Sizes from ``processor_config.json`` (or the older ``preprocessor_config.json``); processor defaults for
        what is missing."""
        defaults = PROCESSOR_DEFAULTS
        cfg: dict = {}
        for name in ("processor_config.json", "preprocessor_config.json"):
            if (path / name).exists():
                cfg = json.loads((path / name).read_text())
                break

        def section(key: str) -> dict:
            # older folders keep one flat preprocessor_config.json for the feature extractor and image processor
            own = cfg.get(key) if key in cfg else (cfg if key != "video_processor" else {})
            out = {**defaults[key], **own}
            if key != "feature_extractor":
                out["size"] = {**out["size"], **{new: out.pop(old) for old, new in
                                                 (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge"))
                                                 if old in out}}
            return out

        return cls(tokenizer, section("video_processor"), section("image_processor"), section("feature_extractor"))

    def __call__(self, text: str, media: Sequence[DecodedMedia], soundtracks: dict | None = None) -> Encoded:
        """``soundtracks``: index in ``media`` of a video -> its own audio (``DecodedMedia``), shown interleaved with
        it (``use_audio_in_video``); its audio goes into ``audios`` where the video's placeholder stands."""
        enc, counts = Encoded([]), []
        soundtracks = soundtracks or {}
        enc.use_audio_in_video = bool(soundtracks)
        for index, item in enumerate(media):
            if item.modality == "video":
                pixels, grid = vision_inputs(item.data, self.video_cfg)
                fps = item.fps or DEFAULT_VIDEO_FPS
                per_grid = self.video_cfg["temporal_patch_size"] / fps
                enc.videos.append((pixels, grid, per_grid))
                if index in soundtracks:
                    n_audio = self._audio(soundtracks[index], enc)
                    counts.append(("video+audio", self.interleaved(grid, per_grid, n_audio)))
                    continue
                counts.append(("video", math.prod(grid) // self.video_cfg["merge_size"] ** 2))
            elif item.modality == "image":
                pixels, grid = vision_inputs(item.data[None], self.image_cfg)
                enc.images.append((pixels, grid))
                counts.append(("image", math.prod(grid) // self.image_cfg["merge_size"] ** 2))
            elif item.modality == "audio":
                counts.append(("audio", self._audio(item, enc)))
        enc.input_ids = self.tokenizer.encode(self.expand(text, counts), add_special_tokens=False)
        return enc

    def _audio(self, item: DecodedMedia, enc: Encoded) -> int:
        """Whisper features of one waveform appended to ``enc.audios``; returns its audio token count."""
        if (item.sample_rate or AUDIO_SAMPLE_RATE) != self.audio.sampling_rate:
            raise ValueError(f"audio at {item.sample_rate} Hz; this model takes {self.audio.sampling_rate}")
        feats = self.audio(item.data.astype(np.float32), sampling_rate=self.audio.sampling_rate,
                           padding="max_length", return_attention_mask=True, return_tensors="pt")
        enc.audios.append((feats["input_features"][0], feats["attention_mask"][0]))
        return audio_token_count(int(feats["attention_mask"][0].sum()))

    def interleaved(self, grid: Sequence[int], second_per_grid: float, n_audio: int) -> str:
        """The tokens between ``<|vision_bos|>`` and ``<|vision_eos|>`` of a video with its soundtrack: the video
        tokens of each temporal patch get the time ``t * second_per_grid * 25`` (position ids per second), the audio
        tokens ``0, 1, ...`` (25 per second), both are cut into chunks of 2 s (50 positions) by those times, and the
        chunks alternate, video first, inside ``<|audio_bos|>`` ... ``<|audio_eos|>``."""
        merge = self.video_cfg["merge_size"]
        per_frame = (grid[1] // merge) * (grid[2] // merge)
        video_times = np.repeat(np.arange(grid[0]), per_frame) * second_per_grid * POSITION_ID_PER_SECONDS
        per_chunk = int(POSITION_ID_PER_SECONDS * SECONDS_PER_CHUNK)
        video_chunks = _chunk_lengths(video_times, per_chunk)
        audio_chunks = _chunk_lengths(np.arange(n_audio), per_chunk)
        body = []
        for j in range(max(len(video_chunks), len(audio_chunks))):
            if j < len(video_chunks):
                body.append(self.tokens["video"] * video_chunks[j])
            if j < len(audio_chunks):
                body.append(self.tokens["audio"] * audio_chunks[j])
        tok = self.tokenizer
        return tok.vision_bos_token + tok.audio_bos_token + "".join(body) + tok.audio_eos_token + tok.vision_eos_token

    def expand(self, text: str, counts: Sequence[tuple[str, int | str]]) -> str:
        """Replace the placeholders, in order of appearance, by ``n`` copies each (one per media item); a video with
        its soundtrack (``video+audio``) replaces its whole ``<|vision_bos|><|VIDEO|><|vision_eos|>`` by the given
        interleaved tokens."""
        out, rest = [], text
        for modality, n in counts:
            if modality == "video+audio":
                tok = self.tokenizer
                wrapped = tok.vision_bos_token + self.tokens["video"] + tok.vision_eos_token
                head, sep, rest = rest.partition(wrapped)
                if not sep:
                    raise ValueError(f"prompt has no {wrapped} for a video with its soundtrack")
                out.append(head + str(n))
                continue
            token = self.tokens[modality]
            head, sep, rest = rest.partition(token)
            if not sep:
                raise ValueError(f"prompt has fewer {token} placeholders than {modality} inputs")
            out.append(head + token * n)
        out.append(rest)
        if any(tok in rest for tok in self.tokens.values()):
            raise ValueError("prompt has more media placeholders than media inputs")
        return "".join(out)


def _chunk_lengths(times: np.ndarray, per_chunk: int) -> list[int]:
    """Lengths of the runs of ``times`` (non-decreasing) cut where a time reaches the next multiple of
    ``per_chunk``: the processor's rule, which opens one new chunk per token that crosses a boundary (a jump over
    several boundaries opens one chunk, not several)."""
    lengths, start, boundary = [], 0, per_chunk
    for i, t in enumerate(times):
        if t >= boundary:
            lengths.append(i - start)
            start, boundary = i, boundary + per_chunk
    lengths.append(len(times) - start)
    return lengths


def collate(batch: Sequence[Encoded], pad_id: int, device: torch.device, dtype: torch.dtype,
            text_positions: bool = False) -> dict:
    """Left-pad ids (so the last position is every row's next token) and concatenate media tensors in order.
    ``text_positions``: give plain causal LMs position ids that ignore the padding (the omni thinker computes its
    3-D positions itself from the attention mask)."""
    width = max(len(e.input_ids) for e in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, e in enumerate(batch):
        ids[i, width - len(e.input_ids):] = torch.tensor(e.input_ids)
        mask[i, width - len(e.input_ids):] = 1
    out = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
    videos = [v for e in batch for v in e.videos]
    images = [v for e in batch for v in e.images]
    audios = [a for e in batch for a in e.audios]
    if videos:
        out["pixel_values_videos"] = torch.cat([v[0] for v in videos]).to(device, dtype)
        out["video_grid_thw"] = torch.tensor([v[1] for v in videos], device=device)
        out["video_second_per_grid"] = torch.tensor([v[2] for v in videos], device=device)
    if images:
        out["pixel_values"] = torch.cat([v[0] for v in images]).to(device, dtype)
        out["image_grid_thw"] = torch.tensor([v[1] for v in images], device=device)
    if audios:
        out["input_features"] = torch.stack([a[0] for a in audios]).to(device, dtype)
        out["feature_attention_mask"] = torch.stack([a[1] for a in audios]).to(device)
    if text_positions:
        out["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0).to(device)
    return out
