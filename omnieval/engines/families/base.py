"""The adapter every family module builds on (``FamilyAdapter``, ``AudioFamily``, ``video_metadata``) and the
registry they fill (``FAMILIES``, ``register_family``), with what a run asks of it before it loads anything
(``model_type``, ``family_for``, ``accepted_modalities``, ``load_processor``). The package doc says how a request's
media go through an adapter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omnieval.core.prompts import UNSUPPORTED_NOTE, PromptPart
from omnieval.engines.omni_inputs import DEFAULT_VIDEO_FPS
from omnieval.media.decoded import AUDIO_SAMPLE_RATE, DecodedMedia

PROCESSOR_ARGS = {"image": "images", "video": "videos", "audio": "audio"}  # modality -> processor argument


@dataclass(frozen=True)
class FamilyAdapter:
    """One model family: see the module doc. ``processor_kwargs`` go to every processor call (both engines);
    ``packages`` are the Python packages its model code imports beyond transformers (checked before loading);
    ``refusals`` maps an engine that does not carry the family (``vllm``) to the one-line reason, given on the
    driver before any model work (``refusal``). ``placeholder_tokens``: modality -> the token its features fill in
    the input ids, where that is not the processor's own ``<modality>_token`` (``shown.placeholder_ids``);
    ``vllm_placeholder_tokens``: the same where vLLM's own processor expands a modality onto another token, as
    candidates in order (the first the tokenizer knows is the one)."""

    name: str
    model_types: tuple[str, ...]
    modalities: tuple[str, ...]
    model_class: str
    processor_kwargs: dict = field(default_factory=dict)
    packages: tuple[str, ...] = ()
    refusals: dict[str, str] = field(default_factory=dict)
    placeholder_tokens: dict[str, str] = field(default_factory=dict)
    vllm_placeholder_tokens: dict[str, tuple[str, ...]] = field(default_factory=dict)

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

    def prompt_parts(self, parts: Sequence[PromptPart]) -> Sequence[PromptPart]:
        """The parts as the prompt places them: as given (a family that takes a video with its own soundtrack
        merges the two, ``OmniFamily``)."""
        return parts

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

    def hf_encode(self, processor, text: str, parts: Sequence[PromptPart], media: dict) -> tuple:
        """``(inputs, items)`` of one rendered prompt on the transformers engine: the processor's output
        (``hf_inputs``) and the decoded media given to it, in prompt order."""
        items = self.media_items(parts, media)
        return self.hf_inputs(processor, text, items), items

    #: Whether the transformers engine may put several prompts in one forward pass (``hf_batch``); a family's
    #: processor tensors are laid out for one prompt, so one prompt a pass unless a family says otherwise.
    batched_forward = False

    def hf_batch(self, net, batch: Sequence, pad_id: int, device, dtype) -> dict:
        """The model's keyword arguments for a forward pass over ``batch`` (encoded prompts): one prompt, its
        processor tensors moved to the model's device (floating point ones in its dtype), as ``hf_model_inputs``
        gives them."""
        if len(batch) != 1:
            raise ValueError(f"{self.name} models take one prompt per forward pass")
        return self.hf_model_inputs(net, {
            k: (v.to(device, dtype) if v.is_floating_point() else v.to(device))
            for k, v in batch[0].items() if hasattr(v, "to")})

    def check_audio_ids(self, tokenizer, input_ids: Sequence[int], audios: Sequence[DecodedMedia]) -> None:
        """Refuse ids that do not carry every audio the prompt was given, where the family knows how many
        placeholders a waveform makes (the omni families); others are checked by ``shown.check_media_tokens``
        alone."""

    # -- vLLM ---------------------------------------------------------------------------------------------------
    def vllm_processor(self, folder):
        """The processor the vLLM engine renders the family's prompts with (the model's own)."""
        return load_processor(folder)

    #: The one-line reason a request is refused where vLLM's positions would differ from the model's and cannot be
    #: replaced in this process (``vllm_positions_needed``).
    positions_refusal = ""

    def install_vllm_positions(self) -> bool:
        """Replace vLLM's positions by the model's in this process; whether they are (none to replace here)."""
        return False

    def vllm_positions_needed(self, shown: Sequence[PromptPart], use_audio_in_video: bool) -> bool:
        """Whether vLLM's positions for a request differ from the model's reference code unless replaced: never
        here (the model's own vLLM implementation computes them)."""
        return False

    def vllm_request(self, processor, parts: Sequence[PromptPart], media: dict, suffix: str = "",
                     positions_replaced: bool = False) -> tuple[dict, list[DecodedMedia], list[DecodedMedia]]:
        """``(prompt, items, audios)`` of one vLLM request: the prompt (``vllm_prompt``), the decoded media it
        shows (what its row says it was shown) and the audio whose placeholders ``check_audio_ids`` checks in
        the ids vLLM returns (none here)."""
        items = self.media_items(parts, media)
        return self.vllm_prompt(processor, parts, items, suffix), items, []

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


def soundtrack_pairs(parts: Sequence[PromptPart]) -> list[tuple[int, int]]:
    """(video index, audio index) of each video part next to an audio part of the same file (either order)."""
    pairs, i = [], 0
    while i + 1 < len(parts):
        a, b = parts[i], parts[i + 1]
        if (a.kind == b.kind == "media" and a.path and a.path == b.path
                and {a.modality, b.modality} == {"video", "audio"}):
            pairs.append((i, i + 1) if a.modality == "video" else (i + 1, i))
            i += 2
        else:
            i += 1
    return pairs


def video_metadata(item: DecodedMedia) -> dict:
    """What a Qwen-style video processor needs to know about already-sampled frames: their rate (the temporal
    position of each frame pair) and that it must not sample again."""
    n = int(item.data.shape[0])
    fps = float(item.fps or DEFAULT_VIDEO_FPS)
    return {"fps": fps, "duration": n / fps, "total_num_frames": n, "frames_indices": list(range(n))}


FAMILIES: dict[str, FamilyAdapter] = {}


def register_family(adapter: FamilyAdapter) -> FamilyAdapter:
    """Add an adapter under each of its ``model_types`` (a later registration of a type replaces the earlier)."""
    for model_type in adapter.model_types:
        FAMILIES[model_type] = adapter
    return adapter


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
