"""The decoded form of one media file: what the decode stage produces and every engine receives; its cache key
(``content_hash``) and the error every reader raises (``MediaError``).

Kept apart from ``decode.py`` so engines can type against it without importing PyAV, and so the point cloud reader,
which ``decode.py`` dispatches to, shares the key and the error without importing ``decode.py`` back.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

AUDIO_SAMPLE_RATE = 16_000


class MediaError(Exception):
    """A media file that cannot be read or decoded; the message names the file and what is wrong."""


def content_hash(path: str | Path, **params) -> str:
    """SHA-256 of the file bytes and the decode parameters: the decode-once cache key."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise MediaError(f"{path}: cannot read file: {exc.strerror}") from None
    digest.update(repr(sorted(params.items())).encode())
    return digest.hexdigest()


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
