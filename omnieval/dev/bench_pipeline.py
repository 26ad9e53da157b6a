"""``omnieval bench pipeline``: what a run costs around the model, measured in one go against baselines beside it.

Set-up (timed, reported): a synthetic dissonance benchmark large enough for ~16k instances (several splits of up
to 30 anchors x 12 questions, 8 conditions per item; its 2-second clips are shared by every item and condition
that shows the anchor), two tiny benchmarks (dissonance, crossmodal) for the sweep, and the embedded local Ray,
started once by ``ensure_ray`` in this process. Each measurement then runs in its own fresh Python process that
joins that Ray as a second driver, so what one measurement leaves in memory cannot flatter or burden the next.

(1) fixed start-up per run on a warm Ray and (2) marginal instances/s: in a child process, one throwaway run
    (imports, worker pool), then measured ``run_evaluation`` runs of the simulated engine (``delay_ms: 0``), at a
    small size (``limit_items`` of the big benchmark: a sample across every split) and at the full size, each size
    in its own child. Each size is timed ``repeats`` times (3; 1 with ``--quick``), every run into a fresh output
    (nothing resumed), and the best time is kept: other load on the machine only ever adds time, and one sample of
    a 3-second run moved by 10-15% from one bench to the next on 2 cores.
    marginal = (n_large - n_small) / (t_large - t_small); fixed = t_small - n_small / marginal.
    The baseline is the same simulated engine alone, in-process, on the same request rows
    (``stages.call_rows`` in batches of the model's ``batch_size``, best of three): the limit the pipeline can
    approach.
(3) driver peak memory: in the same child, the growth of the driver's peak RSS during the first measured run: Linux
    ``VmHWM`` (peak reset through ``/proc/self/clear_refs`` just before the run) minus ``VmRSS`` just before it,
    i.e. after imports, the Ray connection and the throwaway run. Ray workers are other processes and do not count.
    Where the peak cannot be reset, ``ru_maxrss`` is used and the row says that the throwaway run is included.
(4) model loads in a 2-model x 2-protocol x 2-prompt sweep (``run_sweep``, simulated engines, tiny benchmarks;
    ``--quick``: 1 prompt):
    every construction of the ``bench-counting`` engine (``omnieval.dev.counting_engine``) appends a line to a
    file, from whatever Ray worker builds it; the count is read from that file.

Decode rows (no target): ms per clip for PyAV (the hot path) and an ffmpeg-python pipe, on a few clips of the
benchmark. The simulated engine costs microseconds per instance, so the end-to-end figures measure the pipeline's
overhead, not a model.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from omnieval.dev.marginal import marginal_rate

FULL = {"splits": 6, "anchors": 28, "questions": 12, "small_items": 128,  # 16,128 and 1,024 instances
        "sweep_prompts": ["zs", "cot"],  # 2 models x 2 protocols x 2 prompts: 8 runs
        "repeats": 3}  # timed runs per size, the best kept
QUICK = {"splits": 2, "anchors": 4, "questions": 6, "small_items": 8,  # 384 and 64 instances
         "sweep_prompts": ["zs"], "repeats": 1}  # 4 runs
DECODE = {"num_frames": 8, "max_side": 160}
BATCH_SIZE = 64

TARGETS = {"fixed_s": 3.0, "marginal": 5_000.0, "memory_ratio": 1.2, "loads": 2}
_RESULT = "BENCH-RESULT "
CHILD_TIMEOUT_S = 1800


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


# ---------------------------------------------------------------------------------------------------------------
# The driver of the bench
# ---------------------------------------------------------------------------------------------------------------

def bench_pipeline(quick: bool = False, workdir: str | None = None) -> int:
    """Measure and print the table; ``quick`` shrinks the sizes (a smoke test of the bench itself)."""
    with bench_folder(workdir, "omnieval-bench-") as (tmp, runs):
        return _bench_pipeline(QUICK if quick else FULL, tmp, runs)


def _benchmarks(size: dict, tmp: Path) -> tuple[dict, float]:
    """The three benchmark folders (built unless ``tmp`` already holds them) and the seconds spent building."""
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark

    folders = {"large": tmp / f"dissonance-{size['splits']}x{size['anchors']}x{size['questions']}",
               "sweep_dissonance": tmp / "sweep-dissonance-2x1", "sweep_crossmodal": tmp / "sweep-crossmodal-4"}
    start = time.perf_counter()
    if not (folders["large"] / "items.jsonl").exists():
        make_dissonance_benchmark(folders["large"], seed=0, n_anchors=size["anchors"], n_questions=size["questions"],
                                  splits=tuple(f"s{i}" for i in range(size["splits"])))
    if not (folders["sweep_dissonance"] / "items.jsonl").exists():
        make_dissonance_benchmark(folders["sweep_dissonance"], seed=0, n_anchors=2, n_questions=1)
    if not (folders["sweep_crossmodal"] / "items.jsonl").exists():
        make_crossmodal_benchmark(folders["sweep_crossmodal"], seed=0, n_entities=4)
    return {k: str(v) for k, v in folders.items()}, time.perf_counter() - start


def _run_config(benchmark: str, output: str, limit_items: int | None = None) -> dict:
    model = {"name": "sim", "engine": "simulated", "batch_size": BATCH_SIZE, "options": {"seed": 0, "delay_ms": 0}}
    return {"benchmark": benchmark, "output": output, "models": [model], "prompts": ["zs"], "decode": DECODE,
            "limit_items": limit_items}


def _sweep_config(folders: dict, output: str, count_file: str, prompts: list[str]) -> dict:
    models = [{"name": f"sim-{i}", "engine": "bench-counting", "batch_size": BATCH_SIZE,
               "options": {"seed": i, "count_file": count_file}} for i in (1, 2)]
    return {"name": "bench", "output": output, "prompts": prompts, "models": models,
            "protocols": [{"protocol": "dissonance", "benchmark": folders["sweep_dissonance"]},
                          {"protocol": "crossmodal", "benchmark": folders["sweep_crossmodal"]}],
            "decode": DECODE, "metrics": {"enabled": False}, "max_attempts": 1, "progress_interval_s": 60}


def _child(kind: str, params: dict) -> dict:
    """Run one measurement in a fresh Python process; its result (a JSON line) or an error with its output."""
    done = subprocess.run([sys.executable, "-m", "omnieval.dev.bench_pipeline", kind, json.dumps(params)],
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(_RESULT)]
    if done.returncode or not lines:
        raise RuntimeError(f"bench pipeline: the {kind} measurement failed (exit {done.returncode}):\n"
                           f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len(_RESULT):])


def _bench_pipeline(size: dict, tmp: Path, runs: Path) -> int:
    import ray

    from omnieval.config import parse_run_config
    from omnieval.run.pipeline import ensure_ray

    load_before = os.getloadavg()[0]
    folders, setup_s = _benchmarks(size, tmp)
    own_ray = not ray.is_initialized()
    start = time.perf_counter()
    ensure_ray(parse_run_config(_run_config(folders["large"], str(runs / "unused"))))
    ray_s = time.perf_counter() - start
    address = ray.get_runtime_context().gcs_address
    try:
        measured = {}
        for label, limit in (("small", size["small_items"]), ("large", None)):
            measured[label] = _child("run", {"address": address, "label": label, "warmup_items": 4,
                                             "repeats": size["repeats"],
                                             "config": _run_config(folders["large"], str(runs / label), limit)})
        count_file = str(runs / "engine-constructions.txt")
        sweep = _child("sweep", {"address": address, "count_file": count_file,
                                 "config": _sweep_config(folders, str(runs / "sweep"), count_file,
                                                        size["sweep_prompts"])})
    finally:
        if own_ray:
            ray.shutdown()
    decode_rows = _decode_rows(folders["large"])
    _print_table(size, setup_s, ray_s if own_ray else None, measured, sweep, decode_rows,
                 (load_before, os.getloadavg()[0]))
    return 0


# ---------------------------------------------------------------------------------------------------------------
# The measurements (each in its own process)
# ---------------------------------------------------------------------------------------------------------------

def status_field(pid: int | str, field: str) -> int | None:
    """A ``/proc/<pid>/status`` field in bytes (``pid`` ``"self"`` for this process); None once the process is gone
    (or off Linux)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None


