"""``omnieval demo``: the whole path on any machine, nothing downloaded.

Builds the synthetic benchmarks (real video, audio and image files), writes a tiny random-weight Qwen2.5-Omni
model, starts a local Ray and runs, per protocol, simulated models with known modality reliance (the instrument:
their accuracies are predictable) and the tiny transformers model (the real code path on decoded frames, images and
waveforms; its weights are random, so its accuracy is near chance by construction):

* ``dissonance``: outputs under ``run/`` and ``metrics/``; prints accuracy by condition and Shapley attribution.
  One simulated model also answers open-ended (options left out), graded by two simulated judges of set accuracy;
  a copy of it hears the audio through a describer (a cascade, marked in the report).
* ``crossmodal``: outputs under ``crossmodal/run`` and ``crossmodal/metrics``; prints the six directions,
  disparity and imbalance.
* ``spectrum``: outputs under ``spectrum/run`` and ``spectrum/metrics``; prints accuracy per shuffling condition
  against chance and each model's dependency label (the majority-vote ``ensemble`` included).
* ``contrastive``: outputs under ``contrastive/run`` and ``contrastive/metrics``; prints accuracy by number of
  inputs, permutation consistency and position bias (media and ``+captions`` baselines).

``omnieval report DEMO_DIR --out DIR`` turns all of it into one HTML report.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from omnieval.core.commands import command_prefix


def demo_config(out: Path, benchmark: Path, tiny_model: Path | None, seed: int) -> dict:
    models = [
        {"name": "sim-balanced", "engine": "simulated", "replicas": 1, "batch_size": 32,
         "options": {"reliance": {"video": 0.8, "audio": 0.6, "text": 0.9}, "abstain_on_conflict": 0.6,
                     "seed": seed}},
        {"name": "sim-text-only", "engine": "simulated", "replicas": 1, "batch_size": 32,
         "options": {"reliance": {"text": 0.95}, "abstain_on_conflict": 0.1, "abstain_on_unsupported": 0.05,
                     "seed": seed}},
    ]
    # The same model with its audio heard through a describer (the two-stage audio path), in both modes.
    models.append(dict(models[0], name="sim-balanced+audio-desc",
                       describe={"model": {"name": "sim-describer", "engine": "simulated"}}))
    models[1]["modes"] = ["mcq"]
    if tiny_model is not None:
        models.append({"name": "tiny-omni-random", "engine": "hf", "replicas": 1, "batch_size": 8,
                       "options": {"path": str(tiny_model)}, "modes": ["mcq"]})
    judges = [{"name": "judge-careful", "engine": "simulated", "options": {"seed": seed + 1, "judge_error": 0.05}},
              {"name": "judge-noisy", "engine": "simulated",
               "options": {"seed": seed + 2, "judge_error": 0.2, "judge_invalid_rate": 0.1}}]
    return {"name": "demo", "protocol": "dissonance", "benchmark": str(benchmark), "output": str(out / "run"),
            "seed": seed, "prompts": ["zs"], "models": models, "modes": ["mcq", "open"], "judges": judges,
            "decode": {"num_frames": 8, "max_side": 160}}


def _tiny(tiny_model: Path | None, batch_size: int) -> list[dict]:
    """The tiny transformers model's entry in a protocol's model list (none when the demo runs without it)."""
    if tiny_model is None:
        return []
    return [{"name": "tiny-omni-random", "engine": "hf", "batch_size": batch_size,
             "options": {"path": str(tiny_model)}}]


def crossmodal_config(out: Path, benchmark: Path, tiny_model: Path | None, seed: int) -> dict:
    models = [
        {"name": "sim-balanced", "engine": "simulated", "batch_size": 32,
         "options": {"reliance": {"audio": 0.8, "video": 0.9, "image": 0.9, "text": 0.95}, "seed": seed}},
        {"name": "sim-weak-audio", "engine": "simulated", "batch_size": 32,
         "options": {"reliance": {"audio": 0.35, "video": 0.9, "image": 0.9, "text": 0.95,
                                  "audio->text": 0.6}, "seed": seed}},
    ] + _tiny(tiny_model, 4)
    return {"name": "demo-crossmodal", "protocol": "crossmodal", "benchmark": str(benchmark),
            "output": str(out / "run"), "seed": seed, "prompts": ["zs"], "models": models,
            "decode": {"num_frames": 4, "max_side": 112}}


def spectrum_config(out: Path, benchmark: Path, tiny_model: Path | None, seed: int) -> dict:
    models = [
        {"name": "sim-image-reader", "engine": "simulated", "batch_size": 32,
         "options": {"reliance": {"image": 0.9}, "seed": seed}},
        {"name": "sim-needs-both", "engine": "simulated", "batch_size": 32,
         "options": {"reliance": {"image+text": 0.9}, "seed": seed}},
    ] + _tiny(tiny_model, 8)
    return {"name": "demo-spectrum", "protocol": "spectrum", "benchmark": str(benchmark), "output": str(out / "run"),
            "seed": seed, "prompts": ["zs"], "models": models}


def contrastive_config(out: Path, benchmark: Path, tiny_model: Path | None, seed: int) -> dict:
    models = [
        {"name": "sim-sees-all", "engine": "simulated", "batch_size": 32,
         "options": {"reliance": {"image": 0.95, "video": 0.9, "audio": 0.7, "pointcloud": 0.6, "text": 0.95},
                     "seed": seed}},
        {"name": "sim-prefers-A", "engine": "simulated", "batch_size": 32,
         "options": {"reliance": {"image": 0.6, "video": 0.6, "audio": 0.4, "pointcloud": 0.3, "text": 0.7,
                                  "position:A": 0.5}, "seed": seed}},
    ] + _tiny(tiny_model, 4)
    return {"name": "demo-contrastive", "protocol": "contrastive", "benchmark": str(benchmark),
            "output": str(out / "run"), "seed": seed, "prompts": ["zs"], "models": models,
            "protocol_options": {"permutations": 3, "captions": True},
            "decode": {"num_frames": 4, "max_side": 112}}


def _run_protocol(title: str, folder: Path, make_benchmark, make_config, tiny: Path | None, seed: int) -> bool:
    """One protocol of the demo: build its benchmark once, write its config, run it, print its headline."""
    from omnieval.config import load_run_config
    from omnieval.run.pipeline import run_evaluation

    print(f"\n=== {title} ===")
    bench = folder / "benchmark"
    if not (bench / "items.jsonl").exists():
        make_benchmark(bench)
    config_path = folder / f"{folder.name}.yaml"
    config_path.write_text(yaml.safe_dump(make_config(folder, bench, tiny, seed), sort_keys=False))
    result = run_evaluation(load_run_config(config_path))
    print(result.summary())
    show_metrics(result.predictions_path, folder / "metrics")
    return result.ok


def run_demo(out: str | Path, *, with_hf: bool = True, anchors: int = 4, questions: int = 2, seed: int = 0) -> int:
    from omnieval.config import load_run_config
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.datasets.synthetic_contrastive import make_contrastive_benchmark
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark
    from omnieval.datasets.synthetic_spectrum import make_spectrum_benchmark
    from omnieval.run.pipeline import run_evaluation

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    benchmark = out / "benchmark"
    if not (benchmark / "items.jsonl").exists():
        print(f"building the synthetic benchmark in {benchmark} ...")
        make_dissonance_benchmark(benchmark, seed=seed, n_anchors=anchors, n_questions=questions)
    tiny = None
    if with_hf:
        tiny = out / "models" / "tiny-qwen2.5-omni"
        if not (tiny / "config.json").exists():
            from omnieval.demo.tiny_model import build_tiny_omni

            print(f"writing a tiny random-weight Qwen2.5-Omni to {tiny} ...")
            build_tiny_omni(tiny, seed=seed)
    config_path = out / "demo.yaml"
    config_path.write_text(yaml.safe_dump(demo_config(out, benchmark, tiny, seed), sort_keys=False))
    print(f"config: {config_path}")
    result = run_evaluation(load_run_config(config_path))
    print(result.summary())
    print(f"\nrun record: {Path(result.output) / 'run.json'}")
    show_metrics(result.predictions_path, out / "metrics")
    ok = result.ok

    ok &= _run_protocol("crossmodal: the same creatures in six context -> candidate directions", out / "crossmodal",
                        lambda b: make_crossmodal_benchmark(b, seed=seed, n_entities=12), crossmodal_config, tiny,
                        seed)
    ok &= _run_protocol("spectrum: which modalities the questions really need (shuffled across items)",
                        out / "spectrum", lambda b: make_spectrum_benchmark(b, seed=seed, n_items=48),
                        spectrum_config, tiny, seed)
    ok &= _run_protocol("contrastive: which of 2-4 scenes of different modalities answers the question",
                        out / "contrastive", lambda b: make_contrastive_benchmark(b, seed=seed, n_entities=4),
                        contrastive_config, tiny, seed)
    print(f"\nreport: {command_prefix()} report {out} --out {out / 'report'}")
    return 0 if ok else 1


def show_metrics(predictions: str, out: Path, resamples: int = 2000) -> None:
    """``omnieval metrics`` on a demo run: writes its tables and prints the protocol's headline (``headlines``)."""
    from omnieval.stats.command import metrics_command

    metrics_command([predictions], str(out), resamples=resamples, seed=0)


