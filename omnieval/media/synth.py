"""Deterministic media synthesis with ffmpeg-python filter graphs (system ``ffmpeg`` required).

Same arguments -> same bytes: bit-exact flags, metadata stripped, one encoder thread. Used by the built-in
synthetic benchmarks and by tests that need real media files.
"""

from __future__ import annotations

from pathlib import Path

_BITEXACT = {"fflags": "+bitexact", "flags:v": "+bitexact", "flags:a": "+bitexact", "map_metadata": -1}


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
    out = ffmpeg.output(v, str(path), vcodec="libx264", pix_fmt="yuv420p", preset="veryfast", crf=28,
                        threads=1, **{"x264-params": "threads=1"}, movflags="+faststart", **_BITEXACT)
    return _run(out, Path(path))


def beep_audio(path: str | Path, *, frequency: float, beeps: int, duration: float = 2.0,
               sample_rate: int = 22_050) -> Path:
    """``beeps`` evenly spaced tone bursts at ``frequency`` Hz (PCM WAV at ``sample_rate``, resampled on decode)."""
    import ffmpeg

    period = duration / beeps
    src = ffmpeg.input(f"sine=frequency={frequency}:sample_rate={sample_rate}:duration={duration}", f="lavfi")
    gated = src.filter("volume", volume=f"if(lt(mod(t,{period:.6f}),{period * 0.6:.6f}),0.8,0)", eval="frame")
    out = ffmpeg.output(gated, str(path), acodec="pcm_s16le", ac=1, **_BITEXACT)
    return _run(out, Path(path))


def still_image(path: str | Path, *, colour: str, size: tuple[int, int] = (160, 120)) -> Path:
    """A single-colour PNG."""
    import ffmpeg

    src = ffmpeg.input(f"color=c={colour}:s={size[0]}x{size[1]}:d=1:r=1", f="lavfi")
    out = ffmpeg.output(src, str(path), vframes=1, **_BITEXACT)
    return _run(out, Path(path))