def _proc_status(field: str) -> int | None:
    """A ``/proc/self/status`` field in bytes (Linux), else None."""
    return status_field("self", field)


def _reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark of this process (``VmHWM``); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return _proc_status("VmHWM") is not None
    except OSError:
        return False


def _peak_rss(reset: bool) -> int:
    import resource

    if reset:
        return _proc_status("VmHWM")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _measure_run(params: dict) -> dict:
    """A throwaway run, then the measured runs: the first with its peak RSS growth, the best time of all; then
    make_plan and the engine alone on the same request rows."""
    from omnieval.config import parse_run_config
    from omnieval.engines import create_engine
    from omnieval.run.answers import answer_requests
    from omnieval.run.pipeline import ensure_ray, run_evaluation
    from omnieval.run.plan import make_plan
    from omnieval.run.stages import call_rows

    config = parse_run_config(params["config"])
    ensure_ray(config, params["address"])
    warmup = config.model_copy(update={"output": config.output + "-warmup", "limit_items": params["warmup_items"]})
    run_evaluation(warmup, params["address"], progress=False)

    reset = _reset_peak_rss()
    rss_before = _proc_status("VmRSS") or 0
    start = time.perf_counter()
    result = run_evaluation(config, params["address"], progress=False)
    times = [time.perf_counter() - start]
    peak = _peak_rss(reset)
    for again in range(1, params.get("repeats", 1)):  # fresh outputs: each run does all the work again
        start = time.perf_counter()
        run_evaluation(config.model_copy(update={"output": f"{config.output}-{again}"}), params["address"],
                       progress=False)
        times.append(time.perf_counter() - start)
    seconds = min(times)

    start = time.perf_counter()
    plan = make_plan(config)
    plan_s = time.perf_counter() - start
    rows = list(answer_requests(plan.load_instances(), ["mcq"], ["zs"], set(), {}))
    model = config.models[0]
    engine = create_engine(model.engine, model=model.name, **model.options)
    engine_s = float("inf")
    for _ in range(3):  # best of three: the baseline is short and a loaded machine makes it noisy
        start = time.perf_counter()
        for i in range(0, len(rows), model.batch_size):
            call_rows(engine, rows[i:i + model.batch_size])
        engine_s = min(engine_s, time.perf_counter() - start)
    return {"label": params["label"], "n": result.n_rows, "instances": result.n_instances, "seconds": seconds,
            "times": times,
            "errors": result.n_errors, "distinct_media": len(result.decode_counts),
            "decodes": sum(result.decode_counts.values()), "rss_before": rss_before, "peak": peak,
            "peak_reset": reset, "plan_s": plan_s, "engine_n": len(rows), "engine_s": engine_s,
            "repeats": params.get("repeats", 1)}


