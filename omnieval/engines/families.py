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

Qwen2.5-Omni (``OmniFamily``) goes through its own processor on the transformers engine too, with what the other
families lack: several prompts a forward pass (``omni_inputs.collate``) and a video's own soundtrack interleaved with
it (``use_audio_in_video``). The vLLM engine keeps its own omni path (``chat.omni_media_fields``,
``vllm_positions``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omnieval.core.prompts import UNSUPPORTED_NOTE, PromptPart
from omnieval.engines.omni_inputs import DEFAULT_VIDEO_FPS, OMNI_MODALITIES, Encoded
from omnieval.media.decoded import AUDIO_SAMPLE_RATE, DecodedMedia

PROCESSOR_ARGS = {"image": "images", "video": "videos", "audio": "audio"}  # modality -> processor argument


@dataclass(frozen=True)
class FamilyAdapter:
    """One model family: see the module doc. ``processor_kwargs`` go to every processor call (both engines);
    ``packages`` are the Python packages its model code imports beyond transformers (checked before loading)."""

    name: str
    model_types: tuple[str, ...]
    modalities: tuple[str, ...]
    model_class: str
    processor_kwargs: dict = field(default_factory=dict)
    packages: tuple[str, ...] = ()

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


def video_metadata(item: DecodedMedia) -> dict:
    """What a Qwen-style video processor needs to know about already-sampled frames: their rate (the temporal
    position of each frame pair) and that it must not sample again."""
    n = int(item.data.shape[0])
    fps = float(item.fps or DEFAULT_VIDEO_FPS)
    return {"fps": fps, "duration": n / fps, "total_num_frames": n, "frames_indices": list(range(n))}


class QwenVisionFamily(FamilyAdapter):
    """Qwen2-VL-style video: the decoded frames go in as they are (``do_sample_frames`` off) with their sampled fps,
    so both engines give every video the same ``second_per_grid`` (one value per video, exact on both)."""

    def media_kwargs(self, items: Sequence[DecodedMedia]) -> dict:
        out = super().media_kwargs(items)
        videos = [video_metadata(i) for i in items if i.modality == "video"]
        return {**out, "video_metadata": videos, "do_sample_frames": False} if videos else out

    def vllm_item(self, item: DecodedMedia):
        if item.modality != "video":
            return item.data
        return item.data, {**video_metadata(item), "do_sample_frames": False}


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
    rates are refused rather than laid out with one of them."""

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

        fps = [float(item.fps or DEFAULT_VIDEO_FPS) for item in items if item.modality == "video"]
        kwargs = self.media_kwargs(items)
        if fps:  # the frames are sampled already: the processor must not sample again
            kwargs.update(fps=fps[0], do_sample_frames=False)
        mixed = len(set(fps)) > 1
        if mixed and use_audio_in_video:
            paths = ", ".join(sorted({item.path or "?" for item in items if item.modality == "video"}))
            raise ValueError(f"videos with their own soundtracks at different frame rates in one prompt ({paths}: "
                             f"{sorted(set(fps))} fps): Qwen2_5OmniProcessor interleaves them with one fps")
        out = processor(text=[text], return_tensors="pt", use_audio_in_video=use_audio_in_video, **kwargs)
        tensors = {k: v for k, v in out.items() if k not in ("input_ids", "attention_mask")}
        if mixed:
            patch = processor.video_processor.temporal_patch_size
            tensors["video_second_per_grid"] = torch.tensor([patch / f for f in fps])
        return Encoded(out["input_ids"][0].tolist(), tensors, use_audio_in_video)


FAMILIES: dict[str, FamilyAdapter] = {}


def register_family(adapter: FamilyAdapter) -> FamilyAdapter:
    """Add an adapter under each of its ``model_types`` (a later registration of a type replaces the earlier)."""
    for model_type in adapter.model_types:
        FAMILIES[model_type] = adapter
    return adapter


OMNI = register_family(OmniFamily(name="qwen2.5-omni", model_types=("qwen2_5_omni", "qwen2_5_omni_thinker"),
                                  modalities=OMNI_MODALITIES,
                                  model_class="Qwen2_5OmniThinkerForConditionalGeneration"))
register_family(AudioFamily(name="qwen2-audio", model_types=("qwen2_audio",), modalities=("audio",),
                            model_class="Qwen2AudioForConditionalGeneration"))
register_family(QwenVisionFamily(name="qwen2.5-vl", model_types=("qwen2_5_vl",), modalities=("image", "video"),
                                 model_class="Qwen2_5_VLForConditionalGeneration"))
register_family(OneImageOnVllmFamily(name="llava-onevision", model_types=("llava_onevision",),
                                     modalities=("image", "video"),
                                     model_class="LlavaOnevisionForConditionalGeneration"))
register_family(AudioFamily(name="gemma3n", model_types=("gemma3n",), modalities=("image", "audio"),
                            model_class="Gemma3nForConditionalGeneration", packages=("timm",)))
register_family(FamilyAdapter(name="internvl", model_types=("internvl",), modalities=("image", "video"),
                              model_class="InternVLForConditionalGeneration"))


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
