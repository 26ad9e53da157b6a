"""``omnieval demo``: the whole path on any machine, nothing downloaded.

Builds the synthetic benchmarks (real video, audio and image files), writes a tiny random-weight Qwen2.5-Omni
model, starts a local Ray and runs, per protocol, simulated models with known modality reliance (the instrument:
their accuracies are predictable) and the tiny transformers model (the real code path on decoded frames, images and
waveforms; its weights are random, so its accuracy is near chance by construction):

* ``dissonance``: outputs under ``run/`` and ``metrics/``; prints accuracy by condition and Shapley attribution.
* ``crossmodal``: outputs under ``crossmodal/run`` and ``crossmodal/metrics``; prints the six directions,
  disparity and imbalance.
"""

from __future__ import annotations

from pathlib import Path

import yaml


def demo_config(out: Path, benchmark: Path, tiny_model: Path | None, seed: int) -> dict:
    models = [
        {"name": "sim-balanced", "engine": "simulated", "replicas": 1, "batch_size": 32,
         "options": {"reliance": {"video": 0.8, "audio": 0.6, "text": 0.9}, "abstain_on_conflict": 0.6,
                     "seed": seed}},
        {"name": "sim-text-only", "engine": "simulated", "replicas": 1, "batch_size": 32,
         "options": {"reliance": {"text": 0.95}, "abstain_on_conflict": 0.1, "abstain_on_unsupported": 0.05,
                     "seed": seed}},
    ]
    if tiny_model is not None:
        models.append({"name": "tiny-omni-random", "engine": "hf", "replicas": 1, "batch_size": 8,
                       "options": {"path": str(tiny_model)}})
    return {"name": "demo", "protocol": "dissonance", "benchmark": str(benchmark), "output": str(out / "run"),
            "seed": seed, "prompts": ["zs"], "models": models,
            "decode": {"num_frames": 8, "max_side": 160}}


def crossmodal_config(out: Path, benchmark: Path, tiny_model: Path | None, seed: int) -> dict:
    models = [
        {"name": "sim-balanced", "engine": "simulated", "batch_size": 32,
         "options": {"reliance": {"audio": 0.8, "video": 0.9, "image": 0.9, "text": 0.95}, "seed": seed}},
        {"name": "sim-weak-audio", "engine": "simulated", "batch_size": 32,
         "options": {"reliance": {"audio": 0.35, "video": 0.9, "image": 0.9, "text": 0.95,
                                  "audio->text": 0.6}, "seed": seed}},
    ]
    if tiny_model is not None:
        models.append({"name": "tiny-omni-random", "engine": "hf", "batch_size": 4,
                       "options": {"path": str(tiny_model)}})
    return {"name": "demo-crossmodal", "protocol": "crossmodal", "benchmark": str(benchmark),
            "output": str(out / "run"), "seed": seed, "prompts": ["zs"], "models": models,
            "decode": {"num_frames": 4, "max_side": 112}}


def run_demo(out: str | Path, *, with_hf: bool = True, anchors: int = 4, questions: int = 2, seed: int = 0) -> int:
    from omnieval.config import load_run_config
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark
    from omnieval.pipeline import run_evaluation

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
            from omnieval.tiny_models import build_tiny_model

            print(f"writing a tiny random-weight Qwen2.5-Omni to {tiny} ...")
            build_tiny_model("qwen2.5-omni", tiny, seed=seed)
    config_path = out / "demo.yaml"
    config_path.write_text(yaml.safe_dump(demo_config(out, benchmark, tiny, seed), sort_keys=False))
    print(f"config: {config_path}")
    result = run_evaluation(load_run_config(config_path))
    print(result.summary())
    print(f"\nrun record: {Path(result.output) / 'run.json'}")
    print_reliance(result.predictions_path, out / "metrics")
    ok = result.ok

    print("\n=== crossmodal: the same creatures in six context -> candidate directions ===")
    xm = out / "crossmodal"
    xm_bench = xm / "benchmark"
    if not (xm_bench / "items.jsonl").exists():
        make_crossmodal_benchmark(xm_bench, seed=seed, n_entities=12)
    config_path = xm / "crossmodal.yaml"
    config_path.write_text(yaml.safe_dump(crossmodal_config(xm, xm_bench, tiny, seed), sort_keys=False))
    result = run_evaluation(load_run_config(config_path))
    print(result.summary())
    print_directions(result.predictions_path, xm / "metrics")
    return 0 if ok and result.ok else 1


def _with_ci(pl):
    return pl.format("{} [{}, {}]", pl.col("value").round(2), pl.col("ci_low").round(2), pl.col("ci_high").round(2))


def print_directions(predictions: str, out: Path, resamples: int = 2000) -> None:
    """Crossmodal headline: disparity between modalities and direction imbalance, with CIs."""
    import polars as pl

    from omnieval.metrics import metrics_command

    metrics_command([predictions], str(out), resamples=resamples, seed=0)
    table = pl.read_parquet(out / "metrics.parquet")
    summary = (table.filter(pl.col("metric").is_in(["disparity", "imbalance", "consistency"])
                            & ~pl.col("key").str.contains("/"))
               .with_columns(pl.concat_str("metric", pl.lit(" "), "key").str.strip_chars().alias("metric"),
                             _with_ci(pl).alias("value [95% CI]"))
               .pivot(on="model", index="metric", values="value [95% CI]"))
    print("\nModality disparity, direction imbalance and consistency (value [95% bootstrap CI]):")
    with pl.Config(tbl_rows=50, tbl_cols=10, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   fmt_str_lengths=40):
        print(summary)
    print(f"all metrics: {out / 'metrics.csv'}")


def print_reliance(predictions: str, out: Path, resamples: int = 2000) -> None:
    """Metrics with CIs for the demo run, and the headline: which modality each model relies on (Shapley)."""
    import polars as pl

    from omnieval.metrics import metrics_command

    metrics_command([predictions], str(out), resamples=resamples, seed=0)
    table = pl.read_parquet(out / "metrics.parquet")
    shapley = (table.filter(pl.col("metric") == "shapley")
               .with_columns(pl.format("{} [{}, {}]", pl.col("value").round(2), pl.col("ci_low").round(2),
                                       pl.col("ci_high").round(2)).alias("shapley (95% CI)"))
               .pivot(on="key", index=["model", "split"], values="shapley (95% CI)")
               .sort(["model", "split"]))
    print("\nShapley modality attribution of accuracy (value [95% bootstrap CI]):")
    with pl.Config(tbl_rows=50, tbl_cols=10, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True,
                   fmt_str_lengths=40):
        print(shapley)
    print(f"all metrics: {out / 'metrics.csv'}   significance tests: omnieval stats {predictions} --out DIR")
