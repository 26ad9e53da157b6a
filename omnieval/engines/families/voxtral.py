"""Voxtral (``VoxtralFamily``): no chat template; Mistral's tokenizer lays out its prompts, as token ids on vLLM
(``vllm_prompt``). Its recipe: 16 kHz audio, whole (its processor pads to 30 s chunks and cuts nothing), no system
prompt and the card's sampling for audio understanding (recorded with the run).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from omnieval.core.prompts import PromptPart
from omnieval.engines.families.base import AudioFamily, register_family
from omnieval.engines.recipes import Recipe, Sourced, audio_recipe, register_recipe
from omnieval.media.decoded import AUDIO_SAMPLE_RATE, DecodedMedia


class VoxtralFamily(AudioFamily):
    """Voxtral: Mistral's own tokenizer (``mistral_common``, from ``tekken.json``) lays out its prompts, on both
    engines; there is no chat template. A user message's text and audio chunks become ``<s>[INST]``, each text's
    tokens and each clip's ``[BEGIN_AUDIO]`` and ``[AUDIO]`` run (the clip padded with silence to whole 30 s chunks,
    375 tokens a chunk), then ``[/INST]``.

    * The rendered prompt (``prompt``) writes that layout with one ``[BEGIN_AUDIO][AUDIO]`` per clip (adjacent text
      parts joined into one text chunk), as the other families' templates write one placeholder that their
      processor expands. ``conversation`` reads it back into the user message, each clip as a lossless float WAV.
    * transformers (``hf_inputs``): ``VoxtralProcessor.apply_chat_template`` on that message (ids, and the log-mel
      features of the padded clips), then the ids of any text after ``[/INST]`` (chain-of-thought reasoning).
    * vLLM (``vllm_prompt``): vLLM's Voxtral takes prompts as ids with their audio runs already in place, so the
      same tokenizer call gives the ids, and the padded clips it returns are the ``multi_modal_data``.
    """

    audio_mark = "[BEGIN_AUDIO][AUDIO]"  # one clip in the rendered prompt

    @staticmethod
    def _specials():
        from mistral_common.tokens.tokenizers.base import SpecialTokens

        return SpecialTokens.bos.value + SpecialTokens.begin_inst.value, SpecialTokens.end_inst.value

    def messages(self, parts: Sequence[PromptPart]) -> list[dict]:
        """As for every family, with adjacent text parts joined: Mistral's tokenizer encodes each text chunk on
        its own, and one chunk between clips is what the rendered prompt reads back as."""
        content: list[dict] = []
        for part in super().messages(parts)[0]["content"]:
            if part["type"] == "text" and content and content[-1]["type"] == "text":
                content[-1] = {"type": "text", "text": content[-1]["text"] + part["text"]}
            else:
                content.append(part)
        return [{"role": "user", "content": content}]

    def prompt(self, processor, parts: Sequence[PromptPart]) -> str:
        head, end = self._specials()
        chunks = []
        for part in self.messages(parts)[0]["content"]:
            if part["type"] != "text":
                chunks.append(self.audio_mark)
            elif self.audio_mark in part["text"] or end in part["text"]:
                raise ValueError(f"{self.name}: a text part holds {self.audio_mark!r} or {end!r}, which mark the "
                                 "prompt's own layout")
            else:
                chunks.append(part["text"])
        return head + "".join(chunks) + end

    def conversation(self, text: str, items: Sequence[DecodedMedia]) -> tuple[list[dict], str]:
        """The user message a rendered prompt (``prompt``, maybe followed by more text) stands for, its clips the
        audio ``items`` in order, and the text after ``[/INST]``."""
        import base64
        import io

        import soundfile

        head, end = self._specials()
        if not text.startswith(head) or end not in text:
            raise ValueError(f"{self.name}: not a rendered prompt of this family: {text[:40]!r}")
        body, after = text[len(head):].split(end, 1)
        pieces = body.split(self.audio_mark)
        audios = [item for item in items if item.modality == "audio"]
        if len(pieces) - 1 != len(audios):
            raise ValueError(f"{self.name}: {len(pieces) - 1} clips in the prompt, {len(audios)} given")
        content: list[dict] = []
        for i, piece in enumerate(pieces):
            if piece:
                content.append({"type": "text", "text": piece})
            if i < len(audios):
                wav = io.BytesIO()
                soundfile.write(wav, audios[i].data.astype(np.float32), audios[i].sample_rate or AUDIO_SAMPLE_RATE,
                                format="WAV", subtype="FLOAT")
                content.append({"type": "audio", "base64": base64.b64encode(wav.getvalue()).decode()})
        return [{"role": "user", "content": content}], after

    def hf_inputs(self, processor, text: str, items: Sequence[DecodedMedia]):
        import torch

        message, after = self.conversation(text, items)
        out = processor.apply_chat_template(message, tokenize=True, return_dict=True, return_tensors="pt")
        if after:
            extra = torch.tensor([processor.tokenizer.encode(after, add_special_tokens=False)])
            out["input_ids"] = torch.cat([out["input_ids"], extra], dim=1)
            out["attention_mask"] = torch.cat([out["attention_mask"], torch.ones_like(extra)], dim=1)
        return out

    def vllm_prompt(self, processor, parts: Sequence[PromptPart], items: Sequence[DecodedMedia],
                    suffix: str = "") -> dict:
        message, after = self.conversation(self.prompt(processor, parts) + suffix, items)
        enc = processor.tokenizer.apply_chat_template(message, tokenize=True, return_dict=True)
        ids = list(enc["input_ids"]) + (processor.tokenizer.encode(after, add_special_tokens=False) if after else [])
        prompt: dict = {"prompt_token_ids": ids}
        clips = list(enc.get("audio") or [])
        if clips:
            rate = processor.feature_extractor.sampling_rate
            data = [(np.asarray(clip, dtype=np.float32), rate) for clip in clips]
            prompt["multi_modal_data"] = {"audio": data[0] if len(data) == 1 else data}
            prompt["multi_modal_uuids"] = {"audio": [item.content_hash or None for item in items
                                                     if item.modality == "audio"]}
        return prompt


register_family(VoxtralFamily(name="voxtral", model_types=("voxtral",), modalities=("audio",),
                              model_class="VoxtralForConditionalGeneration",
                              packages=("mistral_common", "soundfile")))

VOXTRAL_CARD = ("https://huggingface.co/mistralai/Voxtral-Mini-3B-2507 (model card, usage notes: temperature 0.2 "
                "and top_p 0.95 for chat completion such as audio understanding, 0.0 for transcription; system "
                "prompts not yet supported)")
register_recipe(Recipe("voxtral", decode=audio_recipe("voxtral", "VoxtralProcessor audio_kwargs").decode,
                       system_prompt=Sourced(None, VOXTRAL_CARD),
                       generation={"temperature": Sourced(0.2, VOXTRAL_CARD), "top_p": Sourced(0.95, VOXTRAL_CARD)}))


# -- placeholder counts: the tests' reference, worked out from the published preprocessing rules and the media
# sizes alone, never by the adapter's or the processor's code (tests/family_placeholders.py binds them to the
# tiny builds of omnieval/dev) --


def voxtral_audio_tokens(n_samples: int) -> int:
    """Voxtral's ``[AUDIO]`` tokens for a waveform (16 kHz): padded with silence to whole 30 s chunks (480000
    samples), 12.5 tokens a second: 375 a chunk."""
    return 375 * math.ceil(n_samples / 480_000)
