"""Qwen2.5-Omni (``OmniFamily``) and Qwen3-Omni (``Qwen3OmniFamily``): their adapters, registrations and recipes.

They go through their own processor on the transformers engine too, with what the other families lack: several
prompts a forward pass (``omni_inputs.collate``) and a video's own soundtrack interleaved with it
(``use_audio_in_video``). On vLLM they are rendered with the tokenizer's template (vLLM runs the processor
itself, ``vllm_request``: ``vllm_media_fields`` with the adapter's ``vllm_media_kwargs``), and vLLM's positions
are replaced by transformers' where they differ (``vllm_positions`` for Qwen2.5-Omni's soundtrack blocks,
``vllm_qwen3_positions`` for Qwen3-Omni's fractional video times). The engines ask the adapter through its hooks
(``FamilyAdapter``: ``prompt_parts``, ``hf_encode``, ``hf_batch``, ``check_audio_ids``, ``vllm_request``), never
whether it is omni.

A video's own soundtrack (``omni_layout``): where a video part is next to an audio part of the same file, an omni
model gets them as its processor expects a video with sound: one video placeholder and ``use_audio_in_video=True``,
which expands it to the video's frames and the audio interleaved by time (2 s chunks in Qwen2.5-Omni, token by
token in Qwen3-Omni), with time-aligned positions. Only where every video of the request has its soundtrack beside
it and no other audio is shown: the flag is per request in transformers and vLLM, and both pair soundtracks with
videos by their order alone, so any other mix stays separate media (each video and audio its own placeholder),
which is always correct.

The recipes are the reference utilities' (``qwen-omni-utils``: ``recipes.qwen_omni_recipe``), with the sizes and
system prompts their model cards pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from omnieval.core.prompts import PromptPart
from omnieval.engines.families.base import AudioFamily, register_family, soundtrack_pairs
from omnieval.engines.omni_inputs import DEFAULT_VIDEO_FPS, OMNI_MODALITIES, TEMPORAL_PATCH, Encoded, collate
from omnieval.engines.recipes import (
    QWEN3_OMNI_CARD,
    QWEN3_OMNI_PATCH,
    QWEN25_OMNI_CARD,
    QWEN25_OMNI_SYSTEM,
    Sourced,
    qwen_omni_recipe,
    register_recipe,
)
from omnieval.engines.shown import MediaDropped
from omnieval.media.decoded import AUDIO_SAMPLE_RATE, DecodedMedia


@dataclass(frozen=True)
class OmniLayout:
    """How an omni request's parts go to the model: ``parts`` as placed in the prompt (a soundtrack's audio part
    left out when ``use_audio_in_video``: its video carries it), and the soundtrack of each video among them."""

    parts: tuple[PromptPart, ...]
    soundtracks: dict  # index of a video part in ``parts`` -> its audio part
    use_audio_in_video: bool


def omni_layout(parts: Sequence[PromptPart]) -> OmniLayout:
    """The parts of an omni request with each video's own soundtrack merged into it, where the whole request allows
    it (module doc); else the parts unchanged."""
    pairs = soundtrack_pairs(parts)
    videos = [i for i, p in enumerate(parts) if p.kind == "media" and p.modality == "video"]
    audios = [i for i, p in enumerate(parts) if p.kind == "media" and p.modality == "audio"]
    if not pairs or len(pairs) != len(videos) or len(pairs) != len(audios):
        return OmniLayout(tuple(parts), {}, False)
    audio_of = dict(pairs)
    dropped = set(audio_of.values())
    kept, soundtracks = [], {}
    for i, part in enumerate(parts):
        if i in dropped:
            continue
        if i in audio_of:
            soundtracks[len(kept)] = parts[audio_of[i]]
        kept.append(part)
    return OmniLayout(tuple(kept), soundtracks, True)


def check_audio_tokens(input_ids: Sequence[int], audio_token_id: int, audios: Sequence, expected: int) -> None:
    """Refuse a request whose final input ids do not carry the audio it was given: as many audio placeholder tokens
    as its waveforms make (``expected``), naming the files. A soundtrack or audio part dropped on the way (a
    template without audio placeholders, a processor that ignored ``use_audio_in_video``) would otherwise score
    the model as if it had heard the audio (``MediaDropped``: the row's ``error_kind`` is ``media``)."""
    if not audios:
        return
    found = sum(1 for t in input_ids if t == audio_token_id)
    if found != expected:
        files = ", ".join(sorted({getattr(a, "path", "") or "?" for a in audios}))
        raise MediaDropped(f"audio not in the model input: {found} audio tokens where {expected} were expected for "
                         f"{files}")


def omni_media_items(parts: Sequence[PromptPart], media: dict) -> list:
    """The decoded media of a request's omni parts (video, audio, image), in prompt order; a part whose media was
    not decoded is an error naming its path."""
    items = []
    for part in parts:
        if part.kind != "media" or part.modality not in OMNI_MODALITIES:
            continue
        if part.ref not in media:
            raise ValueError(f"media not decoded for this request: {part.ref}")
        items.append(media[part.ref])
    return items




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
        """Audio placeholder tokens a waveform of ``n_samples`` becomes: all of it heard (``WHOLE_AUDIO``,
        ``expected_audio_tokens``)."""
        return expected_audio_tokens(n_samples, max_samples=None)

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
        (one per video, same order) when they carry their own soundtracks (``vllm_media_fields``)."""
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
        """The tokenizer's chat template: the vLLM engine renders omni prompts with it (``vllm_request``, over the
        same typed parts), so both engines give the model the same text."""
        return processor.tokenizer.apply_chat_template(self.messages(parts), tokenize=False,
                                                       add_generation_prompt=True)

    def prompt_parts(self, parts: Sequence[PromptPart]) -> Sequence[PromptPart]:
        """Each video with its own soundtrack merged into it, where the request allows it (``omni_layout``)."""
        return omni_layout(parts).parts

    # -- transformers: the processor on the whole request, several prompts a forward pass -------------------------
    batched_forward = True

    def hf_encode(self, processor, text: str, parts: Sequence[PromptPart], media: dict) -> tuple[Encoded, list]:
        """The request's ``Encoded`` (``hf_encoded``) and the media given to the processor: those shown in prompt
        order, then each video's soundtrack (the order the processor consumes audio); refused where the ids do not
        carry all of its audio (``check_audio_ids``)."""
        layout = omni_layout(parts)
        items = self.media_items([*layout.parts, *layout.soundtracks.values()], media)
        enc = self.hf_encoded(processor, text, items, layout.use_audio_in_video)
        self.check_audio_ids(processor.tokenizer, enc.input_ids, [item for item in items if item.modality == "audio"])
        return enc, items

    def hf_batch(self, net, batch: Sequence[Encoded], pad_id: int, device, dtype) -> dict:
        """Several prompts left-padded into one pass (``omni_inputs.collate``: the thinker computes its own 3-D
        positions), with ``use_audio_in_video`` (one flag a pass in transformers) where the batch's videos carry
        their soundtracks: the engine batches such requests apart."""
        out = collate(batch, pad_id, device, dtype)
        flags = {e.use_audio_in_video for e in batch}
        if len(flags) > 1:
            raise ValueError("one forward pass cannot mix videos with and without their soundtracks")
        if flags == {True}:
            out["use_audio_in_video"] = True
        return out

    def check_audio_ids(self, tokenizer, input_ids: Sequence[int], audios: Sequence[DecodedMedia]) -> None:
        """As many audio placeholders in the ids as the waveforms make (``audio_tokens``; ``check_audio_tokens``)."""
        if not audios:
            return
        audio_id = tokenizer.convert_tokens_to_ids(getattr(tokenizer, "audio_token", None) or "<|AUDIO|>")
        check_audio_tokens(input_ids, audio_id, audios, sum(self.audio_tokens(len(a.data)) for a in audios))

    # -- vLLM: the tokenizer's template, the arrays and the family's kwargs (vLLM runs the processor) --------------
    def vllm_processor(self, folder):
        """None: vLLM runs the omni processor itself, and the prompt is the tokenizer's template."""
        return None

    def vllm_request(self, processor, parts: Sequence[PromptPart], media: dict, suffix: str = "",
                     positions_replaced: bool = False) -> tuple[dict, list[DecodedMedia], list[DecodedMedia]]:
        """The prompt rendered by the tokenizer's template (``processor``: the engine's tokenizer) with the media
        fields (``vllm_media_fields``); refused where vLLM's positions would differ from the model's and are not
        replaced in this process (``positions_refusal``). The audio checked afterwards: the request's audio parts
        (a video's soundtrack among them)."""
        layout = omni_layout(parts)
        if self.vllm_positions_needed(layout.parts, layout.use_audio_in_video) and not positions_replaced:
            raise ValueError(self.positions_refusal)
        text = processor.apply_chat_template(self.messages(layout.parts), tokenize=False, add_generation_prompt=True)
        prompt: dict = {"prompt": text + suffix}
        prompt["multi_modal_data"], prompt["multi_modal_uuids"], kwargs = self.vllm_media_fields(parts, media)
        if kwargs:
            prompt["mm_processor_kwargs"] = kwargs
        audios = [media.get(p.ref) for p in parts if p.kind == "media" and p.modality == "audio"]
        return prompt, omni_media_items(parts, media), audios

    def vllm_media_fields(self, parts: Sequence[PromptPart], media: dict) -> tuple[dict, dict, dict | None]:
        """The media of a request as vLLM takes them: ``(multi_modal_data, multi_modal_uuids,
        mm_processor_kwargs)``, in prompt order; one item of a modality stays bare, several become a list; audio is
        ``(waveform, rate)``, the waveform as the processor is given it (``processor_audio``); uuids are the
        decode-cache content hashes (vLLM's prefix and encoder caches key on them). ``parts`` are the request's own
        parts: a video's soundtrack (``omni_layout``) goes in as the audio item paired with it;
        ``mm_processor_kwargs`` are the family's (``vllm_media_kwargs``).

        Qwen2.5-Omni's: ``use_audio_in_video: True`` and ``second_per_grid_ts`` with a soundtrack (vLLM lays out
        the interleaved tokens with it, 1.0 when absent, while the processor's positions use ``temporal_patch_size
        / fps``: passed so both agree). ``fps``: transformers' ``Qwen2_5OmniProcessor`` (5.x) takes one float per
        request, not one per video, so a request gets the common fps of its videos or, where clips were sampled at
        different rates, their mean: the temporal positions of such videos are then approximate on vLLM, exact on
        the ``hf`` engine (which passes one ``second_per_grid`` per video). Always a float, so rows of one batch
        carry fields of one shape."""
        layout = omni_layout(parts)
        data: dict[str, list] = {}
        uuids: dict[str, list] = {}
        shown = [p for p in layout.parts if p.kind == "media" and p.modality in OMNI_MODALITIES]
        ordered = omni_media_items([*shown, *layout.soundtracks.values()], media)
        for item in ordered:
            value = ((self.processor_audio(item.data), item.sample_rate or AUDIO_SAMPLE_RATE)
                     if item.modality == "audio" else item.data)
            data.setdefault(item.modality, []).append(value)
            uuids.setdefault(item.modality, []).append(item.content_hash or None)
        videos = [item for item in ordered if item.modality == "video"]
        kwargs = self.vllm_media_kwargs(videos, ordered[len(shown):] if layout.use_audio_in_video else [])
        return {k: v[0] if len(v) == 1 else v for k, v in data.items()}, uuids, kwargs

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
        if "audio" in kwargs:  # the whole clip (``WHOLE_AUDIO``), not Whisper's first 30 s
            kwargs["truncation"] = False
        out = processor(text=[text], return_tensors="pt", use_audio_in_video=use_audio_in_video, **kwargs)
        tensors = {k: v for k, v in out.items() if k not in ("input_ids", "attention_mask")}
        if mixed:
            patch = processor.video_processor.temporal_patch_size
            tensors["video_second_per_grid"] = torch.tensor([patch / f for f in fps])
        return Encoded(out["input_ids"][0].tolist(), tensors, use_audio_in_video)


#: Why the omni families hear a clip whole, however long (the processor is called with ``truncation=False``):
#: the reference utilities read the file's sound whole (``process_audio_info``), vLLM calls the processor without
#: truncation, and the audio towers read log-mel features of any length in windows; transformers' Whisper feature
#: extractor alone would keep the first 30 s of Qwen2.5-Omni's audio, and the two engines would then differ.
WHOLE_AUDIO = "the whole clip heard: process_audio_info reads it whole; vLLM's processing does not truncate"


def expected_audio_tokens(n_samples: int, hop_length: int = 160, max_samples: int | None = 480_000) -> int:
    """Audio placeholder tokens a waveform of ``n_samples`` becomes in Qwen2.5-Omni: its Whisper log-mel frames
    (one per ``hop_length`` samples, the waveform cut at ``max_samples``: Whisper's 30 s, or None for the whole
    clip as the engines give it, ``WHOLE_AUDIO``) through the audio tower's two stride-2 stages."""
    mel = math.ceil((n_samples if max_samples is None else min(n_samples, max_samples)) / hop_length)
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
