"""A video's own soundtrack: a benchmark whose items name one video file with sound as both their video and their
audio (``omnieval datasets synth --soundtrack``), from the files to the plan, the refusal of a silent video, a
simulated run (counts and metrics against pandas), and the hf engine's inputs for the tiny Qwen2.5-Omni: the
interleaved layout and the audio placeholders against hand arithmetic, and the engine's tensors against a direct
``Qwen2_5OmniProcessor`` call with ``use_audio_in_video=True`` written out here."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from omnieval.config import parse_run_config
from omnieval.core.schema import InputError

SECONDS, RATE = 2.0, 16_000
# a 2 s waveform: 32,000 samples -> 200 Whisper frames (hop 160) -> 100 after the first stride-2 convolution -> 50
# after the stride-2 pooling: the audio tokens one soundtrack becomes
AUDIO_TOKENS = 50


@pytest.fixture(scope="module")
def st_bench(tmp_path_factory):
    from omnieval.datasets.synthetic import make_dissonance_benchmark

    return make_dissonance_benchmark(tmp_path_factory.mktemp("st") / "b", seed=0, n_anchors=2, n_questions=1,
                                     soundtrack=True)


def config(bench, out, models=None, **kw):
    return parse_run_config({"benchmark": str(bench), "output": str(out),
                             "models": models or [{"name": "sim", "engine": "simulated", "options": {"seed": 2}}],
                             "decode": {"num_frames": 4, "max_side": 96}, **kw})


def items(bench) -> list[dict]:
    return [json.loads(line) for line in (Path(bench) / "items.jsonl").read_text().splitlines()]


def test_each_anchor_is_one_clip_with_its_call_as_soundtrack(st_bench):
    import av

    from omnieval.media.decode import decode_audio

    rows = items(st_bench)
    assert len(rows) == 4 and all(r["media"]["video"] == r["media"]["audio"] for r in rows)
    files = sorted(p.relative_to(st_bench).as_posix() for p in (Path(st_bench) / "media").rglob("*") if p.is_file())
    assert files == sorted({r["media"]["video"] for r in rows}) and all(f.endswith("/clip.mp4") for f in files)
    assert json.loads((Path(st_bench) / "benchmark.json").read_text())["soundtrack"] is True
    for row in rows:
        path = Path(st_bench) / row["media"]["audio"]
        with av.open(str(path)) as box:
            assert [s.type for s in box.streams] == ["video", "audio"]
            raw = sum(f.samples for f in box.decode(audio=0))  # AAC decodes past the declared end
            rate = box.streams.audio[0].rate
        wave = decode_audio(path).data
        assert len(wave) == SECONDS * RATE and raw > SECONDS * rate  # trimmed to the stream's declared 2.0 s
        # the call's pitch, from the anchor's passage, is the soundtrack's strongest frequency
        hz = int(re.search(r"beeps at (\d+) Hz", row["media"]["text"]).group(1))
        spectrum = np.abs(np.fft.rfft(wave))
        assert abs(np.fft.rfftfreq(len(wave), 1 / RATE)[spectrum.argmax()] - hz) < 2


def test_the_plan_keys_the_picture_and_the_soundtrack_of_a_clip_apart(st_bench, tmp_path):
    from omnieval.run.plan import make_plan

    plan = make_plan(config(st_bench, tmp_path / "run"))
    clips = sorted({r["media"]["video"] for r in items(st_bench)})
    assert sorted(plan.media_specs) == sorted([*clips, *(c + "#audio" for c in clips)])
    for clip in clips:
        picture, sound = plan.media_specs[clip], plan.media_specs[clip + "#audio"]
        assert (picture.modality, sound.modality) == ("video", "audio") and picture.path == sound.path
        assert picture.key != sound.key
    instances = plan.load_instances()
    assert len(instances) == 4 * 8
    same = {i.instance_id for i in instances if i.segments[0].path == i.segments[1].path}
    # one clip's picture and sound exactly where video and audio come from one anchor: neither replaced, or both
    # (with two anchors a split, both are replaced by the same other anchor); condition C<video><audio><text>
    assert same == {i.instance_id for i in instances if i.condition[1] == i.condition[2]} and len(same) == 16
    assert {i.segments[1].ref for i in instances} == {c + "#audio" for c in clips}


def test_a_video_without_sound_named_as_audio_is_refused_before_any_model_work(st_bench, tmp_path):
    from omnieval.media.synth import moving_box_video
    from omnieval.run.plan import make_plan

    copy = tmp_path / "b"
    shutil.copytree(st_bench, copy)
    target = items(copy)[0]["media"]["audio"]
    moving_box_video(copy / target, colour="red")  # the same name, now a silent clip
    with pytest.raises(InputError, match="has no audio stream") as err:
        make_plan(config(copy, tmp_path / "run"))
    assert err.value.field == "media.audio" and err.value.file and err.value.item
    assert target in str(err.value)


def test_one_file_as_image_and_as_video_is_refused(st_bench, tmp_path):
    from omnieval.datasets.benchmark import _check_streams

    uses = {("m/a.gif", "image"): ("items.jsonl", "i1", "media.image"),
            ("m/a.gif", "video"): ("items.jsonl", "i2", "media.video")}
    with pytest.raises(InputError, match="used as video here and as image") as err:
        _check_streams(uses)
    assert (err.value.item, err.value.field) == ("i2", "media.video")
    _check_streams({("m/a.mp4", "audio"): uses[("m/a.gif", "image")], ("m/a.mp4", "video"): uses[("m/a.gif", "image")]})


@pytest.mark.slow
def test_simulated_run_decodes_each_stream_once_and_its_metrics_match_pandas(ray_session, st_bench, tmp_path):
    import pandas as pd
    import polars as pl

    from omnieval.run.pipeline import run_evaluation
    from omnieval.stats.metrics import metrics_table

    result = run_evaluation(config(st_bench, tmp_path / "run"), progress=False)
    assert result.n_errors == 0 and result.n_instances == 32 and result.n_rows == 32
    # four clips, each decoded once as a picture and once as a soundtrack, whatever the instances sharing them
    assert len(result.decode_counts) == 8 and set(result.decode_counts.values()) == {1}
    pred = pd.read_parquet(result.predictions_path)
    # what each row showed the model: the 4 decoded frames and the whole 2 s soundtrack (no tokens: no input ids)
    assert (pred["video_frames"] == 4).all() and (pred["audio_seconds"] == SECONDS).all()
    assert pred["media_tokens"].isna().all() and pred["prompt_tokens"].isna().all()
    table = metrics_table(pl.read_parquet(result.predictions_path), resamples=50)
    rows = [r for r in table.iter_rows(named=True) if r["model"] == "sim"]
    splits = {r["split"] for r in rows}
    scope = "all" if "all" in splits else sorted(splits)[0]
    scoped = pred if scope == "all" else pred[pred["split"] == scope]
    got = {(r["metric"], r["key"]): r["value"] for r in rows if r["split"] == scope}
    valid = scoped[scoped["choice"].notna()]
    correct = valid["choice"] == valid["target"]
    for condition in ("C000", "C110"):
        assert got[("accuracy", condition)] == pytest.approx(correct[valid["condition"] == condition].mean())
    for k in ("0", "3"):
        at_k = valid[valid["k"] == int(k)]
        assert got[("abstention_k", k)] == pytest.approx((at_k["choice"] == at_k["abstain_label"]).mean())
    by_condition = correct.groupby(valid["condition"]).mean()
    levels = {c: sum(ch == "1" for ch in c[1:]) for c in by_condition.index}
    assert got[("accuracy_k", "1")] == pytest.approx(by_condition[[c for c in levels if levels[c] == 1]].mean())
    assert 0 < correct.mean() < 1


@pytest.fixture(scope="module")
def omni_engine(tiny_models):
    from omnieval.engines import create_engine

    return create_engine("hf", model="tiny-omni", path=str(tiny_models("qwen2.5-omni")))


def decoded_requests(bench, tmp_path):
    """(instance, its decoded media by ref) of the benchmark's C000 instances and one replaced-audio instance."""
    from omnieval.media.decode import decode_media
    from omnieval.run.plan import make_plan

    plan = make_plan(config(bench, tmp_path / "run"))
    media = {ref: decode_media(s.path, s.modality, **dict(s.params)) for ref, s in plan.media_specs.items()}
    out = []
    for inst in plan.load_instances():
        if inst.condition in ("C000", "C010"):
            out.append((inst, {s.ref: media[s.ref] for s in inst.media_segments()}))
    return out


