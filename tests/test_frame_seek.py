"""Seeking to the sampled frames (``media.frames``) picks the frames a full decode picks, pixel for pixel.

Every clip is made here by the ``ffmpeg`` command line (small: 96x64, 25 fps, a keyframe every 12 frames, so the
seeks are exercised), once per test session. Two references: the full decode (``decode_video(strategy="full")``,
which decodes every frame up to the last one sampled), and for which frame is on screen, the frame times ``ffprobe``
reports for a decode of its own, with the rule computed here in numpy.
"""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from omnieval.media import decode, frames

SIZE, RATE, GOP = "96x64", 25, 12
COUNTS = (1, 3, 8, 24, 200)  # sparse (one frame: a seek), a few per clip, denser than a GOP, more than all frames


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", *args], check=True, timeout=300)


def encoders() -> str:
    return subprocess.run(["ffmpeg", "-hide_banner", "-encoders"], capture_output=True, text=True).stdout


def source(seconds: float = 4.0) -> list[str]:
    return ["-f", "lavfi", "-i", f"testsrc2=s={SIZE}:r={RATE}:d={seconds}", "-pix_fmt", "yuv420p"]


def encode(out: Path, codec: list[str], seconds: float = 4.0) -> Path:
    ffmpeg(*source(seconds), *codec, str(out))
    return out


def copy(src: Path, out: Path, *before: str, after: tuple[str, ...] = ()) -> Path:
    ffmpeg(*before, "-i", str(src), "-c", "copy", *after, str(out))
    return out


def with_media_duration(src: Path, out: Path, factor: float) -> Path:
    """A copy of an MP4 whose video track header (``mdhd``, version 0) declares ``factor`` times its duration."""
    data = bytearray(src.read_bytes())
    at = data.index(b"mdhd") + 4
    assert data[at] == 0, "a version-1 mdhd (64-bit durations)"
    (duration,) = struct.unpack(">I", data[at + 16:at + 20])
    data[at + 16:at + 20] = struct.pack(">I", int(duration * factor))
    out.write_bytes(bytes(data))
    return out


@pytest.fixture(scope="session")
def seek_clips(tmp_path_factory) -> dict[str, Path]:
    import av

    d = tmp_path_factory.mktemp("seek-clips")
    x264 = ["-c:v", "libx264", "-g", str(GOP), "-bf", "3", "-x264-params", "open-gop=1:threads=1"]
    x265 = ["-c:v", "libx265", "-x265-params", f"keyint={GOP}:min-keyint={GOP}:open-gop=1:pools=1:log-level=error"]
    vp9 = ["-c:v", "libvpx-vp9", "-g", str(GOP), "-deadline", "realtime", "-cpu-used", "8"]
    clips = {"h264.mp4": encode(d / "h264.mp4", [*x264, "-movflags", "+faststart"])}
    h264 = clips["h264.mp4"]
    clips["h264.mkv"] = copy(h264, d / "h264.mkv")
    clips["h264.mov"] = copy(h264, d / "h264.mov")
    clips["hevc.mp4"] = encode(d / "hevc.mp4", [*x265, "-tag:v", "hvc1"])
    clips["hevc.mkv"] = copy(clips["hevc.mp4"], d / "hevc.mkv")
    clips["vp9.webm"] = encode(d / "vp9.webm", vp9)
    clips["vp9.mkv"] = copy(clips["vp9.webm"], d / "vp9.mkv")
    if "libaom-av1" in encoders() and "libdav1d" in av.codecs_available | {"av1"}:
        av1 = ["-c:v", "libaom-av1", "-g", str(GOP), "-cpu-used", "8", "-row-mt", "1"]
        clips["av1.mkv"] = encode(d / "av1.mkv", av1, seconds=2.0)
        clips["av1.mp4"] = copy(clips["av1.mkv"], d / "av1.mp4")
    # variable frame rate: frame n shown at n/25 s for the first half, then at twice that spacing, kept as stamped
    ffmpeg(*source(), "-vf", "setpts='if(lt(N,50),N,2*N-50)/(25*TB)'", *x264, "-vsync", "vfr", str(d / "vfr.mp4"))
    clips["vfr.mp4"] = d / "vfr.mp4"
    # cut 1.3 s in by stream copy: the first kept keyframe is before the cut, an edit list hides what precedes it
    clips["editlist.mp4"] = copy(h264, d / "editlist.mp4", "-ss", "1.3")
    clips["offset.mp4"] = copy(h264, d / "offset.mp4", "-itsoffset", "0.7")  # first timestamp 0.7 s, not 0
    clips["offset.mkv"] = copy(h264, d / "offset.mkv", "-itsoffset", "0.7")
    clips["rotated.mp4"] = copy(h264, d / "rotated.mp4", after=("-metadata:s:v", "rotate=90"))  # a display matrix
    clips["short-header.mp4"] = with_media_duration(h264, d / "short-header.mp4", 0.5)
    return clips


