"""A tiny random-weight Voxtral (``omnieval models tiny --arch voxtral``), in the layout the release ships.

* ``voxtral``: ``VoxtralForConditionalGeneration`` (``model_type`` ``voxtral``): the Whisper-style audio encoder
  shrunk to one layer (hidden 64, 2 heads of 32, feed-forward 256 = 4 x hidden, which the projector reads: four
  encoder frames per audio embedding, 128 mel bins, 1500 sinusoidal positions: one 30 s chunk), the GELU projector,
  and a Llama (Ministral) text decoder: hidden 128, 4 heads of 32 (2 key-value heads), 2 layers, rope theta 1e8 as
  released. The folder holds both of the release's layouts: ``config.json`` + ``model.safetensors`` (transformers:
  ``audio_tower.*``, ``multi_modal_projector.*``, ``language_model.model.*``, ``language_model.lm_head``) and
  ``params.json`` + ``consolidated.safetensors`` (Mistral's, which vLLM reads: ``layers.<i>.attention.wq`` with the
  query and key rows in Mistral's rotary order, ``mm_whisper_embeddings.whisper_encoder.*``,
  ``mm_whisper_embeddings.audio_language_projection.*``, the text embeddings as
  ``mm_whisper_embeddings.tok_embeddings``; no position table: both sides use the sinusoids, which the transformers
  weights hold as ``audio_tower.embed_positions``), the same numbers in each.
* The tokenizer is ``tekken.json``, Mistral's own (read by ``mistral_common`` on both engines: transformers'
  ``MistralCommonBackend`` and vLLM's ``MistralTokenizer``): the byte-level BPE of ``tiny_models.build_tokenizer``
  as Tekken ranks (the 256 bytes, then each merge in training order, split by the same pattern), after 1000
  special-token ranks as released: ``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, ``[INST]`` 3, ``[/INST]`` 4, ... ``<pad>``
  11, ``[AUDIO]`` 24 (the id transformers' ``VoxtralProcessor`` assumes), ``[BEGIN_AUDIO]`` 25, ``[TRANSCRIBE]`` 34,
  the rest fillers; version v7, and the audio section as published for ``mistralai/Voxtral-Mini-3B-2507`` (16 kHz,
  12.5 audio tokens a second, 128 mel bins, hop 160, window 400, clips padded to whole 30 s chunks: 375 ``[AUDIO]``
  tokens a chunk, after one ``[BEGIN_AUDIO]``).
* ``processor_config.json``: the ``VoxtralProcessor`` with its Whisper feature extractor at the values of the
  published ``preprocessor_config.json`` (128 mel bins, hop 160, n_fft 400, 30 s chunks, no attention mask).

Needs ``mistral_common`` with its audio extras (``soundfile``, ``soxr``): ``pip install "mistral-common[audio]"``.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

# Special tokens by rank, as in the released tekken.json (the ranks not listed are fillers <SPECIAL_i>).
VOXTRAL_SPECIALS = {0: "<unk>", 1: "<s>", 2: "</s>", 3: "[INST]", 4: "[/INST]", 5: "[AVAILABLE_TOOLS]",
                    6: "[/AVAILABLE_TOOLS]", 7: "[TOOL_RESULTS]", 8: "[/TOOL_RESULTS]", 9: "[TOOL_CALLS]", 10: "[IMG]",
                    11: "<pad>", 12: "[IMG_BREAK]", 13: "[IMG_END]", 14: "[PREFIX]", 15: "[MIDDLE]", 16: "[SUFFIX]",
                    17: "[SYSTEM_PROMPT]", 18: "[/SYSTEM_PROMPT]", 19: "[TOOL_CONTENT]", 24: "[AUDIO]",
                    25: "[BEGIN_AUDIO]", 32: "[ARGS]", 33: "[CALL_ID]", 34: "[TRANSCRIBE]"}
NUM_SPECIAL = 1000
AUDIO_TOKEN_ID = 24
BOS_ID, EOS_ID, PAD_ID = 1, 2, 11
# The published audio section of the tokenizer (Voxtral-Mini-3B-2507 tekken.json) and encoder arguments.
VOXTRAL_AUDIO = {"sampling_rate": 16000, "frame_rate": 12.5, "chunk_length_s": 30.0,
                 "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400}}
DOWNSAMPLE = 4  # encoder frames per audio embedding
ENCODER = {"hidden_size": 64, "num_attention_heads": 2, "num_hidden_layers": 1, "num_mel_bins": 128,
           "max_source_positions": 1500}
ROPE_THETA = 100_000_000.0
# What a run reads the logits of: the strings tiny_models.build_tokenizer checks are single tokens in its BPE.
LABELS = [*"ABCDE", *(f" {c}" for c in "ABCDE"), "Answer", " Answer"]
# The released processor's feature extractor (Voxtral-Mini-3B-2507 preprocessor_config.json).
VOXTRAL_FEATURES = {"feature_size": 128, "sampling_rate": 16000, "hop_length": 160, "n_fft": 400, "chunk_length": 30,
                    "dither": 0.0, "padding_value": 0.0, "return_attention_mask": False}


def _unicode_to_byte() -> dict[str, int]:
    """The byte-level BPE alphabet back to bytes: printable Latin-1 bytes stand for themselves, every other byte
    for the code point 256 + its position among them (the GPT-2 byte encoding the tiny BPE is trained with)."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    out = {chr(b): b for b in kept}
    extra = 0
    for b in range(256):
        if b not in kept:
            out[chr(256 + extra)] = b
            extra += 1
    return out


