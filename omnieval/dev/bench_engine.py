"""``omnieval bench engine``: the steady-state instances/s of the vLLM path against bare vLLM on the same prompts.

Two runs of ``run_evaluation`` on the same synthetic benchmark with the ``vllm`` engine behind the model stage (Ray
Data request task, an engine actor per replica, Parquet parts), one on a small seeded sample of the items and one on
all of them (5,760 instances by default), give the marginal rate ``(n_all - n_small) / (t_all - t_small)``: the
steady state, with the start-up (Ray Data actors, the engine's model load, the first compile) cancelled out. The
start-up is listed apart (``t_small - n_small / marginal``). The limit is bare ``vllm.LLM.generate`` in one process on
the same prompts, pre-built, media pre-decoded, after one warm-up request. The peer is the ``hf`` engine called one
instance at a time (the way lmms-eval's and VLMEvalKit's HF paths run), on the small sample.

Targets: steady state >= 0.9 x bare vLLM; >= 5 x the peer. Where ``--model`` is not given, a tiny random-weight
Qwen2 is built (a text model: media become a note), so the harness runs anywhere; on a GPU give a real model folder
and ``--device cuda``. On a 2-core CPU with a tiny model, vLLM itself takes a core: the figure there measures the
pipeline's overhead around a fast engine, not a GPU deployment.
"""

from __future__ import annotations

import json
import time
from pathlib import Path


def bench_engine(model: str | None = None, anchors: int = 30, questions: int = 12, device: str = "cpu",
                 vllm_options: str | None = None, workdir: str | None = None, small_items: int = 64) -> int:
    from omnieval.dev.bench_pipeline import bench_folder

    with bench_folder(workdir, "omnieval-bench-engine-") as (tmp, runs):
        return _bench_engine(model, anchors, questions, device, vllm_options, tmp, runs, small_items)


def _bench_engine(model: str | None, anchors: int, questions: int, device: str, vllm_options: str | None,
                  tmp: Path, runs: Path, small_items: int) -> int:
    import os

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from omnieval.config import parse_run_config
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.engines import EngineRequest, create_engine
    from omnieval.engines.chat import label_token_ids
    from omnieval.media.decode import decode_media
    from omnieval.pipeline import ensure_ray, run_evaluation
    from omnieval.plan import make_plan

    bench_dir = tmp / "benchmark"
    if not (bench_dir / "items.jsonl").exists():
        make_dissonance_benchmark(bench_dir, seed=0, n_anchors=anchors, n_questions=questions,
                                  splits=("real", "synthetic"))
    if model is None:
        from omnieval.dev.tiny_models import build_tiny_model

        model = str(build_tiny_model("qwen2", tmp / "tiny-qwen2", seed=0))
    options = {"path": model, "max_model_len": 4096}
    if device == "cpu":
        options |= {"dtype": "float32", "gpu_memory_utilization": 0.1, "enforce_eager": True}
    options |= json.loads(vllm_options) if vllm_options else {}

    def run_config(name: str, limit: int | None):
        return parse_run_config({
            "benchmark": str(bench_dir), "output": str(runs / name), "prompts": ["zs"], "limit_items": limit,
            "models": [{"name": "vllm", "engine": "vllm", "batch_size": 64, "options": options,
                        "num_gpus": 1 if device != "cpu" else 0}]})

    small, full = run_config("small", small_items), run_config("full", None)
    n_small, n_full = make_plan(small, keep_blocks=False).n_instances, make_plan(full, keep_blocks=False).n_instances
    ensure_ray(full)
    timed = {}
    for name, config in (("small", small), ("full", full)):
        start = time.perf_counter()
        result = run_evaluation(config, progress=False)
        timed[name] = time.perf_counter() - start
        if result.n_errors:
            raise RuntimeError(f"bench run {name}: {result.n_errors} errored rows: {result.error_examples[:1]}")
    marginal = (n_full - n_small) / (timed["full"] - timed["small"])
    startup = timed["small"] - n_small / marginal

    plan = make_plan(full)
    instances = plan.load_instances()
    decoded = {p: decode_media(s.path, s.modality, **dict(s.params)) for p, s in plan.media_specs.items()}
    requests = [EngineRequest(i, {s.ref: decoded[s.ref] for s in i.segments if s.kind == "media"}, "zs")
                for i in instances]
    start = time.perf_counter()
    engine = create_engine("vllm", model="bare", **options)
    vllm_load = time.perf_counter() - start
    prompts = [engine._prompt(r) for r in requests]
    ids = [label_token_ids(engine.tokenizer, r.instance.option_labels) for r in requests]
    # One warm-up request first: the first call of a fresh LLM compiles and allocates (seconds on CPU), which is
    # start-up, not the throughput limit this row stands for.
    engine._one_token(prompts[:1], ids[:1])
    start = time.perf_counter()
    engine._one_token(prompts, ids)
    bare_s = time.perf_counter() - start
    engine.close()

    sampled = {i.instance_id for i in make_plan(small).load_instances()}
    peer_requests = [r for r in requests if r.instance.instance_id in sampled]
    hf = create_engine("hf", model="hf", path=model, device=device, batch_size=1)
    start = time.perf_counter()
    for r in peer_requests:
        hf.score([r])
    loop_s = time.perf_counter() - start

    limit, peer = n_full / bare_s, len(peer_requests) / loop_s
    rows = [
        (f"pipeline, {n_small} instances (incl. start-up)", n_small / timed["small"], timed["small"]),
        (f"pipeline, {n_full} instances (incl. start-up)", n_full / timed["full"], timed["full"]),
        ("pipeline, steady state (marginal between the two)", marginal, (n_full - n_small) / marginal),
        (f"bare vllm.LLM.generate, {n_full} pre-built prompts (limit)", limit, bare_s),
        (f"transformers loop, batch size 1, {len(peer_requests)} instances (peer)", peer, loop_s),
    ]
    print(f"omnieval bench engine: model {model}, device {device}; start-up of a pipeline run {startup:.1f} s; "
          f"bare vLLM model load {vllm_load:.1f} s")
    header = ("measurement", "inst/s", "seconds", "vs bare vLLM", "vs HF loop")
    table = [header] + [(name, f"{rate:,.1f}", f"{secs:.2f}", f"{rate / limit:.3f}", f"{rate / peer:.2f}")
                        for name, rate, secs in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for k, row in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        if k == 0:
            print("  ".join("-" * w for w in widths))
    for name, ratio, goal in (("steady state >= 0.9 x bare vLLM", marginal / limit, 0.9),
                              ("steady state >= 5 x the transformers loop", marginal / peer, 5.0)):
        print(f"target {name}: {'met' if ratio >= goal else 'MISSED'} ({ratio:.3f})")
    return 0
