"""``omnieval bench gpu``: the real-size model folder is the released 7B thinker's architecture, and the command runs
end to end where the lent GPU machines run it: without Ray, polars, numba or ffmpeg-python (on the CPU here, with the
tiny model; no timing is asserted, only that the printed figures agree with each other)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_the_7b_folder_builds_the_released_thinker_shapes(tmp_path):
    """The language model's parameter count from the published dimensions by hand (Qwen2 layer: q/k/v with bias, o
    without, gated MLP, two RMSNorms; untied head), against the module built from the folder on the meta device."""
    import torch
    import transformers
    from transformers import AutoConfig

    from omnieval.dev.bench_gpu import write_model_folder

    folder = write_model_folder("7b", tmp_path / "omni-7b")
    assert not list(folder.glob("*.safetensors"))  # no weights written: the bench builds them on the GPU
    config = AutoConfig.from_pretrained(folder).thinker_config
    with torch.device("meta"):
        net = transformers.Qwen2_5OmniThinkerForConditionalGeneration._from_config(config, dtype=torch.bfloat16)
    h, inter, kv, vocab, layers = 3584, 18944, 4 * 128, 152064, 28
    layer = (h * h + h) + 2 * (h * kv + kv) + h * h + 3 * h * inter + 2 * h
    assert sum(p.numel() for p in net.model.parameters()) == vocab * h + layers * layer + h
    assert sum(p.numel() for p in net.lm_head.parameters()) == vocab * h
    total = sum(p.numel() for p in net.parameters())
    assert 8.9e9 < total < 9.0e9  # with the vision (0.68 B) and audio (0.64 B) towers


BLOCK = "import sys\nfor m in ('ray', 'polars', 'numba', 'ffmpeg', 'vllm'):\n    sys.modules[m] = None\n"


@pytest.mark.slow
def test_tiny_bench_runs_without_ray_and_its_figures_agree(tmp_path, tiny_models):
    from omnieval.datasets.synthetic import make_dissonance_benchmark

    bench = make_dissonance_benchmark(tmp_path / "bench", seed=0, n_anchors=2, n_questions=2, splits=("real",))
    out = tmp_path / "figures.json"
    script = BLOCK + ("from omnieval.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.run([sys.executable, "-c", script, "bench", "gpu", "--size", "tiny", "--device", "cpu",
                           "--dtype", "float32", "--benchmark", str(bench), "--instances", "8",
                           "--peer-instances", "2", "--batch-size", "4", "--decode-seconds", "0.5",
                           "--workdir", str(tmp_path / "work"), "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["requests"]["instances"] == 8
    assert figures["requests"]["media_per_instance"] == 2.0  # every dissonance instance shows a video and an audio
    assert figures["ratio"] == pytest.approx(figures["batched_inst_per_s"] / figures["batch1_inst_per_s"])
    assert figures["decode"]["files"] > 0 and figures["decode"]["per_core_1"] > 0
    printed = proc.stdout
    assert f"{figures['ratio']:.2f} x batch 1" in printed
    need = figures["batched_inst_per_s"] * 2.0 / figures["decode"]["per_core_1"]
    assert f"{need:.2f}" in printed
    assert ("MISSED" in printed) == (figures["ratio"] < 5)
