"""Recipes (``engines.recipes``) and their resolution per model (``run.recipe``).

References: the precedence table is written out by hand from the documented order (config > benchmark pinned >
recipe > omnieval default, by option group); the Qwen2.5-Omni frames, sizes and soundtrack are those the installed
reference utilities (``qwen_omni_utils``: ``fetch_video``, ``smart_nframes``, ``smart_resize``,
``process_audio_info``) compute on the same clips, made here with ffmpeg.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from omnieval.config import DecodeConfig, parse_run_config
from omnieval.core.schema import InputError
from omnieval.engines.families import RECIPES, recipe_for
from omnieval.media.decode import decode_media
from omnieval.media.spec import audio_params, video_params
from omnieval.run.recipe import model_decode, resolve_decode

OMNI = recipe_for("qwen2.5-omni").decode
OMNI_VIDEO = {"fps": 2.0, "min_frames": 4, "max_frames": 768, "frame_factor": 2, "index_rule": "linspace",
              "min_pixels": 128 * 28 * 28, "max_pixels": 768 * 28 * 28, "size_factor": 28,
              "total_pixels": int(128_000 * 28 * 28 * 0.9), "sample_rate": 16_000}

# (config's decode:, benchmark's pinned, recipe) -> the resolved options and the level each came from
PRECEDENCE = [
    pytest.param({}, {}, {}, {"num_frames": 8, "max_side": 320, "sample_rate": 16_000},
                 {"num_frames": "default", "max_side": "default"}, id="default"),
    pytest.param({}, {}, OMNI, OMNI_VIDEO, {"fps": "recipe", "total_pixels": "recipe", "index_rule": "recipe"},
                 id="recipe"),
    pytest.param({}, {"num_frames": 32}, OMNI, {**OMNI_VIDEO, "num_frames": 32, "fps": None, "min_frames": None,
                                                "max_frames": None, "frame_factor": None},
                 {"num_frames": "benchmark", "max_pixels": "recipe", "index_rule": "recipe"}, id="benchmark"),
    pytest.param({"num_frames": 4, "max_side": 96}, {"num_frames": 32}, OMNI,
                 {"num_frames": 4, "max_side": 96, "index_rule": "linspace", "sample_rate": 16_000,
                  "fps": None, "max_pixels": None},
                 {"num_frames": "config", "max_side": "config", "index_rule": "recipe"}, id="config"),
]


@pytest.mark.parametrize("config, pinned, recipe, expected, levels", PRECEDENCE)
def test_each_level_wins_where_the_levels_above_it_are_silent(config, pinned, recipe, expected, levels):
    resolved = resolve_decode(DecodeConfig(**config), pinned, recipe, "r" if recipe else None)
    for option, value in expected.items():
        assert getattr(resolved.decode, option) == value, option
    for option, level in levels.items():
        assert resolved.sources.get(option, {"from": "default"})["from"] == level, option


def _config(tmp_path, models: list[dict], **extra) -> object:
    return parse_run_config({"benchmark": str(tmp_path / "bench"), "output": str(tmp_path / "out"), "models": models,
                             **extra})


def _omni_folder(tmp_path) -> str:
    folder = tmp_path / "omni"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2_5_omni"}))
    return str(folder)


def test_a_model_takes_its_folders_family_recipe_unless_it_or_the_run_opts_out(tmp_path):
    path = _omni_folder(tmp_path)
    models = [{"name": "auto", "engine": "hf", "options": {"path": path}},
              {"name": "off", "engine": "hf", "options": {"path": path}, "recipe": False},
              {"name": "named", "engine": "simulated", "recipe": "qwen3-omni"},
              {"name": "plain", "engine": "simulated"}]
    config = _config(tmp_path, models)
    got = {m.name: model_decode(config, m) for m in config.models}
    assert got["auto"].recipe == "qwen2.5-omni" and got["auto"].decode.size_factor == 28
    assert got["named"].recipe == "qwen3-omni" and got["named"].decode.size_factor == 28  # the card's patch 14
    assert got["off"].recipe is None and got["off"].decode == DecodeConfig()
    assert got["plain"].recipe is None and got["plain"].decode == DecodeConfig()
    quiet = _config(tmp_path, models, recipes=False)
    assert [model_decode(quiet, m).recipe for m in quiet.models] == [None, None, "qwen3-omni", None]


def test_an_unknown_recipe_and_a_bad_pinned_option_are_one_line_errors(tmp_path, small_bench):
    config = _config(tmp_path, [{"name": "m", "engine": "simulated", "recipe": "qwen9-omni"}])
    with pytest.raises(InputError, match="recipe 'qwen9-omni' of model 'm' is no registered family"):
        model_decode(config, config.models[0])
    import shutil

    from omnieval.datasets.benchmark import load_benchmark
    from omnieval.run.recipe import pinned_decode

    bench = tmp_path / "b"
    shutil.copytree(small_bench, bench)
    meta = json.loads((bench / "benchmark.json").read_text())
    (bench / "benchmark.json").write_text(json.dumps({**meta, "pinned": {"decode": {"num_frames": 32, "fps": 2}}}))
    with pytest.raises(InputError, match=r"benchmark.json.*pinned.decode.*num_frames and fps both"):
        pinned_decode(load_benchmark(bench))
    (bench / "benchmark.json").write_text(json.dumps({**meta, "pinned": {"decode": {"frames": 32}}}))
    with pytest.raises(InputError, match=r"field 'pinned.decode.frames'"):
        pinned_decode(load_benchmark(bench))


def test_a_recipe_value_changes_the_identity_of_its_familys_models_only(tmp_path, monkeypatch):
    from omnieval.engines.recipes import Recipe, Sourced
    from omnieval.run.identity import predictions_identity

    config = _config(tmp_path, [{"name": "a", "engine": "simulated", "recipe": "qwen2.5-omni"},
                                {"name": "b", "engine": "simulated", "recipe": "qwen3-omni"}])

    def identities():
        return [predictions_identity(config, m, "digest", model_decode(config, m).decode) for m in config.models]

    before = identities()
    changed = Recipe("qwen3-omni", decode={**RECIPES["qwen3-omni"].decode, "fps": Sourced(1.0, "a test")})
    monkeypatch.setitem(RECIPES, "qwen3-omni", changed)
    after = identities()
    assert before[0] == after[0] and before[1] != after[1]
    assert after[1]["decode"]["fps"] == 1.0


# -- Qwen2.5-Omni with no decode settings, against qwen-omni-utils on the same clips ---------------------------------

SECONDS = (3, 7, 20, 61)


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[int, Path]:
    """Tiny clips (64x48, 10 fps) with a soundtrack, of each length."""
    folder = tmp_path_factory.mktemp("recipe-clips")
    out = {}
    for seconds in SECONDS:
        out[seconds] = folder / f"clip{seconds}.mp4"
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                        f"testsrc2=s=64x48:r=10:d={seconds}", "-f", "lavfi", "-i",
                        f"sine=frequency=300:duration={seconds}:sample_rate=22050", "-pix_fmt", "yuv420p",
                        "-g", "20", "-c:a", "aac", "-shortest", str(out[seconds])], check=True, timeout=120)
    return out


@pytest.fixture(scope="module")
def omni_decode(tmp_path_factory) -> DecodeConfig:
    """What a Qwen2.5-Omni model folder's run with no ``decode:`` settings decodes by."""
    folder = tmp_path_factory.mktemp("omni-model")
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2_5_omni_thinker"}))
    config = parse_run_config({"benchmark": str(folder / "bench"), "output": str(folder / "out"),
                               "models": [{"name": "omni", "engine": "hf", "options": {"path": str(folder)}}]})
    return model_decode(config, config.models[0]).decode


