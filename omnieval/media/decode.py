"""Decode media files into the arrays engines take (``DecodedMedia``).

PyAV (FFmpeg's libraries in-process) is the hot path: measured here ~10x faster than spawning an ``ffmpeg``
process per clip, which is what the ``*_ffmpeg`` functions do (kept for the pipeline benchmark's comparison).

Frame sampling rule (both decoders; ``decode_video`` also samples by rate, by frame index and by a pixel budget,
``media.sampling``): the clip's duration D comes from the stream header (stream duration, else
frame count / frame rate, else the container's duration); it is cut into N equal bins and, for the centre
``c_i = (i + 0.5) * D / N`` of each bin (measured from the first frame's timestamp), the frame *on screen* at
``c_i`` is taken: the last frame whose presentation time is <= ``c_i``. Only the frames needed are decoded: the
decoder seeks to the keyframe before each sampled frame and decodes forward, or decodes straight through where the
sampled frames are dense (``media.frames``: the rule, and the checks that make it pick the frames a full decode
would); only the N picked frames are converted to RGB, so memory stays at N frames whatever the clip's length.
Every video decode runs with a bounded number of FFmpeg threads (``frames.bound_threads``). A stream with no
header duration (a raw .h264 file) is decoded whole and buffered, and D is taken from its decoded timestamps (or
frame indexes).

Audio is trimmed to the stream's declared duration: AAC decoders emit a few hundred padding samples past it. A
run's ``max_audio_seconds`` cuts it to its first seconds, and nothing past them is decoded.
A decode that ends short of the declared duration by more than ``allowed_shortfall`` (the larger of 0.1 s and 5%)
is a truncated file and raises. The declared duration is the header's, never one estimated from the file size:
for WAV, FFmpeg derives the stream duration from the bytes present, so a WAV cut in half would decode as a shorter,
complete-looking clip; its RIFF header's data size is read instead (``wav_declared``). Likewise an MP4 whose index
comes first opens when cut, and a cut that drops a B-frame from the middle of the presentation order leaves the
last frame near the end: its index's sample offsets and sizes are compared with the file's size
(``mp4_index.declared_end``) before any decoding. Every bad file raises
``MediaError`` naming the file, never a raw library exception.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from omnieval.media import sampling
from omnieval.media.decoded import AUDIO_SAMPLE_RATE, DecodedMedia, MediaError, content_hash, file_state
from omnieval.media.frames import bound_threads, packet_index, pick_by_seeking
from omnieval.media.mp4_index import declared_end
from omnieval.media.pointcloud import decode_pointcloud, decode_pointcloud_views, is_pointcloud_file, probe_pointcloud

SHORTFALL_S = 0.1
SHORTFALL_SHARE = 0.05


def allowed_shortfall(declared: float) -> float:
    """How much shorter than its declared duration a decode may end and still count as complete.

    0.1 s covers the granularity of codecs and containers on short clips: two video frames at 25 fps, four AAC
    frames, an encoder's priming and padding (tens of ms), a stream that starts a frame late. 5% covers the
    container-level durations of long clips (a container's duration is its longest stream's, an audio track may
    outlast the video by a few hundred ms). A file cut anywhere before its last 5% (0.1 s on clips under 2 s) loses
    content a model would have been shown, and is refused.
    """
    return max(SHORTFALL_S, SHORTFALL_SHARE * declared)


#: FFmpeg's stream probing reads and analyses up to 5 MB of a file; for a WAV it costs ~4 ms a file (most of the
#: time a probe or an audio decode took) and finds nothing the RIFF header does not state. A WAV is opened with the
#: smallest probe size: the same stream parameters and the same samples, ~20x faster.
_OPEN_OPTIONS = {"probesize": "32"}


def _is_riff_wave(path: str | Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(12)
    except OSError:
        return False
    return head[:4] == b"RIFF" and head[8:12] == b"WAVE"


def _open(path: str | Path):
    import av

    if not Path(path).is_file():
        raise MediaError(f"{path}: file does not exist")
    _check_mp4_bytes(path)
    try:
        return av.open(str(path), options=_OPEN_OPTIONS if _is_riff_wave(path) else None)
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        raise MediaError(f"{path}: cannot open media container: {exc}") from None


def sample_times(duration: float, num_frames: int) -> np.ndarray:
    """Centres of ``num_frames`` equal bins over ``[0, duration)``."""
    return (np.arange(num_frames) + 0.5) * duration / num_frames


def _pick(frame_times: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Index of the last frame whose time is <= each target (the first frame if none)."""
    idx = np.searchsorted(frame_times, targets + 1e-9, side="right") - 1
    return np.clip(idx, 0, len(frame_times) - 1)


