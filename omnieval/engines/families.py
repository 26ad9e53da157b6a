"""Model families that take media through their own processor: an open registry of adapters, one per family.

An adapter says, for the ``model_type`` values of a family's ``config.json``, which modalities the model takes, which
transformers class holds it, and how the decoded media of a request go into the model's own ``AutoProcessor``
(transformers engine) and into vLLM's ``multi_modal_data`` (vLLM engine, which runs the same processor itself):

* the prompt is the processor's chat template applied to one user message whose content parts follow the request's
  ``PromptPart`` order: ``{"type": "text"}`` for text, ``{"type": "video" | "audio" | "image"}`` for each media part
  the model takes (the template writes the family's placeholder), and a one-line text note for a part it cannot
  take (``[pointcloud omitted: this model does not take pointcloud]``);
* ``hf_inputs``: the processor called on that prompt and the decoded arrays (frames, waveforms, images) in prompt
  order, plus the family's processor kwargs (video fps through ``video_metadata``, the audio sampling rate);
* ``vllm_fields``: ``multi_modal_data`` with the same arrays, ``multi_modal_uuids`` (the decode-cache content
  hashes, so vLLM's encoder and prefix caches hit across the conditions of an item) and ``mm_processor_kwargs``.

``accepted_modalities(model_type)`` is what a run can ask before it loads anything.

How to add a family (one adapter)::

    register_family(FamilyAdapter(
        name="my-vlm", model_types=("my_vlm",), modalities=("image",),
        model_class="MyVlmForConditionalGeneration"))

then, if its processor needs more than the arrays (a sampling rate, frame metadata), subclass ``FamilyAdapter`` and
override ``media_kwargs`` / ``vllm_item``. Add a tiny build to ``omnieval/dev/tiny_models.py`` and a test that the
two engines agree (tests/test_vllm_families.py).

Qwen3-VL and Qwen3.5 (``TimestampedVideoFamily``) write each frame pair's time into the prompt: the adapter gives
the decoded frames' own times as frame metadata, the same on both engines. VideoLLaMA3 (transformers engine only) is
given the same metadata and writes each frame's time (``Time 0.1s:``) before the frame's placeholders.

Audio-and-text families: Audio Flamingo 3 and Music Flamingo (``OneAudioFamily``) take one audio a prompt on both
engines (their processor pairs each audio with a prompt of its own; a prompt with several is an errored row), Granite
Speech (``GraniteSpeechFamily``) several on transformers and one on vLLM, and its transformers logits divided by the
decoder's ``logits_scaling`` as vLLM does. Voxtral (``VoxtralFamily``) has no chat template: Mistral's tokenizer lays
out its prompts, as token ids on vLLM (``vllm_prompt``).

Qwen2.5-Omni (``OmniFamily``) and Qwen3-Omni (``Qwen3OmniFamily``) go through their own processor on the
transformers engine too, with what the other families lack: several prompts a forward pass
(``omni_inputs.collate``) and a video's own soundtrack interleaved with it (``use_audio_in_video``). The vLLM engine
keeps its own omni path (``chat.omni_media_fields``, with the adapter's ``vllm_media_kwargs``), and replaces vLLM's
positions by transformers' where they differ (``vllm_positions`` for Qwen2.5-Omni's soundtrack blocks,
``vllm_qwen3_positions`` for Qwen3-Omni's fractional video times).

Phi-4-multimodal (``Phi4MultimodalFamily``, transformers engine only) has its released modality adapters installed on
the loaded model and one chosen for each prompt (``prepare_hf_model``, ``hf_model_inputs``; ``engines/lora.py``).

Gemma 4 and its encoder-free variant Gemma 4 Unified (``Gemma4Family``) give the transformers model its image and
video features already encoded (``hf_model_inputs``), as transformers' own ``generate`` does: its forward cannot
encode video frames by itself.

Nemotron-H omni (``NemotronOmniFamily``, transformers engine only) takes one video a prompt (its processor lays out
all the frames of a prompt as one clip), and is given its video features encoded (``hf_model_inputs``): its forward
fails on the one tensor its own video encoder returns.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from omnieval.core.prompts import UNSUPPORTED_NOTE, PromptPart
from omnieval.engines.omni_inputs import DEFAULT_VIDEO_FPS, OMNI_MODALITIES, TEMPORAL_PATCH, Encoded
from omnieval.media.decoded import AUDIO_SAMPLE_RATE, DecodedMedia

PROCESSOR_ARGS = {"image": "images", "video": "videos", "audio": "audio"}  # modality -> processor argument


@dataclass(frozen=True)
class FamilyAdapter:
    """One model family: see the module doc. ``processor_kwargs`` go to every processor call (both engines);
    ``packages`` are the Python packages its model code imports beyond transformers (checked before loading);
    ``refusals`` maps an engine that does not carry the family (``vllm``) to the one-line reason, given on the
    driver before any model work (``refusal``). ``placeholder_tokens``: modality -> the token its features fill in
    the input ids, where that is not the processor's own ``<modality>_token`` (``shown.placeholder_ids``)."""

    name: str
    model_types: tuple[str, ...]
    modalities: tuple[str, ...]
    model_class: str
    processor_kwargs: dict = field(default_factory=dict)
    packages: tuple[str, ...] = ()
    refusals: dict[str, str] = field(default_factory=dict)
    placeholder_tokens: dict[str, str] = field(default_factory=dict)

    def refusal(self, engine: str) -> str | None:
        """Why ``engine`` does not carry this family (one line naming the family), or None where it does."""
        reason = self.refusals.get(engine)
        return f"{engine} engine does not carry {self.name} models: {reason}" if reason else None

    # -- prompt ---------------------------------------------------------------------------------------------------
    def messages(self, parts: Sequence[PromptPart]) -> list[dict]:
        """One user message with typed content parts in prompt order (a note for media the model cannot take)."""
        content = []
        for part in parts:
            if part.kind == "text":
                content.append({"type": "text", "text": part.text or ""})
            elif part.modality in self.modalities:
                content.append({"type": part.modality})
            else:
                content.append({"type": "text", "text": UNSUPPORTED_NOTE.format(modality=part.modality) + "\n"})
        return [{"role": "user", "content": content}]

    def prompt(self, processor, parts: Sequence[PromptPart]) -> str:
        return processor.apply_chat_template(self.messages(parts), tokenize=False, add_generation_prompt=True)

    def logit_scale(self, config) -> float:
        """What the transformers engine multiplies the model class's logits by to get the decoder's own (1: they
        are its own)."""
        return 1.0

    def media_items(self, parts: Sequence[PromptPart], media: dict) -> list[DecodedMedia]:
        """The decoded media the model takes, in prompt order; a part whose media is missing or was decoded as
        another modality is an error naming its path."""
        items = []
        for part in parts:
            if part.kind != "media" or part.modality not in self.modalities:
                continue
            if part.ref not in media:  # keyed by ``part.ref``: a video file's soundtrack is ``<path>#audio``
                raise ValueError(f"media not decoded for this request: {part.ref}")
            item = media[part.ref]
            if item.modality != part.modality:
                raise ValueError(f"media {part.ref!r} decoded as {item.modality}, prompt expects {part.modality}")
            items.append(item)
        return items

    # -- transformers -------------------------------------------------------------------------------------------
    def media_kwargs(self, items: Sequence[DecodedMedia]) -> dict:
        """Processor arguments for the media of one prompt (``images``, ``videos``, ``audio`` lists in order). The
        images are one nested list, the processors' form for the images of one text: a flat list reads as one
        image per prompt, which LLaVA-OneVision's processor and model treat differently from several images in
        one prompt (they tile a lone image and give each of several its base tile only)."""
        out: dict[str, list] = {}
        for item in items:
            out.setdefault(PROCESSOR_ARGS[item.modality], []).append(item.data)
        if "images" in out:
            out["images"] = [out["images"]]
        return out

    def hf_inputs(self, processor, text: str, items: Sequence[DecodedMedia]):
        """The processor's output (a ``BatchFeature`` of tensors, batch of one) for a rendered prompt."""
        return processor(text=[text], return_tensors="pt", **self.media_kwargs(items), **self.processor_kwargs)

    def prepare_hf_model(self, net, folder) -> None:
        """What the loaded transformers model (on its device) needs beyond the weights ``from_pretrained`` reads:
        nothing."""

    def hf_model_inputs(self, net, inputs: dict) -> dict:
        """The keyword arguments of the model's forward (and ``generate``) for one prompt's processor tensors: the
        tensors as they are."""
        return inputs

    # -- vLLM ---------------------------------------------------------------------------------------------------
    def vllm_item(self, item: DecodedMedia):
        """One media item as vLLM's ``multi_modal_data`` takes it."""
        return item.data

    def vllm_fields(self, items: Sequence[DecodedMedia]) -> tuple[dict, dict, dict | None]:
        """``(multi_modal_data, multi_modal_uuids, mm_processor_kwargs)``: one item of a modality stays bare,
        several become a list; uuids are the content hashes."""
        data: dict[str, list] = {}
        uuids: dict[str, list] = {}
        for item in items:
            data.setdefault(item.modality, []).append(self.vllm_item(item))
            uuids.setdefault(item.modality, []).append(item.content_hash or None)
        return ({k: v[0] if len(v) == 1 else v for k, v in data.items()}, uuids,
                dict(self.processor_kwargs) or None)

    def vllm_prompt(self, processor, parts: Sequence[PromptPart], items: Sequence[DecodedMedia],
                    suffix: str = "") -> dict:
        """The vLLM prompt of one request (``suffix`` after the rendered prompt): the chat template's text, and the
        media fields where it shows media (vLLM runs the family's processor on them)."""
        prompt: dict = {"prompt": self.prompt(processor, parts) + suffix}
        data, uuids, kwargs = self.vllm_fields(items)
        if data:
            prompt["multi_modal_data"], prompt["multi_modal_uuids"] = data, uuids
        if kwargs:
            prompt["mm_processor_kwargs"] = kwargs
        return prompt


