"""``omnieval bench gpu``: one GPU's figures for the ``hf`` engine on a real-size omni model, and the decode cores
that keep it fed.

What it measures (each figure printed with the GPU, driver, torch and transformers versions, and written as JSON
with ``--out``):

1. **Throughput**: a random-weight Qwen2.5-Omni thinker of the released 7B architecture (``SIZES['7b']``: the
   published config's dimensions; nothing downloaded) through this project's ``hf`` engine in bfloat16, on the
   synthetic dissonance benchmark's zero-shot prompts with their media decoded beforehand. ``engine.score`` at the
   engine's batch size (the limit: what a run's engine actor does per block) against the same engine at batch size
   1 (the peer: how lmms-eval and VLMEvalKit run an HF model, one instance at a time). Target: batched / batch-1
   >= 5. The processor's share (prompt encoding and media preprocessing on the CPU, inside ``score``) is timed
   apart, so a low ratio says where the time goes.
2. **Memory**: the weights, the peak while scoring at the batch size, and the largest batch of these prompts whose
   forward pass fits (doubling until the GPU refuses, then halving the gap).
3. **Decode**: distinct media files decoded per second per CPU core with the project's decode settings (8 frames
   of at most 320 px per video, 16 kHz audio), one process per core, and the cores one GPU needs so decoding never
   starves it: ``instances/s x media per instance / decodes per second per core``. Shared media are decoded once
   per run (the object-store cache), so the figure is also given per distinct medium of the benchmark.

The weights are random (``HFEngine._build_net`` is the one step replaced: built on the GPU from the config instead
of read from disk) so that no checkpoint is needed; the tokenizer is this project's small BPE
(``dev/tiny_models.build_tokenizer``), so prompts have a few more text tokens than Qwen's own tokenizer gives them;
the media tokens, which dominate, are the released processor's (``OMNI_PROCESSOR_CONFIG``). Speed does not depend
on the weights' values. ``--size tiny`` runs the same measurement with the tiny test model on the CPU (how the
test suite exercises this command); its figures say nothing about a GPU.

The lent GPU machine has no Ray, vLLM, PyAV or polars: this command needs none but PyAV (for the decode figures and
the media check) and pydantic, carried as wheels there (docs/gpu.md).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from contextlib import contextmanager
from pathlib import Path

# The released Qwen2.5-Omni-7B thinker's dimensions (its config.json; transformers' Qwen2_5Omni* configs default to
# the same text and audio sizes). ``tiny`` is the test model's.
SIZES = {
    "7b": {
        "text": {"hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28,
                 "num_key_value_heads": 4, "max_position_embeddings": 32768, "rms_norm_eps": 1e-6,
                 "vocab_size": 152064,
                 "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0,
                                     "mrope_section": [16, 24, 24]}},
        "vision": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16,
                   "out_hidden_size": 3584, "fullatt_block_indexes": [7, 15, 23, 31], "window_size": 112,
                   "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3},
        "audio": {"num_mel_bins": 128, "encoder_layers": 32, "encoder_attention_heads": 20, "encoder_ffn_dim": 5120,
                  "d_model": 1280, "output_dim": 3584, "n_window": 100, "max_source_positions": 1500},
    },
    "tiny": None,  # dev/tiny_models' qwen2.5-omni sizes
}
TARGET_RATIO = 5.0
DEFAULTS = {"batch_size": 32, "instances": 128, "peer_instances": 32, "max_batch": 512, "decode_seconds": 20.0}


def write_model_folder(size: str, out: Path) -> Path:
    """A Qwen2.5-Omni model folder without weights: ``config.json`` of the given size, the tokenizer and the
    released processor configuration. The engine builds the weights (``RandomWeightHFEngine``)."""
    from omnieval.demo import tiny_model as demo_model
    from omnieval.dev import tiny_models as tm

    out.mkdir(parents=True, exist_ok=True)
    if size == "tiny":
        return tm.build_tiny_model("qwen2.5-omni", out, seed=0)
    tok = demo_model.build_tokenizer(0, media_tokens=True)
    dims = SIZES[size]
    ids = demo_model._token_ids(tok)
    text = {**dims["text"], "tie_word_embeddings": False, "bos_token_id": ids["pad"], "eos_token_id": ids["eos"],
            "pad_token_id": ids["pad"]}
    config = demo_model.qwen25_omni_config(tok, text, dict(dims["vision"]), dict(dims["audio"]), 0.02)
    config.architectures = ["Qwen2_5OmniModel"]
    config.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "processor_config.json").write_text(json.dumps(demo_model.OMNI_PROCESSOR_CONFIG, indent=2, sort_keys=True))
    return out


def random_weight_engine(folder: Path, device: str, dtype: str, batch_size: int):
    """The ``hf`` engine with its network built from the folder's config, random, directly on ``device`` (a
    real-size checkpoint would be 18 GB to write and read for figures that do not depend on the weights)."""
    import torch

    from omnieval.engines.hf import HFEngine

    class RandomWeightHFEngine(HFEngine):
        def _build_net(self, model_class):
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(self.path)
            if (self.path / "model.safetensors").exists():  # the tiny test model: its own weights
                return model_class.from_pretrained(self.path, dtype=self.dtype)
            config = getattr(config, "thinker_config", config)
            with torch.device(self.device):
                return model_class._from_config(config, dtype=self.dtype)

    return RandomWeightHFEngine("bench", path=str(folder), dtype=dtype, device=device, batch_size=batch_size)


def bench_gpu(size: str = "7b", device: str = "cuda", dtype: str = "bfloat16", benchmark: str | None = None,
              workdir: str | None = None, out: str | None = None, batch_size: int | None = None,
              instances: int | None = None, peer_instances: int | None = None, max_batch: int | None = None,
              decode_seconds: float | None = None, skip: tuple[str, ...] = ()) -> int:
    from omnieval.dev.bench_pipeline import bench_folder

    opts = dict(DEFAULTS)
    for key, value in (("batch_size", batch_size), ("instances", instances), ("peer_instances", peer_instances),
                       ("max_batch", max_batch), ("decode_seconds", decode_seconds)):
        if value is not None:
            opts[key] = value
    with bench_folder(workdir, "omnieval-bench-gpu-") as (tmp, _runs):
        results = {"versions": versions(device), "size": size, "device": device, "dtype": dtype, **opts}
        print(_versions_line(results["versions"]), flush=True)
        bench_dir = Path(benchmark) if benchmark else _make_benchmark(tmp / "benchmark")
        requests = build_requests(bench_dir, tmp, opts["instances"])
        results["requests"] = _request_stats(requests, bench_dir)
        try:
            if "throughput" not in skip:
                folder = write_model_folder(size, tmp / f"qwen2.5-omni-{size}")
                results |= measure_engine(folder, device, dtype, requests, opts, skip)
        finally:  # the decode figures are worth having even when the GPU part fails
            if "decode" not in skip:
                results["decode"] = measure_decode(bench_dir, opts["decode_seconds"])
            print_table(results)
            if out:
                Path(out).parent.mkdir(parents=True, exist_ok=True)
                Path(out).write_text(json.dumps(results, indent=2, default=str) + "\n")
    return 0


def versions(device: str) -> dict:
    import torch
    import transformers

    info = {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "cpu_cores": os.cpu_count(), "gpu": None, "driver": None}
    if device.startswith("cuda") and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
        try:
            import subprocess

            info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                            capture_output=True, text=True, timeout=30).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            pass
    return info


def _versions_line(v: dict) -> str:
    gpu = f"{v['gpu']} ({v.get('gpu_memory_gib')} GiB, driver {v['driver']})" if v["gpu"] else "no GPU"
    return (f"omnieval bench gpu: {gpu}; torch {v['torch']}, transformers {v['transformers']}, "
            f"Python {v['python']}, {v['cpu_cores']} CPU cores")


def _make_benchmark(out: Path) -> Path:
    from omnieval.datasets.synthetic import make_dissonance_benchmark

    return make_dissonance_benchmark(out, seed=0, n_anchors=8, n_questions=4, splits=("real", "synthetic"))


def build_requests(bench_dir: Path, tmp: Path, limit: int) -> list:
    """The first ``limit`` zero-shot instances of the benchmark's plan (all conditions), each with its media decoded
    by the project's decoder at the run defaults."""
    from omnieval.config import parse_run_config
    from omnieval.engines import EngineRequest
    from omnieval.media.decode import decode_media
    from omnieval.run.plan import make_plan

    config = parse_run_config({"benchmark": str(bench_dir), "output": str(tmp / "unused-output"), "prompts": ["zs"],
                               "models": [{"name": "sim", "engine": "simulated"}]})
    plan = make_plan(config)
    chosen = plan.load_instances()[:limit]
    wanted = {s.ref for inst in chosen for s in inst.segments if s.kind == "media"}
    decoded = {ref: decode_media(spec.path, spec.modality, **dict(spec.params))
               for ref, spec in plan.media_specs.items() if ref in wanted}
    return [EngineRequest(i, {s.ref: decoded[s.ref] for s in i.segments if s.kind == "media"}, "zs")
            for i in chosen]


