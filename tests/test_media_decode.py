"""Decoding real files made by ffmpeg: shapes, the sampling rule, both decoders agree, bad files raise MediaError."""

from __future__ import annotations

import numpy as np
import pytest

from omnieval.media import decode
from omnieval.media.synth import beep_audio, moving_box_video


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("clips")
    return {"video": moving_box_video(d / "v.mp4", colour="red", speed=100, duration=2.0, fps=8),
            "audio": beep_audio(d / "a.wav", frequency=500, beeps=2, duration=2.0, sample_rate=22050),
            "dir": d}


def _box_x(frame: np.ndarray) -> float:
    red = (frame[..., 0] > 150) & (frame[..., 1] < 100)
    return float(np.nonzero(red)[1].mean())


def test_video_frames_shape_and_uniform_sampling(clips):
    out = decode.decode_video(clips["video"], num_frames=4)
    assert out.data.shape == (4, 240, 320, 3) and out.data.dtype == np.uint8
    assert out.fps == pytest.approx(2.0) and out.meta["source_frames"] == 16
    # bins of 0.5 s, centres 0.25, 0.75, 1.25, 1.75 s -> source frames 2, 6, 10, 14 at 8 fps;
    # the box is at x = 10 + 100 t (left edge), box width 60 -> centre 40 + 100 t
    expected = [40 + 100 * (i / 8) for i in (2, 6, 10, 14)]
    got = [_box_x(f) for f in out.data]
    assert np.allclose(got, expected, atol=3), (got, expected)


def test_video_downscale_keeps_aspect(clips):
    out = decode.decode_video(clips["video"], num_frames=2, max_side=160)
    assert out.data.shape == (2, 120, 160, 3)


def test_audio_is_16k_mono_float_with_the_right_tone(clips):
    out = decode.decode_audio(clips["audio"])
    assert out.data.dtype == np.float32 and out.sample_rate == 16000
    assert abs(len(out.data) - 32000) <= 64
    spectrum = np.abs(np.fft.rfft(out.data))
    peak_hz = np.argmax(spectrum) * 16000 / len(out.data)
    assert abs(peak_hz - 500) < 5


def test_pyav_and_ffmpeg_python_agree(clips):
    a = decode.decode_video(clips["video"], num_frames=8).data
    b = decode.decode_video_ffmpeg(clips["video"], num_frames=8)
    assert a.shape == b.shape and np.abs(a.astype(int) - b.astype(int)).max() <= 2
    wa = decode.decode_audio(clips["audio"]).data
    wb = decode.decode_audio_ffmpeg(clips["audio"])
    n = min(len(wa), len(wb))
    assert abs(len(wa) - len(wb)) <= 64 and np.abs(wa[:n] - wb[:n]).max() < 0.02


def test_content_hash_depends_on_bytes_and_params(clips):
    h1 = decode.content_hash(clips["video"], num_frames=8)
    assert h1 == decode.content_hash(clips["video"], num_frames=8) != decode.content_hash(clips["video"], num_frames=4)
    assert decode.decode_media(clips["video"], "video", num_frames=8).content_hash == \
        decode.content_hash(clips["video"], modality="video", num_frames=8)


@pytest.mark.parametrize("content", [b"", b"not a video at all" * 50, "truncated"])
def test_bad_files_raise_media_error_naming_the_file(clips, content):
    bad = clips["dir"] / "bad.mp4"
    bad.write_bytes(clips["video"].read_bytes()[:300] if content == "truncated" else content)
    for fn in (lambda: decode.decode_video(bad), lambda: decode.probe_media(bad, "video"),
               lambda: decode.decode_audio(bad)):
        with pytest.raises(decode.MediaError, match="bad.mp4"):
            fn()
    with pytest.raises(decode.MediaError, match="does not exist"):
        decode.probe_media(clips["dir"] / "missing.mp4", "video")
