"""A tiny random-weight Nemotron-H omni (``omnieval models tiny --arch nemotron-h-omni``), in the transformers-native
layout (``model_type`` ``nemotron_h_omni``, ``NemotronH_Omni_Reasoning_V3``; released as
``nvidia/Nemotron-3-Nano-Omni-30B-A3B-Reasoning-BF16``).

* ``nemotron-h-omni``: images, videos and audio. Text decoder Nemotron-H (hidden 128, 2 layers: one Mamba-2 layer
  of 4 heads of 64 with a state of 16 in 2 groups, then one attention layer of 4 heads of 32 with 2 key-value heads;
  the release interleaves Mamba-2, attention and mixture-of-experts layers); vision tower RADIO, 1 layer, hidden 32
  (one head of 32) on 16-pixel patches, two frames a temporal patch for video, features pixel-shuffled 2 x 2 into
  the two-layer projector; audio tower Parakeet (FastConformer), 1 layer, hidden 32, 8x subsampling of 128 mel
  bins, then its two-layer projector.
* ``model.safetensors``: the weights in the released layout, which vLLM's loader and transformers (which renames
  on loading) both read: ``language_model.backbone.*`` and ``language_model.lm_head.*``,
  ``vision_model.radio_model.*``, ``mlp1.*``, ``sound_encoder.encoder.*``, ``sound_projection.*``.
* The processor files (``NemotronH_Omni_Reasoning_V3Processor``, read by the transformers engine), with the
  settings transformers 5.19's processor classes default to for this release (not checked against the released
  files), written here in our own layout: images resized to a grid of 16-pixel patches of even sides
  within 1024 to 13312 patches, one token per 2 x 2 patches, ``<img>`` and ``</img>`` around each image's
  ``<image>`` run; video frames resized to one aspect-kept tile near ``video_target_num_patches`` patches (the
  default: 1024; here 64, so the test stays fast), one ``<img>...</img>`` run per two frames after the frames'
  times (frames decoded at 2 fps: ``Frame 1 sampled at 0.25 seconds and frame 2 sampled at 0.75 seconds:``);
  audio as Parakeet log-mel features (128 bins here, 10 ms hops at 16 kHz), ``1 + samples // 160`` frames
  through three stride-2 stages, between ``<so_start>`` and ``<so_end>``.
* The tokenizer: ``tiny_models.build_tokenizer`` with the media tokens the processor reads (``<image>``,
  ``<video>``, ``<so_embedding>``, ``<img>``, ``</img>``, ``<so_start>``, ``<so_end>``) and a chat template
  writing ``<image>``, ``<video>`` or ``<so_embedding>`` for each typed content part (no reasoning preamble).

vLLM 0.32 maps this architecture to its remote-code Nemotron Nano VL model, which fails on this config
(``families``: the vllm engine refuses it). Loading the processor needs torchvision and librosa (the Parakeet
feature extractor imports it).
"""

from __future__ import annotations

from pathlib import Path

from omnieval.dev.tiny_families import family_chat_template, save_with_processor_files

NEMOTRON_TOKENS = {"image_token": "<image>", "video_token": "<video>", "audio_token": "<so_embedding>",
                   "image_start_token": "<img>", "image_end_token": "</img>", "audio_start_token": "<so_start>",
                   "audio_end_token": "<so_end>"}
NEMOTRON_TEMPLATE = family_chat_template({"image": "<image>", "video": "<video>", "audio": "<so_embedding>"})
PATCH = 16
MIN_PATCHES, MAX_PATCHES = 1024, 13312  # the image budget (the processor's defaults), in 16-pixel patches
VIDEO_PATCHES = 64  # a frame's patch budget (the processor's default: 1024)
AUDIO_HOP, AUDIO_SUBSAMPLING = 160, 8
_CLIP_MEAN, _CLIP_STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
PROCESSOR_CONFIG = {
    "processor_class": "NemotronH_Omni_Reasoning_V3Processor", "audio_sampling_rate": 16000,
    "audio_subsampling_factor": AUDIO_SUBSAMPLING, "audio_hop_length": AUDIO_HOP, "video_temporal_patch_dim": 2,
    "image_processor": {"image_processor_type": "NemotronH_Omni_Reasoning_V3ImageProcessor", "patch_size": PATCH,
                        "downsample_ratio": 0.5, "min_num_patches": MIN_PATCHES, "max_num_patches": MAX_PATCHES,
                        "max_model_len": 16384, "image_mean": _CLIP_MEAN, "image_std": _CLIP_STD,
                        "do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "resample": 3,
                        "rescale_factor": 1 / 255},
    "video_processor": {"video_processor_type": "NemotronH_Omni_Reasoning_V3VideoProcessor", "patch_size": PATCH,
                        "downsample_ratio": 0.5, "video_target_num_patches": VIDEO_PATCHES,
                        "video_maintain_aspect_ratio": True, "norm_mean": _CLIP_MEAN, "norm_std": _CLIP_STD,
                        "do_sample_frames": False},
    "feature_extractor": {"feature_extractor_type": "ParakeetFeatureExtractor", "feature_size": 128,
                          "sampling_rate": 16000, "hop_length": AUDIO_HOP, "n_fft": 512, "win_length": 400,
                          "preemphasis": 0.97, "padding_value": 0.0},
}


def nemotron_h_omni(tok, seed: int, text_dims: dict, init_range: float):
    """The native model (module doc), its media token ids this tokenizer's."""
    import torch
    from transformers import NemotronH_Omni_Reasoning_V3, NemotronH_Omni_Reasoning_V3_Config

    ids = {name: tok.convert_tokens_to_ids(token) for name, token in NEMOTRON_TOKENS.items()}
    text = {key: text_dims[key] for key in ("vocab_size", "hidden_size", "intermediate_size", "num_attention_heads",
                                             "num_key_value_heads", "max_position_embeddings", "bos_token_id",
                                             "eos_token_id", "pad_token_id", "tie_word_embeddings")}
    text |= {"model_type": "nemotron_h", "layers_block_type": ["linear_attention", "full_attention"], "head_dim": 32,
             "mamba_num_heads": 4, "mamba_head_dim": 64, "ssm_state_size": 16, "n_groups": 2, "chunk_size": 16,
             "use_mamba_kernels": False, "layer_norm_epsilon": 1e-5, "initializer_range": init_range}
    vision = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 1, "patch_size": PATCH,
              "video_temporal_patch_size": 2, "max_img_size": 512, "initializer_range": init_range}
    audio = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 1, "intermediate_size": 64,
             "num_mel_bins": 128, "subsampling_factor": AUDIO_SUBSAMPLING, "subsampling_conv_channels": 16,
             "projection_hidden_size": 64, "projection_bias": True, "initializer_range": init_range}
    config = NemotronH_Omni_Reasoning_V3_Config(
        text_config=text, vision_config=vision, audio_config=audio, vision_hidden_size=32,
        projector_hidden_size=64, downsample_ratio=0.5, image_token_id=ids["image_token"],
        video_token_id=ids["image_token"], audio_token_id=ids["audio_token"], initializer_range=init_range)
    torch.manual_seed(seed)
    return NemotronH_Omni_Reasoning_V3(config).eval()


def save_nemotron_h_omni_processor(tok, out: Path) -> None:
    """The tokenizer, the chat template and ``processor_config.json`` (module doc)."""
    save_with_processor_files(tok, out, NEMOTRON_TEMPLATE, {"processor_config.json": PROCESSOR_CONFIG})
