"""What to decode, as a plan names it: defined apart from the Ray cache so that planning needs no Ray."""

from __future__ import annotations

from dataclasses import dataclass

from omnieval.media import sampling


@dataclass(frozen=True)
class MediaSpec:
    """What to decode: ``key`` is the content hash of the file plus the decode parameters."""

    key: str
    path: str
    modality: str
    params: tuple[tuple[str, object], ...] = ()


def video_params(decode) -> tuple[tuple[str, object], ...]:
    """The keyword arguments of ``decode.decode_video`` a run's ``decode:`` section (``config.DecodeConfig``) gives,
    sorted by name: they are part of every video's decode key. A section that sets no sampling option gives today's
    ``max_side`` and ``num_frames`` alone, so the keys of outputs and stores written before the options existed do
    not change; an option set adds itself with the defaults of the rule it chooses (``media.sampling``), so that a
    default spelled out and a default left out share a key."""
    params: dict[str, object] = {"max_side": decode.max_side, "num_frames": decode.num_frames}
    if decode.fps is not None:
        del params["num_frames"]
        params.update(fps=decode.fps, min_frames=decode.min_frames or sampling.FPS_MIN_FRAMES,
                      max_frames=decode.max_frames or sampling.FPS_MAX_FRAMES,
                      frame_factor=decode.frame_factor or sampling.FRAME_FACTOR)
    if decode.index_rule not in (None, "centres"):
        params["index_rule"] = decode.index_rule
    if decode.max_pixels is not None:
        del params["max_side"]
        factor = decode.size_factor or sampling.SIZE_FACTOR
        params.update(max_pixels=decode.max_pixels, size_factor=factor,
                      min_pixels=decode.min_pixels or factor * factor)
        if decode.total_pixels is not None:
            params.update(total_pixels=decode.total_pixels,
                          frame_factor=decode.frame_factor or sampling.FRAME_FACTOR)
    return tuple(sorted(params.items()))


def audio_params(decode) -> tuple[tuple[str, object], ...]:
    """The keyword arguments of ``decode.decode_audio`` a run's ``decode:`` section gives, sorted by name:
    ``sample_rate``, and ``max_audio_seconds`` only where set (today's keys unchanged)."""
    params: dict[str, object] = {"sample_rate": decode.sample_rate}
    if decode.max_audio_seconds is not None:
        params["max_audio_seconds"] = decode.max_audio_seconds
    return tuple(sorted(params.items()))