@pytest.mark.parametrize("seconds", SECONDS)
def test_qwen25_omni_frames_and_size_equal_the_reference_utilities(clips, omni_decode, seconds):
    vision = pytest.importorskip("qwen_omni_utils.v2_5.vision_process")
    pytest.importorskip("torchcodec")
    import av

    with av.open(str(clips[seconds])) as container:
        stream = container.streams.video[0]
        total, rate = stream.frames, float(stream.average_rate)
    n_ref = vision.smart_nframes({"fps": vision.FPS}, total_frames=total, video_fps=rate)
    h_ref, w_ref = vision.smart_resize(48, 64, factor=28, min_pixels=128 * 28 * 28, max_pixels=768 * 28 * 28)
    fetched = vision.fetch_video({"video": str(clips[seconds])})  # the reference's own reader and resize
    assert tuple(fetched.shape[:1]) + tuple(fetched.shape[2:]) == (n_ref, h_ref, w_ref)
    got = decode_media(clips[seconds], "video", **dict(video_params(omni_decode)))
    assert got.data.shape == (n_ref, h_ref, w_ref, 3)


def test_qwen25_omni_hears_the_whole_soundtrack(clips, omni_decode):
    audio = pytest.importorskip("qwen_omni_utils.v2_5.audio_process")
    path = clips[20]
    (reference,) = audio.process_audio_info([{"role": "user", "content": [{"type": "video", "video": str(path)}]}],
                                            use_audio_in_video=True)
    assert RECIPES["qwen2.5-omni"].use_audio_in_video.value is True
    got = decode_media(path, "audio", **dict(audio_params(omni_decode)))
    # one AAC frame (1024 samples at 22.05 kHz) of encoder padding apart
    assert abs(len(got.data) / 16_000 - len(reference) / audio.SAMPLE_RATE) < 1024 / 22_050


