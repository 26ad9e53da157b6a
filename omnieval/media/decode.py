"""Decode media files into the arrays engines take (``DecodedMedia``).

PyAV (FFmpeg's libraries in-process) is the hot path: measured here ~10x faster than spawning an ``ffmpeg``
process per clip, which is what the ``*_ffmpeg`` functions do (kept for the pipeline benchmark's comparison).

Frame sampling rule (both decoders): the clip's duration is cut into N equal time bins and the frame shown at the
centre of each bin is taken (the last frame whose presentation time is <= the centre). Every bad file raises
``MediaError`` naming the file, never a raw library exception.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from omnieval.media.decoded import AUDIO_SAMPLE_RATE, DecodedMedia


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


def _open(path: str | Path):
    import av

    try:
        return av.open(str(path))
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
    if not max_side or max(width, height) <= max_side:
        return width, height
    scale = max_side / max(width, height)
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


def decode_video(path: str | Path, num_frames: int = 8, max_side: int | None = None) -> DecodedMedia:
    """``num_frames`` RGB uint8 frames (T, H, W, 3) sampled uniformly (see module doc), longer side <= max_side."""
    import av

    container = _open(path)
    try:
        if not container.streams.video:
            raise MediaError(f"{path}: no video stream")
        stream = container.streams.video[0]
        width, height = _resize_to(max_side, stream.codec_context.width, stream.codec_context.height)
        frames, times = [], []
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            times.append(float(frame.pts * frame.time_base))
            frames.append(frame.to_ndarray(format="rgb24", width=width, height=height))
    except av.error.FFmpegError as exc:
        raise MediaError(f"{path}: video decoding failed: {exc}") from None
    finally:
        container.close()
    if not frames:
        raise MediaError(f"{path}: no decodable video frames")
    times_arr = np.asarray(times) - times[0]
    order = np.argsort(times_arr, kind="stable")
    times_arr = times_arr[order]
    step = float(np.median(np.diff(times_arr))) if len(times_arr) > 1 else 1.0
    duration = float(times_arr[-1] + step)
    picked = _pick(times_arr, sample_times(duration, num_frames))
    data = np.stack([frames[order[i]] for i in picked])
    return DecodedMedia("video", data, content_hash="", path=str(path), fps=num_frames / duration,
                        meta={"duration": duration, "source_frames": len(frames)})


def decode_audio(path: str | Path, sample_rate: int = AUDIO_SAMPLE_RATE) -> DecodedMedia:
    """Mono float32 in [-1, 1] at ``sample_rate`` Hz, from an audio file or the audio stream of a video."""
    import av

    container = _open(path)
    try:
        if not container.streams.audio:
            raise MediaError(f"{path}: no audio stream")
        resampler = av.AudioResampler(format="flt", layout="mono", rate=sample_rate)
        chunks = []
        for frame in container.decode(container.streams.audio[0]):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray().reshape(-1))
    except av.error.FFmpegError as exc:
        raise MediaError(f"{path}: audio decoding failed: {exc}") from None
    finally:
        container.close()
    if not chunks:
        raise MediaError(f"{path}: no decodable audio samples")
    data = np.concatenate(chunks).astype(np.float32)
    return DecodedMedia("audio", data, content_hash="", path=str(path), sample_rate=sample_rate,
                        meta={"duration": len(data) / sample_rate})


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


def decode_media(path: str | Path, modality: str, **params) -> DecodedMedia:
    """Dispatch on modality; the result carries the content hash of file + parameters."""
    decoders = {"video": decode_video, "audio": decode_audio, "image": decode_image}
    if modality not in decoders:
        raise MediaError(f"{path}: no decoder for modality {modality!r}")
    decoded = decoders[modality](path, **params)
    key = content_hash(path, modality=modality, **params)
    return DecodedMedia(decoded.modality, decoded.data, key, decoded.path, decoded.fps, decoded.sample_rate,
                        decoded.meta)


def probe_media(path: str | Path, modality: str) -> None:
    """Cheap pre-flight check: the container opens and has a stream of that kind with a first decodable frame."""
    import av

    if not Path(path).is_file():
        raise MediaError(f"{path}: file does not exist")
    container = _open(path)
    try:
        kind = {"video": "video", "image": "video", "audio": "audio"}.get(modality)
        if kind is None:
            return
        streams = getattr(container.streams, kind)
        if not streams:
            raise MediaError(f"{path}: no {kind} stream")
        next(container.decode(streams[0]))
    except av.error.FFmpegError as exc:
        raise MediaError(f"{path}: not a decodable {modality} file: {exc}") from None
    except StopIteration:
        raise MediaError(f"{path}: no decodable {modality} frame") from None
    finally:
        container.close()


# -- the ffmpeg-python path (one ffmpeg process per clip), for the benchmark's comparison --------------------------

def decode_video_ffmpeg(path: str | Path, num_frames: int = 8) -> np.ndarray:
    """Same sampling rule as ``decode_video`` for constant-frame-rate clips, through ``ffprobe`` (size, rate) and one
    ``ffmpeg`` subprocess writing raw RGB frames to a pipe."""
    import ffmpeg

    try:
        stream = ffmpeg.probe(str(path), select_streams="v:0")["streams"][0]
        width, height = stream["width"], stream["height"]
        num, den = (int(x) for x in stream["r_frame_rate"].split("/"))
        out, _ = (ffmpeg.input(str(path)).output("pipe:", format="rawvideo", pix_fmt="rgb24")
                  .run(capture_stdout=True, capture_stderr=True))
    except ffmpeg.Error as exc:
        raise MediaError(f"{path}: ffmpeg failed: {exc.stderr.decode(errors='replace')[-300:]}") from None
    frames = np.frombuffer(out, np.uint8).reshape(-1, height, width, 3)
    times = np.arange(len(frames)) * den / num
    duration = len(frames) * den / num
    return frames[_pick(times, sample_times(duration, num_frames))]


def decode_audio_ffmpeg(path: str | Path, sample_rate: int = AUDIO_SAMPLE_RATE) -> np.ndarray:
    import ffmpeg

    try:
        out, _ = (ffmpeg.input(str(path)).output("pipe:", format="f32le", ac=1, ar=sample_rate)
                  .run(capture_stdout=True, capture_stderr=True))
    except ffmpeg.Error as exc:
        raise MediaError(f"{path}: ffmpeg failed: {exc.stderr.decode(errors='replace')[-300:]}") from None
    return np.frombuffer(out, np.float32).copy()