def _request_stats(requests: list, bench_dir: Path) -> dict:
    media = [sum(1 for s in r.instance.segments if s.kind == "media") for r in requests]
    distinct = {ref for r in requests for ref in r.media}
    return {"instances": len(requests), "media_per_instance": sum(media) / max(len(media), 1),
            "distinct_media": len(distinct), "benchmark": str(bench_dir)}


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_engine(folder: Path, device: str, dtype: str, requests: list, opts: dict, skip: tuple) -> dict:
    import torch

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    load_s = time.perf_counter()
    engine = random_weight_engine(folder, device, dtype, opts["batch_size"])
    load_s = time.perf_counter() - load_s
    out: dict = {"engine_load_s": round(load_s, 2),
                 "parameters": sum(p.numel() for p in engine.net.parameters())}
    if cuda:
        torch.cuda.synchronize()
        out["weights_gib"] = round(torch.cuda.memory_allocated() / 2**30, 2)
    print(f"engine ready in {load_s:.1f} s: {out['parameters'] / 1e9:.2f} B parameters", flush=True)

    engine.score(requests[:min(2, len(requests))])  # warm-up: kernels, the allocator, the processor's first call
    errors = [r.error for r in engine.score(requests[:1]) if r.error]
    if errors:
        raise RuntimeError(f"the engine could not score a benchmark prompt: {errors[0]}")

    # the processor's share: encoding every prompt and its media on the CPU, as score() does first
    encoded: list = []
    out["encode_s_per_instance"] = _timed(
        lambda: encoded.extend(engine.encode(r.media, *engine._prepare(r)) for r in requests)) / len(requests)
    out["prompt_tokens_mean"] = sum(len(e.input_ids) for e in encoded) / len(encoded)

    if cuda:
        torch.cuda.reset_peak_memory_stats()
    engine.batch_size = opts["batch_size"]
    batched_s = _timed(lambda: engine.score(requests))
    if cuda:
        out["peak_gib_at_batch"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    out["batched_inst_per_s"] = len(requests) / batched_s
    forward_s = _timed(lambda: [engine.next_token_logprobs(encoded[k:k + opts["batch_size"]])
                                for k in range(0, len(encoded), opts["batch_size"])])
    out["batched_forward_inst_per_s"] = len(encoded) / forward_s

    peer = requests[:opts["peer_instances"]]
    engine.batch_size = 1
    peer_s = _timed(lambda: [engine.score([r]) for r in peer])
    out["batch1_inst_per_s"] = len(peer) / peer_s
    out["ratio"] = out["batched_inst_per_s"] / out["batch1_inst_per_s"]
    print(f"batched {out['batched_inst_per_s']:.2f} inst/s, batch 1 {out['batch1_inst_per_s']:.2f} inst/s",
          flush=True)
    if cuda and "profile" not in skip:
        out["gpu_ms_by_part"] = {f"batch_{n}": time_parts(engine, encoded[:n]) for n in (1, opts["batch_size"])}
        print(f"GPU ms per forward pass by part: {out['gpu_ms_by_part']}", flush=True)
        if engine.grouped_towers:  # the same passes with transformers' own one-call-per-block attention
            with tower_attention(engine.net, "sdpa"):
                out["gpu_ms_by_part_per_block"] = {f"batch_{n}": time_parts(engine, encoded[:n])
                                                   for n in (1, opts["batch_size"])}
                out["batched_forward_inst_per_s_per_block"] = len(encoded) / _timed(
                    lambda: [engine.next_token_logprobs(encoded[k:k + opts["batch_size"]])
                             for k in range(0, len(encoded), opts["batch_size"])])
                per_block = engine.next_token_logprobs(encoded[:opts["batch_size"]])
            grouped = engine.next_token_logprobs(encoded[:opts["batch_size"]])
            out["grouped_vs_per_block_max_abs_logprob_diff"] = float((grouped - per_block).abs().max())
            print(f"transformers' per-block attention: {out['gpu_ms_by_part_per_block']}; forward "
                  f"{out['batched_forward_inst_per_s_per_block']:.2f} inst/s", flush=True)
    if cuda and "max_batch" not in skip:
        out["largest_batch"] = largest_batch(engine, encoded, opts["batch_size"], opts["max_batch"])
    engine.close()
    return out


@contextmanager
def tower_attention(net, implementation: str):
    """Run the media towers with another attention implementation for a while (the comparison baseline)."""
    subs = [getattr(net.config, name) for name in ("vision_config", "audio_config") if hasattr(net.config, name)]
    before = [sub._attn_implementation for sub in subs]
    for sub in subs:
        sub._attn_implementation = implementation
    try:
        yield
    finally:
        for sub, impl in zip(subs, before, strict=True):
            sub._attn_implementation = impl


def time_parts(engine, batch: list, repeats: int = 3) -> dict:
    """GPU milliseconds of one forward pass of ``batch`` spent in the vision tower, the audio tower and the language
    model (CUDA events around each module, best of ``repeats``), and the whole pass: where a slow pass spends it."""
    import torch

    net = engine.net
    parts = {name: getattr(net, name) for name in ("visual", "audio_tower", "model") if hasattr(net, name)}
    spent: dict[str, float] = {}
    pending: list = []

    def hooks(name, module):
        def pre(_m, _a):
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            pending.append((name, start))

        def post(_m, _a, _o):
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            for k in range(len(pending) - 1, -1, -1):
                if pending[k][0] == name and len(pending[k]) == 2:
                    pending.append((name, pending.pop(k)[1], end))
                    break
        return module.register_forward_pre_hook(pre), module.register_forward_hook(post)

    handles = [h for name, module in parts.items() for h in hooks(name, module)]
    best: dict[str, float] = {}
    try:
        for _ in range(repeats):
            pending.clear()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            engine.next_token_logprobs(batch)
            end.record()
            torch.cuda.synchronize()
            spent = {name: 0.0 for name in parts} | {"whole pass": start.elapsed_time(end)}
            for entry in pending:
                if len(entry) == 3:
                    spent[entry[0]] += entry[1].elapsed_time(entry[2])
            best = spent if not best or spent["whole pass"] < best["whole pass"] else best
    finally:
        for h in handles:
            h.remove()
    return {k: round(v, 1) for k, v in best.items()}


def largest_batch(engine, encoded: list, start: int, limit: int) -> dict:
    """The largest batch of these prompts (cycled) whose forward pass fits: double from ``start`` until the GPU
    refuses or ``limit`` is reached, then bisect between the last fit and the first refusal."""
    import torch

    def fits(n: int) -> tuple[bool, float]:
        batch = [encoded[k % len(encoded)] for k in range(n)]
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        try:
            engine.next_token_logprobs(batch)
            return True, torch.cuda.max_memory_allocated() / 2**30
        except torch.OutOfMemoryError:
            return False, float("nan")
        finally:
            torch.cuda.empty_cache()

    ok, peaks, failed, n = 0, {}, None, start
    while n <= limit:
        fit, peak = fits(n)
        print(f"batch {n}: {'fits, peak ' + format(peak, '.1f') + ' GiB' if fit else 'out of memory'}", flush=True)
        if not fit:
            failed = n
            break
        ok, peaks[n] = n, round(peak, 2)
        n *= 2
    while failed is not None and failed - ok > max(ok // 8, 1):
        mid = (ok + failed) // 2
        fit, peak = fits(mid)
        if fit:
            ok, peaks[mid] = mid, round(peak, 2)
        else:
            failed = mid
    return {"largest_fit": ok, "first_refused": failed, "tried_up_to": limit, "peak_gib": peaks}


def measure_decode(bench_dir: Path, seconds: float) -> dict:
    """Distinct media of the benchmark decoded per second per core: one process pinned to one core, then one per
    core, each decoding the files in turn for about ``seconds``."""
    from concurrent.futures import ProcessPoolExecutor

    files = _media_files(bench_dir)
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    out = {"files": len(files)}
    for workers in sorted({1, len(cores)}):
        with ProcessPoolExecutor(workers) as pool:
            counts = list(pool.map(_decode_loop, [(files, seconds, cores[k]) for k in range(workers)]))
        total = sum(c for c, _ in counts)
        wall = max(w for _, w in counts)
        out[f"per_core_{workers}"] = total / wall / workers
    return out


def _media_files(bench_dir: Path) -> list[tuple[str, str]]:
    """(path, modality) of every distinct video and audio file the benchmark's plan decodes."""
    from omnieval.config import parse_run_config
    from omnieval.run.plan import make_plan

    config = parse_run_config({"benchmark": str(bench_dir), "output": str(bench_dir.parent / "unused-output"),
                               "prompts": ["zs"], "models": [{"name": "sim", "engine": "simulated"}]})
    specs = make_plan(config).media_specs.values()
    return sorted({(str(s.path), s.modality, json.dumps(dict(s.params), sort_keys=True)) for s in specs
                   if s.modality in ("video", "audio", "image")})


def _decode_loop(args) -> tuple[int, float]:
    files, seconds, core = args
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})
    os.environ["OMP_NUM_THREADS"] = "1"
    from omnieval.media.decode import decode_media

    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for path, modality, params in files:
            decode_media(path, modality, **json.loads(params))
            n += 1
    return n, time.perf_counter() - start