def test_hf_engine_interleaves_a_clip_with_its_own_soundtrack_only(omni_engine, st_bench, tmp_path):
    from omnieval.core.prompts import render_prompt
    from omnieval.engines import EngineRequest

    eng = omni_engine
    tok = eng.tokenizer
    ids = {t: tok.convert_tokens_to_ids(t) for t in ("<|AUDIO|>", "<|VIDEO|>", "<|audio_bos|>", "<|audio_eos|>",
                                                      "<|vision_bos|>", "<|vision_eos|>")}
    requests = decoded_requests(st_bench, tmp_path)
    assert len(requests) == 8
    for inst, media in requests:
        parts = render_prompt(inst, "zs")
        enc = eng.encode(media, parts, eng.prompt_text(parts))
        seq = enc.input_ids
        own = inst.segments[0].path == inst.segments[1].path
        assert own == (inst.condition == "C000") == enc.use_audio_in_video
        assert seq.count(ids["<|AUDIO|>"]) == AUDIO_TOKENS and enc.tensors["input_features"].shape[0] == 1
        v0, v1 = seq.index(ids["<|vision_bos|>"]), seq.index(ids["<|vision_eos|>"])
        inside = seq[v0 + 1:v1]
        if own:  # one block: <|audio_bos|>, the video tokens, then (2 s: one chunk) the audio tokens, <|audio_eos|>
            n_video = inside.count(ids["<|VIDEO|>"])
            assert inside == ([ids["<|audio_bos|>"]] + [ids["<|VIDEO|>"]] * n_video
                              + [ids["<|AUDIO|>"]] * AUDIO_TOKENS + [ids["<|audio_eos|>"]])
            assert seq.count(ids["<|audio_bos|>"]) == 1
        else:  # the replaced audio is another clip's soundtrack: its own placeholder after the video
            assert set(inside) == {ids["<|VIDEO|>"]}
            a0 = seq.index(ids["<|audio_bos|>"])
            assert a0 > v1 and seq[a0 + 1:a0 + 1 + AUDIO_TOKENS] == [ids["<|AUDIO|>"]] * AUDIO_TOKENS
    results = eng.score([EngineRequest(inst, media, "zs") for inst, media in requests])
    assert all(r.error is None for r in results)
    own = [r for (inst, _), r in zip(requests, results, strict=True) if inst.condition == "C000"]
    assert len({tuple(r.option_logprobs) for r in own}) == len(own)


