#!/usr/bin/env bash
# Make torchvision importable in a venv that holds the CPU torch: `scripts/install_torchvision.sh <venv>`.
# Called by scripts/setup.sh (.venv) and scripts/setup_vllm.sh (.venv-vllm). Idempotent.
#
# Why: transformers' Qwen-style image and video processors (Qwen2.5-Omni, Qwen2.5-VL) and LLaVA-OneVision's and
# InternVL's import torchvision, and the only torchvision wheel for torch 2.13 is a CUDA build whose import fails on
# the CPU torch (`operator torchvision::nms does not exist`). The wheel goes in without its dependencies (so pip
# never swaps the CPU torch), and the two operator schemas it looks up when it loads (nms, qnms) are defined first,
# through a .pth file of the venv. The processors only use pure-torch transforms, so nothing calls those operators.
# On a GPU image (Dockerfile) the CUDA torchvision imports as it is and none of this is needed.
set -euo pipefail
venv=${1:?usage: scripts/install_torchvision.sh <venv>}
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
# The shim before the wheel: a torchvision that is installed but cannot be imported is never visible.
cat > "$site/omnieval_test_torchvision_shim.py" <<'PY'
"""Environment shim (scripts/install_torchvision.sh): operator schemas the CUDA torchvision wheel expects.

Loaded at every interpreter start (a .pth line), so it must cost nothing there: it only adds a finder that, the
first time ``torchvision`` is imported, defines the schemas (importing torch, which torchvision imports anyway) and
steps aside. Importing torch here directly made every Python process, every Ray worker among them, pay ~0.8 s."""
import sys


class _DefineSchemasFirst:
    def find_spec(self, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        import torch

        lib = torch.library.Library("torchvision", "DEF")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        sys.modules[__name__].library = lib  # a Library's definitions last as long as the object
        return None  # the regular finders load torchvision


sys.meta_path.insert(0, _DefineSchemasFirst())
PY
echo "import omnieval_test_torchvision_shim" > "$site/omnieval_test_torchvision_shim.pth"
torch_before=$("$venv/bin/python" -c "import torch; print(torch.__version__)")
"$venv/bin/pip" install -q --no-deps "torchvision==0.28.0"
"$venv/bin/python" - "$torch_before" <<'PY'
import sys

import torch
import torchvision  # noqa: F401

assert torch.__version__ == sys.argv[1], f"torch changed: {sys.argv[1]} -> {torch.__version__}"
PY
