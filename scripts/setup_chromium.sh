#!/usr/bin/env bash
# Install Debian's headless-capable chromium for the report's browser test (tests/test_report.py).
# Idempotent: does nothing when a chromium binary is already on PATH. Non-interactive; uses sudo only when not root.
set -euo pipefail

for bin in chromium chromium-browser; do
  if command -v "$bin" >/dev/null 2>&1; then
    exit 0
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo -n"
  else
    echo "setup_chromium: not root and no sudo; install chromium yourself (apt-get install chromium)" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core \
  </dev/null >/dev/null
command -v chromium >/dev/null 2>&1 || { echo "setup_chromium: chromium still not on PATH" >&2; exit 1; }
