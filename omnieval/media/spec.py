"""What to decode, as a plan names it: defined apart from the Ray cache so that planning needs no Ray."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MediaSpec:
    """What to decode: ``key`` is the content hash of the file plus the decode parameters."""

    key: str
    path: str
    modality: str
    params: tuple[tuple[str, object], ...] = ()