def _resize_to(max_side: int | None, width: int, height: int) -> tuple[int, int]:
    """Output size with the longer side <= ``max_side``, aspect kept, both sides even (what video encoders want)."""
    if not max_side or max(width, height) <= max_side:
        return width, height
    scale = max_side / max(width, height)
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


def _header_duration(duration: float | None, frames: int | None, rate: float | None,
                     container_s: float | None) -> float | None:
    """The clip duration the sampling rule uses, shared by both decoders (PyAV attributes or ffprobe fields)."""
    for value in (duration, frames / rate if frames and rate else None, container_s):
        if value and value > 0:
            return float(value)
    return None


def _tag_seconds(stream) -> float | None:
    """The per-stream ``DURATION`` tag (``HH:MM:SS.fffffffff``) Matroska / WebM muxers write, where the stream
    itself declares no duration."""
    text = (stream.metadata or {}).get("DURATION")
    try:
        h, m, sec = str(text).split(":")
        return int(h) * 3600 + int(m) * 60 + float(sec)
    except (TypeError, ValueError):
        return None


def _tag_end_seconds(stream) -> float | None:
    """The stream's length from its ``DURATION`` tag, which Matroska muxers write as the time its last frame ends,
    counted from 0: a stream that starts late (its first timestamp 0.7 s) lasts the tag less its start."""
    end = _tag_seconds(stream)
    if end is None or not stream.start_time or not stream.time_base:
        return end
    start = float(stream.start_time * stream.time_base)
    return end - start if 0 < start < end else end


def _stream_duration(stream, container) -> float | None:
    rate = stream.average_rate or stream.guessed_rate
    own = float(stream.duration * stream.time_base) if stream.duration else _tag_end_seconds(stream)
    return _header_duration(own, stream.frames, float(rate) if rate else None,
                            container.duration / 1e6 if container.duration else None)


def wav_declared(path: str | Path) -> tuple[float, int, int] | None:
    """``(declared seconds, declared data bytes, data bytes present)`` from a RIFF/WAVE header, or None for any
    other file (and for a streamed WAV whose header leaves the data size at 0 or 0xFFFFFFFF, i.e. unknown).

    Reads the chunk headers only (``fmt `` for the byte rate, ``data`` for the size), seeking over the others."""
    import struct

    try:
        with open(path, "rb") as f:
            head = f.read(12)
            if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
                return None
            byte_rate = None
            while True:
                chunk = f.read(8)
                if len(chunk) < 8:
                    return None
                kind, size = chunk[:4], struct.unpack("<I", chunk[4:])[0]
                if kind == b"fmt ":
                    body = f.read(size + (size & 1))
                    if len(body) >= 12:
                        byte_rate = struct.unpack("<I", body[8:12])[0]
                elif kind == b"data":
                    if not byte_rate or size in (0, 0xFFFFFFFF):
                        return None
                    present = max(0, Path(path).stat().st_size - f.tell())
                    return size / byte_rate, size, min(present, size)
                else:
                    f.seek(size + (size & 1), 1)
    except OSError:
        return None


