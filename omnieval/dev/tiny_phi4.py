"""A tiny random-weight Phi-4-multimodal (``omnieval models tiny --arch phi4-multimodal``), in the transformers-native
layout (``model_type`` ``phi4_multimodal``, ``Phi4MultimodalForCausalLM``; not the remote-code ``Phi4MMForCausalLM``).

* ``config.json``: text decoder hidden 128, 2 layers of 4 heads of 32 with 2 key-value heads (the release: 24 and
  8), rotary embedding on three quarters of each head (``partial_rotary_factor`` 0.75, as released; plain rotary
  frequencies where the release scales them for long contexts: no prompt here comes near its 4096 positions), tied
  embeddings; vision tower SigLIP, 2 layers of hidden 32, at the released 448-pixel crops of 14-pixel patches (the
  processor counts 256 tokens a crop, so the crop size stays; its features are read at the second-to-last layer,
  hence two layers); audio tower the conformer, 1 block of hidden 32, 80 mel bins reduced 8 times in time, as
  released. The image and audio token ids live in the tower configs, as the model reads them.
* ``model.safetensors``: every weight as transformers saves the native model.
* ``speech-lora/`` and ``vision-lora/``: the model's two low-rank adapters on the text decoder (rank 4 here; the
  release: 320 and 256, alpha twice the rank), in the layout the release ships them (``adapter_config.json`` and
  ``adapter_model.safetensors`` with ``base_model.model.<module>.lora_A/B.weight``), random where the release's
  are trained: the engine applies the vision one to a prompt with an image, the speech one to a prompt with audio
  only (``families.Phi4MultimodalFamily``).
* ``processor_config.json``: the ``Phi4MultimodalProcessor`` with the released settings of its image processor
  (448-pixel crops, up to 36 of them, ``dynamic_hd``) and feature extractor (80 mel bins, 25 ms windows every
  10 ms at 16 kHz, 512-point FFT, pre-emphasis 0.97, 8 frames a token), as transformers 5.19 writes it. The
  processor keeps no chat template of its own: the tokenizer's renders the prompt.
* The tokenizer: ``tiny_models.build_tokenizer`` with the processor's ``<|image|>`` and ``<|audio|>`` tokens and a
  chat template writing them for typed content parts.

Loading its processor needs torchvision (the image processor imports it).
"""

from __future__ import annotations

import json
from pathlib import Path

from omnieval.dev.tiny_families import family_chat_template

PHI4_TOKENS = {"image_token": "<|image|>", "audio_token": "<|audio|>"}
PHI4_TEMPLATE = family_chat_template({"image": "<|image|>", "audio": "<|audio|>"})
CROP, PATCH = 448, 14  # released; the processor's token count assumes them
LORA_RANK = 4
LORA_TARGETS = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")
LORA_FOLDERS = ("speech-lora", "vision-lora")


def phi4_multimodal(tok, seed: int, text_dims: dict, init_range: float):
    """The native model (module doc), its token ids this tokenizer's."""
    import torch
    from transformers import Phi4MultimodalConfig, Phi4MultimodalForCausalLM

    ids = {name: tok.convert_tokens_to_ids(token) for name, token in PHI4_TOKENS.items()}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 1,
              "image_size": CROP, "patch_size": PATCH, "crop_size": CROP, "image_token_id": ids["image_token"]}
    audio = {"hidden_size": 32, "intermediate_size": 64, "num_blocks": 1, "num_attention_heads": 2,
             "ext_pw_out_channel": 32, "depthwise_separable_out_channel": 32, "nemo_conv_channels": 16,
             "input_size": 80, "time_reduction": 8, "bias_max_distance": 500, "initializer_range": init_range,
             "audio_token_id": ids["audio_token"]}
    config = Phi4MultimodalConfig(
        vocab_size=text_dims["vocab_size"], hidden_size=text_dims["hidden_size"],
        intermediate_size=text_dims["intermediate_size"], num_hidden_layers=text_dims["num_hidden_layers"],
        num_attention_heads=text_dims["num_attention_heads"], num_key_value_heads=text_dims["num_key_value_heads"],
        max_position_embeddings=text_dims["max_position_embeddings"], original_max_position_embeddings=4096,
        rope_parameters={"rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.75},
        tie_word_embeddings=True, initializer_range=init_range, bos_token_id=text_dims["bos_token_id"],
        eos_token_id=text_dims["eos_token_id"], pad_token_id=text_dims["pad_token_id"], vision_config=vision,
        audio_config=audio)
    torch.manual_seed(seed)
    model = Phi4MultimodalForCausalLM(config).eval()
    with torch.no_grad():  # the constructor zeroes these separators: draw them, so that they are seen to matter
        embed = model.model.embed_tokens_extend.image_embed
        for extensor in (embed.global_img_feature_extensor, embed.sub_img_feature_extensor):
            extensor.copy_(torch.randn(extensor.shape) * init_range)
    return model


def save_lora_adapters(model, out: Path, seed: int, init_range: float) -> None:
    """One random low-rank adapter per folder of ``LORA_FOLDERS`` on the text decoder's linear layers, in the
    released layout (module doc)."""
    import torch
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(seed + 1)
    for folder in LORA_FOLDERS:
        tensors = {}
        for name, module in model.named_modules():
            if name.startswith("model.layers.") and name.rsplit(".", 1)[-1] in LORA_TARGETS:
                rows, cols = module.weight.shape
                prefix = f"base_model.model.{name}"
                tensors[f"{prefix}.lora_A.weight"] = torch.randn(LORA_RANK, cols, generator=generator) * init_range
                tensors[f"{prefix}.lora_B.weight"] = torch.randn(rows, LORA_RANK, generator=generator) * init_range
        (out / folder).mkdir(exist_ok=True)
        save_file(tensors, out / folder / "adapter_model.safetensors", metadata={"format": "pt"})
        config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": LORA_RANK, "lora_alpha": 2 * LORA_RANK,
                  "lora_dropout": 0.0, "bias": "none", "target_modules": list(LORA_TARGETS),
                  "base_model_name_or_path": None, "inference_mode": True}
        (out / folder / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")


def save_phi4_processor(tok, out: Path) -> None:
    from transformers import Phi4MultimodalFeatureExtractor, Phi4MultimodalImageProcessor, Phi4MultimodalProcessor

    Phi4MultimodalProcessor(
        image_processor=Phi4MultimodalImageProcessor(size={"height": CROP, "width": CROP}, patch_size=PATCH,
                                                     dynamic_hd=36),
        audio_processor=Phi4MultimodalFeatureExtractor(), tokenizer=tok,
        chat_template=tok.chat_template).save_pretrained(out)
