"""A Qwen2.5-Omni run with no ``decode:`` settings feeds the model as its reference pipeline does, and each row says so.

The real ``run`` path on the local Ray (the tiny random-weight Qwen2.5-Omni on the transformers engine) over clips
of 3, 7, 20 and 61 s with soundtracks, made here with the project's synth helpers (64 x 48 at 8 fps, tones at
22.05 kHz in AAC). The reference is ``qwen_omni_utils.process_mm_info`` called here on the same files with
``use_audio_in_video=True`` (the Qwen2.5-Omni card's call): its frame count and frame size per clip, and its
soundtrack's length (the whole file's sound at 16 kHz).
"""

from __future__ import annotations

import json

import polars as pl
import pytest

pytestmark = pytest.mark.slow

SECONDS = (3, 7, 20, 61)
AAC_FRAME_S = 1024 / 22_050  # the encoder's priming and padding: one AAC frame either way


@pytest.fixture(scope="module")
def clip_bench(tmp_path_factory):
    """A spectrum benchmark of four questions, each on one clip shown with its own soundtrack."""
    from omnieval.datasets.benchmark import write_benchmark_files
    from omnieval.media.synth import beep_audio, moving_box_video, mux_clip
    from omnieval.protocols.spectrum import Item

    bench = tmp_path_factory.mktemp("recipe-run") / "bench"
    (bench / "media").mkdir(parents=True)
    items = []
    for i, seconds in enumerate(SECONDS):
        picture = moving_box_video(bench / f"picture{seconds}.mp4", colour="red", box=8, y=8, size=(64, 48),
                                   duration=seconds, fps=8, speed=4.0)
        sound = beep_audio(bench / f"sound{seconds}.wav", frequency=300 + 50 * i, beeps=seconds, duration=seconds)
        clip = mux_clip(bench / "media" / f"clip{seconds}.mp4", video=picture, audio=sound)
        picture.unlink()
        sound.unlink()
        relative = str(clip.relative_to(bench))
        items.append(Item(item_id=f"clip{seconds}", question="What moves?", options=["a box", "a ball"], answer="A",
                          media={"video": relative, "audio": relative}))
    write_benchmark_files(bench, items, {"name": "clips", "protocol": "spectrum"})
    return bench


def reference(path) -> tuple[int, str, float]:
    """Frames, ``HxW`` and seconds of sound the reference pipeline gives the model for one clip."""
    from qwen_omni_utils import process_mm_info

    messages = [{"role": "user", "content": [{"type": "video", "video": str(path)},
                                             {"type": "text", "text": "What moves?"}]}]
    audios, _, videos = process_mm_info(messages, use_audio_in_video=True)
    frames, _, height, width = videos[0].shape
    return int(frames), f"{height}x{width}", len(audios[0]) / 16_000


def test_a_qwen25_omni_run_shows_the_reference_frames_sizes_and_the_whole_soundtrack(ray_session, tiny_models,
                                                                                      clip_bench, tmp_path):
    pytest.importorskip("qwen_omni_utils")
    pytest.importorskip("torchcodec")  # the reference's video reader
    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import run_evaluation

    model = {"name": "omni", "engine": "hf", "batch_size": 1, "options": {"path": str(tiny_models("qwen2.5-omni"))}}
    config = parse_run_config({"benchmark": str(clip_bench), "output": str(tmp_path / "run"), "models": [model],
                               "protocol": "spectrum", "protocol_options": {"conditions": ["normal"]},
                               "prompts": ["zs"]})
    result = run_evaluation(config, progress=False)
    rows = pl.read_parquet(result.predictions_path).sort("item_id")
    assert rows.height == len(SECONDS) and rows["error"].null_count() == rows.height, rows["error"].to_list()
    for row in rows.iter_rows(named=True):
        seconds = int(row["item_id"].removeprefix("clip"))
        frames, size, heard = reference(clip_bench / "media" / f"clip{seconds}.mp4")
        assert (row["video_frames"], row["video_size"]) == (frames, size), seconds
        assert abs(row["audio_seconds"] - heard) <= AAC_FRAME_S, (seconds, row["audio_seconds"], heard)
        assert abs(heard - seconds) <= AAC_FRAME_S
        assert row["media_tokens"]["video"] > 0 and row["media_tokens"]["audio"] > 0, seconds
    record = json.loads((tmp_path / "run" / "run.json").read_text())["recipes"]["omni"]
    assert record["recipe"] == "qwen2.5-omni" and record["decode"]["fps"]["from"] == "recipe"
    assert record["options"]["soundtrack"] == {"value": True, "from": "recipe",
                                              "source": record["reference"]["use_audio_in_video"]["source"]}