def audio_declared_seconds(path: str | Path) -> float | None:
    """The seconds of audio ``path`` declares (a WAV's RIFF header; else its first audio stream's duration, else the
    container's), or None where it declares none, has no audio stream or cannot be opened. Headers only, no
    decoding: what ``decode_audio`` returns at most, since it trims to the declared duration."""
    wav = wav_declared(path)
    if wav is not None:
        return wav[0]
    try:
        container = _open(path)
    except MediaError:
        return None
    try:
        if not container.streams.audio:
            return None
        stream = container.streams.audio[0]
        own = float(stream.duration * stream.time_base) if stream.duration else _tag_seconds(stream)
        return own or (container.duration / 1e6 if container.duration else None)
    finally:
        container.close()


def _check_wav_bytes(path) -> None:
    """A WAV whose header declares more audio than the file holds, by more than ``allowed_shortfall``."""
    header = wav_declared(path)
    if header is None:
        return
    seconds, size, present = header
    have = seconds * present / size
    if seconds - have > allowed_shortfall(seconds):
        raise MediaError(f"{path}: truncated audio: the WAV header declares {seconds:.2f} s ({size} data bytes), "
                         f"the file holds {have:.2f} s ({present} bytes)")


def _check_mp4_bytes(path) -> None:
    """An MP4 whose index declares sample bytes past the end of the file (``mp4_index.declared_end``): cut short,
    whether or not the frames that still decode reach the declared duration."""
    end = declared_end(path)
    size = Path(path).stat().st_size
    if end is not None and end > size:
        raise MediaError(f"{path}: truncated media: its MP4 index places samples up to byte {end}, the file holds "
                         f"{size} bytes ({size / end:.0%})")


def decode_video(path: str | Path, num_frames: int | None = 8, max_side: int | None = None, *,
                 fps: float | None = None, min_frames: int = sampling.FPS_MIN_FRAMES,
                 max_frames: int = sampling.FPS_MAX_FRAMES, frame_factor: int = sampling.FRAME_FACTOR,
                 index_rule: str = "centres", min_pixels: int | None = None, max_pixels: int | None = None,
                 size_factor: int = sampling.SIZE_FACTOR, total_pixels: int | None = None,
                 strategy: str = "seek") -> DecodedMedia:
    """RGB uint8 frames (T, H, W, 3): ``num_frames`` of them, or as many as sampling at ``fps`` gives; picked at bin
    centres or by frame indices (``linspace``, ``uniform``, ``uniform_shifted``); the longer side <= ``max_side``, or
    sized by the pixel budget ``min_pixels`` / ``max_pixels`` / ``total_pixels`` (``media.sampling``: the rules, and
    which reference each follows). The defaults are the module's rule.

    ``strategy``: ``"seek"`` reaches the sampled frames from the keyframes before them (``media.frames``, falling
    back to the full decode where it cannot vouch for a frame); ``"full"`` decodes every frame up to the last one
    sampled, the reference the seeking path is tested and benchmarked against. Both give the same frames."""
    import av

    if strategy not in ("seek", "full"):
        raise MediaError(f"{path}: unknown video decode strategy {strategy!r} (seek or full)")
    if index_rule not in sampling.INDEX_RULES:
        raise MediaError(f"{path}: unknown frame index rule {index_rule!r} ({' or '.join(sampling.INDEX_RULES)})")
    rule = _Rule(num_frames, fps, min_frames, max_frames, frame_factor, index_rule)
    container = _open(path)
    try:
        if not container.streams.video:
            raise MediaError(f"{path}: no video stream")
        stream = container.streams.video[0]
        bound_threads(stream)
        duration = _stream_duration(stream, container)
        rate = float(stream.average_rate or stream.guessed_rate or 25)
        timed = _timed(container.decode(stream), rate)

        def converter(n_frames: int) -> _ToRGB:
            return _ToRGB(*_output_size(path, stream.codec_context.width, stream.codec_context.height, n_frames,
                                        max_side, min_pixels, max_pixels, size_factor, total_pixels, frame_factor))

        times = _frame_times(path) if duration is not None and rule.needs_frame_times else None
        if duration is None or (rule.needs_frame_times and times is None):
            # no header duration (e.g. a raw .h264 stream) or no packet timestamps: buffer the frames, then pick
            frames = list(timed)
            if not frames:
                raise MediaError(f"{path}: no decodable video frames")
            times = np.array([t for t, _ in frames]) - frames[0][0]
            step = float(np.median(np.diff(times))) if len(times) > 1 else 1 / rate
            duration = duration or float(times[-1] + step)
            targets = rule.targets(path, duration, times, rate)
            to_rgb = converter(len(targets))
            picked = [to_rgb(frames[i][1]) for i in _pick(times, targets)]
            n_decoded = len(frames)
        else:
            targets = rule.targets(path, duration, times, rate)
            to_rgb = converter(len(targets))
            found = None
            if strategy == "seek":
                found = pick_by_seeking(lambda: _open(path), targets, duration, allowed_shortfall(duration), path,
                                        keep=to_rgb)
            picked, n_decoded = found or _stream_pick(path, timed, duration, targets, to_rgb)
        data = np.stack(picked)
    except av.error.FFmpegError as exc:
        raise MediaError(f"{path}: video decoding failed: {exc}") from None
    finally:
        container.close()
    meta = {"duration": duration, "decoded_frames": n_decoded}
    if rule.index_rule != "centres":  # which frames of the clip were taken: their own times, for timestamped prompts
        meta.update(frame_indices=sampling.frame_indices(rule.index_rule, len(times), len(picked)).tolist(),
                    source_frames=len(times), source_fps=rate)
    return DecodedMedia("video", data, content_hash="", path=str(path), fps=len(picked) / duration, meta=meta)