class AudioFamily(FamilyAdapter):
    """Waveforms at the feature extractor's rate: ``audio`` arrays plus ``sampling_rate`` (transformers), ``(wave,
    rate)`` pairs (vLLM)."""

    def media_kwargs(self, items: Sequence[DecodedMedia]) -> dict:
        rates = {item.sample_rate or AUDIO_SAMPLE_RATE for item in items if item.modality == "audio"}
        if len(rates) > 1:
            raise ValueError(f"audio of one prompt at different rates: {sorted(rates)}")
        out = super().media_kwargs(items)
        return {**out, "sampling_rate": rates.pop()} if rates else out

    def vllm_item(self, item: DecodedMedia):
        return (item.data, item.sample_rate or AUDIO_SAMPLE_RATE) if item.modality == "audio" else item.data


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


def video_metadata(item: DecodedMedia) -> dict:
    """What a Qwen-style video processor needs to know about already-sampled frames: their rate (the temporal
    position of each frame pair) and that it must not sample again."""
    n = int(item.data.shape[0])
    fps = float(item.fps or DEFAULT_VIDEO_FPS)
    return {"fps": fps, "duration": n / fps, "total_num_frames": n, "frames_indices": list(range(n))}


class QwenVisionFamily(FamilyAdapter):
    """Qwen2-VL-style video: the decoded frames go in as they are (``do_sample_frames`` off) with their sampled fps,
    so both engines give every video the same ``second_per_grid`` (one value per video, exact on both)."""

    def video_metadata(self, item: DecodedMedia) -> dict:
        return video_metadata(item)

    def media_kwargs(self, items: Sequence[DecodedMedia]) -> dict:
        out = super().media_kwargs(items)
        videos = [self.video_metadata(i) for i in items if i.modality == "video"]
        return {**out, "video_metadata": videos, "do_sample_frames": False} if videos else out

    def vllm_item(self, item: DecodedMedia):
        if item.modality != "video":
            return item.data
        return item.data, {**self.video_metadata(item), "do_sample_frames": False}


