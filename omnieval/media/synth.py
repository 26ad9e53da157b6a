"""Deterministic media synthesis with ffmpeg-python filter graphs (system ``ffmpeg`` required; ``espeak-ng`` optional).

Same arguments -> same bytes: bit-exact flags, metadata stripped, one encoder thread (verified by the synthetic
benchmark's determinism test). Used by the built-in synthetic benchmark and by tests that need real media files.
No ``drawtext``: it needs a font file, and these clips only need boxes, colours and tones, so no font package is
required. ffmpeg-python escapes commas in filter arguments itself; they are written here unescaped.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

_BITEXACT = {"fflags": "+bitexact", "flags:v": "+bitexact", "flags:a": "+bitexact", "map_metadata": -1}
_H264 = {"vcodec": "libx264", "pix_fmt": "yuv420p", "preset": "veryfast", "threads": 1, "x264-params": "threads=1",
         "movflags": "+faststart"}


def _run(stream, path: Path) -> Path:
    import ffmpeg

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        stream.overwrite_output().run(capture_stdout=True, capture_stderr=True)
    except ffmpeg.Error as exc:
        raise RuntimeError(f"ffmpeg could not write {path}: {exc.stderr.decode(errors='replace')[-500:]}") from None
    return path


def moving_box_video(path: str | Path, *, colour: str, background: str = "black", box: int = 60,
                     speed: float = 60.0, y: int = 90, size: tuple[int, int] = (320, 240), duration: float = 2.0,
                     fps: int = 8, stripes: int = 0) -> Path:
    """A ``colour`` box of ``box`` pixels sliding right at ``speed`` px/s over ``background``; ``stripes`` > 0 adds
    that many thin white horizontal bars inside the box (a second visual attribute). H.264 in MP4."""
    import ffmpeg

    w, h = size
    canvas = ffmpeg.input(f"color=c={background}:s={w}x{h}:d={duration}:r={fps}", f="lavfi")
    sprite = ffmpeg.input(f"color=c={colour}:s={box}x{box}:d={duration}:r={fps}", f="lavfi")
    for i in range(stripes):
        sprite = sprite.filter("drawbox", x=0, y=(i + 1) * box // (stripes + 1), w=box, h=3, color="white",
                               t="fill")
    # overlay evaluates its position per frame (eval=frame), so the box really moves
    v = ffmpeg.overlay(canvas, sprite, x=f"mod(10+{speed}*t,{w - box})", y=y, eval="frame", shortest=1)
    out = ffmpeg.output(v, str(path), crf=28, **_H264, **_BITEXACT)
    return _run(out, Path(path))


def counter_video(path: str | Path, *, frames: int = 16, fps: int = 8, step: int = 8,
                  size: tuple[int, int] = (64, 48)) -> Path:
    """A grey clip whose frame n has brightness ``n * step``, encoded losslessly (x264 qp 0): a test can read back
    which source frame a decoder picked (``round(mean / step)``)."""
    import ffmpeg

    src = ffmpeg.input(f"color=c=black:s={size[0]}x{size[1]}:d={frames / fps}:r={fps}", f="lavfi")
    v = src.filter("format", "gray").filter("geq", lum=f"N*{step}").filter("format", "yuv420p")
    out = ffmpeg.output(v, str(path), qp=0, **_H264, **_BITEXACT)
    return _run(out, Path(path))


def beep_audio(path: str | Path, *, frequency: float, beeps: int, duration: float = 2.0,
               sample_rate: int = 22_050) -> Path:
    """``beeps`` evenly spaced tone bursts at ``frequency`` Hz (a rhythm and a pitch: two audible attributes).
    PCM WAV at ``sample_rate`` (resampled on decode), AAC when ``path`` ends in .m4a/.mp4, FLAC for .flac."""
    import ffmpeg

    period = duration / beeps
    src = ffmpeg.input(f"sine=frequency={frequency}:sample_rate={sample_rate}:duration={duration}", f="lavfi")
    gated = src.filter("volume", volume=f"if(lt(mod(t,{period:.6f}),{period * 0.6:.6f}),0.8,0)", eval="frame")
    codec = {".m4a": "aac", ".mp4": "aac", ".flac": "flac"}.get(Path(path).suffix, "pcm_s16le")
    out = ffmpeg.output(gated, str(path), acodec=codec, ac=1, **_BITEXACT)
    return _run(out, Path(path))


def has_speech() -> bool:
    """Whether ``espeak-ng`` is installed (speech is optional; callers fall back to tones)."""
    return shutil.which("espeak-ng") is not None


def spoken_call(path: str | Path, *, word: str, frequency: float, beeps: int, duration: float = 3.0,
                sample_rate: int = 22_050) -> Path:
    """A 1 s tone pattern (``beeps`` bursts at ``frequency`` Hz) followed by ``word`` spoken by espeak-ng, padded or
    cut to ``duration`` seconds. PCM WAV. espeak-ng output is deterministic for a given espeak-ng version."""
    import ffmpeg

    if not has_speech():
        raise RuntimeError("espeak-ng is not installed (apt-get install espeak-ng)")
    with tempfile.TemporaryDirectory() as tmp:
        tones, speech = Path(tmp) / "tones.wav", Path(tmp) / "speech.wav"
        beep_audio(tones, frequency=frequency, beeps=beeps, duration=1.0, sample_rate=sample_rate)
        subprocess.run(["espeak-ng", "-v", "en", "-s", "140", "-w", str(speech), word], check=True,
                       capture_output=True)
        voice = ffmpeg.input(str(speech)).filter("aresample", sample_rate)
        joined = ffmpeg.concat(ffmpeg.input(str(tones)), voice, v=0, a=1)
        padded = joined.filter("apad", whole_dur=duration).filter("atrim", duration=duration)
        return _run(ffmpeg.output(padded, str(path), acodec="pcm_s16le", ac=1, **_BITEXACT), Path(path))


def mux_clip(path: str | Path, *, video: str | Path, audio: str | Path) -> Path:
    """An MP4 with ``video``'s stream copied and ``audio`` encoded as AAC: a video file that also carries sound."""
    import ffmpeg

    v, a = ffmpeg.input(str(video)).video, ffmpeg.input(str(audio)).audio
    out = ffmpeg.output(v, a, str(path), vcodec="copy", acodec="aac", ac=1, movflags="+faststart", **_BITEXACT)
    return _run(out, Path(path))


def still_image(path: str | Path, *, colour: str, size: tuple[int, int] = (160, 120)) -> Path:
    """A single-colour image (format from the suffix: PNG, JPEG, ...)."""
    import ffmpeg

    src = ffmpeg.input(f"color=c={colour}:s={size[0]}x{size[1]}:d=1:r=1", f="lavfi")
    out = ffmpeg.output(src, str(path), vframes=1, **_BITEXACT)
    return _run(out, Path(path))
