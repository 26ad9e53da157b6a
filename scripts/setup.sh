#!/usr/bin/env bash
# Set up a fresh machine for omnieval (CPU): system media tools, a venv, the CPU torch build, omnieval with extras.
# Idempotent: a stamp in .venv records the pyproject.toml (and this script and the torchvision and torchaudio scripts)
# it installed; rerunning with no change does nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v ffmpeg >/dev/null 2>&1 || need_apt+=(ffmpeg)
command -v espeak-ng >/dev/null 2>&1 || need_apt+=(espeak-ng)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
stamp=.venv/.omnieval-installed
want=$(cat pyproject.toml scripts/setup.sh scripts/install_torchvision.sh scripts/install_torchaudio.sh | sha256sum \
  | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --upgrade pip
# The CPU build of torch first, so that the hf extra does not pull a multi-GB CUDA build.
.venv/bin/pip install -q "torch==2.13.0"
.venv/bin/pip install -q -e ".[hf,embed,dev,voxtral,nemotron]"
# Qwen2.5-Omni's processor (the hf engine's omni inputs) needs torchvision: the CUDA wheel made to import on the CPU
# torch (the script says how).
bash scripts/install_torchvision.sh .venv
# Granite Speech's feature extractor needs torchaudio: the CUDA wheel without its compiled extension (the script says
# why).
bash scripts/install_torchaudio.sh .venv
# Gemma 3n's vision tower (MobileNetV5) is timm code, needed by its tiny build and the conformance kit (dev, in
# pyproject.toml's words): without its dependencies, so that pip keeps the CPU torch and the torchvision above.
.venv/bin/pip install -q --no-deps "timm==1.0.31"
.venv/bin/python -c "import torch, torchvision, timm"
echo "$want" > "$stamp"
