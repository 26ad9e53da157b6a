"""A tiny random-weight Qwen3-VL mixture-of-experts model (``omnieval models tiny --arch qwen3-vl-moe``), in the
released checkpoint's layout.

* ``qwen3-vl-moe``: ``Qwen3VLMoeForConditionalGeneration`` (``model_type`` ``qwen3_vl_moe``; images and videos).
  The Qwen3-VL build of ``tiny_qwen3_vl.py`` (the same vision tower, processor files, tokenizer and chat template)
  with every decoder layer a mixture of 4 experts (intermediate 32) of which 2 are routed a token, their weights
  renormalised (``norm_topk_prob``; the release: 128 experts of 768, 8 routed).
* ``model.safetensors``: the experts fused per layer as the release ships them, transposed from what transformers
  5.19 saves: ``mlp.experts.gate_up_proj`` of shape (experts, hidden, 2 x intermediate) and
  ``mlp.experts.down_proj`` of shape (experts, intermediate, hidden). vLLM's loader reads that layout
  (``is_fused_checkpoint_transposed``); transformers transposes it back when loading. The intermediate size is
  chosen so that no expert matrix is square: which way a tensor lies is then never ambiguous.
"""

from __future__ import annotations

from pathlib import Path

from omnieval.dev.tiny_qwen3_vl import MROPE, token_ids, vision_config

EXPERT_TENSORS = ("mlp.experts.gate_up_proj", "mlp.experts.down_proj")


def qwen3_vl_moe(tok, seed: int, text_dims: dict, init_range: float):
    import torch
    from transformers import Qwen3VLMoeConfig, Qwen3VLMoeForConditionalGeneration

    text = {**text_dims, "head_dim": 32, "moe_intermediate_size": 32, "num_experts": 4, "num_experts_per_tok": 2,
            "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
            "rope_parameters": dict(MROPE)}
    config = Qwen3VLMoeConfig(text_config=text, vision_config=vision_config(init_range), tie_word_embeddings=False,
                              initializer_range=init_range, **token_ids(tok))
    torch.manual_seed(seed)
    return Qwen3VLMoeForConditionalGeneration(config)


def transpose_experts(out: Path) -> None:
    """Rewrite the saved fused experts in the released layout (module doc)."""
    from safetensors.torch import load_file, save_file

    weights = out / "model.safetensors"
    state = load_file(weights)
    for name, value in state.items():
        if name.endswith(EXPERT_TENSORS):
            state[name] = value.transpose(1, 2).contiguous()
    save_file(state, weights, metadata={"format": "pt"})