def test_every_recipe_value_names_its_source():
    for family, recipe in RECIPES.items():
        for name, value in recipe.values().items():
            assert value.source.strip(), f"{family}: {name}"
        assert recipe.published, family


def test_the_qwen_vl_recipes_equal_their_processors_defaults():
    """The values the Qwen-VL video processors of the installed transformers default to (per-frame budgets for
    Qwen2-VL's; the rate and bounds for Qwen3-VL's), against the recipes read from the reference utilities."""
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor

    qwen25 = {k: v.value for k, v in RECIPES["qwen2.5-vl"].decode.items()}
    assert (qwen25["min_pixels"], qwen25["max_pixels"]) == (Qwen2VLVideoProcessor.size["shortest_edge"],
                                                            Qwen2VLVideoProcessor.size["longest_edge"])
    assert qwen25["size_factor"] == Qwen2VLVideoProcessor.patch_size * Qwen2VLVideoProcessor.merge_size
    qwen3 = {k: v.value for k, v in RECIPES["qwen3-vl"].decode.items()}
    assert qwen3["size_factor"] == Qwen3VLVideoProcessor.patch_size * Qwen3VLVideoProcessor.merge_size
    assert (qwen3["fps"], qwen3["min_frames"], qwen3["max_frames"]) == (
        Qwen3VLVideoProcessor.fps, Qwen3VLVideoProcessor.min_frames, Qwen3VLVideoProcessor.max_frames)


@pytest.mark.parametrize("total, video_fps",
                         [(30, 10.0), (35, 10.0), (75, 25.0), (611, 10.0), (3, 30.0), (20_000, 24.0)])
def test_qwen35_frames_equal_its_video_processors_own_sampling(total, video_fps):
    """Qwen3.5's recipe through the decoder's count and index rules gives the frame indices its video processor
    (Qwen3VLVideoProcessor.sample_frames) picks from the same clip."""
    from transformers.models.qwen3_vl.video_processing_qwen3_vl import Qwen3VLVideoProcessor
    from transformers.video_utils import VideoMetadata

    from omnieval.media import sampling

    expected = Qwen3VLVideoProcessor().sample_frames(VideoMetadata(total_num_frames=total, fps=video_fps))
    r = {k: v.value for k, v in RECIPES["qwen3.5"].decode.items()}
    n = sampling.frame_count_by_rate(total, video_fps, r["fps"], r["min_frames"], r["max_frames"], r["frame_factor"])
    np.testing.assert_array_equal(sampling.linspace_indices(total, n), expected)


def _default(cls, method: str, argument: str):
    """A keyword's default in a processor method's signature (where the processor reads a value from)."""
    import inspect

    return inspect.signature(getattr(cls, method)).parameters[argument].default