def test_hf_engine_refuses_a_request_whose_ids_lost_the_soundtrack(omni_engine, st_bench, tmp_path, monkeypatch):
    from omnieval.engines import EngineRequest

    eng = omni_engine
    inst, media = next(r for r in decoded_requests(st_bench, tmp_path) if r[0].condition == "C000")

    class Forgetful:
        """The processor, but laying the video out without its soundtrack (as one ignoring the flag would)."""

        def __getattr__(self, name):
            return getattr(real, name)

        def __call__(self, **kwargs):
            return real(**{**kwargs, "use_audio_in_video": False})

    real = eng.processor
    monkeypatch.setattr(eng, "processor", Forgetful())
    (result,) = eng.score([EngineRequest(inst, media, "zs")])
    assert result.choice is None and result.error_kind == "media"
    assert "audio not in the model input: 0 audio tokens where 50 were expected" in result.error
    assert inst.segments[1].path in result.error


@pytest.mark.slow
def test_a_run_of_the_hf_engine_gives_each_row_what_the_engine_gives_on_media_decoded_here(
        ray_session, tiny_models, st_bench, tmp_path):
    """Through the pipeline (prefetch map, decode cache keyed ``path`` and ``path#audio``, the model stage), every
    row equals the engine called in this process on media decoded here: a soundtrack lookup that mixed up the
    picture and the sound, or lost the audio, would give other logprobs or an error."""
    import polars as pl

    from omnieval.engines import EngineRequest
    from omnieval.media.decode import decode_media
    from omnieval.run.pipeline import run_evaluation
    from omnieval.run.plan import make_plan

    models = [{"name": "tiny-omni", "engine": "hf", "options": {"path": str(tiny_models("qwen2.5-omni"))}}]
    cfg = config(st_bench, tmp_path / "run", models=models)
    result = run_evaluation(cfg, progress=False)
    assert result.ok and result.n_errors == 0
    rows = {r["instance_id"]: r for r in pl.read_parquet(result.predictions_path).to_dicts()}
    plan = make_plan(cfg)  # the media as the run decoded them for this model (its recipe's index rule included)
    media = {ref: decode_media(s.path, s.modality, **dict(s.params))
             for ref, s in plan.specs_for("tiny-omni").items()}
    instances = plan.load_instances()
    assert len(rows) == len(instances) == 32
    # the engine as the run builds it: its recipe's options (the Qwen2.5-Omni card's system prompt) included
    from omnieval.engines import create_engine
    from omnieval.run.recipe import with_recipe_options

    built = with_recipe_options(cfg, cfg.models[0])
    assert built.options.get("system_prompt")
    engine = create_engine("hf", model="tiny-omni", **built.options)
    want = engine.score([EngineRequest(i, {s.ref: media[s.ref] for s in i.media_segments()}, "zs")
                         for i in instances])
    for inst, w in zip(instances, want, strict=True):
        row = rows[inst.instance_id]
        assert w.error is None and row["error"] is None and row["choice"] == w.choice
        np.testing.assert_allclose(row["option_logprobs"], w.option_logprobs, atol=1e-4)
        # what the model was shown reaches the row through the model stage: the engine's own figures, the 2 s
        # soundtrack heard and its 50 audio tokens (Whisper frames through two stride-2 stages) where it is shown
        assert {k: row[k] for k in w.shown} == {**w.shown, "media_tokens": {"image": None, **w.shown["media_tokens"]}}
        assert row["audio_seconds"] == SECONDS and row["media_tokens"]["audio"] == AUDIO_TOKENS


