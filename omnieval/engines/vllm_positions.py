"""Qwen2.5-Omni's positions for a video with its own soundtrack on vLLM, made equal to transformers'.

vLLM 0.32 lays out the tokens of a video with its soundtrack (``use_audio_in_video``) exactly as the transformers
processor does, ``<|vision_bos|><|audio_bos|>`` + video and audio chunks + ``<|audio_eos|><|vision_eos|>`` (same
prompt ids), but its M-RoPE positions for that block (``get_mrope_input_positions``) start the video and audio
positions at the ``<|audio_bos|>`` token instead of after it, and count neither that token nor ``<|audio_eos|>``.
transformers (``Qwen2_5OmniThinkerForConditionalGeneration.get_rope_index``, the model's reference code) gives
``<|audio_bos|>`` the position of ``<|vision_bos|>``, the block's tokens the positions vLLM gives the token before
each, ``<|audio_eos|>`` and ``<|vision_eos|>`` both the next position, and so every later token a position 2 lower
than vLLM's. Measured on the tiny model: the prompt ids are identical, every position of the block and after it
differs, and the option log-probabilities differ by up to 10 nats; with the positions below they equal the hf
engine's (tests/test_vllm_soundtrack.py).

``fix_positions`` turns vLLM's positions into transformers' for every video with its soundtrack; ``install`` wraps
the thinker's method with it in this process. It only acts in the process that runs the model: the vLLM engine
installs it and sends soundtrack requests only where the model runs in its own process (module ``vllm``).
"""

from __future__ import annotations

_INSTALLED = "_omnieval_soundtrack_positions"


def fix_positions(positions, delta: int, blocks: list[tuple[int, int]]):
    """vLLM's positions (3, n) and delta -> transformers'. ``blocks``: (offset, length) of each interleaved video
    placeholder (from ``<|audio_bos|>`` through ``<|audio_eos|>``), in prompt order."""
    old = positions
    new = positions.clone()
    shift = 0
    for offset, length in sorted(blocks):
        inner = length - 2  # the video and audio tokens between <|audio_bos|> and <|audio_eos|>
        o = offset
        new[:, o] = new[:, o - 1] if o > 0 else 0
        new[:, o + 1:o + 1 + inner] = old[:, o:o + inner] - shift
        after = old[:, o + inner] - shift  # vLLM's first position after its shorter block: transformers' eos
        new[:, o + inner + 1] = after  # <|audio_eos|>
        if o + inner + 2 < new.shape[1]:
            new[:, o + inner + 2] = after  # <|vision_eos|>
        shift += 2
        new[:, o + inner + 3:] = old[:, o + inner + 3:] - shift
    return new, delta - shift


def interleaved_blocks(mm_features) -> list[tuple[int, int]]:
    """(offset, length) of the video placeholders that carry their soundtrack."""
    out = []
    for feature in mm_features:
        data = feature.data or {}
        flag = data.get("use_audio_in_video")
        if feature.modality == "video" and flag is not None and bool(flag.data.item()):
            out.append((feature.mm_position.offset, feature.mm_position.length))
    return out


def install() -> bool:
    """Wrap ``Qwen2_5OmniThinkerForConditionalGeneration.get_mrope_input_positions`` in this process (once);
    returns whether the wrapper is in place."""
    from vllm.model_executor.models import qwen2_5_omni_thinker as thinker

    cls = thinker.Qwen2_5OmniThinkerForConditionalGeneration
    if getattr(cls, _INSTALLED, False):
        return True
    original = cls.get_mrope_input_positions

    def get_mrope_input_positions(self, input_tokens, mm_features):
        positions, delta = original(self, input_tokens, mm_features)
        blocks = interleaved_blocks(mm_features)
        return fix_positions(positions, delta, blocks) if blocks else (positions, delta)

    cls.get_mrope_input_positions = get_mrope_input_positions
    setattr(cls, _INSTALLED, True)
    return True