def _measure_sweep(params: dict) -> dict:
    """The sweep, with every Ray worker of this job importing the counting engine; constructions from its file."""
    import logging

    import ray
    import ray.data

    from omnieval.dev.counting_engine import read_counts
    from omnieval.sweep import parse_sweep_config, run_sweep

    ray.init(address=params["address"], log_to_driver=False, logging_level=logging.WARNING,
             runtime_env={"worker_process_setup_hook": "omnieval.dev.counting_engine.worker_setup"})
    ray.data.DataContext.get_current().enable_progress_bars = False
    sweep = parse_sweep_config(params["config"])
    log: list[str] = []
    start = time.perf_counter()
    result = run_sweep(sweep, params["address"], log=log.append)
    seconds = time.perf_counter() - start
    if not result.ok:
        raise RuntimeError("the sweep failed:\n" + "\n".join(log[-30:]))
    counts = read_counts(params["count_file"])
    return {"runs": len(result.runs), "models": len(sweep.models), "protocols": len(sweep.protocols),
            "prompts": len(sweep.prompts), "seconds": seconds, "constructions": len(counts),
            "processes": len({pid for pid, _ in counts}),
            "per_model": {m.name: sum(name == m.name for _, name in counts) for m in sweep.models}}


def _decode_rows(benchmark: str, clips: int = 6) -> list[tuple[str, str, str, str, str]]:
    from omnieval.datasets.benchmark import load_benchmark
    from omnieval.media import decode

    bench = load_benchmark(benchmark)
    videos = sorted({str(Path(bench.root) / a.media.video) for a in bench.anchors})[:clips]
    audios = sorted({str(Path(bench.root) / a.media.audio) for a in bench.anchors})[:clips]
    pyav_v = _time_per_call(lambda p: decode.decode_video(p, num_frames=8), videos, repeat=3)
    ff_v = _time_per_call(lambda p: decode.decode_video_ffmpeg(p, num_frames=8), videos)
    pyav_a = _time_per_call(lambda p: decode.decode_audio(p, sample_rate=16000), audios, repeat=3)
    ff_a = _time_per_call(lambda p: decode.decode_audio_ffmpeg(p, sample_rate=16000), audios)
    return [(f"decode video, 8 frames, {len(videos)} clips: PyAV vs an ffmpeg-python pipe", f"{pyav_v:.1f} ms",
             f"{ff_v:.1f} ms", f"{ff_v / pyav_v:.1f}x", ""),
            (f"decode audio, 16 kHz, {len(audios)} clips: PyAV vs an ffmpeg-python pipe", f"{pyav_a:.1f} ms",
             f"{ff_a:.1f} ms", f"{ff_a / pyav_a:.1f}x", "")]


