"""``omnieval bench engine``: the steady-state instances/s of the vLLM path against bare vLLM on the same prompts.

Runs of ``run_evaluation`` on the same synthetic benchmark with the ``vllm`` engine behind the model stage (Ray Data
request task, an engine actor per replica, Parquet parts), on a small seeded sample of the items and on all of them
(128 and 5,760 instances by default), give the marginal rate ``(n_all - n_small) / (t_all - t_small)``: the steady
state, with the start-up (Ray Data actors, the engine's model load) cancelled out. The start-up is listed apart
(``t_small - n_small / marginal``). Every figure is timed the same way: after a throwaway warm-up run (imports, the
Ray worker pool, the first compile), each size is run ``repeats`` times, alternating, each into a fresh output
(nothing resumed), and the best time is kept; the spread of the repeats is printed beside it.

The marginal is printed only where the difference of the two times is clearly larger than the noise
(``marginal_rate``): a difference within a few times the repeats' spread, or under a tenth of the small run's time,
is start-up noise, and the table says "not measured" (with both figures) instead of a rate: a near-zero or negative
difference would otherwise print an absurd or negative instances/s.

The limit is bare ``vllm.LLM.generate`` in one process on the same prompts, pre-built, media pre-decoded, after one
warm-up request (best of ``repeats``). The peer is the ``hf`` engine called one instance at a time (the way
lmms-eval's and VLMEvalKit's HF paths run), on the small sample (best of ``repeats``).

Targets: steady state >= 0.9 x bare vLLM; >= 5 x the peer. Where ``--model`` is not given, a tiny random-weight
Qwen2 is built (a text model: media become a note), so the harness runs anywhere; on a GPU give a real model folder
and ``--device cuda``. On CPU the engine gets a fixed KV cache (``engines/vllm_cpu.py``). On a 2-core CPU with a
tiny model, vLLM itself takes a core: the figure there measures the pipeline's overhead around a fast engine, not a
GPU deployment.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from omnieval.dev.marginal import MIN_FRACTION, NOISE_FACTOR, Marginal, marginal_rate  # noqa: F401 - re-exported

FULL = {"anchors": 30, "questions": 12, "small_items": 16, "repeats": 3}  # 5,760 and 128 instances
QUICK = {"anchors": 8, "questions": 6, "small_items": 4, "repeats": 2}  # 768 and 32 instances

TARGETS = {"bare": 0.9, "peer": 5.0}


def bench_engine(model: str | None = None, anchors: int | None = None, questions: int | None = None,
                 device: str = "cpu", vllm_options: str | None = None, workdir: str | None = None,
                 small_items: int | None = None, repeats: int | None = None, quick: bool = False) -> int:
    from omnieval.dev.bench_pipeline import bench_folder

    size = dict(QUICK if quick else FULL)
    for key, value in (("anchors", anchors), ("questions", questions), ("small_items", small_items),
                       ("repeats", repeats)):
        if value is not None:
            size[key] = value
    if size["repeats"] < 2:
        from omnieval.core.schema import InputError

        raise InputError("must be at least 2: the spread of the repeats is the noise the marginal rate is judged "
                         "against", field="--repeats")
    with bench_folder(workdir, "omnieval-bench-engine-") as (tmp, runs):
        return _bench_engine(model, size, device, vllm_options, tmp, runs)


def _timed(fn, repeats: int) -> list[float]:
    """The seconds of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def _bench_engine(model: str | None, size: dict, device: str, vllm_options: str | None, tmp: Path,
                  runs: Path) -> int:
    import os

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from omnieval.config import parse_run_config
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.engines import EngineRequest, create_engine
    from omnieval.engines.chat import label_token_ids
    from omnieval.engines.vllm_cpu import CPU_ENGINE_OPTIONS
    from omnieval.media.decode import decode_media
    from omnieval.run.pipeline import ensure_ray, run_evaluation
    from omnieval.run.plan import make_plan

    bench_dir = tmp / f"benchmark-{size['anchors']}x{size['questions']}"
    if not (bench_dir / "items.jsonl").exists():
        make_dissonance_benchmark(bench_dir, seed=0, n_anchors=size["anchors"], n_questions=size["questions"],
                                  splits=("real", "synthetic"))
    if model is None:
        from omnieval.dev.tiny_models import build_tiny_model

        model = str(build_tiny_model("qwen2", tmp / "tiny-qwen2", seed=0))
    options = {"path": model, "max_model_len": 4096}
    if device == "cpu":
        options |= CPU_ENGINE_OPTIONS
    options |= json.loads(vllm_options) if vllm_options else {}

    def run_config(name: str, limit: int | None):
        return parse_run_config({
            "benchmark": str(bench_dir), "output": str(runs / name), "prompts": ["zs"], "limit_items": limit,
            "models": [{"name": "vllm", "engine": "vllm", "batch_size": 64, "options": options,
                        "num_gpus": 1 if device != "cpu" else 0}]})

    def timed_run(name: str, limit: int | None) -> float:
        start = time.perf_counter()
        result = run_evaluation(run_config(name, limit), progress=False)
        seconds = time.perf_counter() - start
        if result.n_errors:
            raise RuntimeError(f"bench run {name}: {result.n_errors} errored rows: {result.error_examples[:1]}")
        return seconds

    small, full = run_config("small", size["small_items"]), run_config("full", None)
    n_small, n_full = make_plan(small, keep_blocks=False).n_instances, make_plan(full, keep_blocks=False).n_instances
    ensure_ray(full)
    warmup_s = timed_run("warmup", 2)  # imports, Ray's worker pool, the first compile: once, outside every timing
    times: dict[str, list[float]] = {"small": [], "full": []}
    for k in range(size["repeats"]):  # alternating, so a slow drift of the machine weighs on both sizes alike
        for name, limit in (("small", size["small_items"]), ("full", None)):
            times[name].append(timed_run(f"{name}-{k}", limit))  # a fresh output each time: nothing resumed
    marginal = marginal_rate(n_small, times["small"], n_full, times["full"])

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
    bare = _timed(lambda: engine._one_token(prompts, ids), size["repeats"])
    engine.close()

    sampled = {i.instance_id for i in make_plan(small).load_instances()}
    peer_requests = [r for r in requests if r.instance.instance_id in sampled]
    hf = create_engine("hf", model="hf", path=model, device=device, batch_size=1)
    hf.score(peer_requests[:1])  # warm-up, as for the others

    def loop():
        for r in peer_requests:
            hf.score([r])

    peer = _timed(loop, size["repeats"])
    print_table(model, device, size, warmup_s, vllm_load, n_small, n_full, times, marginal, bare,
                len(peer_requests), peer)
    return 0


