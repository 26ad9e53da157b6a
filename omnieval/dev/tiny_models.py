"""Tiny random-weight models with local tokenizers: the real transformers/vLLM code paths, offline, in seconds.

``build_tiny_model(arch, out_dir, seed)`` writes a folder that loads with ``from_pretrained`` and no network:

* ``qwen2``: a plain Qwen2 causal LM (hidden 128, 4 heads of 32, 2 layers; vLLM's CPU attention needs head size
  >= 32).
* ``qwen2-audio``: ``Qwen2AudioForConditionalGeneration`` (audio tower 1 layer, d_model 64; the same text decoder),
  saved with its ``Qwen2AudioProcessor`` (Whisper features, the processor's own chat template) and its weights in
  the hub layout (``language_model.model.*``, ``language_model.lm_head``) that both transformers and vLLM load.
* ``qwen2.5-vl``: ``Qwen2_5_VLForConditionalGeneration`` (vision depth 1, hidden 32, one head of 32; the same text
  decoder with ``mrope_section`` [4, 6, 6]), saved with its ``Qwen2_5_VLProcessor``; images and video frames are
  capped at 64 merged patches per frame (``longest_edge`` 64 * 28 * 28) so tests stay fast. Building or loading its
  processor needs torchvision (the video processor imports it).
* ``qwen2.5-omni``: the demo's, built in ``omnieval.demo.tiny_model`` (which ships in the wheel; its module doc):
  a full ``Qwen2_5OmniConfig`` (``architectures: ["Qwen2_5OmniModel"]``, talker disabled) whose
  ``model.safetensors`` keys are prefixed ``thinker.``: the layout vLLM's registry loads (a thinker-only save is
  not in it). Vision depth 1 (hidden 32), audio 1 layer (d_model 32), text 2 layers (hidden 128, head 32,
  ``mrope_section`` [4, 6, 6] sums to head_dim / 2). Its ``processor_config.json`` is the released processor's
  (``OMNI_PROCESSOR_CONFIG``), which both engines' ``Qwen2_5OmniProcessor`` read (vLLM runs it itself); loading
  it needs torchvision.
* ``llava-onevision``, ``internvl``, ``gemma3n``: built in ``tiny_families.py`` (its module doc) from the same
  tokenizer and text decoder sizes.
* ``qwen3-omni``: a full Qwen3-Omni (mixture-of-experts thinker, audio output disabled) in the released layout,
  built in ``tiny_qwen3_omni.py`` (its module doc) from the same tokenizer and text decoder sizes.
* ``qwen3-vl``, ``qwen3-vl-moe``, ``qwen3.5``: Qwen3-VL (dense and mixture-of-experts) and Qwen3.5 (hybrid Gated
  DeltaNet / attention decoder), images and videos, in the released layouts with the released processor files,
  built in ``tiny_qwen3_vl.py``, ``tiny_qwen3_vl_moe.py`` and ``tiny_qwen3_5.py`` (their module docs) from the same
  tokenizer and text decoder sizes.
* ``audioflamingo3``, ``musicflamingo``, ``granite-speech``, ``voxtral``: audio-and-text models in their released
  layouts, each built in its own module (``tiny_audioflamingo3.py``, ``tiny_musicflamingo.py``,
  ``tiny_granite_speech.py``, ``tiny_voxtral.py``: their module docs) from the same tokenizer and text decoder sizes
  (Voxtral's tokenizer the same BPE as Mistral's ``tekken.json``).
* ``gemma4``, ``gemma4-unified``: Gemma 4 (image, audio and video) in the released E2B/E4B layout, and its
  encoder-free 12B variant, built in ``tiny_gemma4.py`` (its module doc) from the same tokenizer and text decoder
  sizes.
* ``phi4-multimodal``: Phi-4-multimodal (image and audio) in the transformers-native layout with its two modality
  adapters, built in ``tiny_phi4.py`` (its module doc) from the same tokenizer and text decoder sizes.
* ``videollama3``: VideoLLaMA3 (images and videos, video tokens compressed by frame differences) in the
  transformers-native layout, built in ``tiny_videollama3.py`` (its module doc) from the same tokenizer and text
  decoder sizes.
* ``nemotron-h-omni``: Nemotron-H omni (images, videos, audio; hybrid Mamba-2 / attention decoder) in the
  transformers-native release layout, built in ``tiny_nemotron_h_omni.py`` (its module doc) from the same tokenizer
  and text decoder sizes.

Every arch shares the tokenizer and the text decoder sizes of ``omnieval.demo.tiny_model`` (its module doc: a
byte-level BPE trained on a small built-in corpus, option labels single tokens). Everything is a function of
``seed``: same seed, same weights, same files.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from omnieval.demo.tiny_model import (
    INIT_RANGE,
    OMNI_CHAT_TEMPLATE,
    _qwen25_omni,
    _text_dims,
    _token_ids,
    build_tiny_omni,
    build_tokenizer,
    quiet_transformers,
)
from omnieval.dev import (
    tiny_audioflamingo3,
    tiny_families,
    tiny_gemma4,
    tiny_granite_speech,
    tiny_musicflamingo,
    tiny_nemotron_h_omni,
    tiny_phi4,
    tiny_qwen3_5,
    tiny_qwen3_omni,
    tiny_qwen3_vl,
    tiny_qwen3_vl_moe,
    tiny_videollama3,
    tiny_voxtral,
)

ARCHS = ("qwen2", "qwen2.5-omni", "qwen2-audio", "qwen2.5-vl", "llava-onevision", "internvl", "gemma3n", "qwen3-omni",
         "qwen3-vl", "qwen3-vl-moe", "qwen3.5", "audioflamingo3", "musicflamingo", "granite-speech", "voxtral",
         "gemma4", "gemma4-unified", "phi4-multimodal", "videollama3", "nemotron-h-omni")
# Media tokens of the other families (attribute name -> token): the names their processors look up on the tokenizer.
AUDIO_MEDIA_TOKENS = {"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>",
                      "audio_eos_token": "<|audio_eos|>"}
VL_MEDIA_TOKENS = tiny_qwen3_vl.VISION_TOKENS
# The Qwen2.5-VL chat template (vision placeholders per content item, in order), trimmed of its id options.
VL_CHAT_TEMPLATE = OMNI_CHAT_TEMPLATE.replace(
    "{% if content['type'] == 'image' %}<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{% elif content['type'] == 'audio' %}<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{% elif content['type'] == 'video' %}<|vision_bos|><|VIDEO|><|vision_eos|>",
    "{% if content['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>")


def _qwen2(tok, seed: int):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(**_text_dims(len(tok), _token_ids(tok)), rope_parameters={"rope_type": "default",
                                                                                  "rope_theta": 1_000_000.0})
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)


def _qwen2_audio(tok, seed: int):
    import torch
    from transformers import Qwen2AudioConfig, Qwen2AudioForConditionalGeneration

    text = {**_text_dims(len(tok), _token_ids(tok)), "model_type": "qwen2",
            "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0}}
    audio = {"num_mel_bins": 128, "encoder_layers": 1, "encoder_attention_heads": 2, "encoder_ffn_dim": 128,
             "d_model": 64, "max_source_positions": 1500, "initializer_range": INIT_RANGE}
    config = Qwen2AudioConfig(audio_config=audio, text_config=text,
                              audio_token_index=tok.convert_tokens_to_ids(AUDIO_MEDIA_TOKENS["audio_token"]))
    torch.manual_seed(seed)
    return Qwen2AudioForConditionalGeneration(config)


def _qwen25_vl(tok, seed: int):
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    text = {**_text_dims(len(tok), _token_ids(tok)), "model_type": "qwen2_5_vl_text",
            "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0, "mrope_section": [4, 6, 6]}}
    vision = {"depth": 1, "hidden_size": 32, "intermediate_size": 128, "num_heads": 1, "out_hidden_size": 128,
              "fullatt_block_indexes": [0], "window_size": 112, "patch_size": 14, "spatial_merge_size": 2,
              "temporal_patch_size": 2, "in_channels": 3, "initializer_range": INIT_RANGE}
    ids = {k: tok.convert_tokens_to_ids(v) for k, v in VL_MEDIA_TOKENS.items()}
    config = Qwen2_5_VLConfig(text_config=text, vision_config=vision, image_token_id=ids["image_token"],
                              video_token_id=ids["video_token"], vision_start_token_id=ids["vision_start_token"],
                              vision_end_token_id=ids["vision_end_token"], tie_word_embeddings=False)
    torch.manual_seed(seed)
    return Qwen2_5_VLForConditionalGeneration(config)


# Vision sizes of the tiny Qwen2.5-VL processor: at most 64 merged patches (tokens) per image or video frame pair.
TINY_VL_PIXELS = {"shortest_edge": 56 * 56, "longest_edge": 64 * 28 * 28}


def _save_qwen2_audio(tok, out: Path) -> None:
    """Qwen2-Audio's processor, and its weights renamed to the hub layout (transformers 5.19 saves
    ``language_model.model.model.*``, which vLLM's loader does not know; transformers maps the hub layout itself)."""
    from safetensors.torch import load_file, save_file
    from transformers import Qwen2AudioProcessor, WhisperFeatureExtractor

    weights = out / "model.safetensors"
    state = {k.replace("language_model.model.model.", "language_model.model."): v
             for k, v in load_file(weights).items()}
    save_file(state, weights, metadata={"format": "pt"})
    Qwen2AudioProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=128, sampling_rate=16000),
                        tokenizer=tok).save_pretrained(out)


