"""Sampling rules: how many frames a clip gives, which ones, and at what size.

``decode.decode_video`` takes frames by one of two counts and one of two index rules, and sizes them by one of two
rules; the defaults are today's (``num_frames`` frames at bin centres, the longer side <= ``max_side``).

- **Count.** ``num_frames`` (fixed), or ``fps`` (by rate): the rule of the Qwen2.5-Omni / Qwen3-Omni reference
  utilities (``qwen-omni-utils``, ``vision_process.smart_nframes``): ``duration * fps`` frames, clamped to
  ``[min_frames, max_frames]`` (the bounds rounded inwards to multiples of ``frame_factor``) and to the clip's frame
  count, then rounded down to a multiple of ``frame_factor`` (``frame_count_by_rate``).
- **Index.** ``centres``: the frame on screen at the centre of each of N equal bins of the duration (today's rule);
  ``linspace``: frame indices ``round(linspace(0, total - 1, N))`` over the clip's frames, the reference utilities'
  rule (``linspace_indices``), which Qwen3-VL's video processor also follows; ``uniform``: the first frame of each
  of N equal runs of the clip's frames, ``k * total // N``, the rule of transformers' video processors
  (``default_sample_indices_fn``: LLaVA-OneVision, Gemma 4, every processor without its own ``sample_frames``; and
  VideoLLaMA3's, ``uniform_indices``); ``uniform_shifted``: the middle frame of each run, InternVL's video
  processor with its ``initial_shift`` (``shifted_indices``). The three frame-index rules take the clip's frames as
  the demuxer counts them, as the processors take the frame count of their video reader.
- **Size.** ``max_side`` (the longer side bounded), or a pixel budget ``min_pixels`` / ``max_pixels`` with
  ``size_factor`` (28 for Qwen2.5-Omni's 14-pixel patches merged 2x2, 32 for Qwen3-Omni's 16-pixel ones): the rule of
  the same utilities and of transformers' Qwen2-VL image processor (``smart_resize``): both sides rounded to multiples
  of the factor, then scaled so that ``h * w`` lies in the budget, the aspect ratio kept as nearly as the factor
  allows. ``total_pixels`` bounds the pixels over all frames of a clip as the reference utilities do
  (``frame_pixel_budget``).
"""

from __future__ import annotations

import math

import numpy as np

#: The reference utilities' defaults for sampling by rate.
FPS_MIN_FRAMES = 4
FPS_MAX_FRAMES = 768
FRAME_FACTOR = 2
#: The reference utilities' side factor for Qwen2.5-Omni (14-pixel patches merged 2x2).
SIZE_FACTOR = 28
#: The reference utilities refuse a frame whose sides differ by more than this ratio.
MAX_RATIO = 200
INDEX_RULES = ("centres", "linspace", "uniform", "uniform_shifted")


class SamplingError(ValueError):
    """A clip the rule cannot sample (too few frames, an extreme aspect ratio); the decoder names the file."""


def _round_to(x: float, factor: int) -> int:
    return round(x / factor) * factor


def _floor_to(x: float, factor: int) -> int:
    return math.floor(x / factor) * factor


def _ceil_to(x: float, factor: int) -> int:
    return math.ceil(x / factor) * factor


def frame_count_by_rate(total_frames: int, video_fps: float, fps: float, min_frames: int = FPS_MIN_FRAMES,
                        max_frames: int = FPS_MAX_FRAMES, frame_factor: int = FRAME_FACTOR) -> int:
    """Frames to sample from a clip of ``total_frames`` frames at ``video_fps`` when sampling at ``fps``.

    The clip's duration is ``total_frames / video_fps`` (its frame count over its rate, as the reference reads it);
    the count never exceeds the clip's frames, so a clip shorter than ``min_frames`` frames gives all it has (rounded
    down to the factor). Raises ``SamplingError`` where that leaves fewer than ``frame_factor`` frames."""
    low = _ceil_to(min_frames, frame_factor)
    high = _floor_to(min(max_frames, total_frames), frame_factor)
    wanted = total_frames / video_fps * fps
    n = _floor_to(min(max(wanted, low), high, total_frames), frame_factor)
    if not frame_factor <= n <= total_frames:
        raise SamplingError(f"sampling at {fps} fps gives {n} frames of a clip of {total_frames}: at least "
                            f"{frame_factor} are needed (frame_factor)")
    return n


