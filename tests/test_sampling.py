"""Sampling rules (``media.sampling``) against their references, and ``decode_video`` by each rule on a real clip.

References: transformers' Qwen2-VL ``smart_resize`` for the pixel budget; for the ``uniform`` and
``uniform_shifted`` index rules and their counts by rate, the video processors' own ``sample_frames`` (transformers'
default, LLaVA-OneVision, Gemma 4, InternVL, VideoLLaMA3, Qwen3-VL) called on the same frame counts and rates; the
Qwen-Omni reference utilities' frame count rule written out here from their documented steps (and, where
``qwen_omni_utils`` can be imported, their own ``smart_nframes``); for frame indices ``numpy.linspace`` over the
frame count ``ffprobe`` counts; for pixels a full PyAV decode of the clip, with the reference frames picked and
scaled here.
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


# -- the video processors' own sampling (transformers 5.19): frame counts and rates, many of each ----------------

TOTALS = [*range(1, 301), 449, 599, 719, 1000, 1799, 2999, 7201, 10_007]
ASKED = [1, 2, 3, 7, 8, 13, 16, 29, 32, 64]
RATES = [(12.5, 0.5), (23.976, 1.0), (25.0, 2.0), (29.97, 2.0), (30.0, 1.0), (59.94, 3.7), (24.0, 0.25)]


def processor(name: str):
    """A video processor built offline from its class defaults (its ``sample_frames`` is the reference)."""
    import transformers

    return getattr(transformers, name)()


def metadata(total: int, video_fps: float):
    from transformers.video_utils import VideoMetadata

    return VideoMetadata(total_num_frames=total, fps=video_fps)


def processor_indices(proc, total: int, video_fps: float = 25.0, **kwargs) -> np.ndarray | None:
    """The processor's indices, or None where it refuses (more frames than the clip has; InternVL: none at all)."""
    try:
        return np.asarray(proc.sample_frames(metadata(total, video_fps), **kwargs)).astype(np.int64)
    except (ValueError, ZeroDivisionError):
        return None


@pytest.mark.parametrize("name", ["LlavaOnevisionVideoProcessor", "Gemma4VideoProcessor"])
def test_uniform_indices_equal_the_processors_default_sample_frames(name):
    """transformers' ``default_sample_indices_fn``, as the processors without their own rule call it."""
    proc = processor(name)
    for total in TOTALS:
        for n in (n for n in ASKED if n <= total):
            np.testing.assert_array_equal(sampling.uniform_indices(total, n),
                                          processor_indices(proc, total, num_frames=n), err_msg=f"{total}, {n}")


def test_uniform_indices_equal_videollama3s_sample_frames_where_it_samples_the_clip():
    """VideoLLaMA3's float32 ``arange``: the same indices, and for some pairs one index more, equal to the frame
    count (past the clip, where the processor then fails); never a different index."""
    proc = processor("VideoLlama3VideoProcessor")
    extra = 0
    for total in TOTALS:
        for n in (n for n in ASKED if n <= total):
            want = processor_indices(proc, total, num_frames=n)
            if len(want) == n + 1:
                assert want[-1] >= total
                want, extra = want[:n], extra + 1
            np.testing.assert_array_equal(sampling.uniform_indices(total, n), want, err_msg=f"{total}, {n}")
    assert extra > 0  # the pairs the docstring names are among those checked


def test_shifted_indices_equal_internvls_sample_frames():
    """InternVL's ``initial_shift``: its float32 ``arange`` from half a run, truncated."""
    proc = processor("InternVLVideoProcessor")
    for total in TOTALS:
        for n in (n for n in ASKED if n <= total):
            np.testing.assert_array_equal(sampling.shifted_indices(total, n),
                                          processor_indices(proc, total, num_frames=n), err_msg=f"{total}, {n}")


PROCESSOR_RULES = [  # processor, omnieval's index rule, its count by rate as frame_count_by_rate's bounds (min, max)
    ("LlavaOnevisionVideoProcessor", "uniform", (1, None)),
    ("InternVLVideoProcessor", "uniform_shifted", (1, None)),
    ("VideoLlama3VideoProcessor", "uniform", (4, 180)),
    ("Qwen3VLVideoProcessor", "linspace", (4, 768)),
]


@pytest.mark.parametrize("name, rule, bounds", PROCESSOR_RULES)
def test_sampling_by_rate_equals_the_processors_sample_frames(name, rule, bounds):
    """``fps`` given to the processor: its count (``int(frames / rate * fps)``, within its bounds) is
    ``frame_count_by_rate`` with ``frame_factor`` 1 and those bounds, and its indices the rule's, at rates whole and
    not (23.976, 29.97, 59.94) and fps under 1. Pairs the processor refuses or gives no frame are left out (omnieval
    clamps them: the next test)."""
    proc = processor(name)
    low, high = bounds
    checked = 0
    for total in TOTALS[::3]:
        for video_fps, fps in RATES:
            want = processor_indices(proc, total, video_fps, fps=fps)
            if want is None or len(want) == 0 or (name.startswith("VideoLlama3") and want[-1] >= total):
                continue
            n = sampling.frame_count_by_rate(total, video_fps, fps, low, high or total, 1)
            assert n == len(want), (total, video_fps, fps)
            np.testing.assert_array_equal(sampling.frame_indices(rule, total, n), want)
            checked += 1
    assert checked > 500


def test_more_frames_than_the_clip_has_repeat_frames_where_the_processors_refuse():
    """5 frames, 8 asked: the processors raise; omnieval's rules give 8 indices within the clip, every frame
    taken, in order (as ``centres`` and ``linspace`` repeat frames)."""
    assert processor_indices(processor("LlavaOnevisionVideoProcessor"), 5, num_frames=8) is None
    assert processor_indices(processor("InternVLVideoProcessor"), 5, num_frames=8) is None
    assert sampling.uniform_indices(5, 8).tolist() == [0, 0, 1, 1, 2, 3, 3, 4]
    assert sampling.shifted_indices(5, 8).tolist() == [0, 0, 1, 2, 2, 3, 4, 4]


def test_an_unknown_index_rule_is_refused():
    with pytest.raises(sampling.SamplingError, match="'middle' is not a frame-index rule"):
        sampling.frame_indices("middle", 10, 2)


@pytest.mark.parametrize("rule, indices", [("uniform", lambda t, n: np.arange(n) * t // n),
                                           ("uniform_shifted", lambda t, n: (np.arange(n) * t + t // 2) // n)])
def test_decode_by_a_processor_rule_gives_those_frames_of_the_clip(clip, rule, indices):
    """``decode_video`` with the rule: the frames at the rule's indices (written out here) of a full PyAV decode,
    over the frame count ffprobe counts (125: 8 frames shifted by 7.8 frames, not a whole number)."""
    total, _ = ffprobe_frames(clip)
    frames, _ = all_frames(clip)
    wanted = indices(total, 8)
    expected = np.stack([frames[i].to_ndarray(format="rgb24") for i in wanted])
    got = decode.decode_video(clip, 8, None, index_rule=rule)
    np.testing.assert_array_equal(got.data, expected)
    assert got.meta["frame_indices"] == wanted.tolist()


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
    ("index_rule: middle", "'linspace', 'uniform' or 'uniform_shifted'"),
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
