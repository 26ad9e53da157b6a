"""The decoded form of one media file: what the decode stage produces and every engine receives; its cache key
(``content_hash``) and the error every reader raises (``MediaError``).

Kept apart from ``decode.py`` so engines can type against it without importing PyAV, and so the point cloud reader,
which ``decode.py`` dispatches to, shares the key and the error without importing ``decode.py`` back.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

AUDIO_SAMPLE_RATE = 16_000


class MediaError(Exception):
    """A media file that cannot be read or decoded; the message names the file and what is wrong."""


def file_state(path: str | Path) -> tuple[int, ...] | None:
    """What tells that a file is unchanged since it was last read: device, inode, size, modification and change times
    (None where it cannot be stat'ed)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_HASHES: dict[tuple, str] = {}
_HASHES_MAX = 100_000


def content_hash(path: str | Path, **params) -> str:
    """SHA-256 of the file bytes and the decode parameters: the decode-once cache key. Remembered in this process
    while the file is unchanged (``file_state``): every run plans the same media again (a sweep's runs, a driver
    that runs several), and reading every file of a benchmark each time was part of each run's start-up."""
    state = file_state(path)
    memo = (str(path), state, repr(sorted(params.items())))
    if state is not None and memo in _HASHES:
        return _HASHES[memo]
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise MediaError(f"{path}: cannot read file: {exc.strerror}") from None
    digest.update(repr(sorted(params.items())).encode())
    if state is not None:
        if len(_HASHES) >= _HASHES_MAX:
            _HASHES.clear()
        _HASHES[memo] = digest.hexdigest()
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