class TimestampedVideoFamily(QwenVisionFamily):
    """Qwen3-VL and Qwen3.5: the processor writes each frame pair's time into the prompt (``<1.6 seconds>``), the
    mean of its two frames' times, a frame's time being its index over the fps of the metadata; the positions do
    not depend on time. Both engines compute the same text from the same metadata (vLLM tokenizes each time apart,
    transformers in the prompt, between special tokens either way: the same ids). VideoLLaMA3's processor writes
    each frame's own time (``Time 0.1s:``, one frame a temporal patch) from the same metadata.

    The decoder takes frame ``i`` of ``n`` at the centre of its bin, ``(i + 0.5) x duration / n``
    (``media.decode.sample_times``), not at ``i / fps``: the metadata says so exactly with integer indices, as the
    odd frames ``2i + 1`` of a clip at twice the sampled rate, so the times in the prompt are the frames' own.
    Frames taken by ``linspace`` indices (``index_rule``) carry those indices and the clip's rate
    (``decode_video``'s meta), which the metadata gives as they are, as the reference utilities do."""

    def video_metadata(self, item: DecodedMedia) -> dict:
        if "frame_indices" in item.meta:
            return {"fps": float(item.meta["source_fps"]), "duration": item.meta["duration"],
                    "total_num_frames": item.meta["source_frames"], "frames_indices": list(item.meta["frame_indices"])}
        n = int(item.data.shape[0])
        fps = float(item.fps or DEFAULT_VIDEO_FPS)
        return {"fps": 2 * fps, "duration": n / fps, "total_num_frames": 2 * n,
                "frames_indices": [2 * i + 1 for i in range(n)]}