def frame_times(path: Path) -> np.ndarray:
    """Presentation times (s) of the frames ffmpeg's own decode of ``path`` returns, as ``ffprobe`` reports them."""
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "frame=best_effort_timestamp_time", "-of", "json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return np.array(sorted(float(f["best_effort_timestamp_time"]) for f in json.loads(out)["frames"]))


def on_screen(times: np.ndarray, duration: float, n: int) -> np.ndarray:
    """The times of the frames on screen at the bin centres, computed here: the last frame at or before each."""
    rel = times - times[0]
    centres = (np.arange(n) + 0.5) * duration / n
    return rel[np.searchsorted(rel, centres + 1e-6, side="right") - 1]


CLIPS = ["h264.mp4", "h264.mkv", "h264.mov", "hevc.mp4", "hevc.mkv", "vp9.webm", "vp9.mkv", "av1.mkv", "av1.mp4",
         "vfr.mp4", "editlist.mp4", "offset.mp4", "offset.mkv", "rotated.mp4", "short-header.mp4"]


@pytest.mark.parametrize("name", CLIPS)
def test_seeking_picks_the_full_decodes_frames_pixel_for_pixel(seek_clips, name):
    if name not in seek_clips:
        pytest.skip(f"{name}: this FFmpeg cannot encode or decode it")
    path = seek_clips[name]
    for n in COUNTS:
        for side in (None, 48):
            got = decode.decode_video(path, num_frames=n, max_side=side)
            want = decode.decode_video(path, num_frames=n, max_side=side, strategy="full")
            assert got.data.shape == want.data.shape and np.array_equal(got.data, want.data), (name, n, side)
            assert got.meta["duration"] == want.meta["duration"]


@pytest.mark.parametrize("name", CLIPS)
def test_the_picked_frames_are_those_on_screen_by_ffprobes_frame_times(seek_clips, name):
    """The seek path itself answers (no fallback to the full decode; an MP4's index from its header), with the frames
    the rule picks from the frame times ffprobe reports; one frame from the middle of the clip costs less than
    decoding up to it."""
    if name not in seek_clips:
        pytest.skip(f"{name}: this FFmpeg cannot encode or decode it")
    path = seek_clips[name]
    duration = decode.decode_video(path, num_frames=1, strategy="full").meta["duration"]
    times = frame_times(path)
    for n in COUNTS:
        found = frames.pick_by_seeking(lambda: decode._open(path), decode.sample_times(duration, n), duration,
                                       decode.allowed_shortfall(duration), path)
        assert found is not None, (name, n)
        picked = np.array([float(f.pts * f.time_base) for f in found[0]]) - times[0]
        np.testing.assert_allclose(picked, on_screen(times, duration, n), atol=1e-6, err_msg=f"{name} n={n}")
    middle = decode.decode_video(path, num_frames=1)
    assert middle.meta["decoded_frames"] < decode.decode_video(path, num_frames=1, strategy="full").meta[
        "decoded_frames"], name


def test_the_rotated_clip_carries_a_display_matrix_and_is_returned_as_stored(seek_clips):
    """Today's rule for rotation: frames come as the stream stores them (the display matrix is not applied)."""
    import av

    with av.open(str(seek_clips["rotated.mp4"])) as container:
        assert next(container.decode(video=0)).rotation in (90, -90, 270)
    assert decode.decode_video(seek_clips["rotated.mp4"], num_frames=3).data.shape == (3, 64, 96, 3)


def test_a_late_starting_matroska_stream_lasts_its_frames_not_its_end_time(seek_clips):
    """Its DURATION tag is the time its last frame ends (4.7 s for 4 s of frames from 0.7 s): the clip's length is
    the span ffprobe's frame times give (last minus first plus one frame), and both strategies decode it whole."""
    times = frame_times(seek_clips["offset.mkv"])
    assert times[0] > 0.5  # the stream does start late
    span = times[-1] - times[0] + float(np.median(np.diff(times)))
    for strategy in ("seek", "full"):
        decoded = decode.decode_video(seek_clips["offset.mkv"], num_frames=8, strategy=strategy)
        assert abs(decoded.meta["duration"] - span) < 0.05, (strategy, decoded.meta["duration"], span)


