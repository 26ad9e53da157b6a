"""Prompt assembly and label read-out shared by the transformers and vLLM engines (pure functions over a
tokenizer), so both engines put exactly the same tokens in front of a model and read the same positions.

A video's own soundtrack (``omni_layout``): where a video part is next to an audio part of the same file, an omni
model (Qwen2.5-Omni, Qwen3-Omni) gets them as its processor expects a video with sound: one video placeholder and
``use_audio_in_video=True``, which expands it to the video's frames and the audio interleaved by time (2 s chunks in
Qwen2.5-Omni, token by token in Qwen3-Omni), with time-aligned positions. Only where
every video of the request has its soundtrack beside it and no other audio is shown: the flag is per request in
transformers and vLLM, and both pair soundtracks with videos by their order alone, so any other mix stays separate
media (each video and audio its own placeholder), which is always correct.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from omnieval.core.prompts import TEXT_ONLY_NOTE, UNSUPPORTED_NOTE, PromptPart
from omnieval.engines.families import (
    FAMILIES,
    OMNI,
    OmniFamily,
    expected_audio_tokens,  # noqa: F401 (Qwen2.5-Omni's count, still named here)
    family_for,
)
from omnieval.engines.families import accepted_modalities as family_modalities
from omnieval.engines.omni_inputs import OMNI_MODALITIES
from omnieval.engines.shown import MediaDropped


def is_omni_model(folder) -> bool:
    """Whether a model folder holds an omni model (Qwen2.5-Omni, Qwen3-Omni: an ``OmniFamily`` adapter), from its
    ``config.json``."""
    return isinstance(family_for(folder), OmniFamily)


def folder_modalities(kind: str, path) -> frozenset[str]:
    """What a model folder takes as media on the ``hf`` and ``vllm`` engines, from its ``config.json`` alone:
    what its adapter says for a registered family (``families.FAMILIES``: Qwen2.5-Omni video, audio and image,
    Qwen2-Audio audio, Qwen2.5-VL and Qwen3-VL image and video, ...), nothing for any other model. A folder whose
    ``config.json`` cannot be read, or whose family the engine does not carry (``FamilyAdapter.refusals``), is an
    ``OptionError`` on ``path``."""
    import json
    from pathlib import Path

    from omnieval.engines.base import OptionError

    try:
        model_type = json.loads((Path(path) / "config.json").read_text()).get("model_type")
    except (OSError, TypeError, ValueError) as exc:
        raise OptionError("path", f"{kind} engine: cannot read config.json of the model folder {path} to tell "
                                  f"which media the model takes ({exc})") from None
    adapter = FAMILIES.get(model_type or "")
    refusal = adapter.refusal(kind) if adapter else None
    if refusal:
        raise OptionError("path", f"{refusal} (model folder {path})")
    return frozenset(family_modalities(model_type or "") or ())


@dataclass(frozen=True)
class OmniLayout:
    """How an omni request's parts go to the model: ``parts`` as placed in the prompt (a soundtrack's audio part
    left out when ``use_audio_in_video``: its video carries it), and the soundtrack of each video among them."""

    parts: tuple[PromptPart, ...]
    soundtracks: dict  # index of a video part in ``parts`` -> its audio part
    use_audio_in_video: bool


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


def omni_layout(parts: Sequence[PromptPart]) -> OmniLayout:
    """The parts of an omni request with each video's own soundtrack merged into it, where the whole request allows
    it (module docstring); else the parts unchanged."""
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


def chat_prompt(tokenizer, parts: Sequence[PromptPart], omni: bool) -> str:
    """The chat-formatted prompt: media parts as placeholders (omni models) or one-line text notes (text models)."""
    content = []
    for part in parts:
        if part.kind == "text":
            content.append({"type": "text", "text": part.text or ""})
        elif omni and part.modality in OMNI_MODALITIES:
            content.append({"type": part.modality})
        else:
            note = TEXT_ONLY_NOTE if not omni else UNSUPPORTED_NOTE
            content.append({"type": "text", "text": note.format(modality=part.modality) + "\n"})
    if not tokenizer.chat_template:
        return "".join(c.get("text", "") for c in content) + "\n"
    return tokenizer.apply_chat_template([{"role": "user", "content": content}], tokenize=False,
                                         add_generation_prompt=True)


def label_token_ids(tokenizer, labels: Sequence[str], prefix: str = "") -> list[int]:
    """One token id per option label; a label that is not a single token is an error (its logit is undefined)."""
    ids = []
    for label in labels:
        enc = tokenizer.encode(prefix + label, add_special_tokens=False)
        if len(enc) != 1:
            raise ValueError(f"option label {prefix + label!r} is not a single token for this tokenizer")
        ids.append(enc[0])
    return ids


def cot_answer_position(tokenizer, generated: str, labels: Sequence[str]) -> tuple[str, list[int]]:
    """Where CoT confidence is read: the reasoning up to and including its last ``Answer:`` (or the whole reasoning
    plus ``\\nAnswer:``), and the label tokens expected there (`` A``.., else ``A``.. after ``Answer: ``)."""
    cut = generated.rfind("Answer:")
    reasoning = generated[:cut + len("Answer:")] if cut >= 0 else generated.rstrip() + "\nAnswer:"
    try:
        return reasoning, label_token_ids(tokenizer, labels, prefix=" ")
    except ValueError:  # tokenizers without " A" tokens: read the bare letter after "Answer: "
        return reasoning + " ", label_token_ids(tokenizer, labels)


MEDIA_TOKEN_KEYS = frozenset({"image_token_id", "video_token_id", "audio_token_id", "image_token_index",
                              "video_token_index", "audio_token_index"})
"""``config.json`` fields (at any depth) naming a token that stands for media in a prompt."""
SPEECH_OUTPUT_CONFIGS = ("talker", "token2wav", "code2wav")
"""Sub-configs of an omni model's speech generator: their ids belong to another vocabulary than the text's."""


def media_token_ids(folder, tokenizer, processor=None) -> list[int]:
    """The token ids that stand for media in a prompt (the placeholders a processor expands), which generation must
    never emit. Fed back as a generated token, a placeholder without its media breaks the next step: transformers'
    Phi-4-multimodal looks for the image it stands for and fails, others count placeholders against the media's
    features. Read from the folder's ``config.json`` (``MEDIA_TOKEN_KEYS`` in every sub-config but the speech
    generator's) and the processor's ``image_token`` / ``video_token`` / ``audio_token``; both engines read the same
    folder, so both keep the same ids out of a generation. End-of-text and padding are never among them."""
    import json
    from pathlib import Path

    found: set[int] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in MEDIA_TOKEN_KEYS and isinstance(value, int) and not isinstance(value, bool):
                    found.add(value)
                elif not any(name in key for name in SPEECH_OUTPUT_CONFIGS):
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    try:
        walk(json.loads((Path(folder) / "config.json").read_text()))
    except (OSError, ValueError):
        pass
    for attr in ("image_token", "video_token", "audio_token"):
        token = getattr(processor, attr, None) if processor is not None else None
        if isinstance(token, str) and token:
            try:
                value = tokenizer.convert_tokens_to_ids(token)
            except Exception:  # a tokenizer without the token table (Mistral's): the config's ids stand
                continue
            if isinstance(value, int) and value != getattr(tokenizer, "unk_token_id", None):
                found.add(value)
    never = {getattr(tokenizer, "eos_token_id", None), getattr(tokenizer, "pad_token_id", None)}
    try:
        size = len(tokenizer)
    except TypeError:
        size = None
    return sorted(t for t in found if t >= 0 and t not in never and (size is None or t < size))


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


def omni_media_fields(parts: Sequence[PromptPart], media: dict,
                      family: OmniFamily = OMNI) -> tuple[dict, dict, dict | None]:
    """The media of an omni request as vLLM takes them: ``(multi_modal_data, multi_modal_uuids,
    mm_processor_kwargs)``, in prompt order; one item of a modality stays bare, several become a list; audio is
    ``(waveform, rate)``, the waveform as the family's processor is given it (``family.processor_audio``); uuids are
    the decode-cache content hashes (vLLM's prefix and encoder caches key on them). ``parts`` are the request's own
    parts: a video's soundtrack (``omni_layout``) goes in as the audio item paired with it; ``mm_processor_kwargs``
    are the family's (``family.vllm_media_kwargs``).

    Qwen2.5-Omni's (``OmniFamily``): ``use_audio_in_video: True`` and ``second_per_grid_ts`` with a soundtrack (vLLM
    lays out the interleaved tokens with it, 1.0 when absent, while the processor's positions use
    ``temporal_patch_size / fps``: passed so both agree). ``fps``: transformers' ``Qwen2_5OmniProcessor`` (5.x)
    takes one float per request, not one per video, so a request gets the common fps of its videos (the decoder
    samples every clip with the same frame count, so clips of one length share it) or, where clips differ in
    length, their mean: the temporal positions of such videos are then approximate on vLLM, exact on the ``hf``
    engine (which passes one ``second_per_grid`` per video). Always a float, so rows of one batch carry fields of
    one shape."""
    layout = omni_layout(parts)
    data: dict[str, list] = {}
    uuids: dict[str, list] = {}
    shown = [p for p in layout.parts if p.kind == "media" and p.modality in OMNI_MODALITIES]
    ordered = omni_media_items([*shown, *layout.soundtracks.values()], media)
    for item in ordered:
        value = ((family.processor_audio(item.data), item.sample_rate or 16000) if item.modality == "audio"
                 else item.data)
        data.setdefault(item.modality, []).append(value)
        uuids.setdefault(item.modality, []).append(item.content_hash or None)
    videos = [item for item in ordered if item.modality == "video"]
    kwargs = family.vllm_media_kwargs(videos, ordered[len(shown):] if layout.use_audio_in_video else [])
    return {k: v[0] if len(v) == 1 else v for k, v in data.items()}, uuids, kwargs