def clip(seed: int, seconds: float, frames: int = 8):
    """A random 160 x 120 clip of ``frames`` frames over ``seconds`` and its soundtrack (noise)."""
    from omnieval.media.decoded import DecodedMedia

    rng = np.random.default_rng(seed)
    video = DecodedMedia("video", rng.integers(0, 255, (frames, 120, 160, 3), np.uint8), f"v{seed}", path="c.mp4",
                         fps=frames / seconds)
    audio = DecodedMedia("audio", (0.1 * rng.standard_normal(int(RATE * seconds))).astype(np.float32), f"a{seed}",
                         path="c.mp4", sample_rate=RATE)
    return video, audio


def own_soundtrack_instance():
    from omnieval.core.schema import Instance, Segment

    return Instance(instance_id="c", item_id="i", protocol="dissonance", benchmark="b", split="s", condition="C000",
                    segments=[Segment(kind="media", modality="video", path="c.mp4"),
                              Segment(kind="media", modality="audio", path="c.mp4"),
                              Segment(kind="text", text="Text: a passage")],
                    question="Which is it?", option_labels=list("ABCDE"),
                    option_texts=["red", "blue", "green", "cat", "I cannot answer"], target="A")


def test_hf_engine_chunks_a_5_s_clip_with_its_soundtrack_by_hand(omni_engine):
    """8 frames over 5 s (1.6 fps): 4 temporal patches of 1.25 s, at positions 0, 31.25, 62.5, 93.75 (25 a second),
    of 10 x 14 merged tokens each (160 x 120 upsized to 392 x 280); 5 s of audio: 500 mel frames -> 250 -> 125
    tokens at positions 0..124. Cut into 50-position chunks and alternated, video first: V 280, A 50, V 280, A 50,
    A 25 (the last audio chunk has no video beside it, so its run joins the one before)."""
    from omnieval.core.prompts import render_prompt

    eng = omni_engine
    video, audio = clip(5, 5.0)
    parts = render_prompt(own_soundtrack_instance(), "zs")
    enc = eng.encode({"c.mp4": video, "c.mp4#audio": audio}, parts, eng.prompt_text(parts))
    tok = eng.tokenizer
    seq = enc.input_ids
    start = seq.index(tok.convert_tokens_to_ids("<|audio_bos|>")) + 1
    inside = tok.convert_ids_to_tokens(seq[start:seq.index(tok.convert_tokens_to_ids("<|audio_eos|>"))])
    runs = []
    for token in inside:
        if runs and runs[-1][0] == token:
            runs[-1][1] += 1
        else:
            runs.append([token, 1])
    assert runs == [["<|VIDEO|>", 280], ["<|AUDIO|>", 50], ["<|VIDEO|>", 280], ["<|AUDIO|>", 50 + 25]]
    assert enc.tensors["video_second_per_grid"].tolist() == [1.25]


