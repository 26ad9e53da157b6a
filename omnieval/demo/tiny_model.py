"""The demo's one tiny model: a random-weight Qwen2.5-Omni with a local tokenizer, written in seconds and loaded
offline by both engines (the real transformers and vLLM code paths).

The tokenizer is a byte-level BPE trained here on a small built-in corpus with the Qwen2 pre-tokenizer, wrapped as
``Qwen2Tokenizer``. The corpus repeats the option labels and ``Answer`` so that ``A``..``E``, `` A``..`` E`` and
``Answer`` are single tokens (checked at build time): label logits are then well defined. The text decoder sizes
(``_text_dims``) and the tokenizer are shared by every tiny build of ``omnieval.dev.tiny_models``. Everything is a
function of ``seed``: same seed, same weights, same files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# The tiny omni folder's processor_config.json: the sizes of the released Qwen2.5-Omni processor (images up to
# 12845056 pixels, videos 128 to 768 merged patches a frame, 128 Whisper mel bins), as ``Qwen2_5OmniProcessor``
# (transformers 5.19) writes them. Written out here rather than saved from default sub-processors, whose image
# default (1003520 pixels) is not the released one.
_CLIP_MEAN, _CLIP_STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
_VISION_COMMON = {"do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True,
                  "image_mean": _CLIP_MEAN, "image_std": _CLIP_STD, "merge_size": 2, "patch_size": 14,
                  "resample": 3, "rescale_factor": 1 / 255, "temporal_patch_size": 2}
OMNI_PROCESSOR_CONFIG = {
    "feature_extractor": {"chunk_length": 30, "dither": 0.0, "feature_extractor_type": "WhisperFeatureExtractor",
                          "feature_size": 128, "hop_length": 160, "n_fft": 400, "n_samples": 480000,
                          "nb_max_frames": 3000, "padding_side": "right", "padding_value": 0.0,
                          "return_attention_mask": True, "sampling_rate": 16000},
    "image_processor": {**_VISION_COMMON, "image_processor_type": "Qwen2VLImageProcessor",
                        "size": {"longest_edge": 12845056, "shortest_edge": 3136}},
    "processor_class": "Qwen2_5OmniProcessor",
    "video_processor": {**_VISION_COMMON, "do_sample_frames": False, "max_frames": 768, "max_video_tokens": 128000,
                        "min_frames": 4, "return_metadata": False, "video_processor_type": "Qwen2VLVideoProcessor",
                        "size": {"longest_edge": 768 * 28 * 28, "shortest_edge": 128 * 28 * 28}},
}
TEXT_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Named media tokens of the Qwen2.5-Omni tokenizer (attribute name -> token), as its processor reads them.
OMNI_MEDIA_TOKENS = {
    "image_token": "<|IMAGE|>", "video_token": "<|VIDEO|>", "audio_token": "<|AUDIO|>",
    "vision_bos_token": "<|vision_bos|>", "vision_eos_token": "<|vision_eos|>",
    "audio_bos_token": "<|audio_bos|>", "audio_eos_token": "<|audio_eos|>",
}
# Weight init std. The usual 0.02 gives near-uniform next-token distributions whose argmax ignores the input (the
# same letter for every item); 0.3 makes answers depend on the text and the media, like a (bad) real model.
INIT_RANGE = 0.3
SINGLE_TOKEN_STRINGS = [*"ABCDE", *(f" {c}" for c in "ABCDE"), "Answer", " Answer"]

# The Qwen2.5-Omni chat template (media placeholders per content item, in order), trimmed of its id options.
OMNI_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' %}<|vision_bos|><|IMAGE|><|vision_eos|>"
    "{% elif content['type'] == 'audio' %}<|audio_bos|><|AUDIO|><|audio_eos|>"
    "{% elif content['type'] == 'video' %}<|vision_bos|><|VIDEO|><|vision_eos|>"
    "{% elif content['type'] == 'text' %}{{ content['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TEXT_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}{% if content['type'] == 'text' %}{{ content['text'] }}"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_WORDS = ("the a an of to in is on with what which where who when how many color shape sound video audio text "
          "clip scene shows hear see person dog cat car bird piano drum guitar voice speech music noise red green "
          "blue yellow circle square triangle left right first last loud quiet fast slow cannot answer question "
          "options option letter given choices directly think step by about inputs then give your final line form "
          "yes no none all above model correct wrong because so therefore system user assistant you are helpful "
          "omitted this takes only").split()


def _corpus(seed: int) -> list[str]:
    """A few hundred lines in the shape of omnieval's prompts, so merges cover the words and labels used."""
    import random

    rng = random.Random(seed)
    lines = []
    for _ in range(400):
        opts = [" ".join(rng.choices(_WORDS, k=rng.randint(1, 4))) for _ in range(5)]
        label = rng.choice("ABCDE")
        lines.append("Question: " + " ".join(rng.choices(_WORDS, k=8)) + "?\nOptions:\n"
                     + "\n".join(f"{lab}. {o}" for lab, o in zip("ABCDE", opts)) + "\n"
                     + f"Answer: {label}\nThe answer is {label}. Answer {label} ({label}) option {label}")
    lines += ["system\nYou are a helpful assistant.", "user\n[video omitted: this model takes text only]",
              "assistant\n[audio omitted: this model takes text only]"] * 20
    return lines


