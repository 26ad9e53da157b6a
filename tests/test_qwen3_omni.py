"""Qwen3-Omni on the transformers engine (the tiny build, ``omnieval models tiny --arch qwen3-omni``): the inputs it
makes against the published arithmetic and against its processor called directly, batches against one prompt at a
time, why each clip is followed by silence, and the positions the vLLM engine gives the model
(``vllm_qwen3_positions.reference_positions``, no vLLM needed) against transformers' own ``get_rope_index``, on
prompts the processor makes and on hand-made ones written out here. (Both engines together:
tests/test_vllm_qwen3_omni.py.)"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from omnieval.core.prompts import render_prompt  # noqa: E402
from omnieval.core.schema import Instance, Segment  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.families.qwen_omni import qwen3_omni_audio_tokens, qwen3_omni_vision_tokens  # noqa: E402
from omnieval.media.decoded import DecodedMedia  # noqa: E402

PAD = {"image": "<|image_pad|>", "video": "<|video_pad|>", "audio": "<|audio_pad|>"}


def instance(*media: tuple[str, str], iid: str = "i") -> Instance:
    segments = [Segment(kind="media", modality=m, path=p) for m, p in media]
    return Instance(instance_id=iid, item_id="i", protocol="dissonance", benchmark="b", split="s", condition="C000",
                    segments=[*segments, Segment(kind="text", text="Text: a passage")], question="Which is it?",
                    option_labels=list("ABCDE"), option_texts=["red", "blue", "green", "cat", "I cannot answer"],
                    target="A")


def clip(seed: int, seconds: float, frames: int = 8, samples: int | None = None, side: tuple = (120, 160)):
    rng = np.random.default_rng(seed)
    video = DecodedMedia("video", rng.integers(0, 255, (frames, *side, 3), np.uint8), f"v{seed}", path="c.mp4",
                         fps=frames / seconds)
    wave = (0.1 * rng.standard_normal(samples or int(16000 * seconds))).astype(np.float32)
    return video, DecodedMedia("audio", wave, f"a{seed}", path="c.mp4", sample_rate=16000)


IMAGE = DecodedMedia("image", np.random.default_rng(9).integers(0, 255, (56, 84, 3), np.uint8), "i9")
V1, A1 = clip(1, 2.0)  # 4 fps: frames 6.5 positions apart
V2, A2 = clip(2, 7.3, samples=116_813)  # 8 / 7.3 fps; a waveform that is no whole number of hops


@pytest.fixture(scope="module")
def hf(tiny_models):
    return create_engine("hf", model="q3", path=str(tiny_models("qwen3-omni")))


def encode(engine, request: EngineRequest):
    parts = render_prompt(request.instance, request.prompt_style)
    return engine.encode(request.media, parts, engine.prompt_text(parts))


CASES = {
    "image": EngineRequest(instance(("image", "im")), {"im": IMAGE}, "zs"),
    "audio": EngineRequest(instance(("audio", "au")), {"au": A2}, "zs"),
    "video": EngineRequest(instance(("video", "v")), {"v": V1}, "zs"),
    "soundtrack": EngineRequest(instance(("video", "c.mp4"), ("audio", "c.mp4")), {"c.mp4": V2, "c.mp4#audio": A2},
                                "zs"),
    "several": EngineRequest(instance(("image", "im"), ("audio", "a"), ("audio", "b"), ("video", "v")),
                             {"im": IMAGE, "a": A1, "b": A2, "v": V1}, "zs"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_placeholders_follow_the_published_arithmetic(hf, case):
    request = CASES[case]
    enc = encode(hf, request)
    media = [request.media[s.ref] for s in request.instance.media_segments()]
    want = {PAD["image"]: sum(qwen3_omni_vision_tokens(m) for m in media if m.modality == "image"),
            PAD["video"]: sum(qwen3_omni_vision_tokens(m) for m in media if m.modality == "video"),
            PAD["audio"]: sum(qwen3_omni_audio_tokens(len(m.data)) for m in media if m.modality == "audio")}
    ids = {token: hf.tokenizer.convert_tokens_to_ids(token) for token in PAD.values()}
    assert {token: enc.input_ids.count(ids[token]) for token in want} == want
    assert enc.use_audio_in_video is (case == "soundtrack")


def test_by_hand_the_counts_of_one_clip():
    """116,813 samples + silence -> 116,960 (731 hops of 160, 147 samples of silence): 700 frames in 7 windows of
    13 tokens, 31 left -> 16 -> 8 -> 4; a 120 x 160 frame grows to the 128-patch minimum, 320 x 448 = 20 x 28
    patches of 16, 140 merged, x 4 frame pairs."""
    assert math.ceil((116_813 + 41) / 160) == 731 and qwen3_omni_audio_tokens(116_813) == 7 * 13 + 4 == 95
    assert qwen3_omni_vision_tokens(V2) == 4 * 140


def test_the_engine_gives_the_processor_each_clip_followed_by_silence(hf):
    """The engine's ids and tensors for a clip with its soundtrack (one video placeholder) equal the processor's own
    on that prompt, the waveform padded by hand to 116,960 samples (731 whole hops, 147 samples of silence)."""
    enc = encode(hf, CASES["soundtrack"])
    padded = np.concatenate([A2.data, np.zeros(116_960 - 116_813, np.float32)])
    text = hf.prompt_text(render_prompt(CASES["soundtrack"].instance))
    assert text.count("<|vision_start|><|video_pad|><|vision_end|>") == 1 and "<|audio_pad|>" not in text
    want = hf.processor(text=[text], videos=[V2.data], audio=[padded], fps=8 / 7.3, do_sample_frames=False,
                        use_audio_in_video=True, return_tensors="pt")
    assert enc.input_ids == want["input_ids"][0].tolist()
    assert int(want["feature_attention_mask"].sum()) == 731
    for key, value in enc.tensors.items():
        assert torch.equal(value, want[key]), key


def test_silence_after_a_clip_makes_its_features_the_same_alone_or_padded(hf):
    """Why the silence: padded to a longer clip of its batch (the processor pads with zeros), a clip's last mel frame
    changes unless its own end is silent; followed by the engine's silence it does not."""
    extract = hf.processor.feature_extractor
    longer = np.random.default_rng(5).standard_normal(40_000).astype(np.float32)

    def frames(wave, with_longer: bool):
        batch = [wave, longer] if with_longer else [wave]
        out = extract(batch, sampling_rate=16000, padding=True, truncation=False, return_attention_mask=True,
                      return_tensors="np")
        n = int(out["attention_mask"][0].sum())
        return out["input_features"][0][:, :n]

    raw = A1.data[:16_050]
    assert not np.array_equal(frames(raw, False), frames(raw, True))
    quiet = hf.family.processor_audio(raw)
    assert len(quiet) == 16_160 and not quiet[16_050:].any()
    assert np.array_equal(frames(quiet, False), frames(quiet, True))


