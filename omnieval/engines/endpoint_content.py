"""A prompt's parts as one OpenAI chat message: text, and media as content parts (pure functions, no network).

* Text parts are merged into one text part where they meet (the in-process engines' chat templates concatenate
  them; a server whose template takes a string would otherwise join them with newlines). A message with no media is
  sent as a plain string, which every OpenAI-compatible server accepts.
* ``image``: ``{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}``, the decoded RGB array
  as a lossless PNG.
* ``audio``: ``{"type": "input_audio", "input_audio": {"data": <base64 WAV>, "format": "wav"}}``, the decoded
  waveform as mono 16-bit PCM at its sample rate.
* ``video`` (``video: mp4``, the default): ``{"type": "video_url", "video_url": {"url": "data:video/mp4;base64,..."}}``,
  the decoded frames (the run's sampled frames, at the sampled fps) encoded as H.264 MP4; vLLM and most
  OpenAI-compatible servers of video models take it. ``video: frames`` sends each frame as an ``image_url`` part
  instead, for servers that take images only.
* A modality the served model does not take (not in the engine's ``modalities``; point clouds always) becomes the
  same one-line text note the in-process engines give a text model, so a text model behind an endpoint sees what it
  sees in-process. With ``modalities`` left at its default, media are sent, and a server whose model cannot take
  them refuses the request: an errored row, never an answer.
"""

from __future__ import annotations

import base64
import io
import struct
import wave
import zlib
from collections.abc import Sequence

import numpy as np

from omnieval.core.prompts import TEXT_ONLY_NOTE, UNSUPPORTED_NOTE, PromptPart

SENT_MODALITIES = ("image", "audio", "video")
VIDEO_FORMATS = ("mp4", "frames")


def user_content(parts: Sequence[PromptPart], media: dict, *, modalities: Sequence[str] = SENT_MODALITIES,
                 video: str = "mp4") -> str | list[dict]:
    """The ``content`` of the user message for a prompt's parts; media looked up by path in ``media``."""
    content: list[dict] = []

    def text(value: str) -> None:
        if content and content[-1]["type"] == "text":
            content[-1] = {"type": "text", "text": content[-1]["text"] + value}
        else:
            content.append({"type": "text", "text": value})

    for part in parts:
        if part.kind == "text":
            text(part.text or "")
        elif part.modality in modalities and part.modality in SENT_MODALITIES:
            if part.ref not in media or media[part.ref] is None:
                raise ValueError(f"media not decoded for this request: {part.ref}")
            content.extend(media_parts(media[part.ref], video))
        else:
            note = TEXT_ONLY_NOTE if not modalities else UNSUPPORTED_NOTE
            text(note.format(modality=part.modality) + "\n")
    if all(c["type"] == "text" for c in content):
        return "".join(c["text"] for c in content)
    return content


def media_parts(item, video: str = "mp4") -> list[dict]:
    """The content parts of one decoded media item (``DecodedMedia``)."""
    if item.modality == "image":
        return [image_part(item.data)]
    if item.modality == "audio":
        return [{"type": "input_audio", "input_audio": {"data": wav_base64(item.data, item.sample_rate or 16000),
                                                        "format": "wav"}}]
    if item.modality == "video":
        if video == "frames":
            return [image_part(frame) for frame in item.data]
        url = "data:video/mp4;base64," + base64.b64encode(mp4_bytes(item.data, item.fps or 2.0)).decode()
        return [{"type": "video_url", "video_url": {"url": url}}]
    raise ValueError(f"no OpenAI content part for modality {item.modality!r}")


def image_part(array: np.ndarray) -> dict:
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(
        png_bytes(array)).decode()}}


def png_bytes(array: np.ndarray) -> bytes:
    """A uint8 (H, W, 3) RGB array as PNG (8-bit truecolour, no filter): lossless, standard library only."""
    rgb = np.ascontiguousarray(array, dtype=np.uint8)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"an image must be (H, W, 3) RGB, got shape {rgb.shape}")
    height, width = rgb.shape[:2]
    rows = np.concatenate([np.zeros((height, 1), np.uint8), rgb.reshape(height, width * 3)], axis=1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
            + chunk(b"IEND", b""))


def wav_base64(waveform: np.ndarray, rate: int) -> str:
    """A float waveform in [-1, 1] as base64 of a mono 16-bit PCM WAV file (values outside are clipped)."""
    pcm = np.round(np.clip(np.asarray(waveform, dtype=np.float64), -1.0, 1.0) * 32767).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(int(rate))
        out.writeframes(pcm.tobytes())
    return base64.b64encode(buffer.getvalue()).decode()


def mp4_bytes(frames: np.ndarray, fps: float) -> bytes:
    """Decoded frames (T, H, W, 3) as an H.264 MP4 at ``fps`` (odd sides padded by one edge pixel: yuv420p)."""
    import av

    frames = np.asarray(frames, dtype=np.uint8)
    if frames.ndim != 4 or frames.shape[3] != 3 or not len(frames):
        raise ValueError(f"a video must be (T, H, W, 3) RGB with T >= 1, got shape {frames.shape}")
    pad_h, pad_w = frames.shape[1] % 2, frames.shape[2] % 2
    if pad_h or pad_w:
        frames = np.pad(frames, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)), mode="edge")
    from fractions import Fraction

    rate = Fraction(float(fps)).limit_denominator(1000)
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        stream.options = {"crf": "18", "preset": "veryfast"}
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buffer.getvalue()
