"""Block attention in one call per block length (``engines/grouped_attention.py``): each block attends only within
itself, against a plain numpy softmax(QK^T)V per block, and the omni towers give what transformers' own per-block
loop gives."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from omnieval.engines.grouped_attention import NAME, grouped_block_attention, use_grouped_block_attention


def reference(q, k, v, bounds, scale):
    """Per block, per head: softmax(q k^T * scale) v, in float64 numpy."""
    q, k, v = (t[0].double().numpy() for t in (q, k, v))  # (heads, total, dim)
    out = np.zeros_like(q)
    for start, stop in zip(bounds[:-1], bounds[1:]):
        if stop == start:  # an empty block
            continue
        s = q[:, start:stop] @ k[:, start:stop].transpose(0, 2, 1) * scale
        w = np.exp(s - s.max(-1, keepdims=True))
        out[:, start:stop] = (w / w.sum(-1, keepdims=True)) @ v[:, start:stop]
    return out.transpose(1, 0, 2)  # (total, heads, dim)


@pytest.mark.parametrize("bounds", [[0, 64, 128, 192, 230, 294, 300], [0, 5], [0, 3, 3, 10]])
def test_each_block_attends_within_itself(bounds):
    gen = torch.Generator().manual_seed(0)
    total, heads, dim = bounds[-1], 3, 16
    q, k, v = (torch.randn(1, heads, total, dim, generator=gen) for _ in range(3))
    module = torch.nn.Module().eval()
    out, weights = grouped_block_attention(module, q, k, v, scaling=dim ** -0.5,
                                           cu_seq_lens_q=torch.tensor(bounds, dtype=torch.int32),
                                           cu_seq_lens_k=torch.tensor(bounds, dtype=torch.int32))
    assert weights is None and out.shape == (1, total, heads, dim)
    np.testing.assert_allclose(out[0].double().numpy(), reference(q, k, v, bounds, dim ** -0.5), atol=1e-5)


def test_omni_towers_equal_the_per_block_loop(tiny_models):
    """The tiny Qwen2.5-Omni thinker's vision tower (windows of unequal size: a 10 x 14 patch grid) and audio tower,
    switched to grouped attention, against the same weights with transformers' per-block sdpa loop."""
    import transformers

    path = tiny_models("qwen2.5-omni")
    cls = transformers.Qwen2_5OmniThinkerForConditionalGeneration
    plain, grouped = (cls.from_pretrained(path, dtype=torch.float32).eval() for _ in range(2))
    assert use_grouped_block_attention(grouped) == ["qwen2_5_omni_vision_encoder", "qwen2_5_omni_audio_encoder"]
    assert grouped.config.vision_config._attn_implementation == NAME
    assert plain.config.vision_config._attn_implementation == "sdpa"
    gen = torch.Generator().manual_seed(1)
    patches = torch.randn(2 * 10 * 14, 3 * 2 * 14 * 14, generator=gen)
    thw = torch.tensor([[2, 10, 14]])
    features = torch.randn(128, 700, generator=gen)  # 7 s of mel frames: chunks of 100 frames, the last shorter
    lengths = torch.tensor([700])
    with torch.no_grad():
        for want, got in (
            (plain.visual(patches, grid_thw=thw), grouped.visual(patches, grid_thw=thw)),
            (plain.audio_tower(features, feature_lens=lengths, aftercnn_lens=torch.tensor([350])),
             grouped.audio_tower(features, feature_lens=lengths, aftercnn_lens=torch.tensor([350]))),
        ):
            want, got = (getattr(x, "last_hidden_state", x) for x in (want, got))
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_a_model_without_block_towers_is_left_alone(tiny_models):
    import transformers

    net = transformers.AutoModelForCausalLM.from_pretrained(tiny_models("qwen2"))
    assert use_grouped_block_attention(net) == []
    assert net.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("arch", ["qwen3-vl", "qwen3-vl-moe", "qwen3.5"])
