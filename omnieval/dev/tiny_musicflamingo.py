"""A tiny random-weight Music Flamingo (``omnieval models tiny --arch musicflamingo``), in the released layout.

* ``musicflamingo``: ``MusicFlamingoForConditionalGeneration`` (``model_type`` ``musicflamingo``): Audio Flamingo 3's
  encoder, projector and Qwen2 text decoder at the same tiny sizes (``tiny_audioflamingo3``), plus what Music
  Flamingo adds: rotary time embeddings on the audio embeddings (the published defaults: theta 1200, a fifth of
  each embedding rotated, 10 ms a mel frame) and ``<|sound_bos|>`` / ``<|sound_eos|>`` around each clip's
  ``<sound>`` run. Weights in the same released layout as Audio Flamingo 3's. Saved with its
  ``MusicFlamingoProcessor`` as published for ``nvidia/music-flamingo-hf`` (the same Whisper features,
  ``max_audio_len`` 1200 s).

vLLM 0.32 no longer carries Music Flamingo (``families``: refused on the vllm engine); its processor, like Audio
Flamingo 3's, takes one audio a prompt.
"""

from __future__ import annotations

from pathlib import Path

from omnieval.dev.tiny_audioflamingo3 import audio_encoder_dims, text_config, whisper_features
from omnieval.dev.tiny_families import rename_weights

MF_TOKENS = {"audio_token": "<sound>", "audio_bos_token": "<|sound_bos|>", "audio_eos_token": "<|sound_eos|>"}
MF_MAX_AUDIO_SECONDS = 1200


def musicflamingo(tok, seed: int, text_dims: dict, init_range: float):
    import torch
    from transformers import MusicFlamingoConfig, MusicFlamingoForConditionalGeneration

    ids = {name: tok.convert_tokens_to_ids(token) for name, token in MF_TOKENS.items()}
    audio = {**audio_encoder_dims(init_range), "model_type": "audioflamingo3_encoder"}  # what transformers saves
    config = MusicFlamingoConfig(audio_config=audio, text_config=text_config(text_dims),
                                 audio_token_id=ids["audio_token"], audio_bos_token_id=ids["audio_bos_token"],
                                 audio_eos_token_id=ids["audio_eos_token"], initializer_range=init_range)
    torch.manual_seed(seed)
    return MusicFlamingoForConditionalGeneration(config)


def save_musicflamingo_processor(tok, out: Path) -> None:
    """The processor's files, and the text decoder's weights renamed to the released layout (module doc)."""
    rename_weights(out, "language_model.model.model.", "language_model.model.")
    from transformers import MusicFlamingoProcessor

    MusicFlamingoProcessor(feature_extractor=whisper_features(), tokenizer=tok, chat_template=tok.chat_template,
                           max_audio_len=MF_MAX_AUDIO_SECONDS, **MF_TOKENS).save_pretrained(out)