class Gemma4Family(AudioFamily):
    """Gemma 4: images, waveforms at the feature extractor's rate (``AudioFamily``) and videos whose decoded frames
    go in as they are (``do_sample_frames`` off) with their sampled fps, from which both engines write each frame's
    ``mm:ss`` time into the prompt.

    transformers' forward (5.19) encodes a prompt's video frames without the frame count of each video, which its
    video encoder requires, and fails; its ``generate`` encodes the media first with everything the encoders take.
    ``hf_model_inputs`` does the same for the forward: the image and video features from the model's own
    ``get_image_features`` / ``get_video_features``, passed as ``mm_encoder_outputs``."""

    def media_kwargs(self, items: Sequence[DecodedMedia]) -> dict:
        out = super().media_kwargs(items)
        videos = [video_metadata(i) for i in items if i.modality == "video"]
        return {**out, "video_metadata": videos, "do_sample_frames": False} if videos else out

    def vllm_item(self, item: DecodedMedia):
        if item.modality != "video":
            return super().vllm_item(item)
        return item.data, {**video_metadata(item), "do_sample_frames": False}

    def hf_model_inputs(self, net, inputs: dict) -> dict:
        if "pixel_values_videos" not in inputs:
            return inputs
        out = dict(inputs)
        model = net.model
        encoded = {"video": model.get_video_features(out.pop("pixel_values_videos"), out.pop("video_position_ids"),
                                                     out.pop("num_frames_per_video"), return_dict=True)}
        if "pixel_values" in out:
            encoded["image"] = model.get_image_features(out.pop("pixel_values"), out.pop("image_position_ids"),
                                                        return_dict=True)
        return {**out, "mm_encoder_outputs": encoded}


