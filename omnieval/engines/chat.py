"""Prompt assembly and label read-out shared by the transformers and vLLM engines (pure functions over a
tokenizer), so both engines put exactly the same tokens in front of a model and read the same positions."""

from __future__ import annotations

from collections.abc import Sequence

from omnieval.engines.omni_inputs import OMNI_MODALITIES
from omnieval.prompts import PromptPart

OMNI_MODEL_TYPES = ("qwen2_5_omni", "qwen2_5_omni_thinker")  # full-model folder, or a thinker-only save
TEXT_ONLY_NOTE = "[{modality} omitted: this model takes text only]"
UNSUPPORTED_NOTE = "[{modality} omitted: this model does not take {modality}]"


def is_omni_model(folder) -> bool:
    """Whether a model folder holds an omni (Qwen2.5-Omni family) model, from its ``config.json``."""
    import json
    from pathlib import Path

    return json.loads((Path(folder) / "config.json").read_text()).get("model_type") in OMNI_MODEL_TYPES


def folder_modalities(kind: str, path) -> frozenset[str]:
    """What a model folder takes as media on the ``hf`` and ``vllm`` engines, from its ``config.json`` alone:
    video, audio and image for the Qwen2.5-Omni family, nothing for any other model (its media parts become
    text notes). A folder whose ``config.json`` cannot be read is an ``OptionError`` on ``path``."""
    import json
    from pathlib import Path

    from omnieval.engines.base import OptionError

    try:
        model_type = json.loads((Path(path) / "config.json").read_text()).get("model_type")
    except (OSError, TypeError, ValueError) as exc:
        raise OptionError("path", f"{kind} engine: cannot read config.json of the model folder {path} to tell "
                                  f"which media the model takes ({exc})") from None
    return frozenset(OMNI_MODALITIES) if model_type in OMNI_MODEL_TYPES else frozenset()


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


def omni_media_items(parts: Sequence[PromptPart], media: dict) -> list:
    """The decoded media of a request's omni parts (video, audio, image), in prompt order; a part whose media was
    not decoded is an error naming its path."""
    items = []
    for part in parts:
        if part.kind != "media" or part.modality not in OMNI_MODALITIES:
            continue
        if part.path not in media:
            raise ValueError(f"media not decoded for this request: {part.path}")
        items.append(media[part.path])
    return items


def omni_media_fields(parts: Sequence[PromptPart], media: dict) -> tuple[dict, dict, dict | None]:
    """The media of an omni request as vLLM takes them: ``(multi_modal_data, multi_modal_uuids,
    mm_processor_kwargs)``, in prompt order; one item of a modality stays bare, several become a list; audio is
    ``(waveform, rate)``; uuids are the decode-cache content hashes (vLLM's prefix and encoder caches key on them).

    ``fps``: transformers' ``Qwen2_5OmniProcessor`` (5.x) takes one float per request, not one per video, so a
    request gets the common fps of its videos (the decoder samples every clip with the same frame count, so clips of
    one length share it) or, where clips differ in length, their mean: the temporal positions of such videos are
    then approximate on vLLM, exact on the ``hf`` engine (which passes one ``second_per_grid`` per video). Always a
    float, so rows of one batch carry fields of one shape."""
    data: dict[str, list] = {}
    uuids: dict[str, list] = {}
    fps: list[float] = []
    for item in omni_media_items(parts, media):
        value = (item.data, item.sample_rate or 16000) if item.modality == "audio" else item.data
        data.setdefault(item.modality, []).append(value)
        uuids.setdefault(item.modality, []).append(item.content_hash or None)
        if item.modality == "video":
            fps.append(float(item.fps or 2.0))
    kwargs = {"fps": fps[0] if len(set(fps)) == 1 else sum(fps) / len(fps)} if fps else None
    return {k: v[0] if len(v) == 1 else v for k, v in data.items()}, uuids, kwargs
