"""A tiny random-weight Audio Flamingo 3 (``omnieval models tiny --arch audioflamingo3``), in the released layout.

* ``audioflamingo3``: ``AudioFlamingo3ForConditionalGeneration`` (``model_type`` ``audioflamingo3``): the Whisper-style
  audio encoder shrunk to one layer (d_model 32, 2 heads, 128 mel bins, 1500 positions: one 30 s window of 3000
  frames, as released), its two-layer GELU projector, and the shared Qwen2 text decoder (hidden 128, 4 heads of 32,
  2 layers). Weights in the released layout (``audio_tower.*``, ``multi_modal_projector.*``,
  ``language_model.model.*``, ``language_model.lm_head``: transformers 5.19 saves the decoder as
  ``language_model.model.model.*``, which vLLM's loader does not know; transformers reads both). Saved with its
  ``AudioFlamingo3Processor`` (``processor_config.json``): the Whisper feature extractor as published for
  ``nvidia/audio-flamingo-3-hf`` (128 mel bins, hop 160, n_fft 400, 30 s windows, attention mask on),
  ``audio_token`` ``<sound>``, ``max_audio_len``
  600 s. The processor splits a waveform into 30 s windows and writes one ``<sound>`` per audio embedding: the mel
  frames of the clip, halved by the stride-2 convolution and again by the pooling.

The published processor pairs each audio with a text of its own (one audio a prompt), and vLLM's model takes one
audio a prompt too: ``families.OneAudioFamily``.
"""

from __future__ import annotations

from pathlib import Path

from omnieval.dev.tiny_families import family_chat_template, rename_weights

AF3_TOKENS = {"audio_token": "<sound>"}
AF3_TEMPLATE = family_chat_template({"audio": "<sound>"})  # Music Flamingo's too: its processor adds bos and eos
# The released processor's Whisper feature extractor (nvidia/audio-flamingo-3-hf processor_config.json).
AF3_FEATURES = {"feature_size": 128, "sampling_rate": 16000, "hop_length": 160, "n_fft": 400, "chunk_length": 30,
                "dither": 0.0, "padding_value": 0.0, "return_attention_mask": True}
AF3_MAX_AUDIO_SECONDS = 600


def audio_encoder_dims(init_range: float) -> dict:
    """The Whisper-style encoder shared by Audio Flamingo 3 and Music Flamingo, shrunk (module doc)."""
    return {"num_mel_bins": 128, "encoder_layers": 1, "encoder_attention_heads": 2, "encoder_ffn_dim": 64,
            "d_model": 32, "max_source_positions": 1500, "initializer_range": init_range}


def text_config(text_dims: dict) -> dict:
    return {**text_dims, "model_type": "qwen2", "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0}}


def audioflamingo3(tok, seed: int, text_dims: dict, init_range: float):
    import torch
    from transformers import AudioFlamingo3Config, AudioFlamingo3ForConditionalGeneration

    config = AudioFlamingo3Config(audio_config=audio_encoder_dims(init_range), text_config=text_config(text_dims),
                                  audio_token_id=tok.convert_tokens_to_ids(AF3_TOKENS["audio_token"]),
                                  initializer_range=init_range)
    torch.manual_seed(seed)
    return AudioFlamingo3ForConditionalGeneration(config)


def whisper_features():
    from transformers import WhisperFeatureExtractor

    return WhisperFeatureExtractor(**AF3_FEATURES)


def save_audioflamingo3_processor(tok, out: Path) -> None:
    """The processor's files, and the text decoder's weights renamed to the released layout (module doc)."""
    rename_weights(out, "language_model.model.model.", "language_model.model.")
    from transformers import AudioFlamingo3Processor

    AudioFlamingo3Processor(feature_extractor=whisper_features(), tokenizer=tok, chat_template=tok.chat_template,
                            audio_token=AF3_TOKENS["audio_token"],
                            max_audio_len=AF3_MAX_AUDIO_SECONDS).save_pretrained(out)