class NemotronOmniFamily(AudioFamily):
    """Nemotron-H omni (transformers engine only): images, waveforms at the feature extractor's rate
    (``AudioFamily``), and one video a prompt whose decoded frames go in as they are with their own times.

    * Its processor lays out the frames of every video of a call as one clip (the placeholders of the first
      ``<video>`` only), and its model scatters image and video features onto the same ``<image>`` tokens, so a
      prompt with several videos, or with a video and an image, is refused here in one line (an errored row).
    * Each pair of frames is labelled with its frames' times, ``frame index x int(1000 / fps) / 1000`` s from the
      metadata: the frames' own times as for Qwen3-VL (``TimestampedVideoFamily``: twice the sampled rate, odd
      indices), cut to whole milliseconds by the processor's rule.
    * transformers' forward (5.19) concatenates the video features as if they were a list of tensors and fails on
      the one tensor its ``get_video_features`` returns; ``hf_model_inputs`` encodes the frames with that method and
      passes its temporal patches' features one by one (``mm_encoder_outputs``), in the same order."""

    def media_kwargs(self, items: Sequence[DecodedMedia]) -> dict:
        videos = [item for item in items if item.modality == "video"]
        images = sum(item.modality == "image" for item in items)
        if len(videos) > 1 or (videos and images):
            raise ValueError(f"{self.name} takes one video a prompt and no image beside it ({len(videos)} videos, "
                             f"{images} images given): its processor lays out the frames of all the videos of a "
                             "prompt as one clip")
        out = super().media_kwargs(items)
        if not videos:
            return out
        from transformers.video_utils import VideoMetadata

        n = int(videos[0].data.shape[0])
        fps = float(videos[0].fps or DEFAULT_VIDEO_FPS)
        metadata = VideoMetadata(total_num_frames=2 * n, fps=2 * fps, duration=n / fps,
                                 frames_indices=[2 * i + 1 for i in range(n)])
        return {**out, "video_metadata": metadata, "do_sample_frames": False}

    def hf_model_inputs(self, net, inputs: dict) -> dict:
        if "pixel_values_videos" not in inputs:
            return inputs
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        out = dict(inputs)
        features = net.get_video_features(out.pop("pixel_values_videos"), return_dict=True).pooler_output
        return {**out, "mm_encoder_outputs": {"video": BaseModelOutputWithPooling(pooler_output=tuple(features))}}


class Phi4MultimodalFamily(AudioFamily):
    """Phi-4-multimodal in the transformers-native layout (``Phi4MultimodalForCausalLM``): images and waveforms at
    the feature extractor's rate. The release adds to the text decoder one low-rank adapter per input modality,
    shipped beside the weights (``vision-lora/``, ``speech-lora/``) and not read by ``from_pretrained``: they are
    installed on the loaded model (``engines/lora.py``) and chosen for each prompt as the model's reference code
    chooses them: the vision adapter for a prompt with an image (with or without audio), the speech adapter for
    audio alone, none for text alone. The prompt is the tokenizer's chat template (the processor keeps none)."""

    adapter_folders = {"vision": "vision-lora", "speech": "speech-lora"}

    def prompt(self, processor, parts: Sequence[PromptPart]) -> str:
        return processor.tokenizer.apply_chat_template(self.messages(parts), tokenize=False,
                                                       add_generation_prompt=True)

    def prepare_hf_model(self, net, folder) -> None:
        from omnieval.engines.lora import LoraAdapters

        found = {name: Path(folder) / sub for name, sub in self.adapter_folders.items()
                 if (Path(folder) / sub / "adapter_config.json").exists()}
        net.omnieval_lora = LoraAdapters(net, found) if found else None

    def hf_model_inputs(self, net, inputs: dict) -> dict:
        """Selects the prompt's adapter (class doc); a folder shipping none is taken as the whole model, one
        shipping some but not the one a prompt needs refuses that prompt."""
        adapters = getattr(net, "omnieval_lora", None)
        if adapters is not None:
            wanted = ("vision" if "image_pixel_values" in inputs
                      else "speech" if "audio_input_features" in inputs else None)
            if wanted is not None and wanted not in adapters.adapters:
                raise ValueError(f"{self.name}: the model folder has no {self.adapter_folders[wanted]}/ adapter, "
                                 f"which the model applies to this prompt")
            adapters.use(wanted)
        return inputs