@dataclass(frozen=True)
class _Rule:
    """How many frames, and where: ``num_frames`` or ``fps`` (with its bounds), by ``index_rule``."""

    num_frames: int | None
    fps: float | None
    min_frames: int
    max_frames: int
    frame_factor: int
    index_rule: str

    @property
    def needs_frame_times(self) -> bool:
        """Counting by rate and indexing by frame both need the clip's frames (their count, their times)."""
        return self.fps is not None or self.index_rule != "centres"

    def targets(self, path, duration: float, times: np.ndarray | None, rate: float) -> np.ndarray:
        """The sampled times (s from the first frame); ``times`` are the clip's frame times from its first."""
        try:
            n = self.num_frames if self.fps is None else sampling.frame_count_by_rate(
                len(times), rate, self.fps, self.min_frames, self.max_frames, self.frame_factor)
        except sampling.SamplingError as exc:
            raise MediaError(f"{path}: {exc}") from None
        if not n:
            raise MediaError(f"{path}: neither num_frames nor fps says how many frames to sample")
        if self.index_rule != "centres":
            return times[sampling.frame_indices(self.index_rule, len(times), n)]
        return sample_times(duration, n)


def _frame_times(path) -> np.ndarray | None:
    """The presentation times of the clip's frames from its first, from the demuxer alone (``frames.packet_index``:
    the frames a full decode returns); None for a stream whose packets carry no timestamps."""
    with _open(path) as container:
        index = packet_index(container, container.streams.video[0])
    return None if index is None else index.times - index.times[0]


def _output_size(path, width: int, height: int, n_frames: int, max_side: int | None, min_pixels: int | None,
                 max_pixels: int | None, size_factor: int, total_pixels: int | None,
                 frame_factor: int) -> tuple[int, int]:
    """(width, height) of the frames returned: by the pixel budget where ``max_pixels`` is given, else by
    ``max_side``."""
    if max_pixels is None:
        return _resize_to(max_side, width, height)
    low = min_pixels if min_pixels is not None else size_factor * size_factor
    try:
        budget = sampling.frame_pixel_budget(low, max_pixels, total_pixels, n_frames, frame_factor)
        h, w = sampling.pixel_size(height, width, size_factor, low, budget)
    except sampling.SamplingError as exc:
        raise MediaError(f"{path}: {exc}") from None
    return w, h


