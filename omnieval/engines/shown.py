"""What a model was shown for one request, as every engine reports it, and the refusal of a request whose prompt
lost a medium on the way.

Reproductions of an omni model's published numbers most often miss because of its inputs: how many frames, at
what size, whether the soundtrack was passed at all. So each prediction row says what its model was given
(``Shown``, the columns ``video_frames``, ``video_size``, ``audio_seconds``, ``media_tokens``, ``prompt_tokens`` of
``predictions.parquet``):

* ``video_frames``: the frames of all its videos that went into the model's processor (the decoded frames; a
  processor that merges frames afterwards, as Qwen's pairs them into temporal patches, still counts each one).
* ``video_size``: ``HxW`` of the frames as the model's processor resized them: read from its output where it
  reports a grid (``video_grid_thw`` times the patch size: the Qwen families) or the video tensor's own last two
  sides, else the decoded frames' size. Videos of different sizes in one prompt: the distinct sizes, comma-joined.
* ``audio_seconds``: seconds of audio heard, a video's soundtrack included, after the processor's own cap: from its
  ``feature_attention_mask`` (mel frames x hop / sampling rate) where it returns one, else the decoded waveforms.
* ``media_tokens``: the media placeholder tokens of each modality in the input ids (``placeholder_ids``), and
  ``prompt_tokens`` the length of those ids. Null where an engine cannot see the ids (the simulated engine, an
  endpoint).

``check_media_tokens`` turns a prompt that shows a medium and holds none of its placeholder tokens into a
``MediaDropped`` error (the row's ``error_kind`` is ``media``): a soundtrack or picture dropped on the way (a chat
template without the placeholder, a processor ignoring an argument) would otherwise score the model as if it had
seen or heard it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from omnieval.media.decoded import DecodedMedia

SHOWN_MODALITIES = ("video", "audio", "image")
PROCESSOR_TOKEN_ATTRS = {"video": "video_token", "audio": "audio_token", "image": "image_token"}
"""Where a processor names the placeholder its prompt text carries for each modality (transformers' convention)."""


class MediaDropped(ValueError):
    """A request whose model input lost a medium it shows (no placeholder token of it in the ids, or fewer than its
    media make): the row is an error of kind ``media``, never an answer. ``shown``: what the input did show, where
    known (the row keeps it: its ``media_tokens`` show the missing modality's 0)."""

    def __init__(self, message: str, shown: Shown | None = None):
        super().__init__(message)
        self.shown = shown


@dataclass(frozen=True)
class Shown:
    """What one request put in front of its model (module docstring); None where unknown."""

    video_frames: int | None = None
    video_size: str | None = None
    audio_seconds: float | None = None
    media_tokens: dict[str, int] | None = None
    prompt_tokens: int | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def decoded_shown(items: Sequence[DecodedMedia]) -> Shown:
    """What the decoded media of a request amount to (frames, their size, seconds of audio), before any processor:
    what a model given exactly these arrays is shown. No tokens."""
    videos = [item for item in items if item.modality == "video" and item.data is not None]
    audios = [item for item in items if item.modality == "audio" and item.data is not None]
    sizes = [f"{v.data.shape[1]}x{v.data.shape[2]}" for v in videos]
    seconds = [len(a.data) / a.sample_rate for a in audios if a.sample_rate]
    return Shown(video_frames=sum(int(v.data.shape[0]) for v in videos) if videos else None,
                 video_size=_joined(sizes),
                 audio_seconds=round(float(sum(seconds)), 4) if seconds else None)


def processed_shown(items: Sequence[DecodedMedia], inputs: Mapping, processor, input_ids: Sequence[int],
                    placeholders: Mapping[str, int]) -> Shown:
    """What a request's processor output (``inputs``: its tensors) and ``input_ids`` show: frames counted from the
    decoded media given to the processor, sizes and seconds read from the processor's output where it says them
    (module docstring), placeholder tokens counted in the ids."""
    base = decoded_shown(items)
    size = _processed_video_size(inputs, processor) if base.video_frames else None
    kept = _kept_seconds(inputs, processor) if base.audio_seconds is not None else None
    seconds = base.audio_seconds if kept is None else _heard(items, kept)
    return Shown(video_frames=base.video_frames, video_size=size or base.video_size, audio_seconds=seconds,
                 media_tokens=count_placeholders(input_ids, placeholders, {item.modality for item in items}),
                 prompt_tokens=len(input_ids))


def with_tokens(shown: Shown, input_ids: Sequence[int], placeholders: Mapping[str, int],
                modalities: Sequence[str]) -> Shown:
    """``shown`` with the placeholder counts and the length of ``input_ids`` (an engine that sees the ids only after
    the model's own processing: vLLM's ``prompt_token_ids``); ``modalities``: those the request shows."""
    return Shown(shown.video_frames, shown.video_size, shown.audio_seconds,
                 count_placeholders(input_ids, placeholders, modalities), len(input_ids))


def placeholder_ids(processor, tokenizer, overrides: Mapping[str, str] | None = None) -> dict[str, int]:
    """Modality -> the token id its placeholder expands to in the input ids: the processor's ``video_token``,
    ``audio_token``, ``image_token`` (``overrides``: modality -> token text, where a family puts one modality's
    features on another token). A modality without a token the tokenizer knows is left out (its count is then
    unknown, and not checked)."""
    tokens = {m: getattr(processor, attr, None) for m, attr in PROCESSOR_TOKEN_ATTRS.items()}
    tokens.update(overrides or {})
    unknown = getattr(tokenizer, "unk_token_id", None)
    out = {}
    for modality, token in tokens.items():
        if not isinstance(token, str) or not token:
            continue
        try:
            value = tokenizer.convert_tokens_to_ids(token)
        except Exception:  # a tokenizer without a token table (Mistral's)
            continue
        if isinstance(value, int) and value >= 0 and value != unknown:
            out[modality] = value
    return out


def known_token(tokenizer, candidates: Sequence[str]) -> str | None:
    """The first of ``candidates`` the tokenizer has as a token of its own (not its unknown token), or None."""
    unknown = getattr(tokenizer, "unk_token_id", None)
    for token in candidates:
        try:
            value = tokenizer.convert_tokens_to_ids(token)
        except Exception:  # a tokenizer without a token table (Mistral's)
            return None
        if isinstance(value, int) and value >= 0 and value != unknown:
            return token
    return None


def count_placeholders(input_ids: Sequence[int], placeholders: Mapping[str, int],
                       shown: Sequence[str] = SHOWN_MODALITIES) -> dict[str, int]:
    """How many of each modality's placeholder token the ids hold. Where a family fills two modalities' features
    into one token (InternVL's and Nemotron-H omni's video frames on the image token), a modality not among
    ``shown`` counts 0 and each shown one counts the shared tokens."""
    ids = np.asarray(list(input_ids), dtype=np.int64)
    out = {}
    for m in SHOWN_MODALITIES:
        if m not in placeholders:
            continue
        shared = any(placeholders.get(other) == placeholders[m] for other in SHOWN_MODALITIES if other != m)
        out[m] = 0 if shared and m not in shown else int(np.count_nonzero(ids == placeholders[m]))
    return out


def check_media_tokens(items: Sequence[DecodedMedia], shown: Shown) -> None:
    """Refuse a request showing a medium (one of ``items``, a video's soundtrack included) whose ids hold none of
    its placeholder tokens (``MediaDropped``, naming the medium and its files). A modality whose placeholder the
    engine does not know is not checked."""
    media_tokens = shown.media_tokens
    if not media_tokens:
        return
    dropped = []
    for modality in SHOWN_MODALITIES:
        of_modality = [item for item in items if item.modality == modality]
        if of_modality and media_tokens.get(modality, 1) == 0:
            files = ", ".join(sorted({item.path or "?" for item in of_modality}))
            dropped.append(f"{modality} shown but the prompt holds no {modality} token ({files})")
    if dropped:
        raise MediaDropped("; ".join(dropped), shown)


def _processed_video_size(inputs: Mapping, processor) -> str | None:
    """``HxW`` of the frames as the processor resized them: its grid (``video_grid_thw``, in patches) times the
    patch size, or the last two sides of its video tensor; None where its output says neither."""
    grid = inputs.get("video_grid_thw") if hasattr(inputs, "get") else None
    patch = getattr(getattr(processor, "video_processor", None), "patch_size", None)
    if grid is not None and isinstance(patch, int):
        rows = np.asarray(grid).reshape(-1, 3)
        return _joined([f"{int(h) * patch}x{int(w) * patch}" for _, h, w in rows])
    pixels = inputs.get("pixel_values_videos") if hasattr(inputs, "get") else None
    if pixels is not None and pixels.ndim >= 4:
        return f"{int(pixels.shape[-2])}x{int(pixels.shape[-1])}"
    return None


def _kept_seconds(inputs: Mapping, processor) -> list[float] | None:
    """Per audio clip, the seconds the processor kept: the mel frames its ``feature_attention_mask`` marks, times
    the feature extractor's hop, over its sampling rate (what a cap such as Whisper's 30 s leaves); None without
    them."""
    mask = inputs.get("feature_attention_mask") if hasattr(inputs, "get") else None
    extractor = getattr(processor, "feature_extractor", None)
    hop, rate = getattr(extractor, "hop_length", None), getattr(extractor, "sampling_rate", None)
    if mask is None or not hop or not rate:
        return None
    rows = np.asarray(mask).reshape(-1, np.asarray(mask).shape[-1])
    return [float(row.sum()) * hop / rate for row in rows]


def _heard(items: Sequence[DecodedMedia], kept: Sequence[float]) -> float:
    """Seconds heard: each clip's decoded length, cut to what the processor kept of it (its mask's frames count a
    partial hop, or the centred window's extra frame, as a whole one: only a shorter count is a cut)."""
    clips = [len(a.data) / a.sample_rate for a in items if a.modality == "audio" and a.sample_rate]
    if len(kept) != len(clips):  # the mask's rows are not one per clip: the total, cut to the mask's total
        return round(min(sum(clips), sum(kept)), 4)
    return round(sum(min(c, k) for c, k in zip(clips, kept, strict=True)), 4)


def _joined(sizes: Sequence[str]) -> str | None:
    return ",".join(dict.fromkeys(sizes)) or None


def shown_of(exc: Exception) -> dict | None:
    """What a request refused for a dropped medium did show (None for any other error)."""
    shown = getattr(exc, "shown", None) if isinstance(exc, MediaDropped) else None
    return shown.to_dict() if shown is not None else None


def error_kind_of(exc: Exception) -> str | None:
    """The ``error_kind`` of an engine's error result for ``exc``: ``media`` for a dropped medium, else None (the
    model stage's own kind for an engine's error, ``engine``)."""
    from omnieval.core.schema import MEDIA_ERROR

    return MEDIA_ERROR if isinstance(exc, MediaDropped) else None