class OneImageOnVllmFamily(FamilyAdapter):
    """LLaVA-OneVision: transformers gives each image of a prompt with several images its base tile only (plus a
    newline), one image alone its anyres tiles; vLLM 0.32 tiles every image. The two agree on one image a prompt,
    so the vLLM engine refuses a prompt with more (an errored row, not a silently different model)."""

    def vllm_fields(self, items: Sequence[DecodedMedia]) -> tuple[dict, dict, dict | None]:
        images = sum(item.modality == "image" for item in items)
        if images > 1:
            raise ValueError(f"{self.name} on vLLM takes one image a prompt ({images} given): vLLM tiles every image "
                             "where the model's reference code gives each of several images its base tile only")
        return super().vllm_fields(items)


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


FAMILIES: dict[str, FamilyAdapter] = {}


def register_family(adapter: FamilyAdapter) -> FamilyAdapter:
    """Add an adapter under each of its ``model_types`` (a later registration of a type replaces the earlier)."""
    for model_type in adapter.model_types:
        FAMILIES[model_type] = adapter
    return adapter


OMNI = register_family(OmniFamily(name="qwen2.5-omni", model_types=("qwen2_5_omni", "qwen2_5_omni_thinker"),
                                  modalities=OMNI_MODALITIES,
                                  model_class="Qwen2_5OmniThinkerForConditionalGeneration"))
QWEN3_OMNI = register_family(Qwen3OmniFamily(name="qwen3-omni", model_types=("qwen3_omni_moe",),
                                              modalities=OMNI_MODALITIES,
                                              model_class="Qwen3OmniMoeThinkerForConditionalGeneration"))
register_family(AudioFamily(name="qwen2-audio", model_types=("qwen2_audio",), modalities=("audio",),
                            model_class="Qwen2AudioForConditionalGeneration"))
register_family(QwenVisionFamily(name="qwen2.5-vl", model_types=("qwen2_5_vl",), modalities=("image", "video"),
                                 model_class="Qwen2_5_VLForConditionalGeneration"))
register_family(TimestampedVideoFamily(name="qwen3-vl", model_types=("qwen3_vl",), modalities=("image", "video"),
                                       model_class="Qwen3VLForConditionalGeneration"))
register_family(TimestampedVideoFamily(name="qwen3-vl-moe", model_types=("qwen3_vl_moe",),
                                       modalities=("image", "video"), model_class="Qwen3VLMoeForConditionalGeneration"))
# Measured on the tiny build (dev/tiny_qwen3_5.py): vLLM 0.32's CPU kernel for the Gated DeltaNet layers asserts
# bfloat16 inputs (and rejects heads of 32); in bfloat16 the option logprobs differ from transformers' float32 by up
# to 0.04, and from its bfloat16 by as much, so agreement with the reference code cannot be shown here.
QWEN3_5_VLLM_REFUSAL = ("vLLM 0.32's CPU build runs its Gated DeltaNet layers in bfloat16 only, where its option "
                        "logprobs differ from transformers' by up to 0.04: not shown to agree with the reference code")
register_family(TimestampedVideoFamily(name="qwen3.5", model_types=("qwen3_5",), modalities=("image", "video"),
                                       model_class="Qwen3_5ForConditionalGeneration",
                                       refusals={"vllm": QWEN3_5_VLLM_REFUSAL}))
register_family(OneImageOnVllmFamily(name="llava-onevision", model_types=("llava_onevision",),
                                     modalities=("image", "video"),
                                     model_class="LlavaOnevisionForConditionalGeneration"))
register_family(AudioFamily(name="gemma3n", model_types=("gemma3n",), modalities=("image", "audio"),
                            model_class="Gemma3nForConditionalGeneration", packages=("timm",)))
register_family(OneAudioFamily(name="audioflamingo3", model_types=("audioflamingo3",), modalities=("audio",),
                               model_class="AudioFlamingo3ForConditionalGeneration"))
