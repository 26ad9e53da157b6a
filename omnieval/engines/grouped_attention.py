"""The Qwen media towers' block attention in a few calls instead of one call per block.

The vision and audio encoders of the Qwen omni and VL families attend within blocks: windows of 8 x 8 patches (and
whole frames in a few layers) for vision, chunks of 100 frames for audio, given as cumulative lengths
(``cu_seqlens``); the Qwen3-VL and Qwen3.5 vision towers attend within whole frames (one block per image, one per
frame pair of a video), as do the Qwen3-Omni vision tower and VideoLLaMA3's (one block per image or frame); the
Qwen3-Omni audio tower attends within windows of 800 mel frames. In transformers 5.x every attention
implementation but flash attention runs one attention call per block: thousands of tiny kernels per video. Measured
on an H100 with a 7B Qwen2.5-Omni thinker (docs/gpu.md), that loop was 71% of a batch's forward pass, and batching
did not amortise it.

``grouped_block_attention`` takes the same inputs a flash implementation gets (the towers pass ``cu_seqlens`` only to
an implementation whose name contains "flash", hence ``NAME``) and runs one scaled-dot-product call per distinct
block length over all blocks of that length: blocks never attend across each other, nothing is padded, and each
block's result is the same computation as transformers' per-block loop (equal on CPU; on a GPU equal within the
kernels' rounding). A call without block lengths (any other caller) is plain SDPA.

``use_grouped_block_attention(net)`` switches the towers of a loaded model to it: after loading, so transformers'
checks for a flash-attention package do not see the name; only on the towers listed in ``TOWERS`` (whose attention
code is known to split by ``cu_seqlens``), and never where a real flash implementation is already chosen.
"""

from __future__ import annotations

NAME = "omnieval_flash_compatible_grouped_sdpa"
# Sub-config model types whose attention splits by cu_seqlens (transformers 5.17-5.19).
TOWERS = frozenset({"qwen2_5_omni_vision_encoder", "qwen2_5_omni_audio_encoder", "qwen2_5_vl_vision",
                    "qwen3_vl_vision", "qwen3_vl_moe_vision", "qwen3_5_vision", "qwen3_omni_moe_vision_encoder",
                    "qwen3_omni_moe_audio_encoder", "video_llama_3_vision"})


def grouped_block_attention(module, query, key, value, attention_mask=None, scaling=None, dropout=0.0,
                            cu_seq_lens_q=None, cu_seq_lens_k=None, is_causal=False, **kwargs):
    """transformers' attention-function signature: ``query``/``key``/``value`` of shape (1, heads, total, dim) with
    ``cu_seq_lens_q`` the block boundaries; returns ((1, total, heads, dim), None) as the flash functions do."""
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if cu_seq_lens_q is None or (cu_seq_lens_k is not None and not torch.equal(cu_seq_lens_q, cu_seq_lens_k)):
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                                      is_causal=is_causal, **kwargs)
    q, k, v = (t[0].transpose(0, 1) for t in (query, key, value))  # (total, heads, dim)
    bounds = cu_seq_lens_q.to(device=q.device, dtype=torch.long)
    starts, lengths = bounds[:-1], bounds[1:] - bounds[:-1]
    out = torch.empty_like(q)
    for length in torch.unique(lengths).tolist():
        if length == 0:
            continue
        rows = (starts[lengths == length].unsqueeze(1) + torch.arange(length, device=q.device)).reshape(-1)
        blocks = rows.numel() // length
        qs, ks, vs = (t[rows].reshape(blocks, length, *t.shape[1:]).transpose(1, 2) for t in (q, k, v))
        o = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs, scale=scaling, is_causal=is_causal,
                                                             dropout_p=dropout if module.training else 0.0)
        out[rows] = o.transpose(1, 2).reshape(blocks * length, *q.shape[1:])
    return out.unsqueeze(0), None


def use_grouped_block_attention(net) -> list[str]:
    """Switch the block-attention towers of ``net`` (a loaded model) to ``grouped_block_attention``; return the
    model types switched (empty where none applies)."""
    from transformers import AttentionInterface

    config = getattr(net, "config", None)
    switched = []
    for name in ("vision_config", "audio_config"):
        sub = getattr(config, name, None)
        if sub is None or getattr(sub, "model_type", None) not in TOWERS:
            continue
        if "flash" in str(getattr(sub, "_attn_implementation", "") or ""):
            continue  # a real flash kernel already runs one call per layer
        AttentionInterface.register(NAME, grouped_block_attention)
        sub._attn_implementation = NAME
        switched.append(sub.model_type)
    return switched