def test_a_batch_scores_as_its_prompts_one_by_one(hf):
    """Clips of different lengths in one forward pass: their features padded to the longest, masked out."""
    requests = list(CASES.values())
    together = hf.score(requests)
    for request, got in zip(requests, together, strict=True):
        alone = hf.score([request])[0]
        assert got.error is None and alone.error is None
        np.testing.assert_allclose(got.option_logprobs, alone.option_logprobs, atol=1e-5)
    assert len({tuple(np.round(r.option_logprobs, 4)) for r in together}) == len(requests)  # the media matter


def test_videos_at_different_rates_get_their_own_seconds_per_frame_pair(hf):
    request = EngineRequest(instance(("video", "a"), ("video", "b")), {"a": V1, "b": V2}, "zs")
    enc = encode(hf, request)
    assert enc.tensors["video_second_per_grid"].tolist() == pytest.approx([2 / 4, 2 * 7.3 / 8])


# -- positions: vllm_qwen3_positions.reference_positions against transformers' get_rope_index ----------------------


def features_of(ids: list[int], tokens: dict, enc) -> list[tuple]:
    """``(offset, modality, data)`` of each media placeholder of a prompt, as vLLM's ``iter_mm_features`` yields them,
    read from the ids and the processor's tensors: an image or video at its first pad token, a standalone clip at its
    first audio pad, a video with its soundtrack at the ``<|audio_start|>`` after its ``<|vision_start|>``."""
    grids = {"image": iter(enc.tensors.get("image_grid_thw", [])), "video": iter(enc.tensors.get("video_grid_thw", []))}
    seconds = iter(enc.tensors.get("video_second_per_grid", []))
    frames = iter(enc.tensors["feature_attention_mask"].sum(-1).tolist()) if "feature_attention_mask" in enc.tensors \
        else iter([])
    out = []
    for i, token in enumerate(ids[:-1]):
        following = ids[i + 1]
        if token == tokens["<|vision_start|>"] and following in (tokens["<|image_pad|>"], tokens["<|video_pad|>"]):
            kind = "image" if following == tokens["<|image_pad|>"] else "video"
            t, h, w = next(grids[kind]).tolist()
            data = {"grid_t": t, "grid_h": h // 2, "grid_w": w // 2, "t_factor": 13.0}
            if kind == "video":
                data["t_factor"] = float(next(seconds)) * 13
            out.append((i + 1, kind, data))
        elif token == tokens["<|vision_start|>"] and following == tokens["<|audio_start|>"]:
            t, h, w = next(grids["video"]).tolist()
            out.append((i + 1, "video", {"grid_t": t, "grid_h": h // 2, "grid_w": w // 2, "use_audio_in_video": True,
                                         "t_factor": float(next(seconds)) * 13, "audio_feature_length": next(frames)}))
        elif token == tokens["<|audio_start|>"] and following == tokens["<|audio_pad|>"]:
            out.append((i + 1, "audio", {"audio_feature_length": next(frames)}))
    return out


def qwen3_tokens(frames: int) -> int:
    """The audio tower's tokens for ``frames`` mel frames (transformers' own function)."""
    from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import _get_feat_extract_output_lengths

    return int(_get_feat_extract_output_lengths(torch.tensor(frames)))


@pytest.mark.parametrize("case", [*CASES, "short soundtrack", "two videos"])
def test_the_vllm_positions_are_transformers_positions(hf, case):
    """For each prompt: the positions and delta ``reference_positions`` computes from the media as vLLM describes
    them equal, to the bit, what the model's ``get_rope_index`` computes from the processor's ids and tensors (float
    positions: 6.5 apart at 4 fps). The short soundtrack (2 frames of 16 x 16 merged patches, 0.1 s of audio: 2
    audio tokens) ends its block with audio whose last position is below the video's widest one."""
    from omnieval.engines.vllm_qwen3_positions import reference_positions

    if case == "short soundtrack":
        video, audio = clip(3, 0.1, frames=2, samples=1600, side=(512, 512))
        request = EngineRequest(instance(("video", "c.mp4"), ("audio", "c.mp4")), {"c.mp4": video,
                                                                                    "c.mp4#audio": audio}, "zs")
    elif case == "two videos":
        request = EngineRequest(instance(("video", "a"), ("video", "b")), {"a": V1, "b": V2}, "zs")
    else:
        request = CASES[case]
    enc = encode(hf, request)
    tokens = {t: hf.tokenizer.convert_tokens_to_ids(t) for t in
              ("<|vision_start|>", "<|audio_start|>", *PAD.values())}
    inputs = hf._inputs([enc])
    lengths = inputs["feature_attention_mask"].sum(-1) if "feature_attention_mask" in inputs else None
    want, want_delta = hf.net.get_rope_index(inputs["input_ids"], inputs.get("image_grid_thw"),
                                             inputs.get("video_grid_thw"), inputs["attention_mask"],
                                             enc.use_audio_in_video, lengths, inputs.get("video_second_per_grid"))
    got, delta = reference_positions(len(enc.input_ids), features_of(enc.input_ids, tokens, enc), 13, qwen3_tokens)
    assert torch.equal(got, want[:, 0]) and torch.equal(delta, want_delta[0, 0])
    if case in ("video", "soundtrack", "several"):
        assert not torch.equal(got, got.floor())  # fractional positions: what vLLM would cut


def test_reference_positions_on_hand_made_prompts():
    """Written out by hand. (1) t t | a video of 2 frame pairs of 1 x 2 merged patches, 6.5 positions apart | eos t:
    rows t, h, w. (2) t vs | as, a 3 x 3 video of one frame pair, 2 audio tokens | ae ve t: every video token (time
    3) comes before the audio (3, 4); the end tokens follow the last piece laid, the audio (4), not the video's
    widest position (5): ae 5, ve 6, then the text at 7 (vLLM's own code would put ae at 6)."""
    from omnieval.engines.vllm_qwen3_positions import reference_positions

    video = {"grid_t": 2, "grid_h": 1, "grid_w": 2, "t_factor": 6.5}
    got, delta = reference_positions(8, [(2, "video", video)], 13, None)
    assert got.tolist() == [[0, 1, 2, 2, 8.5, 8.5, 9.5, 10.5],
                            [0, 1, 2, 2, 2, 2, 9.5, 10.5],
                            [0, 1, 2, 3, 2, 3, 9.5, 10.5]]
    assert float(delta) == 10.5 + 1 - 8

    block = {"grid_t": 1, "grid_h": 3, "grid_w": 3, "t_factor": 6.5, "use_audio_in_video": True,
             "audio_feature_length": 2}
    got, delta = reference_positions(17, [(2, "video", block)], 13, lambda frames: frames)
    assert got.tolist() == [[0, 1, 2] + [3] * 9 + [3, 4] + [5, 6] + [7],
                            [0, 1, 2] + [3, 3, 3, 4, 4, 4, 5, 5, 5] + [3, 4] + [5, 6] + [7],
                            [0, 1, 2] + [3, 4, 5] * 3 + [3, 4] + [5, 6] + [7]]
    assert float(delta) == 7 + 1 - 17


def test_fractional_positions_survive_the_int64_code_and_whole_steps_added_to_it():
    """``encode``/``decode`` keep float32 positions exactly, and adding whole numbers to a code (what vLLM's runner
    does for each generated token: position = index + delta) adds them to the position."""
    from omnieval.engines.vllm_qwen3_positions import decode, encode

    values = torch.tensor([0.0, 1.0, 6.5, 23.725, 1234.5678, -50.5, 70000.25], dtype=torch.float32)
    codes = encode(values)
    assert codes.dtype == torch.int64 and torch.equal(decode(codes[:-2]), values[:-2])
    assert torch.equal(encode(torch.tensor([3.0, 17.0])), torch.tensor([3, 17]))  # whole positions as themselves
    delta = encode(torch.tensor(-50.5))
    assert decode(delta + 60) == 9.5 and decode(delta + 1000) == 949.5
    assert decode(encode(values[-1:]) + 5)[0] == 70005.25
