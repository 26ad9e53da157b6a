"""The decoded form of one media file: what the decode stage produces and every engine receives.

Kept apart from ``decode.py`` so engines can type against it without importing PyAV.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

AUDIO_SAMPLE_RATE = 16_000


@dataclass(frozen=True)
class DecodedMedia:
    """``data`` is, by modality:

    * ``video``: uint8 array (T, H, W, 3), T frames sampled uniformly over the clip; ``fps`` = frames per second
      of the *sampled* sequence (T / duration), which Qwen-style models need for temporal position ids;
    * ``audio``: float32 array (n,), mono, ``sample_rate`` Hz (16 kHz by default);
    * ``image``: uint8 array (H, W, 3).

    ``content_hash`` is the SHA-256 of the file bytes plus the decode parameters: the key of the decode-once cache
    and of vLLM's ``multi_modal_uuids``.
    """

    modality: str
    data: np.ndarray
    content_hash: str
    path: str = ""
    fps: float | None = None
    sample_rate: int | None = None
    meta: dict = field(default_factory=dict)
