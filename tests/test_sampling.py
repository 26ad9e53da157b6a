"""Sampling rules (``media.sampling``) against their references, and ``decode_video`` by each rule on a real clip.

References: transformers' Qwen2-VL ``smart_resize`` for the pixel budget; the Qwen-Omni reference utilities' frame
count rule written out here from their documented steps (and, where ``qwen_omni_utils`` can be imported, their own
``smart_nframes``); for frame indices ``numpy.linspace`` over the frame count ``ffprobe`` counts; for pixels a full
PyAV decode of the clip, with the reference frames picked and scaled here.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from omnieval.config import DecodeConfig, load_run_config
from omnieval.core.schema import InputError
from omnieval.media import decode, sampling
from omnieval.media.spec import video_params

RATE, SECONDS = 25, 5.0  # 125 frames; fps 2 asks for 10, max_frames 8 keeps 8


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sampling") / "clip.mp4"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                    f"testsrc2=s=160x90:r={RATE}:d={SECONDS}", "-pix_fmt", "yuv420p", "-g", "12", str(out)],
                   check=True, timeout=120)
    return out


def ffprobe_frames(path: Path) -> tuple[int, float]:
    """(frames counted by decoding, average frame rate) as ffprobe reports them."""
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-count_frames", "-show_entries",
                          "stream=nb_read_frames,avg_frame_rate", "-of", "json", str(path)],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    stream = json.loads(out)["streams"][0]
    num, den = (int(x) for x in stream["avg_frame_rate"].split("/"))
    return int(stream["nb_read_frames"]), num / den


def all_frames(path: Path) -> tuple[list, np.ndarray]:
    """Every frame of the clip (PyAV, decoded whole) and their times from the first."""
    import av

    with av.open(str(path)) as container:
        frames = list(container.decode(video=0))
    times = np.array([float(f.pts * f.time_base) for f in frames])
    return frames, times - times[0]


def reference_nframes(total: int, video_fps: float, fps: float, min_frames: int, max_frames: int,
                      factor: int) -> int:
    """The reference utilities' documented rule: duration * fps, clamped to [min_frames rounded up, max_frames
    rounded down] (both to the factor, max_frames at most the clip's frames), then rounded down to the factor."""
    low = math.ceil(min_frames / factor) * factor
    high = math.floor(min(max_frames, total) / factor) * factor
    n = min(max(total / video_fps * fps, low), high, total)
    return math.floor(n / factor) * factor


CASES = [(125, 25.0, 2.0, 4, 768, 2), (125, 25.0, 2.0, 4, 8, 2), (30, 30.0, 2.0, 4, 768, 2),
         (9000, 29.97, 1.0, 4, 768, 2), (7, 25.0, 0.5, 4, 768, 2), (301, 25.0, 3.0, 5, 17, 4),
         (12, 24.0, 24.0, 1, 768, 2), (145, 25.0, 2.0, 4, 768, 2)]  # 11.6 frames: rounded down to 10


@pytest.mark.parametrize("total, video_fps, fps, low, high, factor", CASES)
def test_frame_count_by_rate_follows_the_reference_rule(total, video_fps, fps, low, high, factor):
    assert sampling.frame_count_by_rate(total, video_fps, fps, low, high, factor) == \
        reference_nframes(total, video_fps, fps, low, high, factor)


@pytest.mark.parametrize("total, video_fps, fps, low, high, factor", [c for c in CASES if c[-1] == 2])
def test_frame_count_by_rate_equals_the_qwen_utilities(total, video_fps, fps, low, high, factor):
    """Against ``smart_nframes`` itself where the package imports (its frame factor is fixed at 2)."""
    vision = pytest.importorskip("qwen_omni_utils.v2_5.vision_process")
    ele = {"fps": fps, "min_frames": low, "max_frames": high}
    assert sampling.frame_count_by_rate(total, video_fps, fps, low, high) == vision.smart_nframes(ele, total,
                                                                                                  video_fps)


def test_a_clip_with_too_few_frames_is_refused():
    with pytest.raises(sampling.SamplingError, match="at least 2"):
        sampling.frame_count_by_rate(1, 25.0, 2.0)


SIZES = [(90, 160), (1080, 1920), (720, 1280), (27, 40), (2000, 30), (480, 640), (1, 150)]
BUDGETS = [(56 * 56, 14 * 14 * 4 * 1280), (128 * 28 * 28, 768 * 28 * 28), (4 * 32 * 32, 256 * 32 * 32),
           (3136, 50_000)]


@pytest.mark.parametrize("factor", [28, 32])
@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("height, width", SIZES)
def test_pixel_size_equals_transformers_smart_resize(height, width, budget, factor):
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    assert sampling.pixel_size(height, width, factor, *budget) == smart_resize(height, width, factor, *budget)


def test_an_extreme_aspect_ratio_is_refused_as_the_reference_does():
    with pytest.raises(sampling.SamplingError, match="aspect ratio 200"):
        sampling.pixel_size(10, 2100, 28, 3136, 50_000)


def test_frame_pixel_budget_shares_total_pixels_over_the_frames():
    # 16 frames sharing 8 frames' worth of 1000 px: each gets 1000 / 16 * 2 = 125, above 1.05 * 100
    assert sampling.frame_pixel_budget(100, 10_000, 1000, 16) == 125
    assert sampling.frame_pixel_budget(100, 10_000, 1000, 64) == 105  # the floor: int(100 * 1.05)
    assert sampling.frame_pixel_budget(100, 110, 1000, 16) == 110  # never above max_pixels
    assert sampling.frame_pixel_budget(100, 10_000, None, 16) == 10_000


@pytest.mark.parametrize("strategy", ["seek", "full"])
def test_by_rate_with_linspace_indices_gives_the_reference_frames(clip, strategy):
    total, video_fps = ffprobe_frames(clip)
    n = reference_nframes(total, video_fps, 2.0, 4, 8, 2)
    assert n == 8
    wanted = np.round(np.linspace(0, total - 1, n)).astype(int)
    frames, _ = all_frames(clip)
    expected = np.stack([frames[i].to_ndarray(format="rgb24") for i in wanted])
    got = decode.decode_video(clip, None, None, fps=2.0, max_frames=8, index_rule="linspace", strategy=strategy)
    np.testing.assert_array_equal(got.data, expected)


def test_by_rate_at_bin_centres_gives_the_frames_on_screen(clip):
    total, video_fps = ffprobe_frames(clip)
    frames, times = all_frames(clip)
    duration = total / video_fps
    n = reference_nframes(total, video_fps, 2.0, 4, 8, 2)
    centres = (np.arange(n) + 0.5) * duration / n
    wanted = [int(np.nonzero(times <= c + 1e-9)[0][-1]) for c in centres]
    expected = np.stack([frames[i].to_ndarray(format="rgb24") for i in wanted])
    got = decode.decode_video(clip, None, None, fps=2.0, max_frames=8)
    np.testing.assert_array_equal(got.data, expected)


def test_a_pixel_budget_sizes_frames_as_smart_resize(clip):
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    total, _ = ffprobe_frames(clip)
    frames, _ = all_frames(clip)
    h, w = smart_resize(90, 160, 28, 28 * 28, 6000)
    wanted = np.round(np.linspace(0, total - 1, 4)).astype(int)
    expected = np.stack([frames[i].to_ndarray(width=w, height=h, format="rgb24") for i in wanted])
    got = decode.decode_video(clip, 4, None, index_rule="linspace", max_pixels=6000, size_factor=28)
    assert got.data.shape == (4, h, w, 3)
    np.testing.assert_array_equal(got.data, expected)


def test_an_unset_decode_section_keeps_todays_keys_and_identity():
    assert video_params(DecodeConfig()) == (("max_side", 320), ("num_frames", 8))
    assert DecodeConfig().model_dump(mode="json") == {"num_frames": 8, "max_side": 320, "sample_rate": 16000,
                                                      "media_check": "probe", "store": None}


def test_set_options_enter_the_key_with_their_rule_defaults():
    spelled = DecodeConfig(fps=2, min_frames=4, max_frames=768, frame_factor=2, index_rule="linspace")
    assert video_params(DecodeConfig(fps=2, index_rule="linspace")) == video_params(spelled) == (
        ("fps", 2.0), ("frame_factor", 2), ("index_rule", "linspace"), ("max_frames", 768), ("max_side", 320),
        ("min_frames", 4))
    assert video_params(DecodeConfig(max_pixels=50_000)) == (
        ("max_pixels", 50_000), ("min_pixels", 784), ("num_frames", 8), ("size_factor", 28))


RUN = "name: t\nbenchmark: bench\noutput: out\nmodels:\n  - name: sim\n    engine: simulated\ndecode: {%s}\n"


@pytest.mark.parametrize("decode_options, words", [
    ("num_frames: 8, fps: 2", "num_frames and fps"),
    ("max_frames: 8", "max_frames bounds sampling by rate: it needs fps"),
    ("fps: 2, min_frames: 9, max_frames: 8", "min_frames 9 is above max_frames 8"),
    ("max_side: 320, max_pixels: 50000", "max_side and max_pixels"),
    ("size_factor: 32", "size_factor qualifies a pixel budget"),
    ("index_rule: middle", "'centres' or 'linspace'"),
    ("fps: 0", "greater than 0"),
])
def test_conflicting_sampling_options_are_refused_naming_the_file(tmp_path, decode_options, words):
    path = tmp_path / "run.yaml"
    path.write_text(RUN % decode_options)
    with pytest.raises(InputError) as err:
        load_run_config(path)
    assert str(path) in str(err.value) and words in str(err.value)
    assert "\n" not in str(err.value)


@pytest.fixture(scope="module")
def tone(tmp_path_factory) -> Path:
    """3 s of a 440 Hz tone, mono at 16 kHz (the decode's own rate: no resampling between it and the reference)."""
    out = tmp_path_factory.mktemp("sampling") / "tone.wav"
    subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=3",
                    "-ac", "1", "-ar", "16000", str(out)], check=True, timeout=60)
    return out


