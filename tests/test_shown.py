"""What each row says its model was shown (``engines/shown.py``): on the tiny Qwen2.5-Omni build, the engine's frames,
size, seconds heard and placeholder counts against the model's processor called here on the same decoded media (its
ids counted with numpy) and against the published rules (Qwen2-VL's resize, Whisper's 30 s window); a processor that
drops a medium gives an errored row of kind ``media``, never an answer; the simulated engine's figures against the
arrays' shapes; the typed columns through a Parquet file and a resume; the report's table against numpy."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from omnieval.core.prompts import render_prompt
from omnieval.core.schema import Instance, Segment
from omnieval.media.decoded import DecodedMedia

LABELS = list("ABCD")
RATE = 16_000


def instance(media: tuple[str, ...], n: int = 0) -> Instance:
    segs = [Segment(kind="media", modality=m, path=f"{m}{n}") for m in media]
    return Instance(instance_id=f"i{n}", item_id=f"it{n}", protocol="dissonance", benchmark="b", split="s",
                    condition="C111", segments=segs, question="What is shown?", option_labels=LABELS,
                    option_texts=["a dog", "a cat", "a car", "I cannot answer"], target="A")


def video(frames: int = 6, height: int = 120, width: int = 160, fps: float = 3.0) -> DecodedMedia:
    data = np.random.default_rng(frames).integers(0, 256, (frames, height, width, 3), dtype=np.uint8)
    return DecodedMedia("video", data, f"v{frames}", path="clip.mp4", fps=fps)


def audio(seconds: float = 2.0) -> DecodedMedia:
    t = np.arange(int(RATE * seconds)) / RATE
    return DecodedMedia("audio", (0.3 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), f"a{seconds}",
                        path="sound.wav", sample_rate=RATE)


def image(height: int = 90, width: int = 120) -> DecodedMedia:
    data = np.random.default_rng(height).integers(0, 256, (height, width, 3), dtype=np.uint8)
    return DecodedMedia("image", data, f"i{height}", path="pic.png")


def qwen_resize(height: int, width: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen2-VL's published resize rule: sides to multiples of 28, area brought into [min, max] keeping the aspect."""
    h, w = round(height / 28) * 28, round(width / 28) * 28
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h, w = math.floor(height / beta / 28) * 28, math.floor(width / beta / 28) * 28
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / 28) * 28, math.ceil(width * beta / 28) * 28
    return h, w


@pytest.fixture(scope="module")
def omni(tiny_models):
    pytest.importorskip("transformers")
    from omnieval.engines import create_engine

    path = tiny_models("qwen2.5-omni")
    return path, create_engine("hf", model="tiny-omni", path=str(path))


def processor_reference(path, inst: Instance, media: dict, items: list[DecodedMedia]) -> dict:
    """The model's own processor called here on the prompt text (its tokenizer's chat template over the rendered
    parts) and the same decoded arrays, its ids counted with numpy."""
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(path)
    content = [{"type": p.modality} if p.kind == "media" else {"type": "text", "text": p.text or ""}
               for p in render_prompt(inst, "zs")]
    text = processor.tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                                   add_generation_prompt=True)
    kwargs = {}
    videos = [i for i in items if i.modality == "video"]
    if videos:
        kwargs.update(videos=[v.data for v in videos], fps=videos[0].fps, do_sample_frames=False)
    if any(i.modality == "audio" for i in items):
        kwargs["audio"] = [i.data for i in items if i.modality == "audio"]
    if any(i.modality == "image" for i in items):
        kwargs["images"] = [i.data for i in items if i.modality == "image"]
    if "audio" in kwargs:  # the whole clip, as vLLM's processing calls it (not Whisper's first 30 s alone)
        kwargs["truncation"] = False
    out = processor(text=[text], return_tensors="np", **kwargs)
    ids = np.asarray(out["input_ids"][0])
    tokens = {m: int((ids == processor.tokenizer.convert_tokens_to_ids(t)).sum())
              for m, t in (("video", "<|VIDEO|>"), ("audio", "<|AUDIO|>"), ("image", "<|IMAGE|>"))}
    grid = out["video_grid_thw"][0] if videos else None
    return {"tokens": tokens, "prompt_tokens": int(ids.size),
            "video_size": f"{grid[1] * 14}x{grid[2] * 14}" if grid is not None else None}


