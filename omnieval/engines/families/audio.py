"""The audio-and-text families: Qwen2-Audio (``AudioFamily``), Audio Flamingo 3 and Music Flamingo
(``OneAudioFamily``) and Granite Speech (``GraniteSpeechFamily``).

Audio Flamingo 3 and Music Flamingo take one audio a prompt on both engines (their processor pairs each audio
with a prompt of its own; a prompt with several is an errored row), Granite Speech several on transformers and
one on vLLM, and its transformers logits divided by the decoder's ``logits_scaling`` as vLLM does.

Their recipes are their processors' (transformers 5.19): 16 kHz audio, cut where the processor cuts it: Qwen2-Audio
at Whisper's 30 s window (its processor pads and truncates to the feature extractor's ``n_samples``), Audio
Flamingo 3 at 600 s and Music Flamingo at 1200 s (their processors' ``max_audio_len``, 30 s windows), Granite
Speech whole (its feature extractor cuts nothing). Their cards publish no frame or prompt settings beyond these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from omnieval.engines.families.base import AudioFamily, register_family
from omnieval.engines.recipes import audio_recipe, processor_source, register_recipe
from omnieval.media.decoded import DecodedMedia


def refuse_several_audios(name: str, items: Sequence[DecodedMedia], why: str) -> None:
    """A prompt of a one-audio family showing several audios is an error (an errored row), in one line."""
    audios = sum(item.modality == "audio" for item in items)
    if audios > 1:
        raise ValueError(f"{name} takes one audio a prompt ({audios} given): {why}")


class OneAudioFamily(AudioFamily):
    """Audio Flamingo 3, Music Flamingo: the published processor pairs each audio with a text of its own (it refuses
    one prompt with several audios) and vLLM's model takes one audio a prompt, so a prompt with several audios is an
    errored row on both engines, refused here in one line before the processor is called."""

    why = "its processor pairs each audio with a prompt of its own"

    def media_kwargs(self, items: Sequence[DecodedMedia]) -> dict:
        refuse_several_audios(self.name, items, self.why)
        return super().media_kwargs(items)

    def vllm_fields(self, items: Sequence[DecodedMedia]) -> tuple[dict, dict, dict | None]:
        refuse_several_audios(self.name, items, self.why)
        return super().vllm_fields(items)


class GraniteSpeechFamily(AudioFamily):
    """Granite Speech: transformers' processor and model take several audios in one prompt, vLLM's model one
    (``get_supported_mm_limits``), so the vLLM engine refuses a prompt with more (an errored row, not a run that
    stops at vLLM's own limit).

    Its Granite text decoder divides its logits by ``logits_scaling`` (8 in the released Granite 3.3 decoders), as
    transformers' ``GraniteForCausalLM`` and vLLM's Granite Speech do; transformers'
    ``GraniteSpeechForConditionalGeneration`` applies its own output head and leaves the division out, so the
    transformers engine divides (``logit_scale``): the same choices either way, but option logprobs and confidence
    as the decoder defines them, equal on both engines."""

    def logit_scale(self, config) -> float:
        return 1.0 / float(getattr(config.text_config, "logits_scaling", 1.0) or 1.0)

    def vllm_fields(self, items: Sequence[DecodedMedia]) -> tuple[dict, dict, dict | None]:
        refuse_several_audios(self.name, items, "vLLM's model takes one audio a prompt")
        return super().vllm_fields(items)


register_family(AudioFamily(name="qwen2-audio", model_types=("qwen2_audio",), modalities=("audio",),
                            model_class="Qwen2AudioForConditionalGeneration"))
register_family(OneAudioFamily(name="audioflamingo3", model_types=("audioflamingo3",), modalities=("audio",),
                               model_class="AudioFlamingo3ForConditionalGeneration"))
register_family(OneAudioFamily(name="musicflamingo", model_types=("musicflamingo",), modalities=("audio",),
                               model_class="MusicFlamingoForConditionalGeneration",
                               refusals={"vllm": "vLLM removed MusicFlamingoForConditionalGeneration after 0.24.0 "
                                                 "(use the hf engine)"}))
register_family(GraniteSpeechFamily(name="granite-speech", model_types=("granite_speech",), modalities=("audio",),
                                    model_class="GraniteSpeechForConditionalGeneration", packages=("torchaudio",)))

WHISPER_WINDOW = ("transformers 5.19.0, WhisperFeatureExtractor (chunk_length 30 s: truncation to n_samples, "
                  "Qwen2AudioProcessor padding='max_length')")
register_recipe(audio_recipe("qwen2-audio", "WhisperFeatureExtractor", 30.0, WHISPER_WINDOW))
register_recipe(audio_recipe("audioflamingo3", "WhisperFeatureExtractor", 600.0,
                             processor_source("AudioFlamingo3Processor", "max_audio_len")))
register_recipe(audio_recipe("musicflamingo", "WhisperFeatureExtractor", 1200.0,
                             processor_source("MusicFlamingoProcessor", "max_audio_len")))
register_recipe(audio_recipe("granite-speech", "GraniteSpeechFeatureExtractor"))


# -- placeholder counts: the tests' reference, worked out from the published preprocessing rules and the media
# sizes alone, never by the adapter's or the processor's code (tests/family_placeholders.py binds them to the
# tiny builds of omnieval/dev) --


def whisper_audio_tokens(n_samples: int) -> int:
    """Qwen2-Audio's embeddings for a waveform: Whisper frames (hop 160, at most 30 s = 3000), then two stride-2
    stages (the conv front end and the pooling)."""
    frames = min(math.ceil(n_samples / 160), 3000)
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


def flamingo_audio_tokens(n_samples: int) -> int:
    """Audio Flamingo 3's and Music Flamingo's ``<sound>`` tokens for a waveform: cut into 30 s windows (480000
    samples at 16 kHz), each window's Whisper frames counted one per started 160-sample hop (the feature
    extractor's attention mask), summed over the windows, then the stride-2 convolution and the stride-2 pooling."""
    frames = sum(math.ceil(min(480_000, n_samples - start) / 160) for start in range(0, n_samples, 480_000))
    return ((frames - 1) // 2 + 1 - 2) // 2 + 1


def granite_speech_audio_tokens(n_samples: int) -> int:
    """Granite Speech's ``<|audio|>`` tokens for a waveform (its published feature extractor and projector): one
    centred mel frame per 160-sample hop plus one, frames stacked in pairs (an odd last frame dropped), the
    projector reading windows of 15 stacked frames and giving 15 / 5 = 3 tokens a window (the last one padded)."""
    stacked = (n_samples // 160 + 1) // 2
    return math.ceil(stacked / 15) * 3