register_family(OneAudioFamily(name="musicflamingo", model_types=("musicflamingo",), modalities=("audio",),
                               model_class="MusicFlamingoForConditionalGeneration",
                               refusals={"vllm": "vLLM removed MusicFlamingoForConditionalGeneration after 0.24.0 "
                                                 "(use the hf engine)"}))
register_family(GraniteSpeechFamily(name="granite-speech", model_types=("granite_speech",), modalities=("audio",),
                                    model_class="GraniteSpeechForConditionalGeneration", packages=("torchaudio",)))
register_family(VoxtralFamily(name="voxtral", model_types=("voxtral",), modalities=("audio",),
                              model_class="VoxtralForConditionalGeneration",
                              packages=("mistral_common", "soundfile")))
register_family(Gemma4Family(name="gemma4", model_types=("gemma4",), modalities=("image", "audio", "video"),
                             model_class="Gemma4ForConditionalGeneration"))
register_family(Gemma4Family(name="gemma4-unified", model_types=("gemma4_unified",),
                             modalities=("image", "audio", "video"),
                             model_class="Gemma4UnifiedForConditionalGeneration"))
register_family(Phi4MultimodalFamily(
    name="phi4-multimodal", model_types=("phi4_multimodal",), modalities=("image", "audio"),
    model_class="Phi4MultimodalForCausalLM",
    refusals={"vllm": "vLLM 0.32 lists Phi4MultimodalForCausalLM among its previously supported models (removed "
                      "after 0.12.0) and runs only the remote-code Phi4MMForCausalLM layout"}))
register_family(FamilyAdapter(name="internvl", model_types=("internvl",), modalities=("image", "video"),
                              model_class="InternVLForConditionalGeneration",
                              placeholder_tokens={"video": "<IMG_CONTEXT>"}))  # each frame a tile of image tokens
register_family(TimestampedVideoFamily(
    name="videollama3", model_types=("video_llama_3",), modalities=("image", "video"),
    model_class="VideoLlama3ForConditionalGeneration",
    refusals={"vllm": "vLLM 0.32 has no VideoLLaMA3 model (no VideoLlama3ForConditionalGeneration in its registry)"}))
register_family(NemotronOmniFamily(
    name="nemotron-h-omni", model_types=("nemotron_h_omni",), modalities=("image", "audio", "video"),
    model_class="NemotronH_Omni_Reasoning_V3", packages=("librosa",), placeholder_tokens={"video": "<image>"},
    refusals={"vllm": "vLLM 0.32 maps NemotronH_Omni_Reasoning_V3 to NemotronH_Nano_VL_V2, whose processor reads "
                      "the remote-code config and fails on the transformers-native one (no attribute 'patch_size')"}))

def model_type(folder) -> str | None:
    return json.loads((Path(folder) / "config.json").read_text()).get("model_type")


def family_for(folder) -> FamilyAdapter | None:
    """The adapter of a model folder's family, or None (a text model)."""
    return FAMILIES.get(model_type(folder) or "")


def accepted_modalities(model_type_name: str) -> tuple[str, ...] | None:
    """The media modalities a registered family takes, or None where ``model_type_name`` has no adapter."""
    adapter = FAMILIES.get(model_type_name)
    return adapter.modalities if adapter else None


def load_processor(folder):
    """The model's own ``AutoProcessor``; a processor that cannot be built for want of a package is a one-line
    error naming it (Qwen-VL video processors import torchvision), and so is a family whose model code needs a
    package that is not installed (Gemma 3n's vision tower: timm)."""
    import importlib.util

    from transformers import AutoProcessor

    adapter = family_for(folder)
    for package in adapter.packages if adapter else ():
        if importlib.util.find_spec(package) is None:
            raise RuntimeError(f"{folder}: a {adapter.name} model needs the {package!r} package, which is not "
                               f"installed (pip install {package})")

    try:
        return AutoProcessor.from_pretrained(folder)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or str(exc)
        raise RuntimeError(f"{folder}: the model's processor cannot be built: missing package {missing!r} "
                           f"({type(exc).__name__}: {exc})") from None
