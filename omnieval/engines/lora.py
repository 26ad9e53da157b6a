"""Low-rank adapters (LoRA) saved in the PEFT file layout, applied to a loaded transformers model without the peft
package: a forward hook on each adapted linear layer adds ``scale x B(A(x))`` to its output while that adapter is
the active one (``LoraAdapters.active``; none: the model as loaded). Several adapters can be installed on one model
and switched between forward passes, as a released model that picks its adapter by the inputs needs
(Phi-4-multimodal: ``families.Phi4MultimodalFamily``).

An adapter folder holds ``adapter_config.json`` (``r``, ``lora_alpha``, ``use_rslora``) and
``adapter_model.safetensors`` with ``base_model.model.<module>.lora_A.weight`` (rank x in) and ``.lora_B.weight``
(out x rank) for each adapted module; ``scale`` is ``lora_alpha / r`` (``/ sqrt(r)`` with ``use_rslora``). Anything
this does not apply (another PEFT method, DoRA, trained biases or extra modules, a key naming no linear layer of the
model) is an error naming it, never skipped.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

PREFIX = "base_model.model."
SUFFIXES = {".lora_A.weight": 0, ".lora_B.weight": 1}


def read_adapter(folder: str | Path) -> tuple[float, dict[str, tuple]]:
    """``(scale, {module name: (A, B)})`` of one adapter folder (module doc)."""
    from safetensors.torch import load_file

    folder = Path(folder)
    config = json.loads((folder / "adapter_config.json").read_text())
    unsupported = {"peft_type": config.get("peft_type", "LORA") != "LORA", "use_dora": bool(config.get("use_dora")),
                   "bias": config.get("bias", "none") != "none", "modules_to_save": bool(config.get("modules_to_save"))}
    if any(unsupported.values()):
        raise ValueError(f"{folder}: adapter settings not applied here: "
                         f"{', '.join(f'{k}={config.get(k)!r}' for k, bad in unsupported.items() if bad)}")
    rank = int(config["r"])
    scale = float(config["lora_alpha"]) / (math.sqrt(rank) if config.get("use_rslora") else rank)
    pairs: dict[str, list] = {}
    for key, tensor in load_file(folder / "adapter_model.safetensors").items():
        suffix = next((s for s in SUFFIXES if key.endswith(s)), None)
        if not key.startswith(PREFIX) or suffix is None:
            raise ValueError(f"{folder}: unexpected adapter weight {key!r}")
        pairs.setdefault(key[len(PREFIX):-len(suffix)], [None, None])[SUFFIXES[suffix]] = tensor
    missing = [name for name, (a, b) in pairs.items() if a is None or b is None]
    if missing:
        raise ValueError(f"{folder}: adapter weights without their other half: {', '.join(sorted(missing))}")
    return scale, {name: (a, b) for name, (a, b) in pairs.items()}


class LoraAdapters:
    """Named adapters installed on ``net`` (a loaded model, already on its device and dtype), none active."""

    def __init__(self, net, folders: dict[str, str | Path]):
        import torch

        modules = dict(net.named_modules())
        self.active: str | None = None
        self.adapters: dict[str, tuple[float, dict]] = {}
        for name, folder in folders.items():
            scale, pairs = read_adapter(folder)
            for module_name, (a, b) in pairs.items():
                module = modules.get(module_name)
                if not isinstance(module, torch.nn.Linear) or tuple(module.weight.shape) != (b.shape[0], a.shape[1]):
                    raise ValueError(f"{folder}: adapter module {module_name!r} is no linear layer of the model "
                                     f"with weight {tuple(b.shape[:1]) + tuple(a.shape[1:])}")
                pairs[module_name] = (a.to(module.weight), b.to(module.weight))
            self.adapters[name] = (scale, pairs)
        adapted = sorted({m for _, pairs in self.adapters.values() for m in pairs})
        self.handles = [modules[m].register_forward_hook(self._hook(m)) for m in adapted]

    def _hook(self, module_name: str):
        def add_low_rank(module, args, output):
            if self.active is None:
                return output
            scale, pairs = self.adapters[self.active]
            if module_name not in pairs:
                return output
            a, b = pairs[module_name]
            return output + scale * ((args[0] @ a.T) @ b.T)

        return add_low_rank

    def use(self, name: str | None) -> None:
        """Make ``name`` the active adapter (None: none)."""
        if name is not None and name not in self.adapters:
            raise KeyError(f"no adapter {name!r} installed (have: {', '.join(sorted(self.adapters)) or 'none'})")
        self.active = name