def _save_qwen25_vl(tok, out: Path) -> None:
    from transformers import Qwen2_5_VLProcessor
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(size=TINY_VL_PIXELS),
                        video_processor=Qwen2VLVideoProcessor(size=TINY_VL_PIXELS), tokenizer=tok,
                        chat_template=tok.chat_template).save_pretrained(out)


def _save_qwen3_vl_moe(tok, out: Path) -> None:
    tiny_qwen3_vl.save_qwen3_vl_processor(tok, out)
    tiny_qwen3_vl_moe.transpose_experts(out)


def _sized(build: Callable) -> Callable:
    """A family module's builder ``build(tok, seed, text_dims, init_range)``, given this module's text decoder
    sizes and initialiser range: every family shares them."""
    def built(tok, seed: int):
        return build(tok, seed, _text_dims(len(tok), _token_ids(tok)), INIT_RANGE)
    return built


@dataclass(frozen=True)
class Family:
    """How one arch is built: ``build(tok, seed)`` makes the model; ``tokens`` are the media tokens its tokenizer
    names (a dict, or True for Qwen2.5-Omni's ``OMNI_MEDIA_TOKENS``) and ``template`` its chat template;
    ``save_processor(tok, out)`` writes the family's official processor next to the model (which writes the
    tokenizer and the chat template it renders; ``AutoProcessor.from_pretrained`` reads it back), None where the
    tokenizer alone is saved; ``after_save(model, out, seed)`` writes what else the release has beside the
    weights."""

    build: Callable
    tokens: dict | bool = False
    template: str | None = None
    save_processor: Callable | None = None
    after_save: Callable | None = None


