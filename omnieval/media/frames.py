"""Decode only the frames a clip is sampled at: seek to the keyframe before each sampled time, decode forward.

``decode.decode_video`` samples N frames of a clip; decoding the whole clip to keep them costs the clip's length (a
10-minute 720p clip decoded whole for 8 frames takes minutes), decoding from the keyframe before each one costs the
frames sampled. This module picks the same frames as the full decode (``decode._stream_pick``), frame for frame:

1. **The index.** The presentation times of the frames a full decode returns (packets marked *discard* by an edit
   list decode to no frame and are left out) and the keyframes' times (discarded ones kept: the first shown frames
   of a cut clip decode from them). An MP4 or MOV declares them in its header (``header_index``: FFmpeg's index of
   the stream plus each sample's composition offset), read without touching a packet; other containers' packets are
   demuxed without decoding (``packet_index``: no pixels, but every packet's bytes are read).
2. **The start.** The first frame is decoded as the full decode does; its time is the origin of the sampled times.
   The picked frame for a sampled time ``c`` is the index's last frame at or before ``c`` (the on-screen rule).
3. **Seek or decode on** (one rule, from the sampled times and the index): for the next sampled frame, its keyframe
   is the index's last keyframe at or before it. When that keyframe lies beyond the last frame decoded with at
   least ``SEEK_MIN_SKIP`` frames between them, the decoder seeks to it (backward, keyframes only) and decodes
   forward; otherwise it decodes on. Sampled frames dense in time (several per keyframe interval) are thus decoded
   straight through, sparse ones cost a keyframe interval each at most.
4. **The check.** Each decoded pick must be the frame the index expects (same time), and a seek must land at or
   before the frame sought (a container whose seek lands later is retried from the keyframe before, twice). Where
   either fails, where a packet has no timestamp, or where the index ends short of the declared duration (a
   truncated file: the full decode says so, as before), this path gives up and ``decode_video`` decodes the whole
   clip: a slow answer, never a different one.

The same frames give the same pixels: the decoders are bit-exact from a keyframe, and FFmpeg drops the leading
frames of an open GOP after a seek (they would show references from before it); ``tests/test_frame_seek.py``
compares every pick against the full decode on H.264 (B-frames, open GOPs), HEVC, VP9 and AV1 in MP4, MKV, WebM
and MOV. Decode parameters (and so cache and store keys) do not change: only how the frames are reached.

Threads: every video decode runs with ``decode_threads()`` FFmpeg frame threads (``bound_threads``): the CPUs Ray
assigned to the decode task, else at most 2. An unbounded thread count starts a thread per core in every decode
running at once, and unbounded slice threads are known to deadlock PyAV under concurrency.

Why PyAV and not torchcodec (``omnieval bench decode``, docs/gpu.md "The decoder"): torchcodec's
``get_frames_played_at`` follows the same on-screen rule and returns the same pixels (every frame the bench checked
was equal, in its exact and approximate seek modes). In CPU seconds this path took 0.79-1.04x of its time on 720p
H.264 clips of 1 and 30 minutes (1.00x at 8 frames of the 30-minute clip since its index is read from the MP4's
header: a demux of the whole file had been 0.54 of 3.66 CPU-s, 1.35x), 0.90x at 32 frames of 1080p HEVC, and 0.87-1.04x
on a 1-minute VP9 WebM (1.09x at 8 frames of a 30-minute one, whose packets are still demuxed: a Matroska file's
Cues, which FFmpeg's index holds, list keyframes only). It does not install cleanly beside the
project's torch: a torchcodec wheel is built for one torch ABI and one CUDA and declares no torch requirement, so
pip cannot catch a mismatch (PyPI's 0.14 to 0.17 are CUDA 13 builds that fail to load with the CPU torch 2.13:
``libnvrtc.so.13`` missing; 0.13.0, the last CPU build, loads), and it links the system's FFmpeg 4 to 8 shared
libraries, where PyAV's wheel carries its own FFmpeg. Its CUDA decoding is the reason to measure it again on GPU
nodes.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

#: The least number of frames a seek must skip to be taken: a seek costs a demuxer index lookup and a decoder
#: flush, about a frame's decode; below this the decoder goes on through the frames in between.
SEEK_MIN_SKIP = 2
#: Seeks retried from an earlier keyframe when one lands past the frame sought, before the full decode is used.
SEEK_RETRIES = 2
#: Threads of a decode outside Ray (a command-line decode, a test, the driver).
DEFAULT_THREADS = 2
EPS = 1e-9  # the on-screen rule's tolerance, as in decode._pick and decode._stream_pick


class _Unsure(Exception):
    """The seek path cannot vouch for a pick: the caller decodes the whole clip instead."""


@dataclass(frozen=True)
class PacketIndex:
    """What the demuxer says without decoding: the presentation times (s) of the frames a full decode returns,
    sorted, and the keyframes' times (s) with their timestamps in the stream's time base, sorted."""

    times: np.ndarray
    key_times: np.ndarray
    key_pts: np.ndarray


def decode_threads() -> int:
    """FFmpeg threads for one decode: the CPUs Ray assigned to the task running it (a decode task holds 1 by
    default, ``run.decode_cache.decode_task``), else ``DEFAULT_THREADS`` (never more than the machine's cores)."""
    if "ray" in sys.modules:  # never import Ray just to ask: a command-line decode has none
        ray = sys.modules["ray"]
        try:
            cpus = ray.get_runtime_context().get_assigned_resources().get("CPU") if ray.is_initialized() else None
        except Exception:  # the driver, or a Ray too old to say: the default
            cpus = None
        if cpus:
            return max(1, int(cpus))
    return max(1, min(DEFAULT_THREADS, os.cpu_count() or 1))


def bound_threads(stream, threads: int | None = None) -> None:
    """Set a video stream's decoder to ``threads`` (default ``decode_threads()``) frame threads, before it opens."""
    n = threads or decode_threads()
    stream.codec_context.thread_count = n
    stream.codec_context.thread_type = "FRAME" if n > 1 else "NONE"


def packet_index(container, stream) -> PacketIndex | None:
    """Demux every packet of ``stream`` (no decoding); None when a packet carries no timestamp (a raw stream).

    The loop keeps each packet's integer timestamp and flags only, and the times are converted in one pass
    (``_seconds``, rounded as ``float(pts * time_base)``): on a 30-minute Matroska clip (54,000 packets) a
    ``Fraction`` product per packet was 0.06-0.08 of the index's 0.33 CPU-s, the demux itself 0.23."""
    tb = stream.time_base
    if tb is None:
        return None
    pts, key, shown = [], [], []
    for packet in container.demux(stream):
        at = packet.pts
        if at is None:
            if packet.size == 0:  # the demuxer's end-of-stream marker
                continue
            return None
        pts.append(at)
        key.append(packet.is_keyframe)
        shown.append(not packet.is_discard)
    pts, key, shown = np.array(pts, np.int64), np.array(key, bool), np.array(shown, bool)
    if not shown.any() or not key.any():
        return None
    exact = np.abs(pts).max() * tb.numerator < 2**53  # else each product is rounded one by one
    times = _seconds(pts, tb) if exact else np.array([float(int(p) * tb) for p in pts])
    order = np.argsort(times[key], kind="stable")
    return PacketIndex(np.unique(times[shown]), times[key][order], pts[key][order])


MP4_FORMATS = "mov"
"""FFmpeg's name of the demuxer of MP4, MOV and their kin (``container.format.name`` lists it first)."""


def header_index(path, container, stream) -> PacketIndex | None:
    """The index ``packet_index`` demuxes, built from what the file's header declares instead (no packet read):
    FFmpeg's own index of the stream, built from an MP4's tables when it opened the file (decoding times, keyframe
    and discard flags, byte offsets), each entry's decoding time plus its sample's composition offset
    (``mp4_index.composition_by_offset``, matched by byte offset). On a 30-minute clip the demux was 0.54 of the
    3.66 CPU-s of sampling 8 frames. None where this cannot vouch for the same index: not an MP4, an entry whose
    sample the tables do not place, a negative composition offset (FFmpeg then shifts decoding times)."""
    from omnieval.media import mp4_index

    if container.format.name.split(",")[0] != MP4_FORMATS or stream.time_base is None:
        return None
    entries = stream.index_entries
    n = len(entries)
    if n == 0:
        return None
    dts, pos = np.empty(n, np.int64), np.empty(n, np.int64)
    keyframe, discard = np.empty(n, bool), np.empty(n, bool)
    for i, entry in enumerate(entries):
        dts[i], pos[i], keyframe[i], discard[i] = entry.timestamp, entry.pos, entry.is_keyframe, entry.is_discard
    shifts = _composition_shifts(mp4_index.composition_by_offset(path), pos)
    if shifts is None or (shifts < 0).any():
        return None
    pts = dts + shifts
    key_pts = np.sort(pts[keyframe], kind="stable")
    if not (~discard).any() or not len(key_pts) or np.abs(pts).max() * stream.time_base.numerator >= 2**53:
        return None
    return PacketIndex(np.unique(_seconds(pts[~discard], stream.time_base)), _seconds(key_pts, stream.time_base),
                       key_pts)


def _seconds(pts: np.ndarray, time_base) -> np.ndarray:
    """``float(pts * time_base)`` of each, rounded as that exact product is (the seek path compares decoded frames'
    times with the index's for equality): the integer product and the denominator are exact doubles below 2**53, and
    one division rounds correctly."""
    return (pts * time_base.numerator).astype(np.float64) / time_base.denominator


def _composition_shifts(tracks, pos: np.ndarray) -> np.ndarray | None:
    """The composition offset of the sample at each of ``pos`` (byte offsets), from the one track that places them
    all; None where none does."""
    for offsets, shifts in tracks:
        at = np.searchsorted(offsets, pos)
        if (at < len(offsets)).all() and (offsets[np.minimum(at, len(offsets) - 1)] == pos).all():
            return shifts[at]
    return None


def _frame_time(frame) -> float:
    if frame.pts is None:
        raise _Unsure("a decoded frame without a timestamp")
    return float(frame.pts * frame.time_base)


def index_is_complete(index: PacketIndex, duration: float, shortfall: float) -> bool:
    """Whether the index reaches the declared ``duration`` as the full decode's truncation check asks (its last
    frame plus one frame interval, within ``shortfall``)."""
    times = index.times - index.times[0]
    gap = float(times[-1] - times[-2]) if len(times) > 1 else 0.0
    return duration - (float(times[-1]) + gap) <= shortfall


class _Cursor:
    """The decoder's position in one container: frames come out in presentation order, one held back (``ahead``)
    once it is past the sampled time asked for, so the next sampled time can still take it."""

    def __init__(self, container, stream):
        self.container, self.stream = container, stream
        self.frames = container.decode(stream)
        self.prev = self.ahead = None  # the last frame at or before the time asked for; the frame after it
        self.decoded = 0

    def next_frame(self):
        frame = next(self.frames, None)
        self.decoded += frame is not None
        return frame

    def seek(self, pts: int) -> None:
        self.container.seek(int(pts), stream=self.stream, backward=True, any_frame=False)
        self.frames = self.container.decode(self.stream)
        self.prev = self.ahead = None

    def on_screen(self, start: float, c: float):
        """Decode forward to the last frame whose time (from ``start``) is <= ``c``; None when the first frame
        decoded is already past ``c`` (a seek that landed too late)."""
        while True:
            if self.ahead is None:
                self.ahead = self.next_frame()
            if self.ahead is None or _frame_time(self.ahead) - start > c + EPS:
                return self.prev
            self.prev, self.ahead = self.ahead, None

    @property
    def position(self) -> float | None:
        """Time of the last frame decoded (None right after a seek)."""
        frame = self.ahead if self.ahead is not None else self.prev
        return None if frame is None else _frame_time(frame)


def pick_by_seeking(open_clip, targets: np.ndarray, duration: float, shortfall: float,
                    path=None, keep=lambda frame: frame) -> tuple[list, int] | None:
    """The frame on screen at each of ``targets`` (seconds from the first frame, increasing) and the number of frames
    decoded, reached by the module's rule; None where the whole clip must be decoded instead (module docstring).

    ``open_clip()`` opens the clip (a PyAV container); two are opened, one for the index, one for decoding.
    ``path``: the clip's file, whose header may give the index without a demux (``header_index``). ``keep``: what is
    kept of a picked frame, applied as it is picked (``decode_video``'s converts it to RGB at the output size, so
    the decoded frames are not all held at their stored size)."""
    import av

    with open_clip() as container:
        stream = container.streams.video[0]
        index = header_index(path, container, stream) if path else None
        index = index or packet_index(container, stream)
    if index is None or not index_is_complete(index, duration, shortfall):
        return None
    with open_clip() as container:
        stream = container.streams.video[0]
        bound_threads(stream)
        try:
            return _seek_pick(_Cursor(container, stream), index, targets, keep)
        except (_Unsure, av.error.FFmpegError):  # a decode error on the way: the full decode reports it as before
            return None


def _seek_pick(cursor: _Cursor, index: PacketIndex, targets: np.ndarray, keep) -> tuple[list, int]:
    first = cursor.next_frame()
    if first is None or _frame_time(first) != index.times[0]:
        raise _Unsure("the first decoded frame is not the index's first frame")
    start = _frame_time(first)
    cursor.prev = first
    rel_times, rel_keys = index.times - start, index.key_times - start
    picked = []
    for c in targets:
        expected = rel_times[max(0, np.searchsorted(rel_times, c + EPS, side="right") - 1)]
        frame = _reach(cursor, rel_times, rel_keys, index.key_pts, start, c, expected)
        if _frame_time(frame) - start != expected:
            raise _Unsure(f"decoded frame at {_frame_time(frame) - start} s where the index has {expected} s")
        picked.append(keep(frame))
    return picked, cursor.decoded


def _reach(cursor: _Cursor, rel_times, rel_keys, key_pts, start: float, c: float, expected: float):
    """The frame on screen at ``c``, seeking first where the rule says so (and again, earlier, where a seek landed
    past it)."""
    k = int(np.searchsorted(rel_keys, expected + EPS, side="right")) - 1
    position = cursor.position
    here = position - start if position is not None else None
    skipped = np.count_nonzero((rel_times > here) & (rel_times < rel_keys[k])) if here is not None else 0
    if k >= 0 and here is not None and rel_keys[k] > here and skipped >= SEEK_MIN_SKIP:
        for attempt in range(SEEK_RETRIES + 1):
            cursor.seek(key_pts[max(0, k - attempt)])
            frame = cursor.on_screen(start, c)
            if frame is not None:
                return frame
        raise _Unsure("every seek landed past the frame sought")
    frame = cursor.on_screen(start, c)
    if frame is None:
        raise _Unsure("no frame at or before the sampled time")
    return frame
