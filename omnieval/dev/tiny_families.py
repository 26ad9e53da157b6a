"""Tiny random-weight builds of more model families (``omnieval models tiny --arch ...``), next to the Qwen builds
of ``tiny_models.py``: the same byte-level BPE tokenizer and Qwen2 text decoder (hidden 128, 4 heads of 32, 2
layers), with each family's own vision or audio tower shrunk to one layer, and the family's official processor
saved with its sizes shrunk to match.

* ``llava-onevision``: ``LlavaOnevisionForConditionalGeneration`` (SigLIP tower: 56-pixel tiles of 14-pixel
  patches, 4 x 4 = 16 tokens a tile, one layer, hidden 32), ``image_grid_pinpoints`` every multiple of 56 up to
  168 x 168 (``anyres_max_9``: at most 3 x 3 tiles), saved with its ``LlavaOnevisionProcessor``
  (``num_image_tokens`` 16, ``vision_feature_select_strategy`` ``full``). Video frames are resized to one tile and
  pooled 2 x 2: 4 tokens a frame plus one newline token a video. Its image and video processors need torchvision.
* ``internvl``: ``InternVLForConditionalGeneration`` (the transformers-native layout, ``model_type`` ``internvl``;
  vision one layer, hidden 32, 56-pixel tiles of 14-pixel patches pixel-shuffled to 2 x 2 = 4 tokens a tile), saved
  with its ``InternVLProcessor`` (``GotOcr2ImageProcessor`` with ``crop_to_patches``: up to 6 tiles plus a
  thumbnail; video frames one tile each). Its processors need torchvision too.
* ``gemma3n``: ``Gemma3nForConditionalGeneration`` (image and audio). Text decoder hidden 128, 4 heads of 32, 2
  layers (one sliding, one full; AltUp with 2 inputs, LAuReL rank 8, per-layer inputs of 16, no KV sharing, no
  activation sparsity); vision the timm ``mobilenetv5_300m_enc`` at channel multiplier 0.05 with its multi-scale
  fusion pooled to 2 x 2 (64-pixel images: 4 soft tokens an image); audio the USM conformer, one layer, hidden 32.
  Saved with its ``Gemma3nProcessor`` (SigLIP image processor at 64 x 64, ``image_seq_length`` 4; the Gemma 3n
  audio feature extractor, ``audio_seq_length`` 188 as published). Needs ``timm``. The tokenizer follows Gemma's
  layout: the text vocabulary, then 128 vision ids (``<end_of_image>``, ``<image_soft_token>``, unused) and 128
  audio ids (``<end_of_audio>``, ``<audio_soft_token>``, unused), and the newline runs ``\n`` .. ``\n\n\n\n`` as
  single tokens (vLLM's Gemma 3n processor merges them by those names). transformers embeds the vision and audio
  ids (``<end_of_image>``, ``<end_of_audio>``) through the multimodal embedders, vLLM 0.32 through the text
  embedding table: the build writes the embedders' outputs into those rows of the table (divided by the
  embedding scale), so the two engines see the same inputs. Whether a released checkpoint's table holds the same
  is not checked here (see README).
"""

from __future__ import annotations

import json
from pathlib import Path

LLAVA_OV_TOKENS = {"image_token": "<image>", "video_token": "<video>"}
TINY_OV_TILE = 56  # pixels per SigLIP tile (the processor's "size"); 14-pixel patches
TINY_OV_PINPOINTS = [[h, w] for h in (56, 112, 168) for w in (56, 112, 168)]


