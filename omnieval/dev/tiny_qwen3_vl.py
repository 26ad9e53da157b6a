"""A tiny random-weight Qwen3-VL (``omnieval models tiny --arch qwen3-vl``), in the released checkpoint's layout.

* ``qwen3-vl``: ``Qwen3VLForConditionalGeneration`` (``model_type`` ``qwen3_vl``; images and videos). Text decoder
  hidden 128, 2 layers of 4 heads of 32 (vLLM's CPU attention needs head size >= 32), 2 key-value heads, interleaved
  multimodal rotary sections [6, 5, 5] (the released [24, 20, 20] scaled to head size 32); vision tower 2 blocks of
  hidden 32 (one head of 32), 16-pixel patches merged 2 x 2, deepstack from block 0 (the release: blocks 8, 16 and
  24 of 27), an 8 x 8 grid of learned position embeddings (the release: 48 x 48). Weights as transformers saves the
  model and the release ships them (``model.language_model.*``, ``model.visual.*``, ``lm_head.*``).
* The processor files as released (values of the published ``Qwen/Qwen3-VL-8B-Instruct``, written here in our own
  layout): ``preprocessor_config.json`` for images (16-pixel patches, temporal patch 2, merge 2, 65536 to 16777216
  pixels, mean and std 0.5) and ``video_preprocessor_config.json`` for videos (the same patches, 4096 to 25165824
  pixels over all the frames of a clip), both read by ``Qwen3VLProcessor`` on either engine. A video's frames go
  in as decoded (``families.QwenVisionFamily``: their fps as frame metadata, no sampling): the processor writes
  each frame pair's time into the prompt (``<0.1 seconds>``, then the pair's placeholders).
* The tokenizer: ``tiny_models.build_tokenizer`` with the Qwen vision tokens (``<|vision_start|>``,
  ``<|image_pad|>``, ``<|video_pad|>``, ``<|vision_end|>``, named as the processor reads them) and a chat template
  that writes, for each typed content part, the placeholder vLLM's Qwen3-VL model names (``get_placeholder_str``),
  with no default system turn; also saved as ``chat_template.json`` for the processor.

The Qwen3-VL mixture-of-experts build (``tiny_qwen3_vl_moe.py``) and the Qwen3.5 build (``tiny_qwen3_5.py``) share
the vision tower, the processor files and the tokenizer. Loading the processor needs torchvision (the video
processor imports it).
"""

from __future__ import annotations

from pathlib import Path

from omnieval.dev.tiny_families import save_with_processor_files

QWEN3_VL_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'text' %}{{ content['text'] }}"
    "{% elif content['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_PATCHES = {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5], "processor_class": "Qwen3VLProcessor"}
IMAGE_PIXELS = {"shortest_edge": 65_536, "longest_edge": 16_777_216}  # one image
VIDEO_PIXELS = {"shortest_edge": 4_096, "longest_edge": 25_165_824}  # all the frames of one video together
PREPROCESSOR_CONFIG = {**_PATCHES, "size": IMAGE_PIXELS, "image_processor_type": "Qwen2VLImageProcessorFast"}
VIDEO_PREPROCESSOR_CONFIG = {**_PATCHES, "size": VIDEO_PIXELS, "video_processor_type": "Qwen3VLVideoProcessor"}
VISION_GRID = 8  # learned position embeddings a side
# mrope sections of the released decoder ([24, 20, 20] of head size 128) scaled to head size 32
MROPE = {"rope_type": "default", "rope_theta": 5_000_000.0, "mrope_section": [6, 5, 5], "mrope_interleaved": True}


def vision_config(init_range: float, deepstack: bool = True) -> dict:
    """The tiny tower's sizes (module doc); Qwen3.5's tower has no deepstack mergers."""
    out = {"depth": 2, "hidden_size": 32, "intermediate_size": 64, "num_heads": 1, "out_hidden_size": 128,
           "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3,
           "hidden_act": "gelu_pytorch_tanh", "num_position_embeddings": VISION_GRID ** 2,
           "initializer_range": init_range}
    return {**out, "deepstack_visual_indexes": [0]} if deepstack else out


# The Qwen vision tokens (attribute name -> token), as the Qwen2.5-VL and Qwen3-VL processors read them
# (``tiny_models.VL_MEDIA_TOKENS`` is this table).
VISION_TOKENS = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                 "vision_start_token": "<|vision_start|>", "vision_end_token": "<|vision_end|>"}


def token_ids(tok) -> dict[str, int]:
    ids = {name: tok.convert_tokens_to_ids(token) for name, token in VISION_TOKENS.items()}
    return {"image_token_id": ids["image_token"], "video_token_id": ids["video_token"],
            "vision_start_token_id": ids["vision_start_token"], "vision_end_token_id": ids["vision_end_token"]}


def qwen3_vl(tok, seed: int, text_dims: dict, init_range: float):
    import torch
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    text = {**text_dims, "head_dim": 32, "rope_parameters": dict(MROPE)}
    config = Qwen3VLConfig(text_config=text, vision_config=vision_config(init_range), tie_word_embeddings=False,
                           initializer_range=init_range, **token_ids(tok))
    torch.manual_seed(seed)
    return Qwen3VLForConditionalGeneration(config)


def save_qwen3_vl_processor(tok, out: Path) -> None:
    """The tokenizer, and the processor's files as released (module doc)."""
    files = {"preprocessor_config.json": PREPROCESSOR_CONFIG,
             "video_preprocessor_config.json": VIDEO_PREPROCESSOR_CONFIG}
    save_with_processor_files(tok, out, QWEN3_VL_TEMPLATE, files)
