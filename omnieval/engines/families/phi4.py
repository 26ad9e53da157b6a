"""Phi-4-multimodal (``Phi4MultimodalFamily``, transformers engine only): its released modality adapters are
installed on the loaded model and one chosen for each prompt (``prepare_hf_model``, ``hf_model_inputs``;
``engines/lora.py``). Its recipe: 16 kHz audio, whole (its feature extractor's rate; it truncates nothing); its
image processor tiles images itself (no frame or pixel settings published beyond it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from omnieval.core.prompts import PromptPart
from omnieval.engines.families.base import AudioFamily, register_family
from omnieval.engines.recipes import audio_recipe, register_recipe


class Phi4MultimodalFamily(AudioFamily):
    """Phi-4-multimodal in the transformers-native layout (``Phi4MultimodalForCausalLM``): images and waveforms at
    the feature extractor's rate. The release adds to the text decoder one low-rank adapter per input modality,
    shipped beside the weights (``vision-lora/``, ``speech-lora/``) and not read by ``from_pretrained``: they are
    installed on the loaded model (``engines/lora.py``) and chosen for each prompt as the model's reference code
    chooses them: the vision adapter for a prompt with an image (with or without audio), the speech adapter for
    audio alone, none for text alone. The prompt is the tokenizer's chat template (the processor keeps none)."""

    adapter_folders = {"vision": "vision-lora", "speech": "speech-lora"}

    def prompt(self, processor, parts: Sequence[PromptPart]) -> str:
        return processor.tokenizer.apply_chat_template(self.messages(parts), tokenize=False,
                                                       add_generation_prompt=True)

    def prepare_hf_model(self, net, folder) -> None:
        from omnieval.engines.lora import LoraAdapters

        found = {name: Path(folder) / sub for name, sub in self.adapter_folders.items()
                 if (Path(folder) / sub / "adapter_config.json").exists()}
        net.omnieval_lora = LoraAdapters(net, found) if found else None

    def hf_model_inputs(self, net, inputs: dict) -> dict:
        """Selects the prompt's adapter (class doc); a folder shipping none is taken as the whole model, one
        shipping some but not the one a prompt needs refuses that prompt."""
        adapters = getattr(net, "omnieval_lora", None)
        if adapters is not None:
            wanted = ("vision" if "image_pixel_values" in inputs
                      else "speech" if "audio_input_features" in inputs else None)
            if wanted is not None and wanted not in adapters.adapters:
                raise ValueError(f"{self.name}: the model folder has no {self.adapter_folders[wanted]}/ adapter, "
                                 f"which the model applies to this prompt")
            adapters.use(wanted)
        return inputs


register_family(Phi4MultimodalFamily(
    name="phi4-multimodal", model_types=("phi4_multimodal",), modalities=("image", "audio"),
    model_class="Phi4MultimodalForCausalLM",
    refusals={"vllm": "vLLM 0.32 lists Phi4MultimodalForCausalLM among its previously supported models (removed "
                      "after 0.12.0) and runs only the remote-code Phi4MMForCausalLM layout"}))
register_recipe(audio_recipe("phi4-multimodal", "Phi4MultimodalFeatureExtractor"))


# -- placeholder counts: the tests' reference, worked out from the published preprocessing rules and the media
# sizes alone, never by the adapter's or the processor's code (tests/family_placeholders.py binds them to the
# tiny builds of omnieval/dev) --


def phi4_image_tokens(height: int, width: int) -> int:
    """Phi-4-multimodal's tokens for a picture (at most 36 crops' worth): scaled, aspect kept, to fit the grid of
    448-pixel crops it spans (``ceil`` of each side / 448) and padded right or below; each crop's 32 x 32 patches of
    14 pixels pooled 2 x 2, one token per pooled patch holding some of the picture (the padding's whole patches
    dropped) plus one a row of them, then one separator, then the whole picture squeezed into one crop: 16 x 16
    tokens and one a row."""
    cols, rows = math.ceil(width / 448), math.ceil(height / 448)
    if cols * rows > 36:
        raise NotImplementedError("more than 36 crops: the processor picks another grid")
    scale_w, scale_h = 448 * cols / width, 448 * rows / height
    if scale_w < scale_h:  # fills the grid's width: padding below
        pad_w, pad_h = 0, 448 * rows - int(height * scale_w)
    else:
        pad_w, pad_h = 448 * cols - int(width * scale_h), 0
    patch_cols = 32 * cols - (pad_w // 14 if pad_w >= 14 else 0)
    patch_rows = 32 * rows - (pad_h // 14 if pad_h >= 14 else 0)
    pooled_cols, pooled_rows = math.ceil(patch_cols / 2), math.ceil(patch_rows / 2)
    return pooled_rows * pooled_cols + pooled_rows + 1 + 16 * 16 + 16


def phi4_audio_tokens(n_samples: int) -> int:
    """Phi-4-multimodal's tokens for a 16 kHz waveform: 25 ms windows every 10 ms (only whole windows), 8 frames a
    token (the last one partial)."""
    return math.ceil(((n_samples - 400) // 160 + 1) / 8)