def test_qwen3_vl_towers_equal_the_per_block_loop(tiny_models, arch):
    """The Qwen3-VL (dense and mixture-of-experts) and Qwen3.5 vision towers attend within whole frames: a video of
    two frame pairs on a 8 x 12 patch grid and an image of 6 x 4 patches (blocks of 96, 96 and 24 patches), switched
    to grouped attention, against the same weights with transformers' per-block sdpa loop (the merged features and,
    where the tower has them, the deepstack features)."""
    import transformers

    path = tiny_models(arch)
    cls = getattr(transformers, {"qwen3-vl": "Qwen3VLForConditionalGeneration",
                                 "qwen3-vl-moe": "Qwen3VLMoeForConditionalGeneration",
                                 "qwen3.5": "Qwen3_5ForConditionalGeneration"}[arch])
    plain, grouped = (cls.from_pretrained(path, dtype=torch.float32).eval() for _ in range(2))
    tower = grouped.config.vision_config.model_type
    assert use_grouped_block_attention(grouped) == [tower]
    assert grouped.config.vision_config._attn_implementation == NAME
    assert plain.config.vision_config._attn_implementation == "sdpa"
    thw = torch.tensor([[2, 8, 12], [1, 6, 4]])
    patches = torch.randn(2 * 8 * 12 + 6 * 4, 3 * 2 * 16 * 16, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want, got = (net.model.visual(patches, grid_thw=thw) for net in (plain, grouped))
    torch.testing.assert_close(got.pooler_output, want.pooler_output, atol=1e-5, rtol=1e-5)
    deepstack = [getattr(out, "deepstack_features", None) or [] for out in (got, want)]
    assert len(deepstack[0]) == (0 if arch == "qwen3.5" else 1)
    for a, b in zip(*deepstack, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_qwen3_omni_towers_equal_the_per_block_loop(tiny_models):
    """The Qwen3-Omni thinker's vision tower (a video of two frame pairs and an image: blocks of 96, 96 and 24
    patches) and audio tower (25 s of mel frames: windows of 800 frames, the last shorter), switched to grouped
    attention, against the same weights with transformers' per-block sdpa loop."""
    import transformers

    path = tiny_models("qwen3-omni")
    plain, grouped = (transformers.Qwen3OmniMoeForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
                      .eval().thinker for _ in range(2))
    assert use_grouped_block_attention(grouped) == ["qwen3_omni_moe_vision_encoder", "qwen3_omni_moe_audio_encoder"]
    assert plain.config.vision_config._attn_implementation == "sdpa"
    vision = grouped.config.vision_config
    gen = torch.Generator().manual_seed(3)
    thw = torch.tensor([[2, 8, 12], [1, 6, 4]])
    patches = torch.randn(2 * 8 * 12 + 6 * 4, vision.in_channels * vision.temporal_patch_size * vision.patch_size ** 2,
                          generator=gen)
    features = torch.randn(grouped.config.audio_config.num_mel_bins, 2_500, generator=gen)
    with torch.no_grad():
        want, got = (net.visual(patches, grid_thw=thw) for net in (plain, grouped))
        torch.testing.assert_close(got.pooler_output, want.pooler_output, atol=1e-5, rtol=1e-5)
        for a, b in zip(got.deepstack_features or [], want.deepstack_features or [], strict=True):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        want, got = (net.audio_tower(features, feature_lens=torch.tensor([2_500])) for net in (plain, grouped))
        torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state, atol=1e-5, rtol=1e-5)


def test_videollama3_tower_equals_the_per_block_loop(tiny_models):
    """VideoLLaMA3's vision tower attends within each image or frame: three frames of 8 x 12 patches and an image
    of 6 x 4, switched to grouped attention, against the same weights with transformers' per-block sdpa loop."""
    import transformers

    path = tiny_models("videollama3")
    plain, grouped = (transformers.VideoLlama3ForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
                      .eval() for _ in range(2))
    assert use_grouped_block_attention(grouped) == ["video_llama_3_vision"]
    assert plain.config.vision_config._attn_implementation == "sdpa"
    vision = grouped.config.vision_config
    thw = torch.tensor([[3, 8, 12], [1, 6, 4]])
    patches = torch.randn(3 * 8 * 12 + 6 * 4, vision.num_channels * vision.patch_size ** 2,
                          generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        want, got = (net.model.vision_model(patches, grid_thw=thw, merge_sizes=torch.tensor([2, 1]))
                     for net in (plain, grouped))
    torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("arch, towers", [
    ("qwen3-omni", ["qwen3_omni_moe_vision_encoder", "qwen3_omni_moe_audio_encoder"]),
    ("videollama3", ["video_llama_3_vision"])])
def test_the_transformers_engine_switches_these_towers_when_it_loads(tiny_models, arch, towers):
    from omnieval.engines import create_engine

    engine = create_engine("hf", model=arch, path=str(tiny_models(arch)), dtype="float32")
    assert engine.grouped_towers == towers
