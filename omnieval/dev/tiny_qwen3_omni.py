"""A tiny random-weight Qwen3-Omni (``omnieval models tiny --arch qwen3-omni``), in the released checkpoint's layout.

* ``config.json``: a full ``Qwen3OmniMoeConfig`` (``architectures: ["Qwen3OmniMoeForConditionalGeneration"]``, the
  name vLLM's registry maps to its thinker; ``enable_audio_output`` false, so no talker or code2wav is built or
  saved) with the thinker under ``thinker_config``: text decoder hidden 128, 2 layers of 4 heads of 32 (vLLM's CPU
  attention needs head size >= 32), every layer a mixture of 4 experts (intermediate 64) with 2 routed a token,
  interleaved multimodal rotary sections [6, 5, 5] (the released [24, 20, 20] scaled to head size 32); vision tower
  2 blocks of hidden 32, 16-pixel patches merged 2 x 2, deepstack from block 0, an 8 x 8 grid of learned position
  embeddings (``image_size`` 128: the 768 / 16 = 48 x 48 of the release, shrunk); audio tower 1 layer, d_model 32,
  windows of 100 mel frames as released; 13 temporal positions per second (``position_id_per_seconds``).
* ``model.safetensors``: every weight under ``thinker.``, the experts one by one (``mlp.experts.<i>.gate_proj``), as
  transformers saves the full model and vLLM's loader reads it.
* ``preprocessor_config.json``: one flat file holding the Whisper feature extractor's and the image processor's
  settings, as the released checkpoints ship it (no ``video_preprocessor_config.json``: the video processor is built
  from the same file, its frame sizes the processor's own defaults, 128 to 768 merged patches a frame). Values from
  the published ``Qwen/Qwen3-Omni-30B-A3B-Instruct`` ``preprocessor_config.json`` (128 mel bins, hop 160, n_fft 400,
  300 s chunk; 16-pixel patches, temporal patch 2, merge 2, 3136 to 12845056 pixels, mean and std 0.5), written
  here in our own layout.
* The tokenizer: ``tiny_models.build_tokenizer`` with Qwen3-Omni's media tokens (``<|audio_start|>``,
  ``<|audio_pad|>``, ``<|audio_end|>``, ``<|vision_start|>``, ``<|image_pad|>``, ``<|video_pad|>``,
  ``<|vision_end|>``, named as the processor reads them) and a chat template that writes, for each typed content
  part, the placeholder vLLM's Qwen3-Omni model names (``get_placeholder_str``), with no default system turn; also
  saved as ``chat_template.json`` for the processor.

Loading its processor needs torchvision (the video processor imports it), as for Qwen2.5-Omni.
"""

from __future__ import annotations

from pathlib import Path

from omnieval.dev.tiny_families import save_with_processor_files

QWEN3_OMNI_TOKENS = {
    "image_token": "<|image_pad|>", "video_token": "<|video_pad|>", "audio_token": "<|audio_pad|>",
    "vision_bos_token": "<|vision_start|>", "vision_eos_token": "<|vision_end|>",
    "audio_bos_token": "<|audio_start|>", "audio_eos_token": "<|audio_end|>",
}
QWEN3_OMNI_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'text' %}{{ content['text'] }}"
    "{% elif content['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif content['type'] == 'audio' %}<|audio_start|><|audio_pad|><|audio_end|>"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PREPROCESSOR_CONFIG = {
    "processor_class": "Qwen3OmniMoeProcessor",
    "feature_extractor_type": "WhisperFeatureExtractor", "feature_size": 128, "sampling_rate": 16000,
    "hop_length": 160, "n_fft": 400, "chunk_length": 300, "n_samples": 4_800_000, "nb_max_frames": 30_000,
    "dither": 0.0, "padding_side": "right", "padding_value": 0.0, "return_attention_mask": True,
    "image_processor_type": "Qwen2VLImageProcessor", "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
    "min_pixels": 3136, "max_pixels": 12_845_056, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
}
POSITIONS_PER_SECOND = 13
VISION_GRID = 8  # learned position embeddings a side


def qwen3_omni(tok, seed: int, text_dims: dict, init_range: float):
    """The full model (thinker only: audio output disabled), its token ids this tokenizer's."""
    import torch
    from transformers import Qwen3OmniMoeConfig, Qwen3OmniMoeForConditionalGeneration

    ids = {name: tok.convert_tokens_to_ids(token) for name, token in QWEN3_OMNI_TOKENS.items()}
    text = {**text_dims, "head_dim": 32, "moe_intermediate_size": 64, "num_experts": 4, "num_experts_per_tok": 2,
            "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
            "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": [6, 5, 5],
                                "interleaved": True, "mrope_interleaved": True}}
    vision = {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 1, "out_hidden_size": 128,
              "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3,
              "hidden_act": "gelu_pytorch_tanh", "deepstack_visual_indexes": [0],
              "num_position_embeddings": VISION_GRID ** 2, "image_size": 16 * VISION_GRID,
              "apply_vit_abs_pos_embed": True, "initializer_range": init_range}
    audio = {"num_mel_bins": 128, "encoder_layers": 1, "encoder_attention_heads": 2, "encoder_ffn_dim": 64,
             "d_model": 32, "output_dim": 128, "n_window": 50, "n_window_infer": 800, "conv_chunksize": 500,
             "downsample_hidden_size": 16, "max_source_positions": 1500, "initializer_range": init_range}
    thinker = {"text_config": text, "vision_config": vision, "audio_config": audio,
               "audio_token_id": ids["audio_token"], "image_token_id": ids["image_token"],
               "video_token_id": ids["video_token"], "vision_start_token_id": ids["vision_bos_token"],
               "vision_end_token_id": ids["vision_eos_token"], "audio_start_token_id": ids["audio_bos_token"],
               "audio_end_token_id": ids["audio_eos_token"], "position_id_per_seconds": POSITIONS_PER_SECOND,
               "seconds_per_chunk": 2, "user_token_id": tok.convert_tokens_to_ids("user"),
               "initializer_range": init_range, "tie_word_embeddings": False}
    config = Qwen3OmniMoeConfig(thinker_config=thinker, enable_audio_output=False,
                                im_start_token_id=tok.convert_tokens_to_ids("<|im_start|>"),
                                im_end_token_id=tok.convert_tokens_to_ids("<|im_end|>"))
    torch.manual_seed(seed)
    return Qwen3OmniMoeForConditionalGeneration(config)


def save_qwen3_omni_processor(tok, out: Path) -> None:
    """The tokenizer, and the processor's files as released (module doc)."""
    save_with_processor_files(tok, out, QWEN3_OMNI_TEMPLATE, {"preprocessor_config.json": PREPROCESSOR_CONFIG})