def _timed(frames, rate: float):
    """(presentation time in s, frame); a frame without a timestamp (raw streams) is placed at index / rate."""
    for i, frame in enumerate(frames):
        yield (float(frame.pts * frame.time_base) if frame.pts is not None else i / rate), frame


class _ToRGB:
    """A picked frame as RGB at the output size, converted when it is picked: a decode then holds its sampled frames
    at that size, not at the stored one (128 picked 1080p frames held until the end were ~400 MB of YUV, 768 at 2 fps
    would be 2.4 GB). One reformatter (one scaler context) for every frame of the clip: ``to_ndarray(width=...)``
    builds a new one per frame, ~2/3 of the conversion's time at 8 small frames; the pixels are the same. A frame
    picked for several bins (always consecutive ones: the sampled times increase) is converted once."""

    def __init__(self, width: int, height: int):
        from av.video.reformatter import VideoReformatter

        self.width, self.height, self.scaler = width, height, VideoReformatter()
        self.last = self.array = None  # the last frame converted (held, so it is not mistaken for a new one)

    def __call__(self, frame) -> np.ndarray:
        if frame is not self.last:
            self.array = self.scaler.reformat(frame, width=self.width, height=self.height,
                                              format="rgb24").to_ndarray()
            self.last = frame
        return self.array


def _stream_pick(path, timed, duration: float, targets: np.ndarray, keep=lambda frame: frame) -> tuple[list, int]:
    """One pass over the decoded frames keeping only the frame on screen at each sampled time (``targets``, s from
    the first frame, increasing), as ``keep(frame)`` (decode_video's: the frame converted to RGB); stops early once
    the last is passed. Raises MediaError when the stream ends far short of ``duration``."""
    num_frames = len(targets)
    picked, prev, start, n, t, gap = [], None, None, 0, 0.0, 0.0
    for when, frame in timed:
        t, last = when, t
        start, gap = (t, 0.0) if start is None else (start, t - last)
        n += 1
        while len(picked) < num_frames and t - start > targets[len(picked)] + 1e-9:
            picked.append(keep(prev if prev is not None else frame))
        if len(picked) == num_frames:
            return picked, n
        prev = frame
    if prev is None:
        raise MediaError(f"{path}: no decodable video frames")
    if duration - (t - start + gap) > allowed_shortfall(duration):
        raise MediaError(f"{path}: truncated video: frames end at {t - start:.2f} s of a declared {duration:.2f} s")
    picked.extend([keep(prev)] * (num_frames - len(picked)))
    return picked, n


def decode_audio(path: str | Path, sample_rate: int = AUDIO_SAMPLE_RATE,
                 max_audio_seconds: float | None = None) -> DecodedMedia:
    """Mono float32 in [-1, 1] at ``sample_rate`` Hz (PyAV's resampler), from an audio file or the audio stream of a
    video, trimmed to the stream's declared duration, and to its first ``max_audio_seconds`` where given (for a
    model that takes no more: the decode stops there, and a file cut short is refused only where it ends before
    that)."""
    import av

    container = _open(path)
    try:
        if not container.streams.audio:
            raise MediaError(f"{path}: no audio stream")
        stream = container.streams.audio[0]
        declared = float(stream.duration * stream.time_base) if stream.duration else _tag_seconds(stream)
        wav = wav_declared(path)
        if wav is not None:  # FFmpeg's WAV duration is estimated from the bytes present: the header's is declared
            declared = wav[0]
        resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
        wanted = math.ceil(max_audio_seconds * sample_rate) if max_audio_seconds else None
        chunks, have = [], 0
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
                have += len(chunks[-1])
            if wanted is not None and have >= wanted:
                break
        chunks.extend(out.to_ndarray().reshape(-1) for out in resampler.resample(None))
    except av.error.FFmpegError as exc:
        raise MediaError(f"{path}: audio decoding failed: {exc}") from None
    finally:
        container.close()
    if not chunks:
        raise MediaError(f"{path}: no decodable audio samples")
    if max_audio_seconds and declared:
        declared = min(declared, max_audio_seconds)
    data = _trim(path, np.concatenate(chunks).astype(np.float32, copy=False), declared, sample_rate)
    if max_audio_seconds:
        data = data[:round(max_audio_seconds * sample_rate)]
    return DecodedMedia("audio", data, content_hash="", path=str(path), sample_rate=sample_rate,
                        meta={"duration": len(data) / sample_rate})