def _spread(times: list[float]) -> str:
    return f"{min(times):.2f} (+{max(times) - min(times):.2f})"


def print_table(model: str, device: str, size: dict, warmup_s: float, vllm_load: float, n_small: int, n_full: int,
                times: dict, marginal: Marginal, bare: list[float], n_peer: int, peer: list[float]) -> None:
    """The table: rates from the best of each measurement's repeats; seconds as best (+ spread of the repeats)."""
    limit, peer_rate = n_full / min(bare), n_peer / min(peer)
    r = size["repeats"]
    steady_s = f"{marginal.seconds:.2f}" if marginal.rate is not None else ""  # a difference, shown where measured
    rows = [
        (f"pipeline, {n_small:,} instances (incl. start-up), best of {r}", n_small / min(times["small"]),
         _spread(times["small"])),
        (f"pipeline, {n_full:,} instances (incl. start-up), best of {r}", n_full / min(times["full"]),
         _spread(times["full"])),
        (f"pipeline, steady state: ({n_full:,} - {n_small:,}) / ({min(times['full']):.2f} - "
         f"{min(times['small']):.2f}) s", marginal.rate, steady_s),
        (f"bare vllm.LLM.generate, {n_full:,} pre-built prompts (limit), best of {r}", limit, _spread(bare)),
        (f"transformers loop, batch size 1, {n_peer:,} instances (peer), best of {r}", peer_rate, _spread(peer)),
    ]
    startup = (f"{min(times['small']) - n_small / marginal.rate:.1f} s" if marginal.rate is not None
               else "not measured")
    print(f"omnieval bench engine: model {model}, device {device}; warm-up run {warmup_s:.1f} s; start-up of a "
          f"pipeline run {startup}; bare vLLM model load {vllm_load:.1f} s")
    header = ("measurement", "inst/s", "seconds (+spread)", "vs bare vLLM", "vs HF loop")
    table = [header] + [(name, "not measured", secs, "", "") if rate is None else
                        (name, f"{rate:,.1f}", secs, f"{rate / limit:.3f}", f"{rate / peer_rate:.2f}")
                        for name, rate, secs in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for k, row in enumerate(table):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))
    if marginal.rate is None:
        print(f"steady state not measured: {marginal.why_not()}")
    for name, base, goal in (("steady state >= 0.9 x bare vLLM", limit, TARGETS["bare"]),
                             ("steady state >= 5 x the transformers loop", peer_rate, TARGETS["peer"])):
        if marginal.rate is None:
            print(f"target {name}: not measured")
        else:
            ratio = marginal.rate / base
            print(f"target {name}: {'met' if ratio >= goal else 'MISSED'} ({ratio:.3f})")
