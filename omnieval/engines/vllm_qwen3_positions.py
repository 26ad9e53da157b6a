"""Qwen3-Omni's positions on vLLM, made equal to transformers' (the model's reference code).

Qwen3-Omni places the frames of a video ``2 / fps x 13`` positions apart (13 positions a second, two frames a
temporal patch), so most frame rates give fractional positions: 6.5 apart at 4 fps. transformers
(``Qwen3OmniMoePreTrainedModelForConditionalGeneration.get_rope_index``) keeps them as float32 values, and every
token after such a video sits at a fractional position too (the largest position so far plus one). vLLM 0.32
(``get_mrope_input_positions``) cuts each frame's position to an integer, and its positions are integers all the
way: the model runner keeps them in int64 buffers and the rotary embedding looks its angles up by position in a
table. Measured on the tiny model at 4 fps: the same prompt ids, option log-probabilities up to 0.2 apart; at 2 fps
(whole positions) they agree within 1e-5.

What this module does, in the process that runs the model only (``install``):

* ``get_mrope_input_positions`` returns transformers' positions (``reference_positions``, computed as
  ``get_rope_index`` computes them, in float32), each written as one int64 (``encode``): the whole part in the low
  32 bits, the fraction in units of 2^-24 above them. The runner only copies positions and adds whole numbers to
  them (a decoded token's position is the prompt's ``mrope_position_delta`` plus its index), which leaves the
  fraction where it is: encoded the same way (a numpy int64, as the runner adds a numpy int32 index to it), the
  delta carries the fraction of transformers' float delta to every generated token.
* each text-decoder layer's rotary embedding is wrapped (``FractionalRotary``): it decodes the positions and
  computes the angles ``position x inv_freq`` in float32 as transformers does, instead of reading a table indexed
  by integer positions; the rest (interleaved sections, the rotation) is vLLM's own.

A float32 position of at least 1 is a multiple of 2^-23, so 24 fraction bits hold it exactly; positions stay below
2^32. Whole positions (text, audio, images, videos at 1 or 2 fps) encode as themselves.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

_INSTALLED = "_omnieval_fractional_positions"
FRACTION_BITS = 24
WHOLE_BITS = 32


def encode(values: torch.Tensor) -> torch.Tensor:
    """Positions (float32, any shape) as int64: whole part in the low ``WHOLE_BITS`` bits, fraction above."""
    exact = values.double()
    whole = torch.floor(exact)
    fraction = torch.round((exact - whole) * 2**FRACTION_BITS).long()
    whole = whole.long() + (fraction >> FRACTION_BITS)  # a fraction that rounded up to one
    fraction = fraction & (2**FRACTION_BITS - 1)
    return whole + (fraction << WHOLE_BITS)


def decode(codes: torch.Tensor) -> torch.Tensor:
    """``encode``'s int64 codes (plus any whole numbers added to them) back to float32 positions."""
    whole = codes & (2**WHOLE_BITS - 1)
    fraction = codes >> WHOLE_BITS
    return (whole.double() + fraction.double() / 2**FRACTION_BITS).float()


def _line(n, start) -> torch.Tensor:
    """``n`` consecutive positions from ``start`` on all three axes (text, audio, special tokens)."""
    return torch.arange(n).view(1, -1).expand(3, -1) + start


def _grid(t_index: torch.Tensor, height: int, width: int, start) -> torch.Tensor:
    """The (t, h, w) positions of a vision grid, frame by frame, row by row, as transformers lays them out."""
    h_index = torch.arange(height).view(1, -1, 1).expand(len(t_index), -1, width).flatten().float()
    w_index = torch.arange(width).view(1, 1, -1).expand(len(t_index), height, -1).flatten().float()
    t_index = t_index.view(-1, 1).expand(-1, height * width).flatten().float()
    return torch.stack([t_index, h_index, w_index]) + start