def tekken(tok) -> dict:
    """``tekken.json`` for the tiny BPE ``tok`` (module doc): its merges as Tekken ranks after the 256 bytes."""
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    model = json.loads(tok.backend_tokenizer.to_str())["model"]
    to_byte = _unicode_to_byte()
    ranked = [bytes([b]) for b in range(256)]
    for merge in model["merges"]:
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        ranked.append(bytes(to_byte[c] for c in left + right))
    vocab = [{"rank": i, "token_bytes": base64.b64encode(b).decode(), "token_str": b.decode("utf-8", "replace")}
             for i, b in enumerate(ranked)]
    specials = [{"rank": i, "token_str": VOXTRAL_SPECIALS.get(i, f"<SPECIAL_{i}>"), "is_control": True}
                for i in range(NUM_SPECIAL)]
    return {"config": {"pattern": PRETOKENIZE_REGEX, "num_vocab_tokens": len(vocab),
                       "default_vocab_size": NUM_SPECIAL + len(vocab), "default_num_special_tokens": NUM_SPECIAL,
                       "version": "v7"},
            "vocab": vocab, "special_tokens": specials, "audio": json.loads(json.dumps(VOXTRAL_AUDIO))}


def _tekkenizer(data: dict, folder: Path):
    """The Tekken tokenizer of ``data`` (written to ``folder/tekken.json``), its option labels checked to be one
    token each (their logits are what a run reads)."""
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    path = folder / "tekken.json"
    path.write_text(json.dumps(data, ensure_ascii=False))
    tekkenizer = Tekkenizer.from_file(path)
    for label in LABELS:
        ids = tekkenizer.encode(label, bos=False, eos=False)
        if len(ids) != 1:
            raise RuntimeError(f"tiny voxtral tokenizer: {label!r} is not a single token ({ids})")
    return tekkenizer