def build_tokenizer(seed: int = 0, media_tokens: bool | dict = False, vocab_size: int = 1024,
                    chat_template: str | None = None):
    """Train a byte-level BPE with the Qwen2 pre-tokenizer and wrap it as a ``Qwen2Tokenizer``. ``media_tokens``:
    ``True`` for the Qwen2.5-Omni tokens, or a dict (attribute name -> token) of another family's."""
    named = OMNI_MEDIA_TOKENS if media_tokens is True else dict(media_tokens or {})
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import Qwen2Tokenizer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    specials = TEXT_SPECIALS + list(named.values())
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    state = json.loads(tok.to_str())["model"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in state["merges"]]
    extra = dict(named)
    # bos is named (as in the Qwen2.5-Omni tokenizer config vLLM reads) but never prepended: add_bos_token is off.
    hf_tok = Qwen2Tokenizer(vocab=state["vocab"], merges=merges, bos_token="<|endoftext|>", eos_token="<|im_end|>",
                            pad_token="<|endoftext|>", unk_token=None, extra_special_tokens=extra or None,
                            model_max_length=32768)
    hf_tok.add_tokens([t for t in specials if t not in hf_tok.get_vocab()], special_tokens=True)
    hf_tok.add_tokens(TEXT_SPECIALS[1:], special_tokens=True)  # <|im_start|>/<|im_end|> never split into bytes
    hf_tok.chat_template = chat_template or (OMNI_CHAT_TEMPLATE if media_tokens is True else TEXT_CHAT_TEMPLATE)
    for s in SINGLE_TOKEN_STRINGS + specials:
        ids = hf_tok.encode(s, add_special_tokens=False)
        if len(ids) != 1:
            raise RuntimeError(f"tiny tokenizer: {s!r} is not a single token ({ids}); enlarge the corpus")
    return hf_tok


def _token_ids(tok) -> dict[str, int]:
    return {name: tok.convert_tokens_to_ids(token) for name, token in
            [*OMNI_MEDIA_TOKENS.items(), *(("eos", "<|im_end|>"), ("pad", "<|endoftext|>"))]}


def _text_dims(vocab_size: int, ids: dict[str, int]) -> dict:
    """Text decoder sizes shared by both archs: head size 32 (vLLM CPU attention needs >= 32)."""
    return {"vocab_size": vocab_size, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "initializer_range": INIT_RANGE,
            "bos_token_id": ids["pad"], "eos_token_id": ids["eos"], "pad_token_id": ids["pad"]}