@pytest.mark.parametrize("name", ["h264.mp4", "vp9.webm"])
def test_a_truncated_file_is_refused_naming_it_as_by_the_full_decode(seek_clips, tmp_path, name):
    data = seek_clips[name].read_bytes()
    cut = tmp_path / f"cut-{name}"
    cut.write_bytes(data[: len(data) // 2])
    outcomes = []
    for strategy in ("seek", "full"):
        with pytest.raises(decode.MediaError, match=f"cut-{name}") as error:
            decode.decode_video(cut, num_frames=8, strategy=strategy)
        outcomes.append(str(error.value))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("strategy", ["seek", "full"])
def test_the_picked_frames_are_held_at_the_output_size_as_they_are_picked(seek_clips, monkeypatch, strategy):
    """Both paths hand back RGB arrays at the output size (96x64 at a longer side of 48: 48x32), not decoded frames
    at the stored size: a decode holding 768 picked 1080p frames until the end would hold 2.4 GB."""
    seen = []
    for name in ("pick_by_seeking", "_stream_pick"):
        original = getattr(decode, name)

        def recording(*args, original=original, **kwargs):
            found = original(*args, **kwargs)
            seen.extend(found[0] if found else [])
            return found

        monkeypatch.setattr(decode, name, recording)
    got = decode.decode_video(seek_clips["h264.mp4"], num_frames=24, max_side=48, strategy=strategy)
    assert len(seen) == 24 and got.data.shape == (24, 32, 48, 3)
    assert all(isinstance(f, np.ndarray) and f.shape == (32, 48, 3) and f.dtype == np.uint8 for f in seen)


def test_an_unknown_strategy_is_named():
    with pytest.raises(decode.MediaError, match="unknown video decode strategy 'fast'"):
        decode.decode_video("clip.mp4", strategy="fast")


def test_decoder_threads_are_bounded_outside_ray(seek_clips):
    import av

    assert 1 <= frames.decode_threads() <= frames.DEFAULT_THREADS
    with av.open(str(seek_clips["h264.mp4"])) as container:
        stream = container.streams.video[0]
        frames.bound_threads(stream, 3)
        next(container.decode(stream))
        assert stream.codec_context.thread_count == 3 and stream.codec_context.thread_type.name == "FRAME"


def test_decoder_threads_follow_the_cpus_ray_gives_the_task(ray_session):
    ray = ray_session

    @ray.remote
    def threads():
        from omnieval.media.frames import decode_threads

        return decode_threads()

    assert ray.get(threads.options(num_cpus=3).remote()) == 3
    assert ray.get(threads.options(num_cpus=1).remote()) == 1


def ffprobe_packets(path: Path) -> tuple[list[int], list[int]]:
    """``(timestamps of the packets that decode to a frame, of the keyframes)`` of the first video stream, sorted,
    as ``ffprobe`` demuxes them: packets flagged ``D`` (discarded by an edit list) show no frame."""
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "packet=pts,flags", "-of", "json", str(path)],
                         capture_output=True, text=True, check=True).stdout
    packets = json.loads(out)["packets"]
    shown = sorted({int(p["pts"]) for p in packets if "D" not in p["flags"]})
    return shown, sorted(int(p["pts"]) for p in packets if "K" in p["flags"])


@pytest.mark.parametrize("name", [n for n in CLIPS if n.endswith((".mp4", ".mov"))])
def test_an_mp4s_header_gives_the_frame_and_keyframe_times_that_demuxing_every_packet_gives(seek_clips, name):
    """The seek path's index of an MP4 or MOV comes from its tables (no packet read), and equals ffprobe's demux: the
    same timestamps, and the same seconds to the last bit (each the exact product with the time base, rounded once,
    as a decoded frame's time is: the seek path compares them for equality)."""
    from fractions import Fraction

    import av

    if name not in seek_clips:
        pytest.skip(f"{name}: this FFmpeg cannot encode or decode it")
    path = seek_clips[name]
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        index = frames.header_index(path, container, stream)
        time_base = Fraction(stream.time_base)
    assert index is not None, name
    shown, key_pts = ffprobe_packets(path)
    assert index.times.tolist() == [float(pts * time_base) for pts in shown], name
    assert index.key_pts.tolist() == key_pts, name
    assert index.key_times.tolist() == [float(pts * time_base) for pts in key_pts], name


def test_a_matroska_header_gives_no_index_and_the_packets_are_demuxed(seek_clips):
    """Matroska's cues list keyframes only, not every frame: the index is demuxed there."""
    import av

    with av.open(str(seek_clips["h264.mkv"])) as container:
        assert frames.header_index(seek_clips["h264.mkv"], container, container.streams.video[0]) is None


@pytest.mark.parametrize("name", CLIPS)
def test_the_demuxed_index_gives_ffprobes_packet_times_to_the_last_bit(seek_clips, name):
    """Where the index is demuxed (every clip can be: Matroska and WebM always are), its frame and keyframe times
    are ffprobe's packets' (discarded ones shown by no frame), each the exact product with the time base rounded
    once, as a decoded frame's time is."""
    from fractions import Fraction

    import av

    if name not in seek_clips:
        pytest.skip(f"{name}: this FFmpeg cannot encode or decode it")
    path = seek_clips[name]
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        index = frames.packet_index(container, stream)
        time_base = Fraction(stream.time_base)
    shown, key_pts = ffprobe_packets(path)
    assert index.times.tolist() == [float(pts * time_base) for pts in shown], name
    assert index.key_pts.tolist() == key_pts, name
    assert index.key_times.tolist() == [float(pts * time_base) for pts in key_pts], name