def test_the_processor_sourced_values_equal_the_installed_processors_defaults():
    """Each value a recipe cites from a processor, read back from the installed transformers' classes (their
    class attributes and keyword defaults), never from the recipe modules."""
    import transformers as tf

    value = {family: {k: v.value for k, v in RECIPES[family].decode.items()} for family in RECIPES}
    whisper = tf.WhisperFeatureExtractor()
    assert value["qwen2-audio"]["max_audio_seconds"] == whisper.n_samples / whisper.sampling_rate
    assert value["audioflamingo3"]["max_audio_seconds"] == _default(tf.AudioFlamingo3Processor, "__init__",
                                                                    "max_audio_len")
    assert value["musicflamingo"]["max_audio_seconds"] == _default(tf.MusicFlamingoProcessor, "__init__",
                                                                   "max_audio_len")
    for family, extractor in [("gemma3n", tf.Gemma3nAudioFeatureExtractor), ("gemma4", tf.Gemma4AudioFeatureExtractor)]:
        assert _default(extractor, "__call__", "truncation") is True
        assert value[family]["max_audio_seconds"] == _default(extractor, "__call__", "max_length") / 16_000
    assert _default(tf.Gemma4UnifiedAudioFeatureExtractor, "__call__", "max_length") is None
    assert "max_audio_seconds" not in value["gemma4-unified"]
    for family, extractor in [("gemma3n", tf.Gemma3nAudioFeatureExtractor), ("gemma4", tf.Gemma4AudioFeatureExtractor),
                              ("granite-speech", tf.GraniteSpeechFeatureExtractor),
                              ("phi4-multimodal", tf.Phi4MultimodalFeatureExtractor), ("qwen2-audio", type(whisper))]:
        assert value[family]["sample_rate"] == extractor().sampling_rate, family
    for family, processor in [("gemma4", tf.Gemma4VideoProcessor), ("gemma4-unified", tf.Gemma4UnifiedVideoProcessor)]:
        assert value[family]["num_frames"] == processor.num_frames
    vl3 = tf.VideoLlama3VideoProcessor
    assert (value["videollama3"]["min_frames"], value["videollama3"]["max_frames"],
            value["videollama3"]["frame_factor"]) == (vl3.min_frames, vl3.max_frames, vl3.temporal_patch_size)


PROCESSOR_SAMPLED = [  # family, its video processor, what the recipe asks of it (the recipe's count or rate)
    ("gemma4", "Gemma4VideoProcessor"), ("gemma4-unified", "Gemma4UnifiedVideoProcessor"),
    ("llava-onevision", "LlavaOnevisionVideoProcessor"), ("internvl", "InternVLVideoProcessor"),
    ("videollama3", "VideoLlama3VideoProcessor"),
]


@pytest.mark.parametrize("family, processor", PROCESSOR_SAMPLED)
@pytest.mark.parametrize("total, video_fps", [(35, 10.0), (75, 25.0), (588, 25.0), (611, 29.97), (5405, 23.976)])
def test_a_processor_sampled_familys_recipe_gives_its_processors_own_frames(family, processor, total, video_fps):
    """The recipe through the decoder's count and index rules (``media.sampling``) picks the frame indices the
    family's video processor picks itself (``sample_frames``) given the recipe's count or rate, as its card asks."""
    import transformers
    from transformers.video_utils import VideoMetadata

    from omnieval.config import DecodeConfig
    from omnieval.media import sampling

    r = {k: v.value for k, v in RECIPES[family].decode.items()}
    proc = getattr(transformers, processor)()
    meta = VideoMetadata(total_num_frames=total, fps=video_fps)
    if "fps" in r:
        expected = proc.sample_frames(meta, fps=r["fps"], max_frames=r["max_frames"])
        n = sampling.frame_count_by_rate(total, video_fps, r["fps"], r["min_frames"], r["max_frames"],
                                         r["frame_factor"])
    else:
        n = r.get("num_frames", DecodeConfig().num_frames)
        expected = proc.sample_frames(meta, num_frames=n)
    np.testing.assert_array_equal(sampling.frame_indices(r["index_rule"], total, n), np.asarray(expected))