def _qwen25_omni(tok, seed: int):
    import torch
    from transformers import Qwen2_5OmniForConditionalGeneration

    ids = _token_ids(tok)
    text = {**_text_dims(len(tok), ids), "rope_parameters": {"rope_type": "default", "rope_theta": 1_000_000.0,
                                                             "mrope_section": [4, 6, 6]}}
    vision = {"depth": 1, "hidden_size": 32, "intermediate_size": 64, "num_heads": 1, "out_hidden_size": 128,
              "fullatt_block_indexes": [0], "window_size": 112, "patch_size": 14, "spatial_merge_size": 2,
              "temporal_patch_size": 2, "in_channels": 3, "initializer_range": INIT_RANGE}
    audio = {"num_mel_bins": 128, "encoder_layers": 1, "encoder_attention_heads": 2, "encoder_ffn_dim": 64,
             "d_model": 32, "output_dim": 128, "n_window": 100, "max_source_positions": 1500,
             "initializer_range": INIT_RANGE}
    config = qwen25_omni_config(tok, text, vision, audio, INIT_RANGE)
    torch.manual_seed(seed)
    return Qwen2_5OmniForConditionalGeneration(config)


def qwen25_omni_config(tok, text: dict, vision: dict, audio: dict, init_range: float):
    """A full ``Qwen2_5OmniConfig`` (talker disabled) of the given thinker sizes, its token ids this tokenizer's."""
    from transformers import Qwen2_5OmniConfig

    ids = _token_ids(tok)
    thinker = {"text_config": text, "vision_config": vision, "audio_config": audio,
               "audio_token_index": ids["audio_token"], "image_token_index": ids["image_token"],
               "video_token_index": ids["video_token"], "vision_start_token_id": ids["vision_bos_token"],
               "vision_end_token_id": ids["vision_eos_token"], "audio_start_token_id": ids["audio_bos_token"],
               "audio_end_token_id": ids["audio_eos_token"], "user_token_id": tok.convert_tokens_to_ids("user"),
               "tie_word_embeddings": False, "initializer_range": init_range}
    # The talker is disabled, but its config is still parsed: point its token ids into this vocabulary.
    talker = {key: ids[name] for key, name in [
        ("tts_text_start_token_id", "pad"), ("tts_text_end_token_id", "pad"), ("tts_text_pad_token_id", "pad"),
        ("vision_start_token_id", "vision_bos_token"), ("vision_end_token_id", "vision_eos_token"),
        ("audio_start_token_id", "audio_bos_token"), ("audio_end_token_id", "audio_eos_token"),
        ("audio_token_index", "audio_token"), ("image_token_index", "image_token"),
        ("video_token_index", "video_token")]}
    return Qwen2_5OmniConfig(thinker_config=thinker, talker_config=talker, enable_audio_output=False)


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' warnings and progress bars off while a tiny model is built and saved: building a Qwen2.5-Omni
    config compares it with a default (7B-vocabulary) talker config, which warns about token ids outside that
    vocabulary, noise for a talker that is never built."""
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def build_tiny_omni(out_dir: str | Path, seed: int = 0) -> Path:
    """Write the tiny random-weight Qwen2.5-Omni (module doc), its tokenizer and the released processor's
    configuration to ``out_dir``; return it. ``omnieval.dev.tiny_models.build_tiny_model("qwen2.5-omni")`` is this."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with quiet_transformers():
        tok = build_tokenizer(seed, media_tokens=True)
        _qwen25_omni(tok, seed).save_pretrained(out)
    # save_pretrained names the class; vLLM's registry knows the full model as Qwen2_5OmniModel
    cfg = json.loads((out / "config.json").read_text())
    cfg["architectures"] = ["Qwen2_5OmniModel"]
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tok.save_pretrained(out)
    (out / "processor_config.json").write_text(json.dumps(OMNI_PROCESSOR_CONFIG, indent=2, sort_keys=True))
    return out