def linspace_indices(total_frames: int, n: int) -> np.ndarray:
    """``n`` frame indices spread evenly over ``0 .. total_frames - 1`` (both ends included), rounded half to even
    as ``torch.round`` and ``numpy.round`` do."""
    return np.round(np.linspace(0, total_frames - 1, n)).astype(int)


def uniform_indices(total_frames: int, n: int) -> np.ndarray:
    """The first frame of each of ``n`` equal runs of ``total_frames`` frames: ``k * total_frames // n``, exactly
    transformers' ``default_sample_indices_fn`` (video_utils.py, 5.19). VideoLLaMA3's processor writes the same
    rule as ``torch.arange(0, total, total / n).int()``; its float32 steps give the same ``n`` indices and, for
    some pairs (15 frames, 13 asked), one more index equal to ``total_frames``, past the clip, where that processor
    fails: those pairs are not a rule of its own. More frames asked than the clip holds repeat frames (the
    processors refuse)."""
    return np.arange(n, dtype=np.int64) * total_frames // n


def shifted_indices(total_frames: int, n: int) -> np.ndarray:
    """The middle frame of each of ``n`` equal runs: ``int(total / n / 2 + k * total / n)``, the rule of InternVL's
    video processor (``initial_shift=True``, its default), written in integers as ``(2k + 1) * total // (2n)`` so
    that no float rounding moves an index (the test compares it with the processor's own float arithmetic)."""
    return (2 * np.arange(n, dtype=np.int64) + 1) * total_frames // (2 * n)


#: The frame-index rules by name: ``(total_frames, n) -> indices`` (``centres`` works on times, not indices).
FRAME_INDEX_RULES = {"linspace": linspace_indices, "uniform": uniform_indices, "uniform_shifted": shifted_indices}


def frame_indices(rule: str, total_frames: int, n: int) -> np.ndarray:
    """``n`` frame indices of a clip of ``total_frames`` frames by the frame-index rule ``rule``."""
    if rule not in FRAME_INDEX_RULES:
        raise SamplingError(f"{rule!r} is not a frame-index rule ({', '.join(FRAME_INDEX_RULES)})")
    return FRAME_INDEX_RULES[rule](total_frames, n)


def pixel_size(height: int, width: int, factor: int, min_pixels: float, max_pixels: float) -> tuple[int, int]:
    """``(height, width)`` multiples of ``factor`` with ``min_pixels <= h * w <= max_pixels`` (up to the rounding to
    the factor), the aspect ratio kept: ``smart_resize`` of the reference utilities and of transformers' Qwen2-VL
    image processor, as transformers writes it: no side is below ``factor`` (a side rounded to 0 leaves no pixels
    and so is scaled up; one shrunk to 0 is kept at the factor, which the utilities' copy omits)."""
    if max_pixels < min_pixels:
        raise SamplingError(f"max_pixels {max_pixels} is below min_pixels {min_pixels}")
    if max(height, width) / min(height, width) > MAX_RATIO:
        raise SamplingError(f"a {width}x{height} frame is beyond the aspect ratio {MAX_RATIO} a pixel budget takes")
    h, w = _round_to(height, factor), _round_to(width, factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h, w = max(factor, _floor_to(height / beta, factor)), max(factor, _floor_to(width / beta, factor))
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = _ceil_to(height * beta, factor), _ceil_to(width * beta, factor)
    return h, w


def frame_pixel_budget(min_pixels: int, max_pixels: int, total_pixels: int | None, n_frames: int,
                       frame_factor: int = FRAME_FACTOR) -> float:
    """One frame's ``max_pixels`` when a clip's frames share ``total_pixels``: the reference utilities give each
    frame ``total_pixels / n_frames * frame_factor`` (two frames make one temporal patch), never under
    ``min_pixels * 1.05`` (rounded down) and never over ``max_pixels``."""
    if total_pixels is None:
        return max_pixels
    share = max(min(max_pixels, total_pixels / n_frames * frame_factor), int(min_pixels * 1.05))
    return min(max_pixels, share)