@pytest.mark.parametrize(("frames", "height", "width", "seconds"), [
    (6, 120, 160, 2.0),  # upsized to 280 x 392 (128 x 28 x 28 pixels at least)
    (4, 1080, 1920, 31.0),  # downsized to 560 x 1008; 31 s of audio, all heard (longer than Whisper's window)
])
def test_omni_row_counts_equal_the_processor_called_here(omni, frames, height, width, seconds):
    from omnieval.engines import EngineRequest

    path, engine = omni
    inst = instance(("video", "audio", "image"))
    media = {"video0": video(frames, height, width), "audio0": audio(seconds), "image0": image()}
    (result,) = engine.score([EngineRequest(inst, media, "zs")])
    assert result.error is None and result.choice in LABELS
    ref = processor_reference(path, inst, media, list(media.values()))
    h, w = qwen_resize(height, width, 128 * 28 * 28, 768 * 28 * 28)
    assert ref["video_size"] == f"{h}x{w}"
    assert result.shown == {"video_frames": frames, "video_size": f"{h}x{w}", "audio_seconds": seconds,
                            "media_tokens": ref["tokens"], "prompt_tokens": ref["prompt_tokens"]}
    assert all(n > 0 for n in ref["tokens"].values())


def test_a_video_with_its_soundtrack_counts_the_soundtrack_heard(omni):
    """One clip as both video and audio (``<path>#audio``): the soundtrack goes inside the video placeholder, and the
    row still says its seconds and audio tokens (Whisper frames through two stride-2 stages: 2 s -> 50 tokens)."""
    from omnieval.engines import EngineRequest

    _, engine = omni
    segs = [Segment(kind="media", modality="video", path="clip.mp4"),
            Segment(kind="media", modality="audio", path="clip.mp4")]
    inst = instance(()).model_copy(update={"segments": segs})
    media = {segs[0].ref: video(4), segs[1].ref: audio(2.0)}
    (result,) = engine.score([EngineRequest(inst, media, "zs")])
    assert result.error is None
    mel = 2 * RATE // 160
    assert result.shown["audio_seconds"] == 2.0 and result.shown["video_frames"] == 4
    assert result.shown["media_tokens"]["audio"] == ((mel - 1) // 2 + 1 - 2) // 2 + 1 == 50
    assert result.shown["media_tokens"]["video"] > 0


class Dropping:
    """The model's processor, asked as if wrongly: the placeholder of ``token`` cut from the text and the media
    argument ``arg`` left out, so the ids hold none of that medium (what a template or processor that ignores it
    does)."""

    def __init__(self, real, token: str, arg: str):
        self.real, self.token, self.arg = real, token, arg

    def __getattr__(self, name):
        return getattr(self.real, name)

    def __call__(self, text, **kwargs):
        kwargs.pop(self.arg, None)
        return self.real(text=[t.replace(self.token, "") for t in text], **kwargs)


@pytest.mark.parametrize(("arch", "modality", "token", "arg"), [
    ("qwen2-audio", "audio", "<|AUDIO|>", "audio"),
    ("qwen2.5-vl", "video", "<|video_pad|>", "videos"),
])
def test_a_processor_that_drops_a_medium_gives_an_errored_media_row(tiny_models, monkeypatch, arch, modality, token,
                                                                     arg):
    from omnieval.engines import create_engine
    from omnieval.run.answers import PredictionRows, answer_requests
    from omnieval.run.stages import call_rows

    engine = create_engine("hf", model=arch, path=str(tiny_models(arch)))
    inst = instance((modality,))
    media = {f"{modality}0": {"audio": audio, "video": video}[modality]()}
    rows = list(answer_requests([inst], ["mcq"], ["zs"], set(), {}))
    fetch = lambda keys: {k: media[k] for k in keys}  # noqa: E731
    healthy = PredictionRows(arch, "hf")(call_rows(engine, rows, fetch)).to_pylist()[0]
    assert healthy["error"] is None and healthy["media_tokens"][modality] > 0
    monkeypatch.setattr(engine, "processor", Dropping(engine.processor, token, arg))
    row = PredictionRows(arch, "hf")(call_rows(engine, rows, fetch)).to_pylist()[0]
    assert row["choice"] is None and row["error_kind"] == "media"
    assert f"{modality} shown but the prompt holds no {modality} token" in row["error"]
    assert row["media_tokens"][modality] == 0 and row["prompt_tokens"] < healthy["prompt_tokens"]


def test_the_simulated_engine_reports_what_its_decoded_media_show():
    from omnieval.engines import EngineRequest
    from omnieval.engines.simulated import SimulatedEngine

    inst = instance(("video", "audio", "image"))
    media = {"video0": video(5, 48, 64), "audio0": audio(1.5), "image0": image()}
    (result,) = SimulatedEngine("sim").score([EngineRequest(inst, media, "zs")])
    assert result.shown == {"video_frames": 5, "video_size": "48x64", "audio_seconds": 1.5, "media_tokens": None,
                            "prompt_tokens": None}
    (audio_only,) = SimulatedEngine("sim", modalities=["audio"]).score([EngineRequest(inst, media, "zs")])
    assert audio_only.shown["video_frames"] is None and audio_only.shown["audio_seconds"] == 1.5


def shown_rows() -> list[dict]:
    from omnieval.run.predictions import Prediction

    inst = instance(("video",))
    return [Prediction.scored(inst, "m", "hf", "zs", choice="A", shown=shown).row() for shown in (
        {"video_frames": 8, "video_size": "280x392", "audio_seconds": 2.5,
         "media_tokens": {"video": 140, "audio": 63, "image": 0}, "prompt_tokens": 250},
        {"video_frames": 16, "video_size": "280x392", "audio_seconds": 30.0,
         "media_tokens": {"video": 280, "audio": 750, "image": 0}, "prompt_tokens": 1100},
        {"video_frames": 4, "video_size": "224x224", "audio_seconds": None,
         "media_tokens": {"video": 64, "audio": 0, "image": None}, "prompt_tokens": 130},
        None)]


def test_the_columns_are_typed_and_kept_by_a_resume(tmp_path):
    from omnieval.core.run_outputs import predictions_table
    from omnieval.core.schema import MEDIA_TOKENS_TYPE, conform

    path = tmp_path / "part.parquet"
    pq.write_table(predictions_table(shown_rows()), path)
    table = pq.read_table(path)
    assert table.schema.field("video_frames").type == pa.int32()
    assert table.schema.field("audio_seconds").type == pa.float64()
    assert table.schema.field("media_tokens").type == MEDIA_TOKENS_TYPE
    assert table["media_tokens"].to_pylist()[1] == {"video": 280, "audio": 750, "image": 0}
    assert table["video_size"].to_pylist() == ["280x392", "280x392", "224x224", None]
    resumed = conform(table)
    for name in ("video_frames", "video_size", "audio_seconds", "media_tokens", "prompt_tokens"):
        assert resumed[name].to_pylist() == table[name].to_pylist()
    old = conform(table.drop_columns(["video_frames", "media_tokens"]))  # a file written before the columns
    assert old["video_frames"].null_count == 4 and old["media_tokens"].null_count == 4


def test_the_report_table_gives_median_and_range_per_run_and_model():
    import polars as pl

    from omnieval.core.run_outputs import predictions_table
    from omnieval.report.inputs import Run, RunSource
    from omnieval.report.shown import shown_table

    frame = pl.from_arrow(predictions_table(shown_rows()))
    table = shown_table([Run("r1", RunSource(root="."), pl.DataFrame(), frame, None, {})])
    cells = dict(zip(table.header, [c.text for c in table.rows[0]], strict=True))
    said = [r for r in shown_rows() if r["video_frames"] is not None]
    frames = np.array([r["video_frames"] for r in said])
    assert cells["rows"] == "3 of 4"
    assert cells["video frames"] == f"{np.median(frames):g} ({frames.min()}–{frames.max()})" == "8 (4–16)"
    seconds = np.array([r["audio_seconds"] for r in said if r["audio_seconds"] is not None])
    assert cells["seconds heard"] == f"{np.median(seconds):.1f} ({seconds.min():.1f}–{seconds.max():.1f})"
    audio_tokens = np.array([r["media_tokens"]["audio"] for r in said])
    assert cells["audio tokens"] == f"{np.median(audio_tokens):g} ({audio_tokens.min()}–{audio_tokens.max()})"
    assert cells["image tokens"] == "0"  # the one null left out
    assert cells["video size"] == "280x392 (+1 other)"
    prompt = np.array([r["prompt_tokens"] for r in said])
    assert cells["prompt tokens"] == f"{np.median(prompt):g} ({prompt.min()}–{prompt.max()})"
    assert json.dumps(cells)  # plain text cells


def test_a_family_filling_video_frames_into_image_tokens_counts_them_as_video(tiny_models):
    """InternVL lays each frame out as image-context tokens (its ``<video>`` text never reaches the ids): the row
    counts those under video, none under image, and is answered, not refused; the count equals the processor's
    own ids, counted here with numpy."""
    from transformers import AutoProcessor

    from omnieval.engines import EngineRequest, create_engine

    path = tiny_models("internvl")
    engine = create_engine("hf", model="internvl", path=str(path))
    inst, clip = instance(("video",)), video(4, 64, 96)
    (result,) = engine.score([EngineRequest(inst, {"video0": clip}, "zs")])
    assert result.error is None and result.choice in LABELS
    processor = AutoProcessor.from_pretrained(path)
    text = engine.prompt_text(render_prompt(inst, "zs"))
    ids = processor(text=[text], videos=[clip.data], return_tensors="pt")["input_ids"][0].numpy()
    context = int((ids == processor.tokenizer.convert_tokens_to_ids("<IMG_CONTEXT>")).sum())
    assert context > 0 and result.shown["media_tokens"] == {"video": context, "image": 0}
    assert result.shown["prompt_tokens"] == ids.size and result.shown["video_frames"] == 4
