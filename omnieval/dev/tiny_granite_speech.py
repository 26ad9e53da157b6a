"""A tiny random-weight Granite Speech (``omnieval models tiny --arch granite-speech``), in the released layout.

* ``granite-speech``: ``GraniteSpeechForConditionalGeneration`` (``model_type`` ``granite_speech``): the conformer
  encoder shrunk to one block (hidden 32, 2 heads of 16, attention in blocks of 200 frames as released, stacked
  pairs of 80-bin log-mel frames in: ``input_dim`` 160), the Q-Former projector shrunk to one layer (hidden 32),
  reading windows of 15 encoder frames with 3 queries each (``window_size`` 15, ``downsample_rate`` 5, as
  released), and a Granite text decoder (hidden 128, 4 heads of 32, 2 layers) with the multipliers of the released
  Granite 3.3 decoder (embedding 12, residual 0.22, logits divided by 8; attention scaled by 1 / head size, which
  is what the released 1/64 is for its heads of 64). No LoRA adapter (``has_lora_adapter`` false: the release
  ships one that applies to audio prompts). Weights in the released layout (``encoder.*``, ``projector.*``,
  ``language_model.model.*``, ``language_model.lm_head``). Saved with its ``GraniteSpeechProcessor``: the feature
  extractor with the values of ``ibm-granite/granite-speech-3.3-2b``'s ``preprocessor_config.json`` (16 kHz, n_fft
  512, window 400, hop 160, 80 mel bins, projector window 15 and rate 5) and ``audio_token`` ``<|audio|>``.

Its feature extractor computes the mel spectrogram with torchaudio (``families``: the ``torchaudio`` package,
checked before loading; ``scripts/install_torchaudio.sh``). vLLM's model takes one audio a prompt
(``families.GraniteSpeechFamily``, which also divides the transformers engine's logits by
``logits_scaling`` as the decoder does).
"""

from __future__ import annotations

from pathlib import Path

from omnieval.dev.tiny_families import family_chat_template, rename_weights

GRANITE_SPEECH_TOKENS = {"audio_token": "<|audio|>"}
GRANITE_SPEECH_TEMPLATE = family_chat_template({"audio": "<|audio|>"})
# The released feature extractor (ibm-granite/granite-speech-3.3-2b preprocessor_config.json).
GRANITE_SPEECH_FEATURES = {"sampling_rate": 16000, "n_fft": 512, "win_length": 400, "hop_length": 160, "n_mels": 80,
                           "projector_window_size": 15, "projector_downsample_rate": 5}


def granite_speech(tok, seed: int, text_dims: dict, init_range: float):
    import importlib.util

    import torch
    from transformers import GraniteSpeechConfig, GraniteSpeechForConditionalGeneration

    if importlib.util.find_spec("torchaudio") is None:  # its processor is saved with the model
        raise ModuleNotFoundError("tiny granite-speech: its feature extractor needs the 'torchaudio' package",
                                  name="torchaudio")
    head = text_dims["hidden_size"] // text_dims["num_attention_heads"]
    text = {**text_dims, "model_type": "granite", "rope_parameters": {"rope_type": "default", "rope_theta": 10_000.0},
            "embedding_multiplier": 12.0, "residual_multiplier": 0.22, "logits_scaling": 8.0,
            "attention_multiplier": 1.0 / head}
    encoder = {"input_dim": 2 * GRANITE_SPEECH_FEATURES["n_mels"], "num_layers": 1, "hidden_dim": 32,
               "feedforward_mult": 2, "num_heads": 2, "dim_head": 16, "output_dim": 16, "context_size": 200,
               "max_pos_emb": 512, "conv_kernel_size": 15, "conv_expansion_factor": 2, "dropout": 0.0}
    projector = {"model_type": "blip_2_qformer", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                 "intermediate_size": 64, "encoder_hidden_size": 32, "cross_attention_frequency": 1,
                 "max_position_embeddings": 2048, "use_qformer_text_input": False, "hidden_dropout_prob": 0.0,
                 "attention_probs_dropout_prob": 0.0, "initializer_range": init_range}
    config = GraniteSpeechConfig(
        text_config=text, encoder_config=encoder, projector_config=projector, has_lora_adapter=False,
        audio_token_index=tok.convert_tokens_to_ids(GRANITE_SPEECH_TOKENS["audio_token"]),
        window_size=GRANITE_SPEECH_FEATURES["projector_window_size"],
        downsample_rate=GRANITE_SPEECH_FEATURES["projector_downsample_rate"], tie_word_embeddings=False,
        initializer_range=init_range)
    torch.manual_seed(seed)
    return GraniteSpeechForConditionalGeneration(config)


def save_granite_speech_processor(tok, out: Path) -> None:
    """The processor's files, and the text decoder's weights renamed to the released layout (module doc)."""
    rename_weights(out, "language_model.model.model.", "language_model.model.")
    from transformers import GraniteSpeechFeatureExtractor, GraniteSpeechProcessor

    GraniteSpeechProcessor(audio_processor=GraniteSpeechFeatureExtractor(**GRANITE_SPEECH_FEATURES), tokenizer=tok,
                           audio_token=GRANITE_SPEECH_TOKENS["audio_token"],
                           chat_template=tok.chat_template).save_pretrained(out)
