"""``omnieval bench pipeline``: what the pipeline costs, measured against baselines in the same run.

Rows of the printed table:

* end to end: ``run_evaluation`` with the simulated engine on the synthetic benchmark (plan, Ray Data stages, decode
  once, Parquet parts, consolidation; Ray already started), instances/s;
* engine alone: the same simulated engine, in-process, on the same instances with their media pre-decoded: the
  limit the pipeline can approach; the ratio is the pipeline's overhead;
* decode: ms per clip for PyAV (the hot path) and an ffmpeg-python pipe (one ffmpeg process per clip), video
  (8 frames) and audio (16 kHz mono), over every distinct clip of the benchmark.

The simulated engine costs microseconds per instance, so the end-to-end figure is dominated by the pipeline: it is a
measure of overhead, not of a model. With a real model the engine time dominates and the ratio approaches 1.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path


def _time_per_call(fn, paths, repeat: int = 1) -> float:
    times = []
    for _ in range(repeat):
        for p in paths:
            start = time.perf_counter()
            fn(p)
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


@contextmanager
def bench_folder(workdir: str | None, prefix: str):
    """(folder, runs) of a bench: ``workdir`` (kept, so its benchmark is reused next time) or a temporary folder
    removed at the end; the run outputs inside (``runs``: fresh, nothing to resume) are always removed."""
    tmp = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=prefix))
    tmp.mkdir(parents=True, exist_ok=True)
    runs = Path(tempfile.mkdtemp(prefix="runs-", dir=tmp))
    try:
        yield tmp, runs
    finally:
        shutil.rmtree(runs if workdir else tmp, ignore_errors=True)


def bench_pipeline(anchors: int = 8, questions: int = 4, workdir: str | None = None) -> int:
    with bench_folder(workdir, "omnieval-bench-") as (tmp, runs):
        return _bench_pipeline(anchors, questions, tmp, runs)


def _bench_pipeline(anchors: int, questions: int, tmp: Path, runs: Path) -> int:
    from omnieval.config import parse_run_config
    from omnieval.datasets.benchmark import load_benchmark
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.engines import EngineRequest, create_engine
    from omnieval.media import decode
    from omnieval.pipeline import ensure_ray, run_evaluation
    from omnieval.plan import make_plan

    bench_dir = tmp / "benchmark"
    if not (bench_dir / "items.jsonl").exists():
        make_dissonance_benchmark(bench_dir, seed=0, n_anchors=anchors, n_questions=questions)
    model = {"name": "sim", "engine": "simulated", "batch_size": 64, "options": {"seed": 0}}
    config = parse_run_config({"benchmark": str(bench_dir), "output": str(runs / "measured"), "models": [model],
                               "prompts": ["zs"], "decode": {"num_frames": 8, "max_side": 320}})
    ensure_ray(config)

    # warm-up run (actor start-up, imports), then the measured run into a fresh output folder
    run_evaluation(config.model_copy(update={"output": str(runs / "warmup")}), progress=False)
    start = time.perf_counter()
    result = run_evaluation(config, progress=False)
    e2e_s = time.perf_counter() - start
    n = result.n_rows

    plan = make_plan(config)
    decoded = {p: decode.decode_media(s.path, s.modality, **dict(s.params)) for p, s in plan.media_specs.items()}
    engine = create_engine("simulated", model="sim", seed=0)
    requests = [EngineRequest(inst, {s.path: decoded[s.path] for s in inst.segments if s.kind == "media"}, "zs")
                for inst in plan.instances]
    start = time.perf_counter()
    for i in range(0, len(requests), 64):
        engine.score(requests[i:i + 64])
    engine_s = time.perf_counter() - start

    bench = load_benchmark(bench_dir)
    videos = sorted({str(Path(bench.root) / a.media.video) for a in bench.anchors})
    audios = sorted({str(Path(bench.root) / a.media.audio) for a in bench.anchors})
    pyav_v = _time_per_call(lambda p: decode.decode_video(p, num_frames=8), videos, repeat=3)
    ff_v = _time_per_call(lambda p: decode.decode_video_ffmpeg(p, num_frames=8), videos)
    pyav_a = _time_per_call(lambda p: decode.decode_audio(p, sample_rate=16000), audios, repeat=3)
    ff_a = _time_per_call(lambda p: decode.decode_audio_ffmpeg(p, sample_rate=16000), audios)

    rows = [
        ("end to end (Ray pipeline, simulated engine)", f"{n / e2e_s:,.0f} inst/s", f"{e2e_s:.2f} s",
         f"{(n / e2e_s) / (len(requests) / engine_s):.4f} x engine alone"),
        ("engine alone, media pre-decoded (limit)", f"{len(requests) / engine_s:,.0f} inst/s", f"{engine_s:.3f} s",
         "1 (baseline)"),
        ("decode video, PyAV, 8 frames", f"{pyav_v:.1f} ms/clip", f"{len(videos)} clips",
         f"{ff_v / pyav_v:.1f} x faster"),
        ("decode video, ffmpeg-python pipe", f"{ff_v:.1f} ms/clip", f"{len(videos)} clips", "1 (baseline)"),
        ("decode audio, PyAV, 16 kHz", f"{pyav_a:.1f} ms/clip", f"{len(audios)} clips",
         f"{ff_a / pyav_a:.1f} x faster"),
        ("decode audio, ffmpeg-python pipe", f"{ff_a:.1f} ms/clip", f"{len(audios)} clips", "1 (baseline)"),
    ]
    print(f"omnieval bench pipeline: {len(plan.instances)} instances, {len(plan.media_specs)} distinct media, "
          f"{sum(result.decode_counts.values())} decodes in the measured run")
    widths = [max(len(str(r[i])) for r in rows) for i in range(4)]
    header = ("measurement", "rate", "total", "ratio")
    widths = [max(w, len(h)) for w, h in zip(widths, header, strict=True)]
    for row in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
    return 0
