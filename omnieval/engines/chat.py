"""Prompt assembly and label read-out shared by the transformers and vLLM engines (pure functions over a
tokenizer), so both engines put exactly the same tokens in front of a model and read the same positions.

What differs by family (a video's own soundtrack laid out with it, ``omni_layout``; the omni families' vLLM
fields, ``OmniFamily.vllm_media_fields``; the check that the ids carry every audio, ``check_audio_tokens``) is the
family adapter's (``engines/families/``): the names below stay importable from here.
"""

from __future__ import annotations

from collections.abc import Sequence

from omnieval.core.prompts import TEXT_ONLY_NOTE, UNSUPPORTED_NOTE, PromptPart
from omnieval.engines.families import (
    FAMILIES,
    expected_audio_tokens,  # noqa: F401 (Qwen2.5-Omni's count, still named here)
)
from omnieval.engines.families import accepted_modalities as family_modalities
from omnieval.engines.families.base import soundtrack_pairs  # noqa: F401 (named here before the families held it)
from omnieval.engines.families.qwen_omni import (  # noqa: F401 (named here before the families held them)
    OmniLayout,
    check_audio_tokens,
    omni_layout,
    omni_media_items,
)
from omnieval.engines.omni_inputs import OMNI_MODALITIES


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
