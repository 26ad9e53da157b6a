"""A tiny random-weight Gemma 4 (``omnieval models tiny --arch gemma4``), in the released E2B/E4B layout.

* ``config.json``: a ``Gemma4Config`` (``architectures: ["Gemma4ForConditionalGeneration"]``, the name vLLM's
  registry maps to its multimodal Gemma 4) with the three sub-configs of the audio-capable releases. Text decoder
  hidden 128, 2 layers (one sliding-window layer of 4 heads of 32, the last a full-attention layer whose heads are
  64 wide, as the released global layers are twice as wide), one shared key-value head, per-layer inputs of 16,
  final logit soft-capping 30, tied embeddings, no bidirectional attention over vision tokens (the E2B/E4B
  setting); vision tower 1 layer, hidden 32, 16-pixel patches pooled 3 x 3, a 2 x 128 table of learned position
  embeddings (drawn at random: the constructor fills it with ones, which would make every patch position alike);
  audio tower 1 conformer layer, hidden 32, output 32.
* ``model.safetensors``: every weight as transformers saves the full model (``model.language_model.*``,
  ``model.vision_tower.*``, ``model.audio_tower.*``, ``model.embed_vision.*``, ``model.embed_audio.*``; the
  output head tied to the embedding, not saved), the layout the released checkpoints ship and vLLM's loader reads.
* ``processor_config.json``: the released ``Gemma4Processor`` sections (``Gemma4ImageProcessor``: 16-pixel patches,
  pooling 3, no normalisation; ``Gemma4VideoProcessor``: 70 soft tokens a frame, frames normalised with mean 0 and
  std 1; ``Gemma4AudioFeatureExtractor``: 128 mel bins, 20 ms frames every 10 ms at 16 kHz; ``audio_seq_length``
  750, ``audio_ms_per_token`` 40), except the image budget: 70 soft tokens an image (the smallest the processor
  takes) where the release has 280, with the vision config's ``default_output_length`` to match (vLLM reads the
  budget from there). Values checked against the published ``google/gemma-4-E2B-it`` files, written here in
  our own layout.
* The tokenizer: ``tiny_models.build_tokenizer`` with Gemma 4's media tokens, named as the processor reads them
  (``<|image>``, ``<|image|>``, ``<image|>``, ``<|audio>``, ``<|audio|>``, ``<audio|>``, ``<|video|>``), and a
  chat template writing ``<|image|>``, ``<|audio|>`` or ``<|video|>`` for each typed content part, as the released
  template does. Unlike Gemma 3n, every media id is an ordinary row of the one text vocabulary (the multimodal
  embedders have no tables of their own), and the pad id is 0 as released: both engines give the per-layer inputs
  of a media position the pad token's row.

``omnieval models tiny --arch gemma4-unified`` builds the encoder-free Gemma 4
(``Gemma4UnifiedForConditionalGeneration``, released as ``google/gemma-4-12B-it``) from the same tokenizer, chat
template and text decoder sizes, with what that release does differently:

* no vision or audio tower: an image or video frame is cut into 48-pixel patches (16-pixel patches merged 3 x 3),
  each one soft token through layer norms, a dense projection of width 128 (the release's is the text width too)
  and a 128 x 2 table of factorised positions (released: 1120); a waveform is cut into 640-sample (40 ms) frames,
  each one soft token, projected as it is;
* text decoder: no per-layer inputs; the full-attention layer's keys are its values (``attention_k_eq_v``), with
  one shared key-value head where the sliding layer has 2; image and video tokens attend to each other in both
  directions (``use_bidirectional_attention: vision``, the config's default, as in the larger Gemma 4 releases);
* weights as the release ships them: the patch embedder under ``model.vision_embedder.*`` and its projection under
  ``model.embed_vision.*`` (transformers renames both on loading, and back on saving);
* ``processor_config.json``: the ``Gemma4UnifiedProcessor`` sections (the same budgets as above: 70 soft tokens an
  image, and a frame; the audio feature extractor's 640 samples a token); the vision config's ``num_soft_tokens``
  matches the image budget (vLLM reads it there).

Loading its processor needs torchvision (the image and video processors import it).
"""