def print_table(r: dict) -> None:
    req = r.get("requests", {})
    rows = []
    if "batched_inst_per_s" in r:
        rows += [
            (f"hf engine, batch {r['batch_size']}, {req['instances']} instances (limit)",
             f"{r['batched_inst_per_s']:.2f} inst/s", f"{r['ratio']:.2f} x batch 1"),
            (f"hf engine, batch 1, {r['peer_instances']} instances (peer)", f"{r['batch1_inst_per_s']:.2f} inst/s",
             "1.00"),
            (f"forward passes only, batch {r['batch_size']} (prompts encoded before)",
             f"{r['batched_forward_inst_per_s']:.2f} inst/s", ""),
            ("processor (CPU) per instance", f"{r['encode_s_per_instance'] * 1000:.1f} ms", ""),
            ("prompt tokens per instance (mean)", f"{r['prompt_tokens_mean']:.0f}", ""),
        ]
        if "weights_gib" in r:
            rows += [("GPU memory: weights", f"{r['weights_gib']:.1f} GiB", ""),
                     (f"GPU memory: peak at batch {r['batch_size']}", f"{r['peak_gib_at_batch']:.1f} GiB", "")]
        if "largest_batch" in r:
            mb = r["largest_batch"]
            refused = f"first refused {mb['first_refused']}" if mb["first_refused"] else f"none refused up to " \
                                                                                          f"{mb['tried_up_to']}"
            rows.append(("largest batch that fits", str(mb["largest_fit"]), refused))
    dec = r.get("decode")
    if dec:
        per_core = dec["per_core_1"]
        rows.append((f"decode, 1 process ({dec['files']} distinct files)", f"{per_core:.1f} decodes/s/core", ""))
        many = [k for k in dec if k.startswith("per_core_") and k != "per_core_1"]
        for k in many:
            rows.append((f"decode, {k.removeprefix('per_core_')} processes", f"{dec[k]:.1f} decodes/s/core",
                         f"{dec[k] / per_core:.2f} x 1 process"))
        if "batched_inst_per_s" in r:
            need = r["batched_inst_per_s"] * req["media_per_instance"] / per_core
            shared = r["batched_inst_per_s"] * req["distinct_media"] / req["instances"] / per_core
            rows += [(f"cores to feed one GPU, every medium decoded ({req['media_per_instance']:.2f} per instance)",
                      f"{need:.2f}", ""),
                     (f"cores to feed one GPU, shared media decoded once ({req['distinct_media']} for "
                      f"{req['instances']} instances)", f"{shared:.2f}", "")]
    widths = [max(len(row[i]) for row in rows) for i in range(3)] if rows else [0, 0, 0]
    print(f"model: Qwen2.5-Omni thinker, {r['size']} architecture, random weights, {r['dtype']}, device "
          f"{r['device']}")
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if "ratio" in r:
        print(f"target batched >= {TARGET_RATIO:g} x batch 1: {'met' if r['ratio'] >= TARGET_RATIO else 'MISSED'} "
              f"({r['ratio']:.2f})")
    sys.stdout.flush()
