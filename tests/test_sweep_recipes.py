"""A sweep of three families over one benchmark decodes each media file once per distinct resolved setting.

Three simulated models stand for Qwen2.5-Omni, Qwen3-Omni and Qwen3-VL (``recipe: <family>``) with no ``decode:``
sampling options, so each decodes by its family's recipe: Qwen2.5-Omni and Qwen3-Omni sample and size video alike
(the same reference constants; both cards call the utilities with their default 14-pixel patches, side factor 28),
Qwen3-VL by factor 32 (its card passes 16-pixel patches); all three take audio at 16 kHz. So each video is decoded
twice and each audio once; the counts are checked against the benchmark's files counted here from
their bytes, and ``run.json`` says per model which recipe it used and where each value came from.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from omnieval.sweep import SweepRunner, parse_sweep_config

pytestmark = pytest.mark.slow

FAMILIES = {"sim-omni25": "qwen2.5-omni", "sim-omni3": "qwen3-omni", "sim-vl3": "qwen3-vl"}
SETTINGS_PER_FILE = {".mp4": 2, ".wav": 1}  # distinct resolved video / audio settings over the three recipes


def _files_by_suffix(bench) -> dict[str, int]:
    """Distinct media files of the benchmark by their bytes, per file suffix."""
    seen: dict[str, set[str]] = {}
    for path in (Path(bench) / "media").rglob("*"):
        if path.is_file():
            seen.setdefault(path.suffix, set()).add(hashlib.sha256(path.read_bytes()).hexdigest())
    return {suffix: len(hashes) for suffix, hashes in seen.items()}


def test_three_families_decode_each_file_once_per_distinct_recipe(ray_session, small_bench, tmp_path):
    files = _files_by_suffix(small_bench)
    assert set(files) == set(SETTINGS_PER_FILE)
    data = {"name": "recipes", "output": str(tmp_path / "sweep"), "prompts": ["zs"],
            "protocols": [{"protocol": "dissonance", "benchmark": str(small_bench)}],
            "models": [{"name": name, "engine": "simulated", "recipe": family, "replicas": 1, "num_cpus": 0.5,
                        "batch_size": 8, "options": {"seed": i}} for i, (name, family) in enumerate(FAMILIES.items())],
            "decode": {"media_check": "exists"}, "metrics": {"resamples": 20}, "max_concurrent_models": 1,
            "progress_interval_s": 0.5}
    result = SweepRunner(parse_sweep_config(data), log=lambda m: None).run()
    assert [r.status for r in result.runs] == ["done"] * 3
    records = {r.model: json.loads((Path(r.output) / "run.json").read_text()) for r in result.runs}
    counts = {model: record["counts"] for model, record in records.items()}
    decodes = sum(c["decodes"] for c in counts.values())
    assert decodes == sum(n * SETTINGS_PER_FILE[suffix] for suffix, n in files.items())
    assert decodes + sum(c["decoded_store_hits"] for c in counts.values()) == 3 * sum(files.values())

    for model, family in FAMILIES.items():
        recipe = records[model]["recipes"][model]
        assert recipe["recipe"] == family
        assert recipe["decode"]["fps"] == {"value": 2.0, "from": "recipe", "source": recipe["decode"]["fps"]["source"]}
        assert "smart_nframes" in recipe["decode"]["fps"]["source"]
        assert recipe["decode"]["sample_rate"]["from"] == ("default" if family == "qwen3-vl" else "recipe")
    assert records["sim-vl3"]["recipes"]["sim-vl3"]["decode"]["size_factor"]["value"] == 32
    assert records["sim-omni3"]["recipes"]["sim-omni3"]["decode"]["size_factor"]["value"] == 28
    assert records["sim-omni25"]["recipes"]["sim-omni25"]["decode"]["size_factor"]["value"] == 28