from __future__ import annotations

from pathlib import Path

from omnieval.dev.tiny_families import family_chat_template

GEMMA4_TOKENS = {"boi_token": "<|image>", "image_token": "<|image|>", "eoi_token": "<image|>",
                 "boa_token": "<|audio>", "audio_token": "<|audio|>", "eoa_token": "<audio|>",
                 "video_token": "<|video|>"}
GEMMA4_TEMPLATE = family_chat_template({"image": "<|image|>", "audio": "<|audio|>", "video": "<|video|>"})
PATCH, POOLING = 16, 3
IMAGE_SOFT_TOKENS = 70  # the released image budget is 280; 70 is the smallest the processor takes
VIDEO_SOFT_TOKENS = 70  # a frame's budget, as released
AUDIO_SEQ_LENGTH, AUDIO_MS_PER_TOKEN = 750, 40
POSITION_TABLE = 128  # learned positions a side (released: 10240)
UNIFIED_AUDIO_SAMPLES = 640  # gemma4-unified: waveform samples a soft token (40 ms at 16 kHz), as released


def gemma4(tok, seed: int, text_dims: dict, init_range: float):
    """The full model, its token ids this tokenizer's (module doc)."""
    import torch
    from transformers import Gemma4Config, Gemma4ForConditionalGeneration

    ids = {name: tok.convert_tokens_to_ids(token) for name, token in GEMMA4_TOKENS.items()}
    if text_dims["pad_token_id"] != 0:  # both engines embed media positions' per-layer inputs as this row
        raise RuntimeError(f"tiny gemma4: the pad id must be 0 (got {text_dims['pad_token_id']})")
    text = {key: text_dims[key] for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                             "num_attention_heads", "max_position_embeddings", "rms_norm_eps",
                                             "bos_token_id", "eos_token_id", "pad_token_id")}
    text |= {"num_key_value_heads": 1, "head_dim": 32, "global_head_dim": 64,
             "layer_types": ["sliding_attention", "full_attention"], "sliding_window": 512,
             "hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": text_dims["vocab_size"],
             "num_kv_shared_layers": 0, "use_double_wide_mlp": True, "final_logit_softcapping": 30.0,
             "tie_word_embeddings": True, "initializer_range": init_range,
             "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                                 "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                    "rope_theta": 1_000_000.0}}}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 1,
              "num_key_value_heads": 1, "head_dim": 32, "patch_size": PATCH, "pooling_kernel_size": POOLING,
              "position_embedding_size": POSITION_TABLE, "default_output_length": IMAGE_SOFT_TOKENS,
              "use_clipped_linears": True, "standardize": False, "initializer_range": init_range}
    audio = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
             "subsampling_conv_channels": [128, 4], "output_proj_dims": 32, "use_clipped_linears": True,
             "initializer_range": init_range}
    config = Gemma4Config(
        text_config=text, vision_config=vision, audio_config=audio, initializer_range=init_range,
        tie_word_embeddings=True, boi_token_id=ids["boi_token"], eoi_token_id=ids["eoi_token"],
        image_token_id=ids["image_token"], video_token_id=ids["video_token"], boa_token_id=ids["boa_token"],
        eoa_token_index=ids["eoa_token"], eoa_token_id=ids["eoa_token"], audio_token_id=ids["audio_token"],
        eos_token_id=text_dims["eos_token_id"])
    torch.manual_seed(seed)
    model = Gemma4ForConditionalGeneration(config).eval()
    with torch.no_grad():
        table = model.model.vision_tower.patch_embedder.position_embedding_table
        table.copy_(torch.randn(table.shape) * init_range)
    return model


def save_gemma4_processor(tok, out: Path) -> None:
    """The tokenizer, the chat template and ``processor_config.json`` (module doc)."""
    from transformers import Gemma4AudioFeatureExtractor, Gemma4ImageProcessor, Gemma4Processor, Gemma4VideoProcessor

    budget = {"patch_size": PATCH, "pooling_kernel_size": POOLING}
    Gemma4Processor(
        feature_extractor=Gemma4AudioFeatureExtractor(),
        image_processor=Gemma4ImageProcessor(max_soft_tokens=IMAGE_SOFT_TOKENS, resample=3, **budget),
        video_processor=Gemma4VideoProcessor(max_soft_tokens=VIDEO_SOFT_TOKENS, num_frames=32, resample=3,
                                             **budget),
        tokenizer=tok, chat_template=tok.chat_template, image_seq_length=IMAGE_SOFT_TOKENS,
        audio_seq_length=AUDIO_SEQ_LENGTH, audio_ms_per_token=AUDIO_MS_PER_TOKEN).save_pretrained(out)


