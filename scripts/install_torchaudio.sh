#!/usr/bin/env bash
# Make torchaudio importable in a venv that holds the CPU torch: `scripts/install_torchaudio.sh <venv>`.
# Called by scripts/setup.sh (.venv) and scripts/setup_vllm.sh (.venv-vllm). Idempotent.
#
# Why: Granite Speech's feature extractor (transformers) computes its mel spectrogram with torchaudio's
# MelSpectrogram, which is pure torch. The newest torchaudio wheel (2.11) pins another torch and is a CUDA build whose
# compiled extension cannot load beside the CPU torch 2.13 (libc10_cuda.so missing), and torchaudio loads that
# extension when it is imported. torchaudio treats an extension that is not there as not built and keeps its
# pure-torch transforms, so the wheel goes in without its dependencies (pip never swaps the CPU torch) and its
# compiled libraries are removed. On a GPU image (Dockerfile) torchaudio comes with the base image's torch.
set -euo pipefail
venv=${1:?usage: scripts/install_torchaudio.sh <venv>}
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
torch_before=$("$venv/bin/python" -c "import torch; print(torch.__version__)")
"$venv/bin/pip" install -q --no-deps "torchaudio==2.11.0"
rm -f "$site"/torchaudio/lib/*.so
"$venv/bin/python" - "$torch_before" <<'PY'
import sys

import torch
import torchaudio

assert torch.__version__ == sys.argv[1], f"torch changed: {sys.argv[1]} -> {torch.__version__}"
mel = torchaudio.transforms.MelSpectrogram(sample_rate=16000, n_fft=512, win_length=400, hop_length=160, n_mels=80)
assert mel(torch.zeros(1, 1600)).shape == (1, 80, 11)
PY