# ---------------------------------------------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------------------------------------------

def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def _verdict(met: bool, target: str) -> str:
    return f"met ({target})" if met else f"MISSED ({target})"


def _print_table(size: dict, setup_s: float, ray_s: float | None, measured: dict, sweep: dict, decode_rows: list,
                 load: tuple[float, float]) -> None:
    s, g = measured["small"], measured["large"]
    lines: list[tuple[str, str, str, str, str]] = []
    verdicts: list[tuple[bool, str, str, str]] = []  # met, what, figure, target

    n_items = g["instances"] // 8
    lines.append((f"set-up: benchmarks built or reused in {setup_s:.1f} s ({size['splits']} splits x "
                  f"{size['anchors']} anchors x {size['questions']} questions = {n_items:,} items, "
                  f"{size['splits'] * size['anchors'] * 2} media files; sweep benchmarks)", f"{setup_s:.1f} s",
                  "", "", ""))
    lines.append(("set-up: embedded Ray started once (ensure_ray)", f"{ray_s:.1f} s", "", "", "") if ray_s is not None
                 else ("set-up: Ray was already running in this process", "", "", "", ""))

    measured_rate = marginal_rate(s["n"], s["times"], g["n"], g["times"])
    marginal = measured_rate.rate
    engine_dt = g["engine_s"] - s["engine_s"]
    engine_marginal = (g["engine_n"] - s["engine_n"]) / engine_dt if engine_dt > 0 else None

    fixed = s["seconds"] - s["n"] / marginal if marginal else None
    fixed_text = f"{fixed:.3f} s" if fixed is not None else "not measured"
    target = f"< {TARGETS['fixed_s']:g} s"
    met = fixed is not None and fixed < TARGETS["fixed_s"]
    lines.append(("(1) fixed start-up per run, warm Ray: t_small - n_small / marginal", fixed_text, "", "",
                  _verdict(met, target) if fixed is not None else "not measured"))
    verdicts.append((met if fixed is not None else None, "fixed start-up per run", fixed_text, target))

    for m in (s, g):
        rate, base = m["n"] / m["seconds"], m["engine_n"] / m["engine_s"]
        lines.append((f"(2) end to end, {m['label']}, best of {m['repeats']}: {m['n']:,} instances in "
                      f"{m['seconds']:.3f} s ({m['distinct_media']} media decoded; engine alone {m['engine_n']:,} in "
                      f"{m['engine_s']:.3f} s)",
                      f"{rate:,.0f}/s", f"{base:,.0f}/s", f"{rate / base:.4f}x", ""))
    target = f">= {TARGETS['marginal']:,.0f}/s"
    met = marginal is not None and marginal >= TARGETS["marginal"]
    marginal_text = f"{marginal:,.0f}/s" if marginal else "not measured"
    engine_text = f"{engine_marginal:,.0f}/s" if engine_marginal else "undefined"
    ratio = f"{marginal / engine_marginal:.4f}x" if marginal and engine_marginal else ""
    lines.append((f"(2) marginal rate: ({g['n']:,} - {s['n']:,}) / ({g['seconds']:.3f} - {s['seconds']:.3f}) s",
                  marginal_text, engine_text, ratio, _verdict(met, target) if marginal else "not measured"))
    if marginal is None:
        lines.append((f"(2) marginal rate not measured: {measured_rate.why_not()}", "", "", "", ""))
    verdicts.append((met if marginal else None, "marginal instances/s", marginal_text, target))
    for m in (s, g):
        lines.append((f"(2) of which make_plan (load, expand, media check and hashes), {m['label']}",
                      f"{m['plan_s']:.3f} s", "", "", ""))

    how = "VmHWM - VmRSS before the run" if s["peak_reset"] and g["peak_reset"] else \
        "ru_maxrss - VmRSS before the run, throwaway run included"
    lines.append((f"(3) driver peak RSS growth, small ({how}; RSS before {_mib(s['rss_before'])})",
                  _mib(s["peak"] - s["rss_before"]), "", "", ""))
    growth_s, growth_g = s["peak"] - s["rss_before"], g["peak"] - g["rss_before"]
    mem_ratio = growth_g / growth_s if growth_s > 0 else None
    target = f"<= {TARGETS['memory_ratio']:g}"
    met = mem_ratio is not None and mem_ratio <= TARGETS["memory_ratio"]
    ratio_text = f"{mem_ratio:.2f}" if mem_ratio is not None else "undefined"
    lines.append((f"(3) driver peak RSS growth, large vs small ({how}; RSS before {_mib(g['rss_before'])})",
                  _mib(growth_g), _mib(growth_s), ratio_text, _verdict(met, target)))
    verdicts.append((met, "driver peak memory, large / small", ratio_text, target))

    loads = sweep["constructions"]
    target = f"== {TARGETS['loads']}"
    met = loads == TARGETS["loads"]
    per_model = ", ".join(f"{k} {v}" for k, v in sweep["per_model"].items())
    lines.append((f"(4) engine constructions, {sweep['models']}-model x {sweep['protocols']}-protocol x "
                  f"{sweep['prompts']}-prompt sweep: {sweep['runs']} runs, {sweep['processes']} processes "
                  f"({per_model})", f"{loads}", f"{sweep['models']} models", f"{loads / sweep['models']:.1f}x",
                  _verdict(met, target)))
    verdicts.append((met, "model loads in the sweep", f"{loads}", target))
    lines.append((f"(4) the sweep's wall time, {sweep['runs']} runs (metrics off)", f"{sweep['seconds']:.1f} s",
                  "", "", ""))
    lines.extend(decode_rows)

    width = max(len(line[0]) for line in lines)
    print(f"omnieval bench pipeline ({os.cpu_count()} cores; simulated engine, delay_ms 0, batch_size "
          f"{BATCH_SIZE}; decode {DECODE['num_frames']} frames, max side {DECODE['max_side']}; 1-minute load average "
          f"{load[0]:.1f} at the start, {load[1]:.1f} at the end)")
    print(f"{'measurement':<{width}}  {'ours':>12}  {'baseline':>12}  {'ratio':>8}  target")
    for what, ours, base, ratio, verdict in lines:
        print(f"{what:<{width}}  {ours:>12}  {base:>12}  {ratio:>8}  {verdict}")
    print("verdicts:")
    for met, what, figure, target in verdicts:
        print(f"  {'not measured' if met is None else 'met' if met else 'MISSED'}: {what} {figure} (target {target})")
    missed = sum(v[0] is False for v in verdicts)
    unmeasured = sum(v[0] is None for v in verdicts)
    print(f"targets: {sum(v[0] is True for v in verdicts)} met, {missed} missed"
          + (f", {unmeasured} not measured" if unmeasured else "")
          + (" (a loaded machine slows every timing: rerun on a quiet one before drawing conclusions)"
             if missed or unmeasured else ""))


def _main(argv: list[str]) -> int:
    kind, params = argv[0], json.loads(argv[1])
    result = {"run": _measure_run, "sweep": _measure_sweep}[kind](params)
    print(_RESULT + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
