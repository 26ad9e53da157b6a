"""Decoding real files made by ffmpeg: shapes, the sampling rule, both decoders agree, bad files raise MediaError."""

from __future__ import annotations

import numpy as np
import pytest

from omnieval.media import decode
from omnieval.media.synth import beep_audio, counter_video, moving_box_video, mux_clip, still_image

STEP = 16  # brightness step per source frame of the counter clip


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    d = tmp_path_factory.mktemp("clips")
    wav = beep_audio(d / "a.wav", frequency=500, beeps=2, duration=2.0, sample_rate=22050)
    video = moving_box_video(d / "v.mp4", colour="red", speed=100, duration=2.0, fps=8)
    return {"video": video, "audio": wav, "dir": d,
            "counter": counter_video(d / "counter.mp4", frames=16, fps=8, step=STEP),
            "aac": beep_audio(d / "a.m4a", frequency=500, beeps=2, duration=2.0),
            "muxed": mux_clip(d / "av.mp4", video=video, audio=wav),
            "image": still_image(d / "i.png", colour="blue", size=(40, 30))}


def _source_index(frames: np.ndarray) -> list[int]:
    """Which counter-clip frame each decoded frame is (brightness n * STEP)."""
    return [round(float(f.mean()) / STEP) for f in frames]


@pytest.mark.parametrize("n", [1, 4, 7, 16, 20])
def test_frame_on_screen_at_each_bin_centre(clips, n):
    out = decode.decode_video(clips["counter"], num_frames=n)
    assert out.data.shape == (n, 48, 64, 3) and out.data.dtype == np.uint8
    assert out.fps == pytest.approx(n / 2.0) and out.meta["duration"] == pytest.approx(2.0)
    # 16 frames at 8 fps over 2 s: the frame on screen at centre c is floor(c * 8)
    expected = [int(np.floor((i + 0.5) * 2.0 / n * 8)) for i in range(n)]
    assert _source_index(out.data) == expected
    assert _source_index(decode.decode_video_ffmpeg(clips["counter"], num_frames=n)) == expected


@pytest.mark.parametrize("fmt", ["matroska", "h264"])
def test_other_containers_sample_the_same_frames(clips, fmt):
    """Matroska declares no stream duration (the container's is used); a raw H.264 stream has neither durations nor
    timestamps (frames are buffered and placed by index)."""
    import ffmpeg

    copy = clips["dir"] / f"counter.{fmt}"
    ffmpeg.input(str(clips["counter"])).output(str(copy), c="copy", f=fmt).overwrite_output().run(quiet=True)
    assert _source_index(decode.decode_video(copy, num_frames=4).data) == [2, 6, 10, 14]


def test_moving_box_is_sampled_uniformly_and_downscaled(clips):
    out = decode.decode_video(clips["video"], num_frames=4)
    red = [(f[..., 0] > 150) & (f[..., 1] < 100) for f in out.data]
    # centres 0.25, 0.75, 1.25, 1.75 s -> source frames 2, 6, 10, 14; box centre x = 40 + 100 t
    assert np.allclose([np.nonzero(r)[1].mean() for r in red], [40 + 100 * i / 8 for i in (2, 6, 10, 14)], atol=3)
    assert decode.decode_video(clips["video"], num_frames=2, max_side=160).data.shape == (2, 120, 160, 3)


def test_downscaled_frames_are_pyavs_own_conversion_of_each_frame(clips):
    """One scaler for the whole clip gives the pixels PyAV's per-frame ``to_ndarray(width=, height=)`` gives."""
    import av

    with av.open(str(clips["video"])) as container:
        frames = list(container.decode(video=0))
    want = np.stack([frames[i].to_ndarray(format="rgb24", width=32, height=24) for i in (2, 6, 10, 14)])
    got = decode.decode_video(clips["video"], num_frames=4, max_side=32).data
    assert got.shape == (4, 24, 32, 3) and np.array_equal(got, want)


def _peak_hz(wave: np.ndarray) -> float:
    return float(np.argmax(np.abs(np.fft.rfft(wave))) * 16000 / len(wave))


@pytest.mark.parametrize("name", ["audio", "aac", "muxed"])
def test_audio_is_16k_mono_float_of_the_declared_length(clips, name):
    out = decode.decode_audio(clips[name])
    assert out.data.dtype == np.float32 and out.data.ndim == 1 and out.sample_rate == 16000
    assert len(out.data) == 32000  # AAC's padding samples are trimmed to the declared 2 s
    assert np.abs(out.data).max() <= 1.0 and abs(_peak_hz(out.data) - 500) < 5


def test_pyav_and_ffmpeg_python_agree(clips):
    a = decode.decode_video(clips["video"], num_frames=8).data
    b = decode.decode_video_ffmpeg(clips["video"], num_frames=8)
    assert a.shape == b.shape and np.abs(a.astype(int) - b.astype(int)).max() <= 2
    for name in ("audio", "aac"):
        wa, wb = decode.decode_audio(clips[name]).data, decode.decode_audio_ffmpeg(clips[name])
        assert len(wa) == len(wb) and np.abs(wa - wb).max() < 0.02


def test_image_and_dispatch(clips):
    img = decode.decode_media(clips["image"], "image")
    assert img.data.shape == (30, 40, 3) and img.data.dtype == np.uint8 and img.data[..., 2].min() > 240
    video = decode.decode_media(clips["video"], "video", num_frames=8)
    assert video.content_hash == decode.content_hash(clips["video"], modality="video", num_frames=8)
    assert video.content_hash != decode.content_hash(clips["video"], modality="video", num_frames=4)
    with pytest.raises(decode.MediaError, match="no decoder"):
        decode.decode_media(clips["video"], "smell")
    with pytest.raises(decode.MediaError, match="not a point cloud file"):  # point clouds have a decoder now
        decode.decode_media(clips["video"], "pointcloud")
    with pytest.raises(decode.MediaError, match="no video stream"):
        decode.probe_media(clips["audio"], "video")
    decode.probe_media(clips["muxed"], "audio")
    decode.probe_media(clips["image"], "image")


@pytest.mark.parametrize("content", [b"", b"not a video at all" * 50, "head", "tail"])
def test_bad_files_raise_media_error_naming_the_file(clips, content):
    good = clips["video"].read_bytes()
    bad = clips["dir"] / "bad.mp4"
    cut = {"head": good[:300], "tail": good[: len(good) * 6 // 10]}
    bad.write_bytes(cut.get(content, content))
    checks = [decode.decode_video, decode.decode_video_ffmpeg, decode.decode_audio]
    if content != "tail":  # the probe reads the header and the first frame only
        checks.append(lambda p: decode.probe_media(p, "video"))
    for fn in checks:
        with pytest.raises(decode.MediaError, match="bad.mp4"):
            fn(bad)
    for fn in (decode.decode_video, lambda p: decode.probe_media(p, "video")):
        with pytest.raises(decode.MediaError, match="missing.mp4: file does not exist"):
            fn(clips["dir"] / "missing.mp4")