def reference_positions(n_tokens: int, features, per_second: int, audio_tokens) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' positions (3, n_tokens) and delta (float32) for a prompt whose media are ``features``:
    ``(offset, modality, data)`` in prompt order as vLLM's ``iter_mm_features`` yields them (a video with its
    soundtrack once, its audio in ``data``); ``audio_tokens``: mel frames -> tokens.

    The same steps as ``get_rope_index``: text and special tokens count on from the previous piece's largest
    position plus one; audio is a line; an image or video a grid whose frame ``t`` is at ``t x seconds-per-frame-
    pair x per_second`` (an image's single frame at 0); a video with its soundtrack interleaves the two by time,
    one token at a time, and its end tokens count on from the last piece laid (not the largest of the block)."""
    pieces: list[torch.Tensor] = []
    done = 0  # tokens laid out

    def after() -> torch.Tensor:
        return pieces[-1].max() + 1 if pieces else torch.tensor(0.0)

    for offset, modality, data in features:
        if offset > done:  # text and the opening special tokens before the media
            pieces.append(_line(offset - done, after()))
        if modality == "audio":
            n = audio_tokens(data["audio_feature_length"])
            pieces.append(_line(n, after()))
            pieces.append(_line(1, after()))  # <|audio_end|>
            done = offset + n + 1
            continue
        frames, height, width = data["grid_t"], data["grid_h"], data["grid_w"]
        if modality == "image":
            t_index = (torch.arange(frames) * 1 * per_second).float()
        else:  # vLLM's t_factor is float(seconds per frame pair, a float32) x per_second, exact in double
            seconds = torch.tensor(data["t_factor"] / per_second, dtype=torch.float32)
            t_index = (torch.arange(frames) * seconds * per_second).float()
        if modality == "video" and data.get("use_audio_in_video"):
            pieces.append(_line(1, after()))  # <|audio_start|> (its <|vision_start|> was the text before)
            start = after()
            n_audio = audio_tokens(data["audio_feature_length"])
            video, audio = _grid(t_index, height, width, start), _line(n_audio, start).float()
            v = a = 0
            while v < video.shape[1] and a < audio.shape[1]:
                if video[0, v] <= audio[0, a]:
                    pieces.append(video[:, v:v + 1])
                    v += 1
                else:
                    pieces.append(audio[:, a:a + 1])
                    a += 1
            if v < video.shape[1]:
                pieces.append(video[:, v:])
            if a < audio.shape[1]:
                pieces.append(audio[:, a:])
            pieces.append(_line(2, after()))  # <|audio_end|><|vision_end|>
            done = offset + 1 + video.shape[1] + n_audio + 2
            continue
        pieces.append(_grid(t_index, height, width, after()))
        pieces.append(_line(1, after()))  # <|vision_end|>
        done = offset + frames * height * width + 1
    if done < n_tokens:
        pieces.append(_line(n_tokens - done, after()))
    positions = torch.cat([piece.float() for piece in pieces], dim=1)
    if positions.shape[1] != n_tokens:
        raise RuntimeError(f"Qwen3-Omni positions: {positions.shape[1]} laid out for {n_tokens} tokens")
    return positions, positions.max() + 1 - n_tokens


class FractionalRotary(torch.nn.Module):
    """vLLM's multimodal rotary embedding on ``encode``'d positions: the angles computed from the decoded float32
    positions (``position x inv_freq``, as transformers computes them), then vLLM's own section interleaving and
    rotation (``MRotaryEmbedding.forward_native`` past its table lookup)."""

    def __init__(self, rope):
        from vllm.model_executor.layers.rotary_embedding.mrope import apply_interleaved_rope

        super().__init__()
        self.rope = rope
        self.interleave = apply_interleaved_rope  # imported here, not in forward (which torch.compile may trace)
        self.register_buffer("inv_freq", rope._compute_inv_freq(rope.base), persistent=False)

    def forward(self, positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, offsets=None):
        rope = self.rope
        angles = decode(positions)[..., None] * self.inv_freq.to(positions.device, torch.float32)
        cos, sin = angles.cos().to(query.dtype), angles.sin().to(query.dtype)
        if positions.ndim == 2:
            if rope.mrope_interleaved:
                cos = self.interleave(cos, rope.mrope_section)
                sin = self.interleave(sin, rope.mrope_section)
            else:
                cos = torch.cat([m[i] for i, m in enumerate(cos.split(rope.mrope_section, dim=-1))], dim=-1)
                sin = torch.cat([m[i] for i, m in enumerate(sin.split(rope.mrope_section, dim=-1))], dim=-1)
        return self._rotate(query, cos, sin), self._rotate(key, cos, sin)

    def _rotate(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        rope, shape = self.rope, x.shape
        x = x.view(cos.shape[0], -1, rope.head_size)
        turned = rope.apply_rotary_emb.forward_native(x[..., :rope.rotary_dim], cos, sin)
        return torch.cat((turned, x[..., rope.rotary_dim:]), dim=-1).reshape(shape)


def wrap_rotaries(model) -> int:
    """Wrap the rotary embedding of every text-decoder attention layer of a built Qwen3-Omni thinker; returns how
    many layers were wrapped (one wrapper per distinct embedding: vLLM shares one between layers)."""
    from vllm.model_executor.layers.rotary_embedding.mrope import MRotaryEmbedding

    layers = [m for m in model.language_model.modules() if isinstance(getattr(m, "rotary_emb", None), MRotaryEmbedding)]
    wrapped: dict[int, FractionalRotary] = {}
    for layer in layers:
        rope = layer.rotary_emb
        if id(rope) not in wrapped:
            wrapped[id(rope)] = FractionalRotary(rope)
        layer.rotary_emb = wrapped[id(rope)]
    return len(layers)


def install() -> bool:
    """Replace ``Qwen3OmniMoeThinkerForConditionalGeneration``'s positions and wrap its rotary embeddings in this
    process (once, before a model is built); returns whether they are in place."""
    from vllm.model_executor.models import qwen3_omni_moe_thinker as thinker

    cls = thinker.Qwen3OmniMoeThinkerForConditionalGeneration
    if getattr(cls, _INSTALLED, False):
        return True
    original_init = cls.__init__

    @functools.wraps(original_init)  # vLLM builds the model by the keywords of this signature
    def __init__(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        if not wrap_rotaries(self):
            raise RuntimeError("Qwen3-Omni on vLLM: no rotary embedding found to take fractional positions")

    def get_mrope_input_positions(self, input_tokens, mm_features):
        positions, delta = reference_positions(len(input_tokens), self.iter_mm_features(mm_features),
                                               self.config.position_id_per_seconds, self._compute_audio_token_count)
        # a numpy int64: the runner adds the token index as a numpy int32, which a Python int this large overflows
        return encode(positions), np.int64(encode(delta).item())

    cls.__init__ = __init__
    cls.get_mrope_input_positions = get_mrope_input_positions
    setattr(cls, _INSTALLED, True)
    return True
