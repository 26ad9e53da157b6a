"""A tiny random-weight VideoLLaMA3 (``omnieval models tiny --arch videollama3``), in the transformers-native layout
(``model_type`` ``video_llama_3``, ``VideoLlama3ForConditionalGeneration``; not the remote-code
``Videollama3Qwen2ForCausalLM`` of ``DAMO-NLP-SG/VideoLLaMA3-7B``).

* ``videollama3``: images and videos. Text decoder Qwen2 (hidden 128, 2 layers of 4 heads of 32, 2 key-value heads,
  plain one-dimensional rotary positions, untied output head, as the 7B release); vision tower the release's
  SigLIP-style encoder with two-dimensional (axial) rotary positions, 1 layer of hidden 32 (one head of 32; the
  release: 27 layers of 1152) on 14-pixel patches, then the two-layer projector to the decoder. Weights as
  transformers saves the model (``model.vision_model.*``, ``model.projector.readout.*``,
  ``model.language_model.*``, ``lm_head.*``), which is what ``from_pretrained`` reads.
* The processor files, with the published settings of the release's processor written here in our own layout
  (``VideoLlama3Processor``, read by the transformers engine):

  - ``preprocessor_config.json`` (images): 14-pixel patches and no merging (one token a patch), sides rounded to
    multiples of 14 and the picture kept within 16 to 16384 tokens (3136 to 3211264 pixels), mean and std 0.5;
  - ``video_preprocessor_config.json`` (videos): the same patches merged 2 x 2 (one token per 28 x 28 pixels),
    sides rounded to multiples of 28, the frames of a clip together within 16384 merged tokens (each frame within
    ``12845056 / frames`` pixels, at least 16 tokens' worth), and token compression on: a merged patch that
    barely changes from the previous frame (mean absolute difference of its normalised pixels, times 255, at most
    0.1) is dropped, the first frame kept whole. Each frame's placeholders follow its time, ``Time 0.1s:``, frames
    joined by commas (the processor writes this).

* The tokenizer: ``tiny_models.build_tokenizer`` with the Qwen2 vision pads the processor reads (``<|image_pad|>``,
  ``<|video_pad|>``, named ``image_token`` and ``video_token``), and a chat template that writes each media content
  part's pad followed by a newline, with no default system turn, as the transformers-native release does.

vLLM 0.32 has no VideoLLaMA3 model (``families``: the vllm engine refuses it). Loading the processor needs
torchvision (the image and video processors import it).
"""

from __future__ import annotations

from pathlib import Path

from omnieval.dev.tiny_families import save_with_processor_files

VIDEOLLAMA3_TOKENS = {"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"}
VIDEOLLAMA3_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'text' %}{{ content['text'] }}"
    "{% elif content['type'] == 'image' %}<|image_pad|>\n"
    "{% elif content['type'] == 'video' %}<|video_pad|>\n"
    "{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
PATCH = 14
IMAGE_MERGE, VIDEO_MERGE = 1, 2
MIN_TOKENS, MAX_TOKENS = 16, 16384  # the release's token budget, for an image and for all the frames of a clip
IMAGE_PIXELS = {"shortest_edge": MIN_TOKENS * PATCH ** 2, "longest_edge": MAX_TOKENS * PATCH ** 2}
VIDEO_PIXELS = {"shortest_edge": MIN_TOKENS * (PATCH * VIDEO_MERGE) ** 2,
                "longest_edge": MAX_TOKENS * (PATCH * VIDEO_MERGE) ** 2}
COMPRESSION_THRESHOLD = 0.1  # the processor's: mean absolute change of a merged patch's normalised pixels x 255
_COMMON = {"patch_size": PATCH, "temporal_patch_size": 1, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
           "do_convert_rgb": True, "do_normalize": True, "do_rescale": True, "do_resize": True, "resample": 3,
           "rescale_factor": 1 / 255, "processor_class": "VideoLlama3Processor"}
PREPROCESSOR_CONFIG = {**_COMMON, "merge_size": IMAGE_MERGE, "size": IMAGE_PIXELS,
                       "image_processor_type": "VideoLlama3ImageProcessor"}
VIDEO_PREPROCESSOR_CONFIG = {**_COMMON, "merge_size": VIDEO_MERGE, "size": VIDEO_PIXELS, "fps": 1, "min_frames": 4,
                             "max_frames": 180, "use_token_compression": True, "do_sample_frames": False,
                             "return_metadata": True, "video_processor_type": "VideoLlama3VideoProcessor"}


def videollama3(tok, seed: int, text_dims: dict, init_range: float):
    """The native model (module doc), its media token ids this tokenizer's."""
    import torch
    from transformers import VideoLlama3Config, VideoLlama3ForConditionalGeneration

    text = {**text_dims, "model_type": "qwen2", "rope_parameters": {"rope_type": "default",
                                                                     "rope_theta": 1_000_000.0}}
    vision = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 1,
              "patch_size": PATCH, "initializer_range": init_range}
    ids = {name: tok.convert_tokens_to_ids(token) for name, token in VIDEOLLAMA3_TOKENS.items()}
    config = VideoLlama3Config(text_config=text, vision_config=vision, image_token_id=ids["image_token"],
                               video_token_id=ids["video_token"], tie_word_embeddings=False,
                               initializer_range=init_range)
    torch.manual_seed(seed)
    return VideoLlama3ForConditionalGeneration(config)


def save_videollama3_processor(tok, out: Path) -> None:
    """The tokenizer, and the processor's files (module doc)."""
    files = {"preprocessor_config.json": PREPROCESSOR_CONFIG,
             "video_preprocessor_config.json": VIDEO_PREPROCESSOR_CONFIG}
    save_with_processor_files(tok, out, VIDEOLLAMA3_TEMPLATE, files)
