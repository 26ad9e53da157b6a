"""Qwen2.5-Omni (``OmniFamily``) and Qwen3-Omni (``Qwen3OmniFamily``): their adapters, registrations and recipes.

They go through their own processor on the transformers engine too, with what the other families lack: several
prompts a forward pass (``omni_inputs.collate``) and a video's own soundtrack interleaved with it
(``use_audio_in_video``). The vLLM engine keeps its own omni path (``chat.omni_media_fields``, with the adapter's
``vllm_media_kwargs``), and replaces vLLM's positions by transformers' where they differ (``vllm_positions`` for
Qwen2.5-Omni's soundtrack blocks, ``vllm_qwen3_positions`` for Qwen3-Omni's fractional video times). The
engines' ``is_omni`` branches (``engines/hf.py``, ``engines/vllm.py``) stay in the engines.

The recipes are the reference utilities' (``qwen-omni-utils``: ``recipes.qwen_omni_recipe``), with the sizes and
system prompts their model cards pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from omnieval.core.prompts import PromptPart
from omnieval.engines.families.base import AudioFamily, register_family
from omnieval.engines.omni_inputs import DEFAULT_VIDEO_FPS, OMNI_MODALITIES, TEMPORAL_PATCH, Encoded
from omnieval.engines.recipes import (
    QWEN3_OMNI_CARD,
    QWEN3_OMNI_PATCH,
    QWEN25_OMNI_CARD,
    QWEN25_OMNI_SYSTEM,
    Sourced,
    qwen_omni_recipe,
    register_recipe,
)
from omnieval.media.decoded import DecodedMedia


class OmniFamily(AudioFamily):
    """Qwen2.5-Omni's thinker: video, audio and image through ``Qwen2_5OmniProcessor`` (transformers engine).

    ``hf_encoded`` calls the processor on one prompt and keeps its tensors as they are, except one thing the
    processor cannot say: it takes one fps per call, so where the videos of a prompt were sampled at different
    rates (clips of different lengths, the same frame count), each video's ``video_second_per_grid`` is set to
    ``temporal_patch_size / its fps``, the processor's own formula (placeholders and pixels do not depend on fps).
    A prompt whose videos carry their soundtracks lays the audio out by those times, so such videos at different
    rates are refused rather than laid out with one of them.

    What the two engines need to know about the family beyond its processor: ``audio_tokens`` (the placeholder
    count of a waveform, checked against the ids each engine sends), ``processor_audio`` (the waveform the
    processor is given), ``vllm_media_kwargs`` (vLLM's ``mm_processor_kwargs``) and where vLLM's own positions
    are replaced by the model's (``vllm_positions_needed``, ``install_vllm_positions``)."""

    default_fps = DEFAULT_VIDEO_FPS  # what the processor assumes for a video given without its fps
    positions_refusal = ("a video with its own soundtrack needs the model in the engine's process "
                         "(tensor_parallel_size 1, VLLM_ENABLE_V1_MULTIPROCESSING=0): vLLM's own positions for it "
                         "differ from the model's reference code (engines/vllm_positions.py)")

    def audio_tokens(self, n_samples: int) -> int:
        """Audio placeholder tokens a waveform of ``n_samples`` becomes (``expected_audio_tokens``)."""
        return expected_audio_tokens(n_samples)

    def processor_audio(self, wave: np.ndarray) -> np.ndarray:
        """The waveform as the processor is given it (on both engines): as decoded."""
        return wave

    def media_kwargs(self, items: Sequence[DecodedMedia]) -> dict:
        out = super().media_kwargs(items)
        if "audio" in out:
            out["audio"] = [self.processor_audio(wave) for wave in out["audio"]]
        return out

    def vllm_media_kwargs(self, videos: Sequence[DecodedMedia], soundtracks: Sequence[DecodedMedia]) -> dict | None:
        """``mm_processor_kwargs`` of a vLLM request showing ``videos`` (in prompt order), with ``soundtracks``
        (one per video, same order) when they carry their own soundtracks (``chat.omni_media_fields``)."""
        fps = [float(item.fps or self.default_fps) for item in videos]
        kwargs = {"fps": fps[0] if len(set(fps)) == 1 else sum(fps) / len(fps)} if fps else None
        if soundtracks and kwargs is not None:
            kwargs["use_audio_in_video"] = True
            kwargs["second_per_grid_ts"] = [TEMPORAL_PATCH / kwargs["fps"]] * len(fps)
        return kwargs

    def vllm_positions_needed(self, shown: Sequence[PromptPart], use_audio_in_video: bool) -> bool:
        """Whether vLLM's positions for a request differ from the model's reference code unless replaced (the
        request is refused where they cannot be, ``positions_refusal``): Qwen2.5-Omni's differ for a video with its
        own soundtrack."""
        return use_audio_in_video

    def install_vllm_positions(self) -> bool:
        """Replace vLLM's positions by the model's in this process (``vllm_positions``); whether they are."""
        from omnieval.engines import vllm_positions

        return vllm_positions.install()

    def prompt(self, processor, parts: Sequence[PromptPart]) -> str:
        """The tokenizer's chat template: the vLLM engine renders omni prompts with it (``chat.chat_prompt``, over
        the same typed parts), so both engines give the model the same text."""
        return processor.tokenizer.apply_chat_template(self.messages(parts), tokenize=False,
                                                       add_generation_prompt=True)

    def hf_encoded(self, processor, text: str, items: Sequence[DecodedMedia],
                   use_audio_in_video: bool = False) -> Encoded:
        """The processor's ids and tensors for one rendered prompt. ``items``: the media shown, in prompt order,
        then the soundtrack of each video (in video order) when ``use_audio_in_video``."""
        import torch

        fps = [float(item.fps or self.default_fps) for item in items if item.modality == "video"]
        kwargs = self.media_kwargs(items)
        if fps:  # the frames are sampled already: the processor must not sample again
            kwargs.update(fps=fps[0], do_sample_frames=False)
        mixed = len(set(fps)) > 1
        if mixed and use_audio_in_video:
            paths = ", ".join(sorted({item.path or "?" for item in items if item.modality == "video"}))
            raise ValueError(f"videos with their own soundtracks at different frame rates in one prompt ({paths}: "
                             f"{sorted(set(fps))} fps): {type(processor).__name__} interleaves them with one fps")
        out = processor(text=[text], return_tensors="pt", use_audio_in_video=use_audio_in_video, **kwargs)
        tensors = {k: v for k, v in out.items() if k not in ("input_ids", "attention_mask")}
        if mixed:
            patch = processor.video_processor.temporal_patch_size
            tensors["video_second_per_grid"] = torch.tensor([patch / f for f in fps])
        return Encoded(out["input_ids"][0].tolist(), tensors, use_audio_in_video)


def expected_audio_tokens(n_samples: int, hop_length: int = 160, max_samples: int = 480_000) -> int:
    """Audio placeholder tokens a waveform of ``n_samples`` becomes in Qwen2.5-Omni: its Whisper log-mel frames
    (one per ``hop_length`` samples, the waveform cut at ``max_samples``, 30 s) through the audio tower's two
    stride-2 stages."""
    mel = math.ceil(min(n_samples, max_samples) / hop_length)
    return ((mel - 1) // 2 + 1 - 2) // 2 + 1


# Qwen3-Omni's published audio and video arithmetic (transformers' Qwen3OmniMoeProcessor, whose defaults the
# released checkpoints keep): 10 ms mel hops at 16 kHz; the audio tower reads the frames in windows of 100 (1 s),
# 13 tokens each, and the rest through three stride-2 convolutions; 13 temporal positions per second of video.
QWEN3_HOP = 160


QWEN3_WINDOW_FRAMES, QWEN3_WINDOW_TOKENS = 100, 13


QWEN3_POSITIONS_PER_SECOND = 13


# The last mel frame's window reaches 40 samples past the end of a waveform whose length is a whole number of hops
# (n_fft 400 centred on the frame); where nothing follows, the extractor mirrors the last 41 samples there.
QWEN3_TRAILING_SILENCE = 41


def qwen3_audio_samples(n_samples: int) -> int:
    """The length of a waveform of ``n_samples`` as Qwen3-Omni is given it (``Qwen3OmniFamily``): followed by
    silence up to a whole number of hops, at least ``QWEN3_TRAILING_SILENCE`` samples of it."""
    return QWEN3_HOP * math.ceil((n_samples + QWEN3_TRAILING_SILENCE) / QWEN3_HOP)


def qwen3_audio_tokens(frames: int) -> int:
    """Audio placeholder tokens of ``frames`` mel frames in Qwen3-Omni."""
    rest = frames % QWEN3_WINDOW_FRAMES
    for _ in range(3):
        rest = (rest - 1) // 2 + 1
    return rest + frames // QWEN3_WINDOW_FRAMES * QWEN3_WINDOW_TOKENS


class Qwen3OmniFamily(OmniFamily):
    """Qwen3-Omni's thinker (mixture-of-experts text decoder): video, audio and image through
    ``Qwen3OmniMoeProcessor``, the transformers engine as for Qwen2.5-Omni (``OmniFamily``). What differs:

    * Audio. Its processor pads the waveforms of one call to the longest (not to 30 s), and the extractor mirrors
      the end of a waveform that nothing follows, so the last mel frame of a clip would depend on the clips it is
      processed with; vLLM processes the clips of a request not found in its cache apart from the cached ones, and
      pads every waveform to a whole 10 ms hop first. Each waveform is therefore followed by silence up to a whole
      hop, at least 41 samples of it (``qwen3_audio_samples``; at most 12.5 ms, no sample of the clip is lost): its
      features are then the same alone or padded, on both engines.
    * vLLM. The processor takes one fps a request: videos sampled at different rates in one prompt are refused
      there (an errored row; the transformers engine sets each video's own ``video_second_per_grid``). A video's
      temporal positions are ``t x 2 / fps x 13``, fractional for most frame rates: transformers keeps the
      fractions, vLLM cuts them to integers, so its positions are replaced (``vllm_qwen3_positions``, in the
      engine's process only; a video is refused where that cannot be done).
    """

    default_fps = 1.0  # Qwen3OmniMoeProcessor's
    positions_refusal = ("Qwen3-Omni video needs the model in the engine's process (tensor_parallel_size 1, "
                         "VLLM_ENABLE_V1_MULTIPROCESSING=0): vLLM cuts the model's fractional video positions to "
                         "integers unless they are replaced there (engines/vllm_qwen3_positions.py)")

    def audio_tokens(self, n_samples: int) -> int:
        return qwen3_audio_tokens(qwen3_audio_samples(n_samples) // QWEN3_HOP)

    def processor_audio(self, wave: np.ndarray) -> np.ndarray:
        silence = qwen3_audio_samples(len(wave)) - len(wave)
        return np.concatenate([wave, np.zeros(silence, dtype=wave.dtype)])

    def vllm_media_kwargs(self, videos: Sequence[DecodedMedia], soundtracks: Sequence[DecodedMedia]) -> dict | None:
        """One fps a request (refused where the videos differ), frames as sampled; where the videos carry their
        soundtracks, the interleaving must come out as in transformers (``check_soundtrack_order``)."""
        if not videos:
            return None
        fps = [float(item.fps or self.default_fps) for item in videos]
        if len(set(fps)) > 1:
            paths = ", ".join(sorted({item.path or "?" for item in videos}))
            raise ValueError(f"{self.name} on vLLM takes one frame rate a prompt: videos at {sorted(set(fps))} fps "
                             f"({paths}); the transformers engine gives each video its own")
        kwargs = {"fps": fps[0], "do_sample_frames": False}
        if soundtracks:
            for video, audio in zip(videos, soundtracks, strict=True):
                self.check_soundtrack_order(video, audio, fps[0])
            kwargs["use_audio_in_video"] = True
        return kwargs

    def check_soundtrack_order(self, video: DecodedMedia, audio: DecodedMedia, fps: float) -> None:
        """Refuse a video whose frames and soundtrack would be interleaved differently by the two engines. Frame
        pair ``t`` goes after the audio tokens before time ``t x spg x 13`` (``spg = 2 / fps`` s a frame pair):
        transformers' processor computes ``spg`` in double precision, vLLM reads it back from a float32 tensor;
        where one product lands on a whole number and the other does not, the ids differ."""
        spg = TEMPORAL_PATCH / fps
        pairs = np.arange(math.ceil(len(video.data) / TEMPORAL_PATCH))
        n_audio = self.audio_tokens(len(audio.data))
        before = [np.minimum(n_audio, np.ceil(pairs * s * QWEN3_POSITIONS_PER_SECOND))
                  for s in (spg, float(np.float32(spg)))]
        if not np.array_equal(*before):
            raise ValueError(f"{self.name} on vLLM: the frames of {video.path or 'a video'} at {fps} fps fall on "
                             "audio token boundaries that vLLM rounds differently from transformers (their "
                             "interleaving would differ)")

    def vllm_positions_needed(self, shown: Sequence[PromptPart], use_audio_in_video: bool) -> bool:
        return any(part.kind == "media" and part.modality == "video" for part in shown)

    def install_vllm_positions(self) -> bool:
        from omnieval.engines import vllm_qwen3_positions

        return vllm_qwen3_positions.install()


OMNI = register_family(OmniFamily(name="qwen2.5-omni", model_types=("qwen2_5_omni", "qwen2_5_omni_thinker"),
                                  modalities=OMNI_MODALITIES,
                                  model_class="Qwen2_5OmniThinkerForConditionalGeneration"))
QWEN3_OMNI = register_family(Qwen3OmniFamily(name="qwen3-omni", model_types=("qwen3_omni_moe",),
                                              modalities=OMNI_MODALITIES,
                                              model_class="Qwen3OmniMoeThinkerForConditionalGeneration"))

register_recipe(qwen_omni_recipe("qwen2.5-omni", 14, QWEN25_OMNI_CARD, Sourced(QWEN25_OMNI_SYSTEM, QWEN25_OMNI_CARD)))
register_recipe(qwen_omni_recipe("qwen3-omni", QWEN3_OMNI_PATCH, QWEN3_OMNI_CARD, Sourced(None, QWEN3_OMNI_CARD)))


# -- placeholder counts: the tests' reference, worked out from the published preprocessing rules and the media
# sizes alone, never by the adapter's or the processor's code (tests/family_placeholders.py binds them to the
# tiny builds of omnieval/dev) --


def qwen3_omni_audio_tokens(n_samples: int) -> int:
    """Qwen3-Omni's audio placeholders for a decoded waveform of ``n_samples`` (16 kHz): the waveform is followed by
    silence up to a whole number of 160-sample hops, at least 41 samples of it (``families.Qwen3OmniFamily``), one
    mel frame a hop; the audio tower gives 13 tokens per full 100 frames and the rest through three stride-2
    convolutions (ceil halvings)."""
    frames = math.ceil((n_samples + 41) / 160)
    rest = frames % 100
    for _ in range(3):
        rest = math.ceil(rest / 2)
    return 13 * (frames // 100) + rest


def qwen3_omni_vision_tokens(item) -> int:
    """Qwen3-Omni's placeholders for an image or video: 16-pixel patches merged 2 x 2 (resize factor 32), frame pairs
    for a video; images within 3136..12845056 pixels (the released preprocessor config), video frames within 128..768
    merged patches (the processor's defaults)."""
    from omnieval.engines.families.qwen_vl import qwen_vl_grid  # here: importing qwen_vl registers its families

    if item.modality == "image":
        gh, gw = qwen_vl_grid(*item.data.shape[:2], 3136, 12_845_056, factor=32)
        return gh * gw // 4
    gh, gw = qwen_vl_grid(*item.data.shape[1:3], 128 * 32 * 32, 768 * 32 * 32, factor=32)
    return math.ceil(item.data.shape[0] / 2) * gh * gw // 4