def ffmpeg_samples(path: Path) -> np.ndarray:
    out = subprocess.run(["ffmpeg", "-loglevel", "error", "-i", str(path), "-ac", "1", "-ar", "16000", "-f", "f32le",
                          "pipe:"], capture_output=True, check=True, timeout=60).stdout
    return np.frombuffer(out, np.float32)


@pytest.mark.parametrize("seconds, expected_s", [(1.25, 1.25), (10.0, 3.0)])
def test_max_audio_seconds_keeps_the_first_seconds(tone, seconds, expected_s):
    reference = ffmpeg_samples(tone)
    got = decode.decode_audio(tone, 16_000, max_audio_seconds=seconds).data
    assert len(got) == round(expected_s * 16_000)
    np.testing.assert_array_equal(got, reference[:len(got)])


def test_max_audio_seconds_enters_the_audio_key_only_when_set():
    from omnieval.media.spec import audio_params

    assert audio_params(DecodeConfig()) == (("sample_rate", 16_000),)
    assert audio_params(DecodeConfig(max_audio_seconds=30)) == (("max_audio_seconds", 30.0), ("sample_rate", 16_000))
    with pytest.raises(ValueError, match="greater than 0"):
        DecodeConfig(max_audio_seconds=0)


def test_total_pixels_shares_the_budget_over_a_clips_frames(clip):
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

    # 4 frames sharing 8000 px: each frame's budget is max(min(6000, 8000 / 4 * 2), int(784 * 1.05)) = 4000
    h, w = smart_resize(90, 160, 28, 28 * 28, 4000)
    got = decode.decode_video(clip, 4, None, max_pixels=6000, size_factor=28, total_pixels=8000)
    assert got.data.shape == (4, h, w, 3) and (h, w) != smart_resize(90, 160, 28, 28 * 28, 6000)