def gemma4_unified(tok, seed: int, text_dims: dict, init_range: float):
    """The encoder-free model (module doc), its token ids this tokenizer's."""
    import torch
    from transformers import Gemma4UnifiedConfig, Gemma4UnifiedForConditionalGeneration

    ids = {name: tok.convert_tokens_to_ids(token) for name, token in GEMMA4_TOKENS.items()}
    text = {key: text_dims[key] for key in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                                             "num_attention_heads", "max_position_embeddings", "rms_norm_eps",
                                             "bos_token_id", "eos_token_id", "pad_token_id")}
    text |= {"num_key_value_heads": 2, "head_dim": 32, "global_head_dim": 64, "num_global_key_value_heads": 1,
             "attention_k_eq_v": True, "layer_types": ["sliding_attention", "full_attention"],
             "sliding_window": 1024, "use_bidirectional_attention": "vision", "final_logit_softcapping": 30.0,
             "tie_word_embeddings": True, "initializer_range": init_range,
             "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                                 "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                                    "rope_theta": 1_000_000.0}}}
    width = text_dims["hidden_size"]
    vision = {"patch_size": PATCH, "pooling_kernel_size": POOLING, "mm_embed_dim": width, "output_proj_dims": width,
              "mm_posemb_size": POSITION_TABLE, "num_soft_tokens": IMAGE_SOFT_TOKENS, "initializer_range": init_range}
    audio = {"audio_embed_dim": UNIFIED_AUDIO_SAMPLES, "initializer_range": init_range}
    config = Gemma4UnifiedConfig(
        text_config=text, vision_config=vision, audio_config=audio, initializer_range=init_range,
        tie_word_embeddings=True, boi_token_id=ids["boi_token"], eoi_token_id=ids["eoi_token"],
        image_token_id=ids["image_token"], video_token_id=ids["video_token"], boa_token_id=ids["boa_token"],
        eoa_token_index=ids["eoa_token"], eoa_token_id=ids["eoa_token"], audio_token_id=ids["audio_token"],
        eos_token_id=text_dims["eos_token_id"])
    torch.manual_seed(seed)
    model = Gemma4UnifiedForConditionalGeneration(config).eval()
    with torch.no_grad():  # the constructor's table is zeros: every patch position alike
        table = model.model.embed_vision.pos_embedding
        table.copy_(torch.randn(table.shape) * init_range)
    return model


def save_gemma4_unified_processor(tok, out: Path) -> None:
    from transformers import (
        Gemma4UnifiedAudioFeatureExtractor,
        Gemma4UnifiedImageProcessor,
        Gemma4UnifiedProcessor,
        Gemma4UnifiedVideoProcessor,
    )

    budget = {"patch_size": PATCH, "pooling_kernel_size": POOLING}
    Gemma4UnifiedProcessor(
        feature_extractor=Gemma4UnifiedAudioFeatureExtractor(feature_size=UNIFIED_AUDIO_SAMPLES,
                                                             audio_samples_per_token=UNIFIED_AUDIO_SAMPLES),
        image_processor=Gemma4UnifiedImageProcessor(max_soft_tokens=IMAGE_SOFT_TOKENS, resample=3, **budget),
        video_processor=Gemma4UnifiedVideoProcessor(max_soft_tokens=VIDEO_SOFT_TOKENS, num_frames=32, resample=3,
                                                    **budget),
        tokenizer=tok, chat_template=tok.chat_template, image_seq_length=IMAGE_SOFT_TOKENS,
        audio_seq_length=AUDIO_SEQ_LENGTH, audio_ms_per_token=AUDIO_MS_PER_TOKEN).save_pretrained(out)
