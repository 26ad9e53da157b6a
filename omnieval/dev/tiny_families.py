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
"""

from __future__ import annotations

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
