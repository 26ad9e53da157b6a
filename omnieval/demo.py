"""``omnieval demo``: the whole path on any machine, nothing downloaded.

Builds the synthetic dissonance benchmark (real video and audio files), writes a tiny random-weight Qwen2.5-Omni
model, starts a local Ray and runs three models through the pipeline: two simulated models with known modality
reliance (the instrument: their accuracies are predictable) and the tiny transformers model (the real code path on
decoded frames and waveforms; its weights are random, so its accuracy is near chance by construction).
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


def run_demo(out: str | Path, *, with_hf: bool = True, anchors: int = 4, questions: int = 2, seed: int = 0) -> int:
    from omnieval.config import load_run_config
    from omnieval.datasets.synthetic import make_dissonance_benchmark
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
    return 0 if result.ok else 1


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