def voxtral(tok, seed: int, text_dims: dict, init_range: float):
    """The transformers model (its text sizes from ``text_dims``, its ids the Tekken tokenizer's)."""
    import tempfile

    import torch
    from transformers import VoxtralConfig, VoxtralForConditionalGeneration
    from transformers.models.whisper.modeling_whisper import sinusoids

    with tempfile.TemporaryDirectory() as folder:
        vocab_size = _tekkenizer(tekken(tok), Path(folder)).n_words
    text = {**text_dims, "model_type": "llama", "vocab_size": vocab_size, "head_dim": 32, "rms_norm_eps": 1e-5,
            "bos_token_id": BOS_ID, "eos_token_id": EOS_ID, "pad_token_id": PAD_ID, "hidden_act": "silu",
            "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_THETA}}
    audio = {**ENCODER, "intermediate_size": DOWNSAMPLE * ENCODER["hidden_size"], "initializer_range": init_range}
    config = VoxtralConfig(audio_config=audio, text_config=text, audio_token_id=AUDIO_TOKEN_ID,
                           projector_hidden_act="gelu")
    torch.manual_seed(seed)
    model = VoxtralForConditionalGeneration(config).eval()
    with torch.no_grad():  # the encoder's positions are Whisper's sinusoids, as in the release (not learned)
        table = model.model.audio_tower.embed_positions.weight
        table.copy_(sinusoids(*table.shape))
    return model


def params(config) -> dict:
    """``params.json``: the model's sizes in Mistral's names (what vLLM's Mistral config parser reads)."""
    text, audio = config.text_config, config.audio_config
    encoder = {"audio_encoding_args": {"sampling_rate": VOXTRAL_AUDIO["sampling_rate"],
                                       "frame_rate": VOXTRAL_AUDIO["frame_rate"],
                                       "num_mel_bins": audio.num_mel_bins,
                                       **{k: VOXTRAL_AUDIO["audio_encoding_config"][k]
                                          for k in ("hop_length", "window_size")},
                                       "chunk_length_s": VOXTRAL_AUDIO["chunk_length_s"]},
               "dim": audio.hidden_size, "n_layers": audio.num_hidden_layers,
               "head_dim": audio.hidden_size // audio.num_attention_heads, "hidden_dim": audio.intermediate_size,
               "n_heads": audio.num_attention_heads, "vocab_size": audio.vocab_size,
               "max_source_positions": audio.max_source_positions}
    return {"dim": text.hidden_size, "n_layers": text.num_hidden_layers, "head_dim": text.head_dim,
            "hidden_dim": text.intermediate_size, "n_heads": text.num_attention_heads,
            "n_kv_heads": text.num_key_value_heads, "rope_theta": ROPE_THETA, "norm_eps": text.rms_norm_eps,
            "vocab_size": text.vocab_size, "max_seq_len": text.max_position_embeddings,
            "max_position_embeddings": text.max_position_embeddings, "tied_embeddings": False,
            "multimodal": {"whisper_model_args": {"encoder_args": encoder,
                                                  "downsample_args": {"downsample_factor": DOWNSAMPLE}}}}


def _mistral_rotary_rows(weight, heads: int):
    """Query or key rows from transformers' rotary layout (each head's first halves, then its second halves) to
    Mistral's (the two halves interleaved), the inverse of the conversion the release's transformers weights went
    through."""
    out_dim, in_dim = weight.shape
    return weight.view(heads, 2, out_dim // heads // 2, in_dim).transpose(1, 2).reshape(out_dim, in_dim)


def mistral_state(state: dict, config) -> dict:
    """The transformers weights (hub names) under Mistral's names (module doc)."""
    text = config.text_config
    out = {}
    enc, proj = "mm_whisper_embeddings.whisper_encoder.", "mm_whisper_embeddings.audio_language_projection."
    for name, value in state.items():
        parts = name.split(".")
        if name == "language_model.lm_head.weight":
            out["output.weight"] = value
        elif name == "language_model.model.embed_tokens.weight":
            out["mm_whisper_embeddings.tok_embeddings.weight"] = value
        elif name == "language_model.model.norm.weight":
            out["norm.weight"] = value
        elif name.startswith("language_model.model.layers."):
            i, rest = parts[3], ".".join(parts[4:])
            if rest in ("self_attn.q_proj.weight", "self_attn.k_proj.weight"):
                heads = text.num_attention_heads if rest.startswith("self_attn.q") else text.num_key_value_heads
                value = _mistral_rotary_rows(value, heads)
            short = {"input_layernorm.weight": "attention_norm.weight",
                     "post_attention_layernorm.weight": "ffn_norm.weight",
                     "self_attn.q_proj.weight": "attention.wq.weight", "self_attn.k_proj.weight": "attention.wk.weight",
                     "self_attn.v_proj.weight": "attention.wv.weight", "self_attn.o_proj.weight": "attention.wo.weight",
                     "mlp.gate_proj.weight": "feed_forward.w1.weight", "mlp.down_proj.weight": "feed_forward.w2.weight",
                     "mlp.up_proj.weight": "feed_forward.w3.weight"}[rest]
            out[f"layers.{i}.{short}"] = value
        elif name == "audio_tower.embed_positions.weight":
            continue  # sinusoids, computed on load
        elif name.startswith("audio_tower.conv"):
            out[f"{enc}conv_layers.{int(parts[1][-1]) - 1}.{parts[2]}"] = value
        elif name.startswith("audio_tower.layer_norm."):
            out[f"{enc}transformer.norm.{parts[-1]}"] = value
        elif name.startswith("audio_tower.layers."):
            i, rest = parts[2], ".".join(parts[3:-1])
            short = {"self_attn.q_proj": "attention.wq", "self_attn.k_proj": "attention.wk",
                     "self_attn.v_proj": "attention.wv", "self_attn.out_proj": "attention.wo",
                     "self_attn_layer_norm": "attention_norm", "final_layer_norm": "ffn_norm",
                     "fc1": "feed_forward.w1", "fc2": "feed_forward.w2"}[rest]
            out[f"{enc}transformer.layers.{i}.{short}.{parts[-1]}"] = value
        elif name.startswith("multi_modal_projector.linear_"):
            out[f"{proj}{2 * (int(parts[1][-1]) - 1)}.{parts[-1]}"] = value
        else:
            raise KeyError(f"tiny voxtral: no Mistral name for {name}")
    return out


def save_voxtral_processor(tok, out: Path) -> None:
    """Everything but ``config.json`` and the transformers weights (module doc): ``tekken.json``, the processor's
    ``preprocessor_config.json``, ``params.json`` and ``consolidated.safetensors``; the transformers weights renamed
    to the released layout."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoConfig, MistralCommonBackend, VoxtralProcessor, WhisperFeatureExtractor

    from omnieval.dev.tiny_families import rename_weights

    rename_weights(out, "language_model.model.model.", "language_model.model.")
    _tekkenizer(tekken(tok), out)
    config = AutoConfig.from_pretrained(out)
    VoxtralProcessor(feature_extractor=WhisperFeatureExtractor(**VOXTRAL_FEATURES),
                     tokenizer=MistralCommonBackend.from_pretrained(out)).save_pretrained(out)
    (out / "params.json").write_text(json.dumps(params(config), indent=2) + "\n")
    save_file(mistral_state(load_file(out / "model.safetensors"), config), out / "consolidated.safetensors",
              metadata={"format": "pt"})