def family_chat_template(placeholders: dict[str, str]) -> str:
    """A ChatML template writing ``placeholders[type]`` for each typed media content part, in order (text parts as
    they are), with the default system turn of the Qwen templates."""
    media = "".join(f"{{% elif content['type'] == '{kind}' %}}{token}" for kind, token in placeholders.items())
    return (
        "{% for message in messages %}"
        "{% if loop.first and message['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant."
        "<|im_end|>\n{% endif %}<|im_start|>{{ message['role'] }}\n"
        "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
        "{% else %}{% for content in message['content'] %}"
        "{% if content['type'] == 'text' %}{{ content['text'] }}" + media + "{% endif %}"
        "{% endfor %}<|im_end|>\n{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )


LLAVA_OV_TEMPLATE = family_chat_template({"image": "<image>", "video": "<video>"})


def llava_onevision(tok, seed: int, text_dims: dict, init_range: float):
    import torch
    from transformers import LlavaOnevisionConfig, LlavaOnevisionForConditionalGeneration

    text = {**text_dims, "model_type": "qwen2", "rope_parameters": {"rope_type": "default",
                                                                     "rope_theta": 1_000_000.0}}
    vision = {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
              "num_hidden_layers": 1, "num_attention_heads": 1, "image_size": TINY_OV_TILE, "patch_size": 14,
              "vision_use_head": False}
    config = LlavaOnevisionConfig(
        text_config=text, vision_config=vision, image_grid_pinpoints=TINY_OV_PINPOINTS,
        image_token_index=tok.convert_tokens_to_ids(LLAVA_OV_TOKENS["image_token"]),
        video_token_index=tok.convert_tokens_to_ids(LLAVA_OV_TOKENS["video_token"]),
        vision_feature_select_strategy="full", vision_feature_layer=-1, tie_word_embeddings=False,
        initializer_range=init_range)
    torch.manual_seed(seed)
    return LlavaOnevisionForConditionalGeneration(config)


def rename_weights(out: Path, old: str, new: str) -> None:
    """Rename the weights under ``old`` to ``new`` (the hub layout vLLM's loader knows; transformers maps it back
    itself)."""
    from safetensors.torch import load_file, save_file

    weights = out / "model.safetensors"
    state = {(new + k[len(old):] if k.startswith(old) else k): v for k, v in load_file(weights).items()}
    save_file(state, weights, metadata={"format": "pt"})


def save_llava_onevision_processor(tok, out: Path) -> None:
    """The processor, and the SigLIP tower's weights renamed to the hub layout (``vision_tower.vision_model.*``;
    transformers 5.19 saves ``vision_tower.*``)."""
    rename_weights(out, "vision_tower.", "vision_tower.vision_model.")
    from transformers import LlavaOnevisionProcessor
    from transformers.models.llava_onevision.image_processing_llava_onevision import LlavaOnevisionImageProcessor
    from transformers.models.llava_onevision.video_processing_llava_onevision import LlavaOnevisionVideoProcessor

    size = {"height": TINY_OV_TILE, "width": TINY_OV_TILE}
    LlavaOnevisionProcessor(
        image_processor=LlavaOnevisionImageProcessor(size=size, image_grid_pinpoints=TINY_OV_PINPOINTS),
        video_processor=LlavaOnevisionVideoProcessor(size=size), tokenizer=tok,
        num_image_tokens=(TINY_OV_TILE // 14) ** 2, vision_feature_select_strategy="full",
        chat_template=tok.chat_template).save_pretrained(out)


# -- InternVL (the transformers-native layout: model_type internvl) ---------------------------------------------
INTERNVL_TOKENS = {"start_image_token": "<img>", "end_image_token": "</img>",
                   "context_image_token": "<IMG_CONTEXT>", "video_token": "<video>"}
INTERNVL_TEMPLATE = family_chat_template({"image": "<IMG_CONTEXT>", "video": "<video>"})
TINY_INTERNVL_TILE = 56  # pixels per tile: 4 x 4 patches of 14, pixel-shuffled to 2 x 2 = 4 tokens a tile
TINY_INTERNVL_MAX_TILES = 6


def internvl(tok, seed: int, text_dims: dict, init_range: float):
    import torch
    from transformers import InternVLConfig, InternVLForConditionalGeneration

    text = {**text_dims, "model_type": "qwen2", "rope_parameters": {"rope_type": "default",
                                                                     "rope_theta": 1_000_000.0}}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 1,
              "image_size": [TINY_INTERNVL_TILE] * 2, "patch_size": [14, 14], "initializer_range": init_range,
              "use_mean_pooling": False}
    config = InternVLConfig(
        vision_config=vision, text_config=text,
        image_token_id=tok.convert_tokens_to_ids(INTERNVL_TOKENS["context_image_token"]),
        image_seq_length=(TINY_INTERNVL_TILE // 14 // 2) ** 2, downsample_ratio=0.5, vision_feature_layer=-1,
        vision_feature_select_strategy="default", tie_word_embeddings=False, initializer_range=init_range)
    torch.manual_seed(seed)
    return InternVLForConditionalGeneration(config)


def save_internvl_processor(tok, out: Path) -> None:
    from transformers import InternVLProcessor
    from transformers.models.got_ocr2.image_processing_got_ocr2 import GotOcr2ImageProcessor
    from transformers.models.internvl.video_processing_internvl import InternVLVideoProcessor

    size = {"height": TINY_INTERNVL_TILE, "width": TINY_INTERNVL_TILE}
    InternVLProcessor(
        image_processor=GotOcr2ImageProcessor(size=size, crop_to_patches=True, min_patches=1,
                                              max_patches=TINY_INTERNVL_MAX_TILES),
        video_processor=InternVLVideoProcessor(size=size), tokenizer=tok,
        image_seq_length=(TINY_INTERNVL_TILE // 14 // 2) ** 2, chat_template=tok.chat_template).save_pretrained(out)


# -- Gemma 3n --------------------------------------------------------------------------------------------------
GEMMA3N_TEMPLATE = family_chat_template({"image": "<image_soft_token>", "audio": "<audio_soft_token>"})
GEMMA3N_TEXT_TOKENS = {"boi_token": "<start_of_image>", "boa_token": "<start_of_audio>"}
GEMMA3N_NEWLINES = ["\n", "\n\n", "\n\n\n", "\n\n\n\n"]
TINY_GEMMA3N_IMAGE = 64  # pixels a side; the vision tower's fused map is pooled to 2 x 2
TINY_GEMMA3N_IMAGE_TOKENS = 4
GEMMA3N_AUDIO_TOKENS = 188  # the processor's published audio_seq_length (the encoder output is padded to it)


def gemma3n_tokenizer(tok):
    """Extend the tiny tokenizer to Gemma's id layout (module doc); returns the text vocabulary size."""
    tok.add_tokens(GEMMA3N_NEWLINES)
    text_vocab = len(tok)
    vision = ["<end_of_image>", "<image_soft_token>"] + [f"<unused_vision_{i}>" for i in range(126)]
    audio = ["<end_of_audio>", "<audio_soft_token>"] + [f"<unused_audio_{i}>" for i in range(126)]
    tok.add_tokens(vision + audio, special_tokens=True)
    assert tok.convert_tokens_to_ids("<end_of_image>") == text_vocab  # noqa: S101 (the layout the model assumes)
    assert tok.convert_tokens_to_ids("<end_of_audio>") == text_vocab + 128  # noqa: S101
    # the processor reads these names from the tokenizer (what the constructor's extra_special_tokens dict sets)
    tok._set_model_specific_special_tokens({
        **GEMMA3N_TEXT_TOKENS, "eoi_token": "<end_of_image>", "image_token": "<image_soft_token>",
        "eoa_token": "<end_of_audio>", "audio_token": "<audio_soft_token>"})
    return text_vocab


def gemma3n(tok, seed: int, text_dims: dict, init_range: float):
    import importlib.util

    import torch
    from transformers import Gemma3nConfig, Gemma3nForConditionalGeneration

    if importlib.util.find_spec("timm") is None:
        raise ModuleNotFoundError("tiny gemma3n: its vision tower (MobileNetV5) needs the 'timm' package",
                                  name="timm")
    n = gemma3n_tokenizer(tok)
    ids = tok.convert_tokens_to_ids
    text = {key: text_dims[key] for key in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                             "num_attention_heads", "num_key_value_heads", "max_position_embeddings",
                                             "rms_norm_eps", "bos_token_id", "eos_token_id", "pad_token_id")}
    text |= {"vocab_size": n + 256, "vocab_size_per_layer_input": n, "head_dim": 32,
             "hidden_size_per_layer_input": 16, "laurel_rank": 8, "altup_num_inputs": 2, "num_kv_shared_layers": 0,
             "activation_sparsity_pattern": [0.0, 0.0], "layer_types": ["sliding_attention", "full_attention"],
             "sliding_window": 512, "initializer_range": init_range}
    vision = {"architecture": "mobilenetv5_300m_enc", "hidden_size": 2048, "vocab_size": 128, "vocab_offset": n,
              "model_args": {"channel_multiplier": 0.05, "msfa_output_resolution": 2}}
    audio = {"vocab_size": 128, "vocab_offset": n + 128, "hidden_size": 32, "conf_num_attention_heads": 2,
             "conf_num_hidden_layers": 1, "sscp_conv_channel_size": [8, 4]}
    config = Gemma3nConfig(
        text_config=text, vision_config=vision, audio_config=audio, initializer_range=init_range,
        vision_soft_tokens_per_image=TINY_GEMMA3N_IMAGE_TOKENS, audio_soft_tokens_per_image=GEMMA3N_AUDIO_TOKENS,
        boi_token_id=ids("<start_of_image>"), eoi_token_id=n, image_token_id=n + 1,
        boa_token_id=ids("<start_of_audio>"), eoa_token_id=n + 128, audio_token_id=n + 129)
    torch.manual_seed(seed)
    model = Gemma3nForConditionalGeneration(config).eval()
    with torch.no_grad():  # the multimodal ids' rows of the text table: what the embedders give them (module doc)
        table = model.model.language_model.embed_tokens
        for embedder in (model.model.embed_vision, model.model.embed_audio):
            rows = torch.arange(embedder.vocab_offset, embedder.vocab_offset + embedder.vocab_size)
            table.weight[rows] = embedder(input_ids=rows[None])[0] / table.embed_scale
    return model


def save_gemma3n_processor(tok, out: Path) -> None:
    from transformers import Gemma3nAudioFeatureExtractor, Gemma3nProcessor, SiglipImageProcessor

    side = {"height": TINY_GEMMA3N_IMAGE, "width": TINY_GEMMA3N_IMAGE}
    Gemma3nProcessor(feature_extractor=Gemma3nAudioFeatureExtractor(), image_processor=SiglipImageProcessor(size=side),
                     tokenizer=tok, chat_template=tok.chat_template, image_seq_length=TINY_GEMMA3N_IMAGE_TOKENS,
                     audio_seq_length=GEMMA3N_AUDIO_TOKENS).save_pretrained(out)


def save_with_processor_files(tok, out: Path, template: str, files: dict[str, dict]) -> None:
    """The tokenizer, the processor's JSON files (name -> content) and ``chat_template.json``, laid out as the
    released folders have them (two-space indent, a final newline)."""
    tok.save_pretrained(out)
    for name, content in files.items():
        (out / name).write_text(json.dumps(content, indent=2) + "\n")
    (out / "chat_template.json").write_text(json.dumps({"chat_template": template}, indent=2) + "\n")