@pytest.mark.parametrize("seconds", [2.0, 5.0, 7.3])  # one chunk of 2 s; 3 chunks; audio chunks past the video's
def test_hf_inputs_equal_the_processor_called_with_use_audio_in_video(omni_engine, tiny_models, seconds):
    """The engine's ids, tensors and the thinker's positions (``get_rope_index``) equal those of the processor
    called directly on the same text, frames and soundtrack."""
    import torch
    from transformers import AutoProcessor

    from omnieval.core.prompts import render_prompt

    eng = omni_engine
    processor = AutoProcessor.from_pretrained(tiny_models("qwen2.5-omni"))
    video, audio = clip(1, seconds)
    parts = render_prompt(own_soundtrack_instance(), "zs")
    text = eng.prompt_text(parts)
    assert text.count("<|VIDEO|>") == 1 and "<|AUDIO|>" not in text  # the soundtrack rides in the video
    enc = eng.encode({"c.mp4": video, "c.mp4#audio": audio}, parts, text)
    ref = processor(text=[text], videos=[video.data], audio=[audio.data], fps=video.fps, use_audio_in_video=True,
                    return_tensors="pt")
    assert enc.use_audio_in_video and enc.input_ids == ref["input_ids"][0].tolist()
    ours = eng._inputs([enc])
    assert ours["use_audio_in_video"] is True
    for key in ("pixel_values_videos", "video_grid_thw", "video_second_per_grid", "input_features",
                "feature_attention_mask"):
        assert torch.equal(ours[key], torch.as_tensor(ref[key])), key
    pos, delta = eng.net.get_rope_index(ours["input_ids"], None, ours["video_grid_thw"], ours["attention_mask"], True,
                                        ours["feature_attention_mask"].sum(-1), ours["video_second_per_grid"])
    ref_pos, ref_delta = eng.net.get_rope_index(ref["input_ids"], None, ref["video_grid_thw"],
                                                ref["attention_mask"], True, ref["feature_attention_mask"].sum(-1),
                                                torch.as_tensor(ref["video_second_per_grid"]))
    assert torch.equal(pos, ref_pos) and torch.equal(delta, ref_delta)
    # the audio tokens: ceil(samples / 160) Whisper frames through two stride-2 stages
    mel = -(-int(RATE * seconds) // 160)
    assert enc.input_ids.count(eng.audio_token_id) == ((mel - 1) // 2 + 1 - 2) // 2 + 1