def _trim(path, data: np.ndarray, declared: float | None, sample_rate: int) -> np.ndarray:
    if not declared:
        return data
    n = round(declared * sample_rate)
    if declared - len(data) / sample_rate > allowed_shortfall(declared):
        raise MediaError(f"{path}: truncated audio: {len(data) / sample_rate:.2f} s of a declared {declared:.2f} s")
    return data[:n]


def decode_image(path: str | Path) -> DecodedMedia:
    """RGB uint8 (H, W, 3) of the first frame of an image file (PNG, JPEG, ...)."""
    import av

    container = _open(path)
    try:
        frame = next(container.decode(video=0))
        data = frame.to_ndarray(format="rgb24")
    except (av.error.FFmpegError, StopIteration, IndexError) as exc:
        raise MediaError(f"{path}: image decoding failed: {exc or 'no frame'}") from None
    finally:
        container.close()
    return DecodedMedia("image", data, content_hash="", path=str(path))


def decode_image_or_views(path: str | Path) -> DecodedMedia:
    """An image file, or a point cloud file (``.npy`` / ``.ply``) rendered to its tiled fixed views: how models
    without 3D input are shown a point cloud (the ``contrastive`` protocol's ``pointcloud: views``)."""
    return decode_pointcloud_views(path) if is_pointcloud_file(path) else decode_image(path)


DECODERS = {"video": decode_video, "audio": decode_audio, "image": decode_image_or_views,
            "pointcloud": decode_pointcloud}


def decode_media(path: str | Path, modality: str, **params) -> DecodedMedia:
    """Dispatch on modality; the result carries ``content_hash(path, modality=..., **params)``, the same key the
    pipeline computes before decoding."""
    if modality not in DECODERS:
        raise MediaError(f"{path}: no decoder for modality {modality!r}")
    decoded = DECODERS[modality](path, **params)
    key = content_hash(path, modality=modality, **params)
    return DecodedMedia(decoded.modality, decoded.data, key, decoded.path, decoded.fps, decoded.sample_rate,
                        decoded.meta)


_PROBED: set[tuple] = set()


def probe_media(path: str | Path, modality: str) -> None:
    """Cheap pre-flight check: the container opens and has a stream of that kind whose first frame decodes, and a
    WAV or MP4 holds the data its header or index declares (``wav_declared``, ``mp4_index``: no decoding needed). Any
other file (a Matroska/WebM, a fragmented MP4) cut short after
    its first frames passes here; the full decode reports it (``truncated ...``) for its instances only, which
    become errored predictions (``media decode failed``, counted in ``error_rate``).

    A file that passed is not probed again in this process while it is unchanged (``file_state``): every run checks
    the whole benchmark's media, and a sweep or a driver running several runs would otherwise open every file again
    for each (a third of a second for the bench's 336 clips). A failure is never remembered."""
    state = file_state(path)
    memo = (str(path), modality, state)
    if state is not None and memo in _PROBED:
        return
    _probe(path, modality)
    if state is not None:
        _PROBED.add(memo)