FAMILIES: dict[str, Family] = {
    "qwen2": Family(_qwen2),
    "qwen2.5-omni": Family(_qwen25_omni, tokens=True),
    "qwen2-audio": Family(_qwen2_audio, AUDIO_MEDIA_TOKENS, None, _save_qwen2_audio),
    "qwen2.5-vl": Family(_qwen25_vl, VL_MEDIA_TOKENS, VL_CHAT_TEMPLATE, _save_qwen25_vl),
    "llava-onevision": Family(_sized(tiny_families.llava_onevision), tiny_families.LLAVA_OV_TOKENS,
                              tiny_families.LLAVA_OV_TEMPLATE, tiny_families.save_llava_onevision_processor),
    "internvl": Family(_sized(tiny_families.internvl), tiny_families.INTERNVL_TOKENS,
                       tiny_families.INTERNVL_TEMPLATE, tiny_families.save_internvl_processor),
    "gemma3n": Family(_sized(tiny_families.gemma3n), tiny_families.GEMMA3N_TEXT_TOKENS,
                      tiny_families.GEMMA3N_TEMPLATE, tiny_families.save_gemma3n_processor),
    "qwen3-omni": Family(_sized(tiny_qwen3_omni.qwen3_omni), tiny_qwen3_omni.QWEN3_OMNI_TOKENS,
                         tiny_qwen3_omni.QWEN3_OMNI_TEMPLATE, tiny_qwen3_omni.save_qwen3_omni_processor),
    "qwen3-vl": Family(_sized(tiny_qwen3_vl.qwen3_vl), VL_MEDIA_TOKENS, tiny_qwen3_vl.QWEN3_VL_TEMPLATE,
                       tiny_qwen3_vl.save_qwen3_vl_processor),
    "qwen3-vl-moe": Family(_sized(tiny_qwen3_vl_moe.qwen3_vl_moe), VL_MEDIA_TOKENS, tiny_qwen3_vl.QWEN3_VL_TEMPLATE,
                           _save_qwen3_vl_moe),
    "qwen3.5": Family(_sized(tiny_qwen3_5.qwen3_5), VL_MEDIA_TOKENS, tiny_qwen3_vl.QWEN3_VL_TEMPLATE,
                      tiny_qwen3_vl.save_qwen3_vl_processor),
    "audioflamingo3": Family(_sized(tiny_audioflamingo3.audioflamingo3), tiny_audioflamingo3.AF3_TOKENS,
                             tiny_audioflamingo3.AF3_TEMPLATE, tiny_audioflamingo3.save_audioflamingo3_processor),
    "musicflamingo": Family(_sized(tiny_musicflamingo.musicflamingo), tiny_musicflamingo.MF_TOKENS,
                            tiny_audioflamingo3.AF3_TEMPLATE, tiny_musicflamingo.save_musicflamingo_processor),
    "granite-speech": Family(_sized(tiny_granite_speech.granite_speech), tiny_granite_speech.GRANITE_SPEECH_TOKENS,
                             tiny_granite_speech.GRANITE_SPEECH_TEMPLATE,
                             tiny_granite_speech.save_granite_speech_processor),
    # Mistral's tokenizer: tekken.json, written by its processor step
    "voxtral": Family(_sized(tiny_voxtral.voxtral), {}, None, tiny_voxtral.save_voxtral_processor),
    "gemma4": Family(_sized(tiny_gemma4.gemma4), tiny_gemma4.GEMMA4_TOKENS, tiny_gemma4.GEMMA4_TEMPLATE,
                     tiny_gemma4.save_gemma4_processor),
    "gemma4-unified": Family(_sized(tiny_gemma4.gemma4_unified), tiny_gemma4.GEMMA4_TOKENS,
                             tiny_gemma4.GEMMA4_TEMPLATE, tiny_gemma4.save_gemma4_unified_processor),
    # its modality adapters, in their own folders as released
    "phi4-multimodal": Family(_sized(tiny_phi4.phi4_multimodal), tiny_phi4.PHI4_TOKENS, tiny_phi4.PHI4_TEMPLATE,
                              tiny_phi4.save_phi4_processor,
                              after_save=lambda model, out, seed: tiny_phi4.save_lora_adapters(model, out, seed,
                                                                                              INIT_RANGE)),
    "videollama3": Family(_sized(tiny_videollama3.videollama3), tiny_videollama3.VIDEOLLAMA3_TOKENS,
                          tiny_videollama3.VIDEOLLAMA3_TEMPLATE, tiny_videollama3.save_videollama3_processor),
    "nemotron-h-omni": Family(_sized(tiny_nemotron_h_omni.nemotron_h_omni), tiny_nemotron_h_omni.NEMOTRON_TOKENS,
                              tiny_nemotron_h_omni.NEMOTRON_TEMPLATE,
                              tiny_nemotron_h_omni.save_nemotron_h_omni_processor),
}
assert tuple(FAMILIES) == ARCHS


def build_tiny_model(arch: str, out_dir: str | Path, seed: int = 0) -> Path:
    """Write a tiny random-weight ``arch`` model (see module doc) and its tokenizer to ``out_dir``; return it."""
    if arch not in ARCHS:
        raise ValueError(f"unknown tiny model arch {arch!r}; known: {', '.join(ARCHS)}")
    if arch == "qwen2.5-omni":  # the demo's own build, which ships in the wheel
        return build_tiny_omni(out_dir, seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with quiet_transformers():
        family = FAMILIES[arch]
        tok = build_tokenizer(seed, media_tokens=family.tokens, chat_template=family.template)
        model = family.build(tok, seed)
        model.save_pretrained(out)
        if family.after_save is not None:
            family.after_save(model, out, seed)
        if family.save_processor is not None:  # it writes the tokenizer and the chat template it renders
            family.save_processor(tok, out)
            return out
    tok.save_pretrained(out)
    return out
