"""The outputs whose values must not change when code is reorganised: the demo's four runs (simulated models) and a
sweep over the four synthetic benchmarks with two prompt styles, two splits (dissonance's ``real`` and
``synthetic``), repeated samples and a random factor (``--random prompt``), each through ``run`` -> ``metrics`` ->
``report``.

``canonical(folder)`` reduces a finished folder to tables of values keyed by what names a row, independent of row
order, file paths, timings and the git commit, so two runs of different code can be compared value for value.
``python -m tests.identity_outputs OUT`` rebuilds the reference (``tests/data/identity/``) from the checked-out code:
do that only when a change is meant to change values, and say so in its commit.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import polars as pl
import yaml

FIXTURE = Path(__file__).parent / "data" / "identity"
SWEEP_MODELS = [
    {"name": "sim-sight", "engine": "simulated", "options": {"seed": 3, "reliance": {"video": 0.9}}},
    {"name": "sim-text", "engine": "simulated", "samples": 2, "temperature": 0.7,
     "options": {"seed": 5, "reliance": {"text": 0.9}}},
]
PREDICTION_VALUES = ["choice", "confidence", "answer_source", "error"]
"""The columns of a prediction row that carry its outcome (present in every protocol's predictions)."""
NUMBER = re.compile(r"(?<![\w.])[-+−]?\d+(?:\.\d+)?(?:e[-+]?\d+)?%?")
VOLATILE = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?|\b[0-9a-f]{10,40}\b|in \d+(\.\d+)? s\b|/tmp/\S+")


def build_demo(out: Path) -> None:
    """The demo without its transformers model (its floating-point logits are not part of this contract)."""
    from omnieval.cli import main
    from omnieval.demo.run import run_demo

    assert run_demo(out, with_hf=False) == 0
    assert main(["report", str(out), "--out", str(out / "report")]) == 0


def build_sweep(out: Path) -> None:
    """Four synthetic benchmarks, two simulated models (one answering twice per instance at temperature 0.7), two
    prompt styles; the sweep's metrics and report, and dissonance's runs pooled with the prompt style as a random
    factor; the significance tests of every run (``omnieval stats``)."""
    from omnieval.cli import main
    from omnieval.datasets.synthetic import make_dissonance_benchmark
    from omnieval.datasets.synthetic_contrastive import make_contrastive_benchmark
    from omnieval.datasets.synthetic_crossmodal import make_crossmodal_benchmark
    from omnieval.datasets.synthetic_spectrum import make_spectrum_benchmark

    benches = out / "benchmarks"
    make_dissonance_benchmark(benches / "dissonance", seed=0, n_anchors=3, n_questions=2)
    make_crossmodal_benchmark(benches / "crossmodal", seed=0, n_entities=4)
    make_spectrum_benchmark(benches / "spectrum", seed=0, n_items=16)
    make_contrastive_benchmark(benches / "contrastive", seed=0, n_entities=4)
    config = {"name": "identity", "output": str(out / "sweep"), "prompts": ["zs", "cot"],
              "protocols": [{"protocol": p, "benchmark": str(benches / p)}
                            for p in ("dissonance", "crossmodal", "spectrum", "contrastive")],
              "models": SWEEP_MODELS, "decode": {"num_frames": 4, "max_side": 96},
              "metrics": {"resamples": 200}, "progress_interval_s": 1.0}
    path = out / "sweep.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    assert main(["sweep", str(path)]) == 0
    # the report's settings of the recording, given: without them the report reads the sweep's pooled result, made
    # with the sweep's 200 resamples (docs/runs.md), where the recording computed with 10,000
    assert main(["report", str(out / "sweep"), "--out", str(out / "sweep-report"), "--resamples", "10000",
                 "--permutations", "10000"]) == 0
    runs = sorted(str(p) for p in (out / "sweep").rglob("predictions.parquet") if "dissonance" in str(p))
    assert main(["metrics", *runs, "--random", "prompt", "--resamples", "200", "--permutations", "200",
                 "--out", str(out / "pooled")]) == 0
    every = sorted(str(p) for p in (out / "sweep").rglob("predictions.parquet"))
    assert main(["stats", *every, "--permutations", "500", "--out", str(out / "tests")]) == 0


def _table(path: Path, keys: list[str]) -> pl.DataFrame:
    frame = pl.read_parquet(path)
    present = [k for k in keys if k in frame.columns]
    floats = [c for c, t in frame.schema.items() if t in (pl.Float32, pl.Float64)]
    return frame.with_columns(pl.col(floats).round(12)).sort(present, nulls_last=True)


def _predictions(path: Path) -> pl.DataFrame:
    frame = pl.read_parquet(path)
    keys = [c for c in ("model", "prompt", "mode", "instance_id", "sample") if c in frame.columns]
    return frame.select(keys + [c for c in PREDICTION_VALUES if c in frame.columns]).sort(keys)


def report_numbers(path: Path) -> list[str]:
    """Every number the report's Markdown shows, sorted: a report that says the same things in another order or
    wording keeps them; a changed value, a lost row or an extra one does not."""
    text = VOLATILE.sub(" ", path.read_text())
    return sorted(NUMBER.findall(text))


def canonical(folder: Path) -> dict[str, pl.DataFrame | list[str]]:
    """Each prediction, metrics, paired, ranks and tests table under ``folder`` (by its path relative to it) and the
    report's numbers; tables keyed by the columns that name their rows."""
    tables: dict[str, pl.DataFrame | list[str]] = {}
    for path in sorted(folder.rglob("*.parquet")):
        rel = str(path.relative_to(folder))
        if "/parts/" in rel or "/media/" in rel:
            continue
        if path.name == "predictions.parquet":
            tables[rel] = _predictions(path)
        elif path.name in ("metrics.parquet", "paired.parquet", "ranks.parquet", "tests.parquet"):
            frame = pl.read_parquet(path)
            keys = [c for c in frame.columns if frame.schema[c] in (pl.String, pl.Categorical, pl.Int64, pl.Boolean)]
            tables[rel] = _table(path, keys)
    for path in sorted(folder.rglob("report.md")):
        tables[str(path.relative_to(folder))] = report_numbers(path)
    return tables


def save(tables: dict, target: Path) -> None:
    target.mkdir(parents=True, exist_ok=True)
    index = {}
    for i, (name, value) in enumerate(sorted(tables.items())):
        if isinstance(value, list):
            (target / f"{i:02d}.json").write_text(json.dumps(value))
            index[name] = f"{i:02d}.json"
        else:
            value.write_parquet(target / f"{i:02d}.parquet", compression="zstd", compression_level=19)
            index[name] = f"{i:02d}.parquet"
    (target / "index.json").write_text(json.dumps(index, indent=1) + "\n")


def load(target: Path = FIXTURE) -> dict:
    index = json.loads((target / "index.json").read_text())
    return {name: (json.loads((target / f).read_text()) if f.endswith(".json") else pl.read_parquet(target / f))
            for name, f in index.items()}


if __name__ == "__main__":
    out = Path(sys.argv[1]).resolve()
    build_demo(out / "demo")
    build_sweep(out / "sweep-run")
    tables = {f"demo/{k}": v for k, v in canonical(out / "demo").items()}
    tables |= {f"sweep/{k}": v for k, v in canonical(out / "sweep-run").items()}
    save(tables, FIXTURE)
    print(f"{len(tables)} tables -> {FIXTURE}")