def _probe(path: str | Path, modality: str) -> None:
    import av

    if is_pointcloud_file(path) and modality in ("image", "pointcloud"):
        probe_pointcloud(path)
        return
    kind = {"video": "video", "image": "video", "audio": "audio"}.get(modality)
    container = _open(path)
    try:
        if kind is None:
            return
        streams = getattr(container.streams, kind)
        if not streams:
            raise MediaError(f"{path}: no {kind} stream")
        next(container.decode(streams[0]))
        if kind == "audio":
            _check_wav_bytes(path)
    except av.error.FFmpegError as exc:
        raise MediaError(f"{path}: not a decodable {modality} file: {exc}") from None
    except StopIteration:
        raise MediaError(f"{path}: no decodable {modality} frame") from None
    finally:
        container.close()


# -- the ffmpeg-python path (ffprobe + one ffmpeg process per clip), for the benchmark's comparison ---------------

def _ffmpeg_run(path, stream) -> bytes:
    import ffmpeg

    try:
        out, _ = stream.run(capture_stdout=True, capture_stderr=True)
    except ffmpeg.Error as exc:
        raise MediaError(f"{path}: ffmpeg failed: {exc.stderr.decode(errors='replace')[-300:]}") from None
    return out


def _ffprobe(path, selector: str) -> tuple[dict, float | None]:
    import ffmpeg

    if not Path(path).is_file():
        raise MediaError(f"{path}: file does not exist")
    try:
        info = ffmpeg.probe(str(path), select_streams=selector)
    except ffmpeg.Error as exc:
        raise MediaError(f"{path}: ffprobe failed: {exc.stderr.decode(errors='replace')[-300:]}") from None
    if not info.get("streams"):
        raise MediaError(f"{path}: no {selector} stream")
    container = info.get("format", {}).get("duration")
    return info["streams"][0], float(container) if container else None


def decode_video_ffmpeg(path: str | Path, num_frames: int = 8) -> np.ndarray:
    """Same frames as ``decode_video`` for constant-frame-rate clips: the header duration and rate from ``ffprobe``
    give the frame indexes, and ffmpeg's ``select`` filter writes only those frames as raw RGB to a pipe."""
    import ffmpeg

    info, container_s = _ffprobe(path, "v:0")
    width, height = int(info["width"]), int(info["height"])
    num, den = (int(x) for x in info.get("avg_frame_rate", "0/1").split("/"))
    rate = num / den if num and den else None
    nb = int(info["nb_frames"]) if info.get("nb_frames", "").isdigit() else None
    duration = _header_duration(float(info["duration"]) if info.get("duration") else None, nb, rate, container_s)
    if duration is None or rate is None:
        raise MediaError(f"{path}: no duration or frame rate in the header")
    wanted = np.floor(sample_times(duration, num_frames) * rate + 1e-9).astype(int)
    if nb:
        wanted = np.clip(wanted, 0, nb - 1)
    unique = sorted(set(wanted.tolist()))
    expr = "+".join(f"eq(n,{i})" for i in unique)
    out = _ffmpeg_run(path, ffmpeg.input(str(path)).filter("select", expr)
                      .output("pipe:", format="rawvideo", pix_fmt="rgb24", vsync="passthrough"))
    frames = np.frombuffer(out, np.uint8).reshape(-1, height, width, 3)
    if len(frames) != len(unique):
        raise MediaError(f"{path}: ffmpeg returned {len(frames)} of {len(unique)} selected frames (truncated?)")
    return frames[[unique.index(i) for i in wanted]]


def decode_audio_ffmpeg(path: str | Path, sample_rate: int = AUDIO_SAMPLE_RATE) -> np.ndarray:
    """Same samples as ``decode_audio`` (up to resampler differences) through ffprobe + an ffmpeg f32le pipe."""
    import ffmpeg

    info, _ = _ffprobe(path, "a:0")
    declared = float(info["duration"]) if info.get("duration") else None
    out = _ffmpeg_run(path, ffmpeg.input(str(path)).output("pipe:", format="f32le", ac=1, ar=sample_rate))
    return _trim(path, np.frombuffer(out, np.float32).copy(), declared, sample_rate)
