"""The transformers engine's batched inputs: one ``Encoded`` prompt per request, several left-padded into one pass.

An omni prompt (Qwen2.5-Omni, Qwen3-Omni) is encoded by the model's own processor (``families.OmniFamily``): token
ids, pixel values and grids of its videos and images, ``video_second_per_grid``, Whisper features and their masks.
A text model's prompt is its token ids alone. ``collate`` puts several prompts into one forward pass the way the
processor itself batches texts (ids padded on the left, media tensors concatenated in prompt order), so a request
scores the same alone or in a batch.

The constants are what both engines and ``chat.py`` need without loading a processor (the vLLM engine never builds
one for Qwen2.5-Omni: vLLM runs it itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

OMNI_MODALITIES = ("video", "audio", "image")
DEFAULT_VIDEO_FPS = 2.0  # what Qwen2_5OmniProcessor assumes when it is given no fps
TEMPORAL_PATCH = 2  # frames per temporal patch of Qwen2.5-Omni's vision tower (``temporal_patch_size``)
# Media tensors that go in the model's dtype; grids, masks and ``video_second_per_grid`` keep theirs (seconds per
# grid in bfloat16 would move the temporal positions).
MODEL_DTYPE_INPUTS = ("pixel_values", "pixel_values_videos", "input_features")
# Audio features and their masks, one row per clip, as long as the longest clip of their prompt (Qwen3-Omni; always
# 30 s in Qwen2.5-Omni): clips of several prompts are padded with zeros to the longest, which the mask leaves out.
FRAME_PADDED_INPUTS = ("input_features", "feature_attention_mask")


@dataclass
class Encoded:
    """One prompt ready for the model: token ids plus its media tensors as the processor returned them for a batch
    of one (keyed by the model's argument names, in prompt order)."""

    input_ids: list[int]
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    use_audio_in_video: bool = False  # its videos carry their soundtracks (interleaved placeholders)


def collate(batch: Sequence[Encoded], pad_id: int, device: torch.device, dtype: torch.dtype,
            text_positions: bool = False) -> dict:
    """Left-pad ids (so the last position is every row's next token) and concatenate each media tensor in order.
    ``text_positions``: give plain causal LMs position ids that ignore the padding (the omni thinker computes its
    3-D positions itself from the attention mask)."""
    width = max(len(e.input_ids) for e in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for i, e in enumerate(batch):
        ids[i, width - len(e.input_ids):] = torch.tensor(e.input_ids)
        mask[i, width - len(e.input_ids):] = 1
    out = {"input_ids": ids.to(device), "attention_mask": mask.to(device)}
    for key in dict.fromkeys(k for e in batch for k in e.tensors):
        parts = [torch.as_tensor(e.tensors[key]) for e in batch if key in e.tensors]
        if key in FRAME_PADDED_INPUTS:
            frames = max(part.shape[-1] for part in parts)
            parts = [torch.nn.functional.pad(part, (0, frames - part.shape[-1])) for part in parts]
        value = torch.cat(parts)
        out[key] = value.to(device, dtype) if key in MODEL_DTYPE_INPUTS else value.to(device)
    if text_positions:
        out["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0).to(device)
    return out
