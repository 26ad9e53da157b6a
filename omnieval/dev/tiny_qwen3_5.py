"""A tiny random-weight Qwen3.5 (``omnieval models tiny --arch qwen3.5``), in the released checkpoint's layout.

* ``qwen3.5``: ``Qwen3_5ForConditionalGeneration`` (``model_type`` ``qwen3_5``; images and videos). The hybrid text
  decoder, hidden 128, 2 layers: a Gated DeltaNet linear-attention layer (one key head and 2 value heads of 64, a
  causal convolution of 4; vLLM 0.32's CPU kernel for these layers rejects heads of 32) then a gated
  full-attention layer (4 heads of 32, 2 key-value heads, the output gated as released). The release alternates
  three linear layers and one full (``full_attention_interval`` 4); two layers here keep one of each. Rotary
  embedding on a quarter of each head as released (``partial_rotary_factor`` 0.25: 8 of 32 dimensions),
  interleaved multimodal sections [2, 1, 1] (the released [11, 11, 10] scaled to those 8). Vision tower as
  Qwen3-VL's (``tiny_qwen3_vl.py``) without deepstack mergers (Qwen3.5's has none).
* ``model.safetensors``: ``model.language_model.*``, ``model.visual.*``, ``lm_head.*`` as transformers saves the
  model and the release ships it, without the release's multi-token-prediction layer (``mtp.*``, read only for
  speculative decoding; both engines' loaders skip it).
* The processor files, tokenizer and chat template of the Qwen3-VL build (``tiny_qwen3_vl.py``: the Qwen3.5
  releases ship the same ``Qwen3VLProcessor`` files with the same values).
"""

from __future__ import annotations

from omnieval.dev.tiny_qwen3_vl import token_ids, vision_config

ROPE = {"rope_type": "default", "rope_theta": 10_000_000.0, "partial_rotary_factor": 0.25, "mrope_section": [2, 1, 1],
        "mrope_interleaved": True}


def qwen3_5(tok, seed: int, text_dims: dict, init_range: float):
    import torch
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration

    text = {**text_dims, "head_dim": 32, "layer_types": ["linear_attention", "full_attention"],
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": 64, "linear_value_head_dim": 64,
            "linear_num_key_heads": 1, "linear_num_value_heads": 2, "attn_output_gate": True,
            "mamba_ssm_dtype": "float32", "rope_parameters": dict(ROPE)}
    config = Qwen3_5Config(text_config=text, vision_config=vision_config(init_range, deepstack=False),
                           tie_word_embeddings=False, initializer_range=init_range, **token_ids(tok))
    torch.manual_seed(seed)
    return Qwen3_5ForConditionalGeneration(config)
